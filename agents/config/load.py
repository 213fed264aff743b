"""Reading recipes and resolving a command line into a run: ``--set``, the budget, the task."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from agents.config.fields import ON_POLICY, TrainingError, check, describe
from agents.config.recipe import Hyperparams, Recipe
from agents.config.run import RunConfig, RunOptions
from envs.families import make_family
from envs.scenario import ScenarioError

__all__ = [
    "imitation_steps",
    "load_recipe",
    "read_text",
    "recipe_names",
    "resolve",
    "whole_rollouts",
    "yaml_mapping",
]

#: The steps of one episode that an imitation budget assumes when it shrinks the phase to fit
#: ``--timesteps`` (the shipped scenarios' default horizon).
EPISODE_STEPS = 100


def read_text(path: Path, what: str, limit: int = 1 << 20) -> str:
    """A small text file, or a :class:`TrainingError` naming it."""
    try:
        if not path.is_file():
            raise TrainingError(f"{what} {str(path)!r} does not exist (or is not a file)")
        if path.stat().st_size > limit:
            raise TrainingError(f"{what} {str(path)!r} is over {limit} bytes")
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TrainingError(f"{what} {str(path)!r} could not be read: {exc}") from None


def _shipped() -> Any:
    return resources.files("agents") / "recipes"


def recipe_names() -> list[str]:
    """The shipped recipes (``agents/recipes/NAME.yml``)."""
    return sorted(p.name[:-4] for p in _shipped().iterdir() if p.name.endswith(".yml"))


def _read_recipe(spec: str) -> tuple[dict[str, Any], str]:
    """The raw mapping of a recipe (a shipped name or a YAML file) and where it came from."""
    if spec in recipe_names():
        source = f"agents/recipes/{spec}.yml"
        text = (_shipped() / f"{spec}.yml").read_text(encoding="utf-8")
    elif spec.endswith((".yml", ".yaml")) or "/" in spec:
        source = spec
        text = read_text(Path(spec), "recipe file")
    else:
        raise TrainingError(
            f"--recipe {spec}: unknown recipe {spec!r}; expected one of {recipe_names()} "
            "or a YAML file"
        )
    return yaml_mapping(text, f"recipe {source!r}"), source


def yaml_mapping(text: str, what: str) -> dict[str, Any]:
    """A YAML document that is a mapping, or a :class:`TrainingError` naming ``what``."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        msg = " ".join(str(exc).split())
        raise TrainingError(f"{what} is not valid YAML: {msg}") from None
    if not isinstance(data, dict):
        raise TrainingError(f"{what}: expected a mapping of keys")
    return data


def _parse_value(text: str) -> Any:
    """A ``--set`` value as YAML reads it, and a number written as ``1e-4`` as a number
    (YAML 1.1 reads exponents without a dot as text)."""
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    if isinstance(value, str) and re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)[eE][+-]?\d+", value):
        return float(value)
    return value


def _override_path(item: str) -> list[str]:
    """The recipe field a ``--set KEY=VALUE`` item sets: a dotted KEY is one entry of a
    mapping; a bare KEY that is not a recipe key is one of the algorithm's constructor
    arguments (``rl.hyperparams.KEY``)."""
    key = item.split("=", 1)[0].strip()
    if "." not in key and key not in Recipe.model_fields:
        return ["rl", "hyperparams", key]
    return key.split(".")


def _override(data: dict[str, Any], item: str) -> None:
    """Apply one ``--set KEY=VALUE`` to the raw recipe (:func:`_override_path`)."""
    if "=" not in item:
        raise TrainingError(f"--set {item}: expected KEY=VALUE")
    key, value = (part.strip() for part in item.split("=", 1))
    path = _override_path(item)
    if path != key.split(".") and key not in Hyperparams.model_fields:  # a bare KEY: rl.hyperparams
        raise TrainingError(
            f"--set {item}: unknown key {key!r}; expected a recipe key of "
            f"{sorted(Recipe.model_fields)}, an argument of the algorithm of "
            f"{sorted(Hyperparams.model_fields)}, or a dotted path (imitation.rounds)"
        )
    node = data
    for i, part in enumerate(path[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            raise TrainingError(f"--set {item}: {'.'.join(path[: i + 1])} is not a mapping")
        node = child
    node[path[-1]] = _parse_value(value)


def load_recipe(spec: str, overrides: Sequence[str] = ()) -> tuple[Recipe, str]:
    """The recipe ``spec`` (a shipped name or a file) with the ``--set`` overrides applied,
    checked; and its source. An error names the file and the field; one that a ``--set``
    item caused (its field, or a rule on it) names that item."""
    data, source = _read_recipe(spec)
    check(Recipe, data, f"recipe {source!r}")
    for item in overrides:
        _override(data, item)
    if not overrides:
        return check(Recipe, data, f"recipe {source!r}"), source
    try:
        return Recipe.model_validate(data), source
    except ValidationError as exc:
        text = describe(exc)
    except ValueError as exc:
        text = str(exc)
    field = text.split(": ", 1)[0]
    keys = {item: ".".join(_override_path(item)) for item in overrides}
    hit = [i for i, k in keys.items() if field.startswith(k) or k.startswith(field)]
    where = f"--set {hit[-1]}" if hit else f"recipe {source!r} with --set {' '.join(overrides)}"
    raise TrainingError(f"{where}: {text}") from None


def whole_rollouts(recipe: Recipe, total: int) -> int:
    """``total`` RL steps rounded up to whole rollouts (on-policy), so that a run and a
    resumed one end exactly there."""
    if recipe.algo not in ON_POLICY or recipe.rl is None:
        return total
    n_steps = recipe.rl.hyperparams.n_steps or {"ppo": 2048, "a2c": 5}.get(recipe.algo, 128)
    chunk = recipe.rl.n_envs * n_steps
    return -(-total // chunk) * chunk


def imitation_steps(recipe: Recipe, families: int) -> int:
    """About how many environment steps the recipe's imitation phase takes: each labelled
    episode runs once per base (and once more planned) and once per DAgger round."""
    im = recipe.imitation
    if im is None:
        return 0
    bases = len(recipe.env.given().get("base_policy") or [])
    per_episode = (bases + im.rounds) * EPISODE_STEPS
    planned = families * im.episodes * (per_episode + int(im.plans) * EPISODE_STEPS)
    return planned + len(im.scenarios) * im.scenario_episodes * per_episode


def _with_rl_steps(recipe: Recipe, total: int) -> Recipe:
    """The recipe with ``total`` RL steps in whole rollouts (unchanged without an RL phase)."""
    if recipe.rl is None:
        return recipe
    rl = recipe.rl.model_copy(update={"total_timesteps": whole_rollouts(recipe, total)})
    return recipe.model_copy(update={"rl": rl})


def _fit_budget(recipe: Recipe, budget: int, families: int) -> Recipe:
    """The recipe with its phases sized to ``budget`` environment steps (``--timesteps``):
    the RL steps, and an imitation phase that would take more shrunk to fit (its episode
    counts scaled down, at least one episode per family)."""
    recipe = _with_rl_steps(recipe, budget)
    update: dict[str, Any] = {}
    planned = imitation_steps(recipe, families)
    if recipe.imitation is not None and planned > budget:
        im, f = recipe.imitation, budget / planned
        update["imitation"] = im.model_copy(
            update={
                "episodes": max(1, int(im.episodes * f)),
                "scenario_episodes": int(im.scenario_episodes * f),
            }
        )
    return recipe.model_copy(update=update)


def resolve(opts: RunOptions) -> RunConfig:
    """The run a command line describes: the recipe with ``--set``, sized to the budget, for
    the task; every value checked, nothing built or written (the rules that need the
    environment are :func:`agents.plan.make_plan`'s)."""

    try:  # the scenario first, with its own error
        family = make_family(opts.scenario, pool_size=8)
    except ScenarioError as exc:
        raise TrainingError(f"--scenario {opts.scenario}: {exc}") from None
    recipe, source = load_recipe(opts.recipe, list(opts.set))
    if recipe.rl is None and opts.num_envs is not None:
        raise TrainingError(
            f"--num-envs {opts.num_envs}: recipe {recipe.name!r} has no RL phase to run in parallel"
        )
    env = recipe.env.given()
    # one set of tenant slots for the scenario and every family trained beside it
    most = max(
        [family.max_tenants]
        + [make_family(f, pool_size=8).max_tenants for f in env.get("train_families") or []]
    )
    slots = opts.max_tenants or env.get("max_tenants") or most
    if slots < most:
        where = (
            f"--max-tenants {slots}" if opts.max_tenants else f"recipe {source!r}: env.max_tenants"
        )
        raise TrainingError(
            f"{where}: scenario {opts.scenario!r} and the recipe's train_families have up to "
            f"{most} tenants; expected max_tenants >= {most}"
        )
    # the recipe's weights are the task's (recorded there once) unless --weights is given
    update: dict[str, Any] = {
        "env": recipe.env.model_copy(update={"max_tenants": slots, "weights": None})
    }
    if recipe.rl is not None:
        rl = recipe.rl
        if opts.num_envs is not None:
            rl = rl.model_copy(update={"n_envs": opts.num_envs})
        update["rl"] = rl
    recipe = recipe.model_copy(update=update)
    families = 1 + len([f for f in env.get("train_families") or [] if f != opts.scenario])
    if opts.timesteps is not None:
        recipe = _fit_budget(recipe, opts.timesteps, families)
    else:
        recipe = _with_rl_steps(recipe, recipe.total_timesteps)
    total = recipe.total_timesteps
    cfg = check(
        RunConfig,
        {
            "recipe": recipe.model_dump(mode="json"),
            "recipe_source": source,
            "task": opts.task(env.get("weights")).given(),
            "seed": opts.seed,
            # 19 evaluations after the one at step 0: a 20-point curve
            "eval_interval": opts.eval_interval
            if opts.eval_interval is not None
            else max(total // 19, 1),
            "eval_episodes": opts.eval_episodes,
            "checkpoint_interval": opts.checkpoint_interval
            if opts.checkpoint_interval is not None
            else max(total // 4, 1),
            "references": opts.reference_names(host_view=env.get("observation") == "host"),
            "created": time.strftime("%Y-%m-%d %H:%M:%S"),
            "options": opts.model_dump(mode="json", exclude={"resume", "list_recipes"}),
        },
        "the command line",
    )
    return cfg
