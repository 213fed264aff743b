"""Sweep seeds, scenarios, algorithms and hyperparameters on Ray Tune; every trial a train.py run.

A sweep file (YAML) names the grid or search space, the budget per trial,
the objective (an evaluation metric on validation seeds) and optionally a
scheduler that stops poor trials early; ``agents.sweep.load_sweep`` documents
it and ``examples/sweeps/`` has examples. Every trial is an ordinary run
folder (``SWEEP_DIR/trials/<trial>``: config, TensorBoard logs, checkpoints,
model), so ``evaluate.py`` and ``tensorboard --logdir SWEEP_DIR/trials`` work on
it unchanged. At the end: ``summary.md``/``summary.csv``/``summary.png`` (the
trials ranked) and ``best.yml``, the best trial's hyperparameters for
``train.py --hyperparams``.

Examples::

    python sweep.py examples/sweeps/quick.yml                  # Ray in-process, local cores
    python sweep.py examples/sweeps/seeds-scenarios.yml --workers 2
    python sweep.py examples/sweeps/ppo-kv-store-asha.yml --ray-address HEAD:6379   # a cluster

Run the same command again to resume an interrupted sweep: finished trials
are kept, unfinished ones continue from their run folders. Errors (a bad
sweep file, an empty search space, an unreachable Ray address, a node
without the package) are one line and exit code 2, before any trial starts.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def build_config(argv: list[str]) -> Any:
    """train.py's configuration for a command line (checked, nothing written)."""
    import train

    return train.build_config(train.parse_args(argv))


def run_training(argv: list[str]) -> Path | None:
    """Run train.py's training for a command line in this process; the run folder (None: interrupted)."""
    import train

    return train.train(train.parse_args(argv), ["train.py", *argv])


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("sweep", type=Path, help="sweep file (YAML)")
    ap.add_argument(
        "--output",
        type=Path,
        default=None,
        help="sweep folder (default: runs/sweeps/NAME); an existing one of the same sweep is resumed",
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
    ap.add_argument("--no-progress", action="store_true", help="no trial lines or progress bar")
    args = ap.parse_args(argv)
    if args.workers is not None and args.workers < 1:
        ap.error(f"--workers must be at least 1, got {args.workers}")
    return args


def main(argv: list[str] | None = None) -> int:
    from agents.sweep import TrainHooks, run_sweep

    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    try:
        result = run_sweep(
            args.sweep,
            TrainHooks(build=build_config, train=run_training),
            output=args.output,
            workers=args.workers,
            address=args.ray_address,
            show_progress=not args.no_progress,
            modules=("envs", "baselines", "agents", "train", "sweep"),
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print()
    print(result["markdown"])
    best = result["best"]
    failed = [r for r in result["rows"] if r["status"] == "error"]
    if best is not None:
        print(
            f"best: {best['trial']} with {best['metric']} {best['objective']:.4f}; "
            f"hyperparameters in {best['hyperparams_file']}"
        )
        print(f"train with it: {best['command']}")
    if failed:
        print(
            f"error: {len(failed)} trial(s) failed (see the lines above); "
            "run the same command again to retry them",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
