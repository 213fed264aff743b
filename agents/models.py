"""Trained models: build one from a recipe, save it as data, load it back to predict or train.

A model file (``model.zip``, :mod:`agents.persist`) describes its algorithm, policy,
constructor arguments, spaces and the env settings it was trained for, and holds the
weights; loading rebuilds the model from that description, every value checked against
the schema (:mod:`agents.config`). stable-baselines3's own pickle archives are never opened.
"""

from __future__ import annotations

import importlib
import warnings
from pathlib import Path
from typing import Any

from agents import persist
from agents.config import (
    ALGOS,
    Hyperparams,
    PolicyKwargs,
    Recipe,
    RunConfig,
    TrainingError,
    algo_class,
    check,
)
from agents.config.fields import _short
from agents.config.recipe import PROJECT_POLICIES, constructor_rules, sb3_kwargs

__all__ = ["build_model", "read_model_file", "save_model"]


def build_model(recipe: Recipe, env: Any, seed: int | None) -> Any:
    """A fresh stable-baselines3 model of the recipe's algorithm and policy on ``env``."""
    kwargs = sb3_kwargs(recipe.hyperparams, recipe.policy_kwargs)
    return _build(recipe.algo, recipe.policy, kwargs, env, seed)


def _build(algo: str, policy: str, kwargs: dict[str, Any], env: Any, seed: int | None) -> Any:
    cls = algo_class(algo)
    pcls: Any = policy
    if policy in PROJECT_POLICIES:  # the project's class itself (SB3 knows only its aliases)
        module, attr = PROJECT_POLICIES[policy].factory.split(":")
        pcls = getattr(importlib.import_module(module), attr)
    return cls(pcls, env, seed=seed, device="cpu", verbose=0, **kwargs)


def save_model(path: Path, model: Any, cfg: RunConfig, timesteps: int | None = None) -> None:
    """``model`` as a safe ``model.zip`` (:mod:`agents.persist`), described by its run."""
    r = cfg.recipe
    meta = {
        "algo": r.algo,
        "recipe": r.name,
        "policy": r.policy,
        "hyperparams": {**r.hyperparams.given(), "policy_kwargs": r.policy_kwargs.given()},
        "normalize_reward": bool(r.rl.normalize_reward) if r.rl is not None else False,
        "env": cfg.env,
        "seed": cfg.seed,
    }
    persist.write_model(path, model, meta, model.num_timesteps if timesteps is None else timesteps)


def _model_args(meta: dict[str, Any], path: Path) -> tuple[str, str, dict[str, Any]]:
    """``(algo, policy, constructor arguments)`` of a model description, checked."""
    where = f"model file {str(path)!r}"
    algo = meta.get("algo")
    if algo not in ALGOS:
        raise TrainingError(f"{where}: algo: expected one of {list(ALGOS)} (got {_short(algo)})")
    hp = meta.get("hyperparams")
    if not isinstance(hp, dict):
        raise TrainingError(f"{where}: hyperparams: expected a mapping")
    hp = dict(hp)
    pk = check(PolicyKwargs, hp.pop("policy_kwargs", None) or {}, f"{where}: policy_kwargs")
    hyper = check(Hyperparams, hp, f"{where}: hyperparams")
    policy = str(meta.get("policy"))
    try:
        constructor_rules(algo, policy, hyper, pk)
    except ValueError as exc:
        raise TrainingError(f"{where}: {exc}") from None
    return algo, policy, sb3_kwargs(hyper, pk)


def read_model_file(path: Path, env: Any | None, algo: str | None = None) -> Any:
    """Build the model a safe ``model.zip`` describes and load its weights.

    ``env``: the environment to train on (resume); ``None``: a stand-in with the saved
    spaces, enough to predict (with small buffers). ``model._model_meta`` is the description.
    """
    try:
        meta, tensors = persist.read_model(path)
    except persist.ModelFileError as exc:  # a pickle archive too: never opened
        raise TrainingError(str(exc)) from None
    saved, policy, kwargs = _model_args(meta, path)
    if algo is not None and saved != algo:
        raise TrainingError(f"model file {str(path)!r} holds a {saved} model, expected {algo}")
    seed = meta.get("seed")
    if seed is not None and not (isinstance(seed, int) and 0 <= seed < 2**31):
        raise TrainingError(f"model file {str(path)!r}: seed: expected an integer >= 0")
    where = f"model file {str(path)!r}"
    obs = persist.space_from_json(meta.get("observation_space"), f"{where}: observation_space")
    act = persist.space_from_json(meta.get("action_space"), f"{where}: action_space")
    n_envs = meta.get("n_envs")
    if not (isinstance(n_envs, int) and 1 <= n_envs <= 1 << 16):
        raise TrainingError(f"{where}: n_envs: expected an integer in [1, 65536]")
    if env is None:
        if "buffer_size" in kwargs or saved in ("sac", "td3"):
            kwargs["buffer_size"] = 1
        env = persist.SpacesOnlyEnv(1, obs, act)
    elif env.observation_space != obs or env.action_space != act:
        raise TrainingError(
            f"{where} was saved for observations {obs} and actions {act}, "
            f"this run's env has {env.observation_space} and {env.action_space}"
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # batch-size advice
            model = _build(saved, policy, kwargs, env, seed)
    except (AssertionError, ValueError, TypeError) as exc:
        msg = " ".join(str(exc).split())
        raise TrainingError(f"{where}: its description does not build a model: {msg}") from None
    try:
        persist.restore_model_state(model, meta, tensors, path)
    except persist.ModelFileError as exc:
        raise TrainingError(str(exc)) from None
    model._model_meta = meta
    return model
