"""Gymnasium environments over the batched model: a single env and a native vector env.

Both are thin adapters over one :class:`Engine`, which holds a batch of
model instances and does everything else once: draw scenarios from a family,
decode actions, step the model, encode observations, compute rewards, build
the info arrays, and autoreset finished instances in the same step.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space
from numpy.typing import NDArray

from envs.families import ScenarioFamily, make_family
from envs.model import (
    KernelConfig,
    Outputs,
    Params,
    State,
    _splitmix,
    init_state,
    reset_rows,
    step,
)
from envs.scenario import Scenario
from envs.spaces import REWARDS, ActionCodec, ObservationEncoder, reward_terms

__all__ = ["ENV_ID", "Engine", "TieredMemoryEnv", "TieredMemoryVecEnv"]

ENV_ID = "tiergym/TieredMemory-v0"
ScenarioSpec = str | Path | Mapping[str, Any] | Scenario | ScenarioFamily

# info keys copied from the model's outputs (section 5 of the design brief)
_INFO_KEYS = (
    "node_bandwidth_gbps",
    "node_utilization",
    "node_latency_ns",
    "node_capacity_used_gib",
    "tenant_active",
    "tenant_throughput_gbps",
    "tenant_norm_perf",
    "tenant_latency_ns",
    "tenant_dram_access_share",
    "tenant_dram_resident_gib",
    "promotion_mbps",
    "demotion_mbps",
    "total_throughput_gbps",
    "solver_residual",
)


def _kernel(kernel: KernelConfig | Mapping[str, Any] | None) -> KernelConfig:
    if kernel is None:
        return KernelConfig()
    if isinstance(kernel, KernelConfig):
        return kernel
    known = {f.name for f in dataclasses.fields(KernelConfig)}
    bad = sorted(set(kernel) - known)
    if bad:
        raise ValueError(f"kernel: unknown option(s) {bad}, expected some of {sorted(known)}")
    return KernelConfig(**kernel)


class Engine:
    """A batch of environment instances over the model core (arrays batch-first at its surface)."""

    def __init__(
        self,
        num_envs: int,
        scenario: ScenarioSpec = "mixed",
        split: str = "train",
        max_tenants: int | None = None,
        reward: str = "log-geomean",
        weights: str = "per-tenant",
        action_type: str = "box",
        max_promote_mbps: float = 65536.0,
        kernel: KernelConfig | Mapping[str, Any] | None = None,
        jitter: float = 0.05,
        pool_size: int = 512,
    ) -> None:
        if reward not in REWARDS:
            raise ValueError(f"reward: got {reward!r}, expected one of {list(REWARDS)}")
        self.family = make_family(scenario, pool_size=pool_size)
        self.split = split
        self.family.scenario(split, 0)  # validates the split
        self.T = max_tenants or self.family.max_tenants
        if self.family.max_tenants > self.T:
            raise ValueError(
                f"scenario {self.family.name!r} has up to {self.family.max_tenants} tenants, "
                f"more than max_tenants={self.T} slots"
            )
        self.kernel = _kernel(kernel)
        self.pool = self.family.pool(split, self.T, self.kernel, jitter)
        self.num_envs = num_envs
        self.N = self.pool.n_nodes
        self.reward_name = reward
        self.codec = ActionCodec(self.T, self.N, weights, action_type, max_promote_mbps)
        self.encoder = ObservationEncoder(self.T, self.N)
        # every instance starts on pool row 0; reset() draws the real ones
        self.params: Params = self.pool.subset(np.zeros(num_envs, dtype=np.int64))
        self.state: State = init_state(self.params, np.zeros(num_envs, dtype=np.uint64))
        self.base_seed = np.zeros(num_envs, dtype=np.uint64)
        self.episode = np.zeros(num_envs, dtype=np.uint64)
        self.kernel_weights = np.zeros((num_envs, self.T, self.N), dtype=np.int64)
        self.promote_mbps = np.zeros(num_envs)
        self.last: Outputs | None = None
        self.last_info: dict[str, Any] = {}

    # ---------------------------------------------------------------- helpers
    @property
    def node_names(self) -> list[str]:
        return self.params.node_names

    @property
    def peak_gbps(self) -> NDArray[np.float64]:
        """(B,) the machine's read peak: the sum of the nodes' read peaks."""
        c = self.params.curves
        return np.minimum(c.mem_read, c.link_read).sum(0)

    def _episode_seeds(self, idx: NDArray[np.int64]) -> NDArray[np.uint64]:
        with np.errstate(over="ignore"):
            return _splitmix(
                self.base_seed[idx] * np.uint64(0x9E3779B97F4A7C15) + _splitmix(self.episode[idx])
            )

    def reset_instances(self, idx: NDArray[np.int64]) -> None:
        """New episodes for instances ``idx``: draw a pool scenario and a fresh state (vectorized)."""
        if idx.size == 0:
            return
        seeds = self._episode_seeds(idx)
        rows = (seeds % np.uint64(self.pool.batch_size)).astype(np.int64)
        self.params.set_rows(idx, self.pool.subset(rows))
        reset_rows(self.params, self.state, idx, seeds)
        self.kernel_weights[idx] = 0
        self.promote_mbps[idx] = 0.0

    def observe(self, idx: NDArray[np.int64] | None = None) -> NDArray[np.float32]:
        """Observations (B, size) from the last interval (or the reset state)."""
        p, s = self.params, self.state
        obs = self.encoder.encode(
            self.last,
            idle_ns=p.curves.idle_ns.T,
            capacity_gib=p.capacity_gib.T,
            peak_gbps=self.peak_gbps,
            weights=np.moveaxis(s.weights, -1, 0),
            t=s.t,
            steps=p.episode_steps,
            present=(p.present & (p.start_s <= 0)).T,
            read_fraction=p.read_fraction[:, 0].T,
        )
        return obs if idx is None else obs[idx]

    def info(self, out: Outputs, terms: dict[str, NDArray[np.float64]]) -> dict[str, Any]:
        """Batched info: every value is an array with the batch axis first."""
        d: dict[str, Any] = {k: getattr(out, k) for k in _INFO_KEYS}
        for k, v in terms.items():
            d[f"reward_{k.replace('-', '_')}"] = v
        d["interleave_weights"] = self.kernel_weights.copy()
        d["promote_rate_mbps"] = self.promote_mbps.copy()
        d["episode_step"] = self.state.t.copy()
        return d

    # ---------------------------------------------------------------- API
    def reset(self, seeds: NDArray[np.uint64]) -> NDArray[np.float32]:
        self.base_seed = np.asarray(seeds, dtype=np.uint64).copy()
        self.episode = np.zeros(self.num_envs, dtype=np.uint64)
        self.last = None
        self.reset_instances(np.arange(self.num_envs))
        return self.observe()

    def step(self, actions: Any, autoreset: bool = True) -> tuple[Any, ...]:
        """One interval for every instance; finished instances restart in the same step
        (unless ``autoreset`` is False: the single env leaves that to its ``reset()``).

        Returns ``obs, reward, terminated, truncated, info, done_idx, final_obs, final_info``.
        """
        act, w = self.codec.decode(np.asarray(actions).reshape(self.num_envs, -1))
        self.kernel_weights = np.broadcast_to(w, (self.num_envs, self.T, self.N)).copy()
        self.promote_mbps = act.promote_mbps
        self.state, out = step(self.params, self.state, act, check=False)
        self.last = out
        terms = reward_terms(out, self.peak_gbps)
        reward = terms[self.reward_name].astype(np.float64)
        info = self.info(out, terms)
        self.last_info = info  # every instance's metrics of this step, before any autoreset
        truncated = self.state.t >= self.params.episode_steps
        terminated = np.zeros(self.num_envs, dtype=bool)
        obs = self.observe()
        done = np.flatnonzero(truncated)
        final_obs = final_info = None
        if done.size and autoreset:
            final_obs = obs[done].copy()
            final_info = {k: v[done] for k, v in info.items()}
            self.episode[done] += np.uint64(1)
            self.reset_instances(done)
            obs[done] = self.observe(done)
        return obs, reward, terminated, truncated, info, done, final_obs, final_info


_DOC_ARGS = """
    Arguments (keyword, also through ``gymnasium.make``/``make_vec``):

    - ``scenario``: a shipped scenario name (``envs.scenario_names()``), a YAML
      path, a dict, a :class:`~envs.scenario.Scenario`, or a family (``"mixed"``,
      the default: random multi-tenant machines);
    - ``split``: ``"train"`` or ``"test"`` (the family's disjoint seed splits);
    - ``max_tenants``: tenant slots (default: the family's maximum);
    - ``reward``: ``"log-geomean"`` (default), ``"throughput"``,
      ``"weighted-speedup"`` or ``"harmonic"``;
    - ``weights``: ``"per-tenant"`` (default) or ``"global"`` (one vector for all);
    - ``action_type``: ``"box"`` (default) or ``"discrete"``;
    - ``max_promote_mbps``: top of the promotion-rate scale (default 65536 MB/s);
    - ``kernel``: :class:`~envs.model.KernelConfig` or a dict of its fields
      (demotion, TPP watermark, promotion filters; baselines set these);
    - ``jitter``: per-episode randomisation of tenants' mlp, compute time and
      working set, ``1 +- jitter`` (default 0.05);
    - ``pool_size``: scenarios compiled per split of a family (default 512).
"""


class TieredMemoryEnv(gym.Env[np.ndarray, np.ndarray]):
    """Memory placement on a DRAM + CXL machine shared by several tenants.

    ## Description

    Every step is one control interval (``interval_s`` of simulated time) of a
    machine with local DRAM and CXL memory expanders, shared by tenants
    (cgroups) that start, stop and change phase. The policy sets each tenant's
    weighted-interleave weights (where its new and churned pages go,
    ``MPOL_WEIGHTED_INTERLEAVE``) and the hot-page promotion rate limit
    (``numa_balancing_promote_rate_limit_MBps``). The model solves, per
    interval, the closed-loop fixed point of every tenant's request rate and
    every node's loaded latency (calibrated on Intel MLC curves of DDR5 and an
    A1000 CXL expander; see ``docs/model.md``).

    ## Action Space

    ``Box(-1, 1, (T*N + 1,))`` per tenant (``T`` slots, ``N`` nodes) or
    ``Box(-1, 1, (N + 1,))`` with ``weights="global"``; the last entry is the
    promotion rate. An entry below -0.9 is "off" (node outside the interleave
    mask, promotion disabled); otherwise weights are integers 1..255 on a log
    scale, reduced by their gcd, and the rate is 1 MB/s .. ``max_promote_mbps``
    on a log scale (``envs.spaces``). With ``action_type="discrete"`` a
    ``MultiDiscrete`` over ``WEIGHT_LEVELS`` and ``RATE_LEVELS_MBPS``. NaN or a
    wrong shape raises ``ValueError``; box values outside [-1, 1] are clipped.

    ## Observation Space

    ``Box(0, 1, (3N + T(6+N) + 3,), float32)``, everything a kernel can observe:

    | index | entry | normalisation |
    |---|---|---|
    | ``3n+0`` | node ``n`` utilisation (bottleneck resource) | 0..1 |
    | ``3n+1`` | node ``n`` loaded latency over idle | ``min((L/L0-1)/4, 1)`` |
    | ``3n+2`` | node ``n`` capacity used | fraction of the node |
    | ``3N+(6+N)t+0`` | tenant slot ``t`` present (mask of empty slots) | 0/1 |
    | ``+1`` | normalised performance (vs alone in local DRAM) | ``min(perf/2, 1)`` |
    | ``+2`` | share of its accesses served by DRAM | 0..1 |
    | ``+3`` | share of its pages resident in DRAM | 0..1 |
    | ``+4`` | bandwidth demand (throughput at idle latency) | over the machine's read peak |
    | ``+5`` | read fraction | 0..1 |
    | ``+6..+6+N`` | interleave weights in force | fractions |
    | ``-3`` | promotion traffic | ``log1p(MB/s)/log1p(65536)`` |
    | ``-2`` | demotion traffic | ``log1p(MB/s)/log1p(65536)`` |
    | ``-1`` | time in the episode | ``t / episode_steps`` |

    An empty slot's entries are all 0. At a reset only presence, read
    fraction, weights and time are filled.

    ## Rewards

    ``log-geomean`` (default): ``(1/n) sum_t log(perf_t)`` over the ``n`` active
    tenants, the log of the geometric mean of normalised performance;
    ``throughput``: ``sum_t X_t / peak``; ``weighted-speedup``: ``sum_t perf_t``;
    ``harmonic``: ``n / sum_t 1/perf_t``. Every term is in ``info`` as
    ``reward_<name>``.

    ## Starting State

    Nothing allocated; tenants that start at 0 s allocate in the first step by
    the first action's weights. With ``jitter`` each episode scales tenants'
    parameters by seeded factors; a family draws the scenario from its split's
    pool by the episode seed.

    ## Episode End

    Truncated after the scenario's ``episode_steps``; never terminated.

    ## Info

    Per node (``N``,): ``node_bandwidth_gbps``, ``node_utilization``,
    ``node_latency_ns``, ``node_capacity_used_gib``; per tenant slot (``T``,):
    ``tenant_active``, ``tenant_throughput_gbps``, ``tenant_norm_perf``,
    ``tenant_latency_ns``, ``tenant_dram_access_share``,
    ``tenant_dram_resident_gib``; ``interleave_weights`` (``T, N`` integers in
    force), ``promote_rate_mbps``, ``promotion_mbps``, ``demotion_mbps``,
    ``total_throughput_gbps``, ``reward_*`` terms, ``solver_residual``,
    ``episode_step``.
    {args}
    ## Version History

    - v0: first release.
    """

    metadata = {"render_modes": []}  # noqa: RUF012 - Gymnasium declares it as an instance attribute

    def __init__(self, render_mode: str | None = None, **kwargs: Any) -> None:
        if render_mode is not None:
            raise ValueError(f"render_mode: got {render_mode!r}, this environment does not render")
        self.engine = Engine(1, **kwargs)
        self.action_space = self.engine.codec.space()
        self.observation_space = self.engine.encoder.space()
        self._seeded = False

    @property
    def tenant_names(self) -> list[str]:
        return self.engine.params.tenant_names[0]

    @property
    def node_names(self) -> list[str]:
        return self.engine.node_names

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        e = self.engine
        if seed is not None or not self._seeded:
            base = seed if seed is not None else int(self.np_random.integers(2**63))
            obs = e.reset(np.array([base], dtype=np.uint64))
            self._seeded = True
        else:
            e.episode += np.uint64(1)
            e.last = None
            e.reset_instances(np.arange(1))
            obs = e.observe()
        return obs[0], {"scenario": e.params.scenario_names[0], "tenant_names": self.tenant_names}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        e = self.engine
        if e.state.t[0] >= e.params.episode_steps[0]:
            raise RuntimeError("step() after the episode ended: call reset()")
        a = np.asarray(action)
        if a.shape != self.action_space.shape:
            raise ValueError(f"action: got shape {a.shape}, expected {self.action_space.shape}")
        obs, reward, term, trunc, info, *_ = e.step(a[None], autoreset=False)
        return (
            obs[0],
            float(reward[0]),
            bool(term[0]),
            bool(trunc[0]),
            {k: v[0] for k, v in info.items()},
        )


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
        self.engine = Engine(num_envs, **kwargs)
        self.num_envs = num_envs
        self.single_action_space = self.engine.codec.space()
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.single_observation_space = self.engine.encoder.space()
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self._mask = np.ones(num_envs, dtype=bool)

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
        obs = self.engine.reset(seeds)
        everyone = np.arange(self.num_envs)
        infos: dict[str, Any] = {}
        for k, v in self._reset_info(everyone).items():
            infos[k] = v
            infos[f"_{k}"] = self._mask
        return obs, infos

    def _reset_info(self, idx: np.ndarray) -> dict[str, np.ndarray]:
        """What a single env's reset() returns, for instances ``idx``, as object arrays."""
        scen = np.full(self.num_envs, None, dtype=object)
        names = np.full(self.num_envs, None, dtype=object)
        for i in idx:
            scen[i] = self.engine.params.scenario_names[i]
            names[i] = self.engine.params.tenant_names[i]
        return {"scenario": scen, "tenant_names": names}

    def step(
        self, actions: Any
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        a = np.asarray(actions)
        if a.shape != self.action_space.shape:
            raise ValueError(f"actions: got shape {a.shape}, expected {self.action_space.shape}")
        obs, reward, term, trunc, info, done, final_obs, final_info = self.engine.step(a)
        # The layout of SyncVectorEnv in SAME_STEP mode: a finished instance's step
        # info moves to final_info, and its top-level entries are its reset info.
        infos: dict[str, Any] = {}
        live = np.ones(self.num_envs, dtype=bool)
        live[done] = False
        if live.any():
            for k, v in info.items():
                infos[k] = (
                    v
                    if not done.size
                    else np.where(live.reshape((-1,) + (1,) * (v.ndim - 1)), v, np.zeros_like(v))
                )
                infos[f"_{k}"] = live
        if done.size:
            mask = ~live
            fo = np.full(self.num_envs, None, dtype=object)
            for j, i in enumerate(done):
                fo[i] = final_obs[j]
            fi: dict[str, Any] = {}
            for k, v in final_info.items():
                arr = np.zeros((self.num_envs, *v.shape[1:]), dtype=v.dtype)
                arr[done] = v
                fi[k] = arr
                fi[f"_{k}"] = mask
            infos["final_obs"] = fo
            infos["_final_obs"] = mask
            infos["final_info"] = fi
            infos["_final_info"] = mask
            for k, v in self._reset_info(done).items():
                infos[k] = v
                infos[f"_{k}"] = mask
        return obs, reward, term, trunc, infos

    @property
    def tenant_names(self) -> list[list[str]]:
        return self.engine.params.tenant_names

    @property
    def node_names(self) -> list[str]:
        return self.engine.node_names
