"""Training seeds side by side: each run's ratio to every scenario's best single heuristic.

A learned recipe's result is the mean of several training seeds, with their spread. This
reads the ``results.json`` of one or more ``evaluate.py`` runs (the same scenarios, episodes
and seed: the heuristics' records are then the same in each) and prints, per scenario, the
best single heuristic and its mean, each run's ratio of means to it, the mean and the range
of those ratios over the runs, and the causal bound ``mpc`` beside them where it was
evaluated; then the same over the scenarios (geometric means of the per-scenario ratios)
against the best single heuristic over the scenarios, against ``adaptive`` and against
``dram-first`` (the last, over the families of the ``val`` split, is the number the
recipe's choices are made on: docs/training.md). ``--against POLICY`` takes each
scenario's ratios to that policy instead of its best heuristic: with ``dram-first`` on the
``val`` families, the per-family figures behind that number.

    python scripts/seed_table.py results/s01/results.json results/s2/results.json \\
        --runs s0,s1,s2 --floor 0.98
    python scripts/seed_table.py val-mu/results.json val-broad/results.json \\
        --runs s0,s1,s2 --against dram-first

Exit code 0 when every scenario's mean ratio is at least ``--floor``, 1 otherwise, 2 on
bad input (a missing file, a run or scenario absent from the results).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path


def _means(path: Path) -> tuple[dict[str, dict[str, float]], list[str], str]:
    """Per scenario, each policy's mean of the primary metric; the heuristics; the metric."""
    try:
        summary = json.loads(path.read_text())["summary"]
        robust = summary["robustness"]
        metric = summary["metric"]
        means = {
            sc: {p: v["metrics"][metric]["mean"] for p, v in pols.items()}
            for sc, pols in summary["per_scenario"].items()
        }
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SystemExit(f"error: {path}: not an evaluate.py results.json ({exc})") from None
    return means, list(robust["heuristics"]), metric


def _geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def table(
    files: list[Path], runs: list[str], floor: float, against: str | None = None
) -> tuple[str, bool]:
    """The Markdown table of ``runs`` over the scenarios of ``files``; whether every
    scenario's mean ratio reaches ``floor``. Each scenario's ratios are to its best
    heuristic, or to the policy ``against`` where one is named."""
    means: dict[str, dict[str, float]] = {}
    heuristics: list[str] = []
    for f in files:
        m, heur_f, _ = _means(f)
        heuristics += [h for h in heur_f if h not in heuristics]
        for sc, pols in m.items():
            means.setdefault(sc, {}).update(pols)
    missing = [(r, sc) for sc in means for r in runs if r not in means[sc]]
    if missing:
        raise SystemExit(f"error: run {missing[0][0]!r} has no results on {missing[0][1]!r}")
    if against is not None:
        absent = [sc for sc in means if against not in means[sc]]
        if absent:
            raise SystemExit(
                f"error: --against: policy {against!r} has no results on {absent[0]!r}"
            )
    heur = [h for h in heuristics if all(h in means[sc] for sc in means)]
    best_single = max(heur, key=lambda h: _geomean([means[sc][h] for sc in means]))
    ref_head, ref_name = (
        ("best heuristic (mean)", "their best heuristic")
        if against is None
        else ("reference (mean)", against)
    )
    head = ["scenario", ref_head, *runs, "mean [min, max]", "mpc"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    below = []
    for sc in sorted(means):
        best = against if against is not None else max(heur, key=lambda h: means[sc][h])
        b = means[sc][best]
        ratios = [means[sc][r] / b for r in runs]
        mean = sum(ratios) / len(ratios)
        flag = "" if mean >= floor else " **below**"
        if mean < floor:
            below.append(sc)
        mpc = f"{means[sc]['mpc'] / b:.3f}" if "mpc" in means[sc] else "-"
        rows.append(
            f"| {sc} | {best} ({b:.3f}) | "
            + " | ".join(f"{x:.3f}" for x in ratios)
            + f" | {mean:.3f} [{min(ratios):.3f}, {max(ratios):.3f}]{flag} | {mpc} |"
        )
    lines = ["\n".join(rows), ""]
    scs = sorted(means)
    for ref in dict.fromkeys((best_single, "adaptive", "dram-first")):
        if not all(ref in means[sc] for sc in scs):
            continue
        g = [_geomean([means[sc][r] / means[sc][ref] for sc in scs]) for r in runs]
        lines.append(
            f"over {len(scs)} scenarios, geometric mean of the ratios to {ref}: "
            + ", ".join(f"{r} {x:.3f}" for r, x in zip(runs, g, strict=True))
            + f"; mean {sum(g) / len(g):.3f} [{min(g):.3f}, {max(g):.3f}]"
        )
    lines.append(
        f"scenarios whose mean ratio to {ref_name} is below {floor}: "
        + (", ".join(below) or "none")
    )
    return "\n".join(lines), not below


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments and print the table; the exit code."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="+", type=Path, help="evaluate.py results.json files")
    ap.add_argument("--runs", required=True, help="comma-separated policy labels, one per seed")
    ap.add_argument("--floor", type=float, default=0.98, help="least mean ratio (default 0.98)")
    ap.add_argument(
        "--against",
        metavar="POLICY",
        help="each scenario's ratios to this policy (dram-first: the val rule's per-family"
        " figures), not to its best heuristic",
    )
    args = ap.parse_args(argv)
    runs = [r for r in args.runs.split(",") if r]
    if not runs:
        print("error: --runs: expected at least one policy label", file=sys.stderr)
        return 2
    try:
        text, ok = table(args.results, runs, args.floor, args.against)
    except SystemExit as exc:
        print(exc, file=sys.stderr)
        return 2
    print(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
