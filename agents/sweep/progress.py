"""A sweep's progress on stderr: one line per finished trial and a bar over the trials (a
Ray Tune callback; like :mod:`agents.sweep.trial`, imported only when a sweep runs)."""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ray import tune
from tqdm import tqdm

from agents.sweep.plan import hp_text, plain
from agents.sweep.spec import SweepSpec
from agents.sweep.trial import trial_name

__all__ = ["PROGRESS", "SweepProgress"]

#: What the progress callback prints to: set by run_sweep for the run in progress.
PROGRESS: dict[str, Any] = {"show": True, "total": 0, "spec": None}


class SweepProgress(tune.Callback):
    """One line per finished trial and a progress bar over the sweep's trials.

    Settings come from :data:`PROGRESS` (set by :func:`agents.sweep.run.run_sweep`), so a
    copy restored with an interrupted sweep's state prints as asked now.
    """

    def __init__(self) -> None:
        self.bar: Any = None
        self.done: set[str] = set()

    def _start(self, trials: Sequence[Any]) -> None:
        if self.bar is None:
            self.bar = tqdm(
                total=PROGRESS["total"],
                desc="trials",
                disable=not PROGRESS["show"],
                file=sys.stderr,
            )
            for t in trials:
                if t.status in ("TERMINATED", "ERROR"):
                    self.done.add(t.trial_id)
            self.bar.update(len(self.done))

    def on_step_begin(self, iteration: int, trials: list[Any], **info: Any) -> None:
        self._start(trials)

    def _line(self, trial: Any, status: str) -> None:
        self._start([])
        if trial.trial_id in self.done:
            return
        self.done.add(trial.trial_id)
        spec: SweepSpec = PROGRESS["spec"]
        point = plain(trial.config)
        res = trial.last_result or {}
        name = trial_name(trial.trial_id, point)
        hp = hp_text({k: v for k, v in point.get("hp", {}).items() if k in spec.varying()})
        if status == "error":
            text = f"failed: {error_line(trial)}"
        else:
            score = res.get("objective", float("nan"))
            stage, n = res.get("stage", 0), res.get("reports", spec.reports)
            how = "complete" if stage >= n else f"stopped early by {spec.scheduled}"
            steps = int(res.get("timesteps", 0))
            text = f"{spec.metric} {score:.4f} at {steps:,} steps ({stage}/{n} reports, {how})"
        if PROGRESS["show"]:
            tqdm.write(
                f"[{len(self.done)}/{PROGRESS['total']}] {name} {hp}: {text}".replace("  ", " "),
                file=sys.stderr,
            )
        if self.bar is not None:
            self.bar.update(1)

    def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self._line(trial, "complete")

    def on_trial_error(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self._line(trial, "error")

    def on_experiment_end(self, trials: list[Any], **info: Any) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def __getstate__(self) -> dict[str, Any]:
        return {"bar": None, "done": set()}  # a bar is not saved with the experiment


def error_line(trial: Any) -> str:
    """The last exception line of a failed trial's error file (its message)."""
    try:
        path = trial.error_file
        text = Path(path).read_text() if path and Path(path).is_file() else ""
    except Exception:
        text = ""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if re.match(r"^[\w.]*(Error|Exception)\b", ln):
            return ln.split(": ", 1)[-1] if ": " in ln else ln
    return lines[-1] if lines else "see the trial's error file under tune/"
