"""The paired-seed reward baseline's controller: the heuristic that drives the twins.

With ``reward_baseline`` set (:func:`envs.core.make_params`), every instance has a twin
on the same episode seed (:class:`envs.core.TwinState`), and the reward is the agent's
minus the twin's. The input (which tenants arrive, when, how large) swings the reward
of a step far more than any action does; the twin sees the same input, so the paired
reward keeps what the actions changed (an input-dependent baseline: Mao et al., ICLR
2019). The twin's reward never depends on the agent's actions, so the paired reward
has the same optimal policy.

The heuristic keeps controller state between steps, so it lives beside the pure
core, in the adapters (``gym.make``, ``gym.make_vec``, the SB3 VecEnv), which all
step it through the same three functions of this module::

    twin = BaselineTwin.of(params, num_envs)          # None without a baseline
    state, obs = paired.reset(params, seeds, twin)    # core.reset, the twins with it
    state, ... = paired.step_autoreset(params, state, action, twin)  # (or paired.step)
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from envs import core
from envs.core import EnvParams, EnvState
from envs.plugins import make_baseline_policy

__all__ = ["BaselineTwin"]


class BaselineTwin:
    """The ``reward_baseline`` heuristic of an environment's twins, bound to their batch."""

    def __init__(self, params: EnvParams, num_envs: int) -> None:
        if params.twin is None or params.reward_baseline is None:
            raise ValueError("BaselineTwin: the environment has no reward_baseline")
        self.params = params.twin
        self.num_envs = num_envs
        self.policy: Any = make_baseline_policy(params.reward_baseline)
        self._start = np.ones(num_envs, dtype=bool)

    @classmethod
    def of(cls, params: EnvParams, num_envs: int) -> BaselineTwin | None:
        """The twins' controller, or ``None`` when the environment has no baseline."""
        return None if params.twin is None else cls(params, num_envs)

    def _twin(self, state: EnvState) -> core.TwinState:
        if state.twin is None:
            raise RuntimeError("the state has no twins: reset it with the same parameters")
        return state.twin

    def reset(self, state: EnvState) -> None:
        """After :func:`envs.core.reset`: every twin starts a new episode."""
        self.policy.bind(self.params, self.num_envs)
        self.policy.observe(None, core.hardware(self._twin(state).state))
        self._start = np.ones(self.num_envs, dtype=bool)

    def restarted(self, state: EnvState, done: NDArray[np.bool_]) -> None:
        """After :func:`envs.core.reset_where` (``done``): those twins start new episodes."""
        self.policy.observe(None, core.hardware(self._twin(state).state))
        self._start = self._start | np.asarray(done, dtype=bool)

    def act(self, state: EnvState) -> NDArray[np.float32]:
        """The twins' actions for the next interval (B, twin action size)."""
        action, _ = self.policy.predict(
            self._twin(state).obs, episode_start=self._start, deterministic=True
        )
        self._start = np.zeros(self.num_envs, dtype=bool)
        return np.asarray(action)

    def observe(self, state: EnvState, done: NDArray[np.bool_]) -> None:
        """After a step: the heuristic reads the twins' metrics (their episodes restart
        where ``done``, as :func:`envs.core.step_autoreset` restarted them)."""
        tw = self._twin(state)
        self.policy.observe(tw.metrics, core.hardware(tw.state))
        self._start = np.asarray(done, dtype=bool).copy()


# ----------------------------------------------------------------- the adapters' one path


def reset(
    params: EnvParams, seeds: ArrayLike, twin: BaselineTwin | None
) -> tuple[EnvState, NDArray[np.float32]]:
    """:func:`envs.core.reset`, the twins (if any) starting their episodes with it."""
    state, obs = core.reset(params, seeds)
    if twin is not None:
        twin.reset(state)
    return state, obs


def step(
    params: EnvParams, state: EnvState, action: NDArray, twin: BaselineTwin | None
) -> tuple[Any, ...]:
    """:func:`envs.core.step` with the twins' heuristic deciding before and observing after
    (``twin`` None: the plain step); what ``core.step`` returns."""
    twin_action = None if twin is None else twin.act(state)
    out = core.step(params, state, action, twin_action)
    if twin is not None:
        twin.observe(out[0], out[3] | out[4])
    return out


def step_autoreset(
    params: EnvParams, state: EnvState, action: NDArray, twin: BaselineTwin | None
) -> tuple[Any, ...]:
    """:func:`envs.core.step_autoreset` with the twins as :func:`step` has them."""
    twin_action = None if twin is None else twin.act(state)
    out = core.step_autoreset(params, state, action, twin_action)
    if twin is not None:
        twin.observe(out[0], out[3] | out[4])
    return out
