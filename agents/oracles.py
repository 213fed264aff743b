"""``best-heuristic-per-episode``: an oracle choosing, for each episode, the best shipped heuristic.

A reference, not a deployable policy: it runs every shipped heuristic on the
same scenarios and seeds (through :func:`agents.rollout.rollout`, each with
its own kernel configuration) and, per (scenario, seed), keeps the record of
the heuristic with the best ``geomean_perf``: an upper bound for "pick the
right heuristic for the workload", which a learned policy's win must beat.
It lives with evaluation because it runs rollouts; it is driven through the
rollout protocol's ``rollout_records`` hook, so :func:`agents.evaluation.compare`
and the Ray cells (:mod:`agents.distributed`) run it like any other policy.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from typing import Any

from agents.rollout import rollout
from baselines import catalogue
from envs.core import ScenarioSpec

__all__ = ["ORACLE_HEURISTICS", "BestHeuristicPerEpisode"]

#: The heuristics the oracle chooses among: every heuristic of the catalogue (not ``random``,
#: a lower bound, nor the upper bounds, nor the parametric ``static:...`` family).
ORACLE_HEURISTICS: tuple[str, ...] = tuple(catalogue.names(kind="heuristic"))


class BestHeuristicPerEpisode:
    """``best-heuristic-per-episode``: per episode, the record of the best heuristic (an oracle).

    For each episode seed, runs every heuristic of ``heuristics`` and keeps
    the record with the highest ``metric`` (ties: the first in
    ``heuristics``; a heuristic whose metric is ``None`` never wins), renamed
    to this policy and with ``chosen_policy`` naming the heuristic. Its
    episode's numbers are exactly that heuristic's.

    Args:
        heuristics: the candidates (:data:`ORACLE_HEURISTICS`).
    """

    name = "best-heuristic-per-episode"
    metric = "geomean_perf"  # the episode metric chosen on (higher is better)

    def __init__(self, heuristics: Sequence[str] = ORACLE_HEURISTICS) -> None:
        known = catalogue.names(kind="heuristic")
        bad = [h for h in heuristics if h not in known]
        if bad or not heuristics:
            raise ValueError(
                f"best-heuristic-per-episode heuristics: got {list(heuristics)}, expected "
                f"heuristics of the catalogue ({known})"
            )
        self.heuristics = tuple(heuristics)

    def rollout_records(
        self,
        scenario: ScenarioSpec,
        n_episodes: int,
        seed: int,
        split: str,
        env_kwargs: Mapping[str, Any] | None,
        record_series: bool,
        policy_name: str | None,
    ) -> list[dict[str, Any]]:
        """The oracle's records (:func:`agents.rollout.rollout`'s contract plus ``chosen_policy``)."""
        name = policy_name or self.name
        runs = [
            rollout(h, scenario, n_episodes, seed=seed, split=split, env_kwargs=env_kwargs,
                    record_series=record_series, policy_name=h)
            for h in self.heuristics
        ]  # fmt: skip
        out: list[dict[str, Any]] = []
        for i in range(n_episodes):
            best, best_v = 0, -math.inf
            for j, recs in enumerate(runs):
                v = recs[i]["metrics"].get(self.metric)
                if v is None:
                    continue
                if v > best_v:
                    best, best_v = j, float(v)
            rec = copy.deepcopy(runs[best][i])
            rec["policy"] = name
            rec["chosen_policy"] = self.heuristics[best]
            out.append(rec)
        return out
