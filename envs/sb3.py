"""A stable-baselines3 ``VecEnv`` over the native Gymnasium vector env.

stable-baselines3 (2.x) has no adapter for a ``gymnasium.vector.VectorEnv``;
this one keeps the whole batch in one process and one model call:

- finished instances restart in the same step (the vector env does it); their
  last observation goes to ``info["terminal_observation"]`` and
  ``info["TimeLimit.truncated"]`` says the episode was cut by its length;
- episode returns and lengths are tracked as arrays and reported as
  ``info["episode"] = {"r", "l", "t"}`` when an instance finishes, as
  ``stable_baselines3.common.monitor.Monitor`` would, so ``rollout/ep_rew_mean``
  works without a per-instance wrapper;
- the per-step metrics of every instance (finished ones included) stay batched
  in :attr:`last_info` (arrays, batch first) for callbacks to aggregate; the
  per-instance ``infos`` list holds only what stable-baselines3 reads.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvIndices, VecEnvStepReturn

from envs.gym_env import TieredMemoryVecEnv

__all__ = ["TierGymVecEnv"]


class TierGymVecEnv(VecEnv):
    """stable-baselines3 view of a :class:`~envs.gym_env.TieredMemoryVecEnv`."""

    def __init__(
        self, venv: TieredMemoryVecEnv | None = None, num_envs: int = 1, **kwargs: Any
    ) -> None:
        self.venv = venv if venv is not None else TieredMemoryVecEnv(num_envs=num_envs, **kwargs)
        self.render_mode = None
        super().__init__(
            self.venv.num_envs, self.venv.single_observation_space, self.venv.single_action_space
        )
        n = self.num_envs
        self._actions: np.ndarray | None = None
        self._ep_return = np.zeros(n)
        self._ep_len = np.zeros(n, dtype=np.int64)
        self._t0 = time.time()
        self.last_info: dict[str, Any] = {}
        self.step_seconds = 0.0  # wall time spent stepping the environment
        self.steps_taken = 0  # environment steps (instances x steps)

    @property
    def engine(self) -> Any:
        return self.venv.engine

    def reset(self) -> np.ndarray:
        seeds = self._seeds
        if all(s is None for s in seeds):
            seed: Any = None
        elif all(s is not None for s in seeds):
            seed = [int(s) for s in seeds]  # type: ignore[arg-type]
        else:
            raise ValueError("seed(): give every instance a seed or none")
        obs, _ = self.venv.reset(seed=seed)
        self._reset_seeds()
        self._ep_return[:] = 0.0
        self._ep_len[:] = 0
        self.reset_infos = [{} for _ in range(self.num_envs)]
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions

    def step_wait(self) -> VecEnvStepReturn:
        if self._actions is None:
            raise RuntimeError("step_wait() without step_async()")
        actions = np.asarray(self._actions)
        if isinstance(self.action_space, gym.spaces.Box):
            actions = actions.reshape((self.num_envs, *self.action_space.shape))
        t0 = time.perf_counter()
        obs, reward, terminated, truncated, info = self.venv.step(actions)
        self.step_seconds += time.perf_counter() - t0
        self.steps_taken += self.num_envs
        self._actions = None
        self.last_info = self.venv.engine.last_info  # all instances, before autoreset
        done = terminated | truncated
        self._ep_return += reward
        self._ep_len += 1
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        if done.any():
            final_obs = info["final_obs"]
            elapsed = round(time.time() - self._t0, 6)
            for i in np.flatnonzero(done):
                infos[i] = {
                    "terminal_observation": final_obs[i],
                    "TimeLimit.truncated": bool(truncated[i] and not terminated[i]),
                    "episode": {
                        "r": float(self._ep_return[i]),
                        "l": int(self._ep_len[i]),
                        "t": elapsed,
                    },
                }
            self._ep_return[done] = 0.0
            self._ep_len[done] = 0
        return obs, reward.astype(np.float32), done, infos

    def close(self) -> None:
        self.venv.close()

    # stable-baselines3 asks these of sub-environments; the batch has no sub-environments,
    # so attributes are the vector env's and apply to every index.
    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        value = getattr(self.venv, attr_name) if attr_name != "render_mode" else None
        return [value for _ in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        setattr(self.venv, attr_name, value)

    def env_method(
        self,
        method_name: str,
        *method_args: Any,
        indices: VecEnvIndices = None,
        **method_kwargs: Any,
    ) -> list[Any]:
        result = getattr(self.venv, method_name)(*method_args, **method_kwargs)
        return [result for _ in self._get_indices(indices)]

    def env_is_wrapped(
        self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None
    ) -> list[bool]:
        # episode statistics are reported exactly as Monitor reports them
        return [wrapper_class is Monitor for _ in self._get_indices(indices)]

    def seed(self, seed: int | None = None) -> Sequence[int | None]:
        return super().seed(seed)
