"""The paired-seed reward baseline (``reward_baseline``): twins on the agent's episode seeds,
run by a heuristic in the same model call, whose reward the agent's is measured against."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from agents.rollout import make_params as heuristic_params
from baselines import make_policy
from envs import ENV_ID, core
from envs.paired import BaselineTwin
from envs.sb3 import TierGymVecEnv

SEEDS = np.array([11, 12, 13], dtype=np.uint64)


def _paired(scenario: str = "mixed", baseline: str = "colloid") -> core.EnvParams:
    return core.make_params(scenario, split="test", reward_baseline=baseline)


def _run(
    params: core.EnvParams, actions: np.ndarray, seeds: np.ndarray = SEEDS
) -> list[tuple[core.EnvState, np.ndarray, core.Metrics]]:
    """Step ``params`` through ``actions`` (steps, B, size) with its twins' heuristic."""
    state, _ = core.reset(params, seeds)
    twin = BaselineTwin.of(params, len(seeds))
    if twin is not None:
        twin.reset(state)
    out = []
    for a in actions:
        ta = None if twin is None else twin.act(state)
        state, _, reward, term, trunc, metrics, _ = core.step_autoreset(params, state, a, ta)
        if twin is not None:
            twin.observe(state, term | trunc)
        out.append((state, reward, metrics))
    return out


def _random_actions(params: core.EnvParams, steps: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    size = params.codec.space().shape[0]
    return rng.uniform(-1, 1, (steps, len(SEEDS), size)).astype(np.float32)


def test_twins_get_the_agents_input_by_construction() -> None:
    params = _paired()
    state, _ = core.reset(params, SEEDS)
    assert state.twin is not None
    a, b = state.instance, state.twin.state.instance
    assert a.scenario_names == b.scenario_names and a.tenant_names == b.tenant_names
    for name in ("present", "start_s", "stop_s", "phase_at", "working_set_gib", "access_share"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    np.testing.assert_array_equal(state.model.jit, state.twin.state.model.jit)
    np.testing.assert_array_equal(state.model.key, state.twin.state.model.key)
    # every interval: the same tenants up, with the same (jittered, growing) working sets
    for st, _, m in _run(params, _random_actions(params, 40, 0)):
        assert st.twin is not None and st.twin.metrics is not None
        np.testing.assert_array_equal(m.tenant_active, st.twin.metrics.tenant_active)
        np.testing.assert_array_equal(
            m.tenant_working_set_gib, st.twin.metrics.tenant_working_set_gib
        )


def test_baseline_is_the_heuristics_own_run_and_ignores_the_agents_actions() -> None:
    params = _paired()
    steps = 100  # a whole mixed episode
    first = _run(params, _random_actions(params, steps, 1))
    other = _run(params, _random_actions(params, steps, 2))
    # the heuristic alone, in the environment evaluation gives it (its own kernel)
    policy = make_policy("colloid")
    alone = heuristic_params(policy, "mixed", split="test")
    policy.bind(alone, len(SEEDS))
    state, obs = core.reset(alone, SEEDS)
    policy.observe(None, core.hardware(state))
    start = np.ones(len(SEEDS), dtype=bool)
    for k in range(steps):
        action, _ = policy.predict(obs, episode_start=start)
        state, obs, reward, term, trunc, m, _ = core.step_autoreset(alone, state, action)
        policy.observe(m, core.hardware(state))
        start = term | trunc
        for run in (first, other):
            np.testing.assert_array_equal(run[k][2].reward_baseline, reward, err_msg=f"step {k}")
            np.testing.assert_array_equal(run[k][2].tenant_norm_perf_baseline, m.tenant_norm_perf)
    diff = [np.abs(a[1] - b[1]).max() for a, b in zip(first, other, strict=True)]
    assert max(diff) > 1e-3  # the agents' actions do matter to the paired reward


@pytest.mark.parametrize("modes", [None, ["default", "tpp", "no-demotion"]], ids=["", "modes"])
def test_paired_reward_is_the_agents_minus_the_twins_and_leaves_the_agent_alone(
    modes: list[str] | None,
) -> None:
    """With ``tiering_modes`` the agent picks its instances' kernel every interval: the
    model's call for both keeps the twins' own kernel beside it."""
    kw = {"tiering_modes": modes} if modes else {}
    paired = core.make_params("mixed", split="test", reward_baseline="colloid", **kw)
    plain = core.make_params("mixed", split="test", **kw)
    actions = _random_actions(plain, 30, 3)
    baseline = []
    for (ps, pr, pm), (qs, qr, qm) in zip(_run(paired, actions), _run(plain, actions), strict=True):
        np.testing.assert_array_equal(pm.tenant_norm_perf, qm.tenant_norm_perf)
        np.testing.assert_array_equal(ps.model.place, qs.model.place)
        np.testing.assert_array_equal(pr, qr - pm.reward_baseline)
        np.testing.assert_array_equal(qm.reward_baseline, 0.0)
        baseline.append(pm.reward_baseline)
    assert np.abs(baseline).max() > 0.01


def test_every_adapter_reports_the_same_paired_reward() -> None:
    single = gym.make(ENV_ID, scenario="kv-store", reward_baseline="colloid")
    vec = gym.make_vec(
        ENV_ID,
        num_envs=2,
        vectorization_mode="vector_entry_point",
        scenario="kv-store",
        reward_baseline="colloid",
    )
    sb3 = TierGymVecEnv(num_envs=2, scenario="kv-store", reward_baseline="colloid")
    single.reset(seed=5)
    vec.reset(seed=5)  # instance i: seed 5 + i
    sb3.seed(5)  # instance i: seed 5 + i
    sb3.reset()
    zero = np.zeros(single.action_space.shape, dtype=np.float32)
    steps = sb3.params.pool.episode_steps[0] + 3  # through an autoreset
    for _ in range(int(steps)):
        _, r1, _, trunc, info1 = single.step(zero)
        _, r2, _, _, _ = vec.step(np.stack([zero, zero]))
        _, r3, _, info3 = sb3.step(np.stack([zero, zero]))
        assert r1 == pytest.approx(info1["reward_log_geomean"] - info1["reward_baseline"], abs=0)
        assert r2[0] == r1 and r3[0] == np.float32(r1)
        if trunc:
            single.reset()
    assert info3[0]["metrics"].reward_baseline.shape == (2,)


def test_without_a_baseline_nothing_changes() -> None:
    params = core.make_params("kv-store")
    state, _ = core.reset(params, SEEDS)
    assert params.twin is None and state.twin is None and BaselineTwin.of(params, 3) is None
    action = np.zeros((3, params.codec.space().shape[0]), dtype=np.float32)
    with pytest.raises(ValueError, match="no reward_baseline"):
        core.step(params, state, action, action)


def test_bad_baselines_get_clear_errors() -> None:
    with pytest.raises(ValueError, match=r"reward_baseline='nope'.*colloid"):
        _paired("kv-store", "nope")
    with pytest.raises(ValueError, match="clairvoyant"):
        _paired("kv-store", "planner")
    params = _paired("kv-store")
    state, _ = core.reset(params, SEEDS)
    action = np.zeros((3, params.codec.space().shape[0]), dtype=np.float32)
    with pytest.raises(ValueError, match="twin_action"):
        core.step(params, state, action)
    assert params.env_kwargs()["reward_baseline"] == "colloid"


def test_the_heuristic_reads_the_machine_of_the_twins_running_episode() -> None:
    """The twins' Hardware is kept between steps (envs.core.hardware); every reset draws
    new instances (machines of the generator's family differ), and the heuristic must
    then read theirs."""
    params = _paired("gen-2s-snc-2cxl")
    seeds = np.arange(4, dtype=np.uint64)
    state, _ = core.reset(params, seeds)
    twin = BaselineTwin(params, len(seeds))
    twin.reset(state)
    rng = np.random.default_rng(0)
    machines = set()
    for _ in range(2 * int(state.instance.episode_steps.max()) + 3):
        a = rng.uniform(-1, 1, (len(seeds), params.codec.size)).astype(np.float32)
        state, _, _, term, trunc, _, _ = core.step_autoreset(params, state, a, twin.act(state))
        twin.observe(state, term | trunc)
        want = core.hardware(state.twin.state)
        got = twin.policy.hw
        for field in ("capacity_gib", "read_gbps", "firmware_gbps", "idle_latency_ns"):
            np.testing.assert_array_equal(getattr(got, field), getattr(want, field))
        machines.add(want.capacity_gib.tobytes())
    assert len(machines) > 1  # the episodes ran on different machines
