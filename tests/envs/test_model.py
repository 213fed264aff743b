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
from envs.kernel import (
    MAX_RECLAIM_RETRIES,
    PAGE_BYTES,
    THRESHOLD_MAX_MS,
    THRESHOLD_START_MS,
    THRESHOLD_UNIT_MS,
    adapt_promotion_threshold,
)
from envs.solver import TOL

GIB = float(1 << 30)
#: memcg reclaim scans at least SWAP_CLUSTER_MAX pages of a cgroup over its protection
#: (mm/vmscan.c), so reclaim may end up to 32 pages under memory.low
RECLAIM_SLACK_GIB = 32 * PAGE_BYTES / GIB


def in_force(p: Any, table: np.ndarray, t: np.ndarray) -> np.ndarray:
    """A per-phase tenant value (T, P, B) in force at step ``t`` (B,): (B, T), batch-first."""
    now = t * p.interval_s
    phase = np.maximum((p.phase_at <= now).sum(axis=1) - 1, 0)  # (T, B)
    return np.take_along_axis(table, phase[:, None], axis=1)[:, 0].T


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
    # memory.high caps a tenant's DRAM (when there is room to demote to) where it acts on
    # DRAM: as given with memcg_limits "dram", scaled to the DRAM share with "tier_aware"
    high = in_force(p, p.memory_high_gib, sim.state.t - 1)
    mode = p.memcg_mode[:, None]
    high = np.where(mode == 2, high, np.where(mode == 1, high * p.toptier_share[:, None], np.inf))
    cxl_room = (
        ~p.is_cxl.T | (out.node_capacity_used_gib < p.capacity_gib.T - p.wm_low.T - 1e-6)
    ).all(1)
    over = out.tenant_dram_resident_gib - high
    assert (over[cxl_room] <= 1e-9 * np.maximum(high[cxl_room], 1.0)).all(), over.max()


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
    KernelConfig(memcg_limits="tier_aware"),
    KernelConfig(memcg_limits="dram", numa_scan="fixed"),
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


def test_solo_throughput_solves_each_tenant_phase_alone() -> None:
    """The solo throughput (performance's denominator) of every tenant slot and phase
    equals its problem solved alone in a batch of one: only the distinct problems are
    solved, absent tenants get 0 and padded phases their tenant's last phase's value."""
    from envs.model import NodeCurves, solo_throughput
    from envs.solver import solve_fixed_point

    scs = [mixed_scenario("train", i, episode_steps=20) for i in range(12)]
    p = Simulator(scs, seeds=range(12), jitter=0.1, n_tenants=4).params
    jit = 1.0 + 0.1 * np.random.default_rng(4).uniform(-1.0, 1.0, (3, 4, 12))
    got = solo_throughput(p, jit)
    T, P, B = p.threads.shape
    assert (p.phase_at[:, 1:] > 1e30).any() and not p.present.all()  # padding and absence
    for t in range(T):
        for ph in range(P):
            for b in range(B):
                if not p.present[t, b]:
                    assert got[t, ph, b] == 0.0
                    continue
                share = np.zeros((1, p.n_nodes, 1))
                share[0, p.local_dram[t, ph, b], 0] = 1.0
                one = solve_fixed_point(
                    cap=np.array([[64 * p.threads[t, ph, b] * p.mlp[t, ph, b] * jit[0, t, b]]]),
                    compute=np.array([[p.compute_ns[t, ph, b] * jit[1, t, b]]]),
                    rfrac=np.array([[p.read_fraction[t, ph, b]]]),
                    share=share,
                    remote=np.zeros((1, p.n_nodes, 1)),
                    bg_rd=np.zeros((p.n_nodes, 1)),
                    bg_wr=np.zeros((p.n_nodes, 1)),
                    nc=NodeCurves(
                        **{
                            f.name: getattr(p.curves, f.name)[:, b : b + 1]
                            for f in dataclasses.fields(NodeCurves)
                        }
                    ),
                    random=np.array([[p.random[t, ph, b]]]) if p.random.any() else None,
                )
                assert got[t, ph, b] == one.throughput[0, 0], (t, ph, b)


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


# --------------------------------------------------------------------------- memory.high / memory.low


def _random_actions(rng: np.random.Generator, B: int, T: int, N: int) -> Action:
    w = rng.integers(0, 256, size=(B, T, N)) * (rng.random((B, T, N)) < 0.8)
    w[: B // 4] = 0  # a quarter local-first: the most DRAM pressure
    rate = np.where(rng.random(B) < 0.25, 0.0, 10 ** rng.uniform(0, 4.8, B))
    return Action(w.astype(float), rate)


HIGH_SCENARIO = {
    "name": "high-cap",
    "episode_steps": 40,
    "hardware": {"preset": "spr-a1000", "nodes": {"dram0": {"capacity_gib": 48}}},
    "tenants": [
        {
            "name": "capped",
            "threads": 24,
            "mlp": 6,
            "compute_ns": 80,
            "read_fraction": 0.7,
            "working_set_gib": 30,
            "hotness": {"zipf_s": 0.8},
            "memory_high_gib": 16,
            "churn_per_s": 0.05,
            "grow_gib_per_s": 0.2,
            # memory.high lowered at 15 s: the excess is demoted at once
            "phases": [{"at_s": 15.0, "memory_high_gib": 6}, {"at_s": 30.0, "memory_high_gib": 12}],
        },
        {
            "name": "other",
            "threads": 8,
            "mlp": 2,
            "compute_ns": 100,
            "read_fraction": 0.9,
            "working_set_gib": 10,
            "hotness": {"hot_fraction": 0.1, "hot_access_fraction": 0.9},
            "memory_high_gib": 4,
            "start_s": 5,
        },
    ],
}


@pytest.mark.parametrize("scenario", ["colocation-protected", "high-cap"])
@pytest.mark.parametrize(
    "kernel",
    [
        KernelConfig(),
        KernelConfig(demotion=False),
        KernelConfig(demote_watermark_frac=0.02, promote_active_only=True),
        KernelConfig(promotion_throttle=True),
    ],
    ids=["default", "no-demotion", "tpp", "throttle"],
)
@pytest.mark.parametrize("mode", ["dram", "tier_aware"])
def test_memory_high_caps_dram_whatever_the_actions(
    scenario: str, kernel: KernelConfig, mode: str
) -> None:
    """A tenant's DRAM-resident GiB never exceeds its memory_high_gib where memory.high acts
    on DRAM (memcg_limits "dram"; "tier_aware": scaled to the DRAM share), at every step."""
    sc = load_scenario(HIGH_SCENARIO if scenario == "high-cap" else scenario)
    B = 16
    kernel = dataclasses.replace(kernel, memcg_limits=mode)
    sim = Simulator(sc, batch_size=B, seeds=3, kernel=kernel, jitter=0.05)
    p = sim.params
    scale = p.toptier_share[:, None] if mode == "tier_aware" else 1.0
    rng = np.random.default_rng(7)
    reached = np.zeros(p.n_tenants, dtype=bool)
    for _ in range(sc.episode_steps):
        out = sim.step(_random_actions(rng, B, p.n_tenants, p.n_nodes))
        high = in_force(p, p.memory_high_gib, sim.state.t - 1) * scale
        dram = out.tenant_dram_resident_gib
        assert (dram <= high + 1e-9).all(), (sim.state.t[0], (dram - high).max())
        reached |= (dram >= high - 0.05).any(0)
    capped = np.isfinite(p.memory_high_gib[:, 0, 0])
    assert reached[capped].all()  # the cap binds: the test is not vacuous


def test_memory_high_caps_dram_on_two_dram_nodes() -> None:
    """The same cap on a two-socket machine, the tenant interleaved over both DRAM nodes."""
    spec = {
        "name": "high-2s",
        "episode_steps": 10,
        "hardware": "spr-a1000-2s",
        "tenants": [
            {
                "name": "a",
                "threads": 8,
                "mlp": 4,
                "compute_ns": 50,
                "read_fraction": 0.7,
                "working_set_gib": 40,
                "memory_high_gib": 30,
                "phases": [{"at_s": 5.0, "memory_high_gib": 10}],
            }
        ],
    }
    sim = Simulator(load_scenario(spec), batch_size=1, kernel=KernelConfig(memcg_limits="dram"))
    p = sim.params
    for _ in range(10):
        out = sim.step([1, 1, 0], 0.0)
        high = in_force(p, p.memory_high_gib, sim.state.t - 1)
        assert (out.tenant_dram_resident_gib <= high + 1e-9).all(), (
            sim.state.t[0],
            out.tenant_dram_resident_gib,
            high,
        )


def _low_scenario(low: float) -> dict[str, Any]:
    return {
        "name": "low-protect",
        "episode_steps": 40,
        "hardware": {"preset": "spr-a1000", "nodes": {"dram0": {"capacity_gib": 16}}},
        "tenants": [
            {
                "name": "prot",
                "threads": 8,
                "mlp": 1,
                "compute_ns": 60,
                "read_fraction": 0.85,
                "working_set_gib": 6,
                "hotness": {"hot_fraction": 0.2, "hot_access_fraction": 0.9},
                "memory_low_gib": low,
            },
            {
                "name": "hog",
                "threads": 24,
                "mlp": 6,
                "compute_ns": 80,
                "read_fraction": 0.7,
                "working_set_gib": 30,
                "hotness": {"zipf_s": 0.6},
                "start_s": 5,
                "churn_per_s": 0.1,  # keeps allocating: DRAM stays under pressure
            },
        ],
    }


def _low_run(sc: Any, kernel: KernelConfig, seed: int) -> tuple[np.ndarray, np.ndarray, Simulator]:
    """DRAM-resident GiB (steps, B, T) and demotion MB/s (steps, B) under random actions."""
    B = 16
    sim = Simulator(load_scenario(sc), batch_size=B, seeds=seed, kernel=kernel)
    p = sim.params
    rng = np.random.default_rng(seed)
    dram, dem = [], []
    for _ in range(sim.scenarios[0].episode_steps):
        out = sim.step(_random_actions(rng, B, p.n_tenants, p.n_nodes))
        dram.append(out.tenant_dram_resident_gib)
        dem.append(out.demotion_mbps)
    return np.array(dram), np.array(dem), sim


@pytest.mark.parametrize(
    "kernel",
    [
        KernelConfig(),
        KernelConfig(demote_watermark_frac=0.02),
        KernelConfig(promotion_throttle=True),
    ],
    ids=["default", "tpp", "throttle"],
)
def test_memory_low_protects_from_kswapd_demotion(kernel: KernelConfig) -> None:
    """A tenant at or under memory_low_gib loses no DRAM page to kswapd while another,
    unprotected tenant still has DRAM pages; without the protection it does lose some.

    The protected tenant never churns or shrinks, so its DRAM-resident GiB can only fall
    by demotion, and demotion may not take it under its protection (memcg reclaim
    scans at least 32 pages of a cgroup over it: RECLAIM_SLACK_GIB).
    """
    dram, dem, _ = _low_run(_low_scenario(6.0), kernel, 1)
    low = 6.0
    prot, hog = dram[:, :, 0], dram[:, :, 1]
    floor = np.minimum(prot[:-1], low) - RECLAIM_SLACK_GIB - 1e-9
    assert (prot[1:] >= floor).all(), (prot[1:] - floor).min()
    # high demotion pressure, taken from the unprotected tenant, which had DRAM to give
    demoting = (dem[1:] > 0) & (hog[:-1] > 0)  # steps starting with the hog in DRAM
    assert demoting.sum() > 100
    assert ((hog[1:] < hog[:-1] - 1e-3) & demoting).any()
    # the same runs without memory.low: kswapd takes the first tenant's DRAM too
    dram0, _, _ = _low_run(_low_scenario(0.0), kernel, 1)
    drop = np.minimum(dram0[:-1, :, 0], low) - dram0[1:, :, 0]
    assert drop.max() > 0.005  # 40 times the reclaim slack


@pytest.mark.parametrize("dram_gib", [None, 26.0], ids=["shipped", "dram-26gib"])
def test_memory_low_shipped_colocation_protected(dram_gib: float | None) -> None:
    """colocation-protected: the service (memory.low 6 GiB) never loses DRAM to demotion. As
    shipped (32 GiB) the batch tenant's memory.high leaves it room; with 26 GiB of DRAM
    kswapd is woken all along but finds every batch page referenced within the inactive
    list's age (each is read tens of times a second) and gives up on the node: the
    service's DRAM is safe without its protection being tested by kswapd (before the
    reference check the oracle demotion took from the batch tenant all along;
    test_memory_low_protects_from_kswapd_demotion keeps a tenant cold enough to demote)."""
    sc = load_scenario("colocation-protected").model_dump(mode="json")
    if dram_gib is not None:
        sc["hardware"]["nodes"][0]["capacity_gib"] = dram_gib
    dram, dem, sim = _low_run(sc, KernelConfig(), 2)
    p = sim.params
    low = in_force(p, p.memory_low_gib, np.zeros(16, dtype=np.int64))[0]
    svc = int(np.flatnonzero(low > 0)[0])
    s = dram[:, :, svc]
    floor = np.minimum(s[:-1], low[svc]) - RECLAIM_SLACK_GIB - 1e-9
    assert (s[1:] >= floor).all(), (s[1:] - floor).min()
    if dram_gib is not None:
        assert (sim.state.kswapd_failures[0] == MAX_RECLAIM_RETRIES).all()
        # after the first intervals' memory.high reclaim kswapd demotes under 1 MB/s
        assert (dem[10:] < 1.0).all()


# --------------------------------------------------------------------------- NUMA-balancing threshold


def _threshold_run(
    rate: float, kernel: KernelConfig, steps: int = 24
) -> tuple[Any, list[Any], list[Any]]:
    sc = load_scenario("kv-store", episode_steps=steps)  # 2 s intervals, 24 GiB over 8 GiB DRAM
    p = compile_params(sc, batch_size=2, kernel=kernel)
    s = init_state(p, [0, 1])
    act = Action(np.zeros((2, 1, 2)), np.full(2, rate))  # local-first, promotion at ``rate``
    states, outs = [s], []
    for _ in range(steps):
        s, out = step(p, s, act)
        states.append(s)
        outs.append(out)
    return p, states, outs


def test_threshold_falls_one_unit_per_period_when_candidates_exceed_the_rate_limit() -> None:
    """Rate limit 1 MB/s, candidates ~100 MB/s: at the end of every threshold_period_s the
    DRAM node's hot threshold drops by THRESHOLD_UNIT_MS (to one unit at least), and only then."""
    period_s = 4.0  # two 2 s intervals
    p, states, outs = _threshold_run(1.0, KernelConfig(threshold_period_s=period_s))
    dram = int(np.flatnonzero(~p.is_cxl[:, 0])[0])
    cxl = int(np.flatnonzero(p.is_cxl[:, 0])[0])
    th = np.array([s.threshold_ms[dram] for s in states])  # (steps + 1, B)
    assert (th[0] == THRESHOLD_START_MS).all()
    period = round(period_s / p.interval_s[0])
    for k in range(1, len(states)):
        if k % period == 0:
            want = np.maximum(th[k - 1] - THRESHOLD_UNIT_MS, THRESHOLD_UNIT_MS)
        else:
            want = th[k - 1]
        np.testing.assert_array_equal(th[k], want, err_msg=f"step {k}")
        # the CXL node is no promotion target: its threshold never moves
        assert (states[k].threshold_ms[cxl] == THRESHOLD_START_MS).all()
    assert (th[-1] == THRESHOLD_UNIT_MS).all()  # the floor was reached
    cand = np.array([o.promotion_candidates_mbps for o in outs])
    assert (cand[1:] > 10 * 1.1).all()  # far above the 1 MB/s limit


def test_threshold_rises_when_candidates_are_scarce_and_follows_the_kernel_rule() -> None:
    """Rate limit 65536 MB/s: candidates are scarce, the threshold rises one unit a period
    to 2000 ms. At every period end the step applies envs.kernel's rule to the candidates
    counted in the period (promotion_candidates_mbps x interval, summed)."""
    period_s = 6.0
    p, states, outs = _threshold_run(65536.0, KernelConfig(threshold_period_s=period_s), 30)
    dram = int(np.flatnonzero(~p.is_cxl[:, 0])[0])
    dt = p.interval_s[0]
    period = round(period_s / dt)
    th = np.array([s.threshold_ms[dram] for s in states])
    counted = np.zeros(2)
    for k in range(1, len(states)):
        counted = counted + outs[k - 1].promotion_candidates_mbps * dt
        if k % period == 0:
            want = adapt_promotion_threshold(th[k - 1], counted, 65536.0, period_s)
            np.testing.assert_allclose(
                states[k - 1].cand_mb[dram] + outs[k - 1].promotion_candidates_mbps * dt,
                counted,
                rtol=1e-12,
            )
            counted = np.zeros(2)
            assert (states[k].cand_mb == 0).all()  # a new period starts
        else:
            want = th[k - 1]
            np.testing.assert_allclose(states[k].cand_mb[dram], counted, rtol=1e-12)
        np.testing.assert_array_equal(th[k], want, err_msg=f"step {k}")
    assert (np.diff(th[::period], axis=0) == THRESHOLD_UNIT_MS).any()
    assert (th[-1] == THRESHOLD_MAX_MS).all()


@pytest.mark.parametrize(
    ("rate", "kernel"),
    [
        (1.0, KernelConfig(threshold_period_s=4.0, threshold_adapt=False)),
        (0.0, KernelConfig(threshold_period_s=4.0)),
    ],
    ids=["adaptation-off", "promotion-off"],
)
def test_threshold_stays_without_adaptation_or_promotion(rate: float, kernel: KernelConfig) -> None:
    _, states, _ = _threshold_run(rate, kernel, 12)
    for s in states:
        assert (s.threshold_ms == THRESHOLD_START_MS).all()


@pytest.mark.parametrize(
    "name",
    [
        "cxl-spill",
        "tiering-fairness-low-high",
        "cxl-spill-tpp",
        "colocation-protected",
        "colocation-protected-dram",
    ],
)
def test_batched_equals_single_where_kswapd_runs_in_part_of_the_batch(name: str) -> None:
    """Reclaim computes the reference check on the elements where kswapd runs or
    memory.high reclaims (gathered from the batch): every element's outputs and state
    are still those it has stepped alone."""
    if name == "cxl-spill-tpp":
        name = "cxl-spill"
        kernel = KernelConfig(demote_watermark_frac=0.02)
    elif name == "colocation-protected-dram":  # memory.high on DRAM
        name = "colocation-protected"
        kernel = KernelConfig(memcg_limits="dram")
    else:
        kernel = KernelConfig()
    sc = load_scenario(name)
    b = 8
    p = compile_params(sc, batch_size=b, kernel=kernel, jitter=0.1)
    s = init_state(p, np.arange(b) + 3)
    rng = np.random.default_rng(5)
    T, N = p.n_tenants, p.n_nodes
    acts = []
    for _ in range(30):
        w = rng.integers(0, 8, (b, T, N)).astype(float)
        w[rng.uniform(size=b) < 0.4] = 0.0  # local-first: DRAM fills, kswapd wakes
        acts.append(Action(w, rng.uniform(0, 3000, b) * (rng.uniform(size=b) < 0.6)))
    outs, states = [], []
    for a in acts:
        s, o = step(p, s, a)
        outs.append(o)
        states.append(s)
    for i in range(b):
        q = compile_params(sc, kernel=kernel, jitter=0.1)
        si = init_state(q, [i + 3])
        for k, a in enumerate(acts):
            si, o = step(q, si, Action(a.weights[i : i + 1], a.promote_mbps[i : i + 1]))
            for f in dataclasses.fields(o):
                x, y = getattr(o, f.name)[0], getattr(outs[k], f.name)[i]
                assert np.array_equal(x, y), (i, k, f.name)
            for f in dataclasses.fields(si):
                x, y = getattr(si, f.name)[..., 0], getattr(states[k], f.name)[..., i]
                assert np.array_equal(x, y), (i, k, f.name)
