"""A run's plan: a resolved configuration turned into what the trainer needs, every rule that
needs the environment checked once, before anything is written.

:func:`agents.config.load.resolve` reads the recipe and the command line into a
:class:`~agents.config.RunConfig` without building anything (so ``--help`` or a bad value
costs nothing); :func:`make_plan` then builds each training family's parameters once,
derives the agent's spaces (the same on every family, else an error naming the family),
fills ``TenantPolicy``'s layout from the scenario's, and builds the model once on a stand-in
with those spaces (stable-baselines3's own checks). The trainer takes the plan.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agents import persist
from agents.config import Recipe, RunConfig, RunOptions, TrainingError
from agents.config.load import resolve
from agents.models import build_model
from agents.view import agent_layout, environment_config, make_interface
from envs.core import EnvParams, make_params

__all__ = ["RunPlan", "make_plan", "plan_run", "with_policy_layout"]

#: Scenarios compiled per family for the checks (the spaces do not depend on the pool).
CHECK_POOL = 8


@dataclass(frozen=True)
class RunPlan:
    """A run ready to train: its configuration (with the policy's layout) and the agent's
    observation and action spaces (the same on the scenario and every training family)."""

    cfg: RunConfig
    obs_space: Any
    act_space: Any


def plan_run(opts: RunOptions) -> RunPlan:
    """The plan of a command line: :func:`~agents.config.load.resolve`, then :func:`make_plan`."""
    return make_plan(resolve(opts))


def make_plan(cfg: RunConfig) -> RunPlan:
    """Check ``cfg`` against the environment and derive what the trainer needs.

    Raises:
        TrainingError: the families give other agent spaces, the view does not fit a
            family, or stable-baselines3 refuses the recipe's settings; each names the
            recipe and the field.
    """
    where = f"recipe {cfg.recipe_source!r}"
    env = cfg.env
    try:
        interface = make_interface(env)
        families = [env["scenario"], *(env.get("train_families") or [])]
        params = [_params(env, fam) for fam in families]
        spaces = []
        for p in params:  # the base's kernel must be a tiering mode; the padding must fit
            interface.bind(p, 1)
            spaces.append(interface.spaces(p))
        for fam, s in zip(families[1:], spaces[1:], strict=True):
            if s != spaces[0]:
                raise ValueError(f"train_families: {fam!r} gives other agent spaces; set pad_nodes")
    except ValueError as exc:
        raise TrainingError(f"{where}: env: {exc}") from None
    cfg = cfg.model_copy(update={"recipe": with_policy_layout(cfg.recipe, env, params[0])})
    obs_space, act_space = spaces[0]
    try:
        build_model(cfg.recipe, persist.SpacesOnlyEnv(cfg.n_envs, obs_space, act_space), cfg.seed)
    except (AssertionError, ValueError, TypeError) as exc:
        msg = " ".join(str(exc).split()) or type(exc).__name__
        raise TrainingError(
            f"{where}: stable-baselines3 refuses its {cfg.algo} settings: {msg}"
        ) from None
    return RunPlan(cfg, obs_space, act_space)


def with_policy_layout(
    recipe: Recipe, env: Mapping[str, Any], params: EnvParams | None = None
) -> Recipe:
    """``recipe`` with ``policy_kwargs.layout`` filled from the environment (``params``: the
    scenario's, built if not given) for ``TenantPolicy``; other policies' unchanged.

    Raises:
        TrainingError: the view has no node padding or the weights are global.
    """
    if recipe.policy != "TenantPolicy":
        return recipe
    try:
        layout = agent_layout(params or _params(env, env["scenario"]), make_interface(env))
    except ValueError as exc:
        raise TrainingError(f"recipe {recipe.name!r}: env: {exc}") from None
    pk = recipe.policy_kwargs.model_copy(update={"layout": layout})
    return recipe.model_copy(update={"policy_kwargs": pk})


def _params(env: Mapping[str, Any], family: str) -> EnvParams:
    return make_params(environment_config(env, scenario=family, pool_size=CHECK_POOL))
