"""SIGINT and SIGTERM during a run: nothing done is lost, the run can always be resumed."""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agents.runs import checkpoint_steps

__all__ = ["InterruptGuard", "Interrupted"]


class Interrupted(BaseException):
    """SIGINT or SIGTERM before training started (raised by an armed :class:`InterruptGuard`).

    A ``BaseException``, like ``KeyboardInterrupt``: library code's ``except Exception`` lets it through.
    """


class InterruptGuard:
    """SIGINT/SIGTERM from the moment a run folder is written until training starts.

    ``arm``: a signal raises :class:`Interrupted` wherever the program is
    (building the env, scoring the references); :func:`main` then calls
    :meth:`report`, which saves ``save()`` (a checkpoint at the step the run
    stands, 0 for a new run) if a model exists: the folder can always be
    resumed. ``defer`` (just before ``learn``): a signal is only noted in
    ``signalled``; inside ``learn`` the StopOnSignal callback takes over.
    ``release``: the original handlers are back.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.run_dir: Path | None = None
        self.save: Callable[[], Path] | None = None
        self.signalled = False
        self._previous: dict[int, Any] = {}

    def _raise(self, signum: int, frame: Any) -> None:
        self.signalled = True
        raise Interrupted(signal.Signals(signum).name)

    def _note(self, signum: int, frame: Any) -> None:
        self.signalled = True

    def _install(self, handler: Callable[[int, Any], None]) -> None:
        if not self.enabled:
            return
        for sig in self.SIGNALS:
            try:
                previous = signal.signal(sig, handler)
            except ValueError:  # not the main thread: no signal handling
                self.enabled = False
                return
            self._previous.setdefault(sig, previous)

    def arm(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self._install(self._raise)

    def defer(self) -> None:
        self._install(self._note)

    def release(self) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous.clear()

    def report(self) -> None:
        """After :class:`Interrupted`: save the checkpoint if a model exists; say how to continue."""
        self.defer()  # a second signal while saving is noted, not fatal
        try:
            again = f"python train.py --resume {self.run_dir}"
            if self.save is not None:
                ck = self.save()
                print(
                    f"interrupted: checkpoint {ck} at {checkpoint_steps(ck):,} steps; continue with: {again}",
                    flush=True,
                )
            else:
                print(
                    f"interrupted before the first checkpoint: {self.run_dir} keeps its configuration "
                    "and the finished parts of its imitation phase; "
                    f"start it with: {again}",
                    flush=True,
                )
        finally:
            self.release()
