"""Residual actions: a trained policy adjusts a named heuristic's decision.

With ``env.base_policy`` set (a heuristic name of :func:`baselines.policy_names`),
the agent's action is a residual over the heuristic's box action::

    action = clip(base_action + residual_scale * residual, -1, 1)

entry by entry (per-tenant weights on the codec's log scale, the promotion
rate, and the tiering-mode entry when the environment has one), so the zero
residual IS the heuristic and learning starts from it. The agent observes the
environment's observation followed by the base action mapped to [0, 1]
(``(a + 1) / 2``), so it sees what the heuristic is about to do.

The heuristic keeps its own kernel settings through the tiering-mode action
(:data:`envs.spaces.TIERING_MODES`): its base action picks the mode its
``kernel`` is; an environment without that mode refuses the heuristic with an
error that names it.

The same :class:`ResidualBase` drives training (:class:`ResidualVecEnv`, an SB3
``VecEnvWrapper``) and evaluation (:class:`agents.evaluation.LearnedPolicy`),
in the order of the rollout loop (observe the step's metrics, then decide with
``episode_start``), so a trained model is evaluated exactly as it was trained.
A run folder records ``base_policy`` and ``residual_scale`` in its env settings.

Several bases (``base_policy: [colloid, tpp, weighted-interleave, dram-first, ...]``):
the agent observes every base's action and its action gains one mixing entry
``m_j`` per base after the first; the residual applies to
``base_0 + sum_j clip(m_j, 0, 1) * (base_j - base_0)`` (the clipped entries
scaled to sum to at most 1). The zero action is the first heuristic, an entry
of 1 (the others at or under 0) is heuristic ``j`` exactly, and anything between
moves the decision part of the way, so a small change of an entry changes the
outcome a little and the gradient can find which heuristic to lean on for
which machine and mix (the best heuristic differs by scenario:
``best-heuristic-per-episode``). With ``mixing: hard`` the agent follows one base
whole instead: the one with the largest entry above 0, else the first; a blend of
two good bases can be worse than either (interleave weights and tiering modes do
not average), and a policy fitted to pick one (:mod:`agents.imitation`) is read
the way it was fitted. Each base sees every step's counters, so each
keeps its own controller state while another is followed.

``residual_bases`` (default: every base) names the bases the residual adjusts;
it is scaled by their share of the decision, so with ``mixing: hard`` a base
outside the list runs exactly as that heuristic does whatever the residual
entries hold, and a listed one is the start of the agent's own decision. The
plan labels of the warm start (``imitation_plans``, :mod:`agents.imitation`) list
``dram-first`` (local-first, promotion off: a static action) with a scale that
spans the whole box (2.0): following it, the residual IS the agent's per-tenant
placement and rate, fitted to a planner's plans.

``residual_codec: share`` writes the residual's weights as one entry per weight row
(tenant slot) instead of one per row and node: the row's DRAM share of new pages,
``x = x_base + residual_scale * SHARE_TOP / 2 * r`` clipped to ``0..SHARE_TOP``, where
``x_base`` is the share of the base's weights (:data:`SHARE_TOP` where it has none:
local-first). ``x`` above 1 is local-first (all weights 0, Linux's default), ``0 <= x <= 1``
interleaves ``x`` of new pages over the DRAM nodes and the rest over the CXL nodes, each
tier split by firmware bandwidth (:func:`baselines.policies.share_or_local_to_weights`, the
planner's mapping); a row whose residual is 0 keeps the base's weights exactly, so the
zero residual is still the heuristic. One number per tenant is the quantity the
planner's headroom is made of (issue #12), where the box codec asks a regression for a
log weight and an on/off threshold per node; its size does not depend on the machine.

One policy for every machine (``pad_nodes: N``): the agent sees node entries
padded to ``N`` nodes, each with a mask and its descriptors (kind, socket, read
peak, idle latency: what HMAT/CDAT give), and per-tenant weights over ``N``
nodes of which those of padded nodes are dropped; so one network runs on
machines of 2 to ``N`` nodes. ``train_families`` trains it on several machine
shapes at once (:class:`ConcatVecEnv`, one batch per family).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from gymnasium import spaces
from numpy.typing import NDArray
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvStepReturn, VecEnvWrapper

from baselines.placement import SHARE_TOP, dram_share, share_or_local_to_weights
from envs.core import EnvParams, Hardware
from envs.spaces import NODE_ENTRIES, TENANT_ENTRIES, tiering_mode_of

__all__ = [
    "RESIDUAL_CODECS",
    "RESIDUAL_KEYS",
    "SHARE_TOP",
    "AgentInterface",
    "AgentVecEnv",
    "ConcatVecEnv",
    "agent_layout",
    "agent_spaces",
    "base_names",
    "core_kwargs",
    "dram_share",
    "make_interface",
    "make_training_vec_env",
    "residual_base_mask",
]

#: Env settings of the residual wrapper (the rest go to :func:`envs.core.make_params`).
RESIDUAL_KEYS = (
    "base_policy",
    "residual_scale",
    "mixing",
    "residual_bases",
    "residual_codec",
    "pad_nodes",
    "train_families",
)
NODE_DESCRIPTORS = ("mask", "is_cxl", "socket", "read_peak", "idle_latency")
DEFAULT_RESIDUAL_SCALE = 1.0
#: How the mixing entries combine several bases (the first is the default): ``soft`` moves
#: the decision part of the way towards each base; ``hard`` follows one base whole (the largest entry above 0, else
#: the first base).
MIXINGS = ("soft", "hard")
#: How the residual adjusts the weights (``residual_codec``; the first is the default): ``box``
#: entry by entry on the codec's log scale, ``share`` one DRAM share per weight row.
RESIDUAL_CODECS = ("box", "share")
def residual_base_mask(
    base_policy: str | Sequence[str] | None, residual_bases: Sequence[str] | None
) -> NDArray[np.bool_]:
    """(K,) which of the bases the residual adjusts (``residual_bases``; ``None``: all of them).

    Raises:
        ValueError: ``residual_bases`` names a heuristic that is not a base, or none.
    """
    names = base_names(base_policy)
    if residual_bases is None:
        return np.ones(len(names), dtype=bool)
    picked = list(residual_bases)
    bad = [n for n in picked if n not in names]
    if not picked or bad or len(set(picked)) != len(picked):
        raise ValueError(
            f"residual_bases: got {picked!r}, expected distinct names of base_policy {names}"
        )
    return np.array([n in picked for n in names], dtype=bool)


def base_names(base_policy: str | Sequence[str] | None) -> list[str]:
    """``base_policy`` as a list of heuristic names (empty: no base)."""
    if base_policy is None:
        return []
    if isinstance(base_policy, str):
        return [base_policy]
    names = list(base_policy)
    if not names or len(set(names)) != len(names):
        raise ValueError(f"base_policy: got {names!r}, expected distinct heuristic names")
    return names


def core_kwargs(env_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """``env_kwargs`` without the residual settings: what :func:`envs.core.make_params` takes."""
    return {k: v for k, v in env_kwargs.items() if k not in RESIDUAL_KEYS}


def padded_sizes(params: EnvParams, pad_nodes: int) -> tuple[int, int]:
    """(observation, box action) sizes of the agent's padded view of ``params`` (no base part)."""
    if params.n_nodes > pad_nodes:
        raise ValueError(
            f"pad_nodes: the machine has {params.n_nodes} nodes {params.node_names}, more than {pad_nodes}"
        )
    if not params.encoder.n_desc:
        raise ValueError("pad_nodes: needs observation='full' or 'cgroup' (the tenant descriptors)")
    enc, codec = params.encoder, params.codec
    per_tenant = enc.per_tenant - params.n_nodes + pad_nodes
    glob = enc.n_glob
    obs = pad_nodes * (len(NODE_ENTRIES) + len(NODE_DESCRIPTORS)) + enc.T * per_tenant + glob
    act = codec.n_weight_rows * pad_nodes + codec.size - codec.n_weight_rows * codec.n_nodes
    return obs, act


def agent_spaces(
    params: EnvParams,
    base_policy: str | Sequence[str] | None,
    pad_nodes: int | None = None,
    residual_codec: str = RESIDUAL_CODECS[0],
) -> tuple[spaces.Box, spaces.Space]:
    """The agent's observation and action spaces on ``params`` (bases and padding optional).

    With ``K`` bases the observation ends with the ``K`` base actions (box layout, padded)
    and the action with ``K - 1`` mixing entries; with ``residual_codec="share"`` the action's
    weights are one entry per weight row.
    """
    k = len(base_names(base_policy))
    obs, act = params.encoder.space(), params.codec.space()
    if k == 0 and pad_nodes is None:
        return obs, act
    if params.codec.action_type != "box":
        raise ValueError(
            f"residual actions and node padding need action_type='box' "
            f"(got {params.codec.action_type!r})"
        )
    n_obs, n_box = params.encoder.size, params.codec.size
    if pad_nodes is not None:
        n_obs, n_box = padded_sizes(params, pad_nodes)
    n_act = n_box
    if residual_codec == "share":
        c = params.codec
        n_act = c.n_weight_rows + c.size - c.n_weight_rows * c.n_nodes
    size = n_obs + k * n_box
    return (
        spaces.Box(0.0, 1.0, shape=(size,), dtype=np.float32),
        spaces.Box(-1.0, 1.0, shape=(n_act + max(k - 1, 0),), dtype=np.float32),
    )


def agent_layout(params: EnvParams, interface: AgentInterface) -> dict[str, int]:
    """The layout of the agent's observation and action on ``params``, for
    :class:`agents.networks.TenantPolicy` (``policy_kwargs.layout``).

    Raises:
        ValueError: the interface has no node padding (the layout needs the padded view),
            or the weights are global.
    """
    if interface.pad_nodes is None:
        raise ValueError("TenantPolicy: needs env.pad_nodes (the padded view it reads)")
    enc, codec = params.encoder, params.codec
    if codec.n_weight_rows != enc.T:
        raise ValueError("TenantPolicy: needs --weights per-tenant (a weight row per tenant slot)")
    M, N, T = interface.pad_nodes, params.n_nodes, enc.T
    per = enc.per_tenant - N + M
    n_box = padded_sizes(params, M)[1]
    return {
        "nodes": M,
        "node_features": len(NODE_ENTRIES) + len(NODE_DESCRIPTORS),
        "node_mask": len(NODE_ENTRIES) + NODE_DESCRIPTORS.index("mask"),
        "tenants": T,
        "tenant_features": per,
        "tenant_present": 0,
        "tenant_upcoming": len(TENANT_ENTRIES) + M + enc.desc_names.index("upcoming"),
        "globals": enc.n_glob,
        "bases": len(interface.names),
        "base_action": n_box,
        "shares": codec.n_weight_rows if interface.codec == "share" else 0,
    }


class AgentInterface:
    """What sits between an environment and a trained network: base heuristic, node padding.

    ``obs_to_agent`` turns the environment's observation into the agent's (padded to
    ``pad_nodes`` nodes, then the base action if any); ``action_to_env`` turns the
    agent's action into the environment's (padded weights dropped, then added to the
    base action). Call :meth:`observe` after every reset and step, then :meth:`decide`.

    Args:
        base_policy: a heuristic name (``baselines.make_policy``), a list of them
            (the agent mixes them; the first is the zero action's) or ``None``.
        scale: the residual's scale (``residual_scale``; 1.0: a residual of 1
            moves an entry half its range).
        pad_nodes: nodes of the agent's view (``None``: the machine's own).
        mixing: ``soft`` or ``hard`` (:data:`MIXINGS`): how several bases combine.
        residual_bases: the bases the residual adjusts (default: all;
            :func:`residual_base_mask`).
        residual_codec: ``box`` or ``share`` (:data:`RESIDUAL_CODECS`): how the residual
            adjusts the weights (the module docstring).
    """

    def __init__(
        self,
        base_policy: str | Sequence[str] | None = None,
        scale: float = DEFAULT_RESIDUAL_SCALE,
        pad_nodes: int | None = None,
        mixing: str = MIXINGS[0],
        residual_bases: Sequence[str] | None = None,
        residual_codec: str = RESIDUAL_CODECS[0],
    ) -> None:
        if not (math.isfinite(scale) and scale > 0):
            raise ValueError(f"residual_scale: got {scale}, expected a number > 0")
        if mixing not in MIXINGS:
            raise ValueError(f"mixing: got {mixing!r}, expected one of {list(MIXINGS)}")
        self.mixing = mixing
        if residual_codec not in RESIDUAL_CODECS:
            raise ValueError(
                f"residual_codec: got {residual_codec!r}, expected one of {list(RESIDUAL_CODECS)}"
            )
        if residual_codec == "share" and base_policy is None:
            raise ValueError(
                "residual_codec: 'share' needs base_policy (a residual over a heuristic)"
            )
        self.codec = residual_codec
        if pad_nodes is not None and pad_nodes < 1:
            raise ValueError(f"pad_nodes: got {pad_nodes}, expected at least 1")
        self.names = base_names(base_policy)
        #: (K,) the bases the residual adjusts
        self.residual_mask = residual_base_mask(base_policy, residual_bases)
        self.scale = float(scale)
        self.pad_nodes = pad_nodes
        self.policies: list[Any] = []
        if self.names:
            from baselines import make_policy  # agents may import baselines; envs may not

            self.policies = [make_policy(n) for n in self.names]
        self.params: EnvParams | None = None
        self.hw: Hardware | None = None
        self.modes = [0] * len(self.names)
        #: the last base actions: (B, size) with one base, (B, K, size) with K > 1
        self.base: NDArray[np.float32] | None = None
        #: each base's share of the decision at the last :meth:`action_to_env` (B, K)
        self.mix: NDArray[np.float32] | None = None

    @property
    def active(self) -> bool:
        return bool(self.names) or self.pad_nodes is not None

    def spaces(self, params: EnvParams) -> tuple[spaces.Box, spaces.Space]:
        return agent_spaces(params, self.names or None, self.pad_nodes, self.codec)

    def bind(self, params: EnvParams, num_envs: int) -> None:
        """Attach to the environment; checks each heuristic's kernel is one of its modes."""
        self.spaces(params)  # checks the layout
        for k, (name, policy) in enumerate(zip(self.names, self.policies, strict=True)):
            kern = policy.kernel
            if params.codec.modes:
                try:
                    self.modes[k] = tiering_mode_of(kern, params.kernel, params.codec.modes)
                except ValueError as exc:
                    raise ValueError(f"base_policy {name!r}: {exc}") from None
            elif kern != params.kernel:
                raise ValueError(
                    f"base_policy {name!r} runs its own kernel settings {kern!r}; give the "
                    "environment tiering_modes that include them (envs.spaces.TIERING_MODES)"
                )
            policy.bind(params, num_envs)
        self.params = params

    def observe(self, metrics: Mapping[str, Any] | None, hardware: Hardware) -> None:
        self.hw = hardware
        for policy in self.policies:
            policy.observe(metrics, hardware)

    def decide(self, obs: NDArray, episode_start: NDArray | None) -> NDArray[np.float32] | None:
        """The heuristics' box actions for this step (their tiering modes included):
        (B, size) with one base, (B, K, size) with K."""
        if self.params is None:
            raise RuntimeError("AgentInterface: not bound; call bind(params, num_envs)")
        if not self.policies:
            return None
        acts = []
        for policy, mode in zip(self.policies, self.modes, strict=True):
            act, _ = policy.predict(obs, episode_start=episode_start)
            act = np.array(act, dtype=np.float32).reshape(obs.shape[0], -1)
            if self.params.codec.modes:
                act[:, -1] = self.params.codec.mode_entry(mode)
            acts.append(act)
        self.base = acts[0] if len(acts) == 1 else np.stack(acts, axis=1)
        return self.base

    # ------------------------------------------------------------------ padding
    def pad_action(self, a: NDArray, fill: float) -> NDArray[np.float32]:
        """Env-layout actions (B, size) -> the padded layout (padded weights ``fill``)."""
        assert self.params is not None and self.pad_nodes is not None
        c = self.params.codec
        R, N, M = c.n_weight_rows, c.n_nodes, self.pad_nodes
        w = np.full((a.shape[0], R, M), fill, dtype=np.float32)
        w[:, :, :N] = a[:, : R * N].reshape(-1, R, N)
        return np.concatenate([w.reshape(a.shape[0], -1), a[:, R * N :]], axis=1)

    def _unpad_action(self, a: NDArray) -> NDArray[np.float32]:
        assert self.params is not None and self.pad_nodes is not None
        c = self.params.codec
        R, N, M = c.n_weight_rows, c.n_nodes, self.pad_nodes
        w = a[:, : R * M].reshape(-1, R, M)[:, :, :N]
        return np.concatenate([w.reshape(a.shape[0], -1), a[:, R * M :]], axis=1)

    def _pad_obs(self, obs: NDArray, rows: NDArray | None = None) -> NDArray[np.float32]:
        assert self.params is not None and self.pad_nodes is not None
        if self.hw is None:
            raise RuntimeError("AgentInterface: observe(None, hardware) after the reset first")
        enc, hw = self.params.encoder, self.hw
        B, N, M, T = obs.shape[0], enc.N, self.pad_nodes, enc.T
        sel = slice(None) if rows is None else rows
        F = len(NODE_ENTRIES)
        node = np.zeros((B, M, F + len(NODE_DESCRIPTORS)), dtype=np.float32)
        node[:, :N, :F] = obs[:, : F * N].reshape(B, N, F)
        desc = {
            "mask": 1.0,
            "is_cxl": hw.is_cxl[sel],
            "socket": np.minimum(hw.socket[sel], 1),
            "read_peak": np.log2(1.0 + hw.read_gbps[sel]) / np.log2(1.0 + 512.0),
            "idle_latency": np.minimum(hw.idle_latency_ns[sel] / 1000.0, 1.0),
        }
        for j, k in enumerate(NODE_DESCRIPTORS):
            node[:, :N, F + j] = desc[k]
        per, E = enc.per_tenant, len(TENANT_ENTRIES)
        ten = obs[:, F * N : F * N + T * per].reshape(B, T, per)
        pt = np.zeros((B, T, per - N + M), dtype=np.float32)
        pt[:, :, :E] = ten[:, :, :E]
        pt[:, :, E : E + N] = ten[:, :, E : E + N]
        pt[:, :, E + M :] = ten[:, :, E + N :]
        rest = obs[:, F * N + T * per :]
        return np.concatenate([node.reshape(B, -1), pt.reshape(B, -1), rest], axis=1)

    # ------------------------------------------------------------------ the two directions
    def obs_to_agent(
        self, obs: NDArray, base: NDArray | None, rows: NDArray | None = None
    ) -> NDArray[np.float32]:
        """What the agent observes: the (padded) observation, then the base action on [0, 1].

        ``rows``: the instances ``obs`` belongs to (default: all, in order).
        """
        o = self._pad_obs(obs, rows) if self.pad_nodes is not None else np.asarray(obs, np.float32)
        if base is None:
            return o.astype(np.float32)
        parts = [base] if base.ndim == 2 else [base[:, k] for k in range(base.shape[1])]
        if self.pad_nodes is not None:
            parts = [self.pad_action(b, -1.0) for b in parts]
        return np.concatenate([o, *((b + 1.0) / 2.0 for b in parts)], axis=1).astype(np.float32)

    def action_to_env(self, base: NDArray | None, action: NDArray) -> NDArray[np.float32]:
        """The action the environment runs: ``clip(base + scale * gate * residual, -1, 1)``, the
        base being the mix of the bases that the mixing entries give and ``gate`` the share
        of the decision that comes from the bases the residual adjusts (1 with every base)."""
        a = np.clip(np.asarray(action, dtype=np.float32).reshape(len(action), -1), -1.0, 1.0)
        gate: NDArray[np.float32] | float = 1.0
        if base is not None and base.ndim == 3:
            extra = base.shape[1] - 1
            m = np.clip(a[:, a.shape[1] - extra :], 0.0, 1.0)
            if self.mixing == "hard":  # one base whole: the largest entry above 0, else the first
                top = np.argmax(m, axis=1)
                m = np.where(
                    (np.arange(extra) == top[:, None]) & (m.max(axis=1) > 0)[:, None], 1.0, 0.0
                )
            m /= np.maximum(m.sum(axis=1, keepdims=True), 1.0)
            a = a[:, : a.shape[1] - extra]
            self.mix = np.concatenate([1.0 - m.sum(axis=1, keepdims=True), m], axis=1)
            base = base[:, 0] + np.einsum("bj,bjs->bs", m, base[:, 1:] - base[:, :1])
            if not self.residual_mask.all():
                gate = self.mix[:, self.residual_mask].sum(axis=1, keepdims=True)
        elif base is not None:
            self.mix = np.ones((len(a), 1), dtype=np.float32)
        if self.codec == "share":
            assert base is not None  # checked in __init__
            return self._share_action(base, gate, a)
        if self.pad_nodes is not None:
            a = self._unpad_action(a)
        if base is None:
            return a
        return np.clip(base + self.scale * gate * a, -1.0, 1.0).astype(np.float32)

    @property
    def share_span(self) -> float:
        """The share that a residual entry of 1 moves a weight row's DRAM share by."""
        return self.scale * SHARE_TOP / 2.0

    def _share_action(
        self, base: NDArray, gate: NDArray[np.float32] | float, a: NDArray
    ) -> NDArray[np.float32]:
        """``residual_codec="share"``: the env action from the (mixed) base action (B, size)
        and the residual (B, R + rest): each row's DRAM share moved, the rest as the box."""
        assert self.params is not None
        if self.hw is None:
            raise RuntimeError("AgentInterface: observe(None, hardware) after the reset first")
        c, hw = self.params.codec, self.hw
        R, N = c.n_weight_rows, c.n_nodes
        rows = R * N
        base_w = c.box_weights(base[:, :rows].reshape(-1, R, N))
        step = self.share_span * gate * a[:, :R]  # (B, R)
        x = np.clip(dram_share(base_w, hw.is_cxl) + step, 0.0, SHARE_TOP)
        w = share_or_local_to_weights(x, hw.firmware_gbps, hw.is_cxl)
        moved = c.encode_box(w, np.zeros(len(a)))[:, :rows]
        keep = np.repeat(step == 0.0, N, axis=1)  # a zero residual keeps the base's weights
        weights = np.where(keep, base[:, :rows], moved)
        rest = np.clip(base[:, rows:] + self.scale * gate * a[:, R:], -1.0, 1.0)
        return np.concatenate([weights, rest], axis=1).astype(np.float32)


def make_interface(env_kwargs: Mapping[str, Any]) -> AgentInterface:
    """The :class:`AgentInterface` that a run's env settings describe."""
    scale = env_kwargs.get("residual_scale")
    return AgentInterface(
        env_kwargs.get("base_policy"),
        DEFAULT_RESIDUAL_SCALE if scale is None else float(scale),
        env_kwargs.get("pad_nodes"),
        env_kwargs.get("mixing") or MIXINGS[0],
        env_kwargs.get("residual_bases"),
        env_kwargs.get("residual_codec") or RESIDUAL_CODECS[0],
    )


class AgentVecEnv(VecEnvWrapper):
    """The agent's view (:class:`AgentInterface`) of a :class:`envs.sb3.TierGymVecEnv` (training)."""

    def __init__(self, venv: VecEnv, agent: AgentInterface) -> None:
        params = venv.params  # type: ignore[attr-defined]
        obs_space, act_space = agent.spaces(params)
        super().__init__(venv, observation_space=obs_space, action_space=act_space)
        self.agent = agent
        agent.bind(params, venv.num_envs)
        self._base: NDArray[np.float32] | None = None
        self._ready = False

    def reset(self) -> np.ndarray:
        obs = np.asarray(self.venv.reset())
        assert self.agent.params is not None
        self.agent.bind(self.agent.params, self.num_envs)  # fresh controller state
        self.agent.observe(None, self.venv.hardware())  # type: ignore[attr-defined]
        self._base = self.agent.decide(obs, np.ones(self.num_envs, dtype=bool))
        self._ready = True
        return self.agent.obs_to_agent(obs, self._base)

    def step_async(self, actions: np.ndarray) -> None:
        if not self._ready:
            raise RuntimeError("call reset() before step()")
        self.venv.step_async(self.agent.action_to_env(self._base, actions))

    def step_wait(self) -> VecEnvStepReturn:
        raw, reward, done, infos = self.venv.step_wait()
        obs = np.asarray(raw)
        last = self._base
        self.agent.observe(infos[0]["metrics"], self.venv.hardware())  # type: ignore[attr-defined]
        self._base = self.agent.decide(obs, done)
        # the finished instances' last observations, with the last base action they saw,
        # converted in one batch (episodes of a family end together)
        ends = np.array(
            [i for i in np.flatnonzero(done) if "terminal_observation" in infos[i]], dtype=np.int64
        )
        if len(ends):
            term = self.agent.obs_to_agent(
                np.stack([infos[i]["terminal_observation"] for i in ends]),
                None if last is None else last[ends],
                ends,
            )
            for j, i in enumerate(ends):
                infos[i]["terminal_observation"] = term[j]
        return self.agent.obs_to_agent(obs, self._base), reward, done, infos


class ConcatVecEnv(VecEnv):
    """Several vector envs with the same spaces as one batch (one per machine shape).

    Instances ``0..n0-1`` are the first env's, and so on. ``info["metrics"]`` of an
    instance is its own env's batched :class:`~envs.core.Metrics`.
    """

    def __init__(self, venvs: list[VecEnv]) -> None:
        first = venvs[0]
        for v in venvs[1:]:
            if (
                v.observation_space != first.observation_space
                or v.action_space != first.action_space
            ):
                raise ValueError(
                    "train_families: the families give different agent spaces "
                    f"({v.observation_space} vs {first.observation_space}); set pad_nodes"
                )
        self.venvs = venvs
        self.sizes = [v.num_envs for v in venvs]
        self.cuts = np.cumsum([0, *self.sizes])
        super().__init__(sum(self.sizes), first.observation_space, first.action_space)

    @property
    def params(self) -> EnvParams:
        """The first family's parameters (``scenario``: what the callbacks log by name)."""
        params: EnvParams = self.venvs[0].params  # type: ignore[attr-defined]
        return params

    @property
    def env_seconds(self) -> float:
        return float(sum(getattr(v, "env_seconds", 0.0) for v in self.venvs))

    @property
    def env_steps(self) -> int:
        return int(sum(getattr(v, "env_steps", 0) for v in self.venvs))

    def reset(self) -> np.ndarray:
        seeds = self._seeds
        for k, v in enumerate(self.venvs):
            part = seeds[self.cuts[k] : self.cuts[k + 1]]
            if all(s is not None for s in part):
                v.seed(int(part[0]))  # type: ignore[arg-type]
        self._reset_seeds()
        return np.concatenate([v.reset() for v in self.venvs])

    def step_async(self, actions: np.ndarray) -> None:
        for k, v in enumerate(self.venvs):
            v.step_async(actions[self.cuts[k] : self.cuts[k + 1]])

    def step_wait(self) -> VecEnvStepReturn:
        out = [v.step_wait() for v in self.venvs]
        infos: list[dict[str, Any]] = []
        for o in out:
            infos += list(o[3])
        return (
            np.concatenate([o[0] for o in out]),
            np.concatenate([o[1] for o in out]),
            np.concatenate([o[2] for o in out]),
            infos,
        )

    def close(self) -> None:
        for v in self.venvs:
            v.close()

    def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
        return [getattr(self.venvs[0], attr_name) for _ in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
        for v in self.venvs:
            v.set_attr(attr_name, value)

    def env_method(
        self, method_name: str, *args: Any, indices: Any = None, **kwargs: Any
    ) -> list[Any]:
        return [
            getattr(self.venvs[0], method_name)(*args, **kwargs) for _ in self._get_indices(indices)
        ]

    def env_is_wrapped(self, wrapper_class: Any, indices: Any = None) -> list[bool]:
        return [False for _ in self._get_indices(indices)]


def _one_env(num_envs: int, env_kwargs: Mapping[str, Any]) -> VecEnv:
    from envs.sb3 import TierGymVecEnv

    venv: VecEnv = TierGymVecEnv(num_envs=num_envs, **core_kwargs(env_kwargs))
    agent = make_interface(env_kwargs)
    return AgentVecEnv(venv, agent) if agent.active else venv


def make_training_vec_env(num_envs: int, env_kwargs: Mapping[str, Any]) -> VecEnv:
    """The training environment, monitored: the SB3 adapter in the agent's view
    (residual over ``base_policy``, nodes padded to ``pad_nodes``); with
    ``train_families`` one batch per family (``num_envs`` split evenly), the first
    being ``scenario``."""
    from stable_baselines3.common.vec_env import VecMonitor

    fams = [f for f in (env_kwargs.get("train_families") or []) if f != env_kwargs["scenario"]]
    if not fams:
        return VecMonitor(_one_env(num_envs, env_kwargs))
    names = [env_kwargs["scenario"], *fams]
    n = [
        num_envs // len(names) + (1 if i < num_envs % len(names) else 0) for i in range(len(names))
    ]
    if min(n) < 1:
        raise ValueError(f"train_families: {len(names)} families need at least as many instances")
    return VecMonitor(
        ConcatVecEnv(
            [_one_env(k, {**env_kwargs, "scenario": f}) for k, f in zip(n, names, strict=True)]
        )
    )
