"""A stable-baselines3 ``VecEnv`` over the environment core, and its standard wrapping.

stable-baselines3 (2.x) has no adapter for a ``gymnasium.vector.VectorEnv``;
:class:`TierGymVecEnv` keeps the whole batch in one process and one call of
:func:`envs.core.step_autoreset`:

- finished instances restart in the same step; their last observation goes to
  ``info["terminal_observation"]`` and ``info["TimeLimit.truncated"]`` says the
  episode was cut by its length;
- every instance's ``info["metrics"]`` is the step's batched
  :class:`~envs.core.Metrics` (one shared object: row ``i`` is instance ``i``,
  finished instances included), so callbacks aggregate arrays instead of
  ``num_envs`` dicts;
- episode returns and lengths come from stable-baselines3's own
  ``VecMonitor``: build the training environment with :func:`make_vec_env`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env import VecMonitor
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvIndices, VecEnvStepReturn

from envs import core, paired
from envs.core import EnvParams, EnvState, Hardware
from envs.paired import BaselineTwin

__all__ = ["TierGymVecEnv", "make_vec_env"]


class TierGymVecEnv(VecEnv):
    """stable-baselines3 view of a batch of TierGym instances (``gymnasium.make`` arguments)."""

    def __init__(self, num_envs: int = 1, **kwargs: Any) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs: got {num_envs}, expected at least 1")
        self.params: EnvParams = core.make_params(**kwargs)
        self.render_mode = None
        super().__init__(num_envs, self.params.encoder.space(), self.params.codec.space())
        self.state: EnvState | None = None
        self.twin = BaselineTwin.of(self.params, num_envs)
        self._actions: np.ndarray | None = None
        self.env_seconds = 0.0  # wall time spent stepping the environment
        self.env_steps = 0  # environment steps taken (instances x steps)

    def hardware(self) -> Hardware:
        """Every instance's machine in its current episode."""
        if self.state is None:
            raise RuntimeError("call reset() first")
        return core.hardware(self.state)

    def reset(self) -> np.ndarray:
        seeds = self._seeds
        if all(s is None for s in seeds):
            base = np.random.SeedSequence().generate_state(self.num_envs, dtype=np.uint64)
        elif all(s is not None for s in seeds):
            base = np.asarray(seeds, dtype=np.uint64)
        else:
            raise ValueError("seed(): give every instance a seed or none")
        self.state, obs = paired.reset(self.params, base, self.twin)
        self._reset_seeds()
        self.reset_infos = [{} for _ in range(self.num_envs)]
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions

    def step_wait(self) -> VecEnvStepReturn:
        if self._actions is None:
            raise RuntimeError("step_wait() without step_async()")
        if self.state is None:
            raise RuntimeError("call reset() before step()")
        actions = self._actions
        size = self.params.codec.size
        if isinstance(actions, np.ndarray) and actions.size == self.num_envs * size:
            actions = actions.reshape(self.num_envs, size)  # SB3 may hand a flat batch
        actions = self.params.codec.check(actions, self.num_envs, "actions")
        t0 = time.perf_counter()
        self.state, obs, reward, term, trunc, metrics, final_obs = paired.step_autoreset(
            self.params, self.state, actions, self.twin
        )
        self.env_seconds += time.perf_counter() - t0
        self.env_steps += self.num_envs
        self._actions = None
        done = term | trunc
        infos: list[dict[str, Any]] = [{"metrics": metrics} for _ in range(self.num_envs)]
        if final_obs is not None:
            for i in np.flatnonzero(done):
                infos[i]["terminal_observation"] = final_obs[i]
                infos[i]["TimeLimit.truncated"] = bool(trunc[i] and not term[i])
        return obs, reward.astype(np.float32), done, infos

    def close(self) -> None:
        pass

    # stable-baselines3 asks these of sub-environments; the batch has none, so
    # attributes are this object's and apply to every index.
    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        value = getattr(self, attr_name)
        return [value for _ in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        setattr(self, attr_name, value)

    def env_method(
        self,
        method_name: str,
        *method_args: Any,
        indices: VecEnvIndices = None,
        **method_kwargs: Any,
    ) -> list[Any]:
        result = getattr(self, method_name)(*method_args, **method_kwargs)
        return [result for _ in self._get_indices(indices)]

    def env_is_wrapped(
        self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None
    ) -> list[bool]:
        return [False for _ in self._get_indices(indices)]

    def seed(self, seed: int | None = None) -> Sequence[int | None]:
        return super().seed(seed)


def make_vec_env(num_envs: int, **kwargs: Any) -> VecMonitor:
    """The training environment: :class:`TierGymVecEnv` under stable-baselines3's ``VecMonitor``."""
    return VecMonitor(TierGymVecEnv(num_envs=num_envs, **kwargs))
