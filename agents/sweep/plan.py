"""What each trial runs: its options (:class:`agents.config.RunOptions`) and its stages.

A trial is a *point* of the search space, ``{"recipe", "scenario", "seed", "hp": {KEY:
value}}``: the options of ``train.py --recipe R --scenario S --seed N --set KEY=VALUE ...``
with the sweep's ``train:`` options, trained in ``budget.reports`` stages that end at whole
rollouts. :func:`validate_trials` resolves the points a sweep can give (every grid and choice
value, each end of a range) with :func:`agents.config.load.resolve` before any trial starts,
so a bad combination is one error naming the trial.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from agents.config import RunConfig, RunOptions, TrainingError
from agents.config.load import whole_rollouts
from agents.plan import plan_run
from agents.sweep.spec import Dist, SweepError, SweepSpec

__all__ = [
    "TrialPlan",
    "command_line",
    "param_space",
    "plan_trial",
    "resume_options",
    "set_item",
    "trial_dir_name",
    "validate_trials",
]

#: The options every stage of a trial passes: quiet, no bars (the sweep prints its own
#: lines), no final comparison (the sweep scores its validation episodes instead).
STAGE_OPTIONS: dict[str, Any] = {"compare_episodes": 0, "quiet": True, "no_progress": True}


def set_item(key: str, value: Any) -> str:
    """``KEY=VALUE`` for ``--set``: the value in YAML's flow style, read back as the same."""
    text = yaml.safe_dump(value, default_flow_style=True, width=1 << 20).strip()
    return f"{key}={text.removesuffix('...').strip()}"


def command_line(opts: RunOptions, given: set[str]) -> list[str]:
    """The ``train.py`` command line of ``opts``' options named in ``given`` (command.txt)."""
    argv = ["train.py"]
    for name in sorted(RunOptions.model_fields, key=lambda n: n != "resume"):  # --resume first
        if name not in given:
            continue
        value, flag = getattr(opts, name), "--" + name.replace("_", "-")
        if isinstance(value, bool):
            argv += [flag] if value else []
        elif name == "set":
            for item in value:
                argv += [flag, item]
        else:
            argv += [flag, str(value)]
    return argv


def param_space(spec: SweepSpec) -> dict[str, Any]:
    """The Tune search space: ``{"recipe", "scenario", "seed", "hp": {key: value}}``."""

    def tune(v: Any) -> Any:
        return v.tune() if isinstance(v, Dist) else v

    return {
        "recipe": tune(spec.recipe),
        "scenario": tune(spec.scenario),
        "seed": tune(spec.seeds),
        "hp": {k: tune(v) for k, v in spec.hyperparams.items()},
    }


def plain(value: Any) -> Any:
    """JSON-plain copy (tuples to lists, numpy scalars to numbers)."""
    return json.loads(
        json.dumps(value, default=lambda o: o.item() if hasattr(o, "item") else str(o))
    )


def short(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    text = json.dumps(v) if not isinstance(v, str) else v
    return text if len(text) <= 40 else text[:37] + "..."


def hp_text(hp: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={short(v)}" for k, v in hp.items())


def _slug(text: str) -> str:
    stem = Path(text).stem if text.endswith((".yaml", ".yml")) else text
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", stem).strip("-")


def trial_dir_name(index: int, point: Mapping[str, Any]) -> str:
    """``NNN-RECIPE-SCENARIO-sSEED`` (a file's stem for a recipe or scenario file)."""
    recipe, scenario = _slug(str(point["recipe"])), _slug(str(point["scenario"]))
    return f"{index:03d}-{recipe}-{scenario}-s{int(point['seed'])}"


# ============================================================================ a trial's stages


@dataclass(frozen=True)
class TrialPlan:
    """A trial's run at its whole budget (checked, nothing written), the steps each stage
    trains to, and the options of its first stage (without the run folder)."""

    config: RunConfig
    targets: list[int]
    first: dict[str, Any]


def plan_trial(spec: SweepSpec, point: Mapping[str, Any]) -> TrialPlan:
    """The trial of ``point``: its run as ``train.py --timesteps budget.timesteps`` resolves
    it, and its stages (budget marks in whole rollouts).

    The first stage is a new run to the first mark; for a recipe with an imitation phase
    before RL, that run's imitation is pinned to the one the whole budget sizes (with
    ``--set``), so that the stages do not change it. A recipe without an RL phase trains in
    one stage. Raises :class:`agents.config.TrainingError` (resolve's) or
    :class:`SweepError`.
    """
    values = {  # the trial's RunOptions fields, but for its budget and run folder
        "recipe": str(point["recipe"]),
        "scenario": str(point["scenario"]),
        "seed": int(point["seed"]),
        "set": [set_item(k, v) for k, v in point["hp"].items()],
        "eval_interval": 0,
        **spec.train_options(),
        **STAGE_OPTIONS,
    }
    budget = spec.budget.timesteps
    cfg = plan_run(RunOptions(**values, timesteps=budget)).cfg
    recipe = cfg.recipe
    if recipe.rl is None:
        if spec.reports > 1:
            raise SweepError(
                f"sweep file {spec.source!r}: budget.reports: recipe {recipe.name!r} has no RL "
                f"phase to report between; expected 1 (got {spec.reports})"
            )
        return TrialPlan(cfg, [0], {**values, "timesteps": budget})
    total, chunk = cfg.total_timesteps, whole_rollouts(recipe, 1)
    n = spec.reports
    marks = [min(total, -(-(k * total // n) // chunk) * chunk) for k in range(1, n)]
    targets = [*marks, total]
    first: dict[str, Any] = {**values, "timesteps": targets[0]}
    if recipe.imitation is not None and n > 1:
        im = recipe.imitation
        pins = {
            "imitation.episodes": im.episodes,
            "imitation.scenario_episodes": im.scenario_episodes,
            "rl.total_timesteps": targets[0],
        }
        first = {**values, "set": [*values["set"], *(set_item(k, v) for k, v in pins.items())]}
    if "checkpoint_interval" not in values:  # a checkpoint in each stage
        first["checkpoint_interval"] = max(1, targets[0] // 2)
    return TrialPlan(cfg, targets, first)


def resume_options(run_dir: Path, target: int | None) -> tuple[RunOptions, set[str]]:
    """A later stage: ``train.py --resume RUN --timesteps T`` (quiet; no ``--timesteps``
    for a run without an RL phase), and the names it gives."""
    values: dict[str, Any] = {"resume": run_dir, "quiet": True, "no_progress": True}
    if target is not None:
        values["timesteps"] = target
    return RunOptions(**values), set(values)


def _points(spec: SweepSpec) -> list[dict[str, Any]]:
    """The points to check: every recipe x scenario, with the hyperparameters at their first
    value and each other value of one entry in turn (the first seed)."""

    def values(entry: Any) -> list[Any]:
        return entry.points() if isinstance(entry, Dist) else [entry]

    first = {k: values(v)[0] for k, v in spec.hyperparams.items()}
    variants = [first]
    for k, v in spec.hyperparams.items():
        variants += [{**first, k: x} for x in values(v)[1:]]
    seed = values(spec.seeds)[0]
    return [
        {"recipe": recipe, "scenario": scenario, "seed": seed, "hp": hp}
        for recipe in values(spec.recipe)
        for scenario in values(spec.scenario)
        for hp in variants
    ]


def validate_trials(spec: SweepSpec) -> None:
    """Resolve each recipe x scenario with every value a trial can get from a grid or choice
    and each end of a range (the others at their first value): the checks of ``train.py``,
    with its message, before any trial starts."""
    for point in _points(spec):
        try:
            plan_trial(spec, point)
        except SweepError:
            raise
        except TrainingError as exc:
            trial = f"recipe={point['recipe']} scenario={point['scenario']} {hp_text(point['hp'])}"
            raise SweepError(
                f"sweep file {spec.source!r}: trial with {trial.strip()}: {exc}"
            ) from None
