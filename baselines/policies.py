"""Kernel-style heuristic baselines behind one policy protocol, and their registry.

Every baseline answers stable-baselines3's ``predict`` on a batch::

    policy.predict(observation, state=None, episode_start=None, deterministic=True)
        -> (action, state)          # (B, obs_dim) -> (B, act_dim) box actions

so trained agents and heuristics go through the same evaluation code
(:mod:`agents.rollout`). A heuristic also has

- ``kernel``: the :class:`~envs.model.KernelConfig` its system sets (demotion,
  TPP's watermark, active-only promotion, threshold adaptation, the memcg
  throttle); the evaluation environment is built with it;
- ``bind(env)``: attach it to an environment (``TieredMemoryEnv``,
  ``TieredMemoryVecEnv``, the SB3 adapter or an ``Engine``): it reads the
  action codec, the node layout (``is_cxl``, bandwidths, capacities: what
  firmware tables and ``/proc`` give a kernel) and the tenant slots there;
- ``observe(info)``: called by the rollout loop after every step with the
  batched ``info`` dict; each class says which keys it reads.

``episode_start`` (B,) resets the controller state of the instances that start
a new episode (``None`` keeps it). Build one by name with :func:`make_policy`;
:func:`policy_names` lists the names (the catalogue's, :mod:`baselines.catalogue`). The mapping of each system onto the
environment's actions and kernel switches is tabled in ``baselines/README.md``.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from baselines import catalogue
from baselines.algorithms import (
    MTIER_DEMOTE_FREE_BP,
    MTIER_PROMOTE_USED_BP,
    MTIER_QUOTA_BYTES,
    Caption,
    Colloid,
    DamonQuotaTuner,
    auto_interleave_weights,
    colloid_migration_bytes,
    node_mem_bp,
)
from baselines.placement import share_to_weights, tenant_orders
from envs.core import EnvParams, Hardware
from envs.model import KernelConfig
from envs.spaces import TIERING_MODES

__all__ = [
    "STATIC_KERNEL",
    "STATIC_RATIOS",
    "TPP",
    "TPP_KERNEL",
    "BandwidthAwareInterleave",
    "CaptionPolicy",
    "ColloidPolicy",
    "DamonTiering",
    "HeuristicPolicy",
    "Interleave",
    "LocalFirst",
    "MemcgFair",
    "NumaTiering",
    "RandomPolicy",
    "StaticWeights",
    "WeightedInterleave",
    "make_policy",
    "policy_names",
]

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]
GIB = float(1 << 30)

#: Kernel of the static policies (and Caption, random): the environment's default
#: ``KernelConfig()``, the one agents train in (demotion on, NUMA-balancing threshold
#: adaptation on), so that a static policy is a fixed action in the agents' environment and
#: ``static-best`` can search the whole static family in one batched run. With a rate > 0 a
#: static policy is NUMA-balancing tiering at that limit. At rate 0 kswapd still demotes cold
#: DRAM pages once DRAM is down to its LOW watermark (``demotion_enabled=1``); Linux's
#: default is 0 (``LocalFirst(demotion=False)`` etc.); for ``dram-first`` on the shipped
#: scenarios the two differ by at most 0.0022 in geomean performance (kv-store, 0.3%).
STATIC_KERNEL = KernelConfig()
#: TPP (ASPLOS'23): proactive demotion to a watermark at 2% of the node
#: (``demote_scale_factor`` 200/10000), promotion of active-LRU pages only, no rate-limit
#: threshold adaptation (TPP predates it).
TPP_KERNEL = KernelConfig(**TIERING_MODES["tpp"])  # type: ignore[arg-type]
#: Kernel default ``numa_balancing_promote_rate_limit_MBps``.
KERNEL_RATE_MBPS = 65536.0
#: DRAM:CXL per-node weight ratios of the static family's searches (``static-best``'s
#: grid, the planner's seed candidates): DRAM only, CXL only, and interleave ratios from
#: 1:4 to 32:1.
STATIC_RATIOS: tuple[tuple[int, int], ...] = (
    (1, 0),
    (0, 1),
    (1, 1),
    (3, 2),
    (2, 1),
    (3, 1),
    (4, 1),
    (6, 1),
    (8, 1),
    (12, 1),
    (16, 1),
    (32, 1),
    (2, 3),
    (1, 2),
    (1, 4),
)


def _env_params(env: Any, num_envs: int | None) -> tuple[EnvParams, int]:
    """``(params, num_envs)`` from an :class:`EnvParams` or a TierGym environment."""
    if isinstance(env, EnvParams):
        if num_envs is None:
            raise TypeError("bind(params, num_envs): give the batch size with the parameters")
        return env, int(num_envs)
    params = getattr(env, "params", None)
    if not isinstance(params, EnvParams):
        params = getattr(getattr(env, "unwrapped", None), "params", None)
    if not isinstance(params, EnvParams):
        raise TypeError(
            f"bind: expected EnvParams or a TierGym environment (TieredMemoryEnv, "
            f"TieredMemoryVecEnv, TierGymVecEnv), got {type(env).__name__}"
        )
    return params, int(num_envs if num_envs is not None else getattr(env, "num_envs", 1))


class HeuristicPolicy:
    """Base of the heuristics: binding, batching, episode resets and action encoding.

    A subclass sets ``name`` and ``kernel`` and implements ``_decide`` (weights
    ``(B, R, N)`` integers, ``R`` the codec's weight rows, and the promotion
    rate limit ``(B,)`` MB/s), and if it keeps state ``_reset(mask)`` and
    ``_observe(metrics)``. All state is arrays with the batch axis first; no
    method loops over instances. The machine is read from the
    :class:`~envs.core.Hardware` view handed to :meth:`observe`.
    """

    name: str = "heuristic"
    kernel: KernelConfig = STATIC_KERNEL
    #: the tiering modes its actions pick (the planner's; None: its kernel's mode alone)
    tiering_modes: tuple[str, ...] | None = None

    def __init__(self) -> None:
        self.params: EnvParams | None = None
        self.hw: Hardware | None = None
        self._B = 0

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"

    # ----------------------------------------------------------------- binding
    def bind(self, env: Any, num_envs: int | None = None) -> HeuristicPolicy:
        """Attach to an environment's parameters and batch size, and reset all state.

        ``env`` is an :class:`~envs.core.EnvParams` (then give ``num_envs``) or a
        TierGym environment (its ``params`` and ``num_envs``).
        """
        params, n = _env_params(env, num_envs)
        if params.codec.action_type != "box":
            raise ValueError(
                f"{self.name}: heuristics emit box actions; build the environment with "
                f"action_type='box' (got {params.codec.action_type!r})"
            )
        self.params = params
        self._B = n
        self.hw = None
        self._bound()
        self._reset(np.ones(self._B, dtype=bool))
        return self

    def _bound(self) -> None:
        """Hook: the policy was bound to ``self.params``."""

    def _p(self) -> EnvParams:
        if self.params is None:
            raise RuntimeError(
                f"{self.name}: not bound to an environment; call bind(env) or make_policy(name, env)"
            )
        return self.params

    def _hw(self) -> Hardware:
        if self.hw is None:
            raise RuntimeError(
                f"{self.name}: no hardware view yet; call observe(None, env.hardware()) after reset"
            )
        return self.hw

    # --------------------------------------------------------- hardware views
    @property
    def n_rows(self) -> int:
        """Weight rows of the action: tenant slots, or 1 with global weights."""
        return self._p().codec.n_weight_rows

    @property
    def n_nodes(self) -> int:
        return self._p().n_nodes

    def is_cxl(self) -> NDArray[np.bool_]:
        """(B, N) whether each node is a CXL node."""
        return self._hw().is_cxl

    def node_bandwidth_gbps(self) -> F64:
        """(B, N) a node's firmware bandwidth: ``min(read, write)`` peak incl. the CXL link.

        What HMAT/CDAT report and what the kernel's weighted-interleave auto mode
        reads (``mempolicy_set_node_perf``).
        """
        return self._hw().firmware_gbps

    def capacity_gib(self) -> F64:
        """(B, N) node capacities."""
        return self._hw().capacity_gib

    def _rows(self, w: NDArray) -> I64:
        """Per-node weights (B, N) or (N,) -> the same for every weight row (B, R, N)."""
        w = np.asarray(w, dtype=np.int64)
        n = self.n_nodes
        return np.broadcast_to(w.reshape(-1, 1, n), (self._B, self.n_rows, n)).copy()

    # ----------------------------------------------------------------- protocol
    def predict(
        self,
        observation: NDArray,
        state: Any = None,
        episode_start: NDArray | None = None,
        deterministic: bool = True,
    ) -> tuple[NDArray[np.float32], Any]:
        """Box actions for a batch of observations (or one observation of a single env)."""
        params = self._p()
        obs = np.asarray(observation)
        single = obs.ndim == 1
        obs2 = obs[None] if single else obs
        if obs2.shape[0] != self._B:
            raise ValueError(
                f"{self.name}: got {obs2.shape[0]} observations, the policy is bound to an "
                f"environment of {self._B} instances; bind it to this environment first"
            )
        if episode_start is not None:
            start = np.asarray(episode_start, dtype=bool).reshape(self._B)
            if start.any():
                self._reset(start)
        w, rate = self._decide(obs2)
        act = params.codec.encode_box(
            w, np.broadcast_to(np.asarray(rate, dtype=float), (self._B,)), self._tiering_mode()
        )
        return (act[0] if single else act), state

    def observe(self, metrics: Mapping[str, Any] | None, hardware: Hardware) -> None:
        """Read the machine and, after a step, the step's metrics, as a kernel reads counters.

        ``metrics`` is the step's :class:`~envs.core.Metrics` (or a Gymnasium info
        dict; a single env's unbatched info is batched here), ``None`` right after
        a reset; ``hardware`` is the environment's :class:`~envs.core.Hardware`
        view of the episodes now running (``env.hardware()``).
        """
        self.hw = hardware
        if metrics is None:
            return
        if np.ndim(metrics["tenant_active"]) == 1:  # a single env's info
            metrics = {k: np.asarray(v)[None] for k, v in metrics.items()}
        self._observe(metrics)

    # ----------------------------------------------------------------- to override
    def _reset(self, mask: NDArray[np.bool_]) -> None:
        """Reset the controller state of instances ``mask`` (B,)."""

    def _observe(self, info: Mapping[str, Any]) -> None:
        """Update the controller from the step's batched metrics."""

    def _decide(self, obs: NDArray) -> tuple[I64, F64]:
        raise NotImplementedError

    def _tiering_mode(self) -> NDArray[np.int64] | int:
        """The tiering mode (index in the codec's ``modes``, (B,) or one for all) of the
        action :meth:`_decide` just gave; used only when the environment has tiering modes.
        0 here (the first listed); the ``planner`` picks its plan's."""
        return 0


# =============================================================================== static family


class _Static(HeuristicPolicy):
    """A fixed action; ``demotion=False`` gives Linux's default ``demotion_enabled=0``."""

    def __init__(self, demotion: bool = True) -> None:
        super().__init__()
        if not demotion:
            self.kernel = dataclasses.replace(STATIC_KERNEL, demotion=False)


class LocalFirst(_Static):
    """``dram-first``: Linux's default allocation (``MPOL_LOCAL``), no promotion.

    Source: ``mm/page_alloc.c`` (zonelist fallback, ``find_next_best_node``): a
    page goes to the first node of the local fallback list whose free memory is
    above its LOW watermark; when DRAM is short new pages spill to CXL and never
    move back. Action: every weight 0 (the model's local-first allocation with
    its fallback order and watermarks), promotion rate 0. Kernel:
    :data:`STATIC_KERNEL`. Reads no info.

    Args:
        demotion: kswapd demotes cold DRAM pages to CXL (True, the environment's default;
            False: Linux's default ``demotion_enabled=0``).
    """

    name = "dram-first"

    def _decide(self, obs: NDArray) -> tuple[I64, F64]:
        return self._rows(np.zeros(self.n_nodes)), np.zeros(self._B)


class Interleave(_Static):
    """``interleave``: ``MPOL_INTERLEAVE`` over every node, one page per node per round.

    Source: ``mm/mempolicy.c`` (interleave). Static; ignores bandwidth and
    latency. Action: weight 1 on every node for every tenant, promotion rate 0.
    Kernel: :data:`STATIC_KERNEL`. Reads no info.

    Args:
        demotion: as for :class:`LocalFirst` (True).
    """

    name = "interleave"

    def _decide(self, obs: NDArray) -> tuple[I64, F64]:
        return self._rows(np.ones(self.n_nodes)), np.zeros(self._B)


class WeightedInterleave(_Static):
    """``weighted-interleave``: ``MPOL_WEIGHTED_INTERLEAVE`` with the kernel's auto weights.

    Source: ``mm/mempolicy.c`` (Linux 6.16, ``weighted_interleave/auto``): node
    ``n`` gets ``floor(weightiness * bw[n] / sum(bw))`` pages per round (at
    least 1), reduced by the gcd, with ``bw[n] = min(read, write)`` bandwidth
    from HMAT/CDAT (:meth:`HeuristicPolicy.node_bandwidth_gbps`: the node's
    calibrated read and write peaks, the CXL link included). E.g. spr-a1000:
    17:14; spr-4cxl: 23:2:2:2:2. Static: nominal bandwidth, not load. Action:
    those weights for every tenant, promotion rate 0. Kernel:
    :data:`STATIC_KERNEL`. Reads no info.

    Args:
        weightiness: scale of the weights (kernel constant 32).
        demotion: as for :class:`LocalFirst` (True).
    """

    name = "weighted-interleave"

    def __init__(self, weightiness: int = 32, demotion: bool = True) -> None:
        super().__init__(demotion)
        self.weightiness = int(weightiness)

    def weights(self) -> I64:
        """(B, N) the auto weights of each instance's machine."""
        return auto_interleave_weights(self.node_bandwidth_gbps(), self.weightiness)

    def _decide(self, obs: NDArray) -> tuple[I64, F64]:
        return self._rows(self.weights()), np.zeros(self._B)


class StaticWeights(_Static):
    """``static:W1:W2[:...][@RATE]``: fixed integer weights per node and a fixed promotion rate.

    The N:M interleave experiments of the CXL papers (e.g. EuroSys'24, Caption):
    node ``n`` (in the scenario's node order) gets weight ``W_n`` (0..255; 0 =
    outside the interleave mask; all 0 = local-first) for every tenant, and the
    promotion rate limit is ``RATE`` MB/s (default 0: promotion off; > 0:
    NUMA-balancing tiering at that limit). Kernel: :data:`STATIC_KERNEL`. Reads
    no info.

    Args:
        weights: one integer per node.
        rate_mbps: promotion rate limit, MB/s (default 0).
        demotion: as for :class:`LocalFirst` (True).
    """

    def __init__(
        self, weights: Sequence[int], rate_mbps: float = 0.0, demotion: bool = True
    ) -> None:
        super().__init__(demotion)
        w = np.asarray(list(weights), dtype=float)
        if (
            w.ndim != 1
            or w.size == 0
            or (w < 0).any()
            or (w > 255).any()
            or (w != np.rint(w)).any()
        ):
            raise ValueError(f"static weights: got {list(weights)}, expected integers 0..255")
        if not (math.isfinite(rate_mbps) and rate_mbps >= 0):
            raise ValueError(f"static rate: got {rate_mbps}, expected a number >= 0 (MB/s)")
        self.weights = w.astype(np.int64)
        self.rate_mbps = float(rate_mbps)
        rate = f"@{self.rate_mbps:g}" if self.rate_mbps else ""
        self.name = "static:" + ":".join(str(int(x)) for x in self.weights) + rate

    def _bound(self) -> None:
        params = self._p()
        if self.weights.size != params.n_nodes:
            raise ValueError(
                f"{self.name}: {self.weights.size} weights for a machine of {params.n_nodes} "
                f"nodes {params.node_names}"
            )

    def _decide(self, obs: NDArray) -> tuple[I64, F64]:
        return self._rows(self.weights), np.full(self._B, self.rate_mbps)


# =============================================================================== kernel tiering


class NumaTiering(HeuristicPolicy):
    """``numa-tiering``: NUMA balancing in memory-tiering mode (``kernel.numa_balancing=2``).

    Source: ``kernel/sched/fair.c`` (``should_numa_migrate_memory``,
    ``numa_promotion_adjust_threshold``), ``mm/vmscan.c`` (demotion). Allocation
    local-first; hot CXL pages (hint fault within the hot threshold) are
    promoted up to the rate limit; the threshold adapts every 60 s so that
    candidates track the limit; kswapd demotes cold DRAM pages to CXL. Action:
    weights 0 (local-first), rate ``rate_mbps``. Kernel: :data:`STATIC_KERNEL`
    (demotion on, threshold adaptation on, the model's scanner and its
    plentiful-free rule). Reads no info (the mechanism runs in the model).

    Args:
        rate_mbps: ``numa_balancing_promote_rate_limit_MBps`` (kernel default 65536).
    """

    name = "numa-tiering"

    def __init__(self, rate_mbps: float = KERNEL_RATE_MBPS) -> None:
        super().__init__()
        self.rate_mbps = float(rate_mbps)

    def _decide(self, obs: NDArray) -> tuple[I64, F64]:
        return self._rows(np.zeros(self.n_nodes)), np.full(self._B, self.rate_mbps)


class TPP(NumaTiering):
    """``tpp``: Transparent Page Placement (Maruf et al., ASPLOS'23; Linux 5.18 patch set).

    Proactive demotion keeps DRAM headroom: kswapd wakes below a demotion
    watermark ``max(demote_scale_factor/10000 * node, 2 * HIGH)`` (2% of the
    node) and demotes cold pages up to it; promotion only of pages on the
    active LRU (a page must fault twice), which avoids ping-pong; allocation
    stays local-first. Action: weights 0, rate ``rate_mbps``. Kernel:
    ``KernelConfig(demote_watermark_frac=demote_scale_factor/10000,
    promote_active_only=True, threshold_adapt=False)``. Reads no info.

    Args:
        rate_mbps: promotion rate limit (default 65536 MB/s: TPP has no limit).
        demote_scale_factor: demotion watermark in 1/10000 of the node (200).
    """

    name = "tpp"
    kernel = TPP_KERNEL

    def __init__(
        self, rate_mbps: float = KERNEL_RATE_MBPS, demote_scale_factor: float = 200.0
    ) -> None:
        super().__init__(rate_mbps)
        self.kernel = dataclasses.replace(
            TPP_KERNEL, demote_watermark_frac=demote_scale_factor / 10000.0
        )


class MemcgFair(NumaTiering):
    """``memcg-fair``: per-cgroup tiering fairness (K. Zhao, linux-mm RFC, Sept 2024).

    ``memory.low`` protects a cgroup's DRAM: DRAM reclaim (demotion) skips a
    cgroup at or under its protection and scans ``size - size * low / (usage + 1)``
    otherwise; promotion of a cgroup over its protection is throttled while
    DRAM is under pressure, ``scan * max((L / (U + 1))**4, 1/16)``;
    ``memory.high`` caps its DRAM. The protections are the scenario's
    ``memory_low_gib`` / ``memory_high_gib`` (taken as the DRAM share,
    ``locallow``); the model's reclaim always honours them, and the promotion
    throttle is the kernel switch set here. On top of NUMA-balancing tiering:
    action weights 0, rate ``rate_mbps``. Kernel:
    ``KernelConfig(promotion_throttle=True, memcg_limits="dram")`` (the limits
    act on DRAM usage as given, as before Linux's total-usage meaning became
    the default; a scenario's ``kernel.memcg_limits`` overrides it). Reads no info.

    Args:
        rate_mbps: promotion rate limit (kernel default 65536 MB/s).
    """

    name = "memcg-fair"
    kernel = KernelConfig(**TIERING_MODES["memcg-fair"])  # type: ignore[arg-type]


# =============================================================================== published controllers


def _weighted_mean(values: F64, weights: F64, select: NDArray[np.bool_]) -> F64:
    """(B,) mean of ``values`` over the selected nodes, weighted (equal weights if all 0)."""
    w = np.where(select, weights, 0.0)
    tot = w.sum(axis=1)
    w = np.where((tot > 0)[:, None], w, select.astype(float))
    tot = w.sum(axis=1)
    return np.where(tot > 0, (w * values).sum(axis=1) / np.maximum(tot, 1e-300), np.nan)


class ColloidPolicy(HeuristicPolicy):
    """``colloid``: balance the loaded latency of the tiers (Vuppalapati & Agarwal, SOSP'24).

    Source: the Colloid artifact (``host-architecture/colloid``) through
    :class:`baselines.algorithms.Colloid`: with per-tier loaded latencies,
    keep the share ``p`` of accesses served by DRAM in ``p_lo..p_hi`` by
    bisection (hold when ``|L_dram - L_cxl| <= delta * L_dram``; DRAM faster:
    raise ``p_lo``; DRAM slower: lower ``p_hi``; reset the far bound below
    ``epsilon``); move pages carrying ``|target - p|`` of the accesses per
    500 ms quantum. Colloid's TPP integration: kernel :data:`TPP_KERNEL`.

    Mapping onto the environment (one controller per weight row: per tenant,
    or one for the machine with global weights, where ``p`` is the
    throughput-weighted DRAM share):

    - ``L_dram``/``L_cxl``: ``info["node_latency_ns"]`` of the DRAM / CXL nodes,
      bandwidth-weighted over each tier (``node_bandwidth_gbps``);
      ``ewma_alpha=1``: an env step (>= 1 s) is already a long-window mean, where
      the artifact smooths 10 ms samples with 1/16;
    - ``p``: ``info["tenant_dram_access_share"]``;
    - promotion (target > p): the rate limit is the sum of the quanta,
      ``colloid_migration_bytes(move, X) / quantum`` in MB/s with ``X`` the row's
      throughput (``tenant_throughput_gbps``); otherwise the rate is 0;
    - demotion of hot pages (target < p) is not an action: new and churned
      pages follow weights that send ``target`` of them to DRAM
      (:func:`share_to_weights`, CXL share split by bandwidth), which moves the
      access share toward the target as pages turn over.

    Before the first measurement, and for tenants not running, weights are 0
    (local-first). Reads info: ``node_latency_ns``, ``node_bandwidth_gbps``,
    ``tenant_active``, ``tenant_dram_access_share``, ``tenant_throughput_gbps``.

    Args:
        delta: hold band relative to ``L_dram`` (0.05).
        epsilon: bracket width at which the far bound resets (0.01).
        ewma_alpha: weight of a new latency sample (1.0; the artifact's 1/16 is for 10 ms).
        quantum_s: migration quantum (0.5 s).
        weight_scale: resolution of the share-to-weights mapping (100).
    """

    name = "colloid"
    kernel = TPP_KERNEL

    def __init__(
        self,
        delta: float = 0.05,
        epsilon: float = 0.01,
        ewma_alpha: float = 1.0,
        quantum_s: float = 0.5,
        weight_scale: int = 100,
    ) -> None:
        super().__init__()
        self.delta, self.epsilon, self.ewma_alpha = float(delta), float(epsilon), float(ewma_alpha)
        self.quantum_s = float(quantum_s)
        self.weight_scale = int(weight_scale)
        self.ctl: Colloid | None = None

    _FIELDS = ("p_lo", "p_hi", "target", "l_dram_ns", "l_cxl_ns")

    def _fresh(self) -> Colloid:
        return Colloid((self._B, self.n_rows), self.delta, self.epsilon, self.ewma_alpha)

    def _reset(self, mask: NDArray[np.bool_]) -> None:
        if self.ctl is None or self.ctl.shape != (self._B, self.n_rows):
            self.ctl = self._fresh()
            self.share = np.full((self._B, self.n_rows), np.nan)
            self.rate = np.zeros(self._B)
            self.was_active = np.zeros((self._B, self.n_rows), dtype=bool)
            return
        self._reset_rows(np.broadcast_to(mask[:, None], self.share.shape))
        self.share[mask] = np.nan
        self.rate[mask] = 0.0
        self.was_active[mask] = False

    def _reset_rows(self, rows: NDArray[np.bool_]) -> None:
        assert self.ctl is not None
        if not np.count_nonzero(rows):  # no controller restarts (most steps)
            return
        new = self._fresh()
        for f in self._FIELDS:
            setattr(self.ctl, f, np.where(rows, getattr(new, f), getattr(self.ctl, f)))

    def _observe(self, info: Mapping[str, Any]) -> None:
        assert self.ctl is not None
        cxl = self.is_cxl()
        lat, bw = info["node_latency_ns"], info["node_bandwidth_gbps"]
        l_dram = _weighted_mean(lat, bw, ~cxl)
        l_cxl = _weighted_mean(lat, bw, cxl)
        active = info["tenant_active"]
        x = info["tenant_throughput_gbps"]
        share = info["tenant_dram_access_share"]
        if self.n_rows == 1:
            xs = np.where(active, x, 0.0).sum(axis=1, keepdims=True)
            p = (np.where(active, x * share, 0.0).sum(axis=1, keepdims=True)) / np.maximum(
                xs, 1e-300
            )
            x, active = xs, active.any(axis=1, keepdims=True)
        else:
            p = share
        self._reset_rows(active & ~self.was_active)  # a tenant (re)started: fresh bounds
        old = {f: getattr(self.ctl, f).copy() for f in self._FIELDS}
        target, move = self.ctl.update(l_dram[:, None], l_cxl[:, None], p)
        for f in self._FIELDS:
            setattr(self.ctl, f, np.where(active, getattr(self.ctl, f), old[f]))
        promote = active & (target > p)
        mbytes = colloid_migration_bytes(move, x, self.quantum_s) / self.quantum_s / 1e6
        self.rate = np.where(promote, mbytes, 0.0).sum(axis=1)
        self.share = np.where(active, target, np.nan)
        self.was_active = active.copy()

    def _decide(self, obs: NDArray) -> tuple[I64, F64]:
        hw = self._hw()
        w = share_to_weights(
            self.share,
            self.node_bandwidth_gbps(),
            self.is_cxl(),
            self.weight_scale,
            tenant_orders(hw, self.n_rows),  # each tenant's nearest nodes
            hw.socket,
        )
        return w, self.rate.copy()


class CaptionPolicy(HeuristicPolicy):
    """``caption``: hill climbing on the DRAM:CXL interleave ratio (Sun et al., MICRO'23).

    Source: the Caption artifact (``caption_ae/algo.py``, ``config.py``) through
    :class:`baselines.algorithms.Caption`: the DRAM weight is fixed at 10, the
    CXL weight ``b`` in 1..20 starts at 1 (10:1); each tuning step keeps ``b``
    when the estimate barely moved (< 0.2), resets to 10:1 on a huge change
    (> 500), otherwise keeps the direction when the estimate improved and
    reverses and halves the step when it got worse.

    Mapping: one controller per machine (Caption tunes the system's ratio),
    one tuning step per env step; the estimate is ``estimate_scale`` (100, the
    IPC coefficient of Caption's linear model) times the geometric mean of
    the running tenants' normalised performance (the stand-in for its
    IPC/latency model; the thresholds keep their meaning: 0.2 = 0.2%). Every
    DRAM node gets the top weight and every CXL node ``b``, for every tenant;
    promotion rate 0 (Caption does not migrate). Kernel: :data:`STATIC_KERNEL`.
    Reads info: ``tenant_active``, ``tenant_norm_perf``.

    Args:
        top, bottom_reset, bottom_max, step_reset, min_step, tiny, huge, idle: the
            :class:`~baselines.algorithms.Caption` constants (10, 1, 20, 3, 1, 0.2, 500, 70000).
        estimate_scale: factor from normalised performance to Caption's units (100).
    """

    name = "caption"

    def __init__(
        self,
        top: int = 10,
        bottom_reset: int = 1,
        bottom_max: int = 20,
        step_reset: int = 3,
        min_step: int = 1,
        tiny: float = 0.2,
        huge: float = 500.0,
        idle: float | None = 70000.0,
        estimate_scale: float = 100.0,
    ) -> None:
        super().__init__()
        self.args: dict[str, Any] = dict(
            top=top,
            bottom_reset=bottom_reset,
            bottom_max=bottom_max,
            step_reset=step_reset,
            min_step=min_step,
            tiny=tiny,
            huge=huge,
            idle=idle,
        )
        self.estimate_scale = float(estimate_scale)
        self.ctl: Caption | None = None

    _FIELDS = ("bottom", "step", "prev_estimate")

    def _reset(self, mask: NDArray[np.bool_]) -> None:
        new = Caption((self._B,), **self.args)
        if self.ctl is None or self.ctl.shape != (self._B,):
            self.ctl = new
            return
        for f in self._FIELDS:
            setattr(self.ctl, f, np.where(mask, getattr(new, f), getattr(self.ctl, f)))

    def _observe(self, info: Mapping[str, Any]) -> None:
        assert self.ctl is not None
        active = info["tenant_active"]
        n = active.sum(axis=1)
        logp = np.where(active, np.log(np.maximum(info["tenant_norm_perf"], 1e-6)), 0.0).sum(1)
        est = self.estimate_scale * np.exp(logp / np.maximum(n, 1))
        old = {f: getattr(self.ctl, f).copy() for f in self._FIELDS}
        self.ctl.update(est)
        run = n > 0
        for f in self._FIELDS:
            setattr(self.ctl, f, np.where(run, getattr(self.ctl, f), old[f]))

    def _decide(self, obs: NDArray) -> tuple[I64, F64]:
        assert self.ctl is not None
        w = np.where(self.is_cxl(), self.ctl.bottom[:, None], self.ctl.top)
        return self._rows(w), np.zeros(self._B)


class DamonTiering(HeuristicPolicy):
    """``damon-tiering``: DAMON-based auto-tuned memory tiering (``samples/damon/mtier.c``, Linux 6.16).

    Two DAMOS schemes: promote hot CXL regions to DRAM and demote cold DRAM
    regions to CXL, each with a size quota per 1 s that DAMON's feedback loop
    (:class:`baselines.algorithms.DamonQuotaTuner`) tunes toward a goal: DRAM
    used 99.7% for promotion, DRAM free 0.5% for demotion; quota at most
    200 MiB per second.

    Mapping: the promotion scheme's quota is the promotion rate limit
    (``quota_bytes`` per 1 s as MB/s; one tuner update per env step, on the
    DRAM nodes' used share from ``info["node_capacity_used_gib"]`` over their
    capacity). Hot-region detection is the model's scanner (NUMA-balancing
    sampling, not DAMON's region sampling). The codec's smallest non-zero
    rate is 1 MB/s, so DAMON's first tiny quotas (it starts at 1 byte) act as
    1 MB/s. The demotion scheme is not an action: kernel
    ``KernelConfig(demote_watermark_frac=demote_free_bp/10000,
    kswapd_gibps=quota/GiB, threshold_adapt=False)`` demotes cold pages
    whenever DRAM free falls under 0.5%, at most the quota per second (the
    quota's own goal tuning is not modelled). Allocation local-first.
    Reads info: ``node_capacity_used_gib``.

    Args:
        promote_used_bp: promotion goal, DRAM used in 1/10000 (9970).
        demote_free_bp: demotion goal, DRAM free in 1/10000 (50).
        quota_bytes: each scheme's quota per 1 s (200 MiB).
        tuner: DAMOS goal tuner, ``"consist"`` (default) or ``"temporal"``.
    """

    name = "damon-tiering"

    def __init__(
        self,
        promote_used_bp: float = MTIER_PROMOTE_USED_BP,
        demote_free_bp: float = MTIER_DEMOTE_FREE_BP,
        quota_bytes: float = MTIER_QUOTA_BYTES,
        tuner: str = "consist",
    ) -> None:
        super().__init__()
        self.promote_used_bp = float(promote_used_bp)
        self.quota_bytes = float(quota_bytes)
        self.tuner_kind = tuner
        self.kernel = KernelConfig(
            demotion=True,
            demote_watermark_frac=float(demote_free_bp) / 10000.0,
            kswapd_gibps=self.quota_bytes / GIB,
            threshold_adapt=False,
        )
        self.tuner: DamonQuotaTuner | None = None

    def _reset(self, mask: NDArray[np.bool_]) -> None:
        new = DamonQuotaTuner((self._B,), self.quota_bytes, self.tuner_kind)  # type: ignore[arg-type]
        if self.tuner is None or self.tuner.shape != (self._B,):
            self.tuner = new
            return
        self.tuner.esz_bp = np.where(mask, new.esz_bp, self.tuner.esz_bp)
        self.tuner.quota_bytes = np.where(mask, new.quota_bytes, self.tuner.quota_bytes)

    def _observe(self, info: Mapping[str, Any]) -> None:
        assert self.tuner is not None
        dram = ~self.is_cxl()
        used = np.where(dram, info["node_capacity_used_gib"], 0.0).sum(axis=1)
        cap = np.where(dram, self.capacity_gib(), 0.0).sum(axis=1)
        self.tuner.update(node_mem_bp(used, cap), self.promote_used_bp)

    def _decide(self, obs: NDArray) -> tuple[I64, F64]:
        assert self.tuner is not None
        rate = np.maximum(self.tuner.quota_bytes, 1.0) / 1e6  # bytes per 1 s -> MB/s
        return self._rows(np.zeros(self.n_nodes)), rate


class BandwidthAwareInterleave(HeuristicPolicy):
    """``bw-aware-interleave``: the kernel's auto weights per tenant, offloading only bandwidth-bound tenants.

    The per-tenant, bandwidth-aware reference the learned policies must beat
    (issue #12): Caption's idea (send new pages to CXL when the machine is
    bandwidth-bound, keep them local when it is latency-bound) applied per
    cgroup, with the split bounded by the weighted-interleave auto weights
    (``mm/mempolicy.c``, :func:`envs.kernel.auto_interleave_weights` on the
    nodes' firmware bandwidth) instead of Caption's hill climbing.

    - A tenant not measured yet (the step it starts, before its first
      interval's counters) allocates with the auto weights: bandwidth-
      proportional interleave, the kernel's choice for a workload it knows
      nothing about (and pages placed at a tenant's start stay where they
      are put, so the first decision matters most).
    - Once running, from the last interval's counters: ``d_t`` each running
      tenant's bandwidth demand (``info["tenant_demand_gbps"]``, its traffic
      at idle latencies), ``B_D`` the DRAM nodes' firmware bandwidth summed,
      ``c_max`` the CXL share of the auto weights. The traffic DRAM cannot
      carry, ``X = clip(sum_t d_t - target_utilization * B_D, 0, c_max *
      sum_t d_t)`` (at most the bandwidth-proportional share of the whole
      machine's traffic: beyond it CXL, not DRAM, is the bottleneck), is
      offloaded from the tenants of largest demand first (the most
      bandwidth-bound): tenant ``t`` sends
      ``c_t = clip((X - sum of the larger tenants' d) / d_t, 0, 1)`` of its
      new pages to CXL (:func:`share_to_weights`, each tier split by
      bandwidth); a tenant with ``c_t = 0`` (latency-bound, or a machine
      within DRAM's bandwidth) allocates local-first, Linux's default. With
      global weights one row for the machine: ``c = X / sum_t d_t``, the auto
      share before the first measurement.

    - Promotion: while some running tenant is local-first, NUMA balancing in
      tiering mode at the kernel's default rate limit
      (``promote_rate_mbps``, 65536 MB/s) brings its hot CXL pages (those
      interleaved before it was measured, or spilled) back to DRAM; while
      every running tenant interleaves, promotion is off (it would undo the
      interleave).

    Kernel: :data:`STATIC_KERNEL`. Reads info: ``tenant_active``,
    ``tenant_demand_gbps``.

    Args:
        target_utilization: share of the DRAM bandwidth the tenants may use before
            offloading (1.0: the firmware bandwidth itself).
        promote_rate_mbps: promotion rate limit while a tenant is local-first
            (kernel default 65536; 0: never promote).
        weightiness: scale of the auto weights (kernel constant 32).
        weight_scale: resolution of the share-to-weights mapping (100).
    """

    name = "bw-aware-interleave"

    def __init__(
        self,
        target_utilization: float = 1.0,
        promote_rate_mbps: float = KERNEL_RATE_MBPS,
        weightiness: int = 32,
        weight_scale: int = 100,
    ) -> None:
        super().__init__()
        if not (math.isfinite(target_utilization) and target_utilization > 0):
            raise ValueError(
                f"bw-aware-interleave target_utilization: got {target_utilization}, expected > 0"
            )
        if not (math.isfinite(promote_rate_mbps) and promote_rate_mbps >= 0):
            raise ValueError(
                f"bw-aware-interleave promote_rate_mbps: got {promote_rate_mbps}, expected >= 0"
            )
        self.target_utilization = float(target_utilization)
        self.promote_rate_mbps = float(promote_rate_mbps)
        self.weightiness = int(weightiness)
        self.weight_scale = int(weight_scale)

    def _reset(self, mask: NDArray[np.bool_]) -> None:
        c = getattr(self, "cxl_share", None)
        if c is None or c.shape != (self._B, self.n_rows):
            self.cxl_share = np.zeros((self._B, self.n_rows))
            self.measured = np.zeros((self._B, self.n_rows), dtype=bool)
            self.rate = np.zeros(self._B)
        self.cxl_share[mask] = 0.0
        self.measured[mask] = False
        self.rate[mask] = 0.0

    def auto_cxl_share(self) -> F64:
        """(B,) the CXL share of the auto weights (``c_max``)."""
        auto = auto_interleave_weights(self.node_bandwidth_gbps(), self.weightiness).astype(float)
        return np.where(self.is_cxl(), auto, 0.0).sum(1) / np.maximum(auto.sum(1), 1e-300)

    def cxl_share_for(self, demand: F64, active: NDArray[np.bool_]) -> F64:
        """Each weight row's CXL share (B, R) for demands ``demand`` (B, T) of running tenants."""
        cxl = self.is_cxl()
        c_max = self.auto_cxl_share()
        b_dram = np.where(cxl, 0.0, self.node_bandwidth_gbps()).sum(1)
        d = np.where(active, np.maximum(demand, 0.0), 0.0)
        total = d.sum(1)
        excess = np.clip(total - self.target_utilization * b_dram, 0.0, c_max * total)  # (B,)
        if self.n_rows == 1:
            return (excess / np.maximum(total, 1e-300))[:, None]
        order = np.argsort(-d, axis=1, kind="stable")
        ds = np.take_along_axis(d, order, axis=1)
        before = np.cumsum(ds, axis=1) - ds  # demand of the larger tenants
        cs = np.clip((excess[:, None] - before) / np.maximum(ds, 1e-300), 0.0, 1.0)
        cs = np.where(ds > 0, cs, 0.0)
        out = np.empty_like(cs)
        np.put_along_axis(out, order, cs, axis=1)
        return out

    def _observe(self, info: Mapping[str, Any]) -> None:
        active = info["tenant_active"]
        self.cxl_share = self.cxl_share_for(info["tenant_demand_gbps"], active)
        self.measured = active if self.n_rows > 1 else active.any(axis=1, keepdims=True)
        rows = active if self.n_rows > 1 else active.any(axis=1, keepdims=True)
        local = (rows & (self.cxl_share == 0)).any(axis=1)  # a running tenant is local-first
        self.rate = np.where(local, self.promote_rate_mbps, 0.0)

    def _decide(self, obs: NDArray) -> tuple[I64, F64]:
        c = np.where(self.measured, self.cxl_share, self.auto_cxl_share()[:, None])
        share = np.where(c > 0, 1.0 - c, np.nan)  # NaN: local-first
        hw = self._hw()
        w = share_to_weights(
            share,
            self.node_bandwidth_gbps(),
            self.is_cxl(),
            self.weight_scale,
            tenant_orders(hw, self.n_rows),  # each tenant's nearest nodes
            hw.socket,
        )
        return w, self.rate.copy()


class RandomPolicy(HeuristicPolicy):
    """``random``: uniform random box actions every step (a lower bound).

    Weights and rate drawn uniformly in [-1, 1] per entry and step, from a
    generator seeded with ``seed`` at every ``bind`` (so a rollout is
    reproducible). Kernel: :data:`STATIC_KERNEL`. Reads no info.

    Args:
        seed: seed of the generator (0).
    """

    name = "random"

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        self.seed = int(seed)
        self.rng = np.random.default_rng(self.seed)

    def _bound(self) -> None:
        self.rng = np.random.default_rng(self.seed)

    def predict(
        self,
        observation: NDArray,
        state: Any = None,
        episode_start: NDArray | None = None,
        deterministic: bool = True,
    ) -> tuple[NDArray[np.float32], Any]:
        obs = np.asarray(observation)
        b = 1 if obs.ndim == 1 else obs.shape[0]
        a = self.rng.uniform(-1.0, 1.0, (b, self._p().codec.size)).astype(np.float32)
        return (a[0] if obs.ndim == 1 else a), state


# =============================================================================== by name

STATIC_PATTERN = "static:W1:W2[:...][@RATE]"
_STATIC_RE = re.compile(r"^static((?::\d+)+)(?:@([0-9]*\.?[0-9]+(?:[eE][+-]?\d+)?))?$")


def policy_names() -> list[str]:
    """The baselines :func:`make_policy` builds: the catalogue's policies of this package
    (:data:`baselines.catalogue.CATALOGUE`), then the parametric ``static:...`` form."""
    return [*catalogue.names(module="baselines."), STATIC_PATTERN]


def make_policy(name: str, env: Any = None, **params: Any) -> HeuristicPolicy:
    """A baseline by name, with its parameters; bound to ``env`` if given.

    ``name`` is one of :func:`policy_names` or ``static:W1:W2[:...][@RATE]``
    (integer weights per node in the scenario's node order, rate in MB/s).
    ``params`` go to the baseline's constructor (see each class).

    Raises:
        ValueError: an unknown name (the message lists the valid names) or a
            malformed ``static:`` spec.
    """
    if name.startswith("static:"):
        m = _STATIC_RE.match(name)
        if m is None:
            raise ValueError(
                f"policy {name!r}: expected {STATIC_PATTERN}, e.g. 'static:1:1' or 'static:3:1@256'"
            )
        weights = [int(x) for x in m.group(1).split(":")[1:]]
        rate = float(m.group(2)) if m.group(2) else 0.0
        pol: HeuristicPolicy = StaticWeights(weights, rate, **params)
    elif name in policy_names():
        pol = catalogue.factory(name)(**params)
    else:
        raise ValueError(f"unknown policy {name!r}: expected one of {policy_names()}")
    if env is not None:
        pol.bind(env)
    return pol
