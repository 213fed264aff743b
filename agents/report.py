"""Rendering of TierGym evaluation results: summaries, Markdown, CSV and plots.

Input contract: a list of episode records as :func:`agents.rollout.rollout` and
:func:`agents.evaluation.compare` make them, each a dict::

    {
        "scenario": str,            # the scenario or family asked for ("kv-store", "mixed")
        "instance": str,            # optional: the scenario the episode ran ("mixed-test-17")
        "policy": str,
        "seed": int,                # the episode's own seed (run seed + episode index)
        "episode": int,             # index of the episode in its run
        "run_seed": int,            # optional: the run's seed
        "metrics": {"reward": float, "geomean_perf": float, "throughput_gbps": float,
                    "worst_perf": float, "mean_latency_ns": float,
                    "promotion_mbps": float, "demotion_mbps": float},
        "tenants": {name: {"norm_perf": float, "throughput_gbps": float,
                           "mean_latency_ns": float, "dram_access_share": float}},
    }

:func:`summarize_records` turns records into a JSON-serialisable summary (mean and IQM
with bootstrap CIs over episodes; paired ratios to a reference policy; the geometric
mean of those ratios across scenarios with a CI stratified by scenario; the details are
in its docstring).  :func:`markdown_table`,
:func:`leaderboard_markdown` and :func:`plot_ratio_bars` render a summary;
:func:`write_csv` flattens the raw records and :func:`plot_timeseries` draws one
episode's trajectory.  Plots use matplotlib's object-oriented API with the Agg canvas,
so no display is needed and the global pyplot backend is left untouched.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agents.stats import (
    MIN_HEADROOM,
    geomean_ratio,
    geometric_mean,
    headroom_share,
    ratio_to_reference,
    summarize,
)

__all__ = [
    "HEADROOM_LOWER",
    "HEADROOM_METRIC",
    "HEADROOM_UPPER",
    "LOWER_IS_BETTER",
    "METRICS",
    "TENANT_METRICS",
    "headroom_markdown",
    "headroom_summary",
    "leaderboard_markdown",
    "markdown_table",
    "plot_ratio_bars",
    "plot_timeseries",
    "summarize_records",
    "write_csv",
]

#: Episode-level metrics of the record contract, in report order.
METRICS: tuple[str, ...] = (
    "reward",
    "geomean_perf",
    "throughput_gbps",
    "worst_perf",
    "mean_latency_ns",
    "promotion_mbps",
    "demotion_mbps",
    "unconverged_steps",
)
#: Per-tenant metrics of the record contract.
TENANT_METRICS: tuple[str, ...] = (
    "norm_perf",
    "throughput_gbps",
    "mean_latency_ns",
    "dram_access_share",
)
#: Metrics for which a smaller value is better (used to order the leaderboard).
LOWER_IS_BETTER: frozenset[str] = frozenset({"mean_latency_ns"})

_REQUIRED_KEYS = ("scenario", "policy", "seed", "episode", "metrics")

#: The headroom scale: ``HEADROOM_LOWER`` (Linux's default) is 0, ``HEADROOM_UPPER`` (the
#: clairvoyant planner, :mod:`baselines.planner`: an upper bound, not a deployable policy)
#: is 1, on ``HEADROOM_METRIC`` (what the planner maximises), whatever the primary metric.
HEADROOM_LOWER = "dram-first"
HEADROOM_UPPER = "planner"
HEADROOM_METRIC = "geomean_perf"

#: How the intervals are computed, written into every summary.
CI_DESCRIPTION = (
    "bootstrap over episodes: the resampling unit is an episode (one per seed); "
    "per-scenario intervals resample that scenario's episodes; ratios pair a policy's "
    "episode with the reference's episode of the same (scenario, seed); the geometric-mean "
    "ratio's interval resamples episodes within each scenario (strata = scenarios)"
)


# --------------------------------------------------------------------------- records


def _validate_records(records: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Check the record contract; reject two records of one (scenario, policy, seed).

    The seed is the episode's own seed, so it fixes the episode (and, in a family, the
    scenario instance): a second record of it would be a copy, not another sample.
    """
    out = list(records)
    if not out:
        raise ValueError("no evaluation records given")
    seen: set[tuple[str, str, int]] = set()
    for i, rec in enumerate(out):
        if not isinstance(rec, Mapping):
            raise ValueError(f"record {i} is a {type(rec).__name__}, expected a dict")
        missing = [k for k in _REQUIRED_KEYS if k not in rec]
        if missing:
            raise ValueError(f"record {i} lacks required key(s) {missing}")
        if not isinstance(rec["metrics"], Mapping):
            raise ValueError(f"record {i}: 'metrics' must be a dict of floats")
        for name, value in rec["metrics"].items():
            if isinstance(value, bool) or not isinstance(value, int | float | np.number):
                raise ValueError(
                    f"record {i}: metric {name!r} must be a number, got {type(value).__name__}"
                )
        key = (str(rec["scenario"]), str(rec["policy"]), int(rec["seed"]))
        if key in seen:
            raise ValueError(
                f"duplicate record for scenario={key[0]!r} policy={key[1]!r} seed={key[2]} "
                f"(record {i}, episode {rec['episode']}): each seed is one episode"
            )
        seen.add(key)
    return out


def _metric_names(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """Metric columns present in the records: contract order first, extras sorted."""
    present: set[str] = set()
    for rec in records:
        present.update(rec["metrics"])
    return [m for m in METRICS if m in present] + sorted(present - set(METRICS))


def _sorted_unique(values: Iterable[str]) -> list[str]:
    return sorted(set(values))


def _ci_list(ci: tuple[float, float]) -> list[float]:
    return [float(ci[0]), float(ci[1])]


# --------------------------------------------------------------------------- summary


def summarize_records(
    records: Iterable[Mapping[str, Any]],
    reference: str | None,
    metric: str = "geomean_perf",
    seed: int = 0,
    n_boot: int = 2000,
    confidence: float = 0.95,
    method: str = "percentile",
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
         "headroom": {...}}   # only with both "dram-first" and "planner": headroom_summary

    Raises:
        ValueError: for empty or malformed records, two records of one (scenario, policy,
            seed), a primary ``metric`` missing from a record, a ``reference`` that is
            absent from the records or from a scenario, no seed shared with the
            reference, or a non-positive mean ratio in the geometric mean.
    """
    recs = _validate_records(records)
    for i, rec in enumerate(recs):
        if metric not in rec["metrics"]:
            raise ValueError(
                f"record {i} (scenario={rec['scenario']!r}, policy={rec['policy']!r}) "
                f"lacks the primary metric {metric!r}"
            )
    metric_order = _metric_names(recs)
    scenarios = _sorted_unique(str(r["scenario"]) for r in recs)
    all_policies = _sorted_unique(str(r["policy"]) for r in recs)
    if reference is not None:
        if reference not in all_policies:
            raise ValueError(
                f"reference policy {reference!r} is not in the records; "
                f"policies present: {all_policies}"
            )
        policies = [reference] + [p for p in all_policies if p != reference]
    else:
        policies = all_policies
    boot: dict[str, Any] = {
        "n_boot": n_boot,
        "confidence": confidence,
        "seed": seed,
        "method": method,
    }

    groups: dict[str, dict[str, list[Mapping[str, Any]]]] = {s: {} for s in scenarios}
    for rec in recs:
        groups[str(rec["scenario"])].setdefault(str(rec["policy"]), []).append(rec)

    per_scenario: dict[str, dict[str, Any]] = {}
    pair_ratios: dict[str, dict[str, np.ndarray]] = {p: {} for p in policies}
    for scen in scenarios:
        by_policy = groups[scen]
        if reference is not None and reference not in by_policy:
            raise ValueError(
                f"reference policy {reference!r} has no records in scenario {scen!r} "
                f"(policies there: {sorted(by_policy)})"
            )
        ref_by_seed: dict[int, float] = {}
        if reference is not None:
            ref_by_seed = {
                int(r["seed"]): float(r["metrics"][metric]) for r in by_policy[reference]
            }
        per_scenario[scen] = {}
        for pol in policies:
            if pol not in by_policy:
                continue
            group = sorted(by_policy[pol], key=lambda r: int(r["seed"]))
            metrics_out: dict[str, Any] = {}
            for name in metric_order:
                if not all(name in r["metrics"] for r in group):
                    continue
                vals = np.array([float(r["metrics"][name]) for r in group])
                try:
                    s = summarize(vals, **boot)
                except ValueError as exc:
                    raise ValueError(
                        f"scenario {scen!r}, policy {pol!r}, metric {name!r}: {exc}"
                    ) from exc
                metrics_out[name] = {
                    "mean": s["mean"],
                    "mean_ci": _ci_list(s["mean_ci"]),
                    "iqm": s["iqm"],
                    "iqm_ci": _ci_list(s["iqm_ci"]),
                    "n": s["n"],
                }
            ratio_out: dict[str, Any] | None = None
            if reference is not None:
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
                ratio_out = {"mean": r["mean"], "ci": _ci_list(r["ci"]), "n": r["n"]}
                pair_ratios[pol][scen] = r["ratios"]
            per_scenario[scen][pol] = {
                "n": len(group),
                "n_instances": len({str(r.get("instance", r["scenario"])) for r in group}),
                "metrics": metrics_out,
                "ratio": ratio_out,
            }

    per_policy: dict[str, Any] = {}
    for pol in policies:
        scen_list = [s for s in scenarios if pol in per_scenario[s]]
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
            by_scen = pair_ratios[pol]
            if all(np.all(v >= 0.0) for v in by_scen.values()):
                g = geomean_ratio([by_scen[s] for s in scen_list], **boot)
                geo, geo_ci = g["geomean"], _ci_list(g["ci"])
            # else (a metric crossing zero): no interval on a geometric mean
        per_policy[pol] = {
            "geomean_ratio": geo,
            "geomean_ratio_ci": geo_ci,
            "n_scenarios": len(scen_list),
            "scenarios": scen_list,
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
    headroom = headroom_summary(recs, policies, boot)
    if headroom is not None:
        out["headroom"] = headroom
    return out


def headroom_summary(
    records: Sequence[Mapping[str, Any]], policies: Sequence[str], boot: Mapping[str, Any]
) -> dict[str, Any] | None:
    """Each policy's share of the headroom between ``dram-first`` and ``planner`` (or None).

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
    by: dict[tuple[str, str], dict[int, float]] = {}
    for r in records:
        v = r["metrics"].get(HEADROOM_METRIC)
        if v is not None:
            by.setdefault((str(r["scenario"]), str(r["policy"])), {})[int(r["seed"])] = float(v)
    scenarios = sorted({s for s, _ in by})
    have = [s for s in scenarios if (s, HEADROOM_LOWER) in by and (s, HEADROOM_UPPER) in by]
    if not have:
        return None

    def pairs(scen: str, pol: str) -> tuple[np.ndarray, np.ndarray] | None:
        lo, up, mine = by[(scen, HEADROOM_LOWER)], by[(scen, HEADROOM_UPPER)], by.get((scen, pol))
        if mine is None:
            return None
        seeds = sorted(set(lo) & set(up) & set(mine))
        if not seeds or any(lo[k] <= 0 or up[k] <= 0 or mine[k] <= 0 for k in seeds):
            return None
        return (
            np.array([mine[k] / lo[k] for k in seeds]),
            np.array([up[k] / lo[k] for k in seeds]),
        )

    def share(strata: list[tuple[np.ndarray, np.ndarray]]) -> dict[str, Any]:
        try:
            h = headroom_share([a for a, _ in strata], [b for _, b in strata], **boot)
        except ValueError:  # a degenerate bootstrap distribution: the point, no interval
            h = headroom_share(
                [a for a, _ in strata], [b for _, b in strata], **{**boot, "n_boot": 1}
            )
            h["ci"] = None
        ci = h["ci"]
        return {"share": h["share"], "ci": None if ci is None else _ci_list(ci), "n": h["n"]}

    per_scenario: dict[str, Any] = {}
    resolved: list[str] = []
    for scen in have:
        up = pairs(scen, HEADROOM_UPPER)
        head = None if up is None else float(np.mean(up[1])) - 1.0
        entry: dict[str, Any] = {"headroom": head, "policies": {}}
        for pol in policies:
            pr = pairs(scen, pol)
            if pr is not None:
                entry["policies"][pol] = share([pr])
        if head is not None and head >= MIN_HEADROOM:
            resolved.append(scen)
        per_scenario[scen] = entry
    per_policy: dict[str, Any] = {}
    for pol in policies:
        strata = [(s, pairs(s, pol)) for s in resolved]
        got = [(s, p) for s, p in strata if p is not None]
        if not got:
            continue
        h = share([p for _, p in got])
        per_policy[pol] = {**h, "n_scenarios": len(got), "scenarios": [s for s, _ in got]}
    return {
        "lower": HEADROOM_LOWER,
        "upper": HEADROOM_UPPER,
        "metric": HEADROOM_METRIC,
        "min_headroom": MIN_HEADROOM,
        "definition": (
            f"({HEADROOM_METRIC} ratio to {HEADROOM_LOWER} - 1) / ({HEADROOM_UPPER}'s ratio - 1); "
            "per scenario on mean paired ratios, across scenarios on their geometric means over "
            "the scenarios with headroom; the planner is clairvoyant (an upper bound, not a "
            "deployable policy)"
        ),
        "per_scenario": per_scenario,
        "per_policy": per_policy,
    }


# --------------------------------------------------------------------------- Markdown


def _md_escape(text: str) -> str:
    return str(text).replace("|", "\\|")


def _fmt(x: float, digits: int) -> str:
    return f"{x:.{digits}f}"


def markdown_table(
    summary: Mapping[str, Any],
    metric: str | None = None,
    stat: str = "mean",
    digits: int = 3,
) -> str:
    """Markdown table of one metric: rows = scenarios, columns = policies.

    Cells read ``value [low, high]`` (``stat`` is ``"mean"`` or ``"iqm"``, the interval
    its bootstrap CI); a policy not run on a scenario shows ``-``.  When the summary has
    a reference, a last row gives each policy's geometric mean of ratios to it.

    Args:
        summary: output of :func:`summarize_records`.
        metric: metric to show; defaults to the summary's primary metric.
        stat: ``"mean"`` or ``"iqm"``.
        digits: decimals for every number.
    """
    if stat not in ("mean", "iqm"):
        raise ValueError(f"stat must be 'mean' or 'iqm', got {stat!r}")
    metric = metric or summary["metric"]
    policies = list(summary["policies"])
    header = (
        f"| scenario ({metric}, {stat} [{summary['confidence']:.0%} CI]) | "
        + " | ".join(_md_escape(p) for p in policies)
        + " |"
    )
    lines = [header, "|" + "---|" * (len(policies) + 1)]
    for scen in summary["scenarios"]:
        cells = []
        for pol in policies:
            entry = summary["per_scenario"][scen].get(pol)
            if entry is None or metric not in entry["metrics"]:
                cells.append("-")
                continue
            m = entry["metrics"][metric]
            lo, hi = m[f"{stat}_ci"]
            cells.append(f"{_fmt(m[stat], digits)} [{_fmt(lo, digits)}, {_fmt(hi, digits)}]")
        lines.append(f"| {_md_escape(scen)} | " + " | ".join(cells) + " |")
    ref = summary.get("reference")
    if ref is not None:
        cells = []
        for pol in policies:
            geo = summary["per_policy"][pol]["geomean_ratio"]
            cells.append("-" if geo is None else _fmt(geo, digits))
        lines.append(
            f"| geomean ratio to {_md_escape(ref)} ({summary['metric']}) | "
            + " | ".join(cells)
            + " |"
        )
    text = "\n".join(lines) + "\n"
    if summary.get("headroom"):
        text += "\n" + headroom_markdown(summary, digits=digits)
    return text


def _share_text(entry: Mapping[str, Any] | None, digits: int) -> str:
    if entry is None or entry.get("share") is None:
        return "-"
    ci = entry.get("ci")
    ci_text = "" if ci is None else f" [{_fmt(ci[0], digits)}, {_fmt(ci[1], digits)}]"
    return f"{_fmt(entry['share'], digits)}{ci_text}"


def headroom_markdown(summary: Mapping[str, Any], digits: int = 3) -> str:
    """Markdown table of each policy's headroom share: rows = scenarios, then across scenarios.

    Cells read ``share [low, high]`` (0 = ``dram-first``, 1 = the clairvoyant
    ``planner``; see :func:`headroom_summary`); ``-`` where there is none (the
    policy did not run, or the planner found no headroom there). Empty text
    when the summary has no headroom section.
    """
    head = summary.get("headroom")
    if not head:
        return ""
    policies = list(summary["policies"])
    lines = [
        f"| headroom share ({head['metric']}: {_md_escape(head['lower'])} = 0, "
        f"{_md_escape(head['upper'])} = 1, an upper bound) | "
        + " | ".join(_md_escape(p) for p in policies)
        + " |",
        "|" + "---|" * (len(policies) + 1),
    ]
    for scen, entry in head["per_scenario"].items():
        h = entry["headroom"]
        label = f"{scen} (headroom {'-' if h is None else f'{h:+.1%}'})"
        cells = [_share_text(entry["policies"].get(p), digits) for p in policies]
        lines.append(f"| {_md_escape(label)} | " + " | ".join(cells) + " |")
    cells = [_share_text(head["per_policy"].get(p), digits) for p in policies]
    lines.append("| across scenarios with headroom | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def leaderboard_markdown(
    summary: Mapping[str, Any],
    higher_is_better: bool | None = None,
    digits: int = 3,
) -> str:
    """Markdown leaderboard ranking policies by geometric-mean ratio to the reference.

    Columns: rank, policy, the geometric mean over scenarios of the mean ratio to the
    reference, its stratified-bootstrap interval (``-`` where there is none) and the
    number of scenarios the policy ran.

    Args:
        summary: output of :func:`summarize_records` made with a reference policy.
        higher_is_better: ranking direction; ``None`` infers it from the primary metric
            (only metrics in :data:`LOWER_IS_BETTER` rank ascending).
        digits: decimals for the ratio.

    Raises:
        ValueError: if the summary has no reference policy.
    """
    ref = summary.get("reference")
    if ref is None:
        raise ValueError("a leaderboard needs a summary made with a reference policy")
    if higher_is_better is None:
        higher_is_better = summary["metric"] not in LOWER_IS_BETTER
    n_total = len(summary["scenarios"])
    rows = [(pol, info) for pol, info in summary["per_policy"].items()]
    sign = -1.0 if higher_is_better else 1.0
    rows.sort(key=lambda item: (sign * item[1]["geomean_ratio"], item[0]))
    head = summary.get("headroom")
    lines = [
        f"| rank | policy | geomean ratio to {_md_escape(ref)} ({summary['metric']}) "
        f"| {summary['confidence']:.0%} CI | scenarios |"
        + (f" headroom share ({head['upper']} = 1) |" if head else ""),
        "|---|---|---|---|---|" + ("---|" if head else ""),
    ]
    for rank, (pol, info) in enumerate(rows, start=1):
        ci = info.get("geomean_ratio_ci")
        ci_text = "-" if ci is None else f"[{_fmt(ci[0], digits)}, {_fmt(ci[1], digits)}]"
        lines.append(
            f"| {rank} | {_md_escape(pol)} | {_fmt(info['geomean_ratio'], digits)} | "
            f"{ci_text} | {info['n_scenarios']}/{n_total} |"
            + (f" {_share_text(head['per_policy'].get(pol), digits)} |" if head else "")
        )
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- CSV


def write_csv(
    records: Iterable[Mapping[str, Any]],
    path: str | Path,
    include_tenants: bool = False,
) -> Path:
    """Write one CSV row per record: ``scenario,instance,policy,seed,episode,<metric...>``.

    ``instance`` is the scenario instance the episode ran (blank for a record without
    one); ``seed`` the episode's own seed.  Metric columns follow :data:`METRICS` order, then any extra metrics sorted by name;
    a metric a record lacks is left blank.  With ``include_tenants``, columns
    ``tenant.<name>.<key>`` are appended for every tenant seen.  Floats are written with
    full precision.  Returns the path written.
    """
    recs = _validate_records(records)
    metric_cols = _metric_names(recs)
    tenant_cols: list[tuple[str, str]] = []
    if include_tenants:
        seen: dict[tuple[str, str], None] = {}
        for rec in recs:
            for tname, tvals in sorted((rec.get("tenants") or {}).items()):
                keys = [k for k in TENANT_METRICS if k in tvals] + sorted(
                    set(tvals) - set(TENANT_METRICS)
                )
                for k in keys:
                    seen.setdefault((str(tname), k), None)
        tenant_cols = sorted(seen, key=lambda tk: tk[0])
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(
            ["scenario", "instance", "policy", "seed", "episode", *metric_cols]
            + [f"tenant.{t}.{k}" for t, k in tenant_cols]
        )
        for rec in recs:
            row: list[Any] = [
                rec["scenario"],
                rec.get("instance", ""),
                rec["policy"],
                int(rec["seed"]),
                int(rec["episode"]),
            ]
            row += [
                repr(float(rec["metrics"][m])) if m in rec["metrics"] else "" for m in metric_cols
            ]
            tenants = rec.get("tenants") or {}
            for t, k in tenant_cols:
                v = tenants.get(t, {}).get(k)
                row.append("" if v is None else repr(float(v)))
            writer.writerow(row)
    return out


# --------------------------------------------------------------------------- plots


def _new_figure(figsize: tuple[float, float]) -> Any:
    """A matplotlib Figure bound to the Agg canvas (no pyplot, no display)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Any, path: str | Path) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png", dpi=120)
    return out


def plot_ratio_bars(
    summary: Mapping[str, Any],
    path: str | Path,
    include_reference: bool = False,
) -> Path:
    """PNG grouped bar chart of each policy's ratio to the reference per scenario.

    Bars are the mean paired ratio, error bars its bootstrap CI, and a dashed line marks
    parity (1.0).  The reference itself (always exactly 1) is omitted unless
    ``include_reference``.  Returns the path written.

    Raises:
        ValueError: if the summary has no reference policy.
    """
    ref = summary.get("reference")
    if ref is None:
        raise ValueError("plot_ratio_bars needs a summary made with a reference policy")
    scenarios = list(summary["scenarios"])
    policies = [p for p in summary["policies"] if include_reference or p != ref]
    n_bars = max(1, len(policies))
    fig = _new_figure((min(30.0, max(6.0, 1.5 + len(scenarios) * (0.4 + 0.3 * n_bars))), 4.5))
    ax = fig.add_subplot(1, 1, 1)
    x = np.arange(len(scenarios), dtype=float)
    width = 0.8 / max(1, len(policies))
    for j, pol in enumerate(policies):
        means, lo_err, hi_err = [], [], []
        for scen in scenarios:
            entry = summary["per_scenario"][scen].get(pol)
            if entry is None or entry["ratio"] is None:
                means.append(math.nan)
                lo_err.append(0.0)
                hi_err.append(0.0)
                continue
            m = entry["ratio"]["mean"]
            lo, hi = entry["ratio"]["ci"]
            means.append(m)
            lo_err.append(max(0.0, m - lo))
            hi_err.append(max(0.0, hi - m))
        ax.bar(
            x - 0.4 + width * (j + 0.5),
            means,
            width,
            yerr=np.array([lo_err, hi_err]),
            capsize=3,
            label=pol,
        )
    ax.axhline(1.0, color="black", linestyle="--", linewidth=1)
    ax.set_xticks(x)
    ax.set_xticklabels(scenarios, rotation=30, ha="right")
    ax.set_ylabel(f"{summary['metric']} / {ref}")
    ax.set_title(f"Ratio to {ref} ({summary['confidence']:.0%} CI)")
    if policies:
        ax.legend(fontsize="small")
    return _save(fig, path)


def plot_timeseries(series: Mapping[str, Any], path: str | Path, title: str) -> Path:
    """PNG of one episode: three stacked panels sharing the time-step axis.

    Panels: each tenant's normalised performance; each tenant's DRAM access share; the
    policy's actions (per-node weights as lines, promotion rate in MB/s on a twin axis).

    ``series`` is ``{"t": [...], "tenants": {name: {"norm_perf": [...],
    "dram_access_share": [...]}}, "weights": {label: [...]},
    "promotion_rate_mbps": [...]}``; every list must have the length of ``t``.
    Returns the path written.

    Raises:
        ValueError: for a missing key, an empty ``t`` or a list of the wrong length.
    """
    for key in ("t", "tenants", "weights", "promotion_rate_mbps"):
        if key not in series:
            raise ValueError(f"series lacks key {key!r}")
    t = np.asarray(series["t"], dtype=float)
    if t.ndim != 1 or t.size == 0:
        raise ValueError("series['t'] must be a non-empty list of time steps")

    def _check(values: Any, what: str) -> np.ndarray:
        arr = np.asarray(values, dtype=float)
        if arr.shape != t.shape:
            raise ValueError(f"{what} has {arr.size} values but t has {t.size}")
        return arr

    fig = _new_figure((9.0, 8.0))
    ax_perf = fig.add_subplot(3, 1, 1)
    ax_share = fig.add_subplot(3, 1, 2, sharex=ax_perf)
    ax_act = fig.add_subplot(3, 1, 3, sharex=ax_perf)
    for name, tvals in series["tenants"].items():
        for key in ("norm_perf", "dram_access_share"):
            if key not in tvals:
                raise ValueError(f"tenant {name!r} lacks {key!r}")
        ax_perf.plot(t, _check(tvals["norm_perf"], f"tenant {name!r} norm_perf"), label=name)
        ax_share.plot(
            t, _check(tvals["dram_access_share"], f"tenant {name!r} dram_access_share"), label=name
        )
    ax_perf.set_ylabel("normalised perf")
    ax_share.set_ylabel("DRAM access share")
    ax_share.set_ylim(-0.02, 1.02)
    lines = []
    for label, w in series["weights"].items():
        lines += ax_act.plot(t, _check(w, f"weights {label!r}"), label=f"weight {label}")
    ax_act.set_ylabel("node weight")
    ax_rate = ax_act.twinx()
    lines += ax_rate.plot(
        t,
        _check(series["promotion_rate_mbps"], "promotion_rate_mbps"),
        color="black",
        linestyle=":",
        label="promotion MB/s",
    )
    ax_rate.set_ylabel("promotion rate (MB/s)")
    ax_act.set_xlabel("time step")
    if series["tenants"]:
        ax_perf.legend(fontsize="small", loc="best")
        ax_share.legend(fontsize="small", loc="best")
    ax_act.legend(lines, [ln.get_label() for ln in lines], fontsize="small", loc="best")
    for ax in (ax_perf, ax_share):
        ax.tick_params(labelbottom=False)
    fig.suptitle(title)
    return _save(fig, path)
