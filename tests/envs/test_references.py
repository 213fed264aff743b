"""Page references per pass (issue #49): reclaim's reference check and the hint faults'
promotion test, decided per page from the kernel's rules, written from the formulas.

- mm/vmscan.c ``folio_check_references`` / mm/rmap.c ``folio_referenced_one``: a page
  looked at is kept when its PTE was referenced since the last look, one inactive age
  ``a`` before; a page referenced once per pass of ``P`` seconds (at a phase the scan
  does not know) was referenced within the age with probability ``min(1, a / P)``.
- kernel/sched/fair.c ``numa_hint_fault_latency`` / ``should_numa_migrate_memory``: a
  hint fault promotes when the time from the scan to the fault is under the threshold
  ``t``; for such a page that happens with probability ``min(1, t / P)``.
- Pages referenced at random times (Poisson) keep ``1 - exp(-rate * window)``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
from test_reclaim import (
    _run,  # one model run of a scenario with fixed actions (its states, outputs)
)

from envs import Action, KernelConfig, compile_params, init_state, load_scenario, step
from envs.kernel import GIB, PAGE_BYTES
from envs.model import (
    BUCKET_EDGES,
    PAGES_PER_GIB,
    access_probability,
    lru_reclaim,
    promotion_candidates,
    tenant_phase,
)
from envs.reclaim import exposure

GIB_PAGES = float(PAGES_PER_GIB)
R = KernelConfig().kswapd_scan_pages_per_s
DT = np.ones(1)
RATIOS = (0.1, 0.5, 2.0)  # window / pass time


def _lru(gib: float) -> np.ndarray:
    """(1, K, 1) GiB: one tenant's ``gib`` spread over the buckets by their sizes."""
    return (gib * np.diff(BUCKET_EDGES))[None, :, None].copy()


def test_exposure_gives_min_one_x_for_passes_and_poisson_otherwise() -> None:
    x = np.array([0.0, 0.05, 0.1, 0.5, 0.99, 1.0, 2.0, 50.0])
    with np.errstate(divide="ignore"):  # -log(0) = inf from x = 1 on: certain
        assert np.isinf(exposure(x[5:], np.ones(3))).all()
    with np.errstate(divide="ignore"):
        periodic = access_probability(exposure(x, np.ones_like(x)))
    np.testing.assert_allclose(periodic, np.minimum(1.0, x), atol=2e-6)
    np.testing.assert_allclose(
        access_probability(exposure(x, np.zeros_like(x))), 1 - np.exp(-x), atol=2e-6
    )


@pytest.mark.parametrize("ratio", RATIOS)
def test_sequential_share_referenced_within_the_inactive_age(ratio: float) -> None:
    """A streamer's page referenced once per pass of P seconds: the share of the pages
    kswapd looks at that it finds referenced is min(1, age / P), within 2%."""
    p = compile_params(load_scenario("kv-store"), batch_size=1)
    on = _lru(8.0)
    zero, usage = np.zeros((1, 1)), np.full((1, 1), 8.0)
    _, _, pass_s = lru_reclaim(p, on, np.zeros_like(on), zero, usage, np.zeros_like(on), DT)
    age = pass_s[0]  # the inactive list's age (a pass of kswapd over it)
    period = age / ratio  # the streamer's pass time
    rate = np.full_like(on, 1.0 / period)  # one reference per page per pass
    got, _, _ = lru_reclaim(p, on, np.zeros_like(on), zero, usage, rate, DT, passes=np.ones((1, 1)))
    looked = R / GIB_PAGES * on[0, :, 0] / 8.0  # GiB/s of each bucket kswapd looks at
    referenced = 1.0 - got[0, :, 0] / looked
    expect = min(1.0, ratio)
    np.testing.assert_allclose(referenced, expect, rtol=0.02, atol=1e-9)
    # the same rate at random times would be referenced 1 - exp(-ratio): not a pass
    poisson, _, _ = lru_reclaim(p, on, np.zeros_like(on), zero, usage, rate, DT)
    np.testing.assert_allclose(
        1.0 - poisson[0, :, 0] / looked, 1 - np.exp(-ratio), rtol=0.02, atol=1e-9
    )


STREAMER = {
    "name": "streamer",
    "threads": 16,
    "mlp": 10,
    "compute_ns": 5,
    "read_fraction": 1.0,
    "working_set_gib": 12.0,
    "hotness": {"zipf_s": 0.0},
}


def _scenario(tenants: list[dict[str, Any]], dram_gib: float = 8.0, steps: int = 20) -> Any:
    return load_scenario(
        {
            "name": "references",
            "interval_s": 1.0,
            "episode_steps": steps,
            "hardware": {"preset": "spr-a1000", "nodes": {"dram0": {"capacity_gib": dram_gib}}},
            "tenants": tenants,
        }
    )


def test_a_pass_reads_a_whole_page_per_reference() -> None:
    """A streamer (sequential, uniform) makes passes of 64 lines per page reference; a
    random or skewed tenant counts every line access; lines_per_op overrides both."""
    zipf = {**STREAMER, "name": "zipf", "hotness": {"zipf_s": 0.99}}
    rnd = {**STREAMER, "name": "rnd", "access": "random"}
    ops = {**STREAMER, "name": "ops", "lines_per_op": 4}
    p = compile_params(_scenario([STREAMER, zipf, rnd, ops]), batch_size=1)
    np.testing.assert_array_equal(p.passes[:, 0, 0], [1.0, 0.0, 0.0, 1.0])
    np.testing.assert_array_equal(p.touch_lines[:, 0, 0], [PAGE_BYTES // 64, 1.0, 1.0, 4.0])
    with pytest.raises(ValueError, match="lines_per_op"):
        _scenario([{**STREAMER, "lines_per_op": 65}])


@pytest.mark.parametrize("ratio", (*RATIOS, 1.0))
def test_sequential_promotion_probability_at_the_threshold(ratio: float) -> None:
    """A streamer's CXL pages are promotion candidates with probability min(1, t / P) at
    hot threshold t (DRAM full, so the threshold applies; no sampling noise): the
    candidates relative to those at t = 2P (every scanned page)."""
    kernel = KernelConfig(detection_noise=0.0, numa_scan="fixed")
    sc = _scenario([STREAMER], dram_gib=8.0)
    p = compile_params([sc, sc], batch_size=2, kernel=kernel)
    s = init_state(p, [0, 0])
    s, _ = step(p, s, Action(np.zeros((2, 1, p.n_nodes)), np.zeros(2)))  # DRAM filled
    gbps = 10.0
    period = 12.0 * GIB / (gbps * 1e9)  # a pass over the 12 GiB at 10 GB/s
    th = s.threshold_ms.copy()
    dram = int(np.flatnonzero(~p.is_cxl[:, 0])[0])
    th[dram] = np.array([ratio, 2.0]) * period * 1000.0
    s = dataclasses.replace(s, threshold_ms=th, throughput=np.full_like(s.throughput, gbps))
    tn, place = tenant_phase(p, s, s.t * p.interval_s, p.interval_s)
    assert place[:, :, 1].sum(axis=(0, 1)).min() > 1.0  # pages on CXL to promote
    cand = promotion_candidates(p, s, tn, place, np.full(2, 65536.0), p.interval_s)
    assert not cand.plentiful[dram].any()
    got = cand.by_node.sum(axis=(0, 1, 2))
    assert got[1] > 0
    assert got[0] / got[1] == pytest.approx(min(1.0, ratio), rel=0.02)


HOT = {**STREAMER, "name": "fast", "working_set_gib": 9.0}  # ~57 GB/s over 9 GiB: 0.17 s
SLOW = {  # one thread, 2 us between misses: a pass over 9 GiB takes ~5 minutes
    **STREAMER,
    "name": "slow",
    "threads": 1,
    "mlp": 1,
    "compute_ns": 2000,
    "working_set_gib": 9.0,
}


def test_a_pass_shorter_than_the_inactive_age_never_lets_a_page_go() -> None:
    """DRAM full of a streamer whose pass (0.17 s) is shorter than the inactive list's
    age: every page is referenced at every look and nothing is demoted. A streamer whose
    pass is far longer than the age is demoted under the same pressure."""
    _, _, outs = _run(_scenario([HOT]), 12)
    assert sum(float(o.demotion_mbps[0]) for o in outs) == 0.0
    _, _, outs = _run(_scenario([SLOW]), 12)
    assert sum(float(o.demotion_mbps[0]) for o in outs) > 0.0


def test_a_zipf_tenant_keeps_its_hot_pages() -> None:
    """A Zipf tenant (random access, one line per reference) 4 GiB larger than DRAM:
    kswapd's looks let its cold tail go (referenced a few times a minute) and keep its
    hot buckets (referenced many times per inactive age), and promotion brings the hot
    pages that started on CXL into DRAM: its DRAM share falls from hot to cold."""
    kv = {
        "name": "kv",
        "threads": 2,
        "mlp": 1,
        "compute_ns": 1000,
        "read_fraction": 0.9,
        "working_set_gib": 12.0,
        "hotness": {"zipf_s": 0.99},
        "access": "random",
    }
    _, states, outs = _run(_scenario([kv], dram_gib=8.0, steps=40), 40)
    place = states[-1].place[0, :, :, 0]  # (K, N) its GiB
    dram_share = place[:, 0] / place.sum(axis=1)
    assert dram_share[:2].min() > 0.98  # the hottest 0.5% of its pages
    assert (np.diff(dram_share) <= 1e-9).all()  # hotter buckets keep more
    assert dram_share[-1] < 0.7  # the cold tail is what was let go
    assert sum(float(o.demotion_mbps[0]) for o in outs) > 0.0


COLD = {  # one thread, 20 us between misses: each page referenced about once an hour
    "name": "cold",
    "threads": 1,
    "mlp": 1,
    "compute_ns": 20000,
    "read_fraction": 1.0,
    "working_set_gib": 2.0,
    "hotness": {"zipf_s": 0.0},
}


@pytest.mark.parametrize("low_gib", [0.0, 4.0])
def test_kswapd_skips_a_protected_cgroup_and_does_not_retry_with_low_reclaim(
    low_gib: float,
) -> None:
    """memory.low as mainline kswapd applies it (mm/vmscan.c ``shrink_node_memcgs``,
    ``balance_pgdat``): a cgroup under its memory.low is skipped (``memcg_low_skipped``)
    while kswapd balances the node. Here the only other cgroup is a streamer whose every
    page is referenced within the inactive age: unprotected, the cold cgroup's pages are
    what kswapd demotes; protected, nothing is demoted, and since kswapd (unlike direct
    and memcg reclaim, ``do_try_to_free_pages``) has no retry with ``memcg_low_reclaim``,
    its passes are fruitless and it gives up on the node."""
    cold = {**COLD, "memory_low_gib": low_gib}
    hot = {**HOT, "start_s": 2.0}  # the cold cgroup's pages are in DRAM first
    _, states, outs = _run(_scenario([cold, hot], dram_gib=8.0, steps=40), 40)
    cold_dram = np.array([s.place[0, :, 0, 0].sum() for s in states[1:]])
    if low_gib == 0.0:
        assert cold_dram[-1] < 0.5 * cold_dram[1]
        assert sum(float(o.demotion_mbps[0]) for o in outs) > 0.0
    else:
        np.testing.assert_allclose(cold_dram[2:], cold_dram[1], rtol=1e-9)
        assert states[-1].kswapd_failures[0, 0] >= 16
