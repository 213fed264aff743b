"""Training pieces used by ``train.py``: algorithms, hyperparameters, run folders, checkpoints.

A run folder (``runs/{scenario}__{algo}__{seed}__{time}`` by default) holds:

- ``config.yml``: the resolved configuration (algorithm, env settings,
  hyperparameters, seed, budget) and ``command.txt``: the exact command;
- ``checkpoints/step_<N>/``: ``model.zip``, ``vecnormalize.pkl`` (reward
  statistics), ``replay_buffer.pkl`` (off-policy), ``rng.pkl`` (python,
  numpy, torch generator states) and ``progress.json``;
- ``model.zip`` and ``tiergym.json`` (the env settings the model was trained
  for) at the end, ``tensorboard/`` events, ``results/`` of the final comparison.
"""

from __future__ import annotations

import inspect
import json
import pickle
import random
import re
import shlex
import sys
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

__all__ = [
    "ALGOS",
    "ENV_KEYS",
    "RunConfig",
    "TrainingError",
    "latest_checkpoint",
    "load_hyperparams",
    "load_trained",
    "new_run_dir",
    "save_checkpoint",
]

# keyword arguments of the environments that a run records (and evaluation must reuse)
ENV_KEYS = (
    "scenario",
    "split",
    "max_tenants",
    "reward",
    "weights",
    "action_type",
    "max_promote_mbps",
    "kernel",
    "jitter",
    "pool_size",
)
SPECIAL_KEYS = ("n_envs", "total_timesteps", "normalize_reward", "policy", "env")


class TrainingError(ValueError):
    """Bad training input (algorithm, hyperparameters, run folder): the message says what to fix."""


def _algo_classes() -> dict[str, Any]:
    from sb3_contrib import RecurrentPPO
    from stable_baselines3 import A2C, PPO, SAC, TD3

    return {"ppo": PPO, "a2c": A2C, "sac": SAC, "td3": TD3, "recurrent-ppo": RecurrentPPO}


ALGOS = ("ppo", "a2c", "sac", "td3", "recurrent-ppo")
ON_POLICY = {"ppo", "a2c", "recurrent-ppo"}


def algo_class(name: str) -> Any:
    classes = _algo_classes()
    if name not in classes:
        raise TrainingError(f"unknown algorithm {name!r}, expected one of {list(ALGOS)}")
    return classes[name]


def _parse_value(text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def load_hyperparams(
    algo: str, scenario_key: str, path: Path | None, overrides: list[str]
) -> tuple[dict[str, Any], str]:
    """Hyperparameters for ``algo`` on ``scenario_key``: file ``default`` + scenario section + overrides.

    Every key is checked against the algorithm's constructor: an unknown key
    raises :class:`TrainingError` naming the key, the file and the valid keys.
    """
    cls = algo_class(algo)
    if path is None:
        source = f"agents/hyperparams/{algo}.yml"
        text = (resources.files("agents") / "hyperparams" / f"{algo}.yml").read_text()
    else:
        source = str(path)
        if not Path(path).is_file():
            raise TrainingError(f"hyperparameter file {source!r} does not exist")
        text = Path(path).read_text()
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise TrainingError(f"hyperparameter file {source!r} is not valid YAML: {exc}") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise TrainingError(
            f"hyperparameter file {source!r}: expected sections (default:, <scenario>:) of key: value"
        )
    hp: dict[str, Any] = dict(data.get("default", {}))
    hp.update(data.get(scenario_key, {}))
    for item in overrides:
        if "=" not in item:
            raise TrainingError(f"--set {item!r}: expected KEY=VALUE")
        k, v = item.split("=", 1)
        hp[k.strip()] = _parse_value(v)
    valid = set(inspect.signature(cls.__init__).parameters) - {
        "self",
        "env",
        "kwargs",
        "_init_setup_model",
    }
    valid |= set(SPECIAL_KEYS)
    bad = sorted(set(hp) - valid)
    if bad:
        raise TrainingError(
            f"hyperparameters for {algo} from {source} (and --set): unknown key(s) {bad}; "
            f"expected some of {sorted(valid)}"
        )
    return hp, source


@dataclass
class RunConfig:
    """Everything a run needs to be repeated or resumed (saved as ``config.yml``)."""

    algo: str
    seed: int
    total_timesteps: int
    n_envs: int
    env: dict[str, Any]
    hyperparams: dict[str, Any]
    hyperparams_source: str
    eval_interval: int
    eval_episodes: int
    checkpoint_interval: int
    references: list[str] = field(default_factory=list)
    created: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunConfig:
        return cls(**d)


def new_run_dir(root: Path, scenario: str, algo: str, seed: int, run_dir: Path | None) -> Path:
    """A fresh run folder; an existing one is never reused (nothing is overwritten)."""
    if run_dir is None:
        stem = re.sub(
            r"[^A-Za-z0-9_.-]+",
            "-",
            Path(scenario).stem if scenario.endswith((".yaml", ".yml")) else scenario,
        )
        run_dir = root / f"{stem}__{algo}__{seed}__{time.strftime('%Y%m%d-%H%M%S')}"
    if run_dir.exists() and any(run_dir.iterdir()):
        raise TrainingError(
            f"run folder {str(run_dir)!r} already exists and is not empty; use --resume {run_dir} or another --run-dir"
        )
    run_dir.mkdir(parents=True, exist_ok=True)
    return run_dir


def write_config(run_dir: Path, cfg: RunConfig, argv: list[str]) -> None:
    (run_dir / "config.yml").write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False))
    (run_dir / "command.txt").write_text(shlex.join([sys.executable, *argv]) + "\n")


def read_config(run_dir: Path) -> RunConfig:
    path = run_dir / "config.yml"
    if not path.is_file():
        raise TrainingError(f"{str(run_dir)!r} is not a run folder (no config.yml)")
    try:
        return RunConfig.from_dict(yaml.safe_load(path.read_text()))
    except (TypeError, yaml.YAMLError) as exc:
        raise TrainingError(f"{str(path)!r} is not a complete run configuration: {exc}") from None


def save_checkpoint(run_dir: Path, model: Any, timesteps: int, venv_norm: Any | None) -> Path:
    """Model, normalisation statistics, replay buffer and random state at ``timesteps``."""
    ck = run_dir / "checkpoints" / f"step_{timesteps:012d}"
    tmp = ck.with_name(ck.name + ".tmp")
    tmp.mkdir(parents=True, exist_ok=True)
    saved = model.num_timesteps
    model.num_timesteps = timesteps
    model.save(tmp / "model.zip")
    model.num_timesteps = saved
    if venv_norm is not None:
        venv_norm.save(str(tmp / "vecnormalize.pkl"))
    if hasattr(model, "replay_buffer") and model.replay_buffer is not None:
        model.save_replay_buffer(tmp / "replay_buffer.pkl")
    rng = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),  # noqa: NPY002 - stable-baselines3 draws from the legacy global generator
        "torch": torch.get_rng_state(),
        "action_space": model.action_space.np_random.bit_generator.state
        if model.action_space._np_random
        else None,
    }
    with open(tmp / "rng.pkl", "wb") as f:
        pickle.dump(rng, f)
    (tmp / "progress.json").write_text(json.dumps({"timesteps": timesteps, "time": time.time()}))
    if ck.exists():
        import shutil

        shutil.rmtree(ck)
    tmp.rename(ck)  # a checkpoint appears whole or not at all
    return ck


def latest_checkpoint(run_dir: Path) -> Path:
    folder = run_dir / "checkpoints"
    cks = (
        sorted(
            p
            for p in folder.glob("step_*")
            if p.is_dir() and not p.name.endswith(".tmp") and (p / "model.zip").is_file()
        )
        if folder.is_dir()
        else []
    )
    if not cks:
        raise TrainingError(
            f"run folder {str(run_dir)!r} has no checkpoint to resume from (looked in {folder})"
        )
    return cks[-1]


def restore_rng(ck: Path, model: Any) -> None:
    with open(ck / "rng.pkl", "rb") as f:
        rng = pickle.load(f)
    random.setstate(rng["python"])
    np.random.set_state(rng["numpy"])  # noqa: NPY002 - see save_checkpoint
    torch.set_rng_state(rng["torch"])
    if rng.get("action_space") is not None:
        model.action_space.np_random.bit_generator.state = rng["action_space"]


def save_final(run_dir: Path, model: Any, cfg: RunConfig) -> Path:
    path = run_dir / "model.zip"
    model.save(path)
    (run_dir / "tiergym.json").write_text(
        json.dumps({"algo": cfg.algo, "env": cfg.env, "seed": cfg.seed}, indent=2)
    )
    return path


def load_trained(path: str | Path) -> tuple[Any, dict[str, Any], str]:
    """A trained model and the env settings it was trained for.

    ``path`` is a run folder (its ``model.zip``, else its latest checkpoint) or
    a model file whose folder holds ``tiergym.json`` or ``config.yml``.
    Returns ``(model, env_kwargs, algo)``.
    """
    p = Path(path)
    if p.is_dir():
        run_dir = p
        model_file = p / "model.zip"
        if not model_file.is_file():
            model_file = latest_checkpoint(p) / "model.zip"
    else:
        if not p.exists():
            raise TrainingError(f"model file {str(p)!r} does not exist")
        model_file = p
        run_dir = (
            p.parent
            if (p.parent / "tiergym.json").is_file() or (p.parent / "config.yml").is_file()
            else p.parent.parent.parent
        )
    meta = run_dir / "tiergym.json"
    if meta.is_file():
        info = json.loads(meta.read_text())
        algo, env = info["algo"], info["env"]
    else:
        try:
            cfg = read_config(run_dir)
        except TrainingError:
            raise TrainingError(
                f"{str(model_file)!r}: no tiergym.json or config.yml beside it, so its env settings are unknown"
            ) from None
        algo, env = cfg.algo, cfg.env
    cls = algo_class(algo)
    try:
        model = cls.load(model_file, device="cpu")
    except Exception as exc:  # a truncated or foreign zip
        raise TrainingError(
            f"model file {str(model_file)!r} could not be loaded as a {algo} model: {exc}"
        ) from None
    return model, env, algo
