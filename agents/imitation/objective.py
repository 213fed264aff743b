"""What "the best base of an episode" means: the run's reward, as an episode score.

The warm start labels each episode with the expert that scores the highest on it
and plans it with the planner, both under the run's objective (its reward name,
:data:`envs.spaces.REWARDS`), so that the warm start imitates what the run is
asked to maximise. Per objective, the episode score is:

- ``log-geomean``: the episode's ``geomean_perf`` (record metric: the exp of the
  mean, over the steps with an active tenant, of the per-step log-geomean term),
  what the planner maximises by default;
- ``throughput``, ``weighted-speedup``, ``harmonic``: the episode's return under
  that reward, the sum over the episode's steps of the per-step term of
  :func:`envs.spaces.reward_terms` (total throughput over the machine's peak,
  the sum of the tenants' normalised performance, their harmonic mean). It is
  the record metric ``reward`` of a rollout whose environment has that reward
  (the reward changes nothing else: not the observation, not the dynamics), and
  what :class:`baselines.planner.Planner` with ``objective=`` that name
  maximises, so a plan scores through the agent's interface what it scored in
  the planner's replay.

Each is a per-episode score on which the experts of one episode are compared
(the tie tolerance is relative), never summed across episodes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envs.spaces import REWARDS

__all__ = ["check_objective", "record_score", "score_metric", "scoring_env"]


def check_objective(objective: str) -> str:
    """``objective`` if it is a reward name, else ValueError naming the choices."""
    if objective not in REWARDS:
        raise ValueError(
            f"imitation objective: got {objective!r}, expected a reward name of {list(REWARDS)}"
        )
    return objective


def scoring_env(kw: Mapping[str, Any], objective: str) -> Mapping[str, Any]:
    """The env settings ``kw`` to score episodes under ``objective`` with: ``kw`` itself for
    ``log-geomean`` (its score is a metric of every record), else ``kw`` with that reward."""
    if check_objective(objective) == "log-geomean":
        return kw
    return {**kw, "reward": objective}


def score_metric(objective: str) -> str:
    """The record metric that is the episode score of ``objective`` (run on :func:`scoring_env`)."""
    return "geomean_perf" if objective == "log-geomean" else "reward"


def record_score(record: Mapping[str, Any], objective: str) -> float:
    """The episode score of ``objective`` of a rollout record (run on :func:`scoring_env`)."""
    return record["metrics"][score_metric(objective)]
