"""Checks that need the environment: the agent's spaces on every training family, the
policy's layout, and the model stable-baselines3 builds from a run (before any work)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agents import persist
from agents.config.fields import TrainingError
from agents.config.recipe import Recipe
from agents.config.run import RunConfig
from agents.models import build_model
from agents.view import agent_layout, core_kwargs, make_interface
from envs.core import make_params

__all__ = ["agent_spaces", "check_buildable", "with_policy_layout"]


def agent_spaces(env: Mapping[str, Any]) -> tuple[Any, Any]:
    """The agent's observation and action spaces for a run's env settings, the same on the
    scenario and every ``train_families`` entry (else a ValueError)."""

    agent = make_interface(env)
    found: tuple[Any, Any] | None = None
    for fam in [env["scenario"], *(env.get("train_families") or [])]:
        params = make_params(**core_kwargs({**env, "scenario": fam, "pool_size": 8}))
        agent.bind(params, 1)  # the base's kernel must be a tiering mode; the padding must fit
        spaces = agent.spaces(params)
        if found is not None and spaces != found:
            raise ValueError(f"train_families: {fam!r} gives other agent spaces; set pad_nodes")
        found = spaces
    assert found is not None
    return found


def with_policy_layout(recipe: Recipe, env: Mapping[str, Any]) -> Recipe:
    """``recipe`` with ``policy_kwargs.layout`` filled from the environment for
    ``TenantPolicy`` (:func:`agents.view.agent_layout`); other policies' unchanged."""
    if recipe.policy != "TenantPolicy":
        return recipe

    try:
        params = make_params(**core_kwargs({**env, "pool_size": 8}))
        layout = agent_layout(params, make_interface(env))
    except ValueError as exc:
        raise TrainingError(f"recipe {recipe.name!r}: env: {exc}") from None
    pk = recipe.policy_kwargs.model_copy(update={"layout": layout})
    return recipe.model_copy(update={"policy_kwargs": pk})


def check_buildable(cfg: RunConfig) -> None:
    """Build the run's model once on a stand-in env with its spaces (stable-baselines3's own
    checks), so that a bad combination fails before anything is written."""

    try:
        obs_space, act_space = agent_spaces(cfg.env)
    except ValueError as exc:
        raise TrainingError(f"recipe {cfg.recipe_source!r}: env: {exc}") from None
    env = persist.SpacesOnlyEnv(cfg.n_envs, obs_space, act_space)
    try:
        build_model(cfg.recipe, env, seed=cfg.seed)
    except (AssertionError, ValueError, TypeError) as exc:
        msg = " ".join(str(exc).split()) or type(exc).__name__
        raise TrainingError(
            f"recipe {cfg.recipe_source!r}: stable-baselines3 refuses its {cfg.algo} settings: {msg}"
        ) from None
