"""Each heuristic's decision logic (baselines/algorithms.py) and the kernel mechanisms the
model and the heuristics share (envs/kernel.py), against the numbers of their sources."""

from __future__ import annotations

import numpy as np
import pytest

from baselines.algorithms import (
    MTIER_PROMOTE_USED_BP,
    MTIER_QUOTA_BYTES,
    Caption,
    Colloid,
    DamonQuotaTuner,
    auto_interleave_weights,
    colloid_migration_bytes,
    damon_feed_loop_next_input,
    damos_quota_score,
    memcg_promotion_scan_fraction,
    memcg_reclaim_scan,
    node_mem_bp,
    reduce_weights,
)
from envs.hardware import firmware_bandwidth
from envs.kernel import (
    PAGE_BYTES,
    THRESHOLD_START_MS,
    adapt_promotion_threshold,
    default_min_free_kbytes,
    gcd_reduce,
    pgdat_free_space_enough,
    zone_watermarks,
)

# --------------------------------------------------------------------------- weighted interleave


def test_auto_weights_kernel_examples() -> None:
    np.testing.assert_array_equal(auto_interleave_weights([300, 64]), [26, 5])
    np.testing.assert_array_equal(auto_interleave_weights([100, 50]), [21, 10])


def test_auto_weights_batched_equals_per_row() -> None:
    bw = np.array([[300, 64], [100, 50], [100, 100], [0, 50], [1000, 1]], dtype=float)
    batched = auto_interleave_weights(bw)
    for row, w in zip(bw, batched, strict=True):
        np.testing.assert_array_equal(auto_interleave_weights(row), w)
    # Equal bandwidth: 16:16 reduced by the gcd; zero bandwidth or a share < 1 gives 1.
    np.testing.assert_array_equal(batched[2], [1, 1])
    np.testing.assert_array_equal(batched[3], [1, 32])
    np.testing.assert_array_equal(batched[4], [31, 1])
    # Extra leading axes.
    np.testing.assert_array_equal(auto_interleave_weights(bw.reshape(5, 1, 2))[:, 0], batched)


def test_auto_weights_three_nodes_and_min_bandwidth() -> None:
    # 32*[200, 100, 100]/400 = [16, 8, 8] -> gcd 8 -> [2, 1, 1]
    np.testing.assert_array_equal(auto_interleave_weights([200, 100, 100]), [2, 1, 1])
    bw = firmware_bandwidth([300.0, 80.0], [250.0, 64.0])  # HMAT: min(read, write)
    np.testing.assert_array_equal(bw, [250.0, 64.0])
    # 32*250/314 = 25.47 -> 25; 32*64/314 = 6.52 -> 6
    np.testing.assert_array_equal(auto_interleave_weights(bw), [25, 6])
    # a CXL node's peaks are capped by its link (CDAT), in each direction
    np.testing.assert_array_equal(
        firmware_bandwidth([300.0, 80.0], [250.0, 64.0], [np.inf, 48.0], [np.inf, 60.0]),
        [250.0, 48.0],
    )


def test_reduce_weights() -> None:
    np.testing.assert_array_equal(
        reduce_weights([[4, 8], [6, 9], [5, 5]]), [[1, 2], [2, 3], [1, 1]]
    )
    np.testing.assert_array_equal(reduce_weights([0, 300]), [1, 255])
    np.testing.assert_array_equal(reduce_weights([26, 5]), [26, 5])
    with pytest.raises(ValueError):
        reduce_weights(3)


def test_gcd_reduce_keeps_nodes_out_of_the_mask() -> None:
    """The model's reduction (envs.kernel): 0 is "not in the mask" and stays 0."""
    np.testing.assert_array_equal(
        gcd_reduce([[4, 0, 8], [0, 0, 0], [0, 6, 0], [255, 255, 0], [9, 6, 3]]),
        [[1, 0, 2], [0, 0, 0], [0, 1, 0], [1, 1, 0], [3, 2, 1]],
    )
    # reduce_weights puts every node in the mask first (the kernel's auto mode)
    np.testing.assert_array_equal(reduce_weights([4, 0, 8]), [4, 1, 8])


def test_gcd_reduce_beyond_a_u8_and_in_any_layout() -> None:
    """Weights past 255 (the look-up table's end: Euclid's loop), a Fortran-ordered batch,
    rows of one node and empty batches give numpy's gcd reduction."""
    rng = np.random.default_rng(0)
    w = np.asfortranarray(rng.integers(0, 2000, (64, 3, 5)) * rng.integers(1, 4, (64, 3, 1)))
    g = np.gcd.reduce(w, axis=-1, keepdims=True)
    np.testing.assert_array_equal(gcd_reduce(w), np.where(g > 0, w // np.maximum(g, 1), w))
    np.testing.assert_array_equal(
        gcd_reduce([[512, 1024, 0], [300, 450, 600]]), [[1, 2, 0], [2, 3, 4]]
    )
    np.testing.assert_array_equal(gcd_reduce([[7], [0]]), [[1], [0]])
    assert gcd_reduce(np.zeros((0, 4), dtype=np.int64)).shape == (0, 4)
    with pytest.raises(ValueError, match="node axis"):
        gcd_reduce(3)


# --------------------------------------------------------------------------- watermarks


def test_default_min_free_kbytes() -> None:
    # Kernel: int_sqrt(lowmem_kb * 16) clamped to 128..262144 KB. 16 MB -> 512k,
    # 8 GiB -> int_sqrt(134217728) = 11585k, 16 GiB -> 16384k.
    got = default_min_free_kbytes([16 * 1024, 8 * 2**20, 16 * 2**20, 64, 4 * 2**30])
    np.testing.assert_array_equal(np.floor(got), [512, 11585, 16384, 128, 262144])
    np.testing.assert_allclose(got[1], np.sqrt(8 * 2**20 * 16), rtol=1e-15)


def test_zone_watermarks() -> None:
    # 256 GiB zone, MIN 0.25 GiB: d = max(0.0625, 256 * 10 / 10000 = 0.256) = 0.256.
    wmin, low, high, promo = zone_watermarks([256.0, 4.0], min_gib=[0.25, 0.25])
    np.testing.assert_allclose(wmin, [0.25, 0.25])
    np.testing.assert_allclose(low, [0.506, 0.3125])  # small zone: d = MIN / 4
    np.testing.assert_allclose(high, [0.762, 0.375])
    np.testing.assert_allclose(promo, [1.018, 0.4375])
    _, low_sf, _, _ = zone_watermarks(256.0, scale_factor=100, min_gib=0.25)
    np.testing.assert_allclose(low_sf, 0.25 + 2.56)
    # MIN from the machine's min_free_kbytes, split over the nodes by managed memory:
    # 128 GiB -> sqrt(128 * 2**20 * 16) KB = 46341 KB, half of it to each 64 GiB node
    wmin, *_ = zone_watermarks([64.0, 64.0], machine_gib=128.0)
    kb = np.sqrt(128 * 2**20 * 16)
    np.testing.assert_allclose(wmin, [kb / 2 / 2**20] * 2, rtol=1e-12)
    # a node alone: its own memory is the machine
    np.testing.assert_allclose(zone_watermarks(64.0)[0], np.sqrt(64 * 2**20 * 16) / 2**20)


# --------------------------------------------------------------------------- NUMA balancing


def test_numa_threshold_steps_and_bounds() -> None:
    th = np.full(2, THRESHOLD_START_MS)
    np.testing.assert_array_equal(th, [1000.0, 1000.0])
    rl = 10.0  # MB/s, ref = 600 MB per 60 s period
    seen = []
    for _ in range(10):  # element 0 above 1.1 ref, element 1 below 0.9 ref
        th = adapt_promotion_threshold(th, [700.0, 500.0], rl, 60.0)
        seen.append(th)
    seen_arr = np.array(seen)
    np.testing.assert_array_equal(
        seen_arr[:, 0], [875, 750, 625, 500, 375, 250, 125, 125, 125, 125]
    )
    np.testing.assert_array_equal(
        seen_arr[:, 1], [1125, 1250, 1375, 1500, 1625, 1750, 1875, 2000, 2000, 2000]
    )
    # Then reverse: element 0 climbs from 125 to the 2000 ceiling in 15 periods and stays.
    for _ in range(20):
        th = adapt_promotion_threshold(th, [100.0, 10_000.0], rl)
    np.testing.assert_array_equal(th, [2000.0, 125.0])


def test_numa_threshold_dead_band() -> None:
    ref = 65536.0 * 60.0  # kernel default rate limit
    th = adapt_promotion_threshold(
        np.full((2, 2), 1000.0), [[ref, 1.1 * ref], [0.9 * ref, 1.1001 * ref]], 65536.0
    )
    np.testing.assert_array_equal(th, [[1000.0, 1000.0], [1000.0, 875.0]])
    # the period scales the reference: the same candidates over a 6 s period are plenty
    np.testing.assert_array_equal(adapt_promotion_threshold(1000.0, 700.0, 100.0, 6.0), 875.0)
    np.testing.assert_array_equal(adapt_promotion_threshold(1000.0, 700.0, 100.0, 60.0), 1125.0)


def test_promote_all_when_free() -> None:
    # 256 GiB node: margin max(1, 16) = 16 GiB above PROMO; 8 GiB node: margin 1 GiB.
    got = pgdat_free_space_enough([17.1, 16.9, 2.1, 2.0], [1.0, 1.0, 1.0, 1.0], [256, 256, 8, 8])
    np.testing.assert_array_equal(got, [True, False, True, False])


# --------------------------------------------------------------------------- memcg fairness


def test_memcg_reclaim_scan() -> None:
    size, prot = 1000.0, 800.0
    scan = memcg_reclaim_scan(size, prot, [700.0, 800.0, 1000.0, 4000.0])
    expect_1000 = 1000.0 - 1000.0 * 800.0 / 1001.0
    np.testing.assert_allclose(scan, [0.0, 0.0, expect_1000, 1000.0 - 1000.0 * 800.0 / 4001.0])
    # Tiny overage: floored at SWAP_CLUSTER_MAX = 32 pages, but never more than the LRU.
    np.testing.assert_allclose(memcg_reclaim_scan(1e6, 1e6, 1e6 + 1.0), 32.0)
    np.testing.assert_allclose(memcg_reclaim_scan(10.0, 1e6, 1e6 + 1.0), 10.0)
    # No protection: the whole LRU is scanned (size * 0 / ...).
    np.testing.assert_allclose(memcg_reclaim_scan([500.0, 40.0], 0.0, [500.0, 40.0]), [500.0, 40.0])


def test_memcg_promotion_throttle_figures() -> None:
    low = 80.0 * 2**30 / PAGE_BYTES  # 80 GiB in 4 KiB pages
    frac = memcg_promotion_scan_fraction(low, low * np.array([0.9, 1.0, 1.1, 1.2, 1.5, 2.0, 3.0]))
    np.testing.assert_allclose(frac[:2], [1.0, 1.0])
    np.testing.assert_allclose(frac[2], 1.0 / 1.1**4, rtol=1e-5)  # 0.683
    assert round(float(frac[2]), 2) == 0.68
    assert round(float(frac[3]), 2) == 0.48
    assert round(float(frac[4]), 2) == 0.20
    assert frac[5] == 1.0 / 16.0  # 100% over: (1/2)^4 - epsilon, floored at 1/16
    assert frac[6] == 1.0 / 16.0
    # No DRAM pressure: no throttling.
    np.testing.assert_array_equal(
        memcg_promotion_scan_fraction(low, 2 * low, dram_under_pressure=[False, True]),
        [1.0, 1.0 / 16.0],
    )


# --------------------------------------------------------------------------- Colloid


def test_colloid_hold_within_delta() -> None:
    ctl = Colloid(shape=3, ewma_alpha=1.0)
    target, move = ctl.update([100.0, 100.0, 100.0], [104.9, 95.1, 106.0], 0.6)
    np.testing.assert_allclose(target, [0.6, 0.6, 0.8])
    np.testing.assert_allclose(move, [0.0, 0.0, 0.2])
    np.testing.assert_array_equal(ctl.p_lo, [0.0, 0.0, 0.6])
    np.testing.assert_array_equal(ctl.p_hi, [1.0, 1.0, 1.0])


def test_colloid_bisection_and_far_bound_reset() -> None:
    ctl = Colloid(shape=1, ewma_alpha=1.0)
    # DRAM faster: p_lo = p, target halfway up to p_hi.
    target, move = ctl.update(100.0, 200.0, 0.5)
    assert (ctl.p_lo[0], ctl.p_hi[0], target[0], move[0]) == (0.5, 1.0, 0.75, 0.25)
    # DRAM slower at p = 0.75: p_hi = 0.75, target 0.625 (demote).
    target, move = ctl.update(300.0, 200.0, 0.75)
    assert (ctl.p_lo[0], ctl.p_hi[0], target[0], move[0]) == (0.5, 0.75, 0.625, 0.125)
    # DRAM faster at p = 0.745: bracket [0.745, 0.75] is narrower than 1% -> p_hi reset to 1.
    target, _ = ctl.update(100.0, 200.0, 0.745)
    np.testing.assert_allclose([ctl.p_lo[0], ctl.p_hi[0], target[0]], [0.745, 1.0, 0.8725])
    # DRAM slower at p = 0.75 with p_lo = 0.745: narrow again -> p_lo reset to 0.
    target, _ = ctl.update(300.0, 200.0, 0.75)
    np.testing.assert_allclose([ctl.p_lo[0], ctl.p_hi[0], target[0]], [0.0, 0.75, 0.375])
    # Promotion with p above p_hi: p_hi <= p_lo -> p_hi = 1.
    target, _ = ctl.update(100.0, 200.0, 0.9)
    np.testing.assert_allclose([ctl.p_lo[0], ctl.p_hi[0], target[0]], [0.9, 1.0, 0.95])


def test_colloid_ewma_and_tenant_axis() -> None:
    ctl = Colloid(shape=(2, 3), ewma_alpha=0.25)
    ctl.update(100.0, 100.0, 0.5)
    ctl.update(200.0, 100.0, 0.5)
    np.testing.assert_allclose(ctl.l_dram_ns, np.full((2, 3), 125.0))
    np.testing.assert_allclose(ctl.l_cxl_ns, np.full((2, 3), 100.0))
    np.testing.assert_allclose(ctl.target, np.full((2, 3), 0.25))  # demote: p_hi = 0.5
    np.testing.assert_allclose(colloid_migration_bytes(0.1, 50.0), 0.1 * 50e9 * 0.5)


# --------------------------------------------------------------------------- Caption


def _b(ctl: Caption) -> int:
    return int(ctl.bottom[0])


def test_caption_hill_climb_sequence() -> None:
    ctl = Caption(shape=1)
    np.testing.assert_array_equal(ctl.weights(), [[10, 1]])
    w = ctl.update(50.0)  # first call: treated as an improvement of 1, step 3 toward CXL
    np.testing.assert_array_equal(w, [[10, 4]])
    ctl.update(55.0)  # better: keep direction and step
    assert (_b(ctl), int(ctl.step[0])) == (7, 3)
    ctl.update(52.0)  # worse: reverse, halve (-1.5 -> -1)
    assert (_b(ctl), int(ctl.step[0])) == (6, -1)
    ctl.update(51.0)  # worse again: reverse, halve 0.5 -> minimum 1
    assert (_b(ctl), int(ctl.step[0])) == (7, 1)
    ctl.update(51.1)  # tiny change: keep b, step magnitude 1 with the previous sign
    assert (_b(ctl), int(ctl.step[0])) == (7, 1)
    ctl.update(700.0)  # huge change: reset to 10:1, step 3
    assert (_b(ctl), int(ctl.step[0])) == (1, 3)


def test_caption_reverse_halves_from_large_step_and_clips() -> None:
    ctl = Caption(shape=1, step_reset=8)
    ctl.update(10.0)  # b 1 -> 9
    ctl.update(20.0)  # b 9 -> 17
    ctl.update(30.0)  # b 17 -> 25 -> clipped to 20
    assert _b(ctl) == 20
    ctl.update(25.0)  # worse: step -8 / 2 = -4
    assert (_b(ctl), int(ctl.step[0])) == (16, -4)
    ctl.update(24.0)  # worse: step 2
    assert (_b(ctl), int(ctl.step[0])) == (18, 2)
    ctl.update(10.0)  # worse: step -1
    assert (_b(ctl), int(ctl.step[0])) == (17, -1)
    ctl.update(10.1)  # stable with negative previous step: step -1, b kept
    assert (_b(ctl), int(ctl.step[0])) == (17, -1)
    ctl.update(80_000.0)  # idle (and huge): idle wins, b kept, step +1
    assert (_b(ctl), int(ctl.step[0])) == (17, 1)


# --------------------------------------------------------------------------- DAMON


def test_damon_feed_loop() -> None:
    got = damon_feed_loop_next_input(
        [10000, 10000, 40000, 40000, 40000, 40000], [5000, 0, 10000, 15000, 20000, 30000]
    )
    np.testing.assert_array_equal(got, [15000, 20000, 40000, 20000, 10000, 10000])
    np.testing.assert_array_equal(
        damos_quota_score([4985, 9970, 19940], 9970), [5000, 10000, 20000]
    )
    np.testing.assert_array_equal(node_mem_bp([50.0, 0.0], 100.0), [5000, 0])


def test_damon_tuner_grows_under_goal_and_shrinks_over() -> None:
    ctl = DamonQuotaTuner(shape=2)
    # Element 0: DRAM half used, score floor(5000e4 / 9970) = 5015, so each interval adds
    # floor(last * 4985 / 10000); element 1: DRAM empty (score 0), so the input doubles.
    used = np.array([5000.0, 0.0])
    q = np.array([ctl.update(used, MTIER_PROMOTE_USED_BP) for _ in range(3)])
    np.testing.assert_array_equal(q[:, 0], [1, 2, 3])  # 14985, 22455, 33648 bp
    np.testing.assert_array_equal(ctl.esz_bp, [33648, 80000])
    np.testing.assert_array_equal(q[:, 1], [2, 4, 8])
    # Long under the goal: capped at 200 MiB per interval.
    for _ in range(60):
        quota = ctl.update(0.0, MTIER_PROMOTE_USED_BP)
    np.testing.assert_array_equal(quota, [MTIER_QUOTA_BYTES, MTIER_QUOTA_BYTES])
    # Over the goal: shrinks (score 15000 halves esz_bp; 20000+ drops to 1 byte).
    before = ctl.esz_bp.copy()
    ctl.update([1.5 * MTIER_PROMOTE_USED_BP, 2.0 * MTIER_PROMOTE_USED_BP], MTIER_PROMOTE_USED_BP)
    np.testing.assert_array_equal(ctl.esz_bp, [before[0] - np.floor(before[0] * 0.5), 10000.0])
    np.testing.assert_array_equal(ctl.quota_bytes[1], 1.0)


def test_damon_temporal_tuner() -> None:
    ctl = DamonQuotaTuner(shape=2, tuner="temporal")
    q = ctl.update([9000.0, 9970.0], MTIER_PROMOTE_USED_BP)
    np.testing.assert_array_equal(q, [MTIER_QUOTA_BYTES, 0.0])


# --------------------------------------------------------------------------- batched == per element


def test_controllers_batched_equal_per_element() -> None:
    rng = np.random.default_rng(0)
    b, steps = 6, 25
    cand = rng.uniform(0, 2000, (steps, b))
    l_dram = rng.uniform(80, 300, (steps, b))
    l_cxl = rng.uniform(150, 300, (steps, b))
    p = rng.uniform(0, 1, (steps, b))
    est = np.cumsum(rng.normal(0, 2, (steps, b)), axis=0) + rng.choice([0, 0, 0, 600], (steps, b))
    used = rng.uniform(8000, 10000, (steps, b))

    th_b = np.full(b, THRESHOLD_START_MS)
    batched = (Colloid(b), Caption(b), DamonQuotaTuner(b))
    th_s = [np.full(1, THRESHOLD_START_MS) for _ in range(b)]
    singles = [(Colloid(1), Caption(1), DamonQuotaTuner(1)) for _ in range(b)]
    for t in range(steps):
        th_b = adapt_promotion_threshold(th_b, cand[t], 10.0)
        out_b = (
            batched[0].update(l_dram[t], l_cxl[t], p[t]),
            batched[1].update(est[t]),
            batched[2].update(used[t], MTIER_PROMOTE_USED_BP),
        )
        for i, (co, ca, da) in enumerate(singles):
            th_s[i] = adapt_promotion_threshold(th_s[i], cand[t, i : i + 1], 10.0)
            np.testing.assert_array_equal(th_s[i][0], th_b[i])
            tgt, mv = co.update(l_dram[t, i], l_cxl[t, i], p[t, i])
            np.testing.assert_array_equal([tgt[0], mv[0]], [out_b[0][0][i], out_b[0][1][i]])
            np.testing.assert_array_equal(ca.update(est[t, i])[0], out_b[1][i])
            np.testing.assert_array_equal(
                da.update(used[t, i], MTIER_PROMOTE_USED_BP)[0], out_b[2][i]
            )
    # The random walk must have exercised the branches of the controllers.
    assert set(np.unique(th_b)) - {1000.0}
    assert len(np.unique(batched[1].bottom)) > 1
