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

import sys

from agents.config import SweepOptions
from agents.config.flags import flag_parser, parse_flags
from agents.sweep.run import run_sweep
from envs.errors import report_error
from envs.jit import get_threads


def parse_args(argv: list[str]) -> SweepOptions:
    """The command line, checked by :class:`agents.config.SweepOptions` (one-line errors, exit 2)."""
    parser = flag_parser(SweepOptions, "sweep.py", __doc__)
    opts: SweepOptions = parse_flags(SweepOptions, parser, argv)[0]
    return opts


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
        get_threads()  # TIERGYM_THREADS, checked before any work
        result = run_sweep(args.sweep, output=args.output, workers=args.workers,
                           address=args.ray_address, show_progress=not args.no_progress)  # fmt: skip
    except SystemExit as exc:  # --help (0) or a one-line argparse error (2)
        return exc.code if isinstance(exc.code, int) else 2
    except ValueError as exc:  # one line (TIERGYM_TRACEBACK=1: the traceback too)
        return report_error(exc)
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
