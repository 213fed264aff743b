"""stable-baselines3 callbacks: environment metrics, evaluation against heuristics, checkpoints.

Each callback is small and does one thing; ``train.py`` composes them.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from stable_baselines3.common.callbacks import BaseCallback

__all__ = ["CheckpointAtRollout", "EnvMetricsCallback", "EvalAgainstReferences", "StopOnSignal"]


class EnvMetricsCallback(BaseCallback):
    """Aggregates the environment's batched info into the ``env/`` namespace, once per rollout.

    Reads the step's batched :class:`~envs.core.Metrics` (``infos[i]["metrics"]``
    of :class:`~envs.sb3.TierGymVecEnv`, one object for the whole batch) after
    every step and keeps running sums, so nothing per instance is stored: per node bandwidth,
    utilisation and latency; per tenant slot normalised performance and DRAM
    access share (over active tenants); promotion and demotion MB/s; every
    reward term; and ``time/env_sps``, environment steps per second of wall
    time spent inside the environment.
    """

    def __init__(self, node_names: list[str], n_tenants: int) -> None:
        super().__init__()
        self.node_names = node_names
        self.n_tenants = n_tenants
        self._sums: dict[str, float] = {}
        self._counts: dict[str, float] = {}
        self._env_time = 0.0
        self._env_steps = 0

    def _add(self, key: str, total: float, count: float) -> None:
        self._sums[key] = self._sums.get(key, 0.0) + total
        self._counts[key] = self._counts.get(key, 0.0) + count

    def _on_step(self) -> bool:
        infos = self.locals.get("infos") or [{}]
        info = infos[0].get("metrics")
        if info is None:
            return True
        n = info["total_throughput_gbps"].shape[0]
        for j, name in enumerate(self.node_names):
            self._add(
                f"env/node_{name}/bandwidth_gbps", float(info["node_bandwidth_gbps"][:, j].sum()), n
            )
            self._add(
                f"env/node_{name}/utilization", float(info["node_utilization"][:, j].sum()), n
            )
            self._add(f"env/node_{name}/latency_ns", float(info["node_latency_ns"][:, j].sum()), n)
        act = info["tenant_active"]
        for t in range(self.n_tenants):
            a = act[:, t]
            c = float(a.sum())
            if c:
                self._add(
                    f"env/tenant{t}/norm_perf", float(info["tenant_norm_perf"][a, t].sum()), c
                )
                self._add(
                    f"env/tenant{t}/dram_access_share",
                    float(info["tenant_dram_access_share"][a, t].sum()),
                    c,
                )
        self._add(
            "env/tenants/norm_perf", float(info["tenant_norm_perf"][act].sum()), float(act.sum())
        )
        self._add("env/promotion_mbps", float(info["promotion_mbps"].sum()), n)
        self._add("env/demotion_mbps", float(info["demotion_mbps"].sum()), n)
        self._add("env/total_throughput_gbps", float(info["total_throughput_gbps"].sum()), n)
        for k, v in info.items():
            if k.startswith("reward_"):
                self._add(f"env/{k}", float(v.sum()), n)
        # TierGymVecEnv's documented timers (VecEnvWrapper forwards attribute reads)
        timer = getattr(self.training_env, "env_seconds", None)
        if timer is not None:
            self._env_time = timer
            self._env_steps = getattr(self.training_env, "env_steps", 0)
        return True

    def _on_rollout_end(self) -> None:
        for k, total in self._sums.items():
            self.logger.record(k, total / max(self._counts[k], 1.0))
        self._sums.clear()
        self._counts.clear()
        if self._env_time > 0:
            self.logger.record("time/env_sps", self._env_steps / self._env_time)


class EvalAgainstReferences(BaseCallback):
    """Every ``interval`` timesteps, scores the current policy on held-out seeds.

    ``evaluate(model) -> float`` runs the learned policy through the same rollout
    code as ``evaluate.py``; ``references`` (heuristic name -> score, computed
    once on the same scenarios and seeds) are logged next to it as
    ``eval/<name>`` so learned and heuristic lines sit on one chart.
    """

    def __init__(
        self,
        evaluate: Callable[[Any], float],
        references: dict[str, float],
        interval: int,
        name: str,
    ) -> None:
        super().__init__()
        self.evaluate = evaluate
        self.references = references
        self.interval = interval
        self.name = name
        self._next = interval
        self.history: list[tuple[int, float]] = []

    def _record(self) -> None:
        score = self.evaluate(self.model)
        self.history.append((self.num_timesteps, score))
        self.logger.record(f"eval/{self.name}", score)
        for k, v in self.references.items():
            self.logger.record(f"eval/{k}", v)
        self.logger.dump(self.num_timesteps)

    def _on_step(self) -> bool:
        if self.interval > 0 and self.num_timesteps >= self._next:
            self._next += self.interval
            self._record()
        return True


class StopOnSignal(BaseCallback):
    """Stops training cleanly on SIGINT or SIGTERM; the caller then saves a checkpoint.

    For on-policy algorithms the rollout being collected when the signal came
    is dropped (it was never trained on), so ``resume_timesteps`` is where
    training really stands and a resumed run ends exactly at its total.
    """

    def __init__(self, on_policy: bool) -> None:
        super().__init__()
        self.on_policy = on_policy
        self.stopped = False
        self._rollout_start = 0
        self._previous: dict[int, Any] = {}

    def _handler(self, signum: int, frame: Any) -> None:
        self.stopped = True

    def _on_training_start(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handler)

    def _on_training_end(self) -> None:
        for sig, prev in self._previous.items():
            signal.signal(sig, prev)

    def _on_rollout_start(self) -> None:
        self._rollout_start = self.num_timesteps

    def _on_step(self) -> bool:
        return not self.stopped

    @property
    def resume_timesteps(self) -> int:
        return self._rollout_start if (self.stopped and self.on_policy) else self.num_timesteps


class CheckpointAtRollout(BaseCallback):
    """Saves a checkpoint every ``interval`` timesteps at a rollout boundary (``save(model)``)."""

    def __init__(self, save: Callable[[Any, int], Path], interval: int) -> None:
        super().__init__()
        self.save = save
        self.interval = interval
        self._next = interval
        self.last_time = time.time()

    def _on_step(self) -> bool:
        return True

    def _on_rollout_start(self) -> None:
        # at a rollout boundary everything collected so far has been trained on
        if self.interval > 0 and self.num_timesteps >= self._next:
            self._next = (self.num_timesteps // self.interval + 1) * self.interval
            self.save(self.model, self.num_timesteps)
