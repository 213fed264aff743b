"""Markdown renderings of a summary: the per-scenario table, the headroom table, the leaderboard.

Each function reads a summary as :func:`agents.report.summarize_records` makes it
and returns Markdown text ending in a newline: :func:`markdown_table` (one metric,
rows = scenarios, columns = policies, then the headroom table when the summary has
one), :func:`headroom_markdown` (each policy's share of the headroom between
``dram-first`` and the planner) and :func:`leaderboard_markdown` (policies ranked
by their geometric-mean ratio to the reference).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agents.report.generalisation import BELOW_TOLERANCE
from agents.report.records import LOWER_IS_BETTER
from agents.report.summary import HEADROOM_UPPERS

__all__ = [
    "generalisation_markdown",
    "headroom_markdown",
    "leaderboard_markdown",
    "markdown_table",
]


def _md_escape(text: str) -> str:
    return str(text).replace("|", "\\|")


#: Decimals of every number in the tables.
DIGITS = 3


def _fmt(x: float) -> str:
    return f"{x:.{DIGITS}f}"


def _ci(ci: Sequence[float]) -> str:
    """``[low, high]`` of an interval."""
    return f"[{_fmt(ci[0])}, {_fmt(ci[1])}]"


def _row(first: str, cells: Sequence[str]) -> str:
    """A table row: ``first``, then ``cells``."""
    return f"| {first} | " + " | ".join(cells) + " |"


def _header(first: str, policies: list[str]) -> list[str]:
    """A table's header and separator lines: ``first``, then one column per policy."""
    return [_row(first, [_md_escape(p) for p in policies]), "|" + "---|" * (len(policies) + 1)]


def _metric_cell(entry: Mapping[str, Any] | None, metric: str, stat: str) -> str:
    """``value [low, high]`` of one (scenario, policy) entry's ``stat``; ``-`` without one."""
    if entry is None or metric not in entry["metrics"]:
        return "-"
    m = entry["metrics"][metric]
    return f"{_fmt(m[stat])} {_ci(m[f'{stat}_ci'])}"


def markdown_table(
    summary: Mapping[str, Any], metric: str | None = None, stat: str = "mean"
) -> str:
    """Markdown table of one metric: rows = scenarios, columns = policies.

    Cells read ``value [low, high]`` (``stat`` is ``"mean"`` or ``"iqm"``, the interval
    its bootstrap CI); a policy not run on a scenario shows ``-``.  When the summary has
    a reference, a last row gives each policy's geometric mean of ratios to it.

    Args:
        summary: output of :func:`agents.report.summarize_records`.
        metric: metric to show; defaults to the summary's primary metric.
        stat: ``"mean"`` or ``"iqm"``.
    """
    if stat not in ("mean", "iqm"):
        raise ValueError(f"stat must be 'mean' or 'iqm', got {stat!r}")
    metric = metric or summary["metric"]
    policies = list(summary["policies"])
    lines = _header(f"scenario ({metric}, {stat} [{summary['confidence']:.0%} CI])", policies)
    for scen in summary["scenarios"]:
        row = summary["per_scenario"][scen]
        cells = [_metric_cell(row.get(pol), metric, stat) for pol in policies]
        lines.append(_row(_md_escape(scen), cells))
    ref = summary.get("reference")
    if ref is not None:
        geos = [summary["per_policy"][pol]["geomean_ratio"] for pol in policies]
        cells = ["-" if geo is None else _fmt(geo) for geo in geos]
        lines.append(_row(f"geomean ratio to {_md_escape(ref)} ({summary['metric']})", cells))
    text = "\n".join(lines) + "\n"
    for key in HEADROOM_UPPERS:
        if summary.get(key):
            text += "\n" + headroom_markdown(summary, key=key)
    return text


def _share_text(entry: Mapping[str, Any] | None) -> str:
    """``share [low, high]`` of a headroom entry (no interval where it has none), else ``-``."""
    if entry is None or entry.get("share") is None:
        return "-"
    ci = entry.get("ci")
    return _fmt(entry["share"]) + ("" if ci is None else f" {_ci(ci)}")


def headroom_markdown(summary: Mapping[str, Any], key: str = "headroom") -> str:
    """Markdown table of each policy's headroom share: rows = scenarios, then across scenarios.

    Cells read ``share [low, high]`` (0 = ``dram-first``, 1 = the section's upper bound:
    the clairvoyant ``planner`` for ``headroom``, the causal ``mpc`` for ``headroom_mpc``;
    see :func:`agents.report.headroom_summary`); ``-`` where there is none (the policy did
    not run, or the bound found no headroom there). Empty text when the summary has no
    such section.
    """
    head = summary.get(key)
    if not head:
        return ""
    policies = list(summary["policies"])
    lines = _header(
        f"headroom share ({head['metric']}: {_md_escape(head['lower'])} = 0, "
        f"{_md_escape(head['upper'])} = 1, an upper bound)",
        policies,
    )
    for scen, entry in head["per_scenario"].items():
        h = entry["headroom"]
        label = f"{scen} (headroom {'-' if h is None else f'{h:+.1%}'})"
        cells = [_share_text(entry["policies"].get(p)) for p in policies]
        lines.append(_row(_md_escape(label), cells))
    cells = [_share_text(head["per_policy"].get(p)) for p in policies]
    lines.append(_row("across scenarios with headroom", cells))
    return "\n".join(lines) + "\n"


def leaderboard_markdown(summary: Mapping[str, Any]) -> str:
    """Markdown leaderboard ranking policies by geometric-mean ratio to the reference.

    Columns: rank, policy, the geometric mean over scenarios of the mean ratio to the
    reference, its stratified-bootstrap interval (``-`` where there is none) and the
    number of scenarios the policy ran; with a headroom section, each policy's
    headroom share across scenarios; with a robustness section
    (:func:`agents.report.robustness_summary`), each policy's worst ratio to the best
    single heuristic over the scenarios and that scenario (with its best heuristic).

    Args:
        summary: output of :func:`agents.report.summarize_records` made with a reference
            policy; only primary metrics in :data:`LOWER_IS_BETTER` rank ascending.

    Raises:
        ValueError: if the summary has no reference policy.
    """
    ref = summary.get("reference")
    if ref is None:
        raise ValueError("a leaderboard needs a summary made with a reference policy")
    n_total = len(summary["scenarios"])
    rows = list(summary["per_policy"].items())
    sign = 1.0 if summary["metric"] in LOWER_IS_BETTER else -1.0
    rows.sort(key=lambda item: (sign * item[1]["geomean_ratio"], item[0]))
    heads = [summary[k] for k in HEADROOM_UPPERS if summary.get(k)]
    rob = summary.get("robustness")
    lines = [
        f"| rank | policy | geomean ratio to {_md_escape(ref)} ({summary['metric']}) "
        f"| {summary['confidence']:.0%} CI | scenarios |"
        + "".join(f" headroom share ({h['upper']} = 1) |" for h in heads)
        + (" worst vs best heuristic | worst scenario (its best heuristic) |" if rob else ""),
        "|---|---|---|---|---|" + "---|" * len(heads) + ("---|---|" if rob else ""),
    ]
    for rank, (pol, info) in enumerate(rows, start=1):
        ci = info.get("geomean_ratio_ci")
        ci_text = "-" if ci is None else _ci(ci)
        lines.append(
            f"| {rank} | {_md_escape(pol)} | {_fmt(info['geomean_ratio'])} | "
            f"{ci_text} | {info['n_scenarios']}/{n_total} |"
            + "".join(f" {_share_text(h['per_policy'].get(pol))} |" for h in heads)
            + (f" {_robustness_cells(rob['per_policy'].get(pol))} |" if rob else "")
        )
    return "\n".join(lines) + "\n"


def _robustness_cells(entry: Mapping[str, Any] | None) -> str:
    """``ratio | scenario (best heuristic)`` of a robustness entry, ``- | -`` without one."""
    if entry is None:
        return "- | -"
    return (
        f"{_fmt(entry['worst_vs_best_heuristic'])} | "
        f"{_md_escape(entry['worst_scenario'])} ({_md_escape(entry['best_heuristic'])})"
    )


def generalisation_markdown(gen: Mapping[str, Any], reference: str) -> str:
    """Markdown of :func:`agents.report.generalisation_summary`: per learned policy and
    group (held-out first) its geometric-mean ratio, the best single heuristic's, the
    policy's ratio to it and its worst scenario against that scenario's best heuristic;
    then every scenario where it is more than ``BELOW_TOLERANCE``
    (:mod:`agents.report.generalisation`) below the best heuristic, with the ratio's
    interval where the summary has one. Empty when no policy was trained."""
    if not gen:
        return ""
    lines = [
        f"| policy | scenarios | n | geomean ratio to {_md_escape(reference)} | best single "
        "heuristic (ratio) | vs it | worst scenario: vs its best heuristic |",
        "|---|---|---|---|---|---|---|",
    ]
    notes = []
    for pol, info in gen.items():
        for group, g in info["groups"].items():
            geo = "-" if g["geomean_ratio"] is None else _fmt(g["geomean_ratio"])
            best = (
                f"{_md_escape(g['best_heuristic'])} ({_fmt(g['best_heuristic_ratio'])})"
                if "best_heuristic" in g
                else "-"
            )
            vs = _fmt(g["vs_best_heuristic"]) if "vs_best_heuristic" in g else "-"
            worst = (
                f"{_md_escape(g['worst_scenario'])}: {_fmt(g['worst_vs_best_heuristic'])}"
                if "worst_scenario" in g
                else "-"
            )
            lines.append(
                f"| {_md_escape(pol)} | {group} | {len(g['scenarios'])} | {geo} | {best} | {vs} "
                f"| {worst} |"
            )
            for s in g["below"]:
                e = info["per_scenario"][s]
                ci = e.get("vs_best_heuristic_ci")
                interval = f" {_ci(ci)}" if ci is not None else ""
                notes.append(
                    f"- {_md_escape(pol)} on {_md_escape(s)} ({group}): "
                    f"{_fmt(e['vs_best_heuristic'])}{interval} of "
                    f"{_md_escape(e['best_heuristic'])}'s mean, more than "
                    f"{BELOW_TOLERANCE:.0%} below the best heuristic"
                    + (
                        ""
                        if ci is None or ci[1] < 1.0 - BELOW_TOLERANCE
                        else " (the interval reaches the tolerance: more episodes would tell)"
                    )
                )
    trained = [
        f"- {_md_escape(p)} trained on: {', '.join(_md_escape(n) for n in i['trained_on'])}"
        for p, i in gen.items()
    ]
    text = (
        "Groups: held-out = `unseen-*` families (machine and tenant combinations its training "
        "never drew), trained = the scenarios and families it trained on (other seeds), other = "
        "neither.\n\n" + "\n".join(lines) + "\n\n" + "\n".join(trained) + "\n"
    )
    if notes:
        text += "\n" + "\n".join(notes) + "\n"
    return text
