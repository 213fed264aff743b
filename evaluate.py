"""Compare learned and heuristic placement policies on TierGym, fairly.

Every policy runs on the same scenarios with the same seeds (common random
numbers), vectorized over episodes. Per scenario and policy: mean and
interquartile mean of each episode metric with 95% percentile-bootstrap
intervals over episodes, and the mean ratio of the primary metric to a
reference policy on the same seeds; across scenarios, the geometric mean of
those ratios with an interval stratified by scenario (docs/training.md and
``agents.report.summarize_records`` say exactly how). When ``planner`` and
``dram-first`` are both compared, each policy's share of the headroom,
``(policy - dram-first) / (planner - dram-first)`` on geomean_perf, per scenario
and across scenarios (``summary["headroom"]``, a second table, a leaderboard
column). ``planner`` is clairvoyant (it replays each episode from its seed and
searches its actions): an upper bound, not a deployable policy; so is
``best-heuristic-per-episode`` (per episode, the best shipped heuristic).

Examples::

    python evaluate.py                                    # every heuristic on every shipped scenario
    python evaluate.py --scenarios kv-store,mixed --policies dram-first,tpp,runs/mixed__ppo__0__...
    python evaluate.py --policies static:3:1@256,numa-tiering --episodes 64 --output results/kv

Outputs (in ``--output``): ``results.json`` (one record per scenario, policy
and episode seed, plus the summary), ``results.csv``, ``table.md``,
``leaderboard.md``, ``ratio.png`` and ``timeseries-<scenario>-<policy>.png``;
the Markdown table and leaderboard go to stdout. The work is
:func:`agents.evaluation.run_comparison`.

Everything is checked before the first episode: every flag's value, the
output folder, every scenario, and every policy against every scenario
(spaces, tenant slots, number of weights); a problem is a one-line error and
exit code 2, and no results are written. Trained models load from their safe
files; a stable-baselines3 pickle ``model.zip`` is refused.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NoReturn

from agents import report
from agents.config import EvaluateOptions, check_flags
from agents.distributed import ray_runner  # --workers / --ray-address: Ray tasks
from agents.evaluation import RECORD_METRICS, check_output_dir, run_comparison
from envs import scenario_names

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
    "bw-aware-interleave",
    "static-best",
    "best-heuristic-per-episode",
    "random",
    "planner",
)


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``evaluate.py: error: argument --seed: ...``), exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = _Parser(
        prog="evaluate.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--scenarios",
        default=",".join([*scenario_names(), "mixed"]),
        help="comma-separated scenario names, YAML files or families (default: every shipped scenario and mixed)",
    )
    ap.add_argument(
        "--policies",
        default=",".join(DEFAULT_POLICIES),
        help="comma-separated baseline names, static:W1:W2[@RATE], or trained run folders / model files, each optionally LABEL=... (default: every heuristic, static-best, best-heuristic-per-episode and the clairvoyant planner)",
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
    ap.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="run the grid's cells (scenario x policy x seed block) as Ray tasks on N local "
        "workers, Ray started in-process; results equal the single-process run's (default: one "
        "process, no Ray; with --ray-address: at most N cells at once)",
    )
    ap.add_argument(
        "--ray-address",
        default=None,
        metavar="ADDRESS",
        help="run the cells on the Ray cluster at ADDRESS (its head's HOST:PORT; default: "
        "$RAY_ADDRESS if set)",
    )
    return ap.parse_args(argv)


def validate_args(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """Every flag's value checked (nothing run, nothing written); the policy and scenario lists."""

    check_flags(EvaluateOptions, {"episodes": args.episodes, "seed": args.seed})
    if args.metric not in RECORD_METRICS:
        raise ValueError(f"--metric {args.metric}: expected one of {list(RECORD_METRICS)}")
    check_output_dir(args.output, "--output")
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    if not policies:
        raise ValueError(f"--policies {args.policies!r}: expected at least one policy")
    if not scenarios:
        raise ValueError(f"--scenarios {args.scenarios!r}: expected at least one scenario")
    return policies, scenarios


def one_line(exc: BaseException) -> str:
    """An error message on one line (a multi-line one joined with '; ')."""
    return "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, run the comparison and print its tables; the exit code."""

    argv = sys.argv[1:] if argv is None else argv
    try:
        args = parse_args(argv)
    except SystemExit as exc:  # --help (0) or a one-line argparse error (2)
        return exc.code if isinstance(exc.code, int) else 2
    try:
        policies, scenarios = validate_args(args)

        runner = ray_runner(args.workers, args.ray_address) or run_comparison
        summary = runner(
            policies,
            scenarios,
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
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return 2
    print(report.markdown_table(summary, metric=args.metric))
    print()
    print(report.leaderboard_markdown(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
