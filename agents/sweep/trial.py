"""One trial of a sweep on Ray Tune (the class API): a run folder trained in stages, scored
after each. This module is Ray's side of a sweep: it imports ``ray.tune`` at its top, and
:func:`agents.sweep.run.run_sweep` imports it only when a sweep runs."""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ray import tune
from torch.utils.tensorboard import SummaryWriter

from agents.config import RunOptions, TrainingError
from agents.evaluation import load_policy, mean_score
from agents.interrupts import InterruptGuard
from agents.persist import atomic_write_text
from agents.rollout import rollout
from agents.runs import checkpoint_steps, latest_checkpoint
from agents.sweep.plan import command_line, plain, plan_trial, resume_options, trial_dir_name
from agents.sweep.spec import SweepError, SweepSpec
from agents.trainer import run

__all__ = ["SweepTrial", "TrialContext", "trial_index"]


@dataclass
class TrialContext:
    """What every trial needs besides its point (sent once to the workers)."""

    out: str  # the sweep folder, absolute
    spec: SweepSpec


def trial_index(trial_id: str) -> int:
    """The trial's number in the sweep, from Tune's trial id (``..._00003``)."""
    m = re.search(r"_(\d+)$", trial_id)
    return int(m.group(1)) if m else 0


def trial_name(trial_id: str, point: Mapping[str, Any]) -> str:
    return trial_dir_name(trial_index(trial_id), point)


class SweepTrial(tune.Trainable):
    """One trial: ``step`` k trains the run to the k-th budget mark with
    :func:`agents.trainer.run` (a new run the first time, a resume after), scores its latest
    checkpoint on the validation episodes and returns the score.

    What a stage did is recorded in the run's ``sweep_trial.json``, so a restarted trial (an
    interrupted sweep) re-reports finished stages instead of training them again. Runs in
    the actor's main thread, where the trainer's stop-on-signal callback can be installed.
    """

    def setup(self, config: dict[str, Any], ctx: TrialContext | None = None) -> None:
        assert ctx is not None
        self.ctx = ctx
        spec = ctx.spec
        self.point = plain(config)
        self.run_dir = Path(ctx.out) / "trials" / trial_name(self.trial_id, self.point)
        self.plan = plan_trial(spec, self.point)
        self.targets = self.plan.targets
        self.state_file = self.run_dir / "sweep_trial.json"
        self.state: dict[str, Any] = {
            "trial": self.run_dir.name,
            "config": self.point,
            "options": plain(self.plan.first),
            "targets": self.targets,
            "metric": spec.metric,
            "mode": spec.mode,
            "stages": [],
        }
        if self.state_file.is_file():
            saved = json.loads(self.state_file.read_text())
            if saved.get("config") != self.point:
                raise SweepError(
                    f"trial folder {str(self.run_dir)!r} holds another configuration "
                    f"({saved.get('config')}); remove it or use another sweep folder"
                )
            self.state["stages"] = saved.get("stages", [])

    def _checkpoint_steps(self) -> int | None:
        if not self.run_dir.is_dir():
            return None
        try:
            return checkpoint_steps(latest_checkpoint(self.run_dir))
        except TrainingError:  # no checkpoint yet
            return None

    def _stage_options(self, target: int) -> tuple[RunOptions, set[str]]:
        if not self.run_dir.is_dir():
            values = {**self.plan.first, "run_dir": self.run_dir}
            return RunOptions(**values), set(values)
        # a later stage, or a stage cut short (a folder without a checkpoint restarts)
        has_rl = self.plan.config.recipe.rl is not None
        return resume_options(self.run_dir, target if has_rl else None)

    def _train_to(self, target: int) -> int:
        done = self._checkpoint_steps()
        if done is not None and done >= target:
            return done
        opts, given = self._stage_options(target)
        result = run(opts, given, command_line(opts, given), InterruptGuard(enabled=False))
        if result is None:
            raise SweepError(
                f"trial {self.run_dir.name}: training was interrupted; rerun the sweep to resume"
            )
        steps = self._checkpoint_steps()
        return int(steps if steps is not None else target)

    def _objective(self) -> float:
        spec = self.ctx.spec
        model_file = latest_checkpoint(self.run_dir) / "model.zip"
        policy, env_kwargs = load_policy(str(model_file), label=self.plan.config.recipe.name)
        recs = rollout(
            policy,
            spec.objective.scenario or self.point["scenario"],
            spec.objective.episodes,
            seed=spec.objective.seed,
            split=spec.objective.split,
            env_kwargs=env_kwargs,
        )
        return mean_score(recs, spec.metric)

    def _log_tensorboard(self, stage: dict[str, Any]) -> None:
        w = SummaryWriter(str(self.run_dir / "tensorboard"))
        w.add_scalar(f"sweep/{self.ctx.spec.metric}", stage["objective"], stage["timesteps"])
        w.close()

    def _record(self, stage: dict[str, Any]) -> None:
        self.state["stages"].append(stage)
        atomic_write_text(self.state_file, json.dumps(self.state, indent=1))

    def step(self) -> dict[str, Any]:
        k = self.iteration + 1
        stages = self.state["stages"]
        if len(stages) >= k:
            stage = stages[k - 1]  # trained and scored before an interruption
        else:
            t0 = time.time()
            steps = self._train_to(self.targets[k - 1])
            score = self._objective()
            stage = {
                "stage": k,
                "timesteps": steps,
                "objective": score,
                "wall_s": round(time.time() - t0, 1),
            }
            self._record(stage)
            if math.isfinite(score):
                self._log_tensorboard(stage)
        n = len(self.targets)
        return {
            "objective": stage["objective"],
            self.ctx.spec.metric: stage["objective"],
            "timesteps": stage["timesteps"],
            "stage": k,
            "reports": n,
            "run_dir": str(self.run_dir),
            "done": k >= n,
        }

    def save_checkpoint(self, checkpoint_dir: str) -> dict[str, Any]:
        return {"stage": self.iteration}  # the run folder holds the real state

    def load_checkpoint(self, checkpoint: Any) -> None:
        pass
