"""Action decoding, observation encoding and rewards, shared by every environment.

Written once over batched outputs (batch-first arrays); the single and the
vector environment both call these.

Actions (``action_type="box"``): a ``Box(-1, 1)`` vector. With
``weights="per-tenant"`` it holds, for each tenant slot in order, one entry
per node, then one entry for the promotion rate limit; with
``weights="global"`` one weight vector over the nodes shared by every tenant
(like ``/sys/kernel/mm/mempolicy/weighted_interleave/nodeN``) then the rate.

- A weight entry ``a`` maps to a kernel interleave weight: ``a < -0.9`` leaves
  the node out of the interleave mask (weight 0); otherwise the weight is
  ``round(255 ** ((a + 0.9) / 1.9))``, an integer in 1..255 on a log scale
  (``a = -0.9`` gives 1, ``a = 1`` gives 255). Each tenant's weights are then
  reduced by their greatest common divisor, as the kernel's auto mode does.
  If every node is left out, the tenant allocates local-first.
- The rate entry ``a`` maps to 0 MB/s (promotion off) for ``a < -0.9``, else
  to ``max_promote_mbps ** ((a + 0.9) / 1.9)`` MB/s: 1 MB/s at ``a = -0.9`` up
  to the maximum (default 65536 MB/s, the kernel's default
  ``numa_balancing_promote_rate_limit_MBps``).

``action_type="discrete"``: a ``MultiDiscrete``; each weight entry picks one of
``WEIGHT_LEVELS`` and the rate entry one of ``RATE_LEVELS_MBPS``.

Tiering mode (``tiering_modes``, default none): one more entry after the rate
picks the kernel's tiering mode for the interval, one of the named
:data:`TIERING_MODES` (the kernel switches that distinguish TPP, DAMON, the
memcg fairness RFC... from plain NUMA-balancing tiering). A box entry ``a``
picks mode ``floor((a + 1) / 2 * M)`` of the ``M`` modes listed (equal bins over
[-1, 1]); a discrete entry is the index. ``"default"`` is the environment's own
kernel configuration.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces
from numpy.typing import NDArray

from envs.encoding import (
    box_exponents,
    box_levels,
    fill_observation,
    log_scale_exponents,
    reward_perf,
    reward_sums,
)
from envs.host import host_features, host_view_names, host_view_size
from envs.kernel import MAX_WEIGHT, gcd_reduce
from envs.model import Action, KernelConfig, Outputs

__all__ = [
    "ACTION_TYPES",
    "OBSERVATIONS",
    "RATE_LEVELS_MBPS",
    "REWARDS",
    "TIERING_MODES",
    "WEIGHTS",
    "WEIGHT_LEVELS",
    "ActionCodec",
    "ObservationEncoder",
    "mode_kernels",
    "reward_terms",
    "tiering_mode_of",
]

F64 = NDArray[np.float64]
OFF = -0.9  # below this an entry means "off" (node out of the mask, promotion disabled)
WEIGHT_LEVELS = (0, 1, 2, 3, 4, 6, 8, 16)
RATE_LEVELS_MBPS = (0.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 65536.0)
REWARDS = ("log-geomean", "throughput", "weighted-speedup", "harmonic")
#: "basic": the layout before visible arrivals (old models); "cgroup": "full" plus each
#: tenant's cgroup limits (CGROUP_DESCRIPTORS); "demand": "cgroup" plus each tenant's
#: zero-load demand over its local DRAM's peak (DEMAND_DESCRIPTORS); "topology": "demand"
#: plus the DRAM share of bandwidth-proportional interleave over each tenant's nearest nodes
#: (TOPOLOGY_DESCRIPTORS); "host": only what a Linux host shows (:mod:`envs.host`'s
#: definitions, what ``deploy.py`` reads on a real machine)
OBSERVATIONS = ("full", "basic", "cgroup", "demand", "topology", "host")

#: How the weights of the action apply: one row per tenant slot, or one row for all of them.
WEIGHTS = ("per-tenant", "global")

#: The action space: ``Box(-1, 1)`` entries, or ``MultiDiscrete`` levels of them.
ACTION_TYPES = ("box", "discrete")

#: The kernel's tiering modes an agent may select (:class:`~envs.model.KernelConfig`
#: fields set over the environment's own configuration, ``"default"``). What sets the
#: shipped heuristics apart from plain NUMA-balancing tiering, so that each of them is
#: an action (``tests/test_residual.py`` replays them):
#:
#: - ``tpp``: TPP (ASPLOS'23, Linux 5.18 patch set): proactive demotion to a watermark
#:   at ``demote_scale_factor`` 200/10000 of the node, promotion of active-LRU pages
#:   only, no rate-limit threshold adaptation (TPP predates it);
#: - ``memcg-fair``: the per-cgroup promotion throttle of the tiering-fairness RFC
#:   (K. Zhao, linux-mm, Sept 2024), with memory.low/high on DRAM usage as that RFC
#:   uses them (``memcg_limits="dram"``);
#: - ``damon``: DAMON mtier (``samples/damon/mtier.c``, Linux 6.16): demotion when DRAM
#:   free falls under 50/10000, at most the 200 MiB/s quota, no threshold adaptation;
#: - ``no-demotion``: Linux's default ``/sys/kernel/mm/numa/demotion_enabled=0``.
TIERING_MODES: dict[str, dict[str, float | bool | str]] = {
    "default": {},
    "tpp": {"demote_watermark_frac": 0.02, "promote_active_only": True, "threshold_adapt": False},
    "memcg-fair": {"promotion_throttle": True, "memcg_limits": "dram"},
    "damon": {
        "demotion": True,
        "demote_watermark_frac": 50 / 10000.0,
        "kswapd_gibps": 200 / 1024.0,
        "threshold_adapt": False,
    },
    "no-demotion": {"demotion": False},
}


def mode_kernels(base: KernelConfig, modes: tuple[str, ...]) -> list[KernelConfig]:
    """The kernel configuration of each mode of ``modes`` over the environment's ``base``."""
    out = []
    for m in modes:
        if m not in TIERING_MODES:
            raise ValueError(
                f"tiering_modes: unknown mode {m!r}, expected some of {list(TIERING_MODES)}"
            )
        out.append(dataclasses.replace(base, **TIERING_MODES[m]))  # type: ignore[arg-type]
    return out


def tiering_mode_of(kernel: KernelConfig, base: KernelConfig, modes: tuple[str, ...]) -> int:
    """Index in ``modes`` of the mode that turns ``base`` into ``kernel``.

    Raises:
        ValueError: no listed mode gives ``kernel`` (a heuristic whose kernel settings are
            not an action of this environment).
    """
    for i, k in enumerate(mode_kernels(base, modes)):
        if k == kernel:
            return i
    raise ValueError(
        f"kernel configuration {kernel!r} is none of the tiering modes {list(modes)} over {base!r}"
    )


def _log_scale(a: F64, top: float) -> F64:
    return np.power(top, log_scale_exponents(a, OFF))


#: dtype kinds an action may have: signed and unsigned integers, floats (bool, complex,
#: strings, dates and Python objects are refused before any conversion)
_NUMERIC_KINDS = "iuf"
_INT64 = (-(2**63), 2**64)  # Python ints numpy can hold as int64 or uint64
_KIND_NAMES = {
    "b": "bools",
    "c": "complex numbers",
    "U": "strings",
    "S": "bytes",
    "M": "dates",
    "m": "time spans",
    "V": "records",
}


def _short(v: Any) -> str:
    """``repr`` of an offending value, cut to one short line."""
    r = repr(v.item() if isinstance(v, np.generic) else v).replace("\n", " ")
    return r if len(r) <= 40 else r[:37] + "..."


def _first_odd(
    x: Any, shape: tuple[int, ...], path: tuple[int, ...] = ()
) -> tuple[tuple[int, ...], Any, str] | None:
    """The first place where ``x`` is not nested sequences of real numbers of ``shape``:
    ``(index path, value there, what was expected)``, or None. Error path only (a Python
    walk over the entries)."""
    if not shape:
        if isinstance(x, np.ndarray) and x.ndim == 0:
            x = x[()]
        if isinstance(x, bool | np.bool_):
            return path, x, "a number (not a bool)"
        if isinstance(x, int) and not _INT64[0] <= x < _INT64[1]:
            return path, x, "a number that fits in 64 bits"
        if isinstance(x, int | float | np.integer | np.floating):
            return None
        if isinstance(x, str | bytes | dict) or not hasattr(x, "__len__"):
            return path, x, "a real number"
        return path, x, "one number, not a sequence"
    if isinstance(x, str | bytes | dict) or not hasattr(x, "__len__"):
        return path, x, f"a sequence of {shape[0]} numbers"
    if len(x) != shape[0]:
        return path, x, f"{shape[0]} entries"
    for i, e in enumerate(x):
        odd = _first_odd(e, shape[1:], (*path, i))
        if odd is not None:
            return odd
    return None


@dataclass(frozen=True)
class ActionCodec:
    """Maps policy actions (batch-first) to model actions: weights (B, T, N) and MB/s (B,)."""

    n_tenants: int
    n_nodes: int
    weights: str = "per-tenant"
    action_type: str = "box"
    max_promote_mbps: float = 65536.0
    modes: tuple[str, ...] = ()  # tiering modes the last entry picks from (none: no entry)

    def __post_init__(self) -> None:
        bad = [m for m in self.modes if m not in TIERING_MODES]
        if bad or len(set(self.modes)) != len(self.modes):
            raise ValueError(
                f"tiering_modes: got {list(self.modes)}, expected distinct names of {list(TIERING_MODES)}"
            )
        if self.weights not in WEIGHTS:
            raise ValueError(f"weights: got {self.weights!r}, expected one of {list(WEIGHTS)}")
        if self.action_type not in ACTION_TYPES:
            raise ValueError(
                f"action_type: got {self.action_type!r}, expected one of {list(ACTION_TYPES)}"
            )
        if not (math.isfinite(self.max_promote_mbps) and self.max_promote_mbps > 1.0):
            raise ValueError(
                f"max_promote_mbps: got {self.max_promote_mbps}, expected a number > 1 MB/s"
            )

    @property
    def n_weight_rows(self) -> int:
        return self.n_tenants if self.weights == "per-tenant" else 1

    @property
    def size(self) -> int:
        return self.n_weight_rows * self.n_nodes + 1 + (1 if self.modes else 0)

    @property
    def _n_base(self) -> int:
        """Entries of the weights and the rate (the mode entry, if any, comes after)."""
        return self.n_weight_rows * self.n_nodes + 1

    def entry_name(self, i: int) -> str:
        """Name of entry ``i`` of an action, as error messages give it: ``weight t<slot>
        n<node>`` (``weight n<node>`` with global weights), ``promote``, ``mode``."""
        n_w = self._n_base - 1
        if i < n_w:
            if self.weights == "global":
                return f"weight n{i}"
            return f"weight t{i // self.n_nodes} n{i % self.n_nodes}"
        return "promote" if i == n_w else "mode"

    def _field(self, name: str, path: tuple[int, ...], batched: bool) -> str:
        """``action[promote]``, ``actions[3][weight t0 n1]``, ``actions[3]``... for an index
        path into a single action (``batched`` False) or a batch of them."""
        if batched:
            head, path = (f"{name}[{path[0]}]", path[1:]) if path else (name, path)
        else:
            head = name
        return f"{head}[{self.entry_name(path[0])}]" if path else head

    def _type_error(self, given: Any, a: NDArray | None, batch: int | None, name: str) -> TypeError:
        """The error for an action that is not an array of real numbers: the first odd entry
        of what was given (nested sequences, or an object array), by its field name, else
        the array's dtype."""
        if not isinstance(given, np.ndarray) or given.dtype.kind == "O":
            shape = (self.size,) if batch is None else (batch, self.size)
            odd = _first_odd(given, shape)
            if odd is not None:
                path, v, want = odd
                field = self._field(name, path, batch is not None)
                return TypeError(f"{field}: got {type(v).__name__} {_short(v)}, expected {want}")
        if a is None or a.dtype.kind == "O":
            what = "Python objects"
        else:
            what = f"{_KIND_NAMES.get(a.dtype.kind, 'values')} (dtype {a.dtype})"
        return TypeError(f"{name}: got an array of {what}, expected an int or float array")

    def check(self, actions: Any, batch: int | None = None, name: str = "action") -> NDArray:
        """``actions`` as an array, checked cheaply (its type, dtype and shape, no pass over
        the values): one action ``(size,)``, or a batch ``(batch, size)``. :meth:`decode`
        checks the values. What the environments call on what a user passes to ``step``.

        Raises:
            TypeError: not numbers: a string, None, a dict, a bool, complex or object array,
                a sequence where a number belongs... (naming the entry, e.g.
                ``action[promote]``);
            ValueError: a wrong shape.
        """
        shape = (self.size,) if batch is None else (batch, self.size)
        if isinstance(actions, np.ndarray):
            a: NDArray | None = actions
        elif actions is None or isinstance(actions, str | bytes | dict | set):
            raise TypeError(
                f"{name}: got {type(actions).__name__} {_short(actions)}, expected an array of "
                f"shape {shape} ({self.action_type} action{'s' if batch is not None else ''})"
            )
        else:
            try:
                a = np.asarray(actions)
            except (ValueError, TypeError):  # nested sequences of unequal lengths
                a = None
        if a is None or a.dtype.kind not in _NUMERIC_KINDS:
            raise self._type_error(actions, a, batch, name)
        if a.shape != shape:
            raise ValueError(f"{name}: got shape {a.shape}, expected {shape}")
        return a

    def _value_error(self, a: NDArray, bad: NDArray[np.bool_], want: str) -> ValueError:
        """The error naming the first entry of (B, size) ``a`` flagged in ``bad``."""
        b, i = (int(k) for k in np.argwhere(bad)[0])
        field = f"action[{self.entry_name(i)}]" + (f" of instance {b}" if a.shape[0] > 1 else "")
        return ValueError(f"{field}: got {_short(a[b, i])}, expected {want}")

    def space(self) -> spaces.Space:
        if self.action_type == "box":
            return spaces.Box(-1.0, 1.0, shape=(self.size,), dtype=np.float32)
        nvec = [len(WEIGHT_LEVELS)] * (self._n_base - 1) + [len(RATE_LEVELS_MBPS)]
        if self.modes:
            nvec.append(len(self.modes))
        return spaces.MultiDiscrete(np.array(nvec, dtype=np.int64))

    def decode_mode(self, actions: NDArray) -> NDArray[np.int64]:
        """(B,) the tiering mode each action picks (index in ``modes``; 0 without modes).

        Raises ValueError for a NaN or inf box entry or a discrete choice out of range.
        """
        a = np.asarray(actions)
        if not self.modes:
            return np.zeros(a.shape[0], dtype=np.int64)
        m = len(self.modes)
        last = a[:, -1]
        if self.action_type == "box":
            x = last.astype(float)
            finite = np.isfinite(x)
            if not finite.all():
                bad = np.zeros(a.shape, bool)
                bad[:, -1] = ~finite
                raise self._value_error(a, bad, "a number in [-1, 1] (not NaN or inf)")
            x = np.clip(x, -1.0, 1.0)
            return np.minimum(np.floor((x + 1.0) / 2.0 * m), m - 1).astype(np.int64)
        idx = last.astype(np.int64)
        if (idx < 0).any() or (idx >= m).any():
            bad = np.zeros(a.shape, bool)
            bad[:, -1] = (idx < 0) | (idx >= m)
            raise self._value_error(a, bad, f"0 <= a < {m} (tiering mode choices out of range)")
        return idx

    def mode_entry(self, mode: NDArray | int) -> NDArray[np.float32]:
        """Box entries (B,) that pick ``mode`` (the middle of its bin)."""
        m = max(len(self.modes), 1)
        return (-1.0 + (np.asarray(mode, dtype=float) + 0.5) * 2.0 / m).astype(np.float32)

    def decode(self, actions: NDArray) -> tuple[Action, NDArray[np.int64]]:
        """Policy actions (B, size) -> the model's action and the integer weights (B, T, N).

        Raises TypeError for an array of anything but real numbers, ValueError for a
        wrong shape, NaN or inf, and discrete choices that are out of range or not
        integers, each naming the first bad entry (``action[promote]``...); box entries
        outside [-1, 1] are clipped (documented behaviour of the Box).
        """
        a = np.asarray(actions)
        if a.dtype.kind not in _NUMERIC_KINDS:
            raise self._type_error(a, a, a.shape[0] if a.ndim == 2 else None, "action")
        if a.ndim != 2 or a.shape[1] != self.size:
            raise ValueError(
                f"action: got shape {a.shape[1:] if a.ndim == 2 else a.shape}, expected ({self.size},) per environment"
            )
        if self.action_type == "discrete" and a.dtype.kind == "f":  # whole numbers only
            whole = np.isfinite(a) & (a == np.trunc(a))
            if not whole.all():
                raise self._value_error(a, ~whole, "an integer choice (not NaN, inf or a fraction)")
            a = a.astype(np.int64)
        if self.modes:
            self.decode_mode(a)  # checks the mode entry
            a = a[:, :-1]
        if self.action_type == "box":
            bsz, rows = a.shape[0], self.n_weight_rows
            ew, w_off = (
                np.empty((bsz, rows, self.n_nodes)),
                np.empty((bsz, rows, self.n_nodes), bool),
            )
            er, r_off = np.empty(bsz), np.empty(bsz, bool)
            if a.dtype not in (np.float32, np.float64):  # the compiled pass reads these two
                a = a.astype(float)
            if not box_exponents(a, OFF, ew.reshape(bsz, -1), er, w_off.reshape(bsz, -1), r_off):
                raise self._value_error(
                    a, ~np.isfinite(a), "a number in [-1, 1] (not NaN or inf; others are clipped)"
                )
            w = np.empty(ew.shape, dtype=np.int64)
            box_levels(np.power(MAX_WEIGHT, ew), w_off, w)
            rate = np.power(self.max_promote_mbps, er)
            rate[r_off] = 0.0  # promotion off
        else:
            hi = np.array([len(WEIGHT_LEVELS)] * (self._n_base - 1) + [len(RATE_LEVELS_MBPS)])
            if (a < 0).any() or (a >= hi).any():
                bad = (a < 0) | (a >= hi)
                top = hi[np.argwhere(bad)[0, 1]]
                raise self._value_error(a, bad, f"0 <= a < {top} (choices out of range)")
            w = np.asarray(WEIGHT_LEVELS)[a[:, :-1]].reshape(-1, self.n_weight_rows, self.n_nodes)
            rate = np.asarray(RATE_LEVELS_MBPS)[a[:, -1]]
        w = gcd_reduce(w)
        if self.weights == "global":
            w = np.broadcast_to(w, (w.shape[0], self.n_tenants, self.n_nodes))
        # (the box's rate is a new float64 array already; the discrete one's a look-up)
        rate = rate if rate.dtype == np.float64 else rate.astype(float)
        return Action(weights=w.astype(float), promote_mbps=rate), np.asarray(w)

    @staticmethod
    def box_weights(entries: NDArray) -> NDArray[np.int64]:
        """Integer weights (not reduced) of box weight entries (any shape, clipped to [-1, 1])."""
        wa = np.clip(np.asarray(entries, dtype=float), -1.0, 1.0)
        out = np.empty(wa.shape, dtype=np.int64)
        box_levels(_log_scale(wa, MAX_WEIGHT), wa < OFF, out)
        return out

    def encode_box(
        self, weights: NDArray, promote_mbps: NDArray, mode: NDArray | int = 0
    ) -> NDArray[np.float32]:
        """Inverse of :meth:`decode` for box actions: integer weights (B, rows, N) and MB/s (B,).

        With tiering modes, ``mode`` (an index in ``modes``, default 0) fills the last entry.
        """
        w = np.asarray(weights, dtype=float)
        wa = np.where(
            w <= 0, -1.0, OFF + (1.0 - OFF) * np.log(np.maximum(w, 1.0)) / math.log(MAX_WEIGHT)
        )
        r = np.asarray(promote_mbps, dtype=float)
        ra = np.where(
            r <= 0,
            -1.0,
            OFF + (1.0 - OFF) * np.log(np.maximum(r, 1.0)) / math.log(self.max_promote_mbps),
        )
        parts = [wa.reshape(wa.shape[0], -1), ra[:, None]]
        if self.modes:
            parts.append(np.broadcast_to(self.mode_entry(mode), (wa.shape[0],))[:, None])
        return np.concatenate(parts, axis=1).astype(np.float32)


GIB_SCALE = math.log2(1.0 + 2048.0)  # log2(1 + GiB) over this: 0..2 TiB on [0, 1]
MBPS_SCALE = math.log1p(65536.0)  # log1p(MB/s) over this: migration and its limit on [0, 1]
#: Descriptors of a tenant slot in the ``"full"`` layout (known at admission).
#: A node's entries, then a tenant slot's entries before its weights (the observed interval).
NODE_ENTRIES = ("utilization", "latency_over_idle", "capacity_used")
TENANT_ENTRIES = (
    "present",
    "norm_perf",
    "dram_access_share",
    "dram_resident_share",
    "bandwidth_demand",
    "read_fraction",
)
TENANT_DESCRIPTORS = (
    "upcoming",
    "threads",
    "working_set_gib",
    "working_set_over_dram",
    "spec_read_fraction",
    "hot_access_share",
    "socket",
    "solo_demand",
)
#: Descriptors the ``"cgroup"`` layout adds after TENANT_DESCRIPTORS: memory.low and
#: memory.high in force over the working set (capped at 1; no memory.high reads 1), part of
#: a container's spec at admission like the others. "In force" as the scenario's kernel
#: applies them (:func:`envs.model.memcg_limits`): the tier-aware mode scales both to the
#: DRAM share of the machine; memory.high is the lower of the DRAM cap and the total one.
CGROUP_DESCRIPTORS = ("memory_low_over_ws", "memory_high_over_ws")
#: The descriptor the ``"demand"`` layout adds after CGROUP_DESCRIPTORS: the tenant's
#: zero-load demand with its pages in its local DRAM (Little's law: bytes in flight over
#: compute time plus the node's idle latency; ``bandwidth_demand`` shows the same quantity
#: once the tenant runs, at its placement and over the machine's peak) over that node's
#: peak at its read share (random access at the random peaks), shown as
#: ``log2(1 + x) / 4`` capped at 1 (0 to 15 times the peak). ``solo_demand`` saturates
#: where local DRAM does; this one tells a stream at DRAM's peak from one at four times
#: it, the case where spreading pages over the expanders pays.
DEMAND_DESCRIPTORS = ("demand_over_local_peak",)
#: The descriptor the ``"topology"`` layout adds after DEMAND_DESCRIPTORS: the DRAM share of
#: the kernel's weighted-interleave auto weights (firmware bandwidth, HMAT/CDAT) over the
#: tenant's nearest DRAM and CXL nodes (those its fallback list reaches first, on their
#: sockets: :func:`envs.kernel.near_nodes`), 1 where no CXL node is near. It is the DRAM
#: share at which a stream's pages load its near nodes in proportion to their bandwidth
#: (what ``bw-aware-interleave`` sets), and what tells a machine with one expander beside a
#: socket's DRAM from one with four: the capacities the observation shows do not.
TOPOLOGY_DESCRIPTORS = ("near_auto_dram_share",)
#: The layouts with tenant descriptors, in order: each adds one descriptor group to the one
#: before it (CGROUP_DESCRIPTORS, DEMAND_DESCRIPTORS, TOPOLOGY_DESCRIPTORS).
_DESCRIBED = ("full", "cgroup", "demand", "topology")
#: Global entries added by the ``"full"`` layout (before the three basic ones).
GLOBAL_EXTRA = ("dram_capacity_gib", "cxl_capacity_gib", "promote_limit", "interval")


class ObservationEncoder:
    """What a kernel can observe, normalised to [0, 1]; the table is in the environment's docstring.

    Layout (``N`` nodes, ``T`` tenant slots):

    - per node ``n``: utilisation; loaded latency over idle ``min((L/L0 - 1)/4, 1)``;
      capacity used (fraction);
    - per tenant slot ``t``: present (the mask of empty slots); normalised
      performance ``min(perf/2, 1)``; DRAM access share; DRAM-resident share of
      its pages; bandwidth demand over the machine's peak; read fraction;
      interleave weights in force (fractions, ``N`` entries); every entry of an
      empty slot is 0; with ``version="full"`` (the default) then the tenant's
      descriptors, what a scheduler knows of a container at admission, shown
      from the step BEFORE it starts (so its initial placement is an informed
      choice) and 0 once it has stopped: ``upcoming`` (1: runs in the next
      interval), threads ``log2(1+n)/8``, working set ``log2(1+GiB)/log2(2049)``
      and over the machine's DRAM (capped at 1), read fraction, share of its
      accesses to its hottest 2% of pages, socket (0/1), and its bandwidth
      demand alone in local DRAM over the machine's peak;
    - global: with ``"full"`` first DRAM and CXL capacity
      ``log2(1+GiB)/log2(2049)``, the promotion limit in force
      ``log1p(MB/s)/log1p(65536)`` and the interval ``s/10``; then promotion and
      demotion traffic ``log1p(MB/s)/log1p(65536)`` and the time in the episode
      ``t / episode_steps`` (always the last three entries).

    ``version="basic"`` is the layout without the descriptors and the extra
    globals, that of models trained before them. ``version="cgroup"`` is
    ``"full"`` with two more descriptors per tenant (:data:`CGROUP_DESCRIPTORS`):
    its memory.low and memory.high in force over its working set. ``version="demand"`` is
    ``"cgroup"`` with one more (:data:`DEMAND_DESCRIPTORS`): its zero-load demand in local
    DRAM over that node's peak, ``log2(1 + x) / 4`` capped at 1. ``version="topology"`` is
    ``"demand"`` with one more (:data:`TOPOLOGY_DESCRIPTORS`): the DRAM share of
    bandwidth-proportional interleave over its nearest DRAM and CXL nodes (0..1).

    ``version="host"`` is made only of what a Linux host exposes, with the definitions
    :func:`envs.host.host_features` gives both the simulator and ``deploy.py``'s reader
    (:func:`envs.host.host_view`): per node used over capacity (``MemTotal - MemFree``)
    and the capacity ``log2(1+GiB)/log2(2049)``; per tenant slot present (it holds
    memory), its resident GiB on DRAM and on CXL nodes ``log2(1+GiB)/log2(2049)``
    (``memory.numa_stat``); global promotion, promotion candidates and demotion
    ``log1p(MB/s)/log1p(65536)`` (``pgpromote_success``, ``pgpromote_candidate``,
    ``pgdemote_*``). Nothing a host cannot measure (tenant performance, per node
    latency and utilisation, tenant descriptors, the episode's time); no memory
    pressure either, which the model does not compute. Just after a reset every entry
    but the capacities is 0.
    """

    def __init__(self, n_tenants: int, n_nodes: int, version: str = "full") -> None:
        if version not in OBSERVATIONS:
            raise ValueError(f"observation: got {version!r}, expected one of {list(OBSERVATIONS)}")
        self.T, self.N, self.version = n_tenants, n_nodes, version
        # the descriptor groups added to TENANT_DESCRIPTORS (core.spec_table computes these):
        # each layout of _DESCRIBED adds one group to the layout before it
        rank = _DESCRIBED.index(version) if version in _DESCRIBED else -1
        self.cgroup, self.demand, self.topology = rank >= 1, rank >= 2, rank >= 3
        if version == "host":
            self.desc_names: tuple[str, ...] = ()
            self.n_desc, self.n_glob = 0, 3
            self.per_tenant = 3
            self.size = host_view_size(n_tenants, n_nodes)
            return
        groups = (CGROUP_DESCRIPTORS, DEMAND_DESCRIPTORS, TOPOLOGY_DESCRIPTORS)
        full = rank >= 0
        self.desc_names = (
            (*TENANT_DESCRIPTORS, *(d for g in groups[:rank] for d in g)) if full else ()
        )
        self.n_desc = len(self.desc_names)
        self.n_glob = 3 + (len(GLOBAL_EXTRA) if full else 0)
        self.per_tenant = len(TENANT_ENTRIES) + n_nodes + self.n_desc
        self.size = 3 * n_nodes + n_tenants * self.per_tenant + self.n_glob

    def space(self) -> spaces.Box:
        return spaces.Box(0.0, 1.0, shape=(self.size,), dtype=np.float32)

    def names(self, node_names: list[str]) -> list[str]:
        """A name for every entry, in order (used by the docs and TensorBoard)."""
        if self.version == "host":
            return host_view_names(node_names, self.T)
        out = []
        for n in node_names:
            out += [f"node[{n}].{k}" for k in NODE_ENTRIES]
        for t in range(self.T):
            out += [f"tenant[{t}].{k}" for k in TENANT_ENTRIES]
            out += [f"tenant[{t}].weight[{n}]" for n in node_names]
            if self.n_desc:
                out += [f"tenant[{t}].{k}" for k in self.desc_names]
        out += list(GLOBAL_EXTRA) if self.n_desc else []
        return [*out, "promotion_traffic", "demotion_traffic", "episode_time"]

    def encode(
        self,
        out: Outputs | None,
        idle_ns: F64,
        capacity_gib: F64,
        peak_gbps: F64,
        weights: F64,
        t: NDArray[np.int64],
        steps: NDArray[np.int64],
        present: NDArray[np.bool_],
        read_fraction: F64,
        descriptors: F64 | None = None,
        extra: F64 | None = None,
    ) -> NDArray[np.float32]:
        """Observation (B, size) after an interval (``out``), batch-first arguments.

        Rows with ``t == 0`` (just reset; ``out`` None means every row) only know
        the tenants present at the start (``present``, (B, T)), their
        ``read_fraction`` and the ``weights`` in force, and the time. With the
        ``"full"`` layout ``descriptors`` (B, T, len(TENANT_DESCRIPTORS)) and
        ``extra`` (B, len(GLOBAL_EXTRA)) are given already normalised.
        """
        bsz = t.shape[0]
        if self.version == "host":
            return self._encode_host(out, capacity_gib, bsz)
        if self.n_desc and (descriptors is None or extra is None):
            raise ValueError(f"the {self.version!r} observation needs descriptors and extra")
        if not self.n_desc:
            descriptors, extra = np.zeros((bsz, self.T, 0)), np.zeros((bsz, 0))
        obs = np.empty((bsz, self.size), dtype=np.float32)
        if out is not None:
            fill_observation(
                obs, True, out.node_utilization, out.node_latency_ns, idle_ns,
                out.node_capacity_used_gib, capacity_gib, out.tenant_active,
                out.tenant_norm_perf, out.tenant_dram_access_share,
                out.tenant_dram_resident_gib, out.tenant_resident_gib, out.tenant_demand_gbps,
                peak_gbps, out.tenant_read_fraction, np.log1p(out.promotion_mbps),
                np.log1p(out.demotion_mbps), MBPS_SCALE, weights, t, steps, present,
                read_fraction, descriptors, extra,
            )  # fmt: skip
        else:
            node, tenant, zero = np.zeros((bsz, self.N)), np.zeros((bsz, self.T)), np.zeros(bsz)
            fill_observation(
                obs, False, node, node, node, node, node, tenant.astype(bool), tenant, tenant,
                tenant, tenant, tenant, zero, tenant, zero, zero, MBPS_SCALE, weights, t, steps,
                present, read_fraction, descriptors, extra,
            )  # fmt: skip
        return obs

    def _encode_host(self, out: Outputs | None, capacity_gib: F64, bsz: int) -> NDArray[np.float32]:
        """The ``"host"`` layout (B, size) of an interval's outputs (``None``: just reset)."""
        cap = np.broadcast_to(np.asarray(capacity_gib, dtype=float), (bsz, self.N))
        if out is None:
            zt, zb = np.zeros((bsz, self.T)), np.zeros(bsz)
            return host_features(np.zeros((bsz, self.N)), cap, zt, zt, zb, zb, zb)
        fast = out.tenant_dram_resident_gib
        return host_features(
            out.node_capacity_used_gib,
            cap,
            fast,
            out.tenant_resident_gib - fast,
            out.promotion_mbps,
            out.promotion_candidates_mbps,
            out.demotion_mbps,
        )


def reward_terms(out: Outputs, peak_gbps: F64) -> dict[str, F64]:
    """Every reward choice for a batch (B,), from the interval's outputs.

    - ``log-geomean`` (default): ``mean_t log(perf_t)`` over active tenants, the
      log of the geometric mean of normalised performance (0 with no tenant);
    - ``throughput``: total throughput over the machine's peak bandwidth;
    - ``weighted-speedup``: ``sum_t perf_t`` over active tenants;
    - ``harmonic``: ``n / sum_t 1/perf_t``, the harmonic mean (fairness).
    """
    act = out.tenant_active
    perf = np.empty(act.shape)
    reward_perf(act, out.tenant_norm_perf, perf)
    B = act.shape[0]
    lg, tp, ws, hm = np.empty(B), np.empty(B), np.empty(B), np.empty(B)
    peak = np.asarray(peak_gbps, dtype=float)
    if peak.shape != (B,):  # a scalar: an array of its own (a broadcast view would compile again)
        peak = np.full(B, peak)
    reward_sums(act, perf, np.log(perf), out.total_throughput_gbps, peak, lg, tp, ws, hm)
    return {"log-geomean": lg, "throughput": tp, "weighted-speedup": ws, "harmonic": hm}
