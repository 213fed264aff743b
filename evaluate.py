"""Compare learned and heuristic placement policies on TierGym, fairly.

Every policy runs on the same scenarios with the same seeds (common random
numbers), vectorized over episodes. Per scenario and policy: mean and
interquartile mean of each episode metric with 95% stratified-bootstrap
confidence intervals, and the ratio of the primary metric to a reference
policy; across scenarios, the geometric mean of those ratios.

Examples::

    python evaluate.py                                    # every heuristic on every shipped scenario
    python evaluate.py --scenarios kv-store,mixed --policies dram-first,tpp,runs/mixed__ppo__0__...
    python evaluate.py --policies static:3:1@256,numa-tiering --episodes 64 --output results/kv

Outputs (in ``--output``): ``results.json`` (one record per scenario, policy,
seed and episode, plus the summary), ``results.csv``, ``leaderboard.md``,
``ratio.png`` and ``timeseries-<scenario>-<policy>.png``; the Markdown table
goes to stdout.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

DEFAULT_POLICIES = (
    "dram-first",
    "interleave",
    "weighted-interleave",
    "numa-tiering",
    "tpp",
    "memcg-fair",
    "colloid",
    "caption",
    "damon-tiering",
    "static-best",
    "random",
)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    from envs import scenario_names

    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--scenarios",
        default=",".join([*scenario_names(), "mixed"]),
        help="comma-separated scenario names, YAML files or families (default: every shipped scenario and mixed)",
    )
    ap.add_argument(
        "--policies",
        default=",".join(DEFAULT_POLICIES),
        help="comma-separated baseline names, static:W1:W2[@RATE], or trained run folders / model files, each optionally LABEL=... (default: every heuristic)",
    )
    ap.add_argument(
        "--episodes", type=int, default=16, help="episodes per scenario and policy (default: 16)"
    )
    ap.add_argument(
        "--seed", type=int, default=0, help="seed; episode i runs with seed + i (default: 0)"
    )
    ap.add_argument(
        "--split", default="test", choices=["train", "test"], help="family split (default: test)"
    )
    ap.add_argument(
        "--reference",
        default="dram-first",
        help="policy the ratios are taken against (default: dram-first)",
    )
    ap.add_argument(
        "--metric", default="geomean_perf", help="primary metric (default: geomean_perf)"
    )
    ap.add_argument(
        "--output", type=Path, default=Path("results"), help="output folder (default: results)"
    )
    ap.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = ap.parse_args(argv)
    if args.episodes < 1:
        ap.error(f"--episodes must be at least 1, got {args.episodes}")
    return args


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")


def run(args: argparse.Namespace) -> dict[str, Any]:
    from tqdm import tqdm

    from agents import report
    from agents.evaluation import compare, load_policy

    scenarios = [s for s in args.scenarios.split(",") if s]
    specs = [p for p in args.policies.split(",") if p]
    loaded = [load_policy(p) for p in specs]  # fails early, before any run
    names = [p.name for p, _ in loaded]
    if args.reference not in names:
        raise ValueError(f"--reference {args.reference!r} is not among the policies {names}")
    bar = tqdm(
        total=len(scenarios) * len(loaded), desc="runs", disable=args.no_progress, file=sys.stderr
    )

    def progress(policy: str, scenario: str) -> None:
        bar.set_postfix_str(f"{scenario} / {policy}")
        bar.update(1)

    records = compare(
        loaded,
        scenarios,
        args.episodes,
        seed=args.seed,
        split=args.split,
        record_series=not args.no_plots,
        progress=progress,
    )
    bar.close()
    series = [(r["scenario"], r["policy"], r.pop("series")) for r in records if "series" in r]
    summary = report.summarize_records(
        records, reference=args.reference, metric=args.metric, seed=args.seed
    )
    out: Path = args.output
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(
        json.dumps({"command": sys.argv, "records": records, "summary": summary}, indent=1)
    )
    report.write_csv(records, out / "results.csv")
    table = report.markdown_table(summary, metric=args.metric)
    (out / "leaderboard.md").write_text(report.leaderboard_markdown(summary) + "\n")
    (out / "table.md").write_text(table + "\n")
    if not args.no_plots:
        report.plot_ratio_bars(summary, out / "ratio.png")
        for scenario, policy, s in series:
            report.plot_timeseries(
                s,
                out / f"timeseries-{_slug(scenario)}-{_slug(policy)}.png",
                f"{scenario} / {policy}",
            )
    print(table)
    print()
    print(report.leaderboard_markdown(summary))
    return summary


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        run(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
