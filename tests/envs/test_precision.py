"""The model core's two precisions (``EnvConfig.precision``, :data:`envs.model.PRECISIONS`).

``"reference"`` (the default) keeps the numbers of every earlier release bit for bit;
``"fast"`` stops the fixed point's Newton iterations at :data:`envs.model.FAST_SOLVER_TOL`.
The fast path's documented tolerance (:data:`envs.model.FAST_RTOL`, 1e-4):

- one step, from the same state and action: every float of the outputs and of the
  new state within ``max(1e-4 * |x|, 1e-6)`` of the reference's ``x``
  (:data:`envs.model.FAST_RTOL`, :data:`envs.model.FAST_ATOL`), on the trace cases of
  ``benchmarks/trace_diff.py`` (the states of a reference trajectory, replayed) and on
  random actions (hypothesis);
- a trajectory where no discontinuous mechanism fires (spr-a1000's four tenants):
  every metric of every step within 1e-4;
- a trajectory of a scenario that reclaims to watermarks (cxl-spill,
  tiering-fairness, kv-store): the means of throughput, normalised performance and
  latency over the batch and the run within :data:`envs.model.FAST_MEAN_RTOL` (1e-3;
  measured up to 1.1e-4). Its per-step numbers are not within 1e-4: reclaim stops at
  a watermark, and a difference of 1e-6 on either side of one moves later demotions
  (the reference itself, solved to 1e-10 instead of 1e-8, parts the same way);
- batch == single, bit for bit, on the fast path as on the reference.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import envs.model
from envs import Action, compile_params, core, init_state, load_scenario
from envs.config import EnvConfig
from envs.core import make_params
from envs.model import (
    FAST_ATOL,
    FAST_MEAN_RTOL,
    FAST_RTOL,
    FAST_SOLVER_TOL,
    PRECISIONS,
    solver_tolerance,
    step,
)
from envs.solver import LANES, TOL, WIDE_LANES

ROOT = Path(__file__).resolve().parents[2]
BENCH = yaml.safe_load((ROOT / "benchmarks" / "bench-4-tenants.yaml").read_text())
#: the solver's own bookkeeping: compared apart (the residual is at most each path's tolerance)
SOLVER_FIELDS = ("solver_residual", "solver_iterations", "solver_converged")
#: numbers below this are compared on this scale: ``gap <= FAST_RTOL`` is then
#: ``|x - y| <= max(FAST_RTOL * |x|, FAST_ATOL)``
FLOOR = FAST_ATOL / FAST_RTOL


def gap(a: Any, b: Any) -> float:
    """The largest relative difference of two arrays, numbers below FLOOR taken at FLOOR."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.size == 0:
        return 0.0
    d = np.abs(x - y)
    m = np.maximum(np.maximum(np.abs(x), np.abs(y)), FLOOR)
    return float(np.where(d == 0, 0.0, d / m).max())


def worst(one: Any, other: Any, skip: tuple[str, ...] = SOLVER_FIELDS) -> tuple[float, str]:
    """The largest :func:`gap` over the float fields of two records, and its field."""
    out = (0.0, "")
    for f in dataclasses.fields(one):
        a = getattr(one, f.name)
        if f.name in skip or not isinstance(a, np.ndarray) or a.dtype.kind != "f":
            continue
        out = max(out, (gap(a, getattr(other, f.name)), f.name))
    return out


def actions(p: Any, b: int, steps: int, seed: int) -> list[Action]:
    """trace_diff's random actions: a third of the steps with all-zero weights in half the
    batch, promotion off in a fifth of the elements."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(steps):
        w = rng.integers(0, 8, (b, p.n_tenants, p.n_nodes)).astype(float)
        if i % 3 == 0:
            w[: b // 2] = 0.0
        out.append(Action(w, rng.uniform(0, 2000, b) * (rng.uniform(size=b) > 0.2)))
    return out


def test_precisions_and_the_default() -> None:
    """The default is the reference; the setting is checked with a one-line error."""
    assert PRECISIONS == ("reference", "fast")
    assert EnvConfig().precision == "reference"
    assert solver_tolerance("reference") == TOL == 1e-8
    assert solver_tolerance("fast") == FAST_SOLVER_TOL
    assert FAST_SOLVER_TOL < FAST_RTOL
    with pytest.raises(ValueError, match=r"precision: got 'quick', expected one of"):
        EnvConfig(precision="quick")
    with pytest.raises(ValueError, match=r"precision: got 'f32', expected one of"):
        solver_tolerance("f32")
    assert make_params("mixed", pool_size=2).precision == "reference"
    fast = make_params("mixed", pool_size=2, precision="fast", reward_baseline="colloid")
    assert fast.precision == "fast" and fast.twin is not None and fast.twin.precision == "fast"


CASES = [
    ("spr", 16),
    ("cxl-spill", 8),
    ("fallback-hotspot", 8),
    ("tiering-fairness", 8),
    ("kv-store", 8),
    ("mlc-bandwidth", 8),
]


@pytest.mark.parametrize(("name", "b"), CASES)
def test_one_step_within_tolerance_on_the_trace_cases(name: str, b: int) -> None:
    """From each state of a reference trajectory (trace_diff's case), the fast step's
    outputs and new state are within FAST_RTOL of the reference step's, and its residual
    within its own tolerance; it takes fewer Newton iterations over the run."""
    p = compile_params(load_scenario(BENCH if name == "spr" else name), batch_size=b, jitter=0.05)
    s = init_state(p, np.arange(b) + 7)
    iters = {"reference": 0, "fast": 0}
    for a in actions(p, b, 25, 0):
        s_ref, o_ref = step(p, s, a)
        s_fast, o_fast = step(p, s, a, precision="fast")
        for ref, fast in ((o_ref, o_fast), (s_ref, s_fast)):
            g, field = worst(ref, fast)
            assert g <= FAST_RTOL, (name, field, g)
        assert (o_fast.solver_residual <= FAST_SOLVER_TOL).all()
        assert o_fast.solver_converged.all() and o_ref.solver_converged.all()
        iters["reference"] += int(o_ref.solver_iterations.sum())
        iters["fast"] += int(o_fast.solver_iterations.sum())
        s = s_ref
    assert iters["fast"] < iters["reference"], iters


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**31 - 1),
    scenario=st.sampled_from(["spr", "cxl-spill", "colocation-protected"]),
    zero=st.booleans(),
)
def test_one_step_within_tolerance_on_random_actions(seed: int, scenario: str, zero: bool) -> None:
    """Fuzzing: random weights (optionally all zero), random promotion rates up to the
    scale's top, random seeds: each step of the fast path within FAST_RTOL of the
    reference's from the same state."""
    b = 6
    p = compile_params(
        load_scenario(BENCH if scenario == "spr" else scenario), batch_size=b, jitter=0.1
    )
    rng = np.random.default_rng(seed)
    s = init_state(p, rng.integers(0, 2**31, b))
    for _ in range(8):
        w = rng.integers(0, 16, (b, p.n_tenants, p.n_nodes)).astype(float)
        if zero:
            w[rng.uniform(size=b) < 0.5] = 0.0
        a = Action(w, rng.uniform(0, 65536.0, b) * (rng.uniform(size=b) > 0.3))
        s_ref, o_ref = step(p, s, a)
        s_fast, o_fast = step(p, s, a, precision="fast")
        for ref, fast in ((o_ref, o_fast), (s_ref, s_fast)):
            g, field = worst(ref, fast)
            assert g <= FAST_RTOL, (scenario, seed, field, g)
        s = s_ref


def run(spec: Any, b: int, steps: int, precision: str) -> list[Any]:
    """The outputs of a trajectory (trace_diff's case) at ``precision``."""
    p = compile_params(load_scenario(spec), batch_size=b, jitter=0.05)
    s = init_state(p, np.arange(b) + 7)
    outs = []
    for a in actions(p, b, steps, 0):
        s, o = step(p, s, a, precision=precision)
        outs.append(o)
    return outs


def test_a_continuous_trajectory_stays_within_tolerance_every_step() -> None:
    """spr-a1000's four tenants (no reclaim to a watermark): every metric of every one of
    60 steps within FAST_RTOL of the reference trajectory's."""
    ref, fast = run(BENCH, 16, 60, "reference"), run(BENCH, 16, 60, "fast")
    for k, (a, b) in enumerate(zip(ref, fast, strict=True)):
        g, field = worst(a, b)
        assert g <= FAST_RTOL, (k, field, g)


@pytest.mark.parametrize("name", ["cxl-spill", "tiering-fairness", "kv-store"])
def test_trajectory_means_within_tolerance(name: str) -> None:
    """Scenarios that reclaim to watermarks: the means of total throughput, tenant
    throughput, normalised performance and latency over 24 instances and 80 steps
    within FAST_MEAN_RTOL."""
    ref, fast = run(name, 24, 80, "reference"), run(name, 24, 80, "fast")

    def means(outs: list[Any]) -> list[float]:
        act = np.array([o.tenant_active for o in outs])
        return [
            float(np.mean([o.total_throughput_gbps for o in outs])),
            float(np.array([o.tenant_throughput_gbps for o in outs])[act].mean()),
            float(np.array([o.tenant_norm_perf for o in outs])[act].mean()),
            float(np.array([o.tenant_latency_ns for o in outs])[act].mean()),
        ]

    for r, f in zip(means(ref), means(fast), strict=True):
        assert abs(f - r) <= FAST_MEAN_RTOL * abs(r), (name, r, f)


def test_batch_equals_single_on_the_fast_path() -> None:
    """Every element of a batch stepped on the fast path gives, bit for bit, what it gives
    stepped alone (the solver's lanes follow their own elements)."""
    for name in ("cxl-spill", "tiering-fairness"):
        b = 5
        p = compile_params(load_scenario(name), batch_size=b, jitter=0.1)
        seeds = np.arange(b) + 40
        acts = actions(p, b, 15, 9)
        s = init_state(p, seeds)
        outs = []
        for a in acts:
            s, o = step(p, s, a, precision="fast")
            outs.append(o)
        for i in range(b):
            pi = p.subset([i])
            si = init_state(pi, seeds[i : i + 1])
            for k, a in enumerate(acts):
                si, oi = step(
                    pi,
                    si,
                    Action(a.weights[i : i + 1], a.promote_mbps[i : i + 1]),
                    precision="fast",
                )
                for f in dataclasses.fields(oi):
                    x, y = getattr(oi, f.name)[0], getattr(outs[k], f.name)[i]
                    assert np.array_equal(x, y, equal_nan=True), (name, i, k, f.name)


def test_one_environment_step_within_tolerance() -> None:
    """The environment core on ``mixed`` (rewards, observations, every metric), stepped
    from the same state on both paths, within the tolerance at each of 30 steps (the
    reference's state carried on; restarts included)."""
    ref = make_params("mixed", pool_size=16)
    fast = dataclasses.replace(ref, precision="fast")
    state, _ = core.reset(ref, np.arange(32))
    rng = np.random.default_rng(6)
    for _ in range(30):
        raw = rng.uniform(-1, 1, (32, ref.codec.size)).astype(np.float32)
        s_ref, obs_ref, r_ref, _, trunc, m_ref = core.step(ref, state, raw)
        _, obs_fast, r_fast, _, _, m_fast = core.step(fast, state, raw)
        assert gap(r_ref, r_fast) <= FAST_RTOL
        assert gap(obs_ref, obs_fast) <= FAST_RTOL
        g, field = worst(m_ref, m_fast)
        assert g <= FAST_RTOL, (field, g)
        state = s_ref
        if trunc.any():
            state, _ = core.reset_where(ref, state, trunc)


def test_the_solvers_lanes_change_no_number() -> None:
    """The fast path's wider blocks (WIDE_LANES) give every element the numbers the
    reference's width gives, at either tolerance; a bad width is a one-line error."""
    p = compile_params(load_scenario("cxl-spill"), batch_size=150, jitter=0.1)
    s = init_state(p, np.arange(150))
    for a in actions(p, 150, 6, 2):
        s, _ = step(p, s, a)
    problems: list[Any] = []
    orig = envs.model.solve_fixed_point

    def keep(*args: Any, **kw: Any) -> Any:
        problems.append((args, kw))
        return orig(*args, **kw)

    envs.model.solve_fixed_point = keep
    try:
        step(p, s, actions(p, 150, 1, 3)[0])
    finally:
        envs.model.solve_fixed_point = orig
    args, kw = problems[0]
    assert kw["lanes"] == LANES == 32 and WIDE_LANES == 64
    for tol in (TOL, FAST_SOLVER_TOL):
        got = [orig(*args, **{**kw, "tol": tol, "lanes": n}) for n in (LANES, WIDE_LANES, 7)]
        assert got[0].iterations.max() > got[0].iterations.min()  # lanes finish apart
        for other in got[1:]:
            for f in dataclasses.fields(other):
                x, y = getattr(got[0], f.name), getattr(other, f.name)
                assert np.array_equal(x, y, equal_nan=True), (tol, f.name)
    with pytest.raises(ValueError, match=r"lanes: got 0, expected an integer >= 1"):
        orig(*args, **{**kw, "lanes": 0})


def test_the_environments_pass_the_setting_to_the_model() -> None:
    """gym.make and the native vector env (paired twins included) step the model at the
    precision given: residuals above the reference's tolerance appear only on the fast
    path, and the rewards agree within FAST_RTOL on the first steps."""
    found = {}
    for precision in PRECISIONS:
        env = gym.make("tiergym/TieredMemory-v0", scenario="mixed", precision=precision)
        env.reset(seed=4)
        env.action_space.seed(4)
        res, rewards = [], []
        for _ in range(30):
            _, r, te, tr, info = env.step(env.action_space.sample())
            res.append(float(np.max(info["solver_residual"])))
            rewards.append(r)
            if te or tr:
                env.reset()
        env.close()
        found[precision] = (max(res), rewards)
    assert found["reference"][0] <= TOL < found["fast"][0] <= FAST_SOLVER_TOL
    assert gap(found["reference"][1][:3], found["fast"][1][:3]) <= FAST_RTOL
    venv = gym.make_vec(
        "tiergym/TieredMemory-v0",
        num_envs=4,
        vectorization_mode="vector_entry_point",
        scenario="mixed",
        reward_baseline="colloid",
        precision="fast",
    )
    venv.reset(seed=1)
    venv.action_space.seed(1)
    worst_res = 0.0
    for _ in range(10):
        *_, info = venv.step(venv.action_space.sample())
        worst_res = max(worst_res, float(np.max(info["solver_residual"])))
    venv.close()
    assert TOL < worst_res <= FAST_SOLVER_TOL
