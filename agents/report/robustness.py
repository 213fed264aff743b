"""Robustness: per policy, its worst ratio to the best heuristic over the scenarios evaluated.

A user deploying a placement policy on a server wants to know how much worse than the
kernel's best choice it can be, not only its average: :func:`robustness_summary` gives,
per policy of a summary, its mean of the primary metric over the best deployable single
heuristic's mean on each scenario, and the scenario where that ratio is worst. The number
itself is computed by :func:`agents.stats.worst_ratio_to_best` (also what the
generalisation groups report); ``evaluate.py``'s leaderboard and ``train.py``'s closing
table render it (:func:`agents.report.leaderboard_markdown`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agents.report.records import LOWER_IS_BETTER
from agents.stats import worst_ratio_to_best

__all__ = ["robustness_summary", "scenario_means"]


def scenario_means(summary: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """``{scenario: {policy: mean}}`` of the primary metric for every (scenario, policy) of a
    :func:`agents.report.summarize_records` summary that has it."""
    metric = summary["metric"]
    return {
        scen: {
            pol: float(e["metrics"][metric]["mean"])
            for pol, e in row.items()
            if metric in e["metrics"]
        }
        for scen, row in summary["per_scenario"].items()
    }


def robustness_summary(summary: Mapping[str, Any], heuristics: Sequence[str]) -> dict[str, Any]:
    """Each policy's worst ratio to the best of ``heuristics`` over the summary's scenarios.

    ``heuristics`` are the single heuristics a policy is measured against (evaluation's: every
    deployable heuristic of :mod:`baselines.catalogue`); only those the summary ran count. On
    each scenario the best is the one with the best mean of the primary metric (the lowest
    for a metric of :data:`agents.report.LOWER_IS_BETTER`); a policy's ratio there is its
    mean over that mean; its worst is over the scenarios it ran. Layout::

        {"metric": str, "heuristics": [...], "higher_is_better": bool, "definition": str,
         "per_scenario": {scenario: {"best_heuristic": str, "best_mean": float}},
         "per_policy": {policy: {"worst_vs_best_heuristic": float, "worst_scenario": str,
                                 "best_heuristic": str, "n_scenarios": int}}}

    ``best_heuristic`` of a policy is the best heuristic on its worst scenario. A policy
    is absent where no scenario it ran has a heuristic of ``heuristics``.
    """
    metric = summary["metric"]
    higher = metric not in LOWER_IS_BETTER
    heur = [h for h in heuristics if h in summary["policies"]]
    got = worst_ratio_to_best(scenario_means(summary), heur, higher_is_better=higher)
    return {
        "metric": metric,
        "heuristics": heur,
        "higher_is_better": higher,
        "definition": (
            f"per scenario, the policy's mean {metric} over the best single heuristic's mean "
            "there (ratio of means); the worst such ratio over the scenarios evaluated, and "
            "which scenario"
        ),
        "per_scenario": {
            s: {"best_heuristic": b["heuristic"], "best_mean": b["mean"]}
            for s, b in got["best"].items()
        },
        "per_policy": {
            pol: {
                "worst_vs_best_heuristic": w["worst_ratio"],
                "worst_scenario": w["worst_scenario"],
                "best_heuristic": w["best_heuristic"],
                "n_scenarios": w["n_scenarios"],
            }
            for pol in summary["policies"]
            if (w := got["per_policy"].get(pol)) is not None
        },
    }
