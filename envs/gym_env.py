"""Gymnasium environments over the environment core: a single env and a native vector env.

Both are thin adapters over the pure functions of :mod:`envs.core`: they hold
the frozen :class:`~envs.core.EnvParams` and the current
:class:`~envs.core.EnvState`, and turn the step's :class:`~envs.core.Metrics`
into Gymnasium's ``info``. Nothing is computed here that the core does not
compute for every other caller.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from envs import core, paired
from envs.config import arguments_text
from envs.core import EnvParams, EnvState, Hardware, ScenarioSpec
from envs.paired import BaselineTwin

__all__ = ["ENV_ID", "ScenarioSpec", "TieredMemoryEnv", "TieredMemoryVecEnv"]

ENV_ID = "tiergym/TieredMemory-v0"


_DOC_ARGS = (
    "Arguments (keyword, also through ``gymnasium.make``/``make_vec``; "
    ":class:`envs.config.EnvConfig` declares them):\n\n" + arguments_text()
)


class TieredMemoryEnv(gym.Env[np.ndarray, np.ndarray]):
    """Memory placement on a DRAM + CXL machine shared by several tenants.

    ## Description

    Every step is one control interval (``interval_s`` of simulated time) of a
    machine with local DRAM and CXL memory expanders, shared by tenants
    (cgroups) that start, stop and change phase. The policy sets each tenant's
    weighted-interleave weights (where its new and churned pages go,
    ``MPOL_WEIGHTED_INTERLEAVE``), the hot-page promotion rate limit
    (``numa_balancing_promote_rate_limit_MBps``) and, with ``tiering_modes``, the
    kernel's tiering mode. The model solves, per interval, the closed-loop fixed
    point of every tenant's request rate and every node's loaded latency
    (calibrated on Intel MLC curves of DDR5 and an A1000 CXL expander;
    ``docs/model.md``). The full reference is ``docs/env.md``.

    ## Action Space

    ``Box(-1, 1, (T*N + 1,), float32)`` (``T`` tenant slots, ``N`` nodes): for each
    slot in order one entry per node (``node_names`` order), then the promotion
    rate; ``Box(-1, 1, (N + 1,))`` with ``weights="global"``; one entry more, last,
    with ``tiering_modes``.

    | entry | value ``a`` | maps to |
    |---|---|---|
    | weight of node ``n`` | ``a < -0.9`` | 0: node outside the interleave mask |
    | | ``-0.9 <= a <= 1`` | ``round(255 ** ((a + 0.9) / 1.9))``: 1..255 on a log scale |
    | promotion rate | ``a < -0.9`` | 0 MB/s: promotion off |
    | | ``-0.9 <= a <= 1`` | ``max_promote_mbps ** ((a + 0.9) / 1.9)``: 1 MB/s .. 65536 MB/s |
    | tiering mode | ``a`` | mode ``floor((a + 1) / 2 * M)`` of the ``M`` listed |

    Each tenant's weights are reduced by their gcd; all 0 is local-first. Box values
    outside [-1, 1] are clipped; NaN or a wrong shape raises ``ValueError``. With
    ``action_type="discrete"``: a ``MultiDiscrete`` whose weight entries pick one of
    ``envs.spaces.WEIGHT_LEVELS``, the rate one of ``RATE_LEVELS_MBPS``, the mode
    its index. The modes are ``envs.spaces.TIERING_MODES`` (``default``, ``tpp``,
    ``memcg-fair``, ``damon``, ``no-demotion``).

    ## Observation Space

    ``Box(0, 1, (3N + T(14+N) + 7,), float32)`` with ``observation="full"`` (the
    default); ``"cgroup"``: ``3N + T(16+N) + 7``; ``"demand"``: ``3N + T(17+N) + 7``;
    ``"topology"``: ``3N + T(18+N) + 7``;
    ``"basic"``: ``3N + T(6+N) + 3``.
    Everything a kernel can observe:

    | index | entry | normalisation |
    |---|---|---|
    | ``3n+0`` | node ``n`` utilisation (bottleneck resource) | 0..1 |
    | ``3n+1`` | node ``n`` loaded latency over idle | ``min((L/L0-1)/4, 1)`` |
    | ``3n+2`` | node ``n`` capacity used | fraction of the node |
    | ``3N+Pt+0`` | tenant slot ``t`` present (the mask of empty slots) | 0/1 |
    | ``+1`` | normalised performance (vs alone in local DRAM) | ``min(perf/2, 1)`` |
    | ``+2`` | share of its accesses served by DRAM | 0..1 |
    | ``+3`` | share of its pages resident in DRAM | 0..1 |
    | ``+4`` | bandwidth demand (throughput at idle latency) | over the machine's read peak |
    | ``+5`` | read fraction | 0..1 |
    | ``+6..+5+N`` | interleave weights in force | fractions |
    | ``+6+N`` | ``"full"``: upcoming (runs in the next interval) | 0/1 |
    | ``+7+N..+13+N`` | its spec: threads, working set, working set over DRAM, read fraction, access share of its hottest 2%, socket, demand alone | ``log2(1+n)/8``, ``log2(1+GiB)/log2(2049)``, capped 1, 0..1, 0..1, 0/1, over the peak |
    | ``+14+N..+15+N`` | ``"cgroup"`` only: memory.low and memory.high in force (tier-aware: scaled to the DRAM share) over the working set | capped 1 (no memory.high: 1) |
    | ``+16+N`` | ``"demand"`` only: zero-load demand in its local DRAM over that node's peak | ``log2(1+x)/4``, capped 1 |
    | ``+17+N`` | ``"topology"`` only: DRAM share of bandwidth-proportional interleave (the kernel's auto weights) over its nearest DRAM and CXL nodes | 0..1 (1: no CXL near) |
    | ``-7..-4`` | ``"full"``: DRAM and CXL capacity, promotion limit in force, interval | ``log2(1+GiB)/log2(2049)``, ``log1p(MB/s)/log1p(65536)``, ``s/10`` |
    | ``-3`` | promotion traffic | ``log1p(MB/s)/log1p(65536)`` |
    | ``-2`` | demotion traffic | ``log1p(MB/s)/log1p(65536)`` |
    | ``-1`` | time in the episode | ``t / episode_steps`` |

    ``P`` is a slot's size (``6+N``, ``14+N``, ``16+N``, ``17+N`` or ``18+N``); each layout's
    rows hold for the layouts after it (``"full"``, ``"cgroup"``, ``"demand"``, ``"topology"``).
    ``params.encoder.names(node_names)`` names every entry. An empty slot's entries are
    all 0. A tenant's descriptors appear in the observation that decides the interval it
    starts in, so its initial placement is an informed choice.

    ## Rewards

    ``log-geomean`` (default): ``(1/n) sum_t log(perf_t)`` over the ``n`` active
    tenants, the log of the geometric mean of normalised performance;
    ``throughput``: total throughput over the machine's peak bandwidth;
    ``weighted-speedup``: ``sum_t perf_t``; ``harmonic``: ``n / sum_t 1/perf_t``.
    Every term is in ``info`` as ``reward_<name>`` (0 with no active tenant).

    ## Starting State

    Nothing allocated; tenants that start at 0 s allocate in the first step by
    the first action's weights. The first observation holds only presence, read
    fraction, the weights in force (the scenario's initial ``weights``), the time
    and the descriptors and globals. ``reset(seed=s)`` determines the episode by
    ``s``: with ``jitter`` it scales tenants' parameters by seeded factors, and a
    family draws the scenario from its split's pool by the episode seed.

    ## Episode End

    Truncated after the scenario's ``episode_steps`` (100 for the ``mixed``
    families); never terminated. ``step()`` after the end raises ``RuntimeError``.

    ## Info

    ``reset()``: ``scenario`` and ``tenant_names``. ``step()``: every field of
    :class:`envs.core.Metrics` by name (the vector env: arrays over instances).
    Per node (``N``,): ``node_bandwidth_gbps``, ``node_read_gbps``,
    ``node_write_gbps``, ``node_peak_gbps``, ``node_utilization``,
    ``node_latency_ns``, ``node_capacity_used_gib``, ``node_capacity_gib``; per
    tenant slot (``T``,): ``tenant_active``, ``tenant_throughput_gbps``,
    ``tenant_demand_gbps``, ``tenant_norm_perf``, ``tenant_latency_ns``,
    ``tenant_dram_access_share``, ``tenant_dram_resident_gib``,
    ``tenant_resident_gib``, ``tenant_working_set_gib``, ``tenant_read_fraction``;
    ``interleave_weights`` (``T, N`` integers in force), ``promote_rate_mbps``,
    ``tiering_mode``, ``promotion_mbps``, ``demotion_mbps``,
    ``promotion_candidates_mbps``, ``total_throughput_gbps``, ``reward_*`` terms,
    ``solver_residual``, ``solver_iterations``, ``solver_converged``,
    ``episode_step``. The machine of the running episode: ``env.hardware()``.

    ## Arguments

    ``render_mode`` must be ``None`` (the environment does not render).
    {args}
    ## Version History

    - v0: first release; the info gained every field of ``Metrics`` (added keys only), then
      the ``reward_baseline`` argument and its two info keys (0 without it).
    """

    metadata = {"render_modes": []}  # noqa: RUF012 - Gymnasium declares it as an instance attribute

    def __init__(self, render_mode: str | None = None, **kwargs: Any) -> None:
        if render_mode is not None:
            raise ValueError(f"render_mode: got {render_mode!r}, this environment does not render")
        self.params: EnvParams = core.make_params(**kwargs)
        self.num_envs = 1
        self.action_space = self.params.codec.space()
        self.observation_space = self.params.encoder.space()
        self.state: EnvState | None = None
        self.twin = BaselineTwin.of(self.params, 1)

    def _state(self) -> EnvState:
        if self.state is None:
            raise RuntimeError("call reset() before step()")
        return self.state

    @property
    def tenant_names(self) -> list[str]:
        return self._state().instance.tenant_names[0]

    @property
    def node_names(self) -> list[str]:
        return self.params.node_names

    def hardware(self) -> Hardware:
        """The machine of the current episode (arrays with a batch axis of 1)."""
        return core.hardware(self._state())

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None or self.state is None:
            base = seed if seed is not None else int(self.np_random.integers(2**63))
            seeds = np.array([base], dtype=np.uint64)
            self.state, obs = paired.reset(self.params, seeds, self.twin)
        else:
            done = np.ones(1, dtype=bool)
            self.state, obs = core.reset_where(self.params, self.state, done)
            if self.twin is not None:
                self.twin.restarted(self.state, done)
        inst = self.state.instance
        return obs[0], {"scenario": inst.scenario_names[0], "tenant_names": inst.tenant_names[0]}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        state = self._state()
        if state.done[0]:
            raise RuntimeError("step() after the episode ended: call reset()")
        a = self.params.codec.check(action)
        self.state, obs, reward, term, trunc, metrics = paired.step(
            self.params, state, a[None], self.twin
        )
        info = {k: v[0] for k, v in metrics.items()}
        return obs[0], float(reward[0]), bool(term[0]), bool(trunc[0]), info


TieredMemoryEnv.__doc__ = (TieredMemoryEnv.__doc__ or "").replace("{args}", _DOC_ARGS)


class TieredMemoryVecEnv(VectorEnv):
    """Native vector version of :class:`TieredMemoryEnv` (one batched model for all instances).

    Autoreset happens in the same step: a finished instance returns the first
    observation of its next episode, and ``infos["final_obs"]`` (an object
    array, ``None`` elsewhere) and ``infos["final_info"]`` (batched arrays
    with the mask ``infos["_final_info"]``) hold what its episode ended with,
    as ``gymnasium.vector.SyncVectorEnv`` does in ``SAME_STEP`` mode. Each
    instance may run a different scenario of the family. Seeds: ``reset(seed=s)``
    gives instance ``i`` the seed ``s + i``, like ``SyncVectorEnv``.
    """

    metadata = {"render_modes": [], "autoreset_mode": AutoresetMode.SAME_STEP}  # noqa: RUF012

    def __init__(self, num_envs: int = 1, render_mode: str | None = None, **kwargs: Any) -> None:
        if render_mode is not None:
            raise ValueError(f"render_mode: got {render_mode!r}, this environment does not render")
        if num_envs < 1:
            raise ValueError(f"num_envs: got {num_envs}, expected at least 1")
        self.params: EnvParams = core.make_params(**kwargs)
        self.num_envs = num_envs
        self.single_action_space = self.params.codec.space()
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.single_observation_space = self.params.encoder.space()
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.state: EnvState | None = None
        self.twin = BaselineTwin.of(self.params, num_envs)
        self._mask = np.ones(num_envs, dtype=bool)
        self._mask.flags.writeable = False

    def _state(self) -> EnvState:
        if self.state is None:
            raise RuntimeError("call reset() before step()")
        return self.state

    def hardware(self) -> Hardware:
        """Every instance's machine in its current episode (arrays (num_envs, N))."""
        return core.hardware(self._state())

    def reset(
        self, *, seed: int | Sequence[int] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(
            seed=seed
            if seed is None or isinstance(seed, int | np.integer)
            else int(next(iter(seed)))
        )
        if seed is None:
            seeds = self.np_random.integers(2**63, size=self.num_envs).astype(np.uint64)
        elif isinstance(seed, int | np.integer):
            seeds = np.arange(self.num_envs, dtype=np.uint64) + np.uint64(seed)
        else:
            seeds = np.asarray(list(seed), dtype=np.uint64)
            if seeds.shape != (self.num_envs,):
                raise ValueError(f"seed: got {len(seeds)} seeds, expected {self.num_envs}")
        self.state, obs = paired.reset(self.params, seeds, self.twin)
        infos: dict[str, Any] = {}
        for k, v in self._reset_info(np.arange(self.num_envs)).items():
            infos[k] = v
            infos[f"_{k}"] = self._mask
        return obs, infos

    def _reset_info(self, idx: np.ndarray) -> dict[str, np.ndarray]:
        """What a single env's reset() returns, for instances ``idx``, as object arrays."""
        inst = self._state().instance
        scen = np.full(self.num_envs, None, dtype=object)
        names = np.full(self.num_envs, None, dtype=object)
        for i in idx:
            scen[i] = inst.scenario_names[i]
            names[i] = inst.tenant_names[i]
        return {"scenario": scen, "tenant_names": names}

    def step(
        self, actions: Any
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        a = self.params.codec.check(actions, self.num_envs, "actions")
        state = self._state()
        self.state, obs, reward, term, trunc, metrics, final_obs = paired.step_autoreset(
            self.params, state, a, self.twin
        )
        done = term | trunc
        # The layout of SyncVectorEnv in SAME_STEP mode: a finished instance's step
        # info moves to final_info, and its top-level entries are its reset info.
        infos: dict[str, Any] = {}
        if final_obs is None:
            for k, v in metrics.items():
                infos[k] = v
                infos[f"_{k}"] = self._mask
            return obs, reward, term, trunc, infos
        live = ~done
        shape = (-1,) + (1,) * 2
        if live.any():
            for k, v in metrics.items():
                infos[k] = np.where(live.reshape(shape[: v.ndim]), v, np.zeros_like(v))
                infos[f"_{k}"] = live
        fo = np.full(self.num_envs, None, dtype=object)
        for i in np.flatnonzero(done):
            fo[i] = final_obs[i]
        fi: dict[str, Any] = {}
        for k, v in metrics.items():
            fi[k] = np.where(done.reshape(shape[: v.ndim]), v, np.zeros_like(v))
            fi[f"_{k}"] = done
        infos["final_obs"] = fo
        infos["_final_obs"] = done
        infos["final_info"] = fi
        infos["_final_info"] = done
        for k, v in self._reset_info(np.flatnonzero(done)).items():
            infos[k] = v
            infos[f"_{k}"] = done
        return obs, reward, term, trunc, infos

    @property
    def tenant_names(self) -> list[list[str]]:
        return self._state().instance.tenant_names

    @property
    def node_names(self) -> list[str]:
        return self.params.node_names
