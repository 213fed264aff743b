"""How the project's command lines report an error: one line on stderr and exit code 2.

``train.py``, ``evaluate.py``, ``sweep.py``, ``deploy.py`` and ``python -m calibration``
turn the errors they expect (a bad flag, file or value) into one line. They catch a broad
class (``ValueError``), so a bug of the project's own that raises one would read as bad
input: with the environment variable ``TIERGYM_TRACEBACK=1`` the traceback is printed
before the line, so that it can be told apart and reported.
"""

from __future__ import annotations

import os
import sys
import traceback
from typing import NoReturn

__all__ = ["TRACEBACK_VAR", "fail", "one_line", "report_error"]

#: The environment variable that adds the traceback to an error's line (any value but "" or 0).
TRACEBACK_VAR = "TIERGYM_TRACEBACK"


def one_line(exc: BaseException) -> str:
    """``exc``'s message on one line (its lines joined with '; '; its type if it has none)."""
    text = str(exc).strip() or type(exc).__name__
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())


def report_error(exc: BaseException, prog: str = "") -> int:
    """Print ``exc`` as ``[PROG: ]error: MESSAGE`` on stderr (after its traceback with
    :data:`TRACEBACK_VAR` set); the exit code, 2."""
    if os.environ.get(TRACEBACK_VAR, "").strip() not in ("", "0"):
        traceback.print_exception(exc, file=sys.stderr)
    _print_line(one_line(exc), prog)
    return 2


def fail(message: str, prog: str = "") -> NoReturn:
    """Stop a command line on bad input it found itself: ``message`` as :func:`report_error`
    prints an error's (one line), then exit code 2 (``SystemExit``)."""
    _print_line(one_line(ValueError(message)), prog)
    raise SystemExit(2)


def _print_line(text: str, prog: str) -> None:
    print(f"{prog + ': ' if prog else ''}error: {text}", file=sys.stderr)
