"""The environment core (envs/core.py): batching, autoreset, purity, the Metrics record,
the Hardware view, the observation layout, and agreement of every adapter built on it."""

from __future__ import annotations

import dataclasses
import gc
import math
from typing import Any

import numpy as np
import pytest

from envs import core
from envs.core import COMING_FEATURES, EnvParams, EnvState, Metrics, coming_tenants
from envs.families import ScenarioFamily, mixed_scenario
from envs.gym_env import TieredMemoryEnv, TieredMemoryVecEnv
from envs.hardware import firmware_bandwidth
from envs.model import Outputs
from envs.scenario import load_scenario


def short_mixed_family() -> ScenarioFamily:
    """Mixed machines with episodes of 5 to 13 steps: instances end at different steps."""
    scs = [
        mixed_scenario("train", i, episode_steps=n)
        for i, n in enumerate((5, 9, 13, 7, 11, 6, 10, 8))
    ]
    phases = max(1 + len(t.phases) for sc in scs for t in sc.tenants)
    return ScenarioFamily("short-mixed", lambda split, i: scs[i], len(scs), 4, phases)


def random_actions(params: EnvParams, rng: np.random.Generator, B: int) -> np.ndarray:
    return rng.uniform(-1.0, 1.0, (B, params.codec.size)).astype(np.float32)


def assert_metrics_equal(a: Metrics, b: Metrics, where: str) -> None:
    for k in a.keys():
        x, y = getattr(a, k), getattr(b, k)
        assert x.dtype == y.dtype and np.array_equal(x, y), (where, k)


def assert_states_equal(a: EnvState, b: EnvState, where: str) -> None:
    for f in dataclasses.fields(a.model):
        assert np.array_equal(getattr(a.model, f.name), getattr(b.model, f.name)), (where, f.name)
    for k in ("base_seed", "episode", "weights", "promote_mbps"):
        assert np.array_equal(getattr(a, k), getattr(b, k)), (where, k)
    assert a.instance.scenario_names == b.instance.scenario_names, where


# --------------------------------------------------------------------------- batching


def test_batch_equals_single_instances_bit_for_bit_through_autoresets() -> None:
    """A batch of 4 seeds equals 4 single-instance runs with the same seeds, over several
    episodes each (step_autoreset), in every output: observations, rewards, flags,
    metrics, final observations and the state itself."""
    params = core.make_params(short_mixed_family(), jitter=0.1)
    seeds = [3, 17, 2**40 + 5, 99]
    B = len(seeds)
    rng = np.random.default_rng(0)
    steps = 40
    actions = [random_actions(params, rng, B) for _ in range(steps)]

    bstate, bobs = core.reset(params, seeds)
    singles = [core.reset(params, [s]) for s in seeds]
    sstate = [s for s, _ in singles]
    np.testing.assert_array_equal(bobs, np.concatenate([o for _, o in singles]))
    ends = np.zeros(B, dtype=int)
    for k, a in enumerate(actions):
        bstate, bobs, brew, bterm, btrunc, bm, bfinal = core.step_autoreset(params, bstate, a)
        for i in range(B):
            sstate[i], o, r, te, tr, m, fo = core.step_autoreset(params, sstate[i], a[i : i + 1])
            where = f"step {k} instance {i}"
            assert np.array_equal(o[0], bobs[i]), where
            assert r[0] == brew[i] and te[0] == bterm[i] and tr[0] == btrunc[i], where
            assert_metrics_equal(m, bm.rows([i]), where)
            if tr[0]:
                assert fo is not None and bfinal is not None, where
                assert np.array_equal(fo[0], bfinal[i]), where
            assert_states_equal(sstate[i], _row(bstate, i), where)
        ends += btrunc
    assert (ends >= 2).all()  # every instance went through at least two autoresets
    assert len(set(bstate.instance.scenario_names)) > 1


def _row(state: EnvState, i: int) -> EnvState:
    return EnvState(
        instance=state.instance.subset([i]),
        model=dataclasses.replace(
            state.model,
            **{
                f.name: getattr(state.model, f.name)[..., [i]]
                for f in dataclasses.fields(state.model)
            },
        ),
        base_seed=state.base_seed[[i]],
        episode=state.episode[[i]],
        weights=state.weights[[i]],
        promote_mbps=state.promote_mbps[[i]],
    )


def test_gym_single_vector_and_core_agree() -> None:
    """For the same seeds and actions the Gymnasium single env (reset after each end), the
    native vector env (SAME_STEP autoreset) and the core give the same observations,
    rewards, flags and infos."""
    fam = short_mixed_family()
    kw: dict[str, Any] = {"scenario": fam, "jitter": 0.05}
    n, seed, steps = 3, 21, 30
    vec = TieredMemoryVecEnv(num_envs=n, **kw)
    singles = [TieredMemoryEnv(**kw) for _ in range(n)]
    params = core.make_params(**kw)
    vobs, vinfo = vec.reset(seed=seed)
    cstate, cobs = core.reset(params, [seed + i for i in range(n)])
    sobs = [env.reset(seed=seed + i) for i, env in enumerate(singles)]
    np.testing.assert_array_equal(vobs, cobs)
    for i in range(n):
        np.testing.assert_array_equal(sobs[i][0], cobs[i])
        assert sobs[i][1]["scenario"] == vinfo["scenario"][i]
    rng = np.random.default_rng(1)
    ends = 0
    for k in range(steps):
        a = random_actions(params, rng, n)
        vobs, vrew, vterm, vtrunc, vinfo = vec.step(a)
        cstate, cobs, crew, cterm, ctrunc, cm, cfinal = core.step_autoreset(params, cstate, a)
        np.testing.assert_array_equal(vobs, cobs)
        np.testing.assert_array_equal(vrew, crew)
        np.testing.assert_array_equal(vtrunc, ctrunc)
        np.testing.assert_array_equal(vterm, cterm)
        for i, env in enumerate(singles):
            o, r, te, tr, info = env.step(a[i])
            assert isinstance(r, float) and r == crew[i], (k, i)
            assert te is False and tr == bool(ctrunc[i])
            for key in cm.keys():
                assert np.array_equal(info[key], getattr(cm, key)[i]), (k, i, key)
            if tr:
                ends += 1
                assert cfinal is not None
                np.testing.assert_array_equal(o, cfinal[i])
                np.testing.assert_array_equal(vinfo["final_obs"][i], o)
                for key in cm.keys():
                    assert np.array_equal(vinfo["final_info"][key][i], info[key]), key
                o, reset_info = env.reset()  # the next episode of the same seed
                assert reset_info["scenario"] == vinfo["scenario"][i]
            else:
                for key in cm.keys():
                    assert np.array_equal(vinfo[key][i], info[key]), (k, i, key)
            np.testing.assert_array_equal(o, vobs[i])
    assert ends >= n


# --------------------------------------------------------------------------- purity and reset_where


def _snapshot(state: EnvState) -> dict[str, np.ndarray]:
    snap = {
        f"model.{f.name}": getattr(state.model, f.name).copy()
        for f in dataclasses.fields(state.model)
    }
    for k in ("base_seed", "episode", "weights", "promote_mbps"):
        snap[k] = getattr(state, k).copy()
    return snap


def _same(state: EnvState, snap: dict[str, np.ndarray]) -> bool:
    now = _snapshot(state)
    return all(np.array_equal(now[k], v) for k, v in snap.items())


def test_step_is_pure_and_replayable() -> None:
    params = core.make_params("colocation")
    state, _ = core.reset(params, [1, 2])
    a = np.zeros((2, params.codec.size), dtype=np.float32)
    for _ in range(25):  # past the second tenant's start
        state, *_ = core.step(params, state, a)
    snap = _snapshot(state)
    rng = np.random.default_rng(2)
    act = random_actions(params, rng, 2)
    s1, o1, r1, _, _, m1 = core.step(params, state, act)
    assert _same(state, snap)  # the input state is untouched
    _, o2, r2, _, _, m2 = core.step(params, state, act)  # replay: the same numbers
    np.testing.assert_array_equal(o1, o2)
    np.testing.assert_array_equal(r1, r2)
    assert_metrics_equal(m1, m2, "replay")
    # the metrics never alias the new state: writing them leaves the state as it was
    snap1 = _snapshot(s1)
    for k in m1.keys():
        v = getattr(m1, k)
        if v.flags.writeable:
            v[...] = 0
    assert _same(s1, snap1)
    # a branch from the same state with other actions differs
    _, o3, *_ = core.step(params, state, -np.ones_like(act))
    assert not np.array_equal(o1, o3)


def test_reset_where_restarts_only_the_done_instances() -> None:
    params = core.make_params(short_mixed_family())
    state, _ = core.reset(params, [10, 11, 12, 13])
    a = np.zeros((4, params.codec.size), dtype=np.float32)
    for _ in range(3):
        state, *_ = core.step(params, state, a)
    done = np.array([False, True, False, True])
    new, first = core.reset_where(params, state, done)
    assert first.shape == (2, params.encoder.size)
    assert new.episode.tolist() == [0, 1, 0, 1]
    assert new.model.t.tolist() == [3, 0, 3, 0]
    np.testing.assert_array_equal(new.base_seed, state.base_seed)
    for f in dataclasses.fields(state.model):  # untouched rows keep their state exactly
        x, y = getattr(new.model, f.name), getattr(state.model, f.name)
        np.testing.assert_array_equal(x[..., [0, 2]], y[..., [0, 2]])
    assert (new.weights[done] == 0).all() and (new.promote_mbps[done] == 0).all()
    assert state.episode.tolist() == [0, 0, 0, 0]  # the input is not modified
    assert (first[:, -1] == 0).all()  # time 0 of the new episodes
    # nothing done: the same state back, no observations
    same, none = core.reset_where(params, state, np.zeros(4, dtype=bool))
    assert same is state and none.shape == (0, params.encoder.size)


@pytest.mark.parametrize("observation", ["full", "cgroup", "demand", "topology"])
def test_the_kept_descriptor_table_is_the_episodes_own(observation: str) -> None:
    """EnvState.specs (the tenant descriptors per phase, computed when an episode starts)
    equals the table computed afresh from the state, after partial restarts too; and the
    observation read from it equals the one computed without it."""
    params = core.make_params(short_mixed_family(), observation=observation)
    state, _ = core.reset(params, np.arange(6) + 40)
    rng = np.random.default_rng(2)
    for k in range(20):
        a = random_actions(params, rng, 6)
        _, computed, *_ = core.step(params, dataclasses.replace(state, specs=None), a)
        state, obs, *_ = core.step(params, state, a)
        np.testing.assert_array_equal(obs, computed)
        if k % 4 == 1:
            state, _ = core.reset_where(params, state, rng.uniform(size=6) < 0.5)
        else:
            state, _ = core.reset_where(params, state, state.done)
        fresh = core.spec_table(
            params.encoder, state.instance, state.model.jit, state.model.solo_gbps
        )
        assert state.specs is not None
        np.testing.assert_array_equal(state.specs, fresh)
        without = dataclasses.replace(state, specs=None)
        np.testing.assert_array_equal(
            core.observe(params, state, None), core.observe(params, without, None)
        )
        np.testing.assert_array_equal(
            coming_tenants(params, state), coming_tenants(params, without)
        )


def test_episode_seeds_differ_across_episodes_and_instances() -> None:
    params = core.make_params("mixed", pool_size=64)
    state, _ = core.reset(params, np.arange(8))
    names = [list(state.instance.scenario_names)]
    for _ in range(3):
        state, _ = core.reset_where(params, state, np.ones(8, dtype=bool))
        names.append(list(state.instance.scenario_names))
    flat = [n for row in names for n in row]
    assert len(set(flat)) > 16  # 32 episodes draw many different pool rows
    assert len(set(state.model.key.tolist())) == 8  # one random key per instance
    again, _ = core.reset(params, np.arange(8))
    assert list(again.instance.scenario_names) == names[0]


def test_gym_env_refuses_to_step_past_the_end() -> None:
    env = TieredMemoryEnv(scenario=load_scenario("kv-store", episode_steps=2))
    with pytest.raises(RuntimeError, match="reset"):
        env.step(np.zeros(3, dtype=np.float32))
    env.reset(seed=0)
    env.step(np.zeros(3, dtype=np.float32))
    assert env.step(np.zeros(3, dtype=np.float32))[3] is True
    with pytest.raises(RuntimeError, match="episode ended"):
        env.step(np.zeros(3, dtype=np.float32))


def test_make_params_rebuilds_from_its_env_kwargs() -> None:
    params = core.make_params(
        "colocation", split="test", reward="harmonic", weights="global", max_promote_mbps=4096.0,
        kernel={"promotion_throttle": True}, jitter=0.1,
    )  # fmt: skip
    again = core.make_params(**params.env_kwargs())
    assert again.codec == params.codec and again.kernel == params.kernel
    assert (again.reward, again.jitter, again.split) == ("harmonic", 0.1, "test")
    assert again.encoder.size == params.encoder.size
    s1, _ = core.reset(params, [4])
    s2, _ = core.reset(again, [4])
    a = np.full((1, params.codec.size), 0.3, dtype=np.float32)
    np.testing.assert_array_equal(core.step(params, s1, a)[2], core.step(again, s2, a)[2])


# --------------------------------------------------------------------------- Metrics and Hardware


def test_metrics_is_the_documented_record_and_a_mapping() -> None:
    params = core.make_params("colocation")
    state, _ = core.reset(params, [0, 1, 2])
    state, _, reward, _, _, m = core.step(params, state, np.zeros((3, params.codec.size)))
    out_names = [f.name for f in dataclasses.fields(Outputs)]
    extra = [
        "reward_log_geomean",
        "reward_throughput",
        "reward_weighted_speedup",
        "reward_harmonic",
        "interleave_weights",
        "promote_rate_mbps",
        "episode_step",
        "node_capacity_gib",
        "tiering_mode",
        "reward_baseline",
        "tenant_norm_perf_baseline",
    ]
    assert list(m.keys()) == out_names + extra
    assert len(m) == len(m.keys()) and list(m) == list(m.keys())
    d = dict(m)
    assert set(d) == set(m.keys()) and d["tenant_norm_perf"] is m.tenant_norm_perf
    assert m.to_dict().keys() == d.keys()
    assert "tenant_active" in m and "engine" not in m and m.get("engine", 7) == 7
    with pytest.raises(KeyError):
        m["last_info"]
    T, N = params.n_tenants, params.n_nodes
    for k, v in m.items():
        assert v.shape[0] == 3, k
        if k.startswith("node_"):
            assert v.shape == (3, N), k
        elif k.startswith("tenant_"):
            assert v.shape == (3, T), k
        elif k == "interleave_weights":
            assert v.shape == (3, T, N) and v.dtype == np.int64
        else:
            assert v.shape == (3,), k
    assert m.tenant_active.dtype == bool and m.episode_step.dtype == np.int64
    np.testing.assert_array_equal(reward, m.reward_log_geomean)  # the default reward
    np.testing.assert_array_equal(m.node_capacity_gib, state.instance.capacity_gib.T)
    sub = m.rows([2, 0])
    np.testing.assert_array_equal(sub.tenant_norm_perf, m.tenant_norm_perf[[2, 0]])


def test_reward_terms_follow_their_definitions() -> None:
    params = core.make_params("colocation", reward="throughput")
    state, _ = core.reset(params, [0, 1])
    rng = np.random.default_rng(4)
    for _ in range(30):
        state, _, reward, _, _, m = core.step(params, state, random_actions(params, rng, 2))
    act = m.tenant_active
    assert act.all()  # both tenants run at 30 s
    perf = np.maximum(m.tenant_norm_perf, 1e-6)
    np.testing.assert_allclose(m.reward_log_geomean, np.log(perf).mean(1), rtol=1e-12)
    np.testing.assert_allclose(m.reward_weighted_speedup, perf.sum(1), rtol=1e-12)
    np.testing.assert_allclose(m.reward_harmonic, 2 / (1 / perf).sum(1), rtol=1e-12)
    peak = core.hardware(state).machine_read_gbps
    np.testing.assert_allclose(m.reward_throughput, m.total_throughput_gbps / peak, rtol=1e-12)
    np.testing.assert_array_equal(reward, m.reward_throughput)


def test_hardware_view_is_read_only_and_matches_the_scenario() -> None:
    sc = load_scenario("mlc-bandwidth")  # spr-4cxl: one DRAM node, four CXL expanders
    params = core.make_params(sc)
    state, _ = core.reset(params, [0, 1])
    hw = core.hardware(state)
    nodes = sc.hardware.nodes
    assert hw.node_names == tuple(n.name for n in nodes)
    assert hw.is_cxl.shape == (2, len(nodes))
    for j, n in enumerate(nodes):
        assert (hw.is_cxl[:, j] == (n.kind == "cxl")).all()
        assert (hw.socket[:, j] == n.socket).all()
        assert (hw.capacity_gib[:, j] == n.capacity_gib).all()
        assert (hw.idle_latency_ns[:, j] == n.idle_latency_ns).all()
        rd = min(n.read_gbps, n.link_read_gbps or math.inf)
        wr = min(n.write_gbps, n.link_write_gbps or math.inf)
        assert (hw.read_gbps[:, j] == rd).all() and (hw.write_gbps[:, j] == wr).all()
        fw = firmware_bandwidth(
            n.read_gbps, n.write_gbps, n.link_read_gbps or math.inf, n.link_write_gbps or math.inf
        )
        assert (hw.firmware_gbps[:, j] == min(rd, wr)).all() and (
            hw.firmware_gbps[:, j] == fw
        ).all()
    np.testing.assert_allclose(hw.machine_read_gbps, hw.read_gbps.sum(1))
    for name in (
        "is_cxl",
        "socket",
        "capacity_gib",
        "read_gbps",
        "write_gbps",
        "firmware_gbps",
        "idle_latency_ns",
    ):
        arr = getattr(hw, name)
        with pytest.raises(ValueError, match="read-only"):
            arr[0, 0] = arr[0, 0]
    # the view follows the state, which does not depend on it
    assert (state.instance.capacity_gib.T == hw.capacity_gib).all()
    assert state.instance.capacity_gib.flags.writeable


def test_hardware_is_built_once_per_instances_and_forgotten_with_them() -> None:
    """The machine is built once while the instances are the same object, again for a
    batch that drew new ones (a reset), and the kept entry goes with its instances."""
    params = core.make_params("gen-2s-snc-2cxl")  # machines differ by episode
    state, _ = core.reset(params, [0, 1, 2, 3])
    hw = core.hardware(state)
    assert core.hardware(state) is hw
    state2, *_ = core.step(params, state, np.zeros((4, params.codec.size), np.float32))
    assert state2.instance is state.instance and core.hardware(state2) is hw
    fresh, _ = core.reset(params, [10, 11, 12, 13])
    other = core.hardware(fresh)
    assert other is not hw
    assert other.node_names != hw.node_names or not np.array_equal(
        other.capacity_gib, hw.capacity_gib
    )
    key = id(fresh.instance)
    assert key in core._HARDWARE
    del fresh, other
    gc.collect()
    assert key not in core._HARDWARE


# --------------------------------------------------------------------------- observations


def _index(params: EnvParams) -> dict[str, int]:
    names = params.encoder.names(params.node_names)
    return {n: i for i, n in enumerate(names)}


def test_observation_names_one_per_entry() -> None:
    cases: list[tuple[str, dict[str, Any]]] = [
        ("colocation", {}),
        ("mlc-bandwidth", {}),
        ("mixed", {"pool_size": 8}),
    ]
    for sc, kw in cases:
        params = core.make_params(sc, **kw)
        names = params.encoder.names(params.node_names)
        assert len(names) == params.encoder.size == params.encoder.space().shape[0]
        assert len(set(names)) == len(names)
        T, N = params.n_tenants, params.n_nodes
        assert params.encoder.size == 3 * N + T * (6 + N + 8) + 4 + 3  # the documented layout
        basic = core.make_params(sc, observation="basic", **kw).encoder
        assert basic.size == 3 * N + T * (6 + N) + 3  # the layout before visible arrivals
        assert names[-3:] == ["promotion_traffic", "demotion_traffic", "episode_time"]
        assert names[0] == f"node[{params.node_names[0]}].utilization"
        assert names[3 * N] == "tenant[0].present"


def test_observation_entries_equal_the_documented_normalisation() -> None:
    """After a step each named entry is the docstring's normalisation of the step's metrics."""
    params = core.make_params("colocation", jitter=0.05)
    B = 4
    state, obs = core.reset(params, np.arange(B))
    ix = _index(params)
    nodes = params.node_names
    T = params.n_tenants
    # at reset: presence, read fraction, weights and time only
    inst = state.instance
    present0 = (inst.present & (inst.start_s <= 0)).T
    for t in range(T):
        np.testing.assert_array_equal(obs[:, ix[f"tenant[{t}].present"]], present0[:, t])
        assert (obs[:, ix[f"tenant[{t}].norm_perf"]] == 0).all()
    assert (obs[:, ix["episode_time"]] == 0).all()
    rng = np.random.default_rng(9)
    hw = core.hardware(state)
    scale = math.log1p(65536.0)
    seen_promotion = False
    for k in range(30):
        a = random_actions(params, rng, B)
        a[:, -1] = rng.uniform(0.0, 1.0, B)  # promotion on
        state, obs, _, _, _, m = core.step(params, state, a)

        def entry(name: str, obs: np.ndarray = obs) -> np.ndarray:
            return obs[:, ix[name]].astype(np.float64)

        def close(name: str, want: np.ndarray, k: int = k) -> None:
            np.testing.assert_allclose(
                entry(name),
                np.clip(want, 0, 1).astype(np.float32),
                rtol=1e-6,
                atol=1e-7,
                err_msg=f"{name} step {k}",
            )

        for j, n in enumerate(nodes):
            close(f"node[{n}].utilization", m.node_utilization[:, j])
            lat = (m.node_latency_ns[:, j] / hw.idle_latency_ns[:, j] - 1.0) / 4.0
            close(f"node[{n}].latency_over_idle", np.minimum(lat, 1.0))
            close(
                f"node[{n}].capacity_used",
                m.node_capacity_used_gib[:, j] / m.node_capacity_gib[:, j],
            )
        for t in range(T):
            on = m.tenant_active[:, t]
            np.testing.assert_array_equal(entry(f"tenant[{t}].present"), on.astype(float))
            close(f"tenant[{t}].norm_perf", on * np.minimum(m.tenant_norm_perf[:, t] / 2, 1))
            close(f"tenant[{t}].dram_access_share", on * m.tenant_dram_access_share[:, t])
            res = np.maximum(m.tenant_resident_gib[:, t], 1e-12)
            close(f"tenant[{t}].dram_resident_share", on * m.tenant_dram_resident_gib[:, t] / res)
            close(
                f"tenant[{t}].bandwidth_demand",
                on * m.tenant_demand_gbps[:, t] / hw.machine_read_gbps,
            )
            close(f"tenant[{t}].read_fraction", on * m.tenant_read_fraction[:, t])
            w = m.interleave_weights[:, t].astype(float)
            tot = w.sum(1, keepdims=True)
            local = np.zeros_like(w)
            local[:, nodes.index("dram0")] = 1.0  # all-zero weights: local-first
            frac = np.where(tot > 0, w / np.maximum(tot, 1), local)
            for j, n in enumerate(nodes):
                close(f"tenant[{t}].weight[{n}]", on * frac[:, j])
        close("promotion_traffic", np.log1p(m.promotion_mbps) / scale)
        close("demotion_traffic", np.log1p(m.demotion_mbps) / scale)
        close("episode_time", m.episode_step / state.instance.episode_steps)
        seen_promotion |= bool((m.promotion_mbps > 0).any())
    assert seen_promotion and m.tenant_active.all()  # every entry was exercised


def test_coming_tenants_say_what_the_episode_still_holds() -> None:
    params = core.make_params("colocation")
    state, _ = core.reset(params, [3])
    p = state.instance
    length = float(p.episode_steps[0] * p.interval_s[0])
    late = int(np.argmax(np.where(p.present[:, 0], p.start_s[:, 0], -1.0)))
    start = float(p.start_s[late, 0])
    assert 0 < start < length  # the scenario has a latecomer
    zero = np.zeros((1, params.codec.space().shape[0]), dtype=np.float32)
    seen = []
    while not state.done[0]:
        c = coming_tenants(params, state)[0]
        now = float(state.model.t[0] * p.interval_s[0])
        assert c.shape == (params.n_tenants, COMING_FEATURES)
        assert c[late, 0] == 1.0 and c[late, 1] == pytest.approx(max(start - now, 0) / length)
        assert c[late, -1] == float(start > now)  # not started yet
        np.testing.assert_array_equal(c[~p.present[:, 0]], 0.0)  # empty slots
        seen.append(c[late, 2])
        state, *_ = core.step(params, state, zero)
    assert seen[-1] == pytest.approx(p.interval_s[0] / length)  # one interval left at the end
    np.testing.assert_array_equal(coming_tenants(params, state), 0.0)  # nothing left after it
