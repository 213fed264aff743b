"""The agent's view as SB3 vector environments, for training.

:class:`AgentVecEnv` wraps a :class:`envs.sb3.TierGymVecEnv` in an
:class:`~agents.view.interface.AgentInterface` (an SB3 ``VecEnvWrapper``). One policy
for every machine: with ``pad_nodes`` set, ``train_families`` trains it on several
machine shapes at once (:class:`ConcatVecEnv`, one batch per family), which
:func:`make_training_vec_env` builds from a run's env settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray
from stable_baselines3.common.vec_env import VecMonitor
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvStepReturn, VecEnvWrapper

from agents.config.view import environment_config
from agents.view.interface import AgentInterface, make_interface
from envs.core import EnvParams, coming_tenants
from envs.sb3 import TierGymVecEnv

__all__ = ["AgentVecEnv", "ConcatVecEnv", "make_training_vec_env", "split_instances"]


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
        return self.agent.obs_to_agent(obs, self._base, coming=self._coming())

    def _coming(self) -> NDArray[np.float32] | None:
        """The critic's privileged entries of the episodes now running (training only)."""
        if not self.agent.privileged_critic:
            return None
        return coming_tenants(self.venv.params, self.venv.state)  # type: ignore[attr-defined]

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
        return self.agent.obs_to_agent(obs, self._base, coming=self._coming()), reward, done, infos


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
        obs, rewards, dones = (np.concatenate([o[k] for o in out]) for k in range(3))
        return obs, rewards, dones, [info for o in out for info in o[3]]

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
    venv: VecEnv = TierGymVecEnv(num_envs=num_envs, **environment_config(env_kwargs).given())
    agent = make_interface(env_kwargs)
    return AgentVecEnv(venv, agent) if agent.active else venv


def split_instances(num_envs: int, families: int, scenario_share: float | None = None) -> list[int]:
    """Instances per batch: the scenario's first, then each of ``families`` others'.
    ``scenario_share`` None: ``num_envs`` split evenly over all of them (the first ones one
    more where it does not divide); else the scenario takes that share (rounded, at least
    one) and the families split the rest evenly."""

    def even(total: int, parts: int) -> list[int]:
        return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]

    if scenario_share is None:
        n = even(num_envs, families + 1)
    else:
        first = max(1, round(scenario_share * num_envs))
        n = [first, *even(num_envs - first, families)]
    if min(n) < 1:
        raise ValueError(
            f"train_families: {num_envs} instances cannot give the scenario and {families} "
            f"families at least one each (scenario_share {scenario_share})"
        )
    return n


def make_training_vec_env(
    num_envs: int, env_kwargs: Mapping[str, Any], scenario_share: float | None = None
) -> VecEnv:
    """The training environment, monitored: the SB3 adapter in the agent's view
    (residual over ``base_policy``, nodes padded to ``pad_nodes``); with
    ``train_families`` one batch per family, the first being ``scenario``, the instances
    split by :func:`split_instances` (``scenario_share``: the scenario's share of them)."""
    fams = [f for f in (env_kwargs.get("train_families") or []) if f != env_kwargs["scenario"]]
    if not fams:
        return VecMonitor(_one_env(num_envs, env_kwargs))
    names = [env_kwargs["scenario"], *fams]
    n = split_instances(num_envs, len(fams), scenario_share)
    return VecMonitor(
        ConcatVecEnv(
            [_one_env(k, {**env_kwargs, "scenario": f}) for k, f in zip(n, names, strict=True)]
        )
    )
