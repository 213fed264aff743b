"""Decision logic of the kernel-style tiering heuristics, independent of any environment.

Every function works on numpy arrays with leading batch axes, and every controller keeps
its state as arrays of the shape it was built with (``(B,)``, ``(B, T)``, ...), updating all
elements in one vectorised call (no Python loop over the batch). Constants from each source
are the defaults; see the project's design note on baselines (``shared/design/baselines.md``).

Every mechanism the environment's model also runs (watermarks, the NUMA-balancing
threshold adaptation, memcg reclaim and the promotion throttle, the weighted-interleave
auto weights and gcd reduction) is written once, in :mod:`envs.kernel`, and re-exported
here where a controller uses it; this module adds only the controllers' own logic.

Sources, read for this module (behaviour re-implemented, no text copied):

* ``mm/mempolicy.c``: ``reduce_interleave_weights``, ``mempolicy_set_node_perf``
  (weighted-interleave auto mode, Linux 6.16).
* ``mm/page_alloc.c``: ``__setup_per_zone_wmarks``, ``calculate_min_free_kbytes``.
* ``kernel/sched/fair.c``: ``numa_promotion_adjust_threshold``, ``pgdat_free_space_enough``,
  ``should_numa_migrate_memory`` (NUMA balancing memory-tiering mode).
* Tiering-fairness RFC (K. Zhao, linux-mm, 20 Sep 2024, "memory tiering fairness by
  per-cgroup control of promotion and demotion"), patches 2-4; ``mm/vmscan.c``
  ``apply_proportional_protection``.
* Colloid (SOSP'24) artifact ``host-architecture/colloid``: the monitor module with the
  ``p_lo``/``p_hi`` bisection (``COLLOID_DELTA_PERCENT`` 5, ``COLLOID_EPSILON_PERCENT`` 1,
  ``MIGRATION_QUANTUM_MS`` 500, ``EWMA_EXP``).
* Caption (MICRO'23) artifact ``ece-fast-lab/cxl_type3_tests``: ``caption_ae/algo.py``,
  ``config.py``, ``caption_ctrl.py``.
* ``mm/damon/core.c``: ``damon_feed_loop_next_input``, ``damos_quota_score``,
  ``damos_set_effective_quota``; ``samples/damon/mtier.c``.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import numpy.typing as npt

from envs import kernel as _kernel
from envs.kernel import (
    MAX_WEIGHT,
    PAGE_BYTES,
    auto_interleave_weights,
    gcd_reduce,
    memcg_reclaim_scan,
)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
Shape = int | tuple[int, ...]

__all__ = [
    "CAPTION_COEFFICIENTS",
    "MTIER_DEMOTE_FREE_BP",
    "MTIER_PROMOTE_USED_BP",
    "MTIER_QUOTA_BYTES",
    "PAGE_BYTES",
    "Caption",
    "Colloid",
    "DamonQuotaTuner",
    "auto_interleave_weights",
    "colloid_migration_bytes",
    "damon_feed_loop_next_input",
    "damos_quota_score",
    "memcg_promotion_scan_fraction",
    "memcg_reclaim_scan",
    "node_mem_bp",
    "reduce_weights",
]

#: ``ULONG_MAX`` on 64-bit kernels: DAMON's feedback loop saturates there.
_ULONG_MAX = float(2**64 - 1)


def _as_shape(shape: Shape) -> tuple[int, ...]:
    return (shape,) if isinstance(shape, int) else tuple(shape)


def _f64(x: npt.ArrayLike) -> FloatArray:
    return np.asarray(x, dtype=np.float64)


# ---------------------------------------------------------------------------------------------
# 1-2. Weighted interleave, auto mode (mm/mempolicy.c)
# ---------------------------------------------------------------------------------------------


def reduce_weights(w: npt.ArrayLike) -> IntArray:
    """Clip integer interleave weights to 1..255, then divide them by their gcd.

    "1:2 is strictly better than 16:32" (``mm/mempolicy.c``): the same long-run share with
    a shorter round. Weights live on the last axis; leading axes are batch axes.

    Args:
        w: integer weights, shape ``(..., N)``; values are rounded to integers first.

    Returns:
        int64 array of the same shape, each row divided by its gcd, values in 1..255.
    """
    arr = np.rint(_f64(w)).astype(np.int64)
    if arr.ndim == 0:
        raise ValueError("weights need a node axis (last axis)")
    return gcd_reduce(np.clip(arr, 1, MAX_WEIGHT))


# ---------------------------------------------------------------------------------------------
# 5. Per-cgroup tiering fairness (RFC, Sept 2024)
# ---------------------------------------------------------------------------------------------


def memcg_promotion_scan_fraction(
    low_pages: npt.ArrayLike,
    usage_pages: npt.ArrayLike,
    dram_under_pressure: npt.ArrayLike = True,
    exponent: int = 4,
    min_fraction: float = 1.0 / 16.0,
) -> FloatArray:
    """Fraction of the NUMA-balancing scan size left to a cgroup over its DRAM protection.

    Source: RFC patch 4/4 (``task_numa_work``). When the DRAM node is under pressure (free
    below its PROMO watermark) and the cgroup's DRAM usage ``U`` exceeds its ``locallow``
    ``L``, the scan size is multiplied four times by ``L / (U + 1)`` and floored at 1/16::

        fraction = max((L / (U + 1)) ** 4, 1/16)      if pressure and U > L
        fraction = 1                                  otherwise

    ``L`` and ``U`` are in pages of 4 KiB (the ``+ 1`` is one page), so at realistic sizes
    10% over gives ``1/1.1**4 = 0.683`` and 100% over gives ``0.0625`` (the 1/16 floor); the
    RFC's table: 10% 68%, 20% 48%, 50% 20%, 100% 6%.

    The throttle itself is :func:`envs.kernel.memcg_promotion_scan_fraction` (what the
    model runs); this adds the pressure condition.

    Args:
        low_pages: the cgroup's effective DRAM protection (``elocallow``), pages.
        usage_pages: its DRAM usage, pages.
        dram_under_pressure: whether the DRAM node's free memory is below PROMO.
        exponent: number of multiplications (4).
        min_fraction: ``1 / min_scan_pages_fraction`` (1/16).

    Returns:
        float64 fraction in ``[min_fraction, 1]``, broadcast shape.
    """
    frac = _kernel.memcg_promotion_scan_fraction(
        low_pages, usage_pages, power=float(exponent), floor=min_fraction
    )
    return np.where(np.asarray(dram_under_pressure, dtype=bool), frac, 1.0)


# ---------------------------------------------------------------------------------------------
# 6. Colloid (SOSP'24)
# ---------------------------------------------------------------------------------------------


class Colloid:
    """Colloid: balance loaded access latency of DRAM and CXL by bisection on the DRAM
    access share.

    Source: the Colloid artifact (``host-architecture/colloid``, monitor module of the
    MEMTIS/HeMem integrations). Per element it keeps the bounds ``p_lo``/``p_hi`` (start
    0 and 1) on ``p``, the share of memory accesses served by DRAM. Each update, with the
    smoothed latencies::

        |L_dram - L_cxl| <= delta * L_dram:  hold (nothing to move)
        L_dram <= L_cxl (DRAM faster): p_lo = p; if p_hi <= p_lo: p_hi = 1   (promote)
        L_dram >  L_cxl (DRAM slower): p_hi = p; if p_lo >= p_hi: p_lo = 0   (demote)
        if p_hi - p_lo < epsilon: reset the far bound (p_hi = 1 when promoting,
                                  p_lo = 0 when demoting)
        target = (p_lo + p_hi) / 2;  move = |target - p|

    Pages whose access share sums to ``move`` are migrated per 500 ms quantum, hot pages to
    DRAM when ``target > p``, from DRAM otherwise (:func:`colloid_migration_bytes`).

    Latency smoothing: the artifact computes latency by Little's law from EWMA-smoothed
    memory-controller queue occupancy and insert counters, new sample weighted
    ``2**-EWMA_EXP`` (``EWMA_EXP`` = 4 with 10 ms sampling, 5 when spin-polling). Here the
    latencies themselves are smoothed with weight ``ewma_alpha`` (default ``2**-4``); the
    first sample initialises the average. Use ``ewma_alpha=1`` when each update already
    sees a long-window mean (e.g. one environment step of a second or more).

    State arrays of ``shape`` (e.g. ``(B,)`` or ``(B, T)`` with a tenant axis): ``p_lo``,
    ``p_hi``, ``target``, ``l_dram_ns``, ``l_cxl_ns``.

    Args:
        shape: batch shape.
        delta: hold band, relative to ``L_dram`` (``COLLOID_DELTA_PERCENT`` 5%).
        epsilon: minimum bracket width before the far bound resets
            (``COLLOID_EPSILON_PERCENT`` 1%).
        ewma_alpha: weight of a new latency sample (``2**-EWMA_EXP``, 1/16).
    """

    def __init__(
        self,
        shape: Shape = 1,
        delta: float = 0.05,
        epsilon: float = 0.01,
        ewma_alpha: float = 2.0**-4,
    ) -> None:
        if not 0.0 < ewma_alpha <= 1.0:
            raise ValueError("ewma_alpha must be in (0, 1]")
        self.shape = _as_shape(shape)
        self.delta = float(delta)
        self.epsilon = float(epsilon)
        self.ewma_alpha = float(ewma_alpha)
        self.p_lo: FloatArray = np.zeros(self.shape)
        self.p_hi: FloatArray = np.ones(self.shape)
        self.target: FloatArray = np.full(self.shape, np.nan)
        self.l_dram_ns: FloatArray = np.full(self.shape, np.nan)
        self.l_cxl_ns: FloatArray = np.full(self.shape, np.nan)

    def _smooth(self, prev: FloatArray, sample: FloatArray) -> FloatArray:
        a = self.ewma_alpha
        return np.where(np.isnan(prev), sample, a * sample + (1.0 - a) * prev)

    def update(
        self, l_dram_ns: npt.ArrayLike, l_cxl_ns: npt.ArrayLike, p_current: npt.ArrayLike
    ) -> tuple[FloatArray, FloatArray]:
        """One control step for every element.

        Args:
            l_dram_ns: measured loaded DRAM latency, broadcastable to ``shape``.
            l_cxl_ns: measured loaded CXL latency.
            p_current: current share of accesses served by DRAM, in [0, 1].

        Returns:
            ``(target, move)``: the DRAM access share to reach and ``|target - p|`` (0 when
            holding; then ``target == p``).
        """
        p = np.broadcast_to(_f64(p_current), self.shape)
        l_d = self._smooth(self.l_dram_ns, np.broadcast_to(_f64(l_dram_ns), self.shape))
        l_c = self._smooth(self.l_cxl_ns, np.broadcast_to(_f64(l_cxl_ns), self.shape))
        self.l_dram_ns, self.l_cxl_ns = l_d, l_c

        hold = np.abs(l_d - l_c) <= self.delta * l_d
        promote = ~hold & ~(l_d > l_c)
        demote = ~hold & (l_d > l_c)

        p_lo = np.where(promote, p, self.p_lo)
        p_hi = np.where(promote & (self.p_hi <= p_lo), 1.0, self.p_hi)
        p_hi = np.where(demote, p, p_hi)
        p_lo = np.where(demote & (p_lo >= p_hi), 0.0, p_lo)
        narrow = (p_hi - p_lo) < self.epsilon
        p_hi = np.where(promote & narrow, 1.0, p_hi)
        p_lo = np.where(demote & narrow, 0.0, p_lo)
        self.p_lo, self.p_hi = p_lo, p_hi

        target = np.where(hold, p, 0.5 * (p_lo + p_hi))
        self.target = target
        return target.copy(), np.abs(target - p)


def colloid_migration_bytes(
    move: npt.ArrayLike, access_rate_gbps: npt.ArrayLike, quantum_s: float = 0.5
) -> FloatArray:
    """Bytes of pages Colloid migrates in one quantum to shift ``move`` of the access share.

    Source: the artifact's ``colloid_dynlimit`` = ``delta_p`` x (memory accesses per
    quantum) in pages; here accesses are given as a byte rate (GB/s, 1e9 B/s), so the
    result is ``move * rate * quantum`` bytes of hot pages (``MIGRATION_QUANTUM_MS`` 500).

    Args:
        move: share of accesses to move (``Colloid.update`` output).
        access_rate_gbps: total memory access rate of the element, GB/s.
        quantum_s: migration quantum (0.5 s).

    Returns:
        float64 bytes per quantum.
    """
    return _f64(move) * _f64(access_rate_gbps) * 1e9 * quantum_s


# ---------------------------------------------------------------------------------------------
# 7. Caption (MICRO'23)
# ---------------------------------------------------------------------------------------------

#: Caption's linear performance model (``caption_ae/config.py``, fitted in R): coefficients
#: on the normalised IPC, the L1-miss latency and the DDR read latency, as Intel PCM reports
#: them.
CAPTION_COEFFICIENTS: dict[str, float] = {
    "norm_ipc": 99.55281,
    "l1_miss_latency": -0.04686,
    "ddr_read_latency": -0.48751,
}


class Caption:
    """Caption: hill climbing on the DRAM:CXL interleave ratio of new allocations.

    Source: Caption artifact ``ece-fast-lab/cxl_type3_tests``, ``caption_ae/algo.py``
    (``algo``), ``config.py`` (constants) and ``caption_ctrl.py`` (state). The top (DRAM)
    weight is fixed at 10; the bottom (CXL) weight ``b`` starts at 1 (10:1) with a step of
    ``STEP_RESET`` = 3. On each tuning step, with ``diff`` = estimate - previous estimate::

        estimate > idle:       idle, keep b, step = +1
        |diff| < tiny (0.2):   stable, keep b, step = +-1 (sign of the previous step)
        |diff| > huge (500):   reset, b = 1, step = 3
        diff > 0 (better):     keep the step;  else (worse): step = -step / 2
        |step| < 1 -> +-1; step truncated to an integer; b = clip(b + step, 1, 20)

    On the first call the previous estimate is taken as ``estimate - 1`` so that the first
    step always moves toward more CXL (b: 1 -> 4), as the artifact does.

    Units: the estimate is Caption's linear model output (:func:`caption_estimate`), about
    100 x normalised IPC minus latency terms, and ``tiny``/``huge``/``idle`` are in those
    units (0.2, 500, 70000). A normalised throughput in [0, 1] used as a stand-in should be
    multiplied by ~100 (the IPC coefficient) to keep the thresholds' meaning.

    State arrays of ``shape``: ``bottom`` (int), ``step`` (int), ``prev_estimate``.

    Args:
        shape: batch shape (e.g. ``(B,)`` or ``(B, T)``).
        top: fixed DRAM weight (``IL_TOP_RESET`` 10).
        bottom_reset: initial / reset CXL weight (``IL_BOT_RESET`` 1).
        bottom_max: largest CXL weight (``IL_BOT_MAX`` 20).
        step_reset: initial / reset step (``STEP_RESET`` 3).
        min_step: smallest step magnitude (``MIN_STEP`` 1).
        tiny: ``TUNE_TRESHOLD`` 0.2, change below which ``b`` is kept.
        huge: ``RESET_THRESHOLD`` 500, change above which the ratio resets.
        idle: ``IDLE_THRESHOLD`` 70000, estimate above which tuning pauses (``None``: off).
    """

    def __init__(
        self,
        shape: Shape = 1,
        top: int = 10,
        bottom_reset: int = 1,
        bottom_max: int = 20,
        step_reset: int = 3,
        min_step: int = 1,
        tiny: float = 0.2,
        huge: float = 500.0,
        idle: float | None = 70000.0,
    ) -> None:
        self.shape = _as_shape(shape)
        self.top = int(top)
        self.bottom_reset = int(bottom_reset)
        self.bottom_max = int(bottom_max)
        self.step_reset = int(step_reset)
        self.min_step = int(min_step)
        self.tiny = float(tiny)
        self.huge = float(huge)
        self.idle = None if idle is None else float(idle)
        self.bottom: IntArray = np.full(self.shape, self.bottom_reset, dtype=np.int64)
        self.step: IntArray = np.full(self.shape, self.step_reset, dtype=np.int64)
        self.prev_estimate: FloatArray = np.full(self.shape, np.nan)

    def weights(self) -> IntArray:
        """Current ``(top, bottom)`` weights, shape ``shape + (2,)``."""
        return np.stack([np.full(self.shape, self.top, dtype=np.int64), self.bottom], axis=-1)

    def update(self, estimate: npt.ArrayLike) -> IntArray:
        """One tuning step for every element; returns the new ``(10, b)`` weights.

        Args:
            estimate: performance estimate measured under the current weights (higher is
                better), broadcastable to ``shape``.
        """
        est = np.broadcast_to(_f64(estimate), self.shape)
        prev = np.where(np.isnan(self.prev_estimate), est - 1.0, self.prev_estimate)
        diff = est - prev
        ms = self.min_step

        idle = est > self.idle if self.idle is not None else np.zeros(self.shape, dtype=bool)
        stable = ~idle & (np.abs(diff) < self.tiny)
        reset = ~idle & ~stable & (np.abs(diff) > self.huge)
        tune = ~idle & ~stable & ~reset

        raw = np.where(diff > 0, self.step.astype(np.float64), -self.step / 2.0)
        raw = np.where(np.abs(raw) < ms, np.where(raw < 0, -ms, ms), raw)
        tuned_step = np.trunc(raw).astype(np.int64)
        tuned_bottom = np.clip(self.bottom + tuned_step, 1, self.bottom_max)

        step = np.where(tune, tuned_step, self.step)
        step = np.where(stable, np.where(self.step < 0, -ms, ms), step)
        step = np.where(idle, ms, step)
        step = np.where(reset, self.step_reset, step)
        bottom = np.where(tune, tuned_bottom, self.bottom)
        bottom = np.where(reset, self.bottom_reset, bottom)

        self.step = step.astype(np.int64)
        self.bottom = bottom.astype(np.int64)
        self.prev_estimate = est.astype(np.float64)
        return self.weights()


# ---------------------------------------------------------------------------------------------
# 8. DAMOS quota goal auto-tuning (mm/damon/core.c, samples/damon/mtier.c)
# ---------------------------------------------------------------------------------------------

#: ``samples/damon/mtier.c``: promotion aims at DRAM node used ratio 99.7% (basis points).
MTIER_PROMOTE_USED_BP = 9970
#: ``samples/damon/mtier.c``: demotion aims at DRAM node free ratio 0.5% (basis points).
MTIER_DEMOTE_FREE_BP = 50
#: ``samples/damon/mtier.c``: each scheme's size quota, 200 MiB per 1 s reset interval.
MTIER_QUOTA_BYTES = 200 * 2**20


def node_mem_bp(used: npt.ArrayLike, total: npt.ArrayLike) -> FloatArray:
    """``used * 10000 / total`` floored: DAMON's ``NODE_MEM_{USED,FREE}_BP`` metrics
    (``damos_get_node_mem_bp``; pass free memory for the FREE metric)."""
    return np.floor(_f64(used) * 10000.0 / _f64(total))


def damos_quota_score(current: npt.ArrayLike, target: npt.ArrayLike) -> FloatArray:
    """Goal score ``floor(current * 10000 / target)`` (``damos_quota_score``; with several
    goals the kernel takes the highest score, i.e. the least aggressive)."""
    return np.floor(_f64(current) * 10000.0 / _f64(target))


def damon_feed_loop_next_input(
    last_input: npt.ArrayLike, score: npt.ArrayLike, min_input: float = 10000.0
) -> FloatArray:
    """DAMON's feedback loop: next input that should bring the score to the goal 10000.

    Source: ``mm/damon/core.c`` ``damon_feed_loop_next_input`` (overflow-safe version)::

        score == 10000:  last
        diff = 10000 - score            if score < 10000
             = min(score - 10000, 10000) otherwise
        comp = floor(last * diff / 10000)
        score < 10000:  min(last + comp, ULONG_MAX)          (grow)
        otherwise:      last - comp if last - comp > min_input else min_input   (shrink)

    Args:
        last_input: previous input (DAMOS: effective quota in bytes x 10000), any shape.
        score: score obtained with it (10000 = goal met), broadcastable.
        min_input: floor of the input (10000, i.e. 1 byte of quota).

    Returns:
        float64 next input (integral values).
    """
    goal = 10000.0
    last = _f64(last_input)
    sc = _f64(score)
    diff = np.where(sc < goal, goal - sc, np.minimum(sc - goal, goal))
    comp = np.floor(last * diff / goal)
    grow = np.minimum(last + comp, _ULONG_MAX)
    shrink = np.where(last - comp > min_input, last - comp, min_input)
    out = np.where(sc < goal, grow, shrink)
    return np.where(sc == goal, last, out)


class DamonQuotaTuner:
    """DAMOS quota auto-tuning toward a goal, as the DAMON memory-tiering schemes use it.

    Source: ``mm/damon/core.c`` ``damos_set_effective_quota`` with the default
    ``consist`` goal tuner (``damos_goal_tune_esz_bp_consist``), as configured by
    ``samples/damon/mtier.c`` (Linux 6.16): promote hot CXL regions with goal DRAM used
    9970 bp, demote cold DRAM regions with goal DRAM free 50 bp, each capped at 200 MiB per
    1 s. Per update (once per quota reset interval)::

        score  = floor(current * 10000 / target)
        esz_bp = damon_feed_loop_next_input(max(esz_bp, 10000), score)
        quota  = min(esz_bp // 10000, max_quota_bytes)         (bytes)

    so the quota grows by ``last * |score - 10000| / 10000`` while under the goal and shrinks
    by as much while over it (to the 1-byte minimum once ``score >= 20000``). ``esz_bp``
    starts at 0, hence the first quota is 1 byte and grows geometrically, as in the kernel.
    The ``temporal`` tuner (newer kernels) is bang-bang: quota 0 when the goal is met, the
    full ``max_quota_bytes`` otherwise.

    State: ``esz_bp`` and ``quota_bytes`` of ``shape``.

    Args:
        shape: batch shape.
        max_quota_bytes: ``quota.sz`` (mtier: 200 MiB); 0 means no size cap.
        tuner: ``"consist"`` (default) or ``"temporal"``.
        min_input_bp: feedback-loop floor (10000).
    """

    def __init__(
        self,
        shape: Shape = 1,
        max_quota_bytes: float = MTIER_QUOTA_BYTES,
        tuner: Literal["consist", "temporal"] = "consist",
        min_input_bp: float = 10000.0,
    ) -> None:
        if tuner not in ("consist", "temporal"):
            raise ValueError(f"unknown tuner {tuner!r}")
        self.shape = _as_shape(shape)
        self.max_quota_bytes = float(max_quota_bytes)
        self.tuner = tuner
        self.min_input_bp = float(min_input_bp)
        self.esz_bp: FloatArray = np.zeros(self.shape)
        self.quota_bytes: FloatArray = np.zeros(self.shape)

    def update(self, current: npt.ArrayLike, target: npt.ArrayLike) -> FloatArray:
        """One quota interval for every element.

        Args:
            current: current value of the goal metric (e.g. DRAM used bp), broadcastable.
            target: goal value of the metric (e.g. 9970), broadcastable.

        Returns:
            The effective quota in bytes for the next interval (a copy).
        """
        score = np.broadcast_to(damos_quota_score(current, target), self.shape)
        if self.tuner == "consist":
            esz_bp = damon_feed_loop_next_input(
                np.maximum(self.esz_bp, self.min_input_bp), score, self.min_input_bp
            )
        else:
            full = self.max_quota_bytes * 10000.0 if self.max_quota_bytes > 0 else _ULONG_MAX
            esz_bp = np.where(score >= 10000.0, 0.0, full)
        quota = np.floor(esz_bp / 10000.0)
        if self.max_quota_bytes > 0:
            quota = np.minimum(quota, self.max_quota_bytes)
        self.esz_bp = np.asarray(esz_bp, dtype=np.float64)
        self.quota_bytes = np.asarray(quota, dtype=np.float64)
        return self.quota_bytes.copy()
