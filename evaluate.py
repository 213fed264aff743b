"""Compare learned and heuristic placement policies on TierGym, fairly.

Every policy runs on the same scenarios with the same seeds (common random
numbers), vectorized over episodes. Per scenario and policy: mean and
interquartile mean of each episode metric with 95% percentile-bootstrap
intervals over episodes, and the mean ratio of the primary metric to a
reference policy on the same seeds; across scenarios, the geometric mean of
those ratios with an interval stratified by scenario (README.md and
``agents.report.summarize_records`` say exactly how).

Examples::

    python evaluate.py                                    # every heuristic on every shipped scenario
    python evaluate.py --scenarios kv-store,mixed --policies dram-first,tpp,runs/mixed__ppo__0__...
    python evaluate.py --policies static:3:1@256,numa-tiering --episodes 64 --output results/kv

Outputs (in ``--output``): ``results.json`` (one record per scenario, policy
and episode seed, plus the summary), ``results.csv``, ``table.md``,
``leaderboard.md``, ``ratio.png`` and ``timeseries-<scenario>-<policy>.png``;
the Markdown table and leaderboard go to stdout. The work is
:func:`agents.evaluation.run_comparison`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

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


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, run the comparison and print its tables; the exit code."""
    from agents import report
    from agents.evaluation import run_comparison

    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    try:
        summary = run_comparison(
            [p for p in args.policies.split(",") if p],
            [s for s in args.scenarios.split(",") if s],
            args.episodes,
            args.output,
            seed=args.seed,
            split=args.split,
            reference=args.reference,
            metric=args.metric,
            plots=not args.no_plots,
            show_progress=not args.no_progress,
            command=["evaluate.py", *argv],
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(report.markdown_table(summary, metric=args.metric))
    print()
    print(report.leaderboard_markdown(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
