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
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from gymnasium import spaces
from numpy.typing import NDArray
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvStepReturn, VecEnvWrapper

from envs.core import EnvParams, Hardware
from envs.spaces import tiering_mode_of

__all__ = [
    "RESIDUAL_KEYS",
    "ResidualBase",
    "ResidualVecEnv",
    "agent_spaces",
    "core_kwargs",
    "make_training_vec_env",
]

#: Env settings of the residual wrapper (the rest go to :func:`envs.core.make_params`).
RESIDUAL_KEYS = ("base_policy", "residual_scale")
DEFAULT_RESIDUAL_SCALE = 1.0


def core_kwargs(env_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """``env_kwargs`` without the residual settings: what :func:`envs.core.make_params` takes."""
    return {k: v for k, v in env_kwargs.items() if k not in RESIDUAL_KEYS}


def agent_spaces(params: EnvParams, base_policy: str | None) -> tuple[spaces.Box, spaces.Space]:
    """The agent's observation and action spaces on ``params`` (with or without a base)."""
    obs, act = params.encoder.space(), params.codec.space()
    if base_policy is None:
        return obs, act
    if params.codec.action_type != "box":
        raise ValueError(
            f"base_policy {base_policy!r}: residual actions need action_type='box' "
            f"(got {params.codec.action_type!r})"
        )
    size = params.encoder.size + params.codec.size
    return spaces.Box(0.0, 1.0, shape=(size,), dtype=np.float32), act


class ResidualBase:
    """A heuristic as the base of residual actions: its box action, its mode, the combination.

    Args:
        name: a heuristic name (``baselines.make_policy``).
        scale: the residual's scale (``residual_scale``; 1.0: a residual of 1
            moves an entry half its range).
    """

    def __init__(self, name: str, scale: float = DEFAULT_RESIDUAL_SCALE) -> None:
        from baselines import make_policy  # agents may import baselines; envs may not

        if not (math.isfinite(scale) and scale > 0):
            raise ValueError(f"residual_scale: got {scale}, expected a number > 0")
        self.name = name
        self.scale = float(scale)
        self.policy = make_policy(name)
        self.params: EnvParams | None = None
        self.mode = 0
        self.action: NDArray[np.float32] | None = None  # the last base action (B, size)

    def bind(self, params: EnvParams, num_envs: int) -> None:
        """Attach to the environment; checks the heuristic's kernel is one of its modes."""
        kern = self.policy.kernel
        if params.codec.modes:
            try:
                self.mode = tiering_mode_of(kern, params.kernel, params.codec.modes)
            except ValueError as exc:
                raise ValueError(f"base_policy {self.name!r}: {exc}") from None
        elif kern != params.kernel:
            raise ValueError(
                f"base_policy {self.name!r} runs its own kernel settings {kern!r}; give the "
                "environment tiering_modes that include them (envs.spaces.TIERING_MODES)"
            )
        self.params = params
        self.policy.bind(params, num_envs)

    def observe(self, metrics: Mapping[str, Any] | None, hardware: Hardware) -> None:
        self.policy.observe(metrics, hardware)

    def decide(self, obs: NDArray, episode_start: NDArray | None) -> NDArray[np.float32]:
        """The heuristic's box actions (B, size) for this step, its tiering mode included."""
        if self.params is None:
            raise RuntimeError(f"base_policy {self.name!r}: not bound; call bind(params, n)")
        act, _ = self.policy.predict(obs, episode_start=episode_start)
        act = np.array(act, dtype=np.float32).reshape(obs.shape[0], -1)
        if self.params.codec.modes:
            act[:, -1] = self.params.codec.mode_entry(self.mode)
        self.action = act
        return act

    def agent_obs(self, obs: NDArray, base: NDArray) -> NDArray[np.float32]:
        """What the agent observes: the observation, then the base action on [0, 1]."""
        return np.concatenate([obs, (base + 1.0) / 2.0], axis=1).astype(np.float32)

    def combine(self, base: NDArray, residual: NDArray) -> NDArray[np.float32]:
        """The action the environment runs: ``clip(base + scale * residual, -1, 1)``."""
        r = np.asarray(residual, dtype=np.float32).reshape(base.shape)
        return np.clip(base + self.scale * np.clip(r, -1.0, 1.0), -1.0, 1.0).astype(np.float32)


class ResidualVecEnv(VecEnvWrapper):
    """Residual actions over a heuristic on a :class:`envs.sb3.TierGymVecEnv` (training)."""

    def __init__(self, venv: VecEnv, base: ResidualBase) -> None:
        params = venv.params  # type: ignore[attr-defined]
        obs_space, act_space = agent_spaces(params, base.name)
        super().__init__(venv, observation_space=obs_space, action_space=act_space)
        self.base = base
        base.bind(params, venv.num_envs)
        self._base_act: NDArray[np.float32] | None = None

    def reset(self) -> np.ndarray:
        obs = self.venv.reset()
        self.base.policy.bind(self.base.params, self.num_envs)  # fresh controller state
        self.base.observe(None, self.venv.hardware())  # type: ignore[attr-defined]
        self._base_act = self.base.decide(obs, np.ones(self.num_envs, dtype=bool))
        return self.base.agent_obs(obs, self._base_act)

    def step_async(self, actions: np.ndarray) -> None:
        if self._base_act is None:
            raise RuntimeError("call reset() before step()")
        self.venv.step_async(self.base.combine(self._base_act, actions))

    def step_wait(self) -> VecEnvStepReturn:
        assert self._base_act is not None
        obs, reward, done, infos = self.venv.step_wait()
        last = self._base_act
        self.base.observe(infos[0]["metrics"], self.venv.hardware())  # type: ignore[attr-defined]
        self._base_act = self.base.decide(obs, done)
        for i in np.flatnonzero(done):
            if "terminal_observation" in infos[i]:  # with the last base action it saw
                infos[i]["terminal_observation"] = self.base.agent_obs(
                    infos[i]["terminal_observation"][None], last[i : i + 1]
                )[0]
        return self.base.agent_obs(obs, self._base_act), reward, done, infos


def make_training_vec_env(num_envs: int, env_kwargs: Mapping[str, Any]) -> VecEnv:
    """The training environment: the SB3 adapter (residual over ``base_policy`` if set), monitored."""
    from stable_baselines3.common.vec_env import VecMonitor

    from envs.sb3 import TierGymVecEnv

    venv: VecEnv = TierGymVecEnv(num_envs=num_envs, **core_kwargs(env_kwargs))
    name = env_kwargs.get("base_policy")
    if name is not None:
        scale = env_kwargs.get("residual_scale")
        venv = ResidualVecEnv(
            venv, ResidualBase(name, DEFAULT_RESIDUAL_SCALE if scale is None else scale)
        )
    return VecMonitor(venv)
