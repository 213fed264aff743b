"""Train a policy on TierGym with a named recipe and compare it with the kernel heuristics.

With no arguments: the ``ppo-finetune`` recipe (imitation, then PPO) on the ``mixed`` family
(train split), then the learned policy against the heuristic baselines on the test split
(the code path of ``evaluate.py``). Each recipe is one file in ``agents/recipes/`` (``--list-recipes``;
docs/training.md). Watch a run with ``tensorboard --logdir runs``.

Examples::

    python train.py
    python train.py --recipe ppo --scenario kv-store --timesteps 200000
    python train.py --recipe imitation --set imitation.rounds=1 --set env.mixing=soft
    python train.py --resume runs/mixed__ppo-finetune__0__20261201-101500

Ctrl-C or SIGTERM keeps what is done (a checkpoint, or the finished parts of the imitation
phase); ``--resume RUN`` continues from there with the options the run was started with.
Every value is checked before any work starts; a bad one is a one-line error, exit code 2.
"""

from __future__ import annotations

import argparse
import sys

from agents.config import RunOptions, TrainingError
from agents.config.flags import flag_parser, parse_flags
from agents.config.load import load_recipe, recipe_names
from agents.interrupts import Interrupted, InterruptGuard
from agents.trainer import run
from envs.errors import report_error
from envs.jit import get_threads


def build_parser() -> argparse.ArgumentParser:
    """One flag per field of :class:`agents.config.RunOptions` (``None``: the recipe's)."""
    return flag_parser(RunOptions, "train.py", __doc__, repeated=("set",))


def parse(argv: list[str]) -> tuple[RunOptions, set[str]]:
    """The checked options of a command line and the names of those it gave."""
    return parse_flags(RunOptions, build_parser(), argv)


def main(argv: list[str] | None = None) -> int:
    """Parse, check everything, train, compare; the exit code (2: bad input, nothing done)."""
    argv = sys.argv[1:] if argv is None else argv
    guard = InterruptGuard()
    try:
        get_threads()  # TIERGYM_THREADS, checked before any work
        opts, given = parse(argv)
        if opts.list_recipes:
            for name in recipe_names():
                print(f"{name:15} {load_recipe(name)[0].summary}")
            return 0

        run(opts, given, ["train.py", *argv], guard)
    except SystemExit as exc:  # --help (0) or a one-line argparse error (2)
        return exc.code if isinstance(exc.code, int) else 2
    except Interrupted:
        guard.report()
    except (TrainingError, ValueError) as exc:  # one line (TIERGYM_TRACEBACK=1: the traceback too)
        return report_error(exc)
    finally:
        guard.release()
    return 0


if __name__ == "__main__":
    sys.exit(main())
