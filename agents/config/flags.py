"""Command lines from the schema: one flag per field of an options model, checked by it.

``train.py`` (:class:`agents.config.RunOptions`), ``evaluate.py``
(:class:`agents.config.EvaluateOptions`) and ``sweep.py`` (:class:`agents.config.SweepOptions`)
build their parsers here: argparse only collects
the text typed, and the model parses, bounds and defaults every value, so a flag's rule,
default and help are written once, in the schema.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any, NoReturn

from pydantic import BaseModel

from agents.config.fields import check_flags

__all__ = ["POSITIONAL", "flag_parser", "parse_flags"]

#: A field's ``json_schema_extra`` that makes it a positional argument of the command line.
POSITIONAL: dict[str, Any] = {"positional": True}


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``PROG: error: ...``), exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def flag_parser(
    model: type[BaseModel], prog: str, description: str | None, repeated: Sequence[str] = ()
) -> argparse.ArgumentParser:
    """A parser with one flag per field of ``model`` (``num_envs`` is ``--num-envs``), its help
    the field's description and default; a boolean field is a switch, a field of
    ``repeated`` may be given several times (``--set A --set B``), a field marked
    ``positional`` (:data:`POSITIONAL`) is an argument without a flag."""
    ap = _Parser(
        prog=prog, description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    for name, field in model.model_fields.items():
        # an unset default's meaning is in the description
        text = field.description or ""
        if (
            not field.is_required()
            and field.default not in (None, [], False)
            and "default:" not in text
        ):
            text += f" (default: {field.default})"
        kind: dict[str, Any] = {"action": "append"} if name in repeated else {}
        if field.annotation is bool:
            kind = {"action": "store_const", "const": True}
        if field.json_schema_extra == POSITIONAL:
            ap.add_argument(name, help=text, metavar=name.upper())
            continue
        ap.add_argument(
            "--" + name.replace("_", "-"),
            dest=name,
            default=argparse.SUPPRESS,
            help=text,
            **kind,
        )
    return ap


def parse_flags(
    model: type[BaseModel], parser: argparse.ArgumentParser, argv: Sequence[str]
) -> tuple[Any, set[str]]:
    """``(options, the names of the flags given)`` of a command line, every value checked
    by ``model`` (an error names the flag and its value as typed)."""
    given = vars(parser.parse_args(list(argv)))
    return check_flags(model, given), set(given)
