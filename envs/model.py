"""The batched DRAM + CXL model: one implementation over a batch of ``B`` machines.

Everything is an array with a leading batch axis. Frozen parameters
(:class:`Params`: hardware, tenants, kernel configuration) are kept apart
from the changing :class:`State` (page placement, counters, time, random
keys); :func:`step` is ``(params, state, action) -> (state, outputs)``: a fixed
sequence of phases, each a function of this module, every batch element on its own
numbers. The heavy phases run as compiled kernels (:mod:`envs.allocation`,
:mod:`envs.promotion`, :mod:`envs.reclaim`, :mod:`envs.placement`, :mod:`envs.solver`)
that the functions here drive; the rest is numpy.

Shapes: ``B`` machines, ``T`` tenant slots, ``K`` hotness buckets (hot to
cold), ``N`` memory nodes, ``P`` phases per tenant. One interval:

1. tenants start, stop, change phase and grow; churned pages are freed;
2. missing pages are allocated by the tenant's interleave weights, falling
   back local-first (nearest node with free pages above its LOW watermark)
   when a node is full; ``memory_high_gib`` caps a tenant's DRAM;
3. DRAM above a tenant's ``memory_high_gib`` is demoted; kswapd demotes the
   coldest unprotected DRAM pages (``memory_low_gib`` protects) to the nearest
   CXL node until free memory is back at its target watermark;
4. hot CXL pages are promoted to the tenant's local DRAM up to the promotion
   rate limit and the free memory above the HIGH watermark; hotness
   detection is sampled (a page is a candidate when its access rate makes a
   hint fault within the hot threshold likely, with sampling noise);
5. migrations add traffic on both nodes and CPU time to the tenant;
6. the closed-loop fixed point (:mod:`envs.solver`) gives every tenant's
   throughput and every node's loaded latency.

See ``docs/model.md`` for the equations and their sources.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from envs import allocation as _allocation
from envs import interval as _interval
from envs import placement as _placement
from envs import promotion as _promotion
from envs import reclaim as _reclaim
from envs.gather import gather_phase as _gather
from envs.hardware import turnaround_penalty
from envs.kernel import (
    FALLBACK_LISTS,
    GB_PER_GIB,
    GIB,
    LINE_BYTES,
    MEMCG_CHARGE_BATCH,
    PAGE_BYTES,
    PAGES_PER_GIB,
    SCAN_DELAY_MS,
    SCAN_PERIOD_MAX_MS,
    SCAN_PERIOD_MIN_MS,
    SCAN_SIZE_MB,
    THRESHOLD_START_MS,
    build_fallback_lists,
    memcg_dram_high,
    memcg_high_throttle,
    memcg_low,
    memcg_promotion_scan_fraction,
    memcg_total_high,
    zone_watermarks,
)
from envs.reclaim import from_tanh, tanh_arg
from envs.records import record
from envs.rng import lognormal32 as _lognormal32
from envs.rng import splitmix as _splitmix
from envs.rng import uniform as _uniform
from envs.scenario import (
    CdfHotness,
    HotColdHotness,
    Scenario,
    TenantSpec,
    ZipfHotness,
    tenant_cpu_node,
)
from envs.solver import (
    LANES,
    WIDE_LANES,
    NodeCurves,
    SocketLinks,
    link_weights,
    lsum,
    solve_fixed_point,
)
from envs.solver import TOL as SOLVER_TOL
from envs.solver import curve_rows as _curve_rows

__all__ = [
    "BUCKET_EDGES",
    "LINE_BYTES",
    "PRECISIONS",
    "Action",
    "KernelConfig",
    "Outputs",
    "Params",
    "State",
    "compile_params",
    "init_state",
    "step",
]

F64 = NDArray[np.float64]
# Hotness buckets: edges in fraction of a tenant's pages, hottest first.
# Log-spaced at the hot end so a Zipf head is resolved with few buckets.
BUCKET_EDGES = np.array([0.0, 0.001, 0.005, 0.02, 0.06, 0.15, 0.3, 0.6, 1.0])
K_BUCKETS = len(BUCKET_EDGES) - 1
_BUCKET_WIDTHS = np.diff(BUCKET_EDGES)[:, None]  # (K, 1) share of the working set per bucket
_WIDTHS = np.ascontiguousarray(_BUCKET_WIDTHS[:, 0])  # (K,) the same, for the compiled phases

#: The model core's precisions (:func:`step`'s ``precision``, the environment's argument of
#: that name). ``"reference"``: the fixed point solved to the solver's tolerance
#: (:data:`envs.solver.TOL`, 1e-8 relative error of Little's law), the numbers every
#: release keeps bit for bit. ``"fast"``: the same float64 code with Newton stopped at
#: :data:`FAST_SOLVER_TOL` (usually one Newton iteration fewer in a block); a step's
#: metrics stay within :data:`FAST_RTOL` of the reference's
#: (``tests/envs/test_precision.py``).
PRECISIONS = ("reference", "fast")
#: the fixed point's tolerance on the fast path (the residual: relative error of Little's law);
#: the fast path also solves 64 elements side by side instead of 32
#: (:data:`envs.solver.WIDE_LANES`: the same numbers, less waiting at this tolerance)
FAST_SOLVER_TOL = 1e-6
#: the documented tolerance of the fast path: every float of a step's outputs and new
#: state (and the environments' rewards and observations), from the same state and
#: action, within ``max(FAST_RTOL * |x|, FAST_ATOL)`` of the reference's ``x`` (the
#: absolute bound for numbers near 0: a reward, a log); so is every step of a trajectory
#: where no discontinuous mechanism fires (``tests/envs/test_precision.py``)
FAST_RTOL = 1e-4
FAST_ATOL = 1e-6
#: the fast path's tolerance on a trajectory's means (throughput, normalised performance,
#: latency over the batch and the run) where reclaim to a watermark fires: a difference
#: of 1e-6 on either side of a watermark moves later demotions, so such a trajectory's
#: per-step numbers part from the reference's (as the reference's own do when solved to
#: 1e-10 instead of 1e-8) while its means stay close
FAST_MEAN_RTOL = 1e-3


def solver_tolerance(precision: str) -> float:
    """The fixed point's tolerance of a precision of :data:`PRECISIONS`.

    Raises:
        ValueError: an unknown precision, named with the known ones.
    """
    if precision == "reference":
        return SOLVER_TOL
    if precision == "fast":
        return FAST_SOLVER_TOL
    raise ValueError(f"precision: got {precision!r}, expected one of {list(PRECISIONS)}")


# --------------------------------------------------------------------------- configuration

MEMCG_LIMIT_MODES = ("total", "tier_aware", "dram")


@dataclass(frozen=True)
class KernelConfig:
    """Kernel mechanisms that are not actions; a baseline sets them as its system does.

    - ``demotion``: kswapd demotes cold DRAM pages to CXL (``/sys/kernel/mm/numa/demotion_enabled``).
    - ``demote_watermark_frac``: TPP's proactive demotion watermark as a fraction of the
      node (0 = kernel default: wake below LOW, demote up to HIGH, or PROMO while
      promotion runs). TPP uses 0.02 (``demote_scale_factor`` 200/10000).
    - ``promote_active_only``: TPP: a page must be seen twice (active LRU) before promotion.
    - ``threshold_adapt``: NUMA-balancing hot-threshold adaptation every ``threshold_period_s``.
    - ``promotion_throttle``: per-cgroup promotion throttle of the tiering-fairness RFC.
    - ``kswapd_scan_pages_per_s``: ``R``, the 4 KiB pages of a node's inactive anon LRU
      that its kswapd looks at per second (``shrink_folio_list``: the reference check,
      and the demotion of what it lets go); the LRU's active list is refilled beside it
      (``shrink_active_list``). No public source measures it: the bounds are 0.2M-1M
      pages/s (0.8-4 GB/s; ``../shared/calibration/reclaim.md``: at least the ~180k
      pages/s of demotion behind the 725.6 MB/s of promotion with DRAM full in Huang
      Ying's "memory tiering: hot page selection" cover letter, linux-mm 2022; at most
      one thread's 4 KiB ``move_pages()`` copy, 3.3-3.55 GB/s, Shivank Garg, lkml 2026).
      The default 500,000 (2.05 GB/s) is near the middle of that range on a log scale
      (0.45M), not a measurement and not fitted to any result; report conclusions
      across the range (``python -m scripts.tiering_fairness --range``).
      Pages are 4 KiB, not THP (see :func:`lru_reclaim`).
    - ``kswapd_gibps``: a cap on what a node's kswapd demotes per second on top of the
      scan throughput (DAMON's demotion quota, ``baselines``); the default 4 GiB/s lies
      above the scan bound's top (1M pages/s = 3.8 GiB/s), so that ``R`` decides.
    - ``migrate_cpu_us_per_page``: CPU time charged to a tenant per promoted 4 KiB page
      (hint fault, copy, TLB shootdown).
    - ``detection_noise``: log-normal sigma of the sampled hotness detection.
    - ``scan_period_s``: time a page stays unmapped after a scan (plentiful-free case).
    - ``scan_mb_per_period``: address space NUMA balancing scans per scan period and
      tenant (``numa_balancing_scan_size_mb``, 256 MB); only scanned pages can fault.
    - ``migrate_max_util``: the most of a node's bandwidth (as a share of its read
      and write peaks) that page migration may use in an interval. Migration
      copies are memory traffic like the tenants'; what does not fit is left for
      later intervals, so no node is driven past its peak by migration alone.
    - ``memcg_limits``: what a tenant's ``memory_low_gib`` / ``memory_high_gib`` act on.
      ``"total"`` (default, Linux): the cgroup's total usage (DRAM + CXL);
      ``memory.low`` protects it from reclaim (demotion), ``memory.high`` makes a
      charging cgroup over it reclaim (demote) its DRAM and sleep
      (``mem_cgroup_handle_over_high``). ``"tier_aware"``: the tier-aware memcg
      RFC: additionally DRAM usage is held to the limits scaled by the DRAM share
      of the machine's capacity (``memory.toptier_low/high``), DRAM protection and
      DRAM cap as in ``"dram"``. ``"dram"``: TierGym before this option: the
      limits as given act on DRAM usage only (low protects DRAM, high caps it).
      A scenario's ``kernel.memcg_limits`` takes precedence.
    - ``numa_scan``: ``"task"`` (default): NUMA-balancing scanning per task as the
      kernel runs it (``task_numa_work``): ``scan_size_mb`` every scan period,
      the first scan ``scan_delay_ms`` after the tenant starts, the period between
      ``task_scan_min`` and ``task_scan_max`` (from ``scan_period_min_ms`` /
      ``scan_period_max_ms`` and the tenant's resident set) and adapted after
      each pass over the address space (``update_task_scan_period``).
      ``"fixed"``: ``scan_mb_per_period`` every ``scan_period_s`` (TierGym before).
    - ``scan_delay_ms``, ``scan_period_min_ms``, ``scan_period_max_ms``,
      ``scan_size_mb``: the ``numa_balancing_*`` sysctls (kernel defaults).
    - ``fallback_lists``: how ``build_zonelists`` accumulates ``node_load``:
      ``"current"`` (since the Aug 2021 fix) or ``"pre-2021"`` (the node load reset
      for every list; :func:`envs.kernel.build_fallback_lists`). A scenario's
      ``kernel.fallback_lists`` takes precedence.
    """

    demotion: bool = True
    demote_watermark_frac: float = 0.0
    promote_active_only: bool = False
    threshold_adapt: bool = True
    threshold_period_s: float = 60.0
    promotion_throttle: bool = False
    kswapd_scan_pages_per_s: float = 500_000.0
    kswapd_gibps: float = 4.0
    migrate_cpu_us_per_page: float = 10.0
    detection_noise: float = 0.3
    scan_period_s: float = 1.0
    scan_mb_per_period: float = 256.0
    migrate_max_util: float = 0.9
    memcg_limits: str = "total"
    numa_scan: str = "task"
    scan_delay_ms: float = SCAN_DELAY_MS
    scan_period_min_ms: float = SCAN_PERIOD_MIN_MS
    scan_period_max_ms: float = SCAN_PERIOD_MAX_MS
    scan_size_mb: float = SCAN_SIZE_MB
    fallback_lists: str = "current"

    def __post_init__(self) -> None:
        if self.fallback_lists not in FALLBACK_LISTS:
            raise ValueError(
                f"KernelConfig.fallback_lists: got {self.fallback_lists!r}, expected one of "
                f"{list(FALLBACK_LISTS)}"
            )
        if self.memcg_limits not in MEMCG_LIMIT_MODES:
            raise ValueError(
                f"KernelConfig.memcg_limits: got {self.memcg_limits!r}, expected one of {MEMCG_LIMIT_MODES}"
            )
        if self.numa_scan not in ("task", "fixed"):
            raise ValueError(
                f"KernelConfig.numa_scan: got {self.numa_scan!r}, expected 'task' or 'fixed'"
            )
        for name in ("scan_period_min_ms", "scan_size_mb", "kswapd_scan_pages_per_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"KernelConfig.{name}: got {getattr(self, name)}, expected > 0")
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, float) and (not math.isfinite(v) or v < 0):
                raise ValueError(f"KernelConfig.{f.name}: got {v}, expected a finite number >= 0")
        if not 0.0 < self.migrate_max_util <= 1.0:
            raise ValueError(
                f"KernelConfig.migrate_max_util: got {self.migrate_max_util}, expected 0 < x <= 1"
            )


# --------------------------------------------------------------------------- data containers
#
# Inside the core every array keeps the batch axis LAST ((T, N, B) and so on):
# numpy reduces over small leading axes of such arrays over ten times faster than over
# small trailing axes of batch-first ones, and a step reduces over tenants,
# buckets and nodes many times (``benchmarks/env_speed.py``, table "Layout"). The
# public surface (Action, Outputs, ``State.placement``) is batch-first.


@dataclass(frozen=True)
class Params:
    """Frozen parameters of a batch; arrays batch-last (shapes in comments).

    Never written after :func:`compile_params`: :meth:`subset` and
    :meth:`replace_rows` return new objects.
    """

    node_names: list[str]
    tenant_names: list[list[str]]  # per batch element (padded slots are "")
    scenario_names: list[str]
    interval_s: F64  # (B,)
    episode_steps: NDArray[np.int64]  # (B,)
    capacity_gib: F64  # (N, B)
    is_cxl: NDArray[np.bool_]  # (N, B)
    node_socket: NDArray[np.int64]  # (N, B)
    wm_min: F64  # (N, B)
    wm_low: F64
    wm_high: F64
    wm_promo: F64
    curves: NodeCurves  # (N, B) each
    fallback: NDArray[
        np.int64
    ]  # (T, N, B) node indices in fallback order for the tenant's first socket
    # (its CPU node's zonelist, or the preferred node's; -1 for nodes a bind mask excludes)
    local_dram: NDArray[np.int64]  # (T, P, B) local DRAM node per phase
    demote_target: NDArray[np.int64]  # (N, B) -1 where none
    present: NDArray[np.bool_]  # (T, B)
    start_s: F64  # (T, B)
    stop_s: F64  # (T, B) inf when it runs to the end
    phase_at: F64  # (T, P, B) inf for unused phases
    threads: F64  # (T, P, B)
    socket: NDArray[np.int64]  # (T, P, B)
    mlp: F64
    compute_ns: F64
    read_fraction: F64
    working_set_gib: F64
    grow_gib_per_s: F64
    memory_low_gib: F64
    memory_high_gib: F64  # inf for none
    churn_per_s: F64
    access_share: F64  # (T, P, K, B)
    jitter: F64  # (B,) amplitude of the per-episode randomisation of tenants
    init_weights: F64  # (T, N, B)
    demotion: NDArray[np.bool_]  # (B,) kernel configuration from here on
    demote_wm_frac: F64
    active_only: NDArray[np.bool_]
    threshold_adapt: NDArray[np.bool_]
    threshold_period_s: F64
    promo_throttle: NDArray[np.bool_]
    kswapd_gibps: F64
    kswapd_scan_pps: F64  # (B,) pages of the inactive anon LRU kswapd looks at per second
    migrate_cpu_us: F64
    detect_noise: F64
    scan_period_s: F64
    scan_gib_per_s: F64
    migrate_max_util: F64
    memcg_mode: NDArray[np.int64]  # (B,) index into MEMCG_LIMIT_MODES
    toptier_share: F64  # (B,) DRAM share of the machine's capacity (tier-aware limits)
    memcg_fixed: NDArray[
        np.int64
    ]  # (B,) the scenario's own memcg_mode (kernel.memcg_limits), -1: none
    scan_task: NDArray[np.bool_]  # (B,) per-task NUMA-balancing scanning
    scan_delay_s: F64  # (B,)
    scan_min_ms: F64  # (B,) sysctl numa_balancing_scan_period_min_ms
    scan_max_ms: F64  # (B,)
    scan_size_mb: F64  # (B,)
    # topology (docs/model.md, "Topology"); added after the fields above
    policy_mask: F64  # (T, N, B) 1 where the tenant's mempolicy lets pages go
    policy_w: F64  # (T, N, B) the policy's weights when the action's are all zero (0: local)
    numa_mof: NDArray[np.bool_]  # (T, B) NUMA balancing may migrate its pages (default policy)
    link_gbps: F64  # (B,) socket link bandwidth per direction (inf: none)
    link_slope_ns: F64  # (B,)
    link_knee_ns: F64  # (B,)
    link_knee_exp: F64  # (B,)
    random: F64  # (T, P, B) 1 where the tenant's access is random
    # page references (docs/validation.md, "Page references per pass"); added after the fields above
    touch_lines: F64  # (T, P, B) lines of a page one touch reads (line accesses per reference)
    passes: F64  # (T, P, B) 1 where the tenant makes passes (periodic references), else Poisson

    @property
    def batch_size(self) -> int:
        return int(self.interval_s.shape[0])

    # Constants of the batch that a step needs, computed at their first use and kept
    # (the parameters are never written; a new batch is a new object).

    @functools.cached_property
    def flags(self) -> dict[str, Any]:
        """Which mechanisms some element of the batch has (each step tests them)."""
        return {
            "policy_mask": bool((self.policy_mask < 1).any()),
            "link_limit": bool(np.isfinite(self.link_gbps).any()),
            "random": bool(self.random.any()),
            "active_only": bool(self.active_only.any()),
            "scan_task": bool(self.scan_task.any()),
            "promo_throttle": bool(self.promo_throttle.any()),
            # CXL nodes: (node, CXL in every element)
            "cxl_nodes": [
                (n, bool(self.is_cxl[n].all())) for n in range(self.n_nodes) if self.is_cxl[n].any()
            ],
        }

    @functools.cached_property
    def policy_fractions(self) -> tuple[NDArray[np.bool_], F64] | None:
        """Where a tenant's mempolicy has weights of its own (T, 1, B), and those weights
        as fractions (T, N, B); None when no tenant's has."""
        pw = self.policy_w
        ptot = lsum(pw, 1)
        if not (ptot > 0).any():
            return None
        return ptot[:, None] > 0, pw / np.where(ptot > 0, ptot, 1.0)[:, None]

    @functools.cached_property
    def threshold_period_steps(self) -> NDArray[np.int64]:
        """Intervals per hot-threshold adaptation period (B,), at least 1."""
        return np.maximum(np.round(self.threshold_period_s / self.interval_s), 1).astype(np.int64)

    @functools.cached_property
    def migration_peaks(self) -> tuple[F64, F64]:
        """Each node's read and write peak for page migration (N, B), the CXL link included."""
        c = self.curves
        return np.minimum(c.mem_read, c.link_read), np.minimum(c.mem_write, c.link_write)

    @functools.cached_property
    def contiguous(self) -> dict[str, np.ndarray]:
        """The arrays the compiled phases (:mod:`envs.allocation`, :mod:`envs.promotion`,
        :mod:`envs.reclaim`) read, C-contiguous: a kernel is compiled once per memory layout of its arguments,
        and some batches hold transposed (Fortran-ordered) arrays."""
        peak_rd, peak_wr = self.migration_peaks
        names = (
            "is_cxl", "demote_target", "capacity_gib", "wm_low", "wm_high", "wm_promo",
            "demotion", "demote_wm_frac", "kswapd_gibps", "kswapd_scan_pps", "memcg_mode",
            "migrate_max_util", "access_share", "scan_period_s", "active_only", "wm_min",
            "fallback", "phase_at", "present", "start_s", "stop_s",
            "grow_gib_per_s", "working_set_gib", "churn_per_s", "local_dram", "memory_high_gib",
            "memory_low_gib", "toptier_share", "threads", "mlp", "compute_ns", "read_fraction",
            "socket", "random", "node_socket", "threshold_period_s", "threshold_adapt",
            "migrate_cpu_us", "touch_lines", "passes",
        )  # fmt: skip
        out = {name: np.ascontiguousarray(getattr(self, name)) for name in names}
        out["peak_rd"], out["peak_wr"] = (
            np.ascontiguousarray(peak_rd),
            np.ascontiguousarray(peak_wr),
        )
        for f in ("mem_read", "mem_write", "mem_turn", "link_read", "link_write"):
            out[f] = np.ascontiguousarray(getattr(self.curves, f))
        return out

    @functools.cached_property
    def machine_totals(self) -> tuple[F64, F64, F64]:
        """(B,) each element's DRAM and CXL capacity (GiB) and its nodes' read peaks,
        the CXL links included (GB/s), each summed over the nodes."""
        c = self.curves
        return (
            np.where(self.is_cxl, 0.0, self.capacity_gib).sum(0),
            np.where(self.is_cxl, self.capacity_gib, 0.0).sum(0),
            np.minimum(c.mem_read, c.link_read).sum(0),
        )

    @functools.cached_property
    def present_at_start(self) -> NDArray[np.bool_]:
        """(T, B) the tenant slots that run from the episode's start."""
        return self.present & (self.start_s <= 0)

    @functools.cached_property
    def curve_rows(self) -> F64:
        """The curves as the fixed point's kernel reads them (:func:`envs.solver.curve_rows`)."""
        return _curve_rows(self.curves, (self.n_nodes, self.batch_size))

    @functools.cached_property
    def machine_log_gib(self) -> tuple[F64, F64]:
        """(B,) ``log2(1 + GiB)`` of each element's DRAM and CXL capacity
        (:attr:`machine_totals`), the scale the observation shows them on."""
        dram, cxl, _ = self.machine_totals
        return np.log2(1.0 + dram), np.log2(1.0 + cxl)

    @functools.cached_property
    def sockets(self) -> NDArray[np.int64]:
        """The sockets of the batch's nodes, sorted (each once)."""
        return np.unique(self.node_socket)

    @functools.cached_property
    def cxl_node_list(self) -> NDArray[np.int64]:
        """The nodes that are CXL in some element of the batch, in order."""
        return np.array([n for n, _ in self.flags["cxl_nodes"]], dtype=np.int64)

    @functools.cached_property
    def demoting_nodes(self) -> list[int]:
        """The nodes that are DRAM with a demotion target in some element of the batch."""
        can = ~self.is_cxl & (self.demote_target >= 0)
        return [m for m in range(self.n_nodes) if can[m].any()]

    @property
    def n_tenants(self) -> int:
        return int(self.present.shape[0])

    @property
    def n_nodes(self) -> int:
        return int(self.capacity_gib.shape[0])

    @property
    def n_phases(self) -> int:
        return int(self.phase_at.shape[1])

    def _zip(
        self,
        other: Params,
        arrays: Callable[[str, np.ndarray, np.ndarray], np.ndarray],
        names: Callable[[list[Any], list[Any]], list[Any]],
    ) -> Params:
        """A new batch from this one's and ``other``'s fields: ``arrays(name, a, b)`` for
        each array (the node curves' too), ``names(a, b)`` for the per-element names."""
        if other.node_names != self.node_names:
            raise ValueError(f"node layout differs: {other.node_names} vs {self.node_names}")
        kw: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            a = getattr(self, f.name)
            b = getattr(other, f.name)
            if isinstance(a, np.ndarray):
                kw[f.name] = arrays(f.name, a, b)
            elif isinstance(a, NodeCurves):
                kw[f.name] = NodeCurves(
                    **{
                        g: arrays(f"{f.name}.{g}", getattr(a, g), getattr(b, g))
                        for g in _CURVE_FIELDS
                    }
                )
            elif f.name in ("tenant_names", "scenario_names"):
                kw[f.name] = names(a, b)
            else:
                kw[f.name] = a
        return Params(**kw)

    def replace_rows(self, idx: Sequence[int] | NDArray[np.int64], other: Params) -> Params:
        """A copy whose batch elements ``idx`` are the elements of ``other`` (same T, N, P).

        Parameters are never written in place: a new episode draws new rows into
        a new object (:func:`envs.core.reset_where`).
        """
        idx = np.asarray(idx, dtype=np.int64)

        def rows(name: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
            if a.shape[:-1] != b.shape[:-1]:
                raise ValueError(f"Params.{name}: shape {b.shape[:-1]} does not fit {a.shape[:-1]}")
            new = a.copy()
            new[..., idx] = b
            return new

        def names(a: list[Any], b: list[Any]) -> list[Any]:
            out = list(a)
            for i, j in enumerate(idx):
                out[j] = b[i]
            return out

        return self._zip(other, rows, names)

    def concat(self, other: Params) -> Params:
        """The batch of ``self`` followed by the batch of ``other`` (same nodes, T and P)."""
        return self._zip(
            other, lambda _, a, b: np.concatenate([a, b], axis=-1), lambda a, b: [*a, *b]
        )

    def subset(self, idx: Sequence[int] | NDArray[np.int64]) -> Params:
        """The parameters of batch elements ``idx`` (a copy)."""
        idx = np.asarray(idx, dtype=np.int64)
        kw: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            a = getattr(self, f.name)
            if isinstance(a, np.ndarray):
                kw[f.name] = a[..., idx]
            elif isinstance(a, NodeCurves):
                kw[f.name] = NodeCurves(**{g: getattr(a, g)[..., idx] for g in _CURVE_FIELDS})
            elif f.name in ("tenant_names", "scenario_names"):
                kw[f.name] = [a[i] for i in idx]
            else:
                kw[f.name] = a
        return Params(**kw)


@dataclass(frozen=True)
class State:
    """Changing state of a batch (arrays batch-last)."""

    t: NDArray[np.int64]  # (B,) steps done in this episode
    place: F64  # (T, K, N, B) GiB of each tenant bucket on each node
    weights: F64  # (T, N, B) interleave weights in force (fractions)
    threshold_ms: F64  # (N, B) hot threshold per DRAM node
    cand_mb: F64  # (N, B) candidates in the current adaptation period
    throughput: F64  # (T, B) last interval's throughput (hotness detection, warm start)
    key: NDArray[np.uint64]  # (B,) random key of the episode
    jit: F64  # (3, T, B) episode factors on mlp, compute_ns and working set
    solo_gbps: F64  # (T, P, B) throughput alone with all pages in local DRAM
    # per-tenant NUMA-balancing scan state (kernel/sched/fair.c, one mm per tenant)
    scan_period_ms: F64  # (T, B) numa_scan_period per scan_size window; 0 before the first scan
    scan_next_s: F64  # (T, B) when scanning starts (start + numa_balancing_scan_delay)
    scan_offset_gib: F64  # (T, B) mm->numa_scan_offset within the address space
    numa_faults_mb: F64  # (T, B) recorded hint faults since the last period update
    # kswapd (mm/vmscan.c): fruitless balance_pgdat passes per node since the last
    # reclaim that succeeded there; at MAX_RECLAIM_RETRIES (16) kswapd gives up on it
    kswapd_failures: F64  # (N, B)

    def copy(self) -> State:
        return record(
            State, {f.name: getattr(self, f.name).copy() for f in dataclasses.fields(self)}
        )

    @property
    def placement(self) -> F64:
        """Page placement, batch-first: (B, T, K, N) GiB."""
        return np.moveaxis(self.place, -1, 0)

    def concat(self, other: State) -> State:
        """The batch of ``self`` followed by the batch of ``other``."""
        return record(
            State,
            {
                f.name: np.concatenate([getattr(self, f.name), getattr(other, f.name)], axis=-1)
                for f in dataclasses.fields(self)
            },
        )

    def split(self, n: int) -> tuple[State, State]:
        """The first ``n`` batch elements and the rest (views; a step never writes a state)."""
        fields = [(f.name, getattr(self, f.name)) for f in dataclasses.fields(self)]
        return record(State, {k: a[..., :n] for k, a in fields}), record(
            State, {k: a[..., n:] for k, a in fields}
        )

    def replace_rows(self, idx: NDArray[np.int64], other: State) -> State:
        """A copy whose batch elements ``idx`` are the elements of ``other``."""
        kw = {}
        for f in dataclasses.fields(self):
            new = getattr(self, f.name).copy()
            new[..., idx] = getattr(other, f.name)
            kw[f.name] = new
        return record(State, kw)


@dataclass
class Action:
    """Per-tenant interleave weights (B, T, N) and promotion rate limit (B,) in MB/s.

    Weights are non-negative; each tenant's are normalised to fractions (a node
    with weight 0 is outside its interleave mask). All-zero weights mean
    local-first (the tenant's local DRAM, then the fallback order). A promotion
    rate of 0 disables promotion (NUMA balancing not in tiering mode).
    """

    weights: F64
    promote_mbps: F64


@dataclass(frozen=True)
class Outputs:
    """What one interval reports (names of section 5 of the design brief), batch-first."""

    node_bandwidth_gbps: F64  # (B, N) read + write incl. migrations
    node_read_gbps: F64
    node_write_gbps: F64
    node_peak_gbps: F64  # (B, N) peak at this interval's read/write mix
    node_utilization: F64  # (B, N) bottleneck utilisation 0..1
    node_latency_ns: F64  # (B, N) loaded latency of a local access
    node_capacity_used_gib: F64  # (B, N)
    tenant_active: NDArray[np.bool_]  # (B, T)
    tenant_throughput_gbps: F64  # (B, T)
    tenant_demand_gbps: F64  # (B, T) throughput at idle latencies (bandwidth demand)
    tenant_norm_perf: F64  # (B, T) throughput / alone-in-local-DRAM throughput
    tenant_latency_ns: F64  # (B, T)
    tenant_dram_access_share: F64  # (B, T)
    tenant_dram_resident_gib: F64  # (B, T)
    tenant_resident_gib: F64  # (B, T) all its pages
    tenant_working_set_gib: F64  # (B, T) its working set this interval (growth and jitter included)
    tenant_read_fraction: F64  # (B, T)
    promotion_mbps: F64  # (B,)
    demotion_mbps: F64  # (B,)
    promotion_candidates_mbps: F64  # (B,)
    total_throughput_gbps: F64  # (B,)
    solver_residual: F64  # (B,)
    solver_iterations: NDArray[np.int64]  # (B,)
    solver_converged: NDArray[np.bool_]  # (B,) residual within the solver's tolerance
    # added after the fields above (issue #49): the cgroup's memory.events "high" of the
    # interval, see :func:`memory_events_high`
    tenant_memory_events_high: F64  # (B, T)

    def split(self, n: int) -> tuple[Outputs, Outputs]:
        """The outputs of the first ``n`` batch elements and of the rest (views)."""
        fields = [(f.name, getattr(self, f.name)) for f in dataclasses.fields(self)]
        return record(Outputs, {k: a[:n] for k, a in fields}), record(
            Outputs, {k: a[n:] for k, a in fields}
        )

    def row(self, i: int) -> dict[str, Any]:
        """The outputs of batch element ``i``."""
        return {f.name: getattr(self, f.name)[i] for f in dataclasses.fields(self)}


# --------------------------------------------------------------------------- compiling scenarios


def bucket_access_shares(
    hotness: ZipfHotness | HotColdHotness | CdfHotness, working_set_gib: float
) -> F64:
    """Share of a tenant's accesses that falls in each hotness bucket (sums to 1).

    A measured distribution (:class:`CdfHotness`) is read linearly between its points:
    a bucket gets the cdf's rise over the bucket's fraction of the pages.
    """
    e = BUCKET_EDGES
    if isinstance(hotness, CdfHotness):
        share = np.diff(np.interp(e, hotness.page_grid, hotness.cdf))
    elif isinstance(hotness, HotColdHotness):
        h, a = hotness.hot_fraction, hotness.hot_access_fraction
        lo, hi = e[:-1], e[1:]
        hot = np.clip(np.minimum(hi, h) - lo, 0, None) / h
        cold = np.clip(hi - np.maximum(lo, h), 0, None) / (1 - h)
        share = a * hot + (1 - a) * cold
    else:
        s = hotness.zipf_s
        n = max(working_set_gib * PAGES_PER_GIB, 1.0)
        x = e * n + 0.5  # continuous Zipf over page ranks, rank r covering (r-0.5, r+0.5)

        def cdf(v: F64) -> F64:
            if abs(s - 1.0) < 1e-9:
                return np.log(v / 0.5)
            return (v ** (1 - s) - 0.5 ** (1 - s)) / (1 - s)

        c = cdf(x)
        share = np.diff(c)
    return share / share.sum()


def makes_passes(access: str, share: F64) -> bool:
    """Whether a tenant walks its pages in passes: sequential access over uniform hotness
    (every bucket's share of the accesses is its share of the pages), so each page is
    referenced once per pass, periodically, rather than at random times."""
    return access == "sequential" and bool(np.allclose(share, _WIDTHS, rtol=1e-9, atol=1e-12))


def touch_lines(lines_per_op: float | None, passes: bool) -> float:
    """Line accesses per reference of a page: the tenant's ``lines_per_op``, else 64 (a
    whole 4 KiB page of 64-byte lines) for a tenant that makes passes and 1 otherwise."""
    if lines_per_op is not None:
        return float(lines_per_op)
    return float(PAGE_BYTES // LINE_BYTES) if passes else 1.0


def _node_arrays(sc: Scenario) -> dict[str, np.ndarray]:
    nodes = sc.hardware.nodes
    total = sum(n.capacity_gib for n in nodes)
    cap = np.array([n.capacity_gib for n in nodes])
    wmin, wlow, whigh, wpromo = zone_watermarks(cap, total)
    inf = np.inf

    return {
        "capacity_gib": cap,
        "is_cxl": np.array([n.kind == "cxl" for n in nodes]),
        "node_socket": np.array([n.socket for n in nodes], dtype=np.int64),
        "wm_min": wmin,
        "wm_low": wlow,
        "wm_high": whigh,
        "wm_promo": wpromo,
        "idle_ns": np.array([n.idle_latency_ns for n in nodes]),
        "mem_read": np.array([n.read_gbps for n in nodes]),
        "mem_write": np.array([n.write_gbps for n in nodes]),
        "mem_turn": turnaround_penalty(
            [n.read_gbps for n in nodes],
            [n.write_gbps for n in nodes],
            [n.mixed_gbps for n in nodes],
        ),
        "link_read": np.array([n.link_read_gbps or inf for n in nodes]),
        "link_write": np.array([n.link_write_gbps or inf for n in nodes]),
        "slope_ns": np.array([n.queue_slope_ns for n in nodes]),
        "knee_ns": np.array([n.knee_ns for n in nodes]),
        "knee_exp": np.array([n.knee_exp for n in nodes]),
        "remote_ns": np.array([n.remote_latency_ns for n in nodes]),
        "rem_read": np.array([n.remote_read_gbps for n in nodes]),
        "rem_write": np.array([n.remote_write_gbps for n in nodes]),
        "rem_turn": turnaround_penalty(
            [n.remote_read_gbps for n in nodes],
            [n.remote_write_gbps for n in nodes],
            [n.remote_mixed_gbps for n in nodes],
        ),
        "rem_slope_ns": np.array([n.remote_queue_slope_ns for n in nodes]),
        "rem_knee_ns": np.array([n.remote_knee_ns for n in nodes]),
        "rem_knee_exp": np.array([n.remote_knee_exp for n in nodes]),
        "rnd_read": np.array([n.random_read_gbps or n.read_gbps for n in nodes]),
        "rnd_write": np.array([n.random_write_gbps or n.write_gbps for n in nodes]),
    }


_CURVE_FIELDS = [f.name for f in dataclasses.fields(NodeCurves)]


def fallback_lists(sc: Scenario, kernel: KernelConfig | None = None) -> NDArray[np.int64]:
    """Every node's allocation fallback list (N, N) on the scenario's machine.

    The kernel's zonelists (:func:`envs.kernel.build_fallback_lists`) from the
    machine's distances (given or derived, :meth:`HardwareSpec.distance_matrix`) and
    which nodes have CPUs; the scenario's ``kernel.fallback_lists`` overrides the
    kernel configuration's. On a machine with one DRAM node per socket and derived
    distances the list of a socket's DRAM node is local DRAM, local CXL, remote
    DRAM, remote CXL (each by node number), the order the model used before.
    """
    mode = (kernel or KernelConfig()).fallback_lists
    if sc.kernel is not None and sc.kernel.fallback_lists is not None:
        mode = sc.kernel.fallback_lists
    hw = sc.hardware
    return build_fallback_lists(hw.distance_matrix(), [n.has_cpus for n in hw.nodes], mode)


def _policy_arrays(t: TenantSpec, sc: Scenario, lists: NDArray[np.int64]) -> tuple[F64, F64, F64]:
    """A tenant's fallback list (N,), allowed-node mask (N,) and default weights (N,).

    ``mm/mempolicy.c``: ``default`` allocates from its CPU node's zonelist;
    ``bind`` from the same zonelist restricted to the mask (``policy_nodemask``),
    so the nearest node of the mask first; ``preferred`` from the preferred
    node's zonelist (``policy_node``); ``interleave`` round robin over the mask
    (equal weights), ``weighted_interleave`` by the tenant's ``weights`` over it.
    A fallback entry of -1 is a node the mask excludes.
    """
    hw = sc.hardware
    names = hw.node_names
    N = len(names)
    pol = t.mempolicy
    cpu = tenant_cpu_node(hw, t, t.socket)
    mask = np.ones(N)
    if pol.mode in ("bind", "interleave", "weighted_interleave"):
        mask = np.array([float(n in pol.nodes) for n in names])
    start = names.index(pol.nodes[0]) if pol.mode == "preferred" else cpu
    order = lists[start].astype(np.int64)
    if pol.mode == "bind":
        order = np.where(mask[order] > 0, order, -1)
        order = np.concatenate([order[order >= 0], order[order < 0]])
    w = np.zeros(N)
    if pol.mode in ("bind", "preferred"):
        w[order[0]] = 1.0
    elif pol.mode == "interleave":
        w = mask.copy()
    elif pol.mode == "weighted_interleave":
        w = _tenant_weights(t, sc) * mask if t.weights is not None else mask.copy()
    return order, mask, w


def _tenant_weights(t: TenantSpec, sc: Scenario) -> F64:
    names = sc.hardware.node_names
    w = np.zeros(len(names))
    if t.weights is None:
        pass  # local-first: all zero
    elif isinstance(t.weights, dict):
        for k, v in t.weights.items():
            w[names.index(k)] = v
    else:
        w[:] = t.weights
    return w


def compile_params(
    scenarios: Scenario | Sequence[Scenario],
    batch_size: int | None = None,
    n_tenants: int | None = None,
    n_phases: int | None = None,
    kernel: KernelConfig | Sequence[KernelConfig] | None = None,
    jitter: float = 0.0,
    seeds: ArrayLike | None = None,
) -> Params:
    """Arrays for a batch: ``scenarios`` is one scenario for every element or one per element.

    All scenarios of a batch share one node layout (the same node names).
    ``n_tenants``/``n_phases`` pad the tenant and phase axes (default: the
    largest in the batch). ``jitter`` > 0 makes each episode scale each
    tenant's ``mlp``, ``compute_ns`` and working set by factors drawn in
    ``1 +- jitter`` from the episode's seed (the working set only downwards,
    so capacity checks hold); see :func:`init_state`.
    """
    if isinstance(scenarios, Scenario):
        scenarios = [scenarios] * (batch_size or 1)
    scs = list(scenarios)
    if batch_size is not None and len(scs) != batch_size:
        raise ValueError(f"got {len(scs)} scenarios for a batch of {batch_size}")
    bsz = len(scs)
    if bsz == 0:
        raise ValueError("a batch needs at least one scenario")
    if not 0.0 <= jitter < 1.0:
        raise ValueError(f"jitter: got {jitter}, expected 0 <= jitter < 1")
    node_names = scs[0].hardware.node_names
    for sc in scs:
        if sc.hardware.node_names != node_names:
            raise ValueError(
                f"scenario {sc.name!r} has nodes {sc.hardware.node_names}, expected the batch's {node_names}"
            )
    kernel = KernelConfig() if kernel is None else kernel
    kernels = [kernel] * bsz if isinstance(kernel, KernelConfig) else list(kernel)
    if len(kernels) != bsz:
        raise ValueError(f"got {len(kernels)} kernel configurations for a batch of {bsz}")
    tmax = max(len(sc.tenants) for sc in scs)
    T = n_tenants or tmax
    if tmax > T:
        big = max(scs, key=lambda s: len(s.tenants))
        raise ValueError(
            f"scenario {big.name!r} has {len(big.tenants)} tenants, more than the {T} tenant slots"
        )
    pmax = max(1 + len(t.phases) for sc in scs for t in sc.tenants)
    P = n_phases or pmax
    if pmax > P:
        raise ValueError(f"a tenant has {pmax - 1} phases, more than the {P - 1} allowed")
    N = len(node_names)
    K = K_BUCKETS
    (
        np.zeros(bsz, dtype=np.uint64)
        if seeds is None
        else np.asarray(seeds, dtype=np.uint64).reshape(bsz)
    )

    per_node = [_node_arrays(sc) for sc in scs]
    node = {k: np.stack([d[k] for d in per_node], axis=-1) for k in per_node[0]}  # (N, B)
    curves = NodeCurves(**{k: node[k].astype(float) for k in _CURVE_FIELDS})

    present = np.zeros((bsz, T), dtype=bool)
    start = np.zeros((bsz, T))
    stop = np.full((bsz, T), np.inf)
    phase_at = np.full((bsz, T, P), np.inf)
    keys = (
        "threads",
        "mlp",
        "compute_ns",
        "read_fraction",
        "working_set_gib",
        "grow_gib_per_s",
        "memory_low_gib",
        "churn_per_s",
        "random",
        "touch_lines",
        "passes",
    )
    tab = {k: np.zeros((bsz, T, P)) for k in keys}
    tab["touch_lines"][:] = 1.0
    tab["threads"][:] = 1.0
    high = np.full((bsz, T, P), np.inf)
    sock = np.zeros((bsz, T, P), dtype=np.int64)
    share = np.zeros((bsz, T, P, K))
    share[..., 0] = 1.0
    init_w = np.zeros((bsz, T, N))
    pmask = np.ones((bsz, T, N))
    pw = np.zeros((bsz, T, N))
    mof = np.zeros((bsz, T), dtype=bool)
    fallback = np.tile(np.arange(N), (bsz, T, 1))
    local = np.zeros((bsz, T, P), dtype=np.int64)
    demote_target = np.full((bsz, N), -1, dtype=np.int64)
    names: list[list[str]] = []
    for b, sc in enumerate(scs):
        names.append([t.name for t in sc.tenants] + [""] * (T - len(sc.tenants)))
        lists = fallback_lists(sc, kernels[b])
        hw_nodes = sc.hardware.nodes
        for i, t in enumerate(sc.tenants):
            present[b, i] = True
            fallback[b, i], pmask[b, i], pw[b, i] = _policy_arrays(t, sc, lists)
            mof[b, i] = t.mempolicy.mode == "default"
            start[b, i] = t.start_s
            stop[b, i] = np.inf if t.stop_s is None else t.stop_s
            init_w[b, i] = _tenant_weights(t, sc)
            states = t.states()
            for ph in range(P):
                st = states[min(ph, len(states) - 1)]  # unused phase rows repeat the last phase
                if ph < len(states):
                    phase_at[b, i, ph] = st["at_s"]
                tab["threads"][b, i, ph] = st["threads"]
                tab["mlp"][b, i, ph] = st["mlp"]
                tab["compute_ns"][b, i, ph] = st["compute_ns"]
                tab["read_fraction"][b, i, ph] = st["read_fraction"]
                tab["working_set_gib"][b, i, ph] = st["working_set_gib"]
                tab["grow_gib_per_s"][b, i, ph] = st["grow_gib_per_s"]
                tab["memory_low_gib"][b, i, ph] = st["memory_low_gib"]
                tab["churn_per_s"][b, i, ph] = st["churn_per_s"]
                tab["random"][b, i, ph] = float(st["access"] == "random")
                if st["memory_high_gib"] is not None:
                    high[b, i, ph] = st["memory_high_gib"]
                share[b, i, ph] = bucket_access_shares(st["hotness"], st["working_set_gib"])
                passes = makes_passes(st["access"], share[b, i, ph])
                tab["passes"][b, i, ph] = float(passes)
                tab["touch_lines"][b, i, ph] = touch_lines(st["lines_per_op"], passes)
                cpu = tenant_cpu_node(sc.hardware, t, st["socket"])
                sock[b, i, ph] = hw_nodes[cpu].socket
                local[b, i, ph] = lists[cpu][0]  # the CPU node itself (it has memory)
        for m, nd in enumerate(hw_nodes):
            if nd.kind == "dram":
                # the nearest CXL node in its fallback list (mm/memory-tiers.c
                # establish_demotion_targets: the lower tier's nodes at the least distance)
                cxl = [int(j) for j in lists[m] if hw_nodes[j].kind == "cxl"]
                if cxl:
                    demote_target[b, m] = cxl[0]

    def last(a: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(np.moveaxis(a, 0, -1))

    # a scenario's kernel.memcg_limits takes precedence over the configuration's
    kernel_fields: dict[str, Any] = kernel_arrays(
        [
            dataclasses.replace(k, memcg_limits=sc.kernel.memcg_limits)
            if sc.kernel is not None and sc.kernel.memcg_limits is not None
            else k
            for sc, k in zip(scs, kernels, strict=True)
        ]
    )
    link_fields: dict[str, Any] = _link_arrays(scs)
    params = Params(
        node_names=list(node_names),
        tenant_names=names,
        scenario_names=[sc.name for sc in scs],
        interval_s=np.array([sc.interval_s for sc in scs], dtype=float),
        episode_steps=np.array([sc.episode_steps for sc in scs], dtype=np.int64),
        capacity_gib=node["capacity_gib"].astype(float),
        is_cxl=node["is_cxl"],
        node_socket=node["node_socket"],
        wm_min=node["wm_min"],
        wm_low=node["wm_low"],
        wm_high=node["wm_high"],
        wm_promo=node["wm_promo"],
        curves=curves,
        fallback=last(fallback),
        local_dram=last(local),
        demote_target=last(demote_target),
        present=last(present),
        start_s=last(start),
        stop_s=last(stop),
        phase_at=last(phase_at),
        threads=last(tab["threads"]),
        socket=last(sock),
        mlp=last(tab["mlp"]),
        compute_ns=last(tab["compute_ns"]),
        read_fraction=last(tab["read_fraction"]),
        working_set_gib=last(tab["working_set_gib"]),
        grow_gib_per_s=last(tab["grow_gib_per_s"]),
        memory_low_gib=last(tab["memory_low_gib"]),
        memory_high_gib=last(high),
        churn_per_s=last(tab["churn_per_s"]),
        access_share=last(share),
        jitter=np.full(bsz, float(jitter)),
        init_weights=last(init_w),
        **kernel_fields,
        toptier_share=np.array(
            [
                sum(n.capacity_gib for n in sc.hardware.nodes if n.kind == "dram")
                / sum(n.capacity_gib for n in sc.hardware.nodes)
                for sc in scs
            ]
        ),
        memcg_fixed=np.array(
            [
                MEMCG_LIMIT_MODES.index(sc.kernel.memcg_limits)
                if sc.kernel is not None and sc.kernel.memcg_limits is not None
                else -1
                for sc in scs
            ],
            dtype=np.int64,
        ),
        policy_mask=last(pmask),
        policy_w=last(pw),
        numa_mof=last(mof),
        **link_fields,
        random=last(tab["random"]),
        touch_lines=last(tab["touch_lines"]),
        passes=last(tab["passes"]),
    )
    return params


def _link_arrays(scs: Sequence[Scenario]) -> dict[str, F64]:
    """The socket link of each machine (B,) each; an unlimited link where none is given."""
    links = [sc.hardware.socket_link for sc in scs]
    return {
        "link_gbps": np.array([np.inf if lk is None else lk.gbps for lk in links]),
        "link_slope_ns": np.array([0.0 if lk is None else lk.queue_slope_ns for lk in links]),
        "link_knee_ns": np.array([10.0 if lk is None else lk.knee_ns for lk in links]),
        "link_knee_exp": np.array([1.0 if lk is None else lk.knee_exp for lk in links]),
    }


def kernel_arrays(kernels: Sequence[KernelConfig]) -> dict[str, NDArray[Any]]:
    """The :class:`Params` fields of the kernel configuration, one entry per config (B,).

    The one mapping from :class:`KernelConfig` to the model's arrays: :func:`compile_params`
    uses it, and so does the environment when a tiering mode is chosen per step
    (:func:`with_kernel_rows`).
    """
    ks = list(kernels)
    return {
        "demotion": np.array([k.demotion for k in ks]),
        "demote_wm_frac": np.array([k.demote_watermark_frac for k in ks]),
        "active_only": np.array([k.promote_active_only for k in ks]),
        "threshold_adapt": np.array([k.threshold_adapt for k in ks]),
        "threshold_period_s": np.array([k.threshold_period_s for k in ks]),
        "promo_throttle": np.array([k.promotion_throttle for k in ks]),
        "kswapd_gibps": np.array([k.kswapd_gibps for k in ks]),
        "kswapd_scan_pps": np.array([k.kswapd_scan_pages_per_s for k in ks]),
        "migrate_cpu_us": np.array([k.migrate_cpu_us_per_page for k in ks]),
        "detect_noise": np.array([k.detection_noise for k in ks]),
        "scan_period_s": np.array([k.scan_period_s for k in ks]),
        "scan_gib_per_s": np.array(
            [k.scan_mb_per_period * 1e6 / GIB / max(k.scan_period_s, 1e-9) for k in ks]
        ),
        "migrate_max_util": np.array([k.migrate_max_util for k in ks]),
        "memcg_mode": np.array(
            [MEMCG_LIMIT_MODES.index(k.memcg_limits) for k in ks], dtype=np.int64
        ),
        "scan_task": np.array([k.numa_scan == "task" for k in ks]),
        "scan_delay_s": np.array([k.scan_delay_ms / 1000.0 for k in ks]),
        "scan_min_ms": np.array([k.scan_period_min_ms for k in ks]),
        "scan_max_ms": np.array([k.scan_period_max_ms for k in ks]),
        "scan_size_mb": np.array([k.scan_size_mb for k in ks]),
    }


def with_kernel_rows(
    p: Params, table: Mapping[str, NDArray[Any]], idx: NDArray[np.int64]
) -> Params:
    """``p`` with each batch element's kernel fields taken from row ``idx[b]`` of ``table``.

    ``table`` is :func:`kernel_arrays` of a list of configurations (M,); ``idx`` (B,)
    picks one per element. A new object: ``p`` is not modified. A scenario's own
    ``kernel.memcg_limits`` (``p.memcg_fixed``) keeps its precedence over every mode,
    as in :func:`compile_params`.
    """
    fields: dict[str, Any] = {k: v[idx] for k, v in table.items()}
    if "memcg_mode" in fields:
        fields["memcg_mode"] = np.where(p.memcg_fixed >= 0, p.memcg_fixed, fields["memcg_mode"])
    return with_kernel_fields(p, fields)


def with_kernel_fields(p: Params, fields: Mapping[str, Any]) -> Params:
    """``p`` with the kernel ``fields`` (:func:`kernel_arrays`' names, (B,) each) replaced.
    A new object: ``p`` is not modified."""
    new = dataclasses.replace(p, **fields)
    # a mode is chosen every interval: the contiguous copies of the fields it does not
    # change (the tables of the tenants and the machine) are p's, made once for p (it
    # lives as long as its episodes), not again for every interval's object
    new.__dict__["contiguous"] = {
        k: np.ascontiguousarray(fields[k]) if k in fields else v for k, v in p.contiguous.items()
    }
    return new


def solo_throughput(p: Params, jit: F64) -> F64:
    """Throughput (T, P, B) of each tenant phase alone with all its pages in its local DRAM.

    The denominator of normalised performance; solved by the same fixed point
    as the step, one single-tenant problem per (tenant, phase, element).
    ``jit`` (3, T, B) are the episode's factors on mlp, compute_ns, working set.
    """
    T, P, bsz = p.threads.shape
    N = p.n_nodes
    cap = LINE_BYTES * p.threads * p.mlp * jit[0][:, None]
    compute = p.compute_ns * jit[1][:, None]
    # Each problem is solved alone, whatever its neighbours in the batch, so only the
    # distinct ones are solved: an absent tenant's throughput is 0 (no bytes in flight),
    # and a phase whose inputs are those of the phase before it (a tenant's phases are
    # padded with its last one) has that phase's throughput.
    inputs = (cap, compute, p.read_fraction, p.local_dram, p.random)
    same = np.zeros((T, P, bsz), dtype=bool)
    same[:, 1:] = np.logical_and.reduce([a[:, 1:] == a[:, :-1] for a in inputs])
    solve = np.broadcast_to(p.present[:, None, :], (T, P, bsz)) & ~same
    idx = np.flatnonzero(solve)  # (tenant, phase, element) problems, element = idx % bsz
    out = np.zeros((T, P, bsz))
    if idx.size:
        elem = idx % bsz

        def pick(a: NDArray[Any]) -> NDArray[Any]:  # (T, P, B) -> (1, problems)
            return a.reshape(-1)[idx][None]

        share = (np.arange(N)[:, None] == pick(p.local_dram)).astype(float)[None]  # (1, N, ·)
        sol = solve_fixed_point(
            cap=pick(cap),
            compute=pick(compute),
            rfrac=pick(p.read_fraction),
            share=share,
            remote=np.zeros((1, N, idx.size)),
            bg_rd=np.zeros((N, idx.size)),
            bg_wr=np.zeros((N, idx.size)),
            nc=NodeCurves(**{f: getattr(p.curves, f)[:, elem] for f in _CURVE_FIELDS}),
            random=pick(p.random) if p.random.any() else None,
        )
        out.reshape(-1)[idx] = sol.throughput[0]
    for ph in range(1, P):
        out[:, ph] = np.where(same[:, ph], out[:, ph - 1], out[:, ph])
    return out


# --------------------------------------------------------------------------- state


def init_state(params: Params, seeds: ArrayLike) -> State:
    """A fresh episode for every batch element (nothing allocated yet).

    The episode's random key, and with ``jitter`` its tenant factors, come
    from the element's seed alone (vectorized, no loop over the batch).
    """
    bsz, T, N = params.batch_size, params.n_tenants, params.n_nodes
    key = _splitmix(np.asarray(seeds, dtype=np.uint64).reshape(bsz) + np.uint64(0x5DEECE66D))
    phase0 = np.zeros((T, bsz), dtype=np.int64)
    u = _uniform(key, np.arange(3 * T, dtype=np.uint64).reshape(3, T, 1), stream=7)
    jit = 1.0 + params.jitter * (2.0 * u - 1.0)
    jit[2] = np.minimum(jit[2], 1.0)
    return State(
        t=np.zeros(bsz, dtype=np.int64),
        place=np.zeros((T, K_BUCKETS, N, bsz)),
        weights=_normalise_weights(params, params.init_weights, phase0),
        threshold_ms=np.full((N, bsz), THRESHOLD_START_MS),
        cand_mb=np.zeros((N, bsz)),
        throughput=np.zeros((T, bsz)),
        key=key,
        jit=jit,
        solo_gbps=solo_throughput(params, jit),
        scan_period_ms=np.zeros((T, bsz)),
        scan_next_s=params.start_s + params.scan_delay_s,
        scan_offset_gib=np.zeros((T, bsz)),
        numa_faults_mb=np.zeros((T, bsz)),
        kswapd_failures=np.zeros((N, bsz)),
    )


def _onehot(idx: NDArray[np.int64], n: int) -> F64:
    """idx (..., B) -> (..., n, B) with 1 at idx."""
    return (np.arange(n).reshape((1,) * (idx.ndim - 1) + (n, 1)) == idx[..., None, :]).astype(float)


def _normalise_weights(
    params: Params,
    w: F64,
    phase: NDArray[np.int64],
    loc1h: F64 | None = None,
    active: NDArray[np.bool_] | None = None,
    prev: F64 | None = None,
) -> F64:
    """Weights (T, N, B) as fractions per tenant; all-zero rows mean the tenant's
    mempolicy (``policy_w``: its bind or preferred node first, its interleave), and
    local-first where that is the default policy. ``loc1h`` (T, N, B): the one-hot of
    each tenant's local DRAM node at ``phase`` where the caller has it. With ``active``
    (T, B), tenants that do not run keep their weights ``prev`` (T, N, B)
    (kernel :func:`envs.allocation.weights_in_force`)."""
    T, N, B = w.shape
    if loc1h is None:
        loc1h = _onehot(_gather(params.local_dram, phase), params.n_nodes)
    out = np.empty((T, N, B))
    if active is None:  # every tenant runs: no weights before are read
        active, prev = np.ones((T, B), dtype=bool), out
    elif prev is None:
        raise ValueError("_normalise_weights: active given without prev")
    policy = params.policy_fractions
    on, frac = (_NO_POLICY, _NO_POLICY_W) if policy is None else policy
    _allocation.weights_in_force(
        np.ascontiguousarray(w, dtype=float), np.ascontiguousarray(loc1h), policy is not None,
        on, frac, np.ascontiguousarray(active), np.ascontiguousarray(prev), out,
    )  # fmt: skip
    return out


_NO_POLICY = np.zeros((0, 0, 0), dtype=bool)  # (T, 1, B) where no tenant has mempolicy weights
_NO_POLICY_W = np.zeros((0, 0, 0))


def validate_action(params: Params, action: Action) -> Action:
    """Check shapes and values of a batch-first action; raise ValueError naming the problem."""
    bsz, T, N = params.batch_size, params.n_tenants, params.n_nodes
    w = np.asarray(action.weights, dtype=float)
    r = np.asarray(action.promote_mbps, dtype=float)
    if w.shape != (bsz, T, N):
        raise ValueError(
            f"action weights: got shape {w.shape}, expected (batch, tenants, nodes) = {(bsz, T, N)}"
        )
    if r.ndim == 0:
        r = np.full(bsz, float(r))
    if r.shape != (bsz,):
        raise ValueError(f"action promote_mbps: got shape {r.shape}, expected ({bsz},)")
    if not np.isfinite(w).all():
        raise ValueError("action weights: contain NaN or inf, expected finite numbers >= 0")
    if not np.isfinite(r).all():
        raise ValueError("action promote_mbps: contains NaN or inf, expected finite numbers >= 0")
    if (w < 0).any():
        raise ValueError(f"action weights: got {w.min()}, expected numbers >= 0")
    if (r < 0).any():
        raise ValueError(f"action promote_mbps: got {r.min()}, expected numbers >= 0")
    return Action(weights=w, promote_mbps=r)


def access_probability(x: F64) -> F64:
    """``1 - exp(-x)``: the chance that a page accessed at ``a`` per second (Poisson) is
    accessed within ``w`` seconds, for ``x = a * w`` (any shape).

    The one access model of the scanner's hint faults (:func:`promotion_candidates`)
    and of reclaim's reference check (:func:`lru_reclaim`). Computed as
    ``2 tanh(x/2) / (1 + tanh(x/2))`` in float32: plenty for a probability, exact for
    small ``x``, and numpy vectorises float32 tanh (not expm1), 5x faster here.
    """
    return from_tanh(np.tanh(tanh_arg(x)))


# --------------------------------------------------------------------------- the step


@dataclass(frozen=True)
class Tenants:
    """Phase 1 of an interval: who runs, in which phase, and how big each bucket should be."""

    phase: NDArray[np.int64]  # (T, B)
    active: NDArray[np.bool_]  # (T, B)
    ws: F64  # (T, B) working set this interval (jitter and growth included)
    bucket_size: F64  # (T, K, B) GiB each hotness bucket should hold
    high: F64  # (T, B) cap on DRAM usage in force (inf: none; memory.high or toptier_high)
    low: F64  # (T, B) memory.low in force (on total usage with memcg_limits "total", else on DRAM)
    tot_high: F64  # (T, B) memory.high on the cgroup's total usage (inf: none)
    local: NDArray[np.int64]  # (T, B) local DRAM node
    loc1h: F64  # (T, N, B) one-hot of ``local``


@dataclass(frozen=True)
class Candidates:
    """Phase 3: promotion candidates found by the NUMA-balancing scanner, and what is wanted."""

    by_node: F64  # (C, T, K, B) GiB of candidate pages on each CXL node (Params.cxl_node_list)
    tscale: F64  # (T, B) share of its candidates a tenant may promote (throttle, memory.high)
    per_target: F64  # (N, B) candidates per target DRAM node
    want: F64  # (N, B) GiB the promotion would move this interval (rate limit)
    need_room: F64  # (N, B) GiB kswapd must free on the target to take them
    plentiful: NDArray[np.bool_]  # (N, B) pgdat_free_space_enough on the node
    scan_gib: F64  # (T, B) address space the NUMA-balancing scanner covered this interval
    scan_bounds: tuple[F64, F64] | None  # task_scan_min/max (T, B) ms; None: no per-task scan
    access_rate: F64  # (T, K, B) references per page per second of each bucket
    passes: F64  # (T, B) 1 where a tenant's references are periodic (a pass), else Poisson
    # the placement's sums they were found on (reclaim starts from that placement)
    tenant_node: F64  # (T, N, B) GiB of each tenant on each node
    used: F64  # (N, B)
    dram_use: F64  # (T, B)


@dataclass(frozen=True)
class Migration:
    """Phases 4-5: pages moved this interval (GiB per node) and what was promoted per tenant."""

    dem_from: F64  # (N, B)
    dem_to: F64  # (N, B)
    promo_from: F64  # (N, B)
    promo_to: F64  # (N, B)
    promo_t: F64  # (T, B)


def tenant_phase(p: Params, state: State, now: F64, dt: F64) -> tuple[Tenants, F64]:
    """Phase 1: tenants start, stop, change phase and grow; pages beyond a bucket's size
    and churned pages are freed. Returns the tenants and the placement after the frees."""
    T, _, B = p.phase_at.shape
    N, K = p.n_nodes, _BUCKET_WIDTHS.shape[0]
    c = p.contiguous
    phase, active = np.empty((T, B), dtype=np.int64), np.empty((T, B), dtype=bool)
    ws, churn_keep, local = np.empty((T, B)), np.empty((T, B)), np.empty((T, B), dtype=np.int64)
    high, low, tot_high = np.empty((T, B)), np.empty((T, B)), np.empty((T, B))
    bucket_size, loc1h = np.empty((T, K, B)), np.empty((T, N, B))
    _allocation.tenants(
        c["phase_at"], now, np.ascontiguousarray(dt), c["present"], c["start_s"], c["stop_s"],
        c["grow_gib_per_s"], c["working_set_gib"], np.ascontiguousarray(state.jit[2]),
        c["churn_per_s"], c["local_dram"], c["memory_high_gib"], c["memory_low_gib"],
        c["memcg_mode"], c["toptier_share"], _WIDTHS,
        phase, active, ws, bucket_size, churn_keep, local, loc1h, high, low, tot_high,
    )  # fmt: skip
    # pages beyond a bucket's size freed (its share kept: bucket_size over its pages where
    # the bucket is too big, else 1), times the share churn leaves
    place = np.empty(state.place.shape)  # a new array: state is not modified
    _allocation.frees(np.ascontiguousarray(state.place), bucket_size, churn_keep, place)
    tenants = record(
        Tenants,
        {
            "phase": phase,
            "active": active,
            "ws": ws,
            "bucket_size": bucket_size,
            "high": high,
            "low": low,
            "tot_high": tot_high,
            "local": local,
            "loc1h": loc1h,
        },
    )
    return tenants, place


def memcg_limits(p: Params, high: F64, low: F64) -> tuple[F64, F64, F64]:
    """The cgroup limits in force (T, B): DRAM cap, memory.low, memory.high on total usage.

    ``memcg_limits`` "total" (Linux): no DRAM cap, low and high on total usage;
    "tier_aware": DRAM cap and DRAM protection scaled to the DRAM share of the
    machine (:func:`envs.kernel.tier_aware_limit`), high also on total usage;
    "dram" (TierGym before): the limits as given on DRAM usage only.
    """
    mode, top = p.memcg_mode, p.toptier_share
    # The ufunc's vectorised loop raises numpy's "invalid value" flag on arrays of 8 or more
    # unlimited (inf) limits, although each element's value is exact and the scalar function
    # raises nothing on any of them (tests/envs/test_fairness.py checks both): the flag is not a
    # result, so it is not reported (train.py printed it dozens of times).
    with np.errstate(invalid="ignore"):
        return (
            np.asarray(memcg_dram_high(high, mode, top)),
            np.asarray(memcg_low(low, mode, top)),
            np.asarray(memcg_total_high(high, mode)),
        )


def allocate_pages(
    p: Params, state: State, action: Action, tn: Tenants, place: F64
) -> tuple[F64, F64, F64, F64]:
    """Phase 2: missing pages allocated by the interleave weights, local-first fallback.

    Each bucket lacks its size less its pages on every node. They are allocated first by
    the tenant's weights into free memory above each node's LOW watermark, then what is
    left in its fallback order (above LOW, then above MIN); tenants competing for a node
    share its free memory in proportion to their requests, and a tenant's DRAM stays
    under its memory.high cap (kernel :func:`envs.allocation.allocate`). Returns the
    weights in force (T, N, B), the placement (``place`` is updated), the pages
    allocated (T, K, N, B GiB; reclaim finds them referenced) and each tenant's GiB to
    charge (T, B).
    """
    # the action's weights count only on the nodes the tenant's mempolicy allows (a bind
    # or interleave mask); none there leaves the policy's own placement
    aw = np.ascontiguousarray(action.weights.transpose(1, 2, 0))  # (T, N, B)
    if p.flags["policy_mask"]:
        aw = aw * p.policy_mask
    w = _normalise_weights(p, aw, tn.phase, tn.loc1h, tn.active, state.weights)
    T, K, N, B = place.shape
    c = p.contiguous
    fresh, charged = np.empty((T, K, N, B)), np.empty((T, B))
    _allocation.allocate(
        place, np.ascontiguousarray(tn.bucket_size), w, np.ascontiguousarray(tn.high),
        c["is_cxl"], c["capacity_gib"], c["wm_low"], c["wm_min"], c["fallback"], fresh, charged,
    )  # fmt: skip
    return w, place, fresh, charged


def promotion_candidates(
    p: Params, state: State, tn: Tenants, place: F64, rate_mbps: F64, dt: F64
) -> Candidates:
    """Phase 3: hot CXL pages the NUMA-balancing scanner sees, and the room they need.

    A page is a candidate when its access rate makes a hint fault within the
    hot threshold likely (the scan period while DRAM has plenty of free
    memory, ``pgdat_free_space_enough``), with log-normal sampling noise, on
    the share of the working set scanned this interval. Within an interval
    kswapd runs whenever a promotion finds too little free memory above HIGH,
    so the demotion phase also makes room for the promotions wanted here.
    """
    T, K, N, B = place.shape
    c = p.contiguous
    tenant_node, used, dram_use = np.empty((T, N, B)), np.empty((N, B)), np.empty((T, B))
    per_page, plentiful = np.empty((T, K, B)), np.empty((N, B), np.bool_)
    passes = np.empty((T, B))
    h = np.empty((T, K, B), np.float32)
    # accesses: last interval's throughput; in a tenant's first interval, before it has
    # one, its throughput alone in local DRAM (the only estimate there is); the scan
    # window: the scan period while the local node has plenty of free memory, else the
    # node's hot threshold
    # (C-contiguous: the kernels are compiled once per memory layout of their arguments)
    local, rate = np.ascontiguousarray(tn.local), np.ascontiguousarray(rate_mbps)
    _promotion.accesses(
        place, c["is_cxl"], c["capacity_gib"], c["wm_promo"], c["access_share"],
        *(np.ascontiguousarray(a) for a in (tn.phase, tn.active)), local,
        *(np.ascontiguousarray(a) for a in (state.throughput, state.solo_gbps)),
        *(np.ascontiguousarray(a) for a in (tn.bucket_size, state.threshold_ms)),
        c["scan_period_s"], c["touch_lines"], c["passes"], tenant_node, used, dram_use,
        per_page, passes, plentiful, h,
    )  # fmt: skip
    # sampling noise of the scanner: log-normal per tenant and interval, mean 1 (float32)
    noise = _lognormal32(state.key, state.t, T, p.detect_noise, 11)  # (T, B)
    # the scanner's coverage: the GiB scanned, their share of the working set (T, B), and
    # with per-task scanning each tenant's task_scan_min/max from its resident set
    per_task = p.flags["scan_task"]
    scan_gib, scanned = np.empty((T, B)), np.empty((T, B))
    bounds = (np.empty((T, B if per_task else 0)), np.empty((T, B if per_task else 0)))
    _promotion.coverage(
        tenant_node, per_task, *(np.ascontiguousarray(a) for a in (p.scan_task,
            state.scan_period_ms, state.t, dt, state.scan_next_s, tn.ws, tn.active)),
        rate, np.ascontiguousarray(p.numa_mof), *(np.ascontiguousarray(a) for a in (
            p.scan_gib_per_s, p.scan_size_mb, p.scan_min_ms, p.scan_max_ms)),
        scan_gib, scanned, *bounds,
    )  # fmt: skip
    # per-tenant scale of its candidates: memcg throttle (none anywhere: (T, 0)), memory.high
    throttle = np.empty((T, 0))
    if p.flags["promo_throttle"]:
        free = p.capacity_gib - used
        pressure = lsum((tn.loc1h * (free < p.wm_promo)), 1) > 0
        thr = memcg_promotion_scan_fraction(tn.low * PAGES_PER_GIB, dram_use * PAGES_PER_GIB)
        throttle = np.where(p.promo_throttle & pressure, thr, 1.0)
    cxl_nodes = p.cxl_node_list
    by_node = np.empty((len(cxl_nodes), T, K, B))
    tscale, cand_node = np.empty((T, B)), np.empty((N, B))
    want, need_room = np.empty((N, B)), np.empty((N, B))
    _promotion.pick(
        np.tanh(h, out=h), place, c["is_cxl"], cxl_nodes, c["active_only"], noise,
        scanned, np.ascontiguousarray(throttle), np.ascontiguousarray(tn.high), dram_use,
        local, used, c["capacity_gib"], c["wm_high"], plentiful, rate,
        np.ascontiguousarray(dt), by_node, tscale, cand_node, want, need_room,
    )  # fmt: skip
    return record(
        Candidates,
        {
            "by_node": by_node,
            "tscale": tscale,
            "per_target": cand_node,
            "want": want,
            "need_room": need_room,
            "plentiful": plentiful,
            "scan_gib": scan_gib,
            "scan_bounds": bounds if per_task else None,
            "access_rate": per_page,
            "passes": passes,
            "tenant_node": tenant_node,
            "used": used,
            "dram_use": dram_use,
        },
    )


def numa_scan_update(
    p: Params,
    state: State,
    tn: Tenants,
    place: F64,
    cand: Candidates,
    promo_t: F64,
    rss: F64 | None = None,
) -> tuple[F64, F64, F64]:
    """Per-tenant scan state after the interval: period, offset, recorded faults (T, B).

    The scan offset advances by what was scanned; a pass over the whole address
    space ends a scan sequence, after which the next recorded hint fault runs
    ``task_numa_placement`` and with it ``update_task_scan_period``. In
    tiering mode (``task_numa_fault``) only faults on top-tier memory are
    recorded: on CXL, exactly the promoted pages. Each is private (the access
    time replaces the last cpupid, so ``last_cpupid`` is unset) and remote
    (``numa_migrate_check`` sets ``TNF_FAULT_LOCAL`` from the node the folio
    was on when it faulted, a CPU-less CXL node), so ``local + shared == 0``
    and the period doubles at each pass that promoted something, up to
    ``task_scan_max``. A sequence without recorded faults leaves the period as
    it is (placement does not run).
    """
    if cand.scan_bounds is None:
        return state.scan_period_ms, state.scan_offset_gib, state.numa_faults_mb
    if rss is None:  # (T, B) each tenant's resident set (the caller may have it)
        rss = lsum(lsum(place, 1), 1)
    out = (np.empty_like(cand.scan_gib), np.empty_like(cand.scan_gib), np.empty_like(cand.scan_gib))
    _promotion.scan_update(
        np.ascontiguousarray(p.scan_task), cand.scan_gib, *cand.scan_bounds,
        *(np.ascontiguousarray(a) for a in (rss, promo_t, tn.active, state.scan_period_ms,
            state.scan_offset_gib, state.numa_faults_mb)), *out,
    )  # fmt: skip
    return out


def lru_reclaim(
    p: Params,
    on_m: F64,
    fresh_m: F64,
    protected: F64,
    usage: F64,
    access_rate: F64,
    dt: F64,
    scan_pps: F64 | None = None,
    passes: F64 | None = None,
) -> tuple[F64, F64, F64]:
    """The reference check on one DRAM node's anon LRUs while its kswapd scans them.

    ``on_m`` (T, K, B) GiB of each tenant's buckets on the node, ``fresh_m`` of them
    allocated this interval: "all mapped folios start out with page table references
    from the instantiating fault" (``folio_check_references``), so the first look at
    such a page finds it referenced, which is a pass's share of the interval's looks
    (all of them when a pass is longer than the interval ``dt``); ``protected`` and
    ``usage`` (T, B) GiB: each cgroup's ``memory.low`` in force and the usage it
    protects; ``access_rate`` (T, K, B) references per page per second; ``scan_pps`` (B,)
    ``R`` where the batch is a part of ``p``'s (default ``p.kswapd_scan_pps``); ``passes``
    (T, B) 1 where a tenant's references are periodic (default none). Returns the GiB
    per second of scanning that the check lets go from each bucket (T, K, B), the pages
    a whole pass would reclaim (B,) and the seconds a pass takes (B,).

    The LRU of each cgroup on the node (its lruvec), at the balance reclaim keeps:

    - sizes: ``inactive_is_low`` keeps the inactive anon list at ``lru / (1 + ratio)``,
      ``ratio = int_sqrt(10 * GiB)`` (:func:`envs.kernel.inactive_anon_target`); the
      rest is active.
    - flows: ``shrink_active_list`` deactivates every anon folio it scans, referenced
      or not, so the inactive list is refilled from the active list in LRU order, which
      knows nothing of hotness: its buckets are those of the lruvec. A folio on it is
      looked at once per age of the list; ``folio_check_references`` keeps or activates
      (``FOLIOREF_KEEP`` on a first reference, ``FOLIOREF_ACTIVATE`` when
      ``PG_referenced`` is already set, as it is on every folio deactivated after an
      activation) a folio whose PTEs were referenced since the last look, and only an
      unreferenced one is ``FOLIOREF_RECLAIM``: ``shrink_folio_list`` demotes it
      (``demote_folio_list``) and counts it as reclaimed. Every folio looked at
      leaves the inactive list one way or the other and deactivation replaces it.
    - rates: kswapd looks at ``R = kswapd_scan_pages_per_s`` inactive pages a second,
      spread over the lruvecs by ``get_scan_count``: each scans its inactive size,
      scaled down by ``memory.low`` (:func:`envs.kernel.memcg_reclaim_scan`; skipped at
      or under it). A pass (``balance_pgdat``, priorities 12 to 1, ``size >> priority``
      each) looks at about the whole inactive list once, so the list's age is a pass's
      length ``sum(scan) / R``, times ``inactive / scan`` for a protected cgroup.
    - the check (``folio_referenced_one``: the PTE's young bit, set by any access since
      the last look): a page of a bucket referenced at ``a`` per second at random times
      is referenced within the age with probability ``1 - exp(-a * age)``; a page of a
      tenant that makes passes, referenced once per pass of ``P = 1 / a`` seconds, with
      probability ``min(1, age / P)`` (:func:`envs.reclaim.exposure`,
      :func:`access_probability`). The rest of what is looked at is let go. A reference
      is a touch of the page: ``Params.touch_lines`` of its line accesses (a tenant's
      ``lines_per_op``; 64 for a pass, which reads the whole page at once).

    Pages are 4 KiB folios, as ``R`` counts them. With THP a folio is 512 pages: per
    folio looked at the check sees 512 times the accesses and, at the same folios per
    second, the list ages 512 times faster, so the chance of a reference is the same
    for random access; the bytes looked at and moved per second would be up to 512
    times more (a 2 MB folio migrates at 10.9 GB/s against 3.3-3.55 GB/s for 4 KiB
    ones, ``../shared/calibration/reclaim.md``), which this model does not have.

    Not modelled: new anon folios start on the inactive list and are kept on their
    first referenced look, so right after a big allocation the inactive list is the
    whole of it and ages far slower than at the balance; a cgroup whose pages turn
    cold is demoted in proportion at once rather than as its folios reach the tail of
    the active list; MGLRU's generations (``lru_gen_set_refs``).
    """
    B = on_m.shape[-1]
    R = np.broadcast_to(p.kswapd_scan_pps if scan_pps is None else scan_pps, (B,))
    place = np.ascontiguousarray(on_m[:, :, None], dtype=float)  # (T, K, 1, B): node 0
    low, usage = np.broadcast_arrays(protected, usage)
    h = np.empty(on_m.shape, np.float32)
    periodic = np.zeros(low.shape) if passes is None else np.broadcast_to(passes, low.shape)
    _reclaim.lru_args(
        place, np.ascontiguousarray(access_rate, dtype=float),
        np.ascontiguousarray(periodic, dtype=float), low, usage, R, h,
    )  # fmt: skip
    rate = np.empty(on_m.shape)
    per_pass, pass_s = np.empty(B), np.empty(B)
    dt = np.broadcast_to(np.asarray(dt, dtype=float), (B,))
    fresh = np.ascontiguousarray(fresh_m[:, :, None], dtype=float)
    _reclaim.lru_rates(place, fresh, np.tanh(h), low, usage, R, dt, rate, per_pass, pass_s)
    return rate, per_pass, pass_s


def reclaim_and_demote(
    p: Params,
    tn: Tenants,
    place: F64,
    fresh: F64,
    cand: Candidates,
    promo_on: NDArray[np.bool_],
    dt: F64,
    failures: F64,
    charged: F64 | None = None,
) -> tuple[F64, F64, F64, F64, F64]:
    """Phase 4: DRAM above a tenant's memory.high, then kswapd, through the reference check.

    kswapd wakes below LOW (HIGH while promotion runs: a promotion that finds free
    memory under HIGH plus the folio fails and wakes it, ``migrate_misplaced_folio_prepare``
    / ``migrate_balanced_pgdat``; TPP's demotion watermark when set) unless it has
    given up on the node (:func:`envs.kernel.kswapd_hopeless`), and balances it to HIGH
    (to PROMO in tiering mode, ``pgdat_balanced``; TPP's mark), plus the room the
    wanted promotions need. It demotes only what the reference check lets go
    (:func:`lru_reclaim`), at most that many GiB in the interval and ``kswapd_gibps``,
    into the nearest CXL node, as far as both nodes' bandwidth lets migration copy
    (:func:`envs.reclaim.migration_free_gib`). A pass that would reclaim under one page reclaims
    nothing: kswapd runs pass after pass for the whole interval and
    ``kswapd_failures`` climbs to the give-up (16, :func:`envs.kernel.kswapd_failures_after`);
    any reclaim that succeeds on the node, kswapd's or memory.high's, resets it.
    Returns the placement (``place`` is updated), GiB demoted from and to each node
    (N, B), the share of each node's bandwidth the demotion used, and the nodes'
    ``kswapd_failures`` (N, B; ``failures`` is not modified).

    ``memory.high`` on total usage (``tn.tot_high``): a cgroup that charged
    pages this interval (``charged`` (T, B) GiB) and is over it reclaims in
    ``mem_cgroup_handle_over_high``; without swap, reclaim is demotion, which
    counts as progress (mm/vmscan.c ``shrink_folio_list``) but frees no charge,
    so while the sleep it owes exceeds 10 ms the retry loop demotes all of its
    DRAM (as far as migration bandwidth goes). Its own reclaim (down to priority
    0, in the charging task) takes what the reference check lets go first, then
    the rest. ``memory.low`` acts on total usage with ``memcg_limits`` "total",
    else on DRAM usage.
    """
    N, B = p.n_nodes, p.batch_size
    dem_from = np.zeros((N, B))  # GiB demoted from each node
    dem_to = np.zeros((N, B))
    util = np.zeros((N, B))  # share of each node's bandwidth migration uses
    failures = failures.copy()
    used = cand.used.copy()
    T, K = place.shape[:2]
    kswapd, excess, usage = np.empty(B), np.empty((T, B)), np.empty((T, B))
    h = np.zeros((T, K, B), np.float32)  # written where something reclaims
    charged = np.empty((T, 0)) if charged is None else charged
    dt = np.ascontiguousarray(dt if np.shape(dt) == (B,) else np.broadcast_to(dt, (B,)))
    c = p.contiguous
    # C-contiguous (the kernels are compiled once per layout; a sum over a batch of one
    # can be a strided view)
    charged, tenant_node0, dram_use0, high, tot_high, low = (
        np.ascontiguousarray(a)
        for a in (charged, cand.tenant_node, cand.dram_use, tn.high, tn.tot_high, tn.low)
    )
    for m in p.demoting_nodes:
        busy = _reclaim.look(
            m, place, used, failures, dem_from, cand.need_room, promo_on, dt, charged,
            tenant_node0, dram_use0, high, tot_high, low,
            c["is_cxl"], c["demote_target"], c["capacity_gib"], c["wm_low"], c["wm_high"],
            c["wm_promo"], c["demotion"], c["demote_wm_frac"], c["kswapd_gibps"],
            c["kswapd_scan_pps"], c["memcg_mode"], cand.access_rate, cand.passes, kswapd,
            excess, usage, h,
        )  # fmt: skip
        if busy == 0:
            continue  # kswapd asleep, no memory.high reclaim: nothing changes
        _reclaim.take(
            m, np.tanh(h, out=h), place, fresh, used, util, failures, dem_from, dem_to, dt,
            kswapd, excess, usage, low, c["demote_target"], c["capacity_gib"], c["wm_low"],
            c["migrate_max_util"], c["peak_rd"], c["peak_wr"], c["kswapd_scan_pps"],
        )  # fmt: skip
    return place, dem_from, dem_to, util, failures


def promote(
    p: Params, tn: Tenants, place: F64, cand: Candidates, util: F64, dt: F64
) -> tuple[F64, F64, F64, F64]:
    """Phase 5: candidates move to their tenant's local DRAM into the room above HIGH,
    as far as the bandwidth left to migration on both nodes lets them (``util``: the
    share the demotion used).

    Returns the placement (``place`` is updated), GiB promoted from each node
    and to each node (N, B), and per tenant (T, B).
    """
    T, N, B = place.shape[0], place.shape[2], place.shape[3]
    c = p.contiguous
    promo_from, promo_to, promo_t = np.zeros((N, B)), np.empty((N, B)), np.empty((T, B))
    _promotion.promote(
        place, cand.by_node, p.cxl_node_list, cand.tscale, cand.want, cand.per_target, util,
        np.ascontiguousarray(tn.local), c["capacity_gib"], c["wm_high"], c["migrate_max_util"],
        c["peak_rd"], c["peak_wr"], np.ascontiguousarray(dt), promo_from, promo_to, promo_t,
    )  # fmt: skip
    return place, promo_from, promo_to, promo_t


def adapt_threshold(
    p: Params, state: State, cand: Candidates, rate_mbps: F64, dt: F64
) -> tuple[F64, F64]:
    """NUMA-balancing hot-threshold adaptation per target node, once a period.

    ``kernel/sched/fair.c`` ``numa_promotion_adjust_threshold`` through
    :func:`envs.kernel.adapt_promotion_threshold`. Returns the threshold (N, B)
    and the candidate MB counted in the current period.
    """
    if dt is p.interval_s:
        period = p.threshold_period_steps
    else:
        period = np.maximum(np.round(p.threshold_period_s / dt), 1).astype(np.int64)
    period_end = (state.t + 1) % period == 0
    th, cand_mb = np.empty(state.threshold_ms.shape), np.empty(state.threshold_ms.shape)
    # should_numa_migrate_memory: plenty of free memory resets the threshold to its default
    c = p.contiguous
    _promotion.adapt(
        np.ascontiguousarray(state.threshold_ms), np.ascontiguousarray(state.cand_mb),
        np.ascontiguousarray(cand.per_target), GIB / 1e6, np.ascontiguousarray(rate_mbps),
        c["threshold_period_s"], period_end, c["threshold_adapt"], c["is_cxl"],
        np.ascontiguousarray(cand.plentiful), THRESHOLD_START_MS, th, cand_mb,
    )  # fmt: skip
    return th, cand_mb


def migration_cost(p: Params, tn: Tenants, mig: Migration, dt: F64) -> tuple[F64, F64, F64]:
    """Phase 6: migration traffic on both nodes (reads from, writes to; GB/s (N, B)) and
    the CPU share each tenant loses to hint faults and copies (T, B)."""
    N, B = mig.dem_from.shape
    bg_rd, bg_wr, cpu_loss = np.empty((N, B)), np.empty((N, B)), np.empty(mig.promo_t.shape)
    _interval.migration_cost(
        *(np.ascontiguousarray(a) for a in (mig.dem_from, mig.promo_from, mig.dem_to,
            mig.promo_to, mig.promo_t)), p.contiguous["threads"], np.ascontiguousarray(tn.phase),
        p.contiguous["migrate_cpu_us"], GB_PER_GIB, PAGES_PER_GIB,
        np.ascontiguousarray(dt), bg_rd, bg_wr, cpu_loss,
    )  # fmt: skip
    return bg_rd, bg_wr, cpu_loss


def _has_memory_high(tn: Tenants) -> bool:
    """Whether some cgroup of the batch has a memory.high on its total usage (finite)."""
    return bool(np.count_nonzero(np.isfinite(tn.tot_high)))


def high_throttle(
    p: Params,
    tn: Tenants,
    place: F64,
    charged: F64,
    cpu_loss: F64,
    dt: F64,
    total_use: F64 | None = None,
) -> F64:
    """``cpu_loss`` (T, B) plus the time a cgroup over ``memory.high`` (total usage) sleeps.

    Each batch of ``MEMCG_CHARGE_BATCH`` pages charged over the limit costs the
    charging thread :func:`envs.kernel.memcg_high_throttle`; the sleep is
    spread over the tenant's threads (at most 90% of its time, as for
    migration costs).
    """
    if not _has_memory_high(tn):
        return cpu_loss
    if total_use is None:  # (T, B) each cgroup's usage (the caller may have it)
        total_use = lsum(lsum(place, 1), 1)
    sleep = memcg_high_throttle(total_use, tn.tot_high, charged * PAGES_PER_GIB)
    threads = _gather(p.threads, tn.phase)
    return np.clip(cpu_loss + sleep / (threads * dt), 0.0, 0.9)


def memory_events_high(tn: Tenants, charged: F64, total_use: F64) -> F64:
    """Each cgroup's memory.events ``high`` of the interval (T, B): ``reclaim_high``
    (mm/memcontrol.c) counts one each time it runs for a cgroup whose usage is over
    memory.high, which ``try_charge_memcg`` arranges on the return to user space after
    a charge that refills the per-CPU stock over the limit, once per
    ``MEMCG_CHARGE_BATCH`` (64) pages charged: the pages the cgroup charged this
    interval (``charged`` GiB; a page at least, as for the reclaim) over 64 where its total usage (``total_use`` GiB) is over
    its memory.high on total usage (``tn.tot_high``; inf: none, so 0). An expected count,
    not rounded. The "low" counter is not reported: the kernel counts it only in reclaim
    with ``memcg_low_reclaim`` (``do_try_to_free_pages``' retry, direct and memcg
    reclaim), which none of the model's reclaim (kswapd, a cgroup's own memory.high)
    does to a protected cgroup (docs/validation.md, "memory.low as the kernel applies
    it")."""
    if not _has_memory_high(tn):  # none anywhere (the usual case): no count to make
        return np.zeros(charged.shape)  # (T, B), as the counts below
    over = (total_use > tn.tot_high) & (charged * PAGES_PER_GIB >= 1.0)  # a page or more
    return np.where(over, charged * (PAGES_PER_GIB / MEMCG_CHARGE_BATCH), 0.0)


def step(
    params: Params,
    state: State,
    action: Action,
    check: bool = True,
    precision: str = "reference",
) -> tuple[State, Outputs]:
    """Advance every batch element by one interval; ``state`` is not modified.

    ``action`` is batch-first (see :class:`Action`); ``check=False`` skips its
    validation (callers that built it themselves). ``precision`` one of
    :data:`PRECISIONS` (``"fast"``: the fixed point to :data:`FAST_SOLVER_TOL`). The
    interval runs the phases below in order, each a function of this module.
    """
    tol = solver_tolerance(precision)
    lanes = WIDE_LANES if precision == "fast" else LANES
    if check:
        action = validate_action(params, action)
    p = params
    dt = p.interval_s  # (B,)
    now = state.t * dt  # time at the start of this interval
    rate_mbps = action.promote_mbps  # (B,)
    promo_on = rate_mbps > 0

    tn, place = tenant_phase(p, state, now, dt)  # 1
    w, place, fresh, charged = allocate_pages(p, state, action, tn, place)  # 2
    cand = promotion_candidates(p, state, tn, place, rate_mbps, dt)  # 3
    place, dem_from, dem_to, util, kswapd_failures = reclaim_and_demote(
        p, tn, place, fresh, cand, promo_on, dt, state.kswapd_failures, charged
    )  # 4
    place, promo_from, promo_to, promo_t = promote(p, tn, place, cand, util, dt)  # 5
    # the placement is final from here on: its sums (T, N, B), (T, B), (T, K, B) ...
    T, K, N, B = place.shape
    tenant_node, rss, tenant_bucket = np.empty((T, N, B)), np.empty((T, B)), np.empty((T, K, B))
    node_share, dram_share, dram_res = np.empty((T, N, B)), np.empty((T, B)), np.empty((T, B))
    used, resident = np.empty((N, B)), np.empty((T, B))
    _placement.placement_sums(
        place, p.contiguous["access_share"], np.ascontiguousarray(tn.phase),
        np.ascontiguousarray(tn.active), p.contiguous["is_cxl"], tenant_node, rss,
        tenant_bucket, node_share, dram_share, dram_res, used, resident,
    )  # fmt: skip
    mig = Migration(dem_from, dem_to, promo_from, promo_to, promo_t)
    threshold_ms, cand_mb = adapt_threshold(p, state, cand, rate_mbps, dt)
    scan_period, scan_offset, faults = numa_scan_update(p, state, tn, place, cand, promo_t, rss)
    bg_rd, bg_wr, cpu_loss = migration_cost(p, tn, mig, dt)  # 6
    cpu_loss = high_throttle(p, tn, place, charged, cpu_loss, dt, rss)
    events_high = memory_events_high(tn, charged, rss)

    # ---- 7. the fixed point
    phase, active = tn.phase, tn.active
    cap, compute, rfrac = np.empty((T, B)), np.empty((T, B)), np.empty((T, B))
    rnd, tsock, remote = np.empty((T, B)), np.empty((T, B), dtype=np.int64), np.empty((T, N, B))
    c = p.contiguous
    _interval.fixed_point_inputs(
        LINE_BYTES, c["threads"], c["mlp"], c["compute_ns"], c["read_fraction"], c["socket"],
        c["random"], c["node_socket"], phase, active, np.ascontiguousarray(state.jit[0]),
        np.ascontiguousarray(state.jit[1]), np.ascontiguousarray(cpu_loss), cap, compute,
        rfrac, tsock, remote, rnd,
    )  # fmt: skip
    links = None
    if p.flags["link_limit"]:
        links = SocketLinks(
            link_weights(node_share, rfrac, tsock, p.node_socket, p.sockets),
            p.link_gbps,
            p.link_slope_ns,
            p.link_knee_ns,
            p.link_knee_exp,
        )
    sol = solve_fixed_point(
        cap,
        compute,
        rfrac,
        node_share,
        remote,
        bg_rd,
        bg_wr,
        p.curves,
        x0=state.throughput,
        links=links,
        random=rnd if p.flags["random"] else None,
        curve_rows=p.curve_rows,
        tol=tol,
        lanes=lanes,
    )

    # ---- outputs (batch-first: views of the batch-last arrays)
    x, cv = sol.throughput, p.contiguous
    bw, peak, util = np.empty((N, B)), np.empty((N, B)), np.empty((N, B))
    norm_perf, lat, dshare, rf = (np.empty((T, B)) for _ in range(4))
    promo_mbps, demo_mbps, cand_mbps, total = (np.empty(B) for _ in range(4))
    _interval.interval_outputs(
        sol.node_read_gbps, sol.node_write_gbps, cv["mem_read"], cv["mem_write"],
        cv["mem_turn"], cv["link_read"], cv["link_write"], sol.node_util, sol.remote_util, x,
        np.ascontiguousarray(state.solo_gbps), phase, active, sol.tenant_latency_ns,
        dram_share, rfrac, np.ascontiguousarray(promo_from), np.ascontiguousarray(dem_from),
        np.ascontiguousarray(cand.per_target), GIB / 1e6, np.ascontiguousarray(dt), bw, peak,
        util, norm_perf, lat, dshare, rf, promo_mbps, demo_mbps, cand_mbps, total,
    )  # fmt: skip
    out = record(
        Outputs,
        {
            "node_bandwidth_gbps": bw.T,
            "node_read_gbps": sol.node_read_gbps.T,
            "node_write_gbps": sol.node_write_gbps.T,
            "node_peak_gbps": peak.T,
            "node_utilization": util.T,
            "node_latency_ns": sol.node_latency_ns.T,
            "node_capacity_used_gib": used.T,
            "tenant_active": active.T,
            "tenant_throughput_gbps": x.T,
            "tenant_demand_gbps": sol.demand.T,  # each tenant's throughput at idle latencies
            "tenant_norm_perf": norm_perf.T,
            "tenant_latency_ns": lat.T,
            "tenant_dram_access_share": dshare.T,
            "tenant_dram_resident_gib": dram_res.T,
            "tenant_resident_gib": resident.T,
            "tenant_working_set_gib": tn.ws.T,
            "tenant_read_fraction": rf.T,
            "promotion_mbps": promo_mbps,
            "demotion_mbps": demo_mbps,
            "promotion_candidates_mbps": cand_mbps,
            "total_throughput_gbps": total,
            "solver_residual": sol.residual,
            "solver_iterations": sol.iterations,
            "solver_converged": sol.residual <= tol,
            "tenant_memory_events_high": events_high.T,
        },
    )
    new = record(
        State,
        {
            "t": state.t + 1,
            "place": place,
            "weights": w,
            "threshold_ms": threshold_ms,
            "cand_mb": cand_mb,
            "throughput": x.copy(),  # the outputs hold views of x; the state must not alias them
            "key": state.key,
            "jit": state.jit,
            "solo_gbps": state.solo_gbps,
            "scan_period_ms": scan_period,
            "scan_next_s": state.scan_next_s,
            "scan_offset_gib": scan_offset,
            "numa_faults_mb": faults,
            "kswapd_failures": kswapd_failures,
        },
    )
    return new, out


def reset_rows(params: Params, state: State, idx: NDArray[np.int64], seeds: ArrayLike) -> State:
    """``state`` with new episodes in batch elements ``idx`` (a new object)."""
    if len(idx) == 0:
        return state
    return state.replace_rows(idx, init_state(params.subset(idx), seeds))
