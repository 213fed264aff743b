"""Sweep seeds, scenarios, recipes and their settings on Ray Tune; every trial a training run.

A sweep file (YAML; ``agents.sweep.spec`` documents every key, ``examples/sweeps/`` has
examples) names the recipe, the grid or search space of its settings, the budget per trial,
the objective (an evaluation metric on validation seeds) and optionally a scheduler that
stops poor trials early. Every trial is an ordinary run folder (``SWEEP_DIR/trials/<trial>``:
config, TensorBoard logs, checkpoints, model), so ``evaluate.py`` and ``tensorboard --logdir
SWEEP_DIR/trials`` work on it unchanged. At the end: ``summary.md``/``summary.csv``/
``summary.png`` (the trials ranked) and ``best.yml``, the best trial's resolved recipe for
``train.py --recipe``.

Examples::

    python sweep.py examples/sweeps/quick.yml                  # Ray in-process, local cores
    python sweep.py examples/sweeps/seeds-scenarios.yml --workers 2
    python sweep.py examples/sweeps/ppo-kv-store-asha.yml --ray-address HEAD:6379   # a cluster

Run the same command again to resume an interrupted sweep: finished trials are kept,
unfinished ones continue from their run folders. Errors (a bad sweep file, an empty search
space, an unreachable Ray address, a node without the package) are one line and exit code 2,
before any trial starts; exit code 1 if a trial failed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agents.sweep.run import run_sweep
from envs.jit import get_threads


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("sweep", type=Path, help="sweep file (YAML)")
    ap.add_argument(
        "--output",
        type=Path,
        default=None,
        help="sweep folder (default: runs/sweeps/NAME); one of the same sweep is resumed",
    )
    ap.add_argument(
        "--workers",
        type=int,
        default=None,
        help="local CPUs for Ray (default: all cores); trials at once = workers / cpus_per_trial",
    )
    ap.add_argument(
        "--ray-address",
        default=None,
        metavar="ADDRESS",
        help="run the trials on this Ray cluster (HOST:PORT of its head; default: $RAY_ADDRESS, none: local)",
    )
    ap.add_argument("--no-progress", action="store_true", help="no trial lines or progress bar")  # fmt: skip
    args = ap.parse_args(argv)
    if args.workers is not None and args.workers < 1:
        ap.error(f"--workers must be at least 1, got {args.workers}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        get_threads()  # TIERGYM_THREADS, checked before any work
        result = run_sweep(args.sweep, output=args.output, workers=args.workers,
                           address=args.ray_address, show_progress=not args.no_progress)  # fmt: skip
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print()
    print(result["markdown"])
    best = result["best"]
    if best is not None:
        print(f"best: {best['trial']} with {best['metric']} {best['objective']:.4f}; "
              f"its recipe in {best['recipe_file']}")  # fmt: skip
        print(f"train with it: {best['command']}")
    failed = [r for r in result["rows"] if r["status"] == "error"]
    if failed:
        print(f"error: {len(failed)} trial(s) failed (see the lines above); "
              "run the same command again to retry them", file=sys.stderr)  # fmt: skip
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
