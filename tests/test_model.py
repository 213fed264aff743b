"""The batched model: physical invariants, batching, determinism, the fixed point, bad actions."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envs import Action, KernelConfig, Simulator, compile_params, init_state, load_scenario, step
from envs.families import mixed_scenario
from envs.solver import TOL

OUT_FIELDS = None


def check_invariants(sim: Simulator, out: Any) -> None:
    """Every physical invariant of one interval's outputs."""
    p = sim.params
    for f in dataclasses.fields(out):
        v = np.asarray(getattr(out, f.name), dtype=float)
        assert np.isfinite(v).all(), f"{f.name} has NaN/inf"
    act = out.tenant_active
    # pages sum to the working set, for every active tenant; nothing for the others
    np.testing.assert_allclose(
        out.tenant_resident_gib, out.tenant_working_set_gib, rtol=1e-6, atol=1e-9
    )
    assert (out.tenant_resident_gib[~act] == 0).all(), "pages of inactive tenants"
    # no node holds more than its capacity
    over = out.node_capacity_used_gib - p.capacity_gib.T
    assert (over <= 1e-9 * p.capacity_gib.T).all(), f"capacity exceeded by {over.max()} GiB"
    # no node's bandwidth above its peak at its read/write mix; utilisation below 1
    assert (out.node_bandwidth_gbps <= out.node_peak_gbps * (1 + 1e-9)).all(), (
        "bandwidth above peak"
    )
    assert (out.node_utilization < 1.0).all() and (out.node_utilization >= 0).all(), "utilisation"

    # latency never below idle
    assert (out.node_latency_ns >= p.curves.idle_ns.T * (1 - 1e-12)).all(), (
        "node latency below idle"
    )
    min_idle = p.curves.idle_ns.min(0)[:, None]
    assert (
        out.tenant_latency_ns[act] >= np.broadcast_to(min_idle, act.shape)[act] * (1 - 1e-12)
    ).all(), "tenant latency"
    # throughput never above demand, never negative
    excess = out.tenant_throughput_gbps - out.tenant_demand_gbps * (1 + 1e-9)
    assert (excess <= 1e-12).all(), f"throughput above demand by {excess.max()}"
    assert (out.tenant_throughput_gbps >= 0).all(), "negative throughput"
    # shares are shares
    share = out.tenant_dram_access_share
    assert ((share >= -1e-12) & (share <= 1 + 1e-12)).all(), "DRAM access share outside 0..1"
    # the fixed point is solved
    assert (out.solver_residual <= TOL).all(), out.solver_residual.max()


tenant_st = st.fixed_dictionaries(
    {
        "threads": st.integers(1, 96),
        "mlp": st.floats(0.5, 16),
        "compute_ns": st.floats(0, 2000),
        "read_fraction": st.floats(0, 1),
        "working_set_gib": st.floats(0.1, 60),
        "hotness": st.one_of(
            st.builds(lambda s: {"zipf_s": s}, st.floats(0, 1.5)),
            st.builds(
                lambda h, a: {"hot_fraction": h, "hot_access_fraction": a},
                st.floats(0.01, 0.9),
                st.floats(0, 1),
            ),
        ),
        "start_s": st.sampled_from([0.0, 0.0, 3.0, 7.0]),
        "churn_per_s": st.floats(0, 0.5),
        "grow_gib_per_s": st.floats(0, 1.0),
        "memory_low_gib": st.floats(0, 8),
    }
)


@st.composite
def scenario_st(draw: Any) -> dict[str, Any]:
    tenants = draw(st.lists(tenant_st, min_size=1, max_size=4))
    for i, t in enumerate(tenants):
        t["name"] = f"t{i}"
        if draw(st.booleans()):
            t["memory_high_gib"] = t["memory_low_gib"] + draw(st.floats(0, 16))
        if draw(st.booleans()):
            t["phases"] = [
                {
                    "at_s": t["start_s"] + 4.0,
                    "threads": draw(st.integers(1, 64)),
                    "read_fraction": draw(st.floats(0, 1)),
                }
            ]
    dram = draw(st.floats(4, 119))
    return {
        "name": "h",
        "interval_s": 1.0,
        "episode_steps": 12,
        "hardware": {"preset": "spr-a1000", "nodes": {"dram0": {"capacity_gib": dram}}},
        "tenants": tenants,
    }


KERNELS = [
    KernelConfig(),
    KernelConfig(demotion=False),
    KernelConfig(demote_watermark_frac=0.02, promote_active_only=True),
    KernelConfig(promotion_throttle=True, threshold_period_s=3.0),
]


# Derandomized: a fixed sequence of 40 examples, so CI does not depend on luck. Open
# random search (without derandomize) is worth running by hand: it is how write-only,
# deeply saturated machines where Newton stalled from a warm start were found
# (now solved again cold, then by continuation: envs.solver._retry).
@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(spec=scenario_st(), seed=st.integers(0, 2**31), kernel=st.sampled_from(KERNELS))
def test_invariants_hold_for_random_scenarios_and_actions(
    spec: dict[str, Any], seed: int, kernel: KernelConfig
) -> None:
    sim = Simulator(load_scenario(spec), batch_size=8, seeds=seed, kernel=kernel, jitter=0.1)
    rng = np.random.default_rng(seed)
    T, N = sim.params.n_tenants, sim.params.n_nodes
    for _ in range(12):
        w = rng.integers(0, 256, size=(8, T, N)) * (rng.random((8, T, N)) < 0.8)
        rate = np.where(rng.random(8) < 0.3, 0.0, 10 ** rng.uniform(0, 4.8, 8))
        out = sim.step(Action(w.astype(float), rate))
        check_invariants(sim, out)


def test_invariants_over_thousands_of_random_steps() -> None:
    """2,000+ element-steps of random machines from the mixed family with random actions."""
    scs = [mixed_scenario("train", i, episode_steps=40) for i in range(64)]
    sim = Simulator(scs, seeds=range(64), jitter=0.05, n_tenants=4)
    rng = np.random.default_rng(1)
    for _ in range(40):
        w = rng.integers(0, 256, size=(64, 4, 2)).astype(float)
        rate = 10 ** rng.uniform(-1, 4.8, 64) * (rng.random(64) < 0.8)
        out = sim.step(Action(w, rate))
        check_invariants(sim, out)


def test_batched_equals_single() -> None:
    """B instances stepped together give the same outputs as each stepped alone with its seed."""
    scs = [mixed_scenario("test", i, episode_steps=25) for i in range(6)]
    seeds = [11, 12, 13, 14, 15, 16]
    rng = np.random.default_rng(3)
    actions = [
        (rng.integers(0, 8, (6, 4, 2)).astype(float), rng.uniform(0, 3000, 6)) for _ in range(25)
    ]
    batch = Simulator(scs, seeds=seeds, jitter=0.1, n_tenants=4)
    outs = [batch.step(Action(w, r)) for w, r in actions]
    for i in range(6):
        single = Simulator([scs[i]], seeds=[seeds[i]], jitter=0.1, n_tenants=4)
        for k, (w, r) in enumerate(actions):
            o = single.step(Action(w[i : i + 1], r[i : i + 1]))
            for f in dataclasses.fields(o):
                a, b = getattr(o, f.name)[0], getattr(outs[k], f.name)[i]
                assert np.array_equal(a, b), (i, k, f.name, a, b)


def test_one_seed_one_result_and_other_seeds_differ() -> None:
    sc = load_scenario("kv-store")

    def run(seed: int) -> np.ndarray:
        sim = Simulator(sc, batch_size=2, seeds=seed, jitter=0.05)
        return np.array([sim.step([1, 0], 512.0).tenant_throughput_gbps for _ in range(30)])

    assert np.array_equal(run(5), run(5))
    assert not np.allclose(run(5), run(6))


def test_functional_step_does_not_modify_its_inputs() -> None:
    sc = load_scenario("kv-store")
    p = compile_params(sc, batch_size=2)
    s0 = init_state(p, [1, 2])
    before = s0.copy()
    act = Action(np.ones((2, 1, 2)), np.array([100.0, 0.0]))
    _s1, o1 = step(p, s0, act)
    for f in dataclasses.fields(s0):
        assert np.array_equal(getattr(s0, f.name), getattr(before, f.name))
    _s1b, o1b = step(p, s0, act)  # replay from the same state
    assert np.array_equal(o1.tenant_throughput_gbps, o1b.tenant_throughput_gbps)


def mlc_like(threads: int, compute_ns: float, rf: float = 0.67) -> dict[str, Any]:
    return {
        "name": "m",
        "episode_steps": 2,
        "hardware": "spr-a1000",
        "tenants": [
            {
                "name": "m",
                "threads": threads,
                "mlp": 10,
                "compute_ns": compute_ns,
                "read_fraction": rf,
                "working_set_gib": 4,
            }
        ],
    }


@pytest.mark.parametrize(
    ("threads", "compute_ns", "weights"),
    [
        (1, 100000.0, [1, 0]),  # nearly idle
        (1, 0.0, [0, 1]),  # one thread, light load on CXL
        (512, 0.0, [1, 0]),  # DRAM far past saturation
        (512, 0.0, [0, 1]),  # CXL link saturated
        (512, 0.0, [3, 1]),  # both saturated
    ],
)
def test_fixed_point_converges_from_idle_to_saturation(
    threads: int, compute_ns: float, weights: list[int]
) -> None:
    sim = Simulator(mlc_like(threads, compute_ns), batch_size=1)
    out = sim.step(weights)
    assert out.solver_residual[0] <= TOL
    x = out.tenant_throughput_gbps[0, 0]
    lat = out.tenant_latency_ns[0, 0]
    # Little's law holds at the reported point
    assert x == pytest.approx(64 * threads * 10 / (compute_ns + lat), rel=1e-7)
    if threads == 512:
        assert out.node_utilization[0].max() > 0.97  # the bottleneck is saturated, still below 1
        assert out.node_utilization[0].max() < 1.0
    if compute_ns == 100000.0:
        assert out.node_utilization[0].max() < 0.01
        assert lat == pytest.approx(sim.params.curves.idle_ns[0, 0], rel=0.01)


def test_bandwidth_aggregation_beats_dram_only_when_saturated() -> None:
    """With DRAM saturated, sending a share of traffic to CXL raises throughput (brief 2.5)."""
    sim = Simulator(mlc_like(256, 0.0), batch_size=1)
    dram_only = sim.step([1, 0]).total_throughput_gbps[0]
    sim.reset()
    mixed = sim.step([3, 1]).total_throughput_gbps[0]
    assert mixed > 1.15 * dram_only


def test_latency_bound_tenant_loses_on_cxl() -> None:
    sim = Simulator(mlc_like(2, 50.0), batch_size=1)
    dram = sim.step([1, 0]).tenant_norm_perf[0, 0]
    sim.reset()
    cxl = sim.step([0, 1]).tenant_norm_perf[0, 0]
    assert dram == pytest.approx(1.0, rel=1e-6)
    assert cxl < 0.6 * dram


def test_local_first_spills_to_cxl_when_dram_is_full() -> None:
    spec = mlc_like(8, 100.0)
    spec["hardware"] = {"preset": "spr-a1000", "nodes": {"dram0": {"capacity_gib": 8}}}
    spec["tenants"][0]["working_set_gib"] = 20
    sim = Simulator(spec, batch_size=1, kernel=KernelConfig(demotion=False))
    out = sim.step([0, 0])  # all-zero weights: local-first
    used = out.node_capacity_used_gib[0]
    assert used[0] == pytest.approx(
        8 - sim.params.wm_low[0, 0], abs=1e-6
    )  # DRAM filled to its LOW watermark
    assert used[1] == pytest.approx(20 - used[0], abs=1e-6)


@pytest.mark.parametrize(
    ("weights", "rate", "message"),
    [
        (np.ones((2, 1, 3)), np.zeros(2), "expected (batch, tenants, nodes)"),
        (np.full((2, 1, 2), np.nan), np.zeros(2), "NaN"),
        (np.ones((2, 1, 2)), np.array([np.nan, 1.0]), "NaN"),
        (-np.ones((2, 1, 2)), np.zeros(2), ">= 0"),
        (np.ones((2, 1, 2)), np.array([-5.0, 1.0]), ">= 0"),
        (np.ones((2, 1, 2)), np.zeros(3), "promote_mbps"),
    ],
)
def test_bad_actions_are_rejected(weights: np.ndarray, rate: np.ndarray, message: str) -> None:
    sim = Simulator(load_scenario("kv-store"), batch_size=2)
    before = sim.state.copy()
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        sim.step(Action(weights, rate))
    assert np.array_equal(sim.state.place, before.place)  # nothing changed


def test_deeply_saturated_write_only_machine_converges() -> None:
    """A case open random search found: Newton stalled from the warm start (now retried)."""

    def tenant(name: str, threads: int, mlp: float, ws: float) -> dict[str, Any]:
        return {
            "name": name,
            "threads": threads,
            "mlp": mlp,
            "compute_ns": 0.0,
            "read_fraction": 0.0,
            "working_set_gib": ws,
        }

    late = tenant("t2", 1, 13.0, 1.0)
    late["phases"] = [{"at_s": 4.0, "threads": 64}]
    spec = {
        "name": "write-storm",
        "episode_steps": 12,
        "hardware": {"preset": "spr-a1000", "nodes": {"dram0": {"capacity_gib": 4.0}}},
        "tenants": [tenant("t0", 1, 3.0, 47.0), tenant("t1", 50, 13.0, 1.0), late],
    }
    sim = Simulator(load_scenario(spec), batch_size=8, seeds=0, jitter=0.1)
    rng = np.random.default_rng(0)
    for _ in range(12):
        w = rng.integers(0, 256, size=(8, 3, 2)) * (rng.random((8, 3, 2)) < 0.8)
        rate = np.where(rng.random(8) < 0.3, 0.0, 10 ** rng.uniform(0, 4.8, 8))
        out = sim.step(Action(w.astype(float), rate))
        check_invariants(sim, out)
