"""Tiering fairness: memcg limits (Linux, tier-aware), NUMA-balancing scanning, the scenario."""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

import numpy as np
import pytest

from envs import KernelConfig, Simulator, load_scenario
from envs.kernel import (
    MEMCG_CHARGE_BATCH,
    MEMCG_DRAM,
    MEMCG_TIER_AWARE,
    MEMCG_TOTAL,
    PAGES_PER_GIB,
    SCAN_PERIOD_MAX_MS,
    memcg_dram_high,
    memcg_high_delay_s,
    memcg_high_throttle,
    memcg_low,
    memcg_total_high,
    task_scan_max,
    task_scan_min,
    tier_aware_limit,
    update_task_scan_period,
)
from envs.scenario import ScenarioError

GIB_PAGES = float(PAGES_PER_GIB)
MIB_PER_GIB = 1024.0 * 1024.0 * 1024.0 / 1e6  # MB in a GiB
#: a kswapd scanning 100x the top of its bounds (0.2M-1M pages/s): its inactive list ages
#: in 13 ms, so the reference check lets most of the streamer's pages go and the
#: latecomer is promoted, as in the model before the reference check; the scanning tests
#: below need promotions to happen
FAST_KSWAPD = KernelConfig(kswapd_scan_pages_per_s=1e8)


# --------------------------------------------------------------------------- kernel formulas


def test_task_scan_bounds_follow_the_resident_set() -> None:
    """task_scan_min/max (kernel/sched/fair.c) for a 14 GiB task, a 220 MB copy and 256 GiB."""
    rss = np.array([14 * MIB_PER_GIB, 220.0, 256 * MIB_PER_GIB])
    # 14 GiB = 59 windows of 256 MB: floor 1000 / (2560 / 256) = 100 ms; max 60000 // 59
    assert task_scan_min(rss).tolist() == [100.0, 1000.0, 100.0]
    assert task_scan_max(rss).tolist() == [1016.0, 60000.0, 100.0]
    # the whole address space at least once per scan_period_max unless that needs more
    # than 2560 MB/s (the 256 GiB streamer: 107 s), never faster than 2560 MB/s
    windows = np.ceil(rss / 256.0)
    slowest = np.maximum(SCAN_PERIOD_MAX_MS, windows * 100.0)
    assert (task_scan_max(rss) * windows <= slowest).all()
    assert (256.0 / task_scan_min(rss) * 1000 <= 2560.0).all()


def test_update_task_scan_period_branches() -> None:
    """Idle or failed: doubles; local private faults: +30%; remote private: shorter."""
    args = dict(smin_ms=100.0, smax_ms=1016.0)
    # no recorded fault, then a failed migration: twice as long, clamped at smax
    assert update_task_scan_period(300.0, 0, 0, 0, 0, 0, **args) == 600.0
    assert update_task_scan_period(600.0, 5, 0, 5, 0, 1, **args) == 1016.0
    # all local and private (tiering mode's promoted faults): (10 - 7) slots of 10% each
    assert update_task_scan_period(100.0, 5, 0, 5, 0, 0, **args) == 130.0
    # half remote, all private: faster by (7 - 5) slots
    assert update_task_scan_period(1000.0, 5, 5, 5, 0, 0, **args) == 800.0
    # mostly shared: slower whatever the locality
    assert update_task_scan_period(1000.0, 1, 9, 2, 8, 0, **args) == 1016.0


def test_memcg_high_delay_and_throttle() -> None:
    """calculate_high_delay: 64 s * overage^2 per 64-page batch; the sleep capped at 2 s."""
    assert memcg_high_delay_s(110.0, 100.0) == pytest.approx(0.64)
    assert memcg_high_delay_s(100.0, 100.0) == 0.0
    # 1% over owes 6.4 ms per batch: under 10 ms, no sleep at all
    assert memcg_high_throttle(101.0, 100.0, 64) == 0.0
    assert memcg_high_throttle(110.0, 100.0, 640) == pytest.approx(6.4)
    assert memcg_high_throttle(200.0, 100.0, 64) == pytest.approx(2.0)


def test_tier_aware_limit_matches_the_rfc_example() -> None:
    """150 G DRAM + 50 G CXL: memory.low 20G -> toptier_low 15G, high 40G -> 30G."""
    assert tier_aware_limit([20.0, 40.0], 150.0, 200.0).tolist() == [15.0, 30.0]


def test_memcg_limits_in_force_per_mode() -> None:
    """memory.high 40G, memory.low 20G on a machine with 3/4 of its memory in DRAM: the
    kernel's limits act on total usage (no DRAM cap), tier-aware ones cap DRAM at 3/4 of
    them, TierGym's old mode puts them on DRAM as given; the indices are the modes'."""
    from envs.model import MEMCG_LIMIT_MODES

    assert [MEMCG_LIMIT_MODES.index(m) for m in ("total", "tier_aware", "dram")] == [
        MEMCG_TOTAL,
        MEMCG_TIER_AWARE,
        MEMCG_DRAM,
    ]
    modes = np.array([MEMCG_TOTAL, MEMCG_TIER_AWARE, MEMCG_DRAM])
    assert memcg_dram_high(40.0, modes, 0.75).tolist() == [np.inf, 30.0, 40.0]
    assert memcg_low(20.0, modes, 0.75).tolist() == [20.0, 15.0, 20.0]
    assert memcg_total_high(40.0, modes).tolist() == [40.0, 40.0, np.inf]


def test_memcg_limits_on_arrays_are_each_elements_limits_and_warn_nothing() -> None:
    """The limits in force over a batch (16 instances, unlimited and finite memory.high, every
    mode) are each element's scalar limits, and no "invalid value" warning reaches the user
    (train.py printed numpy's, raised by the vectorised loop, dozens of times)."""
    import warnings
    from types import SimpleNamespace

    from envs.model import memcg_limits

    B = 16
    mode = np.arange(B, dtype=np.int64) % 3
    top = np.linspace(0.06, 0.9, B)
    high = np.where(np.arange(B) % 2 == 0, np.inf, 40.0)[None].repeat(2, 0)  # (T=2, B)
    low = np.where(np.arange(B) % 4 == 0, 0.0, 20.0)[None].repeat(2, 0)
    p = SimpleNamespace(memcg_mode=mode, toptier_share=top)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dram_high, low_in_force, total_high = memcg_limits(p, high, low)  # type: ignore[arg-type]
    for b in range(B):
        m, t = np.array([mode[b]]), np.array([top[b]])
        assert dram_high[0, b] == memcg_dram_high(np.array([high[0, b]]), m, t)[0]
        assert low_in_force[0, b] == memcg_low(np.array([low[0, b]]), m, t)[0]
        assert total_high[0, b] == memcg_total_high(np.array([high[0, b]]), m)[0]
    assert np.isinf(dram_high[0, mode == MEMCG_TOTAL]).all()
    assert dram_high[0, 1] == 40.0 * top[1]  # tier_aware, finite high


# --------------------------------------------------------------------------- memcg limits in the model


def _over_high_scenario(mode: str | None) -> dict[str, Any]:
    """One tenant of 24 GiB, memory.high 16 GiB, re-allocating 5% of its pages a second."""
    sc: dict[str, Any] = {
        "name": "over-high",
        "episode_steps": 20,
        "hardware": {"preset": "spr-a1000", "nodes": {"dram0": {"capacity_gib": 64}}},
        "tenants": [
            {
                "name": "a",
                "threads": 8,
                "mlp": 4,
                "compute_ns": 50,
                "read_fraction": 0.7,
                "working_set_gib": 24,
                "memory_high_gib": 16,
                "churn_per_s": 0.05,
            }
        ],
    }
    if mode is not None:
        sc["kernel"] = {"memcg_limits": mode}
    return sc


def _run(sc: dict[str, Any], kernel: KernelConfig | None = None, rate: float = 65536.0) -> Any:
    sim = Simulator(load_scenario(sc), batch_size=1, kernel=kernel)
    outs = [sim.step(np.zeros((1, 1, 2)), rate) for _ in range(sim.scenarios[0].episode_steps)]
    return sim, outs


def test_memory_high_on_total_usage_demotes_and_throttles() -> None:
    """Linux's memory.high: a cgroup over it on total usage that keeps charging has its DRAM
    demoted (demotion counts as reclaim progress) and sleeps; on DRAM usage (the old
    meaning) it keeps 16 GiB of DRAM and runs at full speed."""
    _, total = _run(_over_high_scenario("total"))
    _, dram = _run(_over_high_scenario("dram"))
    late = slice(5, None)
    dram_total = np.array([o.tenant_dram_resident_gib[0, 0] for o in total[late]])
    dram_dram = np.array([o.tenant_dram_resident_gib[0, 0] for o in dram[late]])
    # at most what promotion brings back within an interval (kswapd_gibps 2 GiB/s + room)
    assert dram_total.max() < 2.6 and dram_total.mean() < 2.0
    assert np.allclose(dram_dram, 16.0, atol=0.01)
    perf_total = np.mean([o.tenant_norm_perf[0, 0] for o in total[late]])
    perf_dram = np.mean([o.tenant_norm_perf[0, 0] for o in dram[late]])
    # 50% over high: 16 s owed per 64-page batch, capped at 2 s: the throttle dominates
    assert perf_total < 0.2 * perf_dram


def test_memory_events_high_count_reclaim_high_runs() -> None:
    """memory.events "high": one reclaim_high run per 64 pages (MEMCG_CHARGE_BATCH) a
    cgroup over memory.high charges; none on DRAM usage (no memory.high on total usage)
    and none for a cgroup that charges nothing."""
    _, total = _run(_over_high_scenario("total"))
    _, dram = _run(_over_high_scenario("dram"))
    churn = 0.05 * 24 * GIB_PAGES  # pages re-allocated a second (1 s intervals)
    events = np.array([o.tenant_memory_events_high[0, 0] for o in total[1:]])
    np.testing.assert_allclose(events, churn / MEMCG_CHARGE_BATCH, rtol=0.05)
    assert all(o.tenant_memory_events_high[0, 0] == 0.0 for o in dram)
    sc = _over_high_scenario("total")
    sc["tenants"][0]["churn_per_s"] = 0.0
    _, still = _run(sc)
    assert all(o.tenant_memory_events_high[0, 0] == 0.0 for o in still[1:])


def test_memory_high_on_total_usage_spares_a_cgroup_that_does_not_charge() -> None:
    """Without new charges nothing runs mem_cgroup_handle_over_high: after the first
    interval's allocation (demoted, over high) promotion brings the pages back, toward
    and past memory.high (16 GiB), and nothing demotes them again. The tenant streams
    (a 2.5 s pass over its 24 GiB), so a scanned page faults within the 1 s scan window
    with probability 1 / 2.5 (issue #49): 7.4 GiB are back after 20 s, 13 after 60."""
    sc = _over_high_scenario("total")
    sc["tenants"][0]["churn_per_s"] = 0.0
    sc["episode_steps"] = 60
    _, outs = _run(sc)
    dram = np.array([o.tenant_dram_resident_gib[0, 0] for o in outs])
    assert (np.diff(dram[1:]) > 0).all()
    assert 6.0 < dram[19] < 9.0 and dram[-1] > 12.0
    assert outs[-1].tenant_norm_perf[0, 0] > outs[19].tenant_norm_perf[0, 0] + 0.1


def test_scenario_memcg_limits_overrides_the_kernel_option() -> None:
    sim = Simulator(
        [load_scenario(_over_high_scenario(m)) for m in (None, "tier_aware", "dram")],
        batch_size=3,
        kernel=KernelConfig(memcg_limits="dram"),
    )
    assert sim.params.memcg_mode.tolist() == [2, 1, 2]
    assert sim.params.toptier_share[0] == pytest.approx(64 / (64 + 238.4))


def test_bad_memcg_limits_are_rejected() -> None:
    with pytest.raises(ValueError, match=r"KernelConfig.memcg_limits: got 'dramm'"):
        KernelConfig(memcg_limits="dramm")
    with pytest.raises(ValueError, match=r"KernelConfig.numa_scan"):
        KernelConfig(numa_scan="fast")
    with pytest.raises(ScenarioError, match="memcg_limits"):
        load_scenario(_over_high_scenario("toptier"))


# --------------------------------------------------------------------------- NUMA-balancing scanning


def test_scanning_starts_after_the_delay_and_adapts_per_task() -> None:
    """tiering-fairness: the streamer's 256 GiB scan at task_scan_min = task_scan_max =
    100 ms per window from 1 s on; the latecomer starts at 100 ms and, since its only
    recorded faults are promotions (remote, private: local + shared == 0), doubles its
    period at each pass up to task_scan_max (1016 ms for 14 GiB) within two minutes.
    (With kswapd in its bounds nothing is promoted, no fault is recorded and the period
    stays at 100 ms: test_tiering_fairness_latecomer_stays_on_cxl_across_the_scan_range.)"""
    sim = Simulator("tiering-fairness", batch_size=1, kernel=FAST_KSWAPD)
    periods = []
    for _ in range(sim.scenarios[0].episode_steps):
        sim.step(np.zeros((1, 2, 2)), 65536.0)
        periods.append(sim.state.scan_period_ms[:, 0].copy())
    per = np.array(periods)  # (steps, T)
    assert (per[:, 0] == 100.0).all()
    assert (per[:11, 1] == 0.0).all()  # not started (starts at 60 s, steps of 5 s)
    assert per[12, 1] == 100.0
    assert (np.diff(per[12:, 1]) >= 0).all()
    steps = per[12:, 1][np.r_[True, np.diff(per[12:, 1]) > 0]]
    assert steps.tolist() == [100.0, 200.0, 400.0, 800.0, 1016.0]
    assert per[12 + 24, 1] == 1016.0  # at task_scan_max two minutes after it starts


def test_fixed_scanning_is_the_old_rate() -> None:
    """numa_scan="fixed" scans 256 MB per second per tenant: the latecomer's 14 GiB take a
    minute, against ~6 s with per-task scanning (task_scan_min 100 ms for 14 GiB); with a
    kswapd fast enough to make room (FAST_KSWAPD)."""
    share = {}
    for mode in ("task", "fixed"):
        kernel = dataclasses.replace(FAST_KSWAPD, numa_scan=mode)
        sim = Simulator("tiering-fairness", batch_size=1, kernel=kernel)
        dram = []
        for _ in range(24):  # to 120 s
            out = sim.step(np.zeros((1, 2, 2)), 65536.0)
            dram.append(out.tenant_dram_resident_gib[0, 1])
        share[mode] = np.array(dram)
    assert share["task"][13] > 8.0  # 70 s: 10 s after the start
    assert share["fixed"][13] < 2.5  # about 256 MB/s from 61 s (scan delay) to 70 s
    assert share["fixed"][-1] > share["fixed"][13] + 4.0  # still rising at 120 s


# --------------------------------------------------------------------------- the scenario


def _variants() -> dict[str, Any]:
    mod = importlib.import_module("scripts.tiering_fairness")
    return dict(mod.run_variants())


@pytest.fixture(scope="module")
def variants() -> dict[str, Any]:
    return _variants()


def test_tiering_fairness_stacked_is_below_alone(variants: dict[str, Any]) -> None:
    """On the published box (spr-a1000-box) the latecomer stacked on the streamer loses
    performance against alone, and memory.low then memory.high tier-aware each give some
    of it back: the published direction (-25.9%, -11.1%, under 1%). At the default
    kswapd scan throughput the streamer's pass (about 3.4 s: 16 threads of 10 misses
    stream ~80 GB/s) is longer than the inactive list's age (2.6 s), so kswapd lets a
    quarter of the streamer's pages go at each look and the latecomer reaches DRAM."""
    rel = variants["rel_alone"]
    assert rel[0] == 1.0
    assert 0.85 < rel[1] < 0.97  # measured 0.928 (issue #49)
    assert rel[1] <= rel[2] + 1e-9 and rel[2] < rel[3]
    assert rel[3] > 0.95  # measured 0.966
    assert variants["dram_gib"][-1, 1] > 13.9


@pytest.fixture(scope="module")
def scan_range() -> dict[float, dict[str, Any]]:
    mod = importlib.import_module("scripts.tiering_fairness")
    return dict(mod.run_range())


def test_tiering_fairness_trap_holds_where_the_age_exceeds_the_streamer_s_pass(
    scan_range: dict[float, dict[str, Any]],
) -> None:
    """Per page and per pass (issue #49): at 0.2M pages/s the inactive list ages in 6.6 s,
    longer than the streamer's ~3.4 s pass, so every streamer page kswapd looks at was
    referenced (min(1, age / pass) = 1), kswapd gives up on DRAM within two minutes and
    the latecomer stays on CXL, stacked or with memory.low; at 0.5M and 1M pages/s (2.6
    and 1.3 s) a look lets 1 - age / pass of the streamer's pages go, kswapd never gives
    up and the latecomer ends in DRAM. memory.high tier-aware holds the streamer to
    204.8 GiB of DRAM, so the latecomer allocates into DRAM at once at every R."""
    mod = importlib.import_module("scripts.tiering_fairness")
    assert sorted(scan_range) == [2e5, 5e5, 1e6]
    on = scan_range[2e5]["time_s"] > 60
    for r, rec in scan_range.items():
        for b in (1, 2):  # stacked, memory.low
            if r == 2e5:
                assert (rec["dram_gib"][on, b] < 0.5).all()
                assert mod.gave_up_s(rec, b) <= 120.0
            else:
                assert rec["dram_gib"][-1, b] > 13.9
                assert mod.gave_up_s(rec, b) == float("inf")
        assert (rec["dram_gib"][on, 3] > 13.9).all()  # low + high tier-aware: in DRAM
        rel = rec["rel_alone"]  # memory.low: as stacked or better (within half a point)
        assert rel[2] > rel[1] - 0.005 and max(rel[1], rel[2]) < rel[3]


def test_tiering_fairness_low_high_tier_aware_helps(variants: dict[str, Any]) -> None:
    """memory.high 256 GiB on the streamer, tier-aware: its DRAM is held to 256 * 256/320 =
    204.8 GiB, 51 GiB of it streams from CXL, and the latecomer allocates into the DRAM
    left free from its start (0.966 of alone against 0.928 stacked). The streamer pays:
    stacked it had nearly all of its pages in DRAM."""
    sdram = variants["streamer_dram_gib"][variants["time_s"] >= 120, 3]
    assert (sdram <= 204.8 + 1e-6).all() and (sdram > 204.0).all()
    rel = variants["rel_alone"]
    assert rel[3] > rel[1] + 0.02
    assert variants["streamer_mean_perf"][3] < variants["streamer_mean_perf"][1] - 0.1


def test_tiering_fairness_variants_load() -> None:
    for name in ("tiering-fairness", "tiering-fairness-alone", "tiering-fairness-low"):
        assert load_scenario(name).kernel is None
    sc = load_scenario("tiering-fairness-low-high")
    assert sc.kernel is not None and sc.kernel.memcg_limits == "tier_aware"
    assert [t.memory_high_gib for t in sc.tenants] == [256.0, None]
    assert dataclasses.is_dataclass(KernelConfig())


def test_tiering_modes_keep_a_scenario_s_own_memcg_limits() -> None:
    """A scenario's ``kernel.memcg_limits`` outranks every per-step tiering mode, as it
    outranks the kernel configuration at compile time (memcg-fair's mode sets "dram")."""
    from envs.model import MEMCG_LIMIT_MODES, compile_params, kernel_arrays, with_kernel_rows
    from envs.spaces import mode_kernels

    fixed = load_scenario("tiering-fairness-low-high")  # kernel: {memcg_limits: tier_aware}
    free = load_scenario("tiering-fairness")
    p = compile_params([fixed, free])
    table = kernel_arrays(mode_kernels(KernelConfig(), ("default", "memcg-fair")))
    q = with_kernel_rows(p, table, np.array([1, 1]))  # memcg-fair's mode in both
    assert [MEMCG_LIMIT_MODES[m] for m in q.memcg_mode] == ["tier_aware", "dram"]
    assert q.promo_throttle.tolist() == [True, True]
