"""Kernel mechanisms the model runs, written once and shared with the baselines.

Each function is batched over leading axes and mirrors the Linux source named
in its docstring (constants of the source as defaults).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "FALLBACK_LISTS",
    "LOCAL_DISTANCE",
    "MAX_WEIGHT",
    "PAGE_BYTES",
    "REMOTE_DISTANCE",
    "SWAP_CLUSTER_MAX",
    "THRESHOLD_MAX_MS",
    "THRESHOLD_START_MS",
    "THRESHOLD_UNIT_MS",
    "adapt_promotion_threshold",
    "auto_interleave_weights",
    "build_fallback_lists",
    "default_min_free_kbytes",
    "find_next_best_node",
    "gcd_reduce",
    "memcg_promotion_scan_fraction",
    "memcg_reclaim_scan",
    "pgdat_free_space_enough",
    "zone_watermarks",
]

PAGE_BYTES = 4096
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
    (not above 2000 ms).
    """
    th = np.asarray(threshold_ms, dtype=float)
    cand = np.asarray(candidates_mb, dtype=float)
    ref = np.asarray(rate_limit_mbps, dtype=float) * np.asarray(period_s, dtype=float)
    down = cand > 1.1 * ref
    up = cand < 0.9 * ref
    th = np.where(down, np.maximum(th - THRESHOLD_UNIT_MS, THRESHOLD_UNIT_MS), th)
    return np.where(up, np.minimum(th + THRESHOLD_UNIT_MS, THRESHOLD_MAX_MS), th)


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


def gcd_reduce(weights: ArrayLike) -> NDArray[np.int64]:
    """Integer weights (..., N) divided by the gcd of each row's positive entries (0 stays 0)."""
    w = np.asarray(weights, dtype=np.int64)
    g = np.gcd.reduce(np.where(w > 0, w, 0), axis=-1, keepdims=True)
    return np.where(g > 0, w // np.maximum(g, 1), w)


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


def pgdat_free_space_enough(
    free_gib: ArrayLike, promo_wmark_gib: ArrayLike, node_gib: ArrayLike
) -> NDArray[np.bool_]:
    """Whether a DRAM node has so much free memory that every candidate is promoted.

    ``kernel/sched/fair.c`` ``pgdat_free_space_enough``: free pages above
    ``PROMO + max(1 GiB, node_present_pages / 16)`` (strictly, ``zone_watermark_ok``);
    NUMA balancing then promotes without the rate limit and the hot threshold.
    """
    extra = np.maximum(1.0, np.asarray(node_gib, dtype=float) / 16.0)
    return np.asarray(free_gib) > np.asarray(promo_wmark_gib) + extra


# --------------------------------------------------------------------------- mm/vmscan.c

SWAP_CLUSTER_MAX = 32  # pages: the least a reclaim pass scans of an LRU it visits


def memcg_reclaim_scan(
    size_pages: ArrayLike,
    protection_pages: ArrayLike,
    usage_pages: ArrayLike,
    min_scan_pages: float = SWAP_CLUSTER_MAX,
) -> NDArray[np.float64]:
    """Pages of a cgroup's LRU that reclaim scans, given its protection (``memory.low``).

    ``mm/vmscan.c`` ``apply_proportional_protection`` (with the tiering-fairness RFC's
    DRAM protection): a cgroup at or under its protection is skipped; otherwise
    ``scan = size - size * protection / (usage + 1)``, at least ``SWAP_CLUSTER_MAX``
    pages and at most ``size``. All in 4 KiB pages (the ``+ 1`` is one page).
    """
    size = np.asarray(size_pages, dtype=float)
    prot = np.asarray(protection_pages, dtype=float)
    use = np.asarray(usage_pages, dtype=float)
    usage = np.maximum(use, prot)
    scan = size - size * prot / (usage + 1.0)
    scan = np.minimum(np.maximum(scan, min_scan_pages), size)
    return np.where(use <= prot, 0.0, scan)


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
