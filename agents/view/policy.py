"""A trained model behind the rollout protocol, in the agent's view (what evaluation runs)."""

from __future__ import annotations

from typing import Any

import numpy as np

from agents.view.interface import make_interface
from envs.core import EnvParams

__all__ = ["LearnedPolicy", "PolicyError"]


class PolicyError(ValueError):
    """A policy that cannot be used: unknown name, missing or corrupt model, wrong spaces."""


class LearnedPolicy:
    """A trained stable-baselines3 model behind the rollout protocol.

    ``env_kwargs`` are the env settings it was trained with (reward, action and
    observation layout, tenant slots, kernel, tiering modes, and the residual's
    ``base_policy``/``residual_scale``); evaluation builds its environment with
    them so the spaces match, and :meth:`bind` checks they do. With a
    ``base_policy`` the model's action is a residual over that heuristic
    (:mod:`agents.view`), run here exactly as in training.
    """

    #: its environment is the one it was trained in (``env_kwargs``): no kernel or modes of its own
    kernel = None
    tiering_modes = None

    def __init__(self, model: Any, env_kwargs: dict[str, Any], name: str, source: str) -> None:
        self.model = model
        self.env_kwargs = env_kwargs
        self.name = name
        self.source = source
        #: the scenarios and families it trained on (:func:`agents.runs.trained_on`), if known
        self.trained_on: list[str] | None = None
        self.agent = make_interface(env_kwargs)  # base heuristic and node padding, if any

    def bind(self, params: EnvParams, num_envs: int) -> None:
        """Check that the environment's spaces are the ones the model was trained for."""
        want_obs, want_act = self.model.observation_space, self.model.action_space
        try:
            got_obs, got_act = self.agent.spaces(params)
        except ValueError as exc:
            raise PolicyError(f"model {self.source!r}: {exc}") from None
        if (
            want_obs.shape != got_obs.shape
            or type(want_act) is not type(got_act)
            or want_act.shape != got_act.shape
        ):
            raise PolicyError(
                f"model {self.source!r} was trained for observations {want_obs.shape} and actions "
                f"{type(want_act).__name__}{want_act.shape}, but this scenario gives observations "
                f"{got_obs.shape} and actions {type(got_act).__name__}{got_act.shape} "
                f"(tenant slots, nodes, action type, tiering modes or observation layout differ)"
            )
        if self.agent.active:
            try:
                self.agent.bind(params, num_envs)
            except ValueError as exc:
                raise PolicyError(f"model {self.source!r}: {exc}") from None

    def observe(self, metrics: Any, hardware: Any) -> None:
        """The base heuristic reads the step's counters; the padding reads the machine."""
        if self.agent.active:
            self.agent.observe(metrics, hardware)

    def predict(
        self,
        observation: Any,
        state: Any = None,
        episode_start: Any = None,
        deterministic: bool = True,
    ) -> Any:
        if not self.agent.active:
            return self.model.predict(
                observation, state=state, episode_start=episode_start, deterministic=deterministic
            )
        obs = np.asarray(observation)
        single = obs.ndim == 1
        obs2 = obs[None] if single else obs
        base = self.agent.decide(obs2, episode_start)
        action, state = self.model.predict(
            self.agent.obs_to_agent(obs2, base),
            state=state,
            episode_start=episode_start,
            deterministic=deterministic,
        )
        act = self.agent.action_to_env(base, action)
        return (act[0] if single else act), state
