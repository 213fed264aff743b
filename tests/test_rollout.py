"""The shared rollout loop (agents/rollout.py): record contract, vectorisation, seeds."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agents.rollout import make_env, rollout, run_episodes, step_info
from baselines import make_policy
from envs.families import ScenarioFamily
from envs.gym_env import TieredMemoryEnv, TieredMemoryVecEnv
from envs.model import KernelConfig
from envs.scenario import load_scenario

METRICS = {
    "reward",
    "geomean_perf",
    "throughput_gbps",
    "worst_perf",
    "mean_latency_ns",
    "promotion_mbps",
    "demotion_mbps",
}
TENANT_KEYS = {"norm_perf", "throughput_gbps", "mean_latency_ns", "dram_access_share"}


def _short(name: str, steps: int) -> Any:
    return load_scenario(name, episode_steps=steps)


def test_record_contract() -> None:
    recs = rollout("tpp", _short("colocation", 30), 3, seed=5, policy_name="my-tpp")
    assert len(recs) == 3
    for i, r in enumerate(recs):
        assert {"scenario", "policy", "seed", "episode", "metrics", "tenants"} <= set(r)
        assert r["scenario"] == "colocation"
        assert r["policy"] == "my-tpp"
        assert r["seed"] == 5 + i and r["episode"] == i
        assert set(r["metrics"]) == METRICS
        assert set(r["tenants"]) == {"batch", "service"}
        for t in r["tenants"].values():
            assert set(t) == TENANT_KEYS
            assert all(isinstance(v, float) and math.isfinite(v) for v in t.values())
        m = r["metrics"]
        assert all(isinstance(v, float) and math.isfinite(v) for v in m.values())
        assert m["worst_perf"] == min(t["norm_perf"] for t in r["tenants"].values())
        assert "series" not in r
    # the policy's own name when none is given
    assert rollout("dram-first", "mlc-bandwidth", 1)[0]["policy"] == "dram-first"


def test_metrics_match_a_single_env_loop() -> None:
    """The vectorised sums equal a plain per-step loop over one single environment."""
    sc = _short("colocation", 40)
    recs = rollout(make_policy("numa-tiering"), sc, 3, seed=11)
    for i in (0, 2):
        pol = make_policy("numa-tiering")
        env = TieredMemoryEnv(scenario=sc, split="test", kernel=pol.kernel)
        pol.bind(env)
        obs, _ = env.reset(seed=11 + i)
        logs, rewards, x, promo, perf_service = [], [], [], [], []
        lat_x = xs = 0.0
        for _ in range(40):
            a, _ = pol.predict(obs)
            obs, r, _, trunc, info = env.step(a)
            pol.observe(info)
            rewards.append(r)
            logs.append(info["reward_log_geomean"])
            x.append(info["total_throughput_gbps"])
            promo.append(info["promotion_mbps"])
            act = info["tenant_active"]
            lat_x += float((act * info["tenant_throughput_gbps"] * info["tenant_latency_ns"]).sum())
            xs += float((act * info["tenant_throughput_gbps"]).sum())
            if act[1]:
                perf_service.append(info["tenant_norm_perf"][1])
        assert trunc
        m = recs[i]["metrics"]
        assert m["reward"] == pytest.approx(sum(rewards), rel=1e-12)
        assert m["geomean_perf"] == pytest.approx(math.exp(np.mean(logs)), rel=1e-12)
        assert m["throughput_gbps"] == pytest.approx(np.mean(x), rel=1e-12)
        assert m["promotion_mbps"] == pytest.approx(np.mean(promo), rel=1e-12, abs=1e-12)
        assert m["mean_latency_ns"] == pytest.approx(lat_x / xs, rel=1e-12)
        assert recs[i]["tenants"]["service"]["norm_perf"] == pytest.approx(
            np.mean(perf_service), rel=1e-12
        )
        assert len(perf_service) == 20  # the service starts at 20 s


def test_common_random_numbers_across_policies() -> None:
    """Every policy sees the same scenarios and seeds (here: the mixed family's instances)."""
    a = rollout("dram-first", "mixed", 4, seed=3, env_kwargs={"pool_size": 16})
    b = rollout("random", "mixed", 4, seed=3, env_kwargs={"pool_size": 16})
    assert [r["instance"] for r in a] == [r["instance"] for r in b]
    assert [r["seed"] for r in a] == [3, 4, 5, 6]
    assert all(r["scenario"] == "mixed" for r in a)
    # same policy, same seeds: identical; other seeds: different
    again = rollout("dram-first", "mixed", 4, seed=3, env_kwargs={"pool_size": 16})
    assert [r["metrics"] for r in a] == [r["metrics"] for r in again]
    other = rollout("dram-first", "mixed", 4, seed=40, env_kwargs={"pool_size": 16})
    assert [r["metrics"] for r in a] != [r["metrics"] for r in other]


def test_each_instance_runs_exactly_its_first_episode() -> None:
    """Episodes of different lengths in one batch: each counts its own steps only."""
    base = load_scenario("llm-inference")
    scs = [base.model_copy(update={"episode_steps": n, "name": f"len{n}"}) for n in (5, 9)]
    fam = ScenarioFamily("two-lengths", lambda split, i: scs[i], 2, 1, 6)
    env = TieredMemoryVecEnv(num_envs=8, scenario=fam, split="test")
    calls: list[dict[str, Any]] = []

    class Spy:
        def predict(self, obs: Any, state: Any = None, **_: Any) -> tuple[Any, Any]:
            return -np.ones(env.action_space.shape, dtype=np.float32), state

        def observe(self, info: dict[str, Any]) -> None:
            calls.append(info)

    st = run_episodes(Spy(), env, list(range(8)))
    lengths = {int(s) for s in st.steps}
    assert lengths == {5, 9}  # both lengths drawn
    np.testing.assert_array_equal(st.t_active[:, 0], st.steps)
    assert len(calls) == 9  # until the longest first episode ends
    # the finished instances' step metrics are merged back into the observed info
    for info in calls:
        assert info["tenant_active"].shape == (8, 1)
        assert info["tenant_active"][:, 0].all()


def test_step_info_merges_final_info() -> None:
    env = TieredMemoryVecEnv(num_envs=2, scenario=_short("kv-store", 2), split="test")
    env.reset(seed=0)
    a = -np.ones(env.action_space.shape, dtype=np.float32)
    _, _, _, _, infos = env.step(a)
    first = step_info(infos)
    _, _, _, trunc, infos = env.step(a)
    assert trunc.all()
    last = step_info(infos)
    assert set(last) == set(first)
    assert last["episode_step"].tolist() == [2, 2]
    assert last["tenant_active"].all()


def test_series_format_plots(tmp_path: Path) -> None:
    from agents.report import plot_timeseries

    recs = rollout("caption", _short("colocation", 30), 2, record_series=True)
    s = recs[0]["series"]
    assert "series" not in recs[1]
    assert s["t"] == list(range(30))
    assert set(s["tenants"]) == {"batch", "service"}
    assert s["tenants"]["service"]["norm_perf"][:20] == [None] * 20  # not started yet
    assert all(v is not None for v in s["tenants"]["batch"]["norm_perf"])
    assert set(s["weights"]) == {
        f"{t}/{n}" for t in ("batch", "service") for n in ("dram0", "cxl0")
    }
    assert all(len(v) == 30 for v in s["weights"].values())
    assert s["weights"]["batch/dram0"][0] == 10 and s["weights"]["batch/cxl0"][0] == 1
    assert len(s["promotion_rate_mbps"]) == 30
    assert plot_timeseries(s, tmp_path / "ts.png", "caption").exists()


def test_kernel_from_policy_and_conflicts() -> None:
    pol = make_policy("tpp")
    env = make_env(pol, "kv-store", 1)
    assert env.engine.kernel == pol.kernel
    assert (
        make_env(pol, "kv-store", 1, env_kwargs={"kernel": pol.kernel}).engine.kernel == pol.kernel
    )
    with pytest.raises(ValueError, match="differs from the policy's kernel"):
        make_env(pol, "kv-store", 1, env_kwargs={"kernel": {"promotion_throttle": True}})

    class Plain:  # a trained model: no kernel, the env_kwargs decide
        def predict(self, obs: Any, state: Any = None, **_: Any) -> tuple[Any, Any]:
            return np.zeros((obs.shape[0], 3), dtype=np.float32), state

    env = make_env(Plain(), "kv-store", 1, env_kwargs={"kernel": {"promotion_throttle": True}})
    assert env.engine.kernel == KernelConfig(promotion_throttle=True)
    recs = rollout(Plain(), _short("kv-store", 3), 2)
    assert recs[0]["policy"] == "Plain"
    with pytest.raises(ValueError, match="n_episodes"):
        rollout(Plain(), "kv-store", 0)
