"""Kernel mechanisms the model runs, written once and shared with the baselines.

Each function is batched over leading axes and mirrors the Linux source named
in its docstring (constants of the source as defaults).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from envs.jit import array_form, inline, jit, np_clip, np_maximum, np_minimum, ufunc

__all__ = [
    "FALLBACK_LISTS",
    "LOCAL_DISTANCE",
    "MAX_RECLAIM_RETRIES",
    "MAX_WEIGHT",
    "PAGE_BYTES",
    "PROMOTE_RATE_LIMIT_MBPS",
    "REMOTE_DISTANCE",
    "SCAN_DELAY_MS",
    "SCAN_PERIOD_MAX_MS",
    "SCAN_PERIOD_MIN_MS",
    "SCAN_SIZE_MB",
    "SWAP_CLUSTER_MAX",
    "THRESHOLD_MAX_MS",
    "THRESHOLD_START_MS",
    "THRESHOLD_UNIT_MS",
    "adapt_promotion_threshold",
    "auto_interleave_weights",
    "auto_tier_shares",
    "build_fallback_lists",
    "default_min_free_kbytes",
    "find_next_best_node",
    "gcd_reduce",
    "inactive_anon_target",
    "inactive_ratio",
    "kswapd_failures_after",
    "kswapd_hopeless",
    "memcg_dram_high",
    "memcg_high_delay_s",
    "memcg_high_throttle",
    "memcg_low",
    "memcg_promotion_scan_fraction",
    "memcg_reclaim_scan",
    "memcg_total_high",
    "near_nodes",
    "pgdat_free_space_enough",
    "task_nr_scan_windows",
    "task_scan_bounds",
    "task_scan_max",
    "task_scan_min",
    "tier_aware_limit",
    "update_task_scan_period",
    "zone_watermarks",
]

PAGE_BYTES = 4096
LINE_BYTES = 64  # a cache line
GIB = float(1 << 30)
GB_PER_GIB = GIB / 1e9
PAGES_PER_GIB = GIB / PAGE_BYTES
GIB_KB = 1024.0 * 1024.0

# kernel/sched/fair.c: numa_promotion_adjust_threshold()
THRESHOLD_START_MS = 1000.0  # sysctl_numa_balancing_hot_threshold default
THRESHOLD_UNIT_MS = 2 * 1000.0 / 16  # NUMA_MIGRATION_ADJUST_STEPS = 16, over 2x the default
THRESHOLD_MAX_MS = 2 * THRESHOLD_START_MS


def default_min_free_kbytes(lowmem_kb: ArrayLike) -> NDArray[np.float64]:
    """``min_free_kbytes`` at boot (mm/page_alloc.c, ``calculate_min_free_kbytes``).

    ``sqrt(lowmem_kbytes * 16)`` clamped to 128 KB .. 262144 KB (256 MiB).
    """
    return np.clip(np.sqrt(np.asarray(lowmem_kb, dtype=float) * 16.0), 128.0, 262144.0)


def zone_watermarks(
    managed_gib: ArrayLike,
    machine_gib: ArrayLike | None = None,
    scale_factor: float = 10.0,
    min_gib: ArrayLike | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """MIN, LOW, HIGH and PROMO watermarks of a node, in GiB (mm/page_alloc.c).

    MIN is ``min_gib`` when given, else the node's share of the boot-time
    ``min_free_kbytes`` of a machine of ``machine_gib`` (split by managed
    pages, ``__setup_per_zone_wmarks``); ``d = max(MIN/4, managed*scale_factor/10000)``;
    ``LOW = MIN + d``, ``HIGH = LOW + d``, ``PROMO = HIGH + d``
    (``watermark_scale_factor`` default 10).
    """
    managed = np.asarray(managed_gib, dtype=float)
    if min_gib is None:
        total = managed if machine_gib is None else np.asarray(machine_gib, dtype=float)
        wmin = default_min_free_kbytes(total * GIB_KB) / GIB_KB * managed / np.maximum(total, 1e-12)
    else:
        wmin = np.asarray(min_gib, dtype=float) + np.zeros_like(managed)
    d = np.maximum(wmin / 4.0, managed * scale_factor / 10000.0)
    return wmin, wmin + d, wmin + 2 * d, wmin + 3 * d


@inline
def threshold_after_period(threshold_ms, candidates_mb, ref_mb):  # pragma: no cover (compiled)
    """:func:`adapt_promotion_threshold` of one node (scalars, ``ref_mb`` the rate limit
    times the period)."""
    th = threshold_ms
    if candidates_mb > 1.1 * ref_mb:
        th = np_maximum(th - THRESHOLD_UNIT_MS, THRESHOLD_UNIT_MS)
    if candidates_mb < 0.9 * ref_mb:
        th = np_minimum(th + THRESHOLD_UNIT_MS, THRESHOLD_MAX_MS)
    return th


@inline
def _adapt_threshold_scalar(th, cand, rate, period):  # pragma: no cover (compiled)
    return threshold_after_period(th, cand, rate * period)


_adapt_threshold = array_form(
    "float64(float64, float64, float64, float64)", _adapt_threshold_scalar
)


def adapt_promotion_threshold(
    threshold_ms: ArrayLike,
    candidates_mb: ArrayLike,
    rate_limit_mbps: ArrayLike,
    period_s: ArrayLike = 60.0,
) -> NDArray[np.float64]:
    """One period of the NUMA-balancing hot threshold adaptation.

    kernel/sched/fair.c ``numa_promotion_adjust_threshold``: ``ref = RL * period``;
    more than 110% of ``ref`` candidates in the period lowers the threshold by
    one unit (125 ms, not below 125 ms); fewer than 90% raises it by one unit
    (not above 2000 ms). Compiled code inlines :func:`threshold_after_period`.
    """
    return np.asarray(
        _adapt_threshold(threshold_ms, candidates_mb, rate_limit_mbps, period_s), dtype=float
    )


def memcg_promotion_scan_fraction(
    low_pages: ArrayLike, usage_pages: ArrayLike, power: float = 4.0, floor: float = 1.0 / 16.0
) -> NDArray[np.float64]:
    """Share of its scan a cgroup above its DRAM protection keeps (tiering-fairness RFC, 2024).

    ``(L / (U + 1)) ** 4`` floored at ``1/16`` when usage ``U`` exceeds the
    protection ``L`` (both in pages), 1 otherwise: 10% over keeps 68% of the
    scan, 100% over keeps 1/16.
    """
    low = np.asarray(low_pages, dtype=float)
    use = np.asarray(usage_pages, dtype=float)
    frac = np.maximum((low / (use + 1.0)) ** power, floor)
    return np.where(use > low, frac, 1.0)


# --------------------------------------------------------------------------- mm/mempolicy.c

MAX_WEIGHT = 255  # interleave weights are u8, at least 1 for a node in the mask


#: gcd of every pair of weights a u8 can hold (the kernel's weights are u8): one look-up
#: where Euclid's loop costs a division per round
_GCD_U8 = np.gcd.outer(np.arange(MAX_WEIGHT + 1), np.arange(MAX_WEIGHT + 1)).astype(np.int64)


@jit
def _gcd_rows(w, table, out):  # pragma: no cover (compiled)
    """Each row of ``w`` (M, N) over the gcd of its positive entries, into ``out``."""
    top = table.shape[0]
    for r in range(w.shape[0]):
        g = 0
        for n in range(w.shape[1]):
            a = w[r, n] if w[r, n] > 0 else 0
            if g < top and a < top:
                g = table[g, a]
            else:
                while a:  # Euclid: gcd(g, a), gcd(0, a) = a
                    g, a = a, g % a
        if g > 1:
            for n in range(w.shape[1]):
                out[r, n] = w[r, n] // g
        else:  # a gcd of 1, or no positive entry: the row as it is
            for n in range(w.shape[1]):
                out[r, n] = w[r, n]


def gcd_reduce(weights: ArrayLike) -> NDArray[np.int64]:
    """Integer weights (..., N) divided by the gcd of each row's positive entries (0 stays 0)."""
    w = np.asarray(weights, dtype=np.int64)
    if w.ndim == 0:
        raise ValueError("gcd_reduce: weights need a node axis (last axis)")
    if w.size == 0:
        return w.copy()
    flat = np.ascontiguousarray(w).reshape(-1, w.shape[-1])
    out = np.empty_like(flat)
    _gcd_rows(flat, _GCD_U8, out)
    return out.reshape(w.shape)


def auto_interleave_weights(
    bandwidth_gbps: ArrayLike, weightiness: int = 32, mbps_per_unit: float = 1000.0
) -> NDArray[np.int64]:
    """Weighted-interleave auto mode: weights proportional to node bandwidth.

    ``mm/mempolicy.c`` ``reduce_interleave_weights`` (Linux 6.16, sysfs
    ``weighted_interleave/auto``). With ``S = sum(bw)``: ``w[n] = (weightiness *
    bw[n]) // S`` where ``bw[n] > 0`` and ``S < weightiness * bw[n]``, else 1;
    then ``w // gcd(w)``, clipped to 1..255 (a ``u8``). Bandwidth arrives as
    integer MB/s from HMAT/CDAT, so inputs are rounded to integers with
    ``mbps_per_unit`` (1000 for GB/s) and the rounding is the kernel's. Feed it
    :func:`envs.hardware.firmware_bandwidth`. ``[300, 64]`` GB/s gives ``[26, 5]``.
    """
    bw = np.rint(np.asarray(bandwidth_gbps, dtype=float) * mbps_per_unit).astype(np.int64)
    if bw.ndim == 0:
        raise ValueError("bandwidth needs a node axis (last axis)")
    if np.any(bw < 0):
        raise ValueError("bandwidth must be non-negative")
    total = bw.sum(axis=-1, keepdims=True)
    scaled = int(weightiness) * bw
    proportional = (bw > 0) & (total < scaled)
    w = np.where(proportional, scaled // np.maximum(total, 1), 1).astype(np.int64)
    return np.clip(gcd_reduce(w), 1, MAX_WEIGHT)


# --------------------------------------------------------------------------- kernel/sched/fair.c


@ufunc("boolean(float64, float64, float64)")
def pgdat_free_space_enough(free_gib: float, promo_wmark_gib: float, node_gib: float) -> bool:
    """Whether a DRAM node has so much free memory that every candidate is promoted.

    ``kernel/sched/fair.c`` ``pgdat_free_space_enough``: free pages above
    ``PROMO + max(1 GiB, node_present_pages / 16)`` (strictly, ``zone_watermark_ok``);
    NUMA balancing then promotes without the rate limit and the hot threshold.
    """
    return free_gib > promo_wmark_gib + max(1.0, node_gib / 16.0)


# --------------------------------------------------------------------------- mm/vmscan.c

SWAP_CLUSTER_MAX = 32  # pages: the least a reclaim pass scans of an LRU it visits
#: ``mm/internal.h``: fruitless ``balance_pgdat`` passes after which kswapd leaves a node
#: alone ("hopeless node", ``wakeup_kswapd`` / ``prepare_kswapd_sleep``)
MAX_RECLAIM_RETRIES = 16
PAGES_PER_GIB_SHIFT = 30 - 12  # ``gb = pages >> (30 - PAGE_SHIFT)`` in inactive_is_low


@ufunc("float64(float64)")
def inactive_ratio(lru_pages: float) -> float:
    """Target active:inactive ratio of an anon LRU of ``lru_pages`` 4 KiB pages.

    ``mm/vmscan.c`` ``inactive_is_low``: ``int_sqrt(10 * gb)`` with ``gb`` the LRU's
    whole GiB (``(inactive + active) >> 18``), 1 under a GiB: 50 for 256 GiB, 11 for
    14 GiB, 3 for 1 GiB.
    """
    gb = math.floor(lru_pages / float(1 << PAGES_PER_GIB_SHIFT))
    return math.floor(math.sqrt(10.0 * gb)) if gb >= 1.0 else 1.0


@ufunc("float64(float64)")
def inactive_anon_target(lru_pages: float) -> float:
    """Pages on the inactive anon list that ``inactive_is_low`` keeps an LRU at.

    ``inactive_is_low`` is true while ``inactive * ratio < active``; reclaim then
    deactivates (``shrink_active_list``, from ``shrink_lruvec`` and
    ``kswapd_age_node``) until it is false, so the inactive list holds
    ``lru / (1 + ratio)`` of the LRU (:func:`inactive_ratio`): about 5 GiB of 256.
    """
    return lru_pages / (1.0 + inactive_ratio(lru_pages))


@ufunc("boolean(float64)")
def kswapd_hopeless(failures: float) -> bool:
    """Whether kswapd has given up on a node (``kswapd_failures >= MAX_RECLAIM_RETRIES``).

    ``mm/vmscan.c`` ``wakeup_kswapd`` returns early for such a node ("hopeless node,
    leave it to direct reclaim") and ``prepare_kswapd_sleep`` lets kswapd sleep on it,
    so neither allocations nor failed promotions (``migrate_misplaced_folio_prepare``)
    wake it until reclaim on the node succeeds (:func:`kswapd_failures_after`).
    """
    return failures >= MAX_RECLAIM_RETRIES


@ufunc("float64(float64, float64, boolean, boolean)")
def kswapd_failures_after(failures: float, passes: float, ran: bool, progress: bool) -> float:
    """A node's ``kswapd_failures`` after an interval.

    ``mm/vmscan.c``: each ``balance_pgdat`` pass (priorities ``DEF_PRIORITY`` 12 down
    to 1) that reclaims nothing adds one, and kswapd runs pass after pass until the
    node is balanced or the count reaches ``MAX_RECLAIM_RETRIES``; ``shrink_node``
    resets it to 0 whenever it reclaims anything on the node, whoever runs it
    (kswapd, direct reclaim, memcg reclaim for ``memory.high``). ``passes`` is the
    number of fruitless passes kswapd ran (fractions of a pass count as such),
    ``ran`` whether it ran fruitlessly, ``progress`` whether any reclaim on the
    node succeeded.
    """
    if progress:
        return 0.0
    if ran:
        return min(failures + passes, float(MAX_RECLAIM_RETRIES))
    return failures


def memcg_reclaim_scan(
    size_pages: ArrayLike,
    protection_pages: ArrayLike,
    usage_pages: ArrayLike,
    min_scan_pages: float = SWAP_CLUSTER_MAX,
) -> NDArray[np.float64]:
    """Pages of a cgroup's LRU that reclaim scans, given its protection (``memory.low``).

    ``mm/vmscan.c`` ``get_scan_count`` (``apply_proportional_protection`` in later
    trees; with the tiering-fairness RFC's DRAM protection): a cgroup at or under its
    protection is skipped (``mem_cgroup_below_low``: kswapd never sets
    ``memcg_low_reclaim``); otherwise
    ``scan = size - size * protection / (usage + 1)``, at least ``SWAP_CLUSTER_MAX``
    pages and at most ``size``. All in 4 KiB pages (the ``+ 1`` is one page). A pass
    scans this ``>> priority`` at each priority from 12 down to 1, about this once
    in all.
    """
    return reclaim_scan(size_pages, protection_pages, usage_pages, min_scan_pages)


@ufunc("float64(float64, float64, float64, float64)")
def reclaim_scan(size: float, prot: float, use: float, min_scan: float) -> float:
    """:func:`memcg_reclaim_scan` with every argument given: the ufunc compiled code calls."""
    if use <= prot:
        return 0.0
    scan = size - size * prot / (max(use, prot) + 1.0)
    return min(max(scan, min_scan), size)


# --------------------------------------------------------------------------- NUMA-balancing scanning
# kernel/sched/fair.c defaults (sysctl_numa_balancing_*, "Scan @scan_size MB every
# @scan_period after an initial @scan_delay in ms"): scan_delay 1000, scan_period_min
# 1000, scan_period_max 60000, scan_size 256, hot_threshold = MSEC_PER_SEC
# (THRESHOLD_START_MS above); sysctl_numa_balancing_promote_rate_limit = 65536 MB/s
# ("Restrict the NUMA promotion throughput (MB/s) for each target node", fair.c, moved
# out of it in later kernels with the same default). Checked in the source, Dec 2026.

SCAN_DELAY_MS = 1000.0
SCAN_PERIOD_MIN_MS = 1000.0
SCAN_PERIOD_MAX_MS = 60000.0
SCAN_SIZE_MB = 256.0
PROMOTE_RATE_LIMIT_MBPS = 65536.0
MAX_SCAN_WINDOW_MB = 2560.0  # fair.c: never scan more PTEs than 2560 MB/s
NUMA_PERIOD_SLOTS = 10
NUMA_PERIOD_THRESHOLD = 7


@inline
def _scan_windows(rss_mb, size_mb):  # pragma: no cover (compiled)
    """:func:`task_nr_scan_windows` of one task (scalars)."""
    return np_maximum(np.ceil((rss_mb if rss_mb > 0 else size_mb) / size_mb), 1.0)


@inline
def scan_min_of(rss_mb, size_mb, period_min_ms):  # pragma: no cover (compiled)
    """:func:`task_scan_min` of one task (scalars)."""
    per_s = np_maximum(MAX_SCAN_WINDOW_MB // size_mb, 1.0) if size_mb < MAX_SCAN_WINDOW_MB else 1.0
    return np_maximum(
        np.floor(1000.0 / per_s), np.floor(period_min_ms / _scan_windows(rss_mb, size_mb))
    )


@inline
def scan_max_of(rss_mb, size_mb, period_min_ms, period_max_ms):  # pragma: no cover (compiled)
    """:func:`task_scan_max` of one task (scalars)."""
    smin = scan_min_of(rss_mb, size_mb, period_min_ms)
    return np_maximum(smin, np.floor(period_max_ms / _scan_windows(rss_mb, size_mb)))


# the same for arrays (numpy's broadcasting); compiled code inlines the functions above
_windows = array_form("float64(float64, float64)", _scan_windows)
_scan_min = array_form("float64(float64, float64, float64)", scan_min_of)
_scan_max = array_form("float64(float64, float64, float64, float64)", scan_max_of)


def task_nr_scan_windows(
    rss_mb: ArrayLike, scan_size_mb: ArrayLike = SCAN_SIZE_MB
) -> NDArray[np.float64]:
    """Scan windows of a task's address space (``task_nr_scan_windows``, kernel/sched/fair.c).

    The resident set rounded up to whole ``scan_size`` windows (an empty one
    counts as one window).
    """
    return np.asarray(_windows(rss_mb, scan_size_mb), dtype=float)


def task_scan_bounds(
    rss_mb: ArrayLike,
    scan_size_mb: ArrayLike = SCAN_SIZE_MB,
    period_min_ms: ArrayLike = SCAN_PERIOD_MIN_MS,
    period_max_ms: ArrayLike = SCAN_PERIOD_MAX_MS,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """:func:`task_scan_min` and :func:`task_scan_max` at once."""
    return (
        task_scan_min(rss_mb, scan_size_mb, period_min_ms),
        task_scan_max(rss_mb, scan_size_mb, period_min_ms, period_max_ms),
    )


def task_scan_min(
    rss_mb: ArrayLike,
    scan_size_mb: ArrayLike = SCAN_SIZE_MB,
    period_min_ms: ArrayLike = SCAN_PERIOD_MIN_MS,
) -> NDArray[np.float64]:
    """Shortest scan period (ms per ``scan_size`` window) of a task (``task_scan_min``).

    ``max(1000 / (2560 // scan_size), period_min / windows)`` with the kernel's
    integer divisions: the whole address space is scanned at most once per
    ``period_min`` and no faster than 2560 MB/s. Compiled code inlines
    :func:`scan_min_of`.
    """
    return np.asarray(_scan_min(rss_mb, scan_size_mb, period_min_ms), dtype=float)


def task_scan_max(
    rss_mb: ArrayLike,
    scan_size_mb: ArrayLike = SCAN_SIZE_MB,
    period_min_ms: ArrayLike = SCAN_PERIOD_MIN_MS,
    period_max_ms: ArrayLike = SCAN_PERIOD_MAX_MS,
) -> NDArray[np.float64]:
    """Longest scan period (ms per window) of a task without a NUMA group (``task_scan_max``).

    ``max(task_scan_min, period_max / windows)``: the whole address space is
    scanned at least once per ``period_max``. Compiled code inlines :func:`scan_max_of`.
    """
    return np.asarray(_scan_max(rss_mb, scan_size_mb, period_min_ms, period_max_ms), dtype=float)


@inline
def _slower(ratio, slot):  # pragma: no cover (compiled)
    return np_maximum(ratio - NUMA_PERIOD_THRESHOLD, 1.0) * slot


@inline
def scan_period_after(
    period, local, remote, private, shared, failed, smin, smax
):  # pragma: no cover (compiled)
    """:func:`update_task_scan_period` of one task (scalars)."""
    if (local + shared <= 0) or (failed > 0):
        return np_minimum(smax, 2.0 * period)
    slot = np.ceil(period / NUMA_PERIOD_SLOTS)
    lr = np.floor(local * NUMA_PERIOD_SLOTS / np_maximum(local + remote, 1e-300))
    sp = np.floor(shared * NUMA_PERIOD_SLOTS / np_maximum(private + shared, 1e-300))
    if sp >= NUMA_PERIOD_THRESHOLD:
        diff = _slower(sp, slot)
    elif lr >= NUMA_PERIOD_THRESHOLD:
        diff = _slower(lr, slot)
    else:
        diff = -(NUMA_PERIOD_THRESHOLD - np_maximum(lr, sp)) * slot
    return np_clip(period + diff, smin, np_maximum(smin, smax))


_scan_period_after = array_form(
    "float64(float64, float64, float64, float64, float64, float64, float64, float64)",
    scan_period_after,
)


def update_task_scan_period(
    period_ms: ArrayLike,
    local: ArrayLike,
    remote: ArrayLike,
    private: ArrayLike,
    shared: ArrayLike,
    failed: ArrayLike,
    smin_ms: ArrayLike,
    smax_ms: ArrayLike,
) -> NDArray[np.float64]:
    """A task's next scan period from its hint faults of the last scan sequence.

    kernel/sched/fair.c ``update_task_scan_period``: no recorded fault (or a
    failed migration) doubles the period (up to ``smax``); otherwise with
    ``slot = ceil(period / 10)``, ``sp = 10 * shared / (private + shared)`` and
    ``lr = 10 * local / (local + remote)``: ``sp >= 7`` or else ``lr >= 7``
    lengthens it by ``(ratio - 7) * slot`` (at least one slot), and otherwise
    it shortens by ``(7 - max(lr, sp)) * slot``; clamped to ``smin..smax``.
    Fault counts are in any unit (pages, MB), the ratios are integer tenths. Compiled
    code inlines :func:`scan_period_after`.
    """
    return np.asarray(
        _scan_period_after(period_ms, local, remote, private, shared, failed, smin_ms, smax_ms),
        dtype=float,
    )


# --------------------------------------------------------------------------- mm/memcontrol.c

MEMCG_CHARGE_BATCH = 64  # pages charged at once (include/linux/memcontrol.h)
MEMCG_MAX_HIGH_DELAY_S = 2.0  # MEMCG_MAX_HIGH_DELAY_JIFFIES = 2 * HZ
MEMCG_MIN_HIGH_DELAY_S = 0.01  # mem_cgroup_handle_over_high: no sleep at or under HZ / 100


def memcg_high_delay_s(
    usage: ArrayLike, high: ArrayLike, nr_pages: ArrayLike = MEMCG_CHARGE_BATCH
) -> NDArray[np.float64]:
    """Sleep (s) a task charging ``nr_pages`` over ``memory.high`` owes (``calculate_high_delay``).

    mm/memcontrol.c: ``overage = (usage - high) / high`` (fixed point, 20 bits),
    ``penalty = overage^2 * HZ >> 20 >> 14`` jiffies, i.e. ``64 * overage^2``
    seconds, times ``nr_pages / MEMCG_CHARGE_BATCH``; 0 at or under ``high``.
    ``mem_cgroup_handle_over_high`` caps one sleep at 2 s and skips sleeps of
    10 ms or less (the cap is the caller's: see :func:`memcg_high_throttle`).
    """
    return high_delay_s(usage, high, nr_pages)


@ufunc("float64(float64, float64, float64)")
def high_delay_s(usage: float, high: float, nr_pages: float) -> float:
    """:func:`memcg_high_delay_s` with every argument given: the ufunc compiled code calls."""
    hi = max(high, 1e-300)
    over = min(max(usage - hi, 0.0) / hi, 1e6)  # 1e6: far past the 2 s cap
    return 64.0 * over * over * nr_pages / MEMCG_CHARGE_BATCH


def memcg_high_throttle(
    usage: ArrayLike, high: ArrayLike, charged_pages: ArrayLike
) -> NDArray[np.float64]:
    """Seconds a cgroup's tasks sleep for ``charged_pages`` charged over ``memory.high``.

    mm/memcontrol.c ``mem_cgroup_handle_over_high``: on the way back to user
    space after charging, a task over ``memory.high`` whose reclaim cannot
    bring usage down sleeps ``calculate_high_delay`` (at most 2 s, none at or
    under 10 ms). Charges come in batches of ``MEMCG_CHARGE_BATCH`` pages,
    one return to user space each.
    """
    per = memcg_high_delay_s(usage, high)
    per = np.where(per > MEMCG_MIN_HIGH_DELAY_S, np.minimum(per, MEMCG_MAX_HIGH_DELAY_S), 0.0)
    return per * np.asarray(charged_pages, dtype=float) / MEMCG_CHARGE_BATCH


@inline
def tier_aware(limit_gib, toptier_gib, total_gib):  # pragma: no cover (compiled)
    """A cgroup limit scaled to the top tier (tier-aware memcg limits RFC, linux-mm).

    ``memory.toptier_low/high = memory.low/high * toptier / total`` (J. Hahn,
    "mm/memcontrol: Make memcg limits tier-aware", RFC 2026, after K. Zhao's
    tiering-fairness RFC, 2024, which scales memory.low the same way): with
    150 G of DRAM and 50 G of CXL, ``memory.high = 40G`` caps DRAM at 30 G.
    """
    return limit_gib * toptier_gib / np_maximum(total_gib, 1e-300)


#: :func:`tier_aware` on arrays (numpy's broadcasting)
tier_aware_limit = array_form("float64(float64, float64, float64)", tier_aware)


#: TierGym's memcg limit modes (``KernelConfig.memcg_limits``), by index
MEMCG_TOTAL, MEMCG_TIER_AWARE, MEMCG_DRAM = 0, 1, 2


@inline
def dram_high_in_force(high_gib, mode, toptier_share):  # pragma: no cover (compiled)
    """The cap on a cgroup's DRAM in force for its memory.high: none (inf) with the
    kernel's limits on total usage (``total``), the limit scaled to the DRAM share
    ``toptier_share`` (``tier_aware``), the limit itself (``dram``: TierGym before)."""
    if mode == MEMCG_TOTAL:
        return np.inf
    return tier_aware(high_gib, toptier_share, 1.0) if mode == MEMCG_TIER_AWARE else high_gib


@inline
def low_in_force(low_gib, mode, toptier_share):  # pragma: no cover (compiled)
    """memory.low in force: scaled to the DRAM share with ``tier_aware``, else as given
    (on total usage with ``total``, on DRAM with ``dram``)."""
    return tier_aware(low_gib, toptier_share, 1.0) if mode == MEMCG_TIER_AWARE else low_gib


@inline
def total_high_in_force(high_gib, mode):  # pragma: no cover (compiled)
    """memory.high on the cgroup's total usage: none (inf) with the ``dram`` mode."""
    return np.inf if mode == MEMCG_DRAM else high_gib


# the same for arrays (numpy's broadcasting); compiled code inlines the functions above
memcg_dram_high = array_form("float64(float64, int64, float64)", dram_high_in_force)
memcg_low = array_form("float64(float64, int64, float64)", low_in_force)
memcg_total_high = array_form("float64(float64, int64)", total_high_in_force)


# --------------------------------------------------------------------------- mm/page_alloc.c

#: ``include/linux/topology.h``: a node's distance to itself, and the default distance
#: to another node when firmware gives no SLIT.
LOCAL_DISTANCE = 10
REMOTE_DISTANCE = 20
#: ``mm/page_alloc.c``: added to the distance of a node with CPUs ("give preference to
#: headless and unused nodes").
PENALTY_FOR_NODE_WITH_CPUS = 1
#: The two ways ``build_zonelists`` has accumulated ``node_load`` (see
#: :func:`build_fallback_lists`).
FALLBACK_LISTS = ("pre-2021", "current")


def find_next_best_node(
    node: int,
    used: list[bool],
    distance: NDArray[np.int64],
    has_cpus: NDArray[np.bool_],
    node_load: list[int],
) -> int:
    """The next node of ``node``'s fallback list, or -1 when every node is used.

    ``mm/page_alloc.c`` ``find_next_best_node``: the node itself first; then the
    unused node with the smallest ``distance + (n < node) + PENALTY_FOR_NODE_WITH_CPUS
    * has_cpus``, ties broken by the smaller ``node_load`` (the distance term is
    scaled by ``MAX_NODE_LOAD * MAX_NUMNODES`` so the load only breaks ties), then by
    the lower node number (the scan keeps the first minimum). ``used`` is updated.
    """
    n_nodes = len(used)
    if not used[node]:
        used[node] = True
        return node
    scale = (n_nodes + 1) * (max(node_load, default=0) + n_nodes + 1)  # > any node_load
    best, best_val = -1, None
    for n in range(n_nodes):
        if used[n]:
            continue
        val = int(distance[node, n]) + (n < node) + PENALTY_FOR_NODE_WITH_CPUS * bool(has_cpus[n])
        val = val * scale + node_load[n]
        if best_val is None or val < best_val:
            best, best_val = n, val
    if best >= 0:
        used[best] = True
    return best


def build_fallback_lists(
    distance: ArrayLike, has_cpus: ArrayLike, mode: str = "current"
) -> NDArray[np.int64]:
    """Every node's allocation fallback list (N, N), as the kernel builds its zonelists.

    ``mm/page_alloc.c`` ``__build_all_zonelists`` clears ``node_load`` and calls
    ``build_zonelists`` for each online node in turn (node 0 first); that walks
    :func:`find_next_best_node` and, at the first node of each new distance
    group, adds a penalty ``load`` (the number of online nodes, one less per node
    placed) to that node's ``node_load`` so that the next lists built start their
    group with another node (round robin).

    ``mode="current"``: the penalty accumulates (``node_load[node] += load``),
    as restored by "mm/page_alloc: Use accumulated load when building node
    fallback list" (Krupa Ramakrishnan, Bharata B Rao, AMD; linux-mm, 30 Aug 2021,
    merged for 5.15). ``mode="pre-2021"``: it is reset (``node_load[node] = load``),
    as from f0c0b2b808f2 ("change zonelist order: zonelist order selection logic",
    2007) until that fix; on the commit message's 4-node matrix nodes 2 and 3
    then both fall back to node 0 before node 1.
    """
    if mode not in FALLBACK_LISTS:
        raise ValueError(f"fallback_lists: got {mode!r}, expected one of {list(FALLBACK_LISTS)}")
    dist = np.asarray(distance, dtype=np.int64)
    cpus = np.asarray(has_cpus, dtype=bool)
    n_nodes = dist.shape[0]
    node_load = [0] * n_nodes
    lists = np.empty((n_nodes, n_nodes), dtype=np.int64)
    for local in range(n_nodes):
        used = [False] * n_nodes
        load = n_nodes
        prev = local
        for i in range(n_nodes):
            node = find_next_best_node(local, used, dist, cpus, node_load)
            if dist[local, node] != dist[local, prev]:
                if mode == "current":
                    node_load[node] += load
                else:
                    node_load[node] = load
            lists[local, i] = node
            prev = node
            load -= 1
    return lists


def _first_socket(
    order: NDArray[np.int64],
    valid: NDArray[np.bool_],
    want: NDArray[np.bool_],
    socket: NDArray[np.int64],
) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
    """(B, R) the socket of the first node of ``order`` (B, R, N) where ``want`` (B, R, N,
    aligned with ``order``), and whether there is one."""
    hit = valid & want
    has: NDArray[np.bool_] = np.asarray(hit.any(axis=2))
    pos = np.argmax(hit, axis=2)
    node = np.take_along_axis(order, pos[:, :, None], axis=2)[:, :, 0]
    sock = np.take_along_axis(socket, np.maximum(node, 0), axis=1)
    return sock, has


def near_nodes(
    order: ArrayLike, is_cxl: ArrayLike, socket: ArrayLike
) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """(B, R, N) each row's nearest DRAM nodes and nearest CXL nodes, from its allocation
    fallback list ``order`` (B, R, N; -1 entries excluded, a zonelist of
    :func:`build_fallback_lists` restricted by a bind mask), the nodes' kinds ``is_cxl`` and
    sockets ``socket`` (B, N): the DRAM nodes of the socket of the list's first DRAM node and
    the CXL nodes of the socket of its first CXL node (what :mod:`baselines.placement` places
    a share on). A tier the list does not reach is empty."""
    order = np.asarray(order, dtype=np.int64)
    is_cxl = np.asarray(is_cxl, dtype=bool)
    socket = np.asarray(socket, dtype=np.int64)
    B, R, N = order.shape
    if is_cxl.shape != (B, N) or socket.shape != (B, N):
        raise ValueError(
            f"near_nodes: fallback lists {order.shape} need is_cxl and socket of shape "
            f"{(B, N)}, got {is_cxl.shape} and {socket.shape}"
        )
    valid = order >= 0
    kind = np.take_along_axis(
        np.broadcast_to(is_cxl[:, None, :], (B, R, N)), np.maximum(order, 0), axis=2
    )  # (B, R, N) whether each list entry is a CXL node
    allowed = (order[:, :, :, None] == np.arange(N)).any(axis=2)  # (B, R, N) node in the list
    dsock, dhas = _first_socket(order, valid, ~kind, socket)
    csock, chas = _first_socket(order, valid, kind, socket)
    same_d = socket[:, None, :] == dsock[:, :, None]
    same_c = socket[:, None, :] == csock[:, :, None]
    dram = allowed & ~is_cxl[:, None, :] & same_d & dhas[:, :, None]
    cxl = allowed & is_cxl[:, None, :] & same_c & chas[:, :, None]
    return dram, cxl


def auto_tier_shares(
    bandwidth_gbps: ArrayLike,
    dram_on: NDArray[np.bool_],
    cxl_on: NDArray[np.bool_],
    weightiness: int = 32,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(B, R) the DRAM share and the CXL share of the weighted-interleave auto weights
    (:func:`auto_interleave_weights` of the firmware bandwidth (B, N)) over each row's nodes
    ``dram_on | cxl_on`` (B, R, N; e.g. :func:`near_nodes`): bandwidth-proportional
    interleave across both tiers. Nodes off a row count for nothing; a row without CXL
    nodes has DRAM share 1 and CXL share 0."""
    bw = np.asarray(bandwidth_gbps, dtype=float)
    on = dram_on | cxl_on
    auto = np.where(
        on, auto_interleave_weights(np.where(on, bw[:, None, :], 0.0), weightiness), 0
    ).astype(float)
    total = np.maximum(auto.sum(axis=2), 1e-300)
    dram = np.where(dram_on, auto, 0.0).sum(axis=2)
    return dram / total, np.where(dram_on, 0.0, auto).sum(axis=2) / total
