"""What sits between an environment and a trained network: :class:`AgentInterface`.

With ``base_policy`` set (a heuristic name of :func:`baselines.policy_names`, or several)
the agent's action is a residual over the heuristic's box action
(:mod:`agents.view.codec`), the bases mixed as :mod:`agents.view.mixing` says, so
the zero residual IS the heuristic and learning starts from it. The agent observes
the environment's observation (padded: :mod:`agents.view.padding`) followed by each
base action mapped to [0, 1] (``(a + 1) / 2``), so it sees what the heuristics are
about to do.

A heuristic keeps its own kernel settings through the tiering-mode action
(:data:`envs.spaces.TIERING_MODES`): its base action picks the mode its ``kernel``
is; an environment without that mode refuses the heuristic with an error that names
it.

The same interface drives training (:class:`agents.view.vec_env.AgentVecEnv`) and
evaluation (:class:`agents.evaluation.LearnedPolicy`), in the order of the rollout
loop (observe the step's metrics, then decide with ``episode_start``), so a trained
model is evaluated exactly as it was trained.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from gymnasium import spaces
from numpy.typing import NDArray

from agents.config.view import RESIDUAL_CODECS, ViewConfig, base_names
from agents.view.codec import apply_box, apply_share, residual_width, share_span
from agents.view.mixing import mix_bases
from agents.view.padding import PaddedLayout, pad_action, pad_observation, unpad_action
from baselines import make_policy
from envs.core import COMING_FEATURES, EnvParams, Hardware
from envs.spaces import tiering_mode_of

__all__ = [
    "AgentInterface",
    "agent_layout",
    "agent_spaces",
    "make_interface",
    "privileged_width",
]


def privileged_width(params: EnvParams, privileged_critic: bool) -> int:
    """Entries that close the agent's observation after the base actions: the critic's
    (:data:`~envs.core.COMING_FEATURES` per tenant slot) with ``privileged_critic``, else 0."""
    return params.encoder.T * COMING_FEATURES if privileged_critic else 0


def agent_spaces(
    params: EnvParams,
    base_policy: str | Sequence[str] | None,
    pad_nodes: int | None = None,
    residual_codec: str = RESIDUAL_CODECS[0],
    privileged_critic: bool = False,
) -> tuple[spaces.Box, spaces.Space]:
    """The agent's observation and action spaces on ``params`` (bases and padding optional).

    With ``K`` bases the observation ends with the ``K`` base actions (box layout, padded)
    and the action with ``K - 1`` mixing entries; with ``residual_codec="share"`` the action's
    weights are one entry per weight row; with ``privileged_critic`` the observation ends
    with :data:`~envs.core.COMING_FEATURES` entries per tenant slot (the critic's).
    """
    k = len(base_names(base_policy))
    obs, act = params.encoder.space(), params.codec.space()
    extra = privileged_width(params, privileged_critic)
    if k == 0 and pad_nodes is None and not extra:
        return obs, act
    c = params.codec
    if c.action_type != "box":
        raise ValueError(
            f"residual actions and node padding need action_type='box' (got {c.action_type!r})"
        )
    n_obs, n_box, nodes = params.encoder.size, c.size, c.n_nodes
    if pad_nodes is not None:
        lay = PaddedLayout.of(params, pad_nodes, k)
        n_obs, n_box, nodes = lay.obs.size, lay.action.size, pad_nodes
    rows = c.n_weight_rows
    n_act = residual_width(residual_codec, rows, nodes, c.size - rows * c.n_nodes)
    return (
        spaces.Box(0.0, 1.0, shape=(n_obs + k * n_box + extra,), dtype=np.float32),
        spaces.Box(-1.0, 1.0, shape=(n_act + max(k - 1, 0),), dtype=np.float32),
    )


def agent_layout(params: EnvParams, interface: AgentInterface) -> dict[str, int]:
    """The layout of the agent's observation and action on ``params``, for
    :class:`agents.networks.TenantPolicy` (``policy_kwargs.layout``; a saved model
    records it).

    Raises:
        ValueError: the interface has no node padding (the layout needs the padded view),
            or the weights are global.
    """
    if interface.pad_nodes is None:
        raise ValueError("TenantPolicy: needs env.pad_nodes (the padded view it reads)")
    if params.codec.n_weight_rows != params.encoder.T:
        raise ValueError("TenantPolicy: needs --weights per-tenant (a weight row per tenant slot)")
    lay = PaddedLayout.of(params, interface.pad_nodes, len(interface.names))
    return lay.policy_layout(
        lay.weight_rows if interface.codec == "share" else 0,
        COMING_FEATURES if interface.privileged_critic else 0,
    )


class AgentInterface:
    """The agent's view of an environment (:class:`~agents.config.view.ViewConfig`): base
    heuristics, their mixing, the residual codec and node padding.

    ``obs_to_agent`` turns the environment's observation into the agent's (padded to
    ``pad_nodes`` nodes, then the base actions if any); ``action_to_env`` turns the
    agent's action into the environment's (the bases mixed, padded weights dropped, the
    residual applied). Call :meth:`bind` to attach it to an environment (again for fresh
    controller state), :meth:`observe` after every reset and step, then :meth:`decide`.
    """

    def __init__(self, spec: ViewConfig) -> None:
        self.spec = spec
        # the spec's settings, under the names the view reads them by
        self.names = spec.names  # the bases' heuristic names (empty: no base)
        self.scale = spec.residual_scale
        self.pad_nodes = spec.pad_nodes
        self.mixing = spec.mixing
        self.codec = spec.residual_codec
        self.active = spec.active
        self.privileged_critic = spec.privileged_critic
        #: the share that a residual entry of 1 moves a weight row's DRAM share by
        self.share_span = share_span(self.scale)
        #: (K,) the bases the residual adjusts
        self.residual_mask = spec.residual_mask
        self.policies: list[Any] = [make_policy(n) for n in spec.names]
        self.params: EnvParams | None = None
        self.hw: Hardware | None = None
        #: the padded view of the bound environment (None without ``pad_nodes``)
        self.layout: PaddedLayout | None = None
        #: each base's tiering mode (index in the bound environment's modes)
        self.modes = [0] * len(self.policies)
        #: the last base actions: (B, size) with one base, (B, K, size) with K > 1
        self.base: NDArray[np.float32] | None = None
        #: each base's share of the decision at the last :meth:`action_to_env` (B, K)
        self.mix: NDArray | None = None

    def spaces(self, params: EnvParams) -> tuple[spaces.Box, spaces.Space]:
        return agent_spaces(
            params, self.names or None, self.pad_nodes, self.codec, self.privileged_critic
        )

    # ------------------------------------------------------------------ the environment
    def bind(self, params: EnvParams, num_envs: int) -> None:
        """Attach to the environment; checks the layout and that each heuristic's kernel is
        one of its tiering modes."""
        self.spaces(params)  # checks the layout
        if self.pad_nodes is not None:
            self.layout = PaddedLayout.of(params, self.pad_nodes, len(self.names))
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
        params = self._bound()
        if not self.policies:
            return None
        acts = []
        for policy, mode in zip(self.policies, self.modes, strict=True):
            act, _ = policy.predict(obs, episode_start=episode_start)
            act = np.array(act, dtype=np.float32).reshape(obs.shape[0], -1)
            if params.codec.modes:
                act[:, -1] = params.codec.mode_entry(mode)
            acts.append(act)
        self.base = acts[0] if len(acts) == 1 else np.stack(acts, axis=1)
        return self.base

    def _padded(self) -> PaddedLayout:
        if self.layout is None:
            raise RuntimeError("AgentInterface: no padded view; bind(params) with pad_nodes set")
        return self.layout

    def _hardware(self) -> Hardware:
        if self.hw is None:
            raise RuntimeError("AgentInterface: observe(None, hardware) after the reset first")
        return self.hw

    def pad_action(self, a: NDArray, fill: float) -> NDArray[np.float32]:
        """Env-layout actions (B, size) -> the padded layout (padded weights ``fill``)."""
        return pad_action(self._padded(), a, fill)

    # ------------------------------------------------------------------ the two directions
    def obs_to_agent(
        self,
        obs: NDArray,
        base: NDArray | None,
        rows: NDArray | None = None,
        coming: NDArray | None = None,
    ) -> NDArray[np.float32]:
        """What the agent observes: the (padded) observation, then the base actions on [0, 1],
        then (``privileged_critic``) the critic's entries: ``coming`` (B, T, C) from
        :func:`envs.core.coming_tenants`, zeros where not given (the actor never reads them).

        ``rows``: the instances ``obs`` belongs to (default: all, in order).
        """
        if self.pad_nodes is not None:
            o = pad_observation(self._padded(), obs, self._hardware(), rows)
        else:
            o = np.asarray(obs, np.float32)
        parts = []
        if base is not None:
            parts = [base] if base.ndim == 2 else [base[:, k] for k in range(base.shape[1])]
            if self.pad_nodes is not None:
                parts = [self.pad_action(b, -1.0) for b in parts]
            parts = [(b + 1.0) / 2.0 for b in parts]
        if self.privileged_critic:
            width = privileged_width(self._bound(), True)
            if coming is None:
                parts.append(np.zeros((o.shape[0], width), dtype=np.float32))
            else:
                parts.append(np.asarray(coming, np.float32).reshape(o.shape[0], width))
        if not parts:
            return o.astype(np.float32)
        return np.concatenate([o, *parts], axis=1).astype(np.float32)

    def _bound(self) -> EnvParams:
        if self.params is None:
            raise RuntimeError("AgentInterface: not bound; call bind(params, num_envs)")
        return self.params

    def action_to_env(self, base: NDArray | None, action: NDArray) -> NDArray[np.float32]:
        """The action the environment runs: the residual (:mod:`agents.view.codec`) over the
        mix of the bases that the mixing entries give (:mod:`agents.view.mixing`), scaled by
        the share of the decision from the bases it adjusts."""
        mixed = mix_bases(base, action, self.mixing, self.residual_mask)
        if mixed.share is not None:
            self.mix = mixed.share
        if self.codec == "share":
            assert mixed.base is not None and self.params is not None  # the spec checks a base
            return apply_share(
                mixed.base,
                mixed.gate,
                mixed.residual,
                self.scale,
                self.params.codec,
                self._hardware(),
            )
        a = mixed.residual
        if self.pad_nodes is not None:
            a = unpad_action(self._padded(), a)
        if mixed.base is None:
            return a
        return apply_box(mixed.base, mixed.gate, a, self.scale)


def make_interface(env_kwargs: Mapping[str, Any]) -> AgentInterface:
    """The :class:`AgentInterface` that a run's env settings describe."""
    return AgentInterface(ViewConfig.from_env(env_kwargs))
