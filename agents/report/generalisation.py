"""Which results are on problems a learned policy trained on, and which are not.

:func:`generalisation_summary` sorts each learned policy's scenarios into three groups
by what it trained on (``RunConfig.trained_on``):

- ``trained``: the scenario or family itself was trained on (its ``train`` split;
  evaluation runs the ``test`` split, other seeds of the same distribution);
- ``held-out``: an ``unseen-*`` family of the generator (:mod:`envs.generator`): a
  combination of machine shape and tenant kind its ``gen-*`` families never draw;
- ``other``: neither (a shipped scenario, a file), not trained on by name.

Per group it gives the policy's geometric-mean ratio to the reference, that of the
best single heuristic of the group (the heuristic with the highest geometric mean there)
and the policy's ratio to it; per scenario, the policy's mean over the best heuristic's
mean on that scenario (:func:`agents.stats.worst_ratio_to_best`, as the leaderboard's
robustness columns), so that a scenario where the policy is the worse choice shows, and
with the records, that ratio's paired bootstrap interval over the scenario's episodes
(whether the episodes measured enough to tell).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agents.report.records import metric_by_seed
from agents.report.robustness import scenario_means
from agents.stats import geometric_mean, ratio_of_means, worst_ratio_to_best

__all__ = ["BELOW_TOLERANCE", "GROUPS", "generalisation_summary", "scenario_group"]

#: The groups, in the order reports print them.
GROUPS = ("held-out", "trained", "other")
#: A policy is flagged where its mean falls this far below the scenario's best heuristic.
BELOW_TOLERANCE = 0.02


def scenario_group(scenario: str, trained_on: Sequence[str]) -> str:
    """``trained``, ``held-out`` or ``other`` (see the module docstring)."""
    if scenario in trained_on:
        return "trained"
    return "held-out" if scenario.startswith("unseen-") else "other"


def _ratio(summary: Mapping[str, Any], scen: str, pol: str) -> float | None:
    entry = summary["per_scenario"][scen].get(pol)
    if entry is None or entry.get("ratio") is None:
        return None
    return float(entry["ratio"]["mean"])


def _interval(
    values: Mapping[tuple[str, str], Mapping[int, float]],
    scen: str,
    pol: str,
    best: str,
    boot: Mapping[str, Any],
) -> list[float] | None:
    """The paired interval of ``pol``'s mean over ``best``'s on ``scen`` (None: no pairs)."""
    mine, theirs = values.get((scen, pol), {}), values.get((scen, best), {})
    seeds = sorted(set(mine) & set(theirs))
    if not seeds:
        return None
    r = ratio_of_means([mine[k] for k in seeds], [theirs[k] for k in seeds], **boot)
    return [float(r["ci"][0]), float(r["ci"][1])]


def generalisation_summary(
    summary: Mapping[str, Any],
    trained_on: Mapping[str, Sequence[str]],
    heuristics: Sequence[str],
    records: Sequence[Mapping[str, Any]] | None = None,
    n_boot: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, Any]:
    """Per learned policy (the keys of ``trained_on``), its results by group.

    ``summary`` is :func:`agents.report.summarize_records`'s output (with a reference);
    ``heuristics`` the deployable single heuristics among its policies. Layout::

        {policy: {"trained_on": [...],
                  "per_scenario": {scenario: {"group", "best_heuristic", "vs_best_heuristic",
                                              "vs_best_heuristic_ci": [low, high],
                                              "below": bool}},
                  "groups": {group: {"scenarios": [...], "geomean_ratio": float,
                                     "best_heuristic": str, "best_heuristic_ratio": float,
                                     "vs_best_heuristic": float,
                                     "worst_vs_best_heuristic": float, "worst_scenario": str,
                                     "below": [scenarios]}}}}

    ``below`` lists the scenarios where the policy's mean is more than
    :data:`BELOW_TOLERANCE` under the best heuristic's on that scenario.
    ``vs_best_heuristic_ci`` (with ``records``, the records ``summary`` was made from)
    is the paired bootstrap interval of ``vs_best_heuristic`` over the scenario's episodes
    (:func:`agents.stats.ratio_of_means`, ``n_boot``, ``confidence``, ``seed``).
    """
    heur = [h for h in heuristics if h in summary["policies"]]
    values = metric_by_seed(records, summary["metric"]) if records is not None else None
    boot = {"n_boot": n_boot, "confidence": confidence, "seed": seed}
    means = scenario_means(summary)
    against_best = worst_ratio_to_best(means, heur)  # each scenario's best heuristic
    out: dict[str, Any] = {}
    for pol, names in trained_on.items():
        if pol not in summary["policies"]:
            continue
        mine = against_best["per_policy"].get(pol, {}).get("ratios", {})
        per_scen: dict[str, Any] = {}
        for scen in summary["scenarios"]:
            if pol not in summary["per_scenario"][scen]:
                continue
            entry: dict[str, Any] = {"group": scenario_group(scen, names)}
            if scen in mine:
                best = against_best["best"][scen]["heuristic"]
                vs = mine[scen]
                entry.update(
                    best_heuristic=best, vs_best_heuristic=vs, below=vs < 1.0 - BELOW_TOLERANCE
                )
                ci = None if values is None else _interval(values, scen, pol, best, boot)
                if ci is not None:
                    entry["vs_best_heuristic_ci"] = ci
            per_scen[scen] = entry
        groups: dict[str, Any] = {}
        for g in GROUPS:
            scens = [s for s, e in per_scen.items() if e["group"] == g]
            if not scens:
                continue
            ratios = [_ratio(summary, s, pol) for s in scens]
            info: dict[str, Any] = {"scenarios": scens, "geomean_ratio": None}
            if all(r is not None and r > 0 for r in ratios):
                info["geomean_ratio"] = geometric_mean([r for r in ratios if r is not None])
                geo_h = {}
                for h in heur:
                    rh = [_ratio(summary, s, h) for s in scens]
                    if all(r is not None and r > 0 for r in rh):
                        geo_h[h] = geometric_mean([r for r in rh if r is not None])
                if geo_h:
                    best = max(geo_h, key=lambda h: (geo_h[h], h))
                    info.update(
                        best_heuristic=best,
                        best_heuristic_ratio=geo_h[best],
                        vs_best_heuristic=info["geomean_ratio"] / geo_h[best],
                    )
            worst = worst_ratio_to_best({s: means[s] for s in scens}, heur)["per_policy"].get(pol)
            if worst is not None:
                info.update(
                    worst_scenario=worst["worst_scenario"],
                    worst_vs_best_heuristic=worst["worst_ratio"],
                )
            info["below"] = [s for s in scens if per_scen[s].get("below")]
            groups[g] = info
        out[pol] = {"trained_on": list(names), "per_scenario": per_scen, "groups": groups}
    return out
