"""Reclaim as the kernel does it: the LRU reference check, kswapd's scan throughput and
its give-up, memory.low's scan scaling, and promotion on a node with plenty of room.

Each test checks a rule of mm/vmscan.c, mm/migrate.c or kernel/sched/fair.c on the
model's own numbers (envs/kernel.py, envs/model.py ``lru_reclaim`` and
``reclaim_and_demote``), not a published outcome.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from envs import Action, KernelConfig, compile_params, init_state, load_scenario, step
from envs.kernel import (
    MAX_RECLAIM_RETRIES,
    SWAP_CLUSTER_MAX,
    inactive_anon_target,
    inactive_ratio,
    kswapd_failures_after,
    kswapd_hopeless,
    memcg_reclaim_scan,
    pgdat_free_space_enough,
)
from envs.model import (
    BUCKET_EDGES,
    K_BUCKETS,
    PAGES_PER_GIB,
    access_probability,
    lru_reclaim,
)

GIB_PAGES = float(PAGES_PER_GIB)  # 4 KiB pages in a GiB
R = KernelConfig().kswapd_scan_pages_per_s
DT = np.ones(1)  # a 1 s interval


# --------------------------------------------------------------------------- kernel rules


def test_inactive_is_low_ratio_is_int_sqrt_of_ten_gib() -> None:
    """inactive_is_low: ratio int_sqrt(10 * gb), 1 under a GiB; the inactive list is kept at
    lru / (1 + ratio): 256 GiB -> 50 (5.02 GiB inactive), 14 GiB -> 11, 1 GiB -> 3."""
    gib = np.array([256.0, 14.0, 10.0, 1.0, 0.99, 0.0])
    assert inactive_ratio(gib * GIB_PAGES).tolist() == [50.0, 11.0, 10.0, 3.0, 1.0, 1.0]
    target = inactive_anon_target(gib * GIB_PAGES) / GIB_PAGES
    np.testing.assert_allclose(target, gib / (1.0 + np.array([50, 11, 10, 3, 1, 1])))
    # inactive * ratio >= active at the target: inactive_is_low is false there, and true
    # one page below it
    lru = 256 * GIB_PAGES
    inactive = inactive_anon_target(lru)
    assert inactive * 50 >= lru - inactive - 1e-6
    assert (inactive - 1) * 50 < lru - (inactive - 1)


def test_kswapd_failures_climb_per_fruitless_pass_and_reset_on_progress() -> None:
    """balance_pgdat adds one per pass that reclaims nothing, up to MAX_RECLAIM_RETRIES (16),
    where kswapd gives up; shrink_node resets the count on any reclaim that succeeds."""
    assert MAX_RECLAIM_RETRIES == 16
    f = np.array([0.0, 10.0, 15.5, 16.0, 7.0, 3.0])
    passes = np.array([2.5, 2.5, 2.5, 2.5, 2.5, 2.5])
    ran = np.array([True, True, True, False, True, False])
    progress = np.array([False, False, False, False, True, True])
    out = kswapd_failures_after(f, passes, ran, progress)
    assert out.tolist() == [2.5, 12.5, 16.0, 16.0, 0.0, 0.0]
    assert kswapd_hopeless(out).tolist() == [False, False, True, True, False, False]


def test_get_scan_count_scales_a_protected_cgroup_by_its_memory_low() -> None:
    """get_scan_count: scan = size - size * low / (usage + 1), at least SWAP_CLUSTER_MAX;
    a cgroup at or under memory.low is skipped (kswapd never retries with
    memcg_low_reclaim)."""
    size, usage = 1000.0, 4000.0
    assert memcg_reclaim_scan(size, 0.0, usage) == size  # unprotected: the whole list
    assert memcg_reclaim_scan(size, 2000.0, usage) == pytest.approx(size * (1 - 2000 / 4001))
    assert memcg_reclaim_scan(size, 3999.0, usage) == SWAP_CLUSTER_MAX  # the floor
    assert memcg_reclaim_scan(size, 4000.0, usage) == 0.0
    assert memcg_reclaim_scan(size, 5000.0, usage) == 0.0


# --------------------------------------------------------------------------- lru_reclaim


def _params(kernel: KernelConfig | None = None) -> Any:
    return compile_params(load_scenario("kv-store"), batch_size=1, kernel=kernel)


def _lru(T: int, gib: float) -> np.ndarray:
    """(T, K, 1) GiB: each tenant's ``gib`` spread over the buckets by their sizes."""
    per_k = gib * np.diff(BUCKET_EDGES)
    return np.broadcast_to(per_k[None, :, None], (T, K_BUCKETS, 1)).copy()


def test_reference_check_lets_go_what_was_not_referenced_within_the_age() -> None:
    """A look lets a page go with probability exp(-a * age), where the age of the inactive
    list is a pass over it at R pages/s: unreferenced pages are demoted in proportion, not
    coldest bucket first (the hottest bucket with a chance gives pages while colder
    buckets still hold some)."""
    p = _params()
    on = _lru(1, 8.0)
    rate = np.linspace(0.0, 3.0, K_BUCKETS)[None, :, None]  # accesses per page per second
    zero = np.zeros((1, 1))
    usage = np.full((1, 1), 8.0)
    got, per_pass, pass_s = lru_reclaim(p, on, np.zeros_like(on), zero, usage, rate, DT)
    inactive = inactive_anon_target(8.0 * GIB_PAGES)  # 8 GiB: ratio 8
    assert pass_s[0] == pytest.approx(inactive / R)
    age = pass_s[0]
    miss = np.exp(-rate[0, :, 0] * age)
    # kswapd looks at R pages/s of the inactive list, whose buckets are those of the lruvec
    expect = R / GIB_PAGES * (on[0, :, 0] / 8.0) * miss
    np.testing.assert_allclose(got[0, :, 0], expect, rtol=1e-5)
    assert per_pass[0] == pytest.approx(inactive * (on[0, :, 0] * miss).sum() / 8.0, rel=1e-5)
    # every bucket gives in proportion to exp(-a * age): no oracle
    assert (got[0, :, 0] > 0).all()
    np.testing.assert_allclose(got[0, :, 0] / on[0, :, 0], (R / GIB_PAGES / 8.0) * miss, rtol=1e-5)
    # what was allocated this interval is referenced at its first look (the instantiating
    # fault): every look when a pass is longer than the interval, else a pass's share
    short = np.full(1, 0.5 * pass_s[0])
    got_fresh, pp_fresh, _ = lru_reclaim(p, on, on, zero, usage, rate, short)
    assert (got_fresh == 0).all() and pp_fresh[0] == 0.0
    long = np.full(1, 10.0 * pass_s[0])
    got_ten, _, _ = lru_reclaim(p, on, on, zero, usage, rate, long)
    np.testing.assert_allclose(got_ten, 0.9 * got, rtol=1e-9)


def test_all_pages_referenced_within_the_age_means_nothing_to_let_go() -> None:
    """Pages accessed far more often than once per inactive age (a streamer's every page
    every few seconds against a list that ages in about a second) are all referenced:
    a pass reclaims less than a page."""
    p = _params()
    on = _lru(1, 8.0)
    rate = np.full((1, K_BUCKETS, 1), 300.0)
    got, per_pass, pass_s = lru_reclaim(
        p, on, np.zeros_like(on), np.zeros((1, 1)), np.full((1, 1), 8.0), rate, DT
    )
    assert rate[0, 0, 0] * pass_s[0] > 50  # references per page per age
    assert per_pass[0] < 1.0
    assert (got == 0).all()


def test_memory_low_scales_a_protected_cgroup_s_scan_and_ages_its_list() -> None:
    """Two equal lruvecs, one with memory.low at half its usage: kswapd scans it at
    1 - low / (usage + 1 page) of the other's rate, so its inactive list ages by the
    inverse; at or under memory.low it is not scanned at all."""
    p = _params()
    on = _lru(2, 4.0)
    usage = np.full((2, 1), 4.0)
    cold = np.zeros((2, K_BUCKETS, 1))  # never referenced: every look lets go
    prot = np.array([[0.0], [2.0]])
    got, _, pass_s = lru_reclaim(p, on, np.zeros_like(on), prot, usage, cold, DT)
    scale = 1.0 - 2.0 * GIB_PAGES / (4.0 * GIB_PAGES + 1.0)
    np.testing.assert_allclose(got[1].sum() / got[0].sum(), scale, rtol=1e-9)
    inactive = inactive_anon_target(4.0 * GIB_PAGES)
    assert pass_s[0] == pytest.approx(inactive * (1 + scale) / R)
    # with references, the protected list's longer age lets less of each look go
    warm = np.full((2, K_BUCKETS, 1), 1.0)
    got_w, _, pass_w = lru_reclaim(p, on, np.zeros_like(on), prot, usage, warm, DT)
    ages = np.array([pass_w[0], pass_w[0] / scale])
    expect = np.exp(-ages) * np.array([1.0, scale])
    np.testing.assert_allclose(got_w[:, 0, 0] / got_w[0, 0, 0], expect / expect[0], rtol=1e-5)
    # at its protection: skipped
    got_p, _, _ = lru_reclaim(p, on, np.zeros_like(on), np.array([[0.0], [4.0]]), usage, cold, DT)
    assert (got_p[1] == 0).all() and (got_p[0] > 0).all()


def test_access_probability_is_poisson() -> None:
    x = np.array([0.0, 1e-6, 0.1, 1.0, 5.0, 50.0])
    np.testing.assert_allclose(access_probability(x), 1 - np.exp(-x), rtol=1e-6, atol=1e-7)


# --------------------------------------------------------------------------- the step


def _scenario(tenants: list[dict[str, Any]], dram_gib: float = 8.0, steps: int = 30) -> Any:
    return load_scenario(
        {
            "name": "reclaim",
            "interval_s": 1.0,
            "episode_steps": steps,
            "hardware": {"preset": "spr-a1000", "nodes": {"dram0": {"capacity_gib": dram_gib}}},
            "tenants": tenants,
        }
    )


HOT = {  # a streamer: every page of its 9 GiB many times a second
    "name": "hot",
    "threads": 16,
    "mlp": 10,
    "compute_ns": 5,
    "read_fraction": 1.0,
    "working_set_gib": 9.0,
    "hotness": {"zipf_s": 0.0},
}


COLD = {  # one thread, 20 us between misses: each page a few times a minute
    "name": "cold",
    "threads": 1,
    "mlp": 1,
    "compute_ns": 20000,
    "read_fraction": 1.0,
    "working_set_gib": 4.0,
    "hotness": {"zipf_s": 0.0},
}


def _run(sc: Any, steps: int, kernel: KernelConfig | None = None, rate: float = 65536.0) -> Any:
    p = compile_params(sc, batch_size=1, kernel=kernel)
    s = init_state(p, [0])
    act = Action(np.zeros((1, p.n_tenants, p.n_nodes)), np.full(1, rate))
    states, outs = [s], []
    for _ in range(steps):
        s, out = step(p, s, act)
        states.append(s)
        outs.append(out)
    return p, states, outs


def test_all_referenced_top_tier_demotes_nothing_and_kswapd_gives_up() -> None:
    """DRAM full of a streamer's pages, 1 GiB more of them on CXL as promotion candidates:
    every promotion fails (free memory under HIGH, migrate_balanced_pgdat) and wakes
    kswapd, whose every pass finds every page referenced; kswapd_failures climbs by one
    per pass (the inactive list at R pages/s) to MAX_RECLAIM_RETRIES, then kswapd is no
    longer woken and nothing moves."""
    p, states, outs = _run(_scenario([HOT]), 20)
    dram = 0
    used = np.array([o.node_capacity_used_gib[0, dram] for o in outs])
    assert (p.capacity_gib[dram, 0] - used < p.wm_high[dram, 0]).all()  # under HIGH
    assert all(o.demotion_mbps[0] == 0.0 for o in outs)
    assert all(o.promotion_mbps[0] == 0.0 for o in outs)
    assert sum(o.promotion_candidates_mbps[0] for o in outs) > 100.0  # they were wanted
    f = np.array([s.kswapd_failures[dram, 0] for s in states])
    pass_s = inactive_anon_target(used[0] * GIB_PAGES) / R
    k = np.arange(len(f))
    np.testing.assert_allclose(f, np.minimum(k * 1.0 / pass_s, MAX_RECLAIM_RETRIES), rtol=1e-6)
    assert f[-1] == MAX_RECLAIM_RETRIES
    assert (np.array([o.tenant_dram_resident_gib[0, 0] for o in outs]) < 8.0).all()


def test_hopeless_kswapd_is_not_woken_until_reclaim_succeeds() -> None:
    """A node kswapd has given up on (16 failures) is not woken by failed promotions even
    when cold pages sit there to demote: wakeup_kswapd returns early. One failure less and
    it runs, demotes the cold pages and resets the count."""
    late = dict(HOT, name="late", working_set_gib=4.0, start_s=3.0)
    sc = _scenario([COLD, dict(HOT, working_set_gib=3.5), late], steps=10)
    p, states, _ = _run(sc, 3)
    s = states[3]  # DRAM holds both; the newcomer allocates (on CXL) in the next step
    assert p.capacity_gib[0, 0] - s.place[:, :, 0, 0].sum() > p.wm_promo[0, 0]
    act = Action(np.zeros((1, 3, p.n_nodes)), np.full(1, 65536.0))
    for f0, demotes in ((float(MAX_RECLAIM_RETRIES), False), (MAX_RECLAIM_RETRIES - 1.0, True)):
        fail = s.kswapd_failures.copy()
        fail[0] = f0
        s1, out = step(p, dataclasses.replace(s, kswapd_failures=fail), act)
        assert bool(out.demotion_mbps[0] > 0) == demotes
        assert s1.kswapd_failures[0, 0] == (0.0 if demotes else f0)


def test_a_cold_tenant_is_demoted_first_by_the_reference_check() -> None:
    """A cold tenant (one thread, 20 us between misses: a page a few times a minute) and a
    streamer share DRAM; a third tenant's hot pages wait on CXL. kswapd's looks find the
    streamer's pages referenced and the cold tenant's not: the cold tenant's DRAM goes,
    the streamer keeps all of its own, the newcomer is promoted into the room."""
    late = dict(HOT, name="late", working_set_gib=2.0, start_s=3.0)
    sc = _scenario([COLD, dict(HOT, working_set_gib=3.5), late])
    _, states, outs = _run(sc, 30)
    dram = np.array([o.tenant_dram_resident_gib[0] for o in outs])  # (steps, T)
    assert dram[3, 2] < 0.5  # the newcomer starts on CXL
    hot = dram[1:, 1]
    assert (np.diff(hot) >= -1e-9).all()  # the streamer loses nothing
    assert dram[-1, 0] < dram[2, 0] - 1.5  # the cold tenant gives its DRAM
    assert dram[-1, 2] > 1.5  # and the newcomer gets it
    assert max(s.kswapd_failures[0, 0] for s in states[5:]) == 0.0  # every pass reclaimed


def test_memory_high_reclaim_resets_kswapd_failures() -> None:
    """shrink_node resets kswapd_failures for any reclaim that succeeds on the node, memcg
    reclaim for memory.high included: a cgroup over memory.high (total usage) that charges
    pages demotes DRAM and revives a hopeless kswapd."""
    tenant = {
        "name": "a",
        "threads": 8,
        "mlp": 4,
        "compute_ns": 50,
        "read_fraction": 0.7,
        "working_set_gib": 24.0,
        "memory_high_gib": 16.0,
        "churn_per_s": 0.05,
    }
    sc = _scenario([tenant], dram_gib=64.0)
    p = compile_params(sc, batch_size=1)
    s = init_state(p, [0])
    s = dataclasses.replace(s, kswapd_failures=np.full_like(s.kswapd_failures, 16.0))
    act = Action(np.zeros((1, 1, p.n_nodes)), np.full(1, 65536.0))
    s, _ = step(p, s, act)  # allocates (charges) 24 GiB over memory.high
    s, out = step(p, s, act)  # churn charges again: memory.high reclaim demotes
    assert out.demotion_mbps[0] > 0
    assert s.kswapd_failures[0, 0] == 0.0


def _promote_once(filler_gib: float) -> tuple[Any, Any, Any]:
    """A streamer's 2 GiB on CXL and a cold tenant's ``filler_gib`` in a 32 GiB DRAM node;
    after the allocating step at a 1 MB/s rate limit, one step with the hot threshold at
    1 us (the scanner starts after 1 s). Returns the params, the state before that step
    and its outputs."""
    filler = {
        "name": "filler",
        "threads": 1,
        "mlp": 1,
        "compute_ns": 20000,
        "read_fraction": 1.0,
        "working_set_gib": filler_gib,
        "hotness": {"zipf_s": 0.0},
    }
    sc = _scenario([dict(HOT, name="a", working_set_gib=2.0), filler], dram_gib=32.0)
    p = compile_params(sc, batch_size=1)
    s = init_state(p, [0])
    act = Action(np.array([[[0.0, 1.0], [1.0, 0.0]]]), np.full(1, 1.0))  # a on CXL; 1 MB/s
    s, _ = step(p, s, act)  # allocates; the throughput is known from here on
    s = dataclasses.replace(s, threshold_ms=np.full_like(s.threshold_ms, 1e-3))
    _, out = step(p, s, act)
    return p, s, out


def test_plentiful_free_space_promotes_without_the_hotness_test() -> None:
    """should_numa_migrate_memory: with free memory above PROMO + max(1 GiB, node / 16)
    (pgdat_free_space_enough) every faulting page is promoted, whatever the hot
    threshold and the rate limit; just under that mark the 1 us threshold and the
    1 MB/s rate limit hold promotion back."""
    p, s, out = _promote_once(20.0)
    mark = p.wm_promo[0, 0] + max(1.0, p.capacity_gib[0, 0] / 16.0)  # 2 GiB + PROMO
    free = p.capacity_gib[0, 0] - s.place[:, :, 0, 0].sum()
    assert free > mark and pgdat_free_space_enough(free, p.wm_promo[0, 0], p.capacity_gib[0, 0])
    assert out.promotion_mbps[0] > 100.0  # far above the 1 MB/s limit
    p2, s2, out2 = _promote_once(32.0 - mark + 0.05)
    free2 = p2.capacity_gib[0, 0] - s2.place[:, :, 0, 0].sum()
    assert p2.wm_high[0, 0] + 1.0 < free2 < mark  # room above HIGH, but not plentiful
    assert not pgdat_free_space_enough(free2, p2.wm_promo[0, 0], p2.capacity_gib[0, 0])
    assert out2.promotion_mbps[0] <= 1.0 + 1e-9


def test_kswapd_balances_to_the_promo_watermark_in_tiering_mode() -> None:
    """pgdat_balanced: with NUMA balancing in tiering mode (a promotion rate limit) kswapd
    balances the node to PROMO, not HIGH; a failed promotion (free under HIGH) wakes it.
    A cold tenant fills DRAM to LOW and spills to CXL: its CXL pages are candidates,
    promotion finds free memory under HIGH and fails, kswapd demotes (the cold pages are
    unreferenced) until free memory is at PROMO, and promotion then takes what lies above
    HIGH."""
    cold = {
        "name": "cold",
        "threads": 1,
        "mlp": 1,
        "compute_ns": 20000,
        "read_fraction": 1.0,
        "working_set_gib": 9.0,
        "hotness": {"zipf_s": 0.0},
    }
    p, states, outs = _run(_scenario([cold]), 6)
    free = np.array([p.capacity_gib[0, 0] - s.place[:, :, 0, 0].sum() for s in states[1:]])
    dem = np.array([o.demotion_mbps[0] for o in outs])
    # the first interval allocates down to LOW, kswapd (woken under HIGH) demotes up to PROMO
    assert dem[0] > 0
    assert free[0] == pytest.approx(p.wm_promo[0, 0], abs=1e-9)
    assert p.wm_promo[0, 0] > p.wm_high[0, 0] + 0.005  # 8 MiB apart on this node
    # from then on: PROMO minus what promotion took above HIGH, never under HIGH
    assert (free >= p.wm_high[0, 0] - 1e-9).all()
    assert (free <= p.wm_promo[0, 0] + 1e-9).all()
    assert sum(o.promotion_mbps[0] for o in outs) > 0
    # the same without promotion (rate 0): kswapd wakes only under LOW and stays asleep
    _, _, outs0 = _run(_scenario([cold]), 6, rate=0.0)
    assert all(o.demotion_mbps[0] == 0.0 for o in outs0)
