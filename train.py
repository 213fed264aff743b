"""Train a policy on TierGym with a named recipe and compare it with the kernel heuristics.

With no arguments: the ``imitation`` recipe on the ``mixed`` family (train split), then the
learned policy against the heuristic baselines on the test split (the code path of
``evaluate.py``). Each recipe is one file in ``agents/recipes/`` (``--list-recipes``;
docs/training.md). Watch a run with ``tensorboard --logdir runs``.

Examples::

    python train.py
    python train.py --recipe ppo --scenario kv-store --timesteps 200000
    python train.py --recipe imitation --set imitation.rounds=1 --set env.mixing=soft
    python train.py --resume runs/mixed__imitation__0__20261201-101500

Ctrl-C or SIGTERM keeps what is done (a checkpoint, or the finished parts of the imitation
phase); ``--resume RUN`` continues from there with the options the run was started with.
Every value is checked before any work starts; a bad one is a one-line error, exit code 2.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, NoReturn

from agents.config import RunOptions, TrainingError, check_flags
from agents.config.load import load_recipe, recipe_names
from agents.interrupts import Interrupted, InterruptGuard
from agents.trainer import run


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``train.py: error: ...``), exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """One flag per field of :class:`agents.config.RunOptions`, its help from the schema.

    Values stay text here: the schema parses and checks them, with its defaults."""
    ap = _Parser(
        prog="train.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    for name, field in RunOptions.model_fields.items():
        flag = "--" + name.replace("_", "-")
        default = field.default if field.default is not None else "the recipe's"
        text = f"{field.description} (default: {default})"
        kind: dict[str, Any] = {"metavar": "KEY=VALUE", "action": "append"} if name == "set" else {}
        if field.annotation is bool:
            kind = {"action": "store_const", "const": True}
        ap.add_argument(flag, dest=name, default=argparse.SUPPRESS, help=text, **kind)
    return ap


def parse(argv: list[str]) -> tuple[RunOptions, set[str]]:
    """The checked options of a command line and the names of those it gave."""
    given = vars(build_parser().parse_args(argv))
    return check_flags(RunOptions, given), set(given)


def main(argv: list[str] | None = None) -> int:
    """Parse, check everything, train, compare; the exit code (2: bad input, nothing done)."""
    argv = sys.argv[1:] if argv is None else argv
    guard = InterruptGuard()
    try:
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
    except (TrainingError, ValueError) as exc:
        print(
            f"error: {'; '.join(x.strip() for x in str(exc).splitlines() if x.strip())}",
            file=sys.stderr,
        )
        return 2
    finally:
        guard.release()
    return 0


if __name__ == "__main__":
    sys.exit(main())
