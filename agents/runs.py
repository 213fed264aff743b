"""Run folders: where a run lives, its ``config.yml``, its checkpoints.

A run folder (``runs/{scenario}__{recipe}__{seed}__{time}`` by default) holds:

- ``config.yml``: the resolved run (:class:`agents.config.RunConfig`: format version, the
  recipe as resolved, the task, seed, evaluation settings and the command line's options,
  so ``--resume`` keeps them) and ``command.txt``: the exact commands (start and resumes);
- ``imitation/``: the imitation phase's labelled data and fits (:mod:`agents.imitation`),
  so that an interrupted phase resumes;
- ``checkpoints/step_<N>/``: ``model.zip``, ``vecnormalize.npz`` (reward statistics),
  ``replay_buffer.npz`` (off-policy), ``rng.json`` and ``progress.json``;
- ``model.zip`` and ``tiergym.json`` (recipe, algorithm, env settings) at the end,
  ``tensorboard/`` events, ``results/`` of the final comparison.

Every file is written and read as data (:mod:`agents.persist`); a checkpoint appears
whole or not at all.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from agents import persist
from agents.config import (
    FORMAT_VERSION,
    EnvSettings,
    RunConfig,
    Task,
    TrainingError,
    check,
    trained_names,
)
from agents.config.load import read_text, yaml_mapping
from agents.models import read_model_file, save_model

__all__ = [
    "check_folder",
    "checkpoint_steps",
    "checkpoints",
    "latest_checkpoint",
    "load_trained",
    "model_file_of",
    "read_config",
    "resume_model",
    "run_dir_path",
    "save_checkpoint",
    "save_final",
    "trained_on",
    "write_config",
]


def check_folder(path: Path, what: str) -> Path:
    """A folder to write into, existing and writable or creatable (no file in the way, a
    writable parent); nothing is created. The error names ``what`` (a flag) and the path."""
    for p in [path, *path.parents]:
        if p.exists() and not p.is_dir():
            where = "is an existing file" if p == path else f"is inside {str(p)!r}, a file"
            raise TrainingError(f"{what} {str(path)!r} {where}; expected a folder")
    if path.is_dir():
        if not os.access(path, os.W_OK | os.X_OK):
            raise TrainingError(f"{what} {str(path)!r} is not writable")
        return path
    parent = next(p for p in path.parents if p.exists())
    if not os.access(parent, os.W_OK | os.X_OK):
        raise TrainingError(
            f"{what} {str(path)!r}: cannot create it, {str(parent)!r} is not writable"
        )
    return path


def run_dir_path(root: Path, scenario: str, recipe: str, seed: int, run_dir: Path | None) -> Path:
    """The run folder a new run would use, checked but not created."""
    if run_dir is None:
        check_folder(root, "--runs-root")
        name = Path(scenario).stem if scenario.endswith((".yaml", ".yml")) else scenario
        stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", name)
        run_dir = root / f"{stem}__{recipe}__{seed}__{time.strftime('%Y%m%d-%H%M%S')}"
    if run_dir.is_dir() and any(run_dir.iterdir()):
        raise TrainingError(
            f"run folder {str(run_dir)!r} already exists and is not empty; use --resume "
            f"{run_dir} or another --run-dir"
        )
    return check_folder(run_dir, "--run-dir")


def write_config(run_dir: Path, cfg: RunConfig, argv: list[str], append: bool = False) -> None:
    """``config.yml`` and ``command.txt`` (a resume appends its command line)."""
    text = yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False)
    persist.atomic_write_text(run_dir / "config.yml", text)
    with open(run_dir / "command.txt", "a" if append else "w") as f:
        f.write(shlex.join([sys.executable, *argv]) + "\n")


def read_config(run_dir: Path) -> RunConfig:
    """The run's ``config.yml``, every value checked; a run of an older format is refused
    with an error naming its format."""
    path = run_dir / "config.yml"
    if not path.is_file():
        raise TrainingError(f"{str(run_dir)!r} is not a run folder (no config.yml)")
    text = read_text(path, "run configuration", 4 << 20)
    data = yaml_mapping(text, f"run configuration {str(path)!r}")
    version = data.get("format", 1 if "algo" in data or "hyperparams" in data else None)
    if version != FORMAT_VERSION:
        raise TrainingError(
            f"run configuration {str(path)!r} is of run format {version!r} (format 1: before "
            f"named recipes); this version reads format {FORMAT_VERSION}: start a new run"
        )
    return check(RunConfig, data, f"run configuration {str(path)!r}")


# ============================================================================== checkpoints


def save_checkpoint(
    run_dir: Path, model: Any, timesteps: int, venv_norm: Any | None, cfg: RunConfig
) -> Path:
    """Model, normalisation statistics, replay buffer and random state at ``timesteps``."""
    ck = run_dir / "checkpoints" / f"step_{timesteps:012d}"
    tmp = ck.with_name(ck.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    save_model(tmp / "model.zip", model, cfg, timesteps)
    if venv_norm is not None:
        persist.save_vecnormalize(tmp / "vecnormalize.npz", venv_norm)
    if getattr(model, "replay_buffer", None) is not None:
        persist.save_replay_buffer(tmp / "replay_buffer.npz", model.replay_buffer)
    persist.save_rng(tmp / "rng.json", model)
    (tmp / "progress.json").write_text(json.dumps({"timesteps": timesteps, "time": time.time()}))
    if ck.exists():
        shutil.rmtree(ck)
    tmp.rename(ck)  # a checkpoint appears whole or not at all
    return ck


def checkpoints(run_dir: Path) -> list[Path]:
    """The run's complete checkpoints, oldest first."""
    folder = run_dir / "checkpoints"
    if not folder.is_dir():
        return []
    return sorted(
        p
        for p in folder.glob("step_*")
        if p.is_dir() and re.fullmatch(r"step_\d{12}", p.name) and (p / "model.zip").is_file()
    )


def latest_checkpoint(run_dir: Path) -> Path:
    cks = checkpoints(run_dir)
    if not cks:
        raise TrainingError(
            f"run folder {str(run_dir)!r} has no checkpoint to resume from "
            f"(looked in {run_dir / 'checkpoints'})"
        )
    return cks[-1]


def checkpoint_steps(ck: Path) -> int:
    return int(ck.name.split("_")[1])


def resume_model(ck: Path, cfg: RunConfig, venv: Any, norm: Any | None) -> Any:
    """The model of checkpoint ``ck`` ready to train on ``venv``: weights, optimizer,
    counters, reward statistics (into ``norm``), replay buffer and random state."""
    train_env = norm if norm is not None else venv
    model = read_model_file(ck / "model.zip", train_env, cfg.algo)
    try:
        if norm is not None:
            path = ck / "vecnormalize.npz"
            if not path.is_file():
                raise TrainingError(
                    f"checkpoint {str(ck)!r} has no vecnormalize.npz (reward normalisation is on)"
                )
            persist.load_vecnormalize(path, norm)
        if getattr(model, "replay_buffer", None) is not None:
            path = ck / "replay_buffer.npz"
            if not path.is_file():
                raise TrainingError(
                    f"checkpoint {str(ck)!r} has no replay_buffer.npz ({cfg.algo} is off-policy)"
                )
            persist.load_replay_buffer(path, model.replay_buffer)
        persist.load_rng(ck / "rng.json", model)
    except persist.ModelFileError as exc:
        raise TrainingError(str(exc)) from None
    model._last_obs = None  # the env resets at the start of learn (seeded by the caller)
    return model


def save_final(run_dir: Path, model: Any, cfg: RunConfig) -> Path:
    """The trained model and ``tiergym.json`` (what evaluation needs to run it)."""
    path = run_dir / "model.zip"
    save_model(path, model, cfg)
    info = {"recipe": cfg.recipe.name, "algo": cfg.algo, "env": cfg.env, "seed": cfg.seed}
    (run_dir / "tiergym.json").write_text(json.dumps(info, indent=2))
    return path


# ============================================================================ trained models


def model_file_of(path: Path) -> tuple[Path, Path]:
    """``(model file, run folder)`` of a run folder (its ``model.zip``, else its latest
    checkpoint's) or of a model file (its run folder: beside it, or above a checkpoint)."""
    if path.is_dir():
        model = path / "model.zip"
        return (model if model.is_file() else latest_checkpoint(path) / "model.zip"), path
    if not path.exists():
        raise TrainingError(f"model file {str(path)!r} does not exist")
    beside = (path.parent / "tiergym.json").is_file() or (path.parent / "config.yml").is_file()
    return path, path.parent if beside else path.parent.parent.parent


def _env_of(run_dir: Path, meta: dict[str, Any], model_file: Path) -> tuple[dict[str, Any], str]:
    """The env settings the model was trained for and its label (the recipe's name)."""
    if (run_dir / "tiergym.json").is_file():
        text = read_text(run_dir / "tiergym.json", "run description")
        try:
            info = json.loads(text)
        except ValueError as exc:
            raise TrainingError(
                f"run description {str(run_dir / 'tiergym.json')!r}: {exc}"
            ) from None
        where = f"run description {str(run_dir / 'tiergym.json')!r}"
    elif (run_dir / "config.yml").is_file():
        cfg = read_config(run_dir)
        return cfg.env, cfg.recipe.name
    else:
        info, where = meta, f"model file {str(model_file)!r}"
    env = info.get("env") if isinstance(info, dict) else None
    if not isinstance(env, dict):
        raise TrainingError(f"{where}: env: expected a mapping of env settings")
    if "observation" not in env:
        raise TrainingError(
            f"{where}: env has no 'observation': written by TierGym before the tenant "
            "descriptors (run format 0), which this version does not read; train it again"
        )
    task_keys = set(Task.model_fields)
    check(Task, {k: v for k, v in env.items() if k in task_keys}, f"{where}: env")
    check(EnvSettings, {k: v for k, v in env.items() if k not in task_keys}, f"{where}: env")
    return env, str(info.get("recipe") or info.get("algo"))


def trained_on(path: str | Path, env: Mapping[str, Any]) -> list[str]:
    """The scenarios and families a run or model file trained on: its run folder's
    :attr:`RunConfig.trained_on`, or for a model file without one the scenario and
    ``train_families`` of ``env``, the settings :func:`load_trained` gave for it."""
    _, run_dir = model_file_of(Path(path))
    if (run_dir / "config.yml").is_file():
        return read_config(run_dir).trained_on
    return trained_names(env)


def load_trained(path: str | Path) -> tuple[Any, dict[str, Any], str]:
    """A trained model (to predict), the env settings it was trained for, and its label.

    ``path`` is a run folder or a model file (see :func:`model_file_of`).
    """
    model_file, run_dir = model_file_of(Path(path))
    model = read_model_file(model_file, None)
    env, label = _env_of(run_dir, model._model_meta, model_file)
    return model, env, label
