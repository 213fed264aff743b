"""The statistics summary of evaluation records: means, IQMs, paired ratios, headroom shares.

:func:`summarize_records` turns episode records into a JSON-serialisable
summary (mean and IQM with bootstrap CIs over episodes; paired ratios to a
reference policy; the geometric mean of those ratios across scenarios with a CI
stratified by scenario; the details are in its docstring), built in steps: the
records grouped by (scenario, policy), each group's metric statistics and
paired ratio, then each policy's geometric mean across scenarios.
:func:`headroom_summary` adds each policy's share of the headroom between
``dram-first`` and the clairvoyant planner when the records have both. The
intervals come from :mod:`agents.stats`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from agents.report.records import metric_by_seed, metric_names, validate_records
from agents.report.robustness import robustness_summary
from agents.stats import (
    MIN_HEADROOM,
    geomean_ratio,
    geometric_mean,
    headroom_share,
    ratio_to_reference,
    summarize,
)

__all__ = [
    "CI_DESCRIPTION",
    "HEADROOM_LOWER",
    "HEADROOM_METRIC",
    "HEADROOM_UPPER",
    "HEADROOM_UPPERS",
    "headroom_summary",
    "summarize_records",
]

#: The headroom scale: ``HEADROOM_LOWER`` (Linux's default) is 0, ``HEADROOM_UPPER`` (the
#: clairvoyant planner, :mod:`baselines.planner`: an upper bound, not a deployable policy)
#: is 1, on ``HEADROOM_METRIC`` (what the planner maximises), whatever the primary metric.
HEADROOM_LOWER = "dram-first"
HEADROOM_UPPER = "planner"
HEADROOM_METRIC = "geomean_perf"
#: The summary's headroom sections, by key, and the upper bound each takes as 1: the
#: clairvoyant planner (``headroom``) and the causal model-predictive controller
#: (``headroom_mpc``, :mod:`baselines.mpc`: it knows the simulated machine's present state,
#: never its future), what the policy could reach knowing what a kernel could know.
HEADROOM_UPPERS = {"headroom": HEADROOM_UPPER, "headroom_mpc": "mpc"}
_BOUND_NOTE = {
    "planner": "the planner is clairvoyant (an upper bound, not a deployable policy)",
    "mpc": "mpc is causal but searches on the simulated machine's exact present state (a "
    "bound, not a deployable policy)",
}

#: How the intervals are computed, written into every summary.
CI_DESCRIPTION = (
    "bootstrap over episodes: the resampling unit is an episode (one per seed); "
    "per-scenario intervals resample that scenario's episodes; ratios pair a policy's "
    "episode with the reference's episode of the same (scenario, seed); the geometric-mean "
    "ratio's interval resamples episodes within each scenario (strata = scenarios)"
)

#: Records of one scenario by policy name.
_Groups = dict[str, list[Mapping[str, Any]]]


def _ci_list(ci: tuple[float, float]) -> list[float]:
    return [float(ci[0]), float(ci[1])]


# --------------------------------------------------------------------------- summary


def _check_primary_metric(recs: Sequence[Mapping[str, Any]], metric: str) -> None:
    """Every record has the primary ``metric``, else :class:`ValueError` naming the first."""
    for i, rec in enumerate(recs):
        if metric not in rec["metrics"]:
            raise ValueError(
                f"record {i} (scenario={rec['scenario']!r}, policy={rec['policy']!r}) "
                f"lacks the primary metric {metric!r}"
            )


def _policy_order(recs: Sequence[Mapping[str, Any]], reference: str | None) -> list[str]:
    """The records' policies, the reference first and the rest sorted (all sorted without one)."""
    all_policies = sorted({str(r["policy"]) for r in recs})
    if reference is None:
        return all_policies
    if reference not in all_policies:
        raise ValueError(
            f"reference policy {reference!r} is not in the records; "
            f"policies present: {all_policies}"
        )
    return [reference] + [p for p in all_policies if p != reference]


def _group_records(
    recs: Sequence[Mapping[str, Any]], scenarios: Sequence[str]
) -> dict[str, _Groups]:
    """The records by scenario, then by policy, in record order."""
    groups: dict[str, _Groups] = {s: {} for s in scenarios}
    for rec in recs:
        groups[str(rec["scenario"])].setdefault(str(rec["policy"]), []).append(rec)
    return groups


def _metric_stats(
    group: Sequence[Mapping[str, Any]],
    names: Sequence[str],
    boot: Mapping[str, Any],
    where: str,
) -> dict[str, Any]:
    """Mean and IQM, each with its interval, of every metric in ``names`` all of ``group`` has.

    ``where`` (``scenario 'a', policy 'b'``) prefixes the message of a failed bootstrap.
    """
    out: dict[str, Any] = {}
    for name in names:
        if not all(name in r["metrics"] for r in group):
            continue
        vals = np.array([float(r["metrics"][name]) for r in group])
        try:
            s = summarize(vals, **boot)
        except ValueError as exc:
            raise ValueError(f"{where}, metric {name!r}: {exc}") from exc
        # mean, mean_ci, iqm, iqm_ci, n (the strata: one)
        out[name] = {
            k: _ci_list(v) if k.endswith("_ci") else v for k, v in s.items() if k != "n_strata"
        }
    return out


def _paired_ratio(
    group: Sequence[Mapping[str, Any]],
    ref_by_seed: Mapping[int, float],
    metric: str,
    boot: Mapping[str, Any],
    scen: str,
    pol: str,
    reference: str,
) -> tuple[dict[str, Any], np.ndarray]:
    """The mean ratio of ``group``'s ``metric`` to the reference's on the same seeds.

    Returns ``({"mean", "ci", "n"}, the ratio of each pair)``.

    Raises:
        ValueError: no seed shared with the reference, or a failed bootstrap.
    """
    pairs = [
        (float(r["metrics"][metric]), ref_by_seed[int(r["seed"])])
        for r in group
        if int(r["seed"]) in ref_by_seed
    ]
    if not pairs:
        raise ValueError(
            f"scenario {scen!r}: policy {pol!r} shares no seed with "
            f"reference {reference!r}, so ratios cannot be paired"
        )
    num, den = (np.array(col) for col in zip(*pairs, strict=True))
    try:
        r = ratio_to_reference(num, den, **boot)
    except ValueError as exc:
        raise ValueError(f"scenario {scen!r}, policy {pol!r}, ratio: {exc}") from exc
    return {"mean": r["mean"], "ci": _ci_list(r["ci"]), "n": r["n"]}, r["ratios"]


def _scenario_summary(
    scen: str,
    by_policy: _Groups,
    policies: Sequence[str],
    reference: str | None,
    metric: str,
    names: Sequence[str],
    boot: Mapping[str, Any],
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """One scenario's entry per policy that ran it, and each one's paired ratios (with a reference).

    Policies come in ``policies`` order; an entry is ``{"n", "n_instances", "metrics",
    "ratio"}`` as :func:`summarize_records` lays it out.

    Raises:
        ValueError: the reference did not run the scenario, or a group's statistics failed.
    """
    if reference is not None and reference not in by_policy:
        raise ValueError(
            f"reference policy {reference!r} has no records in scenario {scen!r} "
            f"(policies there: {sorted(by_policy)})"
        )
    ref_by_seed: dict[int, float] = {}
    if reference is not None:
        ref_by_seed = {int(r["seed"]): float(r["metrics"][metric]) for r in by_policy[reference]}
    entries: dict[str, Any] = {}
    ratios: dict[str, np.ndarray] = {}
    for pol in policies:
        if pol not in by_policy:
            continue
        group = sorted(by_policy[pol], key=lambda r: int(r["seed"]))
        metrics_out = _metric_stats(group, names, boot, f"scenario {scen!r}, policy {pol!r}")
        ratio_out: dict[str, Any] | None = None
        if reference is not None:
            ratio_out, ratios[pol] = _paired_ratio(
                group, ref_by_seed, metric, boot, scen, pol, reference
            )
        entries[pol] = {
            "n": len(group),
            "n_instances": len({str(r.get("instance", r["scenario"])) for r in group}),
            "metrics": metrics_out,
            "ratio": ratio_out,
        }
    return entries, ratios


def _policy_summary(
    pol: str,
    per_scenario: Mapping[str, Mapping[str, Any]],
    by_scen: Mapping[str, np.ndarray],
    reference: str | None,
    metric: str,
    boot: Mapping[str, Any],
) -> dict[str, Any]:
    """One policy's geometric mean of its mean ratios over the scenarios it ran, with its interval.

    The interval is a bootstrap stratified by scenario over the paired ratios
    ``by_scen``; there is none where a ratio is negative (a metric crossing zero),
    and neither a mean nor an interval without a reference.

    Raises:
        ValueError: a non-positive mean ratio in the geometric mean.
    """
    scen_list = [s for s, entries in per_scenario.items() if pol in entries]
    geo: float | None = None
    geo_ci: list[float] | None = None
    if reference is not None:
        try:
            geo = geometric_mean([per_scenario[s][pol]["ratio"]["mean"] for s in scen_list])
        except ValueError as exc:
            raise ValueError(
                f"policy {pol!r}: cannot take the geometric mean of its ratios to "
                f"{reference!r} on {metric!r}: {exc}"
            ) from exc
        if all(np.all(v >= 0.0) for v in by_scen.values()):
            g = geomean_ratio([by_scen[s] for s in scen_list], **boot)
            geo, geo_ci = g["geomean"], _ci_list(g["ci"])
        # else (a metric crossing zero): no interval on a geometric mean
    return {
        "geomean_ratio": geo,
        "geomean_ratio_ci": geo_ci,
        "n_scenarios": len(scen_list),
        "scenarios": scen_list,
    }


def summarize_records(
    records: Iterable[Mapping[str, Any]],
    reference: str | None,
    metric: str = "geomean_perf",
    seed: int = 0,
    n_boot: int = 2000,
    confidence: float = 0.95,
    method: str = "percentile",
    heuristics: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Aggregate episode records into a JSON-serialisable summary.

    The intervals (all ``confidence``-level bootstrap intervals from
    :mod:`agents.stats`, ``n_boot`` resamples, ``method`` percentile by default, drawn
    from ``seed``):

    * per scenario and policy, each metric present in all of that group's records gets
      its mean and IQM (``scipy.stats.trim_mean(x, 0.25)``), each with an interval
      resampling the group's episodes (the unit: one episode, i.e. one seed).  A cell is
      one stratum: a fixed scenario has a single instance, and a family such as
      ``mixed`` draws each episode's instance from its 512-scenario pool by the
      episode's seed, so instances are part of what an episode samples (stratifying on
      them would make one-episode strata and zero-width intervals).  ``n_instances``
      counts the distinct ``record["instance"]`` values;
    * with a ``reference`` policy, the primary ``metric`` of each episode is divided by
      the reference's on the same (scenario, seed), and the mean ratio gets an interval
      resampling those pairs;
    * across scenarios, each policy's geometric mean of its per-scenario mean ratios gets
      an interval from a stratified bootstrap, strata = scenarios: every replicate
      resamples each scenario's pairs within that scenario.

    The output contains only dicts, lists, strings, ints, floats and ``None``, and is
    deterministic for a given ``seed``.

    Layout::

        {"metric", "reference", "seed", "n_boot", "confidence", "method", "intervals",
         "scenarios": [...], "policies": [...],          # reference first, rest sorted
         "per_scenario": {scenario: {policy: {
             "n": int, "n_instances": int,
             "metrics": {name: {"mean", "mean_ci": [lo, hi], "iqm", "iqm_ci", "n"}},
             "ratio": {"mean", "ci": [lo, hi], "n"} | None}}},
         "per_policy": {policy: {"geomean_ratio": float | None,
                                 "geomean_ratio_ci": [lo, hi] | None,
                                 "n_scenarios": int, "scenarios": [...]}},
         "headroom": {...},   # only with both "dram-first" and "planner": headroom_summary
         "headroom_mpc": {...},  # the same against "mpc" where it ran (HEADROOM_UPPERS)
         "robustness": {...}} # only with ``heuristics``: robustness_summary

    ``heuristics`` (evaluation's deployable single heuristics) adds ``"robustness"``
    (:func:`agents.report.robustness_summary`): per policy its worst ratio to the best of
    those heuristics over the scenarios, and which scenario.

    Raises:
        ValueError: for empty or malformed records, two records of one (scenario, policy,
            seed), a primary ``metric`` missing from a record, a ``reference`` that is
            absent from the records or from a scenario, no seed shared with the
            reference, or a non-positive mean ratio in the geometric mean.
    """
    recs = validate_records(records)
    _check_primary_metric(recs, metric)
    names = metric_names(recs)
    scenarios = sorted({str(r["scenario"]) for r in recs})
    policies = _policy_order(recs, reference)
    boot: dict[str, Any] = dict(n_boot=n_boot, confidence=confidence, seed=seed, method=method)
    groups = _group_records(recs, scenarios)
    per_scenario: dict[str, dict[str, Any]] = {}
    pair_ratios: dict[str, dict[str, np.ndarray]] = {p: {} for p in policies}
    for scen in scenarios:
        per_scenario[scen], ratios = _scenario_summary(
            scen, groups[scen], policies, reference, metric, names, boot
        )
        for pol, arr in ratios.items():
            pair_ratios[pol][scen] = arr
    per_policy = {
        pol: _policy_summary(pol, per_scenario, pair_ratios[pol], reference, metric, boot)
        for pol in policies
    }
    out: dict[str, Any] = {
        "metric": metric,
        "reference": reference,
        "seed": int(seed),
        "n_boot": int(n_boot),
        "confidence": float(confidence),
        "method": method,
        "intervals": CI_DESCRIPTION,
        "scenarios": scenarios,
        "policies": policies,
        "per_scenario": per_scenario,
        "per_policy": per_policy,
    }
    for key, upper in HEADROOM_UPPERS.items():
        headroom = headroom_summary(recs, policies, boot, upper)
        if headroom is not None:
            out[key] = headroom
    if heuristics is not None:
        out["robustness"] = robustness_summary(out, heuristics)
    return out


# --------------------------------------------------------------------------- headroom

#: A stratum of the headroom share: the policy's and the upper bound's paired ratios to
#: dram-first.
_Pairs = tuple[np.ndarray, np.ndarray]


def _headroom_pairs(
    by: Mapping[tuple[str, str], Mapping[int, float]], scen: str, pol: str, upper: str
) -> _Pairs | None:
    """``pol``'s and ``upper``'s ratios to dram-first on the seeds all three ran in ``scen``.

    None where ``pol`` did not run the scenario, no seed is shared, or a value is not positive.
    """
    lo, up, mine = by[(scen, HEADROOM_LOWER)], by[(scen, upper)], by.get((scen, pol))
    if mine is None:
        return None
    seeds = sorted(set(lo) & set(up) & set(mine))
    if not seeds or any(lo[k] <= 0 or up[k] <= 0 or mine[k] <= 0 for k in seeds):
        return None
    return (
        np.array([mine[k] / lo[k] for k in seeds]),
        np.array([up[k] / lo[k] for k in seeds]),
    )


def _headroom_share(strata: list[_Pairs], boot: Mapping[str, Any]) -> dict[str, Any]:
    """``{"share", "ci", "n"}`` over the strata; ``ci`` None where the bootstrap is degenerate."""
    try:
        h = headroom_share([a for a, _ in strata], [b for _, b in strata], **boot)
    except ValueError:  # a degenerate bootstrap distribution: the point, no interval
        h = headroom_share([a for a, _ in strata], [b for _, b in strata], **{**boot, "n_boot": 1})
        h["ci"] = None
    ci = h["ci"]
    return {"share": h["share"], "ci": None if ci is None else _ci_list(ci), "n": h["n"]}


def headroom_summary(
    records: Sequence[Mapping[str, Any]],
    policies: Sequence[str],
    boot: Mapping[str, Any],
    upper: str = HEADROOM_UPPER,
) -> dict[str, Any] | None:
    """Each policy's share of the headroom between ``dram-first`` and ``upper`` (the planner,
    or another bound of :data:`HEADROOM_UPPERS`; below, "planner" stands for it) (or None).

    ``(policy - dram-first) / (planner - dram-first)`` on :data:`HEADROOM_METRIC`,
    computed on paired per-episode ratios to ``dram-first`` (same scenario and seed):
    per scenario ``(mean ratio - 1) / (planner's mean ratio - 1)``; across
    scenarios the same with the geometric means over scenarios of the mean ratios
    (:func:`agents.stats.headroom_share`; intervals resample each scenario's
    episodes, policy and planner paired). 0 is ``dram-first``, 1 the planner; a
    share is ``None`` where the planner's headroom is under
    :data:`agents.stats.MIN_HEADROOM` (no headroom to share), and those scenarios
    are left out of the aggregate. ``None`` when the records lack either reference.

    Layout::

        {"lower": "dram-first", "upper": "planner", "metric": "geomean_perf",
         "min_headroom": float, "definition": str,
         "per_scenario": {scenario: {"headroom": float,   # planner's mean ratio - 1
                                     "policies": {policy: {"share", "ci", "n"}}}},
         "per_policy": {policy: {"share", "ci", "n_scenarios", "scenarios"}}}
    """
    by = metric_by_seed(records, HEADROOM_METRIC)
    scenarios = sorted({s for s, _ in by})
    have = [s for s in scenarios if (s, HEADROOM_LOWER) in by and (s, upper) in by]
    if not have:
        return None
    per_scenario: dict[str, Any] = {}
    resolved: list[str] = []
    for scen in have:
        up = _headroom_pairs(by, scen, upper, upper)
        head = None if up is None else float(np.mean(up[1])) - 1.0
        entry: dict[str, Any] = {"headroom": head, "policies": {}}
        for pol in policies:
            pr = _headroom_pairs(by, scen, pol, upper)
            if pr is not None:
                entry["policies"][pol] = _headroom_share([pr], boot)
        if head is not None and head >= MIN_HEADROOM:
            resolved.append(scen)
        per_scenario[scen] = entry
    per_policy: dict[str, Any] = {}
    for pol in policies:
        strata = [(s, _headroom_pairs(by, s, pol, upper)) for s in resolved]
        got = [(s, p) for s, p in strata if p is not None]
        if not got:
            continue
        h = _headroom_share([p for _, p in got], boot)
        per_policy[pol] = {**h, "n_scenarios": len(got), "scenarios": [s for s, _ in got]}
    return {
        "lower": HEADROOM_LOWER,
        "upper": upper,
        "metric": HEADROOM_METRIC,
        "min_headroom": MIN_HEADROOM,
        "definition": (
            f"({HEADROOM_METRIC} ratio to {HEADROOM_LOWER} - 1) / ({upper}'s ratio - 1); "
            "per scenario on mean paired ratios, across scenarios on their geometric means over "
            f"the scenarios with headroom; {_BOUND_NOTE.get(upper, upper + ' is a bound')}"
        ),
        "per_scenario": per_scenario,
        "per_policy": per_policy,
    }
