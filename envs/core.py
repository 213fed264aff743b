"""The environment core: pure functions over a batch of instances (the gymnax/brax shape).

::

    params = make_params("mixed", split="train")          # frozen: family, pool, codecs
    state, obs = reset(params, seeds)                      # seeds (B,): one per instance
    state, obs, reward, terminated, truncated, metrics = step(params, state, action)
    state, obs = reset_where(params, state, done)          # new episodes where ``done``

:class:`EnvParams` are frozen per family and split: the compiled pool of
scenarios an episode draws from, the action codec, the observation encoder
and the reward. Everything an episode draws (its pool row, its seed, the
tenants' jitter) lives in :class:`EnvState`. No function here writes its
arguments, so a state can be kept, copied, branched and replayed.

:class:`Metrics` is the one batched, documented record of a step (per node,
per tenant, system totals, reward terms, the action in force): the Gymnasium
environments' ``info``, the SB3 adapter, the rollout loop, the callbacks and
evaluation all read it. :class:`Hardware` is the read-only view of each
instance's machine that a policy may read (what firmware tables and
``/sys/devices/system/node`` give a kernel).
"""

from __future__ import annotations

import dataclasses
import inspect
import weakref
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from envs.config import EnvConfig
from envs.encoding import descriptor_rows
from envs.families import ScenarioFamily, make_family
from envs.gather import gather_phase, phases_now
from envs.hardware import firmware_bandwidth, mix_peak
from envs.kernel import auto_tier_shares, near_nodes
from envs.model import (
    LINE_BYTES,
    Action,
    KernelConfig,
    Outputs,
    Params,
    State,
    init_state,
    kernel_arrays,
    memcg_limits,
    reset_rows,
    with_kernel_fields,
    with_kernel_rows,
)
from envs.model import step as model_step
from envs.plugins import make_baseline_policy
from envs.records import record
from envs.rng import splitmix
from envs.scenario import Scenario
from envs.spaces import (
    GIB_SCALE,
    MBPS_SCALE,
    REWARDS,
    ActionCodec,
    ObservationEncoder,
    mode_kernels,
    reward_terms,
)

__all__ = [
    "COMING_FEATURES",
    "EnvParams",
    "EnvState",
    "Hardware",
    "Metrics",
    "ScenarioSpec",
    "TwinState",
    "coming_tenants",
    "hardware",
    "make_params",
    "reset",
    "reset_where",
    "step",
]

F64 = NDArray[np.float64]
ScenarioSpec = str | Path | Mapping[str, Any] | Scenario | ScenarioFamily


def kernel_config(kernel: KernelConfig | Mapping[str, Any] | None) -> KernelConfig:
    """A :class:`KernelConfig` from itself, a dict of its fields, or ``None`` (defaults)."""
    if kernel is None:
        return KernelConfig()
    if isinstance(kernel, KernelConfig):
        return kernel
    known = {f.name for f in dataclasses.fields(KernelConfig)}
    bad = sorted(set(kernel) - known)
    if bad:
        raise ValueError(f"kernel: unknown option(s) {bad}, expected some of {sorted(known)}")
    return KernelConfig(**kernel)


@dataclass(frozen=True)
class EnvParams:
    """What every episode of an environment draws from; never changes after :func:`make_params`."""

    family: ScenarioFamily
    split: str
    pool: Params  # the split's scenarios, compiled (batch axis = pool rows)
    kernel: KernelConfig
    codec: ActionCodec
    encoder: ObservationEncoder
    reward: str
    jitter: float
    mode_table: dict[str, NDArray[Any]] | None = None  # kernel arrays of codec.modes (M,)
    reward_baseline: str | None = None  # the heuristic of the paired-seed twins
    twin: EnvParams | None = None  # the twins' environment: the heuristic's kernel, box actions
    precision: str = "reference"  # the model core's (envs.model.PRECISIONS)

    @property
    def n_tenants(self) -> int:
        return self.pool.n_tenants

    @property
    def n_nodes(self) -> int:
        return self.pool.n_nodes

    @property
    def node_names(self) -> list[str]:
        return list(self.pool.node_names)

    def env_kwargs(self) -> dict[str, Any]:
        """The keyword arguments that rebuild these parameters (for run records)."""
        return {
            "scenario": self.family.name,
            "split": self.split,
            "max_tenants": self.n_tenants,
            "reward": self.reward,
            "weights": self.codec.weights,
            "action_type": self.codec.action_type,
            "max_promote_mbps": self.codec.max_promote_mbps,
            "kernel": dataclasses.asdict(self.kernel),
            "jitter": self.jitter,
            "pool_size": self.family.pool_size,
            "tiering_modes": list(self.codec.modes),
            "observation": self.encoder.version,
            "reward_baseline": self.reward_baseline,
        }


def make_params(*args: Any, **kwargs: Any) -> EnvParams:
    """Frozen parameters of an environment from its arguments (:class:`envs.config.EnvConfig`'s
    fields, the keywords of ``gymnasium.make``), or from an ``EnvConfig`` and keywords that
    replace its fields.

    ``reward_baseline`` names a heuristic (:func:`envs.plugins.make_baseline_policy`):
    every instance then has a twin on the same episode seed, run by that heuristic
    under its own kernel configuration in the same model call, and the reward is the
    agent's minus the twin's (:class:`TwinState`, :class:`envs.paired.BaselineTwin`, :func:`step`).

    Raises:
        ValueError: an unknown argument or a bad value, named.
    """
    return build_params(EnvConfig.of(*args, **kwargs))


make_params.__signature__ = inspect.signature(EnvConfig).replace(  # type: ignore[attr-defined]
    return_annotation="EnvParams"
)


def build_params(config: EnvConfig) -> EnvParams:
    """The parameters :func:`make_params` builds, from a checked configuration."""
    c = config
    family = make_family(c.scenario, pool_size=c.pool_size, generator_chances=c.generator_chances)
    T = c.max_tenants or family.max_tenants
    if family.max_tenants > T:
        raise ValueError(
            f"scenario {family.name!r} has up to {family.max_tenants} tenants, "
            f"more than max_tenants={T} slots"
        )
    kern = kernel_config(c.kernel)
    pool = family.pool(c.split, T, kern, c.jitter)
    modes = tuple(c.tiering_modes or ())
    codec = ActionCodec(T, pool.n_nodes, c.weights, c.action_type, c.max_promote_mbps, modes)
    twin = None
    if c.reward_baseline is not None:  # the twins: the heuristic's kernel, its own actions
        policy = make_baseline_policy(c.reward_baseline)
        twin = build_params(
            EnvConfig(
                family,
                c.split,
                max_tenants=T,
                reward=c.reward,
                max_promote_mbps=c.max_promote_mbps,
                kernel=policy.kernel,
                jitter=c.jitter,
                pool_size=c.pool_size,
                tiering_modes=policy.tiering_modes,
                observation=c.observation,
                precision=c.precision,
            )
        )
    return EnvParams(
        family=family,
        split=c.split,
        pool=pool,
        kernel=kern,
        codec=codec,
        encoder=ObservationEncoder(T, pool.n_nodes, c.observation),
        reward=c.reward,
        jitter=c.jitter,
        mode_table=kernel_arrays(mode_kernels(kern, modes)) if modes else None,
        reward_baseline=c.reward_baseline,
        twin=twin,
        precision=c.precision,
    )


@dataclass(frozen=True)
class EnvState:
    """Everything that changes: the instances' episodes and their model state."""

    instance: Params  # the pool rows the running episodes drew (batch axis = instances)
    model: State
    base_seed: NDArray[np.uint64]  # (B,) the seed given to reset
    episode: NDArray[np.uint64]  # (B,) episodes started since that reset (seeds the draw)
    weights: NDArray[np.int64]  # (B, T, N) integer interleave weights in force
    promote_mbps: F64  # (B,) promotion rate limit in force
    twin: TwinState | None = None  # the paired-seed twins (``reward_baseline``)
    # (T, P, k, B) the episodes' tenant descriptors per phase (:func:`spec_table`; None:
    # computed when read)
    specs: F64 | None = None

    @property
    def num_envs(self) -> int:
        return int(self.base_seed.shape[0])

    @property
    def done(self) -> NDArray[np.bool_]:
        """(B,) True where the episode has run its ``episode_steps``."""
        return self.model.t >= self.instance.episode_steps


@dataclass(frozen=True)
class Hardware:
    """Read-only view of each instance's machine (arrays (B, N), batch first).

    What a kernel knows about its nodes: kind, socket, capacity, the peaks and
    idle latency firmware reports (HMAT/CDAT). ``firmware_gbps`` is
    ``min(read, write)``, what the weighted-interleave auto mode reads.
    """

    node_names: tuple[str, ...]
    is_cxl: NDArray[np.bool_]
    socket: NDArray[np.int64]
    capacity_gib: F64
    read_gbps: F64  # read peak, a CXL node's link included
    write_gbps: F64
    firmware_gbps: F64
    idle_latency_ns: F64
    #: (B, T, N) each tenant slot's allocation fallback list, nearest node first: its CPU
    #: node's zonelist as the kernel builds it from the NUMA distances (the preferred node's
    #: for MPOL_PREFERRED; -1 for the nodes a bind mask excludes), the first phase's
    #: (``Params.fallback``); None where unknown (a host's view, deploy.py)
    tenant_fallback: NDArray[np.int64] | None = None

    @property
    def machine_read_gbps(self) -> F64:
        """(B,) the machine's read peak: the sum of its nodes' read peaks."""
        return self.read_gbps.sum(axis=1)


@dataclass(frozen=True)
class TwinState:
    """The paired-seed twins of a batch: their state, observations and last metrics.

    Twin ``i`` runs the episode of instance ``i`` (the same pool row and episode seed,
    so the same arrivals, departures, phases and jitter) under the heuristic that
    ``params.reward_baseline`` names; its actions never depend on the agent's.
    """

    state: EnvState
    obs: NDArray[np.float32]  # (B, size) the twins' observations (the heuristic reads them)
    metrics: Metrics | None  # the twins' last interval (None right after reset)
    # (instances' Params, twins' Params, the two concatenated) of the last step: the
    # model's call for both, kept while both are the same objects (Params are never
    # written; a reset makes new ones; an interval's tiering modes replace the kernel
    # fields of the concatenation, not the concatenation)
    pair: tuple[Params, Params, Params] | None = None


def _frozen(a: np.ndarray) -> np.ndarray:
    v = a.view()
    v.flags.writeable = False
    return v


#: the Hardware of each live instances' Params, by its id: a step's callers (the agent's
#: view, the paired twins' heuristic, evaluation) ask every step, and the machine changes
#: only with the Params object (a reset draws new ones; Params are never written)
_HARDWARE: dict[int, Hardware] = {}


def hardware(state: EnvState) -> Hardware:
    """The machine of every instance of ``state`` (read-only arrays; the same object
    while the instances are)."""
    p = state.instance
    hw = _HARDWARE.get(id(p))
    if hw is None:
        hw = _HARDWARE[id(p)] = _hardware(p)
        weakref.finalize(p, _HARDWARE.pop, id(p), None)  # the id is reused once p is gone
    return hw


def _firmware_gbps(p: Params) -> F64:
    """(B, N) each node's bandwidth as firmware reports it (:func:`firmware_bandwidth`)."""
    c = p.curves
    return firmware_bandwidth(c.mem_read, c.mem_write, c.link_read, c.link_write).T


def _hardware(p: Params) -> Hardware:
    c = p.curves
    rd = np.minimum(c.mem_read, c.link_read)
    wr = np.minimum(c.mem_write, c.link_write)
    return Hardware(
        node_names=tuple(p.node_names),
        is_cxl=_frozen(p.is_cxl.T),
        socket=_frozen(p.node_socket.T),
        capacity_gib=_frozen(p.capacity_gib.T),
        read_gbps=_frozen(rd.T),
        write_gbps=_frozen(wr.T),
        firmware_gbps=_frozen(_firmware_gbps(p)),
        idle_latency_ns=_frozen(c.idle_ns.T),
        tenant_fallback=_frozen(np.moveaxis(p.fallback, -1, 0)),
    )


@dataclass(frozen=True)
class Metrics(Outputs):
    """One step of every instance (arrays, batch first): the model's outputs plus the env's.

    The model's fields (:class:`envs.model.Outputs`): per node ``node_bandwidth_gbps``
    (GB/s, reads + writes, migrations included), ``node_read_gbps``, ``node_write_gbps``,
    ``node_peak_gbps`` (at this interval's mix), ``node_utilization`` (0..1, the
    bottleneck resource), ``node_latency_ns`` (loaded latency of a local access),
    ``node_capacity_used_gib``; per tenant slot ``tenant_active``,
    ``tenant_throughput_gbps``, ``tenant_demand_gbps`` (at idle latencies),
    ``tenant_norm_perf`` (over the same tenant alone in local DRAM),
    ``tenant_latency_ns``, ``tenant_dram_access_share``, ``tenant_dram_resident_gib``,
    ``tenant_resident_gib``, ``tenant_working_set_gib``, ``tenant_read_fraction``,
    ``tenant_memory_events_high`` (the cgroup's memory.events "high" of the interval,
    :func:`envs.model.memory_events_high`); totals ``promotion_mbps``, ``demotion_mbps``, ``promotion_candidates_mbps``,
    ``total_throughput_gbps``, ``solver_residual``, ``solver_iterations``,
    ``solver_converged``.

    Added by the environment: every reward term (``reward_log_geomean``,
    ``reward_throughput``, ``reward_weighted_speedup``, ``reward_harmonic``), the
    paired-seed baseline (``reward_baseline`` (B,): the twin's value of the
    environment's reward term, so ``reward == reward_<name> - reward_baseline``;
    ``tenant_norm_perf_baseline`` (B, T): the twin's per-tenant performance; both 0
    without a baseline), the action in force (``interleave_weights`` (B, T, N) integers, 0 everywhere
    meaning local-first; ``promote_rate_mbps``), ``episode_step`` (steps done in
    the episode, this one included), ``node_capacity_gib`` and ``tiering_mode``
    (index in ``params.codec.modes`` of the mode in force; 0 without modes).

    A mapping too: ``metrics["tenant_norm_perf"]`` and ``dict(metrics)`` work, so
    code written against the Gymnasium ``info`` dict reads it unchanged.
    """

    reward_log_geomean: F64
    reward_throughput: F64
    reward_weighted_speedup: F64
    reward_harmonic: F64
    interleave_weights: NDArray[np.int64]
    promote_rate_mbps: F64
    episode_step: NDArray[np.int64]
    node_capacity_gib: F64
    tiering_mode: NDArray[np.int64]
    reward_baseline: F64
    tenant_norm_perf_baseline: F64

    def __getitem__(self, key: str) -> Any:
        if key not in _METRIC_NAMES:
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(_METRIC_NAMES)

    def __len__(self) -> int:
        return len(_METRIC_NAMES)

    def keys(self) -> tuple[str, ...]:
        return _METRIC_NAMES

    def items(self) -> Iterator[tuple[str, Any]]:
        # a frozen dataclass's __dict__ holds its fields, in their order, and nothing else
        return iter(self.__dict__.items())

    def __contains__(self, key: object) -> bool:
        return key in _METRIC_SET

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key) if key in _METRIC_SET else default

    def to_dict(self) -> dict[str, Any]:
        """Every metric by name (the arrays themselves, not copies)."""
        return dict(self.__dict__)

    def rows(self, idx: ArrayLike) -> Metrics:
        """The metrics of instances ``idx``."""
        return record(Metrics, {k: getattr(self, k)[idx] for k in _METRIC_NAMES})


_METRIC_NAMES = tuple(f.name for f in dataclasses.fields(Metrics))
_METRIC_SET = frozenset(_METRIC_NAMES)
_REWARD_FIELD = {name: "reward_" + name.replace("-", "_") for name in REWARDS}


# --------------------------------------------------------------------------- the functions


def _episode_seeds(base: NDArray[np.uint64], episode: NDArray[np.uint64]) -> NDArray[np.uint64]:
    with np.errstate(over="ignore"):
        return splitmix(base * np.uint64(0x9E3779B97F4A7C15) + splitmix(episode))


def _take(a: NDArray[Any], phase: NDArray[np.int64]) -> NDArray[Any]:
    """(T, B) values of ``a`` (T, P, B) at each tenant's phase (T, B)."""
    return gather_phase(a, phase)


#: Entries per tenant slot of :func:`coming_tenants`.
COMING_FEATURES = 11


def _phase_now(p: Params, now: F64) -> NDArray[np.int64]:
    """Each tenant slot's phase at time ``now`` (T, B); a slot not yet started: its first."""
    out = np.empty(p.present.shape, dtype=np.int64)
    phases_now(p.contiguous["phase_at"], np.ascontiguousarray(now, dtype=float), out)
    return out


def _tenant_specs(p: Params, solo_gbps: F64, phase: NDArray[np.int64], dram: F64, ws: F64) -> F64:
    """Each tenant slot's spec (T, B, 7) on [0, 1] at ``phase`` (T, B), with ``dram`` (B,)
    the DRAM capacity and ``ws`` (T, B) its working set in that phase (jitter included),
    ``solo_gbps`` (T, P, B) the episode's: threads, working set, working set over DRAM,
    read fraction, access share of its hottest 2%, socket, demand alone over the peak."""
    peak = p.machine_totals[2]
    share = p.access_share  # (T, P, K, B): the hottest three buckets' shares at the phase
    hot = _take(share[:, :, 0], phase) + _take(share[:, :, 1], phase) + _take(share[:, :, 2], phase)
    d = np.stack(
        [
            np.log2(1.0 + _take(p.threads, phase)) / 8.0,
            np.log2(1.0 + ws) / GIB_SCALE,
            ws / np.maximum(dram, 1e-9),
            _take(p.read_fraction, phase),
            hot,
            _take(p.socket, phase).astype(float),
            _take(solo_gbps, phase) / peak,
        ],
        axis=-1,
    )
    return np.clip(d, 0.0, 1.0)


def _demand_over_local_peak(p: Params, jit: F64, phase: NDArray[np.int64]) -> F64:
    """(T, B) each tenant's zero-load demand with its pages in its local DRAM node, over
    that node's peak at the tenant's read share: the ``"demand"`` layout's descriptor
    (:data:`~envs.spaces.DEMAND_DESCRIPTORS`) before its scale.

    The demand is the solver's zero-load one (Little's law: bytes in flight over compute
    time plus the node's idle latency), with the episode's jitter ``jit`` (3, T, B) on
    mlp and compute time. A random tenant's bytes cost as the solver costs them, at the
    node's random peaks. An empty slot reads 0.
    """
    T, B = phase.shape
    node = _take(p.local_dram, phase)  # (T, B)
    elem = np.broadcast_to(np.arange(B), (T, B))
    c = p.curves

    def at_node(a: F64) -> F64:
        return a[node, elem]

    cap = LINE_BYTES * _take(p.threads, phase) * _take(p.mlp, phase) * jit[0]
    compute = _take(p.compute_ns, phase) * jit[1]
    demand = cap / np.maximum(compute + at_node(c.idle_ns), 1e-300)
    rnd = _take(p.random, phase)
    rd = 1.0 / ((1.0 - rnd) / at_node(c.mem_read) + rnd / at_node(c.rnd_read))
    wr = 1.0 / ((1.0 - rnd) / at_node(c.mem_write) + rnd / at_node(c.rnd_write))
    peak = mix_peak(rd, wr, at_node(c.mem_turn), _take(p.read_fraction, phase))
    return np.where(p.present, demand / peak, 0.0)


def _near_auto_dram_share(p: Params) -> F64:
    """(T, B) each tenant slot's DRAM share of the kernel's weighted-interleave auto weights
    over its nearest DRAM and CXL nodes: the ``"topology"`` layout's descriptor
    (:data:`~envs.spaces.TOPOLOGY_DESCRIPTORS`). The nodes are those of its fallback list
    (``Params.fallback``, its first phase's) as :func:`envs.kernel.near_nodes` picks them,
    weighted by the firmware bandwidth the auto mode reads (:class:`Hardware`'s
    ``firmware_gbps``). 1 where no CXL node is near; an empty slot reads 0."""
    near = near_nodes(np.moveaxis(p.fallback, -1, 0), p.is_cxl.T, p.node_socket.T)
    dram, _ = auto_tier_shares(_firmware_gbps(p), *near)  # (B, T)
    return np.where(p.present, dram.T, 0.0)


def spec_table(encoder: ObservationEncoder, p: Params, jit: F64, solo_gbps: F64) -> F64:
    """Every tenant slot's descriptors but ``upcoming`` in each of its phases (T, P, k, B).

    A tenant's spec is known at admission and fixed for an episode (its phases, the
    episode's jitter ``jit`` (3, T, B) and solo throughput ``solo_gbps`` (T, P, B): the
    model state's), so the table is computed when an episode starts (:func:`reset`,
    :func:`reset_where`) and each interval reads its phase's column. ``k`` is 7, 9
    with the ``"cgroup"`` layout (memory.low and memory.high in force over the working
    set), 10 with ``"demand"`` (:func:`_demand_over_local_peak` too) and 11 with
    ``"topology"`` (:func:`_near_auto_dram_share` too). The limits are
    in force as the kernel applies them (:func:`memcg_limits`: the tier-aware mode scales
    both to the DRAM share of the machine, so a memory.high at the working set still
    caps its DRAM).
    """
    T, P, B = p.threads.shape
    dram = p.machine_totals[0]
    near_share = _near_auto_dram_share(p) if encoder.topology else None
    cols = []
    for ph in range(P):
        phase = np.full((T, B), ph, dtype=np.int64)
        ws = _take(p.working_set_gib, phase) * jit[2]
        d = _tenant_specs(p, solo_gbps, phase, dram, ws)
        if encoder.cgroup:
            wsafe = np.maximum(ws, 1e-9)
            dram_high, low, tot_high = memcg_limits(
                p, _take(p.memory_high_gib, phase), _take(p.memory_low_gib, phase)
            )
            high = np.minimum(dram_high, tot_high)
            cg = np.stack([low / wsafe, np.where(np.isfinite(high), high / wsafe, 1.0)], axis=-1)
            d = np.concatenate([d, cg], axis=-1)
        if encoder.demand:
            x = _demand_over_local_peak(p, jit, phase)
            d = np.concatenate([d, (np.log2(1.0 + x) / 4.0)[..., None]], axis=-1)
        if near_share is not None:
            d = np.concatenate([d, near_share[..., None]], axis=-1)
        cols.append(np.clip(d, 0.0, 1.0).transpose(0, 2, 1))  # (T, k, B)
    return np.stack(cols, axis=1)


def _specs(params: EnvParams, state: EnvState) -> F64:
    """The episode's :func:`spec_table` (kept in the state; computed if it is not)."""
    if state.specs is not None:
        return state.specs
    return spec_table(params.encoder, state.instance, state.model.jit, state.model.solo_gbps)


def coming_tenants(params: EnvParams, state: EnvState) -> NDArray[np.float32]:
    """What the rest of every episode holds, per tenant slot (B, T, :data:`COMING_FEATURES`).

    Privileged: a kernel cannot know it, so no policy may read it; an asymmetric critic
    may (its value estimate then need not guess the coming arrivals). Per slot: whether a
    tenant runs in it at or after the next interval, the time until it starts and the time
    it has left (both over the episode's length, 0..1), its spec as :func:`descriptors`
    gives it (its first phase if not started yet: 7 entries), and 1 if it has not started.
    0 everywhere for a slot with nothing left to run.
    """
    p, s = state.instance, state.model
    now = s.t * p.interval_s  # start of the next interval
    length = np.maximum(p.episode_steps * p.interval_s, 1e-9)  # (B,)
    later = p.present & (now < p.stop_s) & (p.start_s < length) & (now < length)  # (T, B)
    stop = np.minimum(p.stop_s, length)
    timing = np.stack(
        [
            later.astype(float),
            np.clip((p.start_s - now) / length, 0.0, 1.0),
            np.clip((stop - np.maximum(now, p.start_s)) / length, 0.0, 1.0),
        ],
        axis=-1,
    )  # (T, B, 3)
    pending = (p.start_s > now).astype(float)[..., None]
    spec = gather_phase(_specs(params, state)[:, :, :7], _phase_now(p, now))  # (T, 7, B)
    out = np.concatenate([timing, spec.transpose(0, 2, 1), pending], axis=-1)
    out = np.where(later[..., None], out, 0.0)
    return np.moveaxis(out, 1, 0).astype(np.float32)


def descriptors(params: EnvParams, state: EnvState) -> tuple[F64, F64]:
    """The ``"full"`` observation's tenant descriptors (B, T, 8; 10 with ``"cgroup"``, 11
    with ``"demand"``, 12 with ``"topology"``) and extra globals (B, 4).

    A tenant's descriptors are those of the phase it runs in the NEXT interval (its
    spec, known at admission: :func:`spec_table`), shown while it runs then; see
    :class:`~envs.spaces.ObservationEncoder` (kernel :func:`envs.encoding.descriptor_rows`).
    """
    p, s = state.instance, state.model
    specs = _specs(params, state)  # (T, P, k, B)
    T, _, k, B = specs.shape
    d, extra = np.empty((B, T, 1 + k)), np.empty((B, 4))
    c = p.contiguous
    log_dram, log_cxl = p.machine_log_gib
    descriptor_rows(
        s.t, np.ascontiguousarray(p.interval_s), c["present"], c["start_s"], c["stop_s"],
        c["phase_at"], np.ascontiguousarray(specs), log_dram, log_cxl,
        np.log1p(state.promote_mbps), GIB_SCALE, MBPS_SCALE, d, extra,
    )  # fmt: skip
    return d, extra


def observe(params: EnvParams, state: EnvState, out: Outputs | None) -> NDArray[np.float32]:
    """Observations (B, size) after an interval's outputs (``None``: just reset)."""
    p, s = state.instance, state.model
    c = p.curves
    desc, extra = descriptors(params, state) if params.encoder.n_desc else (None, None)
    return params.encoder.encode(
        out,
        idle_ns=c.idle_ns.T,
        capacity_gib=p.capacity_gib.T,
        peak_gbps=p.machine_totals[2],
        weights=s.weights.transpose(2, 0, 1),  # (B, T, N)
        t=s.t,
        steps=p.episode_steps,
        present=p.present_at_start.T,
        read_fraction=p.read_fraction[:, 0].T,
        descriptors=desc,
        extra=extra,
    )


def reset(params: EnvParams, seeds: ArrayLike) -> tuple[EnvState, NDArray[np.float32]]:
    """New episodes for a batch: instance ``i`` draws its scenario and state from ``seeds[i]``."""
    base = np.asarray(seeds, dtype=np.uint64).reshape(-1)
    B, T, N = base.shape[0], params.n_tenants, params.n_nodes
    if B < 1:
        raise ValueError("seeds: expected at least one seed (one per instance)")
    episode = np.zeros(B, dtype=np.uint64)
    ep_seeds = _episode_seeds(base, episode)
    rows = (ep_seeds % np.uint64(params.pool.batch_size)).astype(np.int64)
    inst = params.pool.subset(rows)
    twin = None
    if params.twin is not None:
        tstate, tobs = reset(params.twin, base)
        twin = TwinState(tstate, tobs, None)
    model = init_state(inst, ep_seeds)
    state = EnvState(
        instance=inst,
        model=model,
        base_seed=base.copy(),
        episode=episode,
        weights=np.zeros((B, T, N), dtype=np.int64),
        promote_mbps=np.zeros(B),
        twin=twin,
        specs=spec_table(params.encoder, inst, model.jit, model.solo_gbps),
    )
    return state, observe(params, state, None)


def reset_where(
    params: EnvParams, state: EnvState, done: ArrayLike
) -> tuple[EnvState, NDArray[np.float32]]:
    """``state`` with the next episode started where ``done`` (B,) is true.

    Returns the new state and the first observations of the new episodes
    (``(n_done, size)``, in the order of ``np.flatnonzero(done)``).
    """
    idx = np.flatnonzero(np.asarray(done, dtype=bool))
    if idx.size == 0:
        return state, np.zeros((0, params.encoder.size), dtype=np.float32)
    episode = state.episode.copy()
    episode[idx] += np.uint64(1)
    ep_seeds = _episode_seeds(state.base_seed[idx], episode[idx])
    rows = (ep_seeds % np.uint64(params.pool.batch_size)).astype(np.int64)
    drawn = params.pool.subset(rows)
    # every instance restarts (idx is then 0..B-1): the new rows are the whole batch
    whole = idx.size == state.num_envs
    inst = drawn if whole else state.instance.replace_rows(idx, drawn)
    weights = state.weights.copy()
    weights[idx] = 0
    promote = state.promote_mbps.copy()
    promote[idx] = 0.0
    twin = state.twin
    if params.twin is not None and twin is not None:
        tstate, tfirst = reset_where(params.twin, twin.state, done)
        tobs = twin.obs.copy()
        tobs[idx] = tfirst
        twin = TwinState(tstate, tobs, twin.metrics)
    model = init_state(inst, ep_seeds) if whole else reset_rows(inst, state.model, idx, ep_seeds)
    specs = None
    if state.specs is not None:  # the new episodes' rows of the table
        specs = state.specs.copy()
        specs[..., idx] = spec_table(
            params.encoder, drawn, model.jit[..., idx], model.solo_gbps[..., idx]
        )
    new = EnvState(
        instance=inst,
        model=model,
        base_seed=state.base_seed,
        episode=episode,
        weights=weights,
        promote_mbps=promote,
        twin=twin,
        specs=specs,
    )
    return new, observe(params, new, None)[idx]


def _decode(
    params: EnvParams, state: EnvState, action: ArrayLike
) -> tuple[Params, Action, NDArray[np.int64], NDArray[np.int64]]:
    """An interval's action for the model: the instances' parameters (with the tiering mode
    chosen), the model's action, the integer weights (B, T, N) and the mode (B,)."""
    B = state.num_envs
    a = np.asarray(action).reshape(B, -1)
    act, w = params.codec.decode(a)
    mode = params.codec.decode_mode(a)
    weights = np.array(w)  # (B, T, N) already (a broadcast view for global weights): a copy
    inst = state.instance
    if params.mode_table is not None:  # the tiering mode chosen for this interval
        inst = with_kernel_rows(inst, params.mode_table, mode)
    return inst, act, weights, mode


def _account(
    params: EnvParams,
    state: EnvState,
    model: State,
    out: Outputs,
    act: Action,
    weights: NDArray[np.int64],
    mode: NDArray[np.int64],
    twin: TwinState | None,
) -> tuple[EnvState, NDArray[np.float32], F64, Metrics]:
    """The state, observations, reward and metrics after the model ran an interval."""
    terms = reward_terms(out, state.instance.machine_totals[2])
    reward = terms[params.reward].astype(np.float64)
    if twin is None or twin.metrics is None:
        # no baseline: 0 (new arrays), and the reward is the term itself (a copy)
        base, base_perf = np.zeros(reward.shape), np.zeros(out.tenant_norm_perf.shape)
        paired = reward
    else:
        # copies: what a step returns never aliases the state (users keep it)
        base = twin.metrics[_REWARD_FIELD[params.reward]].copy()
        base_perf = twin.metrics.tenant_norm_perf.copy()
        paired = reward - base
    new = record(
        EnvState,
        {
            "instance": state.instance,
            "model": model,
            "base_seed": state.base_seed,
            "episode": state.episode,
            "weights": weights,
            "promote_mbps": act.promote_mbps,
            "twin": twin,
            "specs": state.specs,
        },
    )
    metrics = record(
        Metrics,
        {
            **out.__dict__,  # the model's outputs (a frozen dataclass: its fields alone)
            "reward_log_geomean": terms["log-geomean"],
            "reward_throughput": terms["throughput"],
            "reward_weighted_speedup": terms["weighted-speedup"],
            "reward_harmonic": terms["harmonic"],
            # copies: what a step returns never aliases the state (users keep it)
            "interleave_weights": weights.copy(),
            "promote_rate_mbps": act.promote_mbps.copy(),
            "episode_step": model.t.copy(),
            "node_capacity_gib": state.instance.capacity_gib.T.copy(),
            "tiering_mode": mode,
            "reward_baseline": base,
            "tenant_norm_perf_baseline": base_perf,
        },
    )
    return new, observe(params, new, out), paired, metrics


def step(
    params: EnvParams,
    state: EnvState,
    action: ArrayLike,
    twin_action: ArrayLike | None = None,
) -> tuple[EnvState, NDArray[np.float32], F64, NDArray[np.bool_], NDArray[np.bool_], Metrics]:
    """One interval of every instance: ``(state, obs, reward, terminated, truncated, metrics)``.

    ``action`` is the batch of policy actions (B, action size) in the codec's
    space. Instances whose episode has ended must be restarted first
    (:func:`reset_where`); this function does not restart them.

    With a ``reward_baseline``, ``twin_action`` is the twins' batch of box actions
    (B, twin action size), which their heuristic chose from ``state.twin.obs``
    (:class:`envs.paired.BaselineTwin` does that for the adapters). Instances and
    twins run in one call of the model (its rows are independent), and the reward is
    the agent's ``reward_<name>`` minus the twin's, ``metrics.reward_baseline``.

    Raises:
        ValueError: a wrong action shape, NaN, or choices out of range; a
            ``twin_action`` missing with a ``reward_baseline`` or given without one.
    """
    B = state.num_envs
    inst, act, weights, mode = _decode(params, state, action)
    twin = None
    if params.twin is None:
        if twin_action is not None:
            raise ValueError("twin_action: this environment has no reward_baseline")
        model, out = model_step(inst, state.model, act, check=False, precision=params.precision)
    else:
        if twin_action is None or state.twin is None:
            raise ValueError(
                f"twin_action: the environment has reward_baseline={params.reward_baseline!r}; "
                "give the twins' actions (envs.paired.BaselineTwin.act)"
            )
        tw = state.twin.state
        tinst, tact, tweights, tmode = _decode(params.twin, tw, twin_action)
        both = Action(
            np.concatenate([act.weights, tact.weights]),
            np.concatenate([act.promote_mbps, tact.promote_mbps]),
        )
        base, cached = state.instance, state.twin.pair
        if cached is not None and cached[0] is base and cached[1] is tinst:
            pair_base = cached[2]
        else:
            pair_base = base.concat(tinst)
        pair_params = pair_base
        if inst is not base:  # this interval's tiering modes: the instances' kernel rows
            pair_params = with_kernel_fields(
                pair_base,
                {
                    k: np.concatenate([getattr(inst, k), getattr(tinst, k)])
                    for k in params.mode_table or ()
                },
            )
        pair, pout = model_step(
            pair_params,
            state.model.concat(tw.model),
            both,
            check=False,
            precision=params.precision,
        )
        (model, tmodel), (out, tout) = pair.split(B), pout.split(B)
        tnew, tobs, _, tmetrics = _account(
            params.twin, tw, tmodel, tout, tact, tweights, tmode, None
        )
        twin = TwinState(tnew, tobs, tmetrics, (base, tinst, pair_base))
    new, obs, reward, metrics = _account(params, state, model, out, act, weights, mode, twin)
    truncated = model.t >= state.instance.episode_steps
    terminated = np.zeros(B, dtype=bool)
    return new, obs, reward, terminated, truncated, metrics


def step_autoreset(
    params: EnvParams, state: EnvState, action: ArrayLike, twin_action: ArrayLike | None = None
) -> tuple[
    EnvState,
    NDArray[np.float32],
    F64,
    NDArray[np.bool_],
    NDArray[np.bool_],
    Metrics,
    NDArray[np.float32] | None,
]:
    """:func:`step`, then finished instances restart in the same step (``SAME_STEP``).

    Returns :func:`step`'s values, the observations of the restarted
    instances replaced by their new episodes' first ones, plus ``final_obs``:
    the last observation of every instance (``None`` when none finished).
    ``metrics`` are those of the interval just run, finished instances included.
    """
    state, obs, reward, term, trunc, metrics = step(params, state, action, twin_action)
    done = term | trunc
    final_obs = None
    if done.any():
        final_obs = obs
        state, first = reset_where(params, state, done)
        obs = obs.copy()
        obs[done] = first
    return state, obs, reward, term, trunc, metrics, final_obs
