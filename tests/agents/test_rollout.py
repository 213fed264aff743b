"""The shared rollout loop (agents/rollout.py): record contract, vectorisation, seeds."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agents.rollout import make_params, rollout, run_episodes
from baselines import make_policy
from envs import core
from envs.core import Hardware, Metrics
from envs.families import ScenarioFamily
from envs.gym_env import TieredMemoryEnv
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
    "unconverged_steps",
}
TENANT_KEYS = {"norm_perf", "throughput_gbps", "mean_latency_ns", "dram_access_share"}


def _short(name: str, steps: int) -> Any:
    return load_scenario(name, episode_steps=steps)


RECORD_KEYS = {"scenario", "instance", "policy", "seed", "episode", "metrics", "tenants"}
SERIES_KEYS = {"t", "tenants", "weights", "promotion_rate_mbps"}


def check_record(r: dict[str, Any]) -> None:
    """The documented record: exactly these keys, of these types (``series`` optional)."""
    assert set(r) - {"series"} == RECORD_KEYS, set(r) ^ RECORD_KEYS
    for k in ("scenario", "instance", "policy"):
        assert type(r[k]) is str and r[k], k
    for k in ("seed", "episode"):
        assert type(r[k]) is int, k  # a Python int (not a numpy one, not a bool)
    assert type(r["metrics"]) is dict and set(r["metrics"]) == METRICS
    for k, v in r["metrics"].items():
        assert v is None or (type(v) is float and math.isfinite(v)), (k, v)
    assert type(r["tenants"]) is dict
    for name, t in r["tenants"].items():
        assert type(name) is str and name
        assert type(t) is dict and set(t) == TENANT_KEYS
        for k, v in t.items():
            assert v is None or (type(v) is float and math.isfinite(v)), (name, k, v)
    json.dumps(r, allow_nan=False)  # what evaluate.py writes


def test_record_contract() -> None:
    recs = rollout("tpp", _short("colocation", 30), 3, seed=5, policy_name="my-tpp")
    assert len(recs) == 3
    for i, r in enumerate(recs):
        check_record(r)
        assert "series" not in r
        assert r["scenario"] == "colocation" and r["instance"] == "colocation"
        assert r["policy"] == "my-tpp"
        assert r["seed"] == 5 + i and r["episode"] == i
        assert set(r["tenants"]) == {"batch", "service"}
        m = r["metrics"]
        assert all(v is not None for v in m.values())
        assert all(v is not None for t in r["tenants"].values() for v in t.values())
        assert m["worst_perf"] == min(t["norm_perf"] for t in r["tenants"].values())
        assert m["unconverged_steps"] == 0.0  # every fixed point solved
    # the policy's own name when none is given
    assert rollout("dram-first", "mlc-bandwidth", 1)[0]["policy"] == "dram-first"
    # a family: the scenario asked for and the instance each episode ran
    for r in rollout("dram-first", "mixed", 2, env_kwargs={"pool_size": 8}):
        check_record(r)
        assert r["scenario"] == "mixed" and r["instance"].startswith("mixed-test-")


def test_record_values_that_cannot_be_computed_are_none() -> None:
    """A tenant that never runs is left out; with no tenant running at all the means over
    tenants are None (never NaN in a record)."""
    sc = load_scenario("colocation", episode_steps=10)  # the service starts at 20 s
    (r,) = rollout("dram-first", sc, 1)
    check_record(r)
    assert set(r["tenants"]) == {"batch"}
    late = sc.model_dump(mode="json")
    late["tenants"] = [late["tenants"][1]]  # only the service: it never starts
    (r,) = rollout("dram-first", late, 1)
    check_record(r)
    assert r["tenants"] == {}
    m = r["metrics"]
    assert m["geomean_perf"] is None and m["worst_perf"] is None and m["mean_latency_ns"] is None
    assert m["reward"] == 0.0 and m["throughput_gbps"] == 0.0


def test_series_only_in_the_first_record_with_its_documented_shape() -> None:
    recs = rollout("numa-tiering", _short("colocation", 25), 3, record_series=True)
    assert "series" in recs[0] and all("series" not in r for r in recs[1:])
    for r in recs:
        check_record(r)
    s = recs[0]["series"]
    assert set(s) == SERIES_KEYS
    assert s["t"] == list(range(25))
    assert set(s["tenants"]) == {"batch", "service"}
    for tv in s["tenants"].values():
        assert set(tv) == {"norm_perf", "dram_access_share"}
        for v in tv["norm_perf"] + tv["dram_access_share"]:
            assert v is None or type(v) is float
    assert all(type(v) is int for v in s["weights"]["batch/dram0"])
    assert all(type(v) is float for v in s["promotion_rate_mbps"])
    assert s["promotion_rate_mbps"] == [pytest.approx(65536.0)] * 25
    json.dumps(s, allow_nan=False)


def test_metrics_match_a_single_env_loop() -> None:
    """The vectorised sums equal a plain per-step loop over one single environment."""
    sc = _short("colocation", 40)
    recs = rollout(make_policy("numa-tiering"), sc, 3, seed=11)
    for i in (0, 2):
        pol = make_policy("numa-tiering")
        env = TieredMemoryEnv(scenario=sc, split="test", kernel=pol.kernel)
        pol.bind(env)
        obs, _ = env.reset(seed=11 + i)
        pol.observe(None, env.hardware())
        logs, rewards, x, promo, perf_service = [], [], [], [], []
        lat_x = xs = 0.0
        for _ in range(40):
            a, _ = pol.predict(obs)
            obs, r, _, trunc, info = env.step(a)
            pol.observe(info, env.hardware())
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


@pytest.mark.parametrize("policy", ["dram-first", "colloid", "damon-tiering"])
def test_records_do_not_depend_on_the_batch(policy: str) -> None:
    """Episode i of a batch of 6 equals a rollout of that one seed alone, bit for bit
    (stateful controllers included): the batch is only a speed-up."""
    fam = _two_lengths()
    batch = rollout(policy, fam, 6, seed=0)
    for i in range(6):
        (alone,) = rollout(policy, fam, 1, seed=i)
        assert alone["metrics"] == batch[i]["metrics"], i
        assert alone["tenants"] == batch[i]["tenants"], i
        assert alone["instance"] == batch[i]["instance"]
    assert {r["instance"] for r in batch} == {"len5", "len9"}


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


def _two_lengths() -> ScenarioFamily:
    base = load_scenario("llm-inference")
    scs = [base.model_copy(update={"episode_steps": n, "name": f"len{n}"}) for n in (5, 9)]
    return ScenarioFamily("two-lengths", lambda split, i: scs[i], 2, 1, 6)


def test_each_instance_runs_exactly_its_first_episode() -> None:
    """Episodes of different lengths in one batch: each counts its own steps only."""
    params = core.make_params(_two_lengths(), split="test")
    calls: list[tuple[Metrics | None, Hardware]] = []
    bound: list[tuple[Any, int]] = []

    class Spy:
        def bind(self, params: Any, num_envs: int) -> None:
            bound.append((params, num_envs))

        def predict(self, obs: Any, state: Any = None, **_: Any) -> tuple[Any, Any]:
            return -np.ones((obs.shape[0], params.codec.size), dtype=np.float32), state

        def observe(self, metrics: Metrics | None, hardware: Hardware) -> None:
            calls.append((metrics, hardware))

    st = run_episodes(Spy(), params, list(range(8)))
    assert bound == [(params, 8)]
    lengths = {int(s) for s in st.steps}
    assert lengths == {5, 9}  # both lengths drawn
    np.testing.assert_array_equal(st.t_active[:, 0], st.steps)
    assert calls[0][0] is None  # after the reset: the machine only
    assert len(calls) == 1 + 9  # then every step until the longest first episode ends
    for m, hw in calls[1:]:
        # the step's metrics of every instance, those that just finished included
        assert isinstance(m, Metrics) and m.tenant_active.shape == (8, 1)
        assert m.tenant_active[:, 0].all()
        assert isinstance(hw, Hardware) and hw.capacity_gib.shape == (8, params.n_nodes)
    ends = np.array([m.episode_step for m, _ in calls[1:]])
    # an instance of length 5 ends at step 5 and restarts (its next episode is not counted)
    short = st.steps == 5
    assert (ends[4, short] == 5).all() and (ends[5, short] == 1).all()


def test_series_format_plots(tmp_path: Path) -> None:
    import matplotlib.image

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
    # the series is what plot_timeseries takes: a decodable, non-blank image
    img = matplotlib.image.imread(plot_timeseries(s, tmp_path / "ts.png", "caption"))
    assert img.ndim == 3 and img.shape[0] > 200 and img.shape[1] > 200
    assert len(np.unique(img.reshape(-1, img.shape[2]), axis=0)) > 10


def test_kernel_from_policy_and_conflicts() -> None:
    pol = make_policy("tpp")
    assert make_params(pol, "kv-store").kernel == pol.kernel
    assert make_params(pol, "kv-store", env_kwargs={"kernel": pol.kernel}).kernel == pol.kernel
    with pytest.raises(ValueError, match="differs from the policy's kernel"):
        make_params(pol, "kv-store", env_kwargs={"kernel": {"promotion_throttle": True}})
    assert make_params(pol, "mixed", env_kwargs={"pool_size": 4}).split == "test"
    assert make_params(pol, "mixed", "train", {"pool_size": 4}).split == "train"

    class Plain:  # a trained model: no kernel, the env_kwargs decide
        def predict(self, obs: Any, state: Any = None, **_: Any) -> tuple[Any, Any]:
            return np.zeros((obs.shape[0], 3), dtype=np.float32), state

    params = make_params(Plain(), "kv-store", env_kwargs={"kernel": {"promotion_throttle": True}})
    assert params.kernel == KernelConfig(promotion_throttle=True)
    assert make_params(Plain(), "kv-store").kernel == KernelConfig()
    recs = rollout(Plain(), _short("kv-store", 3), 2)
    assert recs[0]["policy"] == "Plain"
    with pytest.raises(ValueError, match="n_episodes"):
        rollout(Plain(), "kv-store", 0)
