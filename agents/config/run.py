"""A run: a recipe resolved against the command line (the run folder's ``config.yml``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from agents.config.fields import FORMAT_VERSION, METRICS, Int, Name, _Strict
from agents.config.flags import POSITIONAL
from agents.config.recipe import FineTuneSettings, Recipe
from baselines import catalogue
from envs.config import MAX_TENANTS, default
from envs.families import SPLITS
from envs.generator import check_chances
from envs.scenario import scenario_names
from envs.spaces import ACTION_TYPES, REWARDS, WEIGHTS

__all__ = [
    "RESUME_OVERRIDES",
    "EvaluateOptions",
    "RunConfig",
    "RunOptions",
    "SweepOptions",
    "Task",
    "trained_names",
]


class Task(_Strict):
    """What the run trains for (the flags ``--scenario``, ``--split``, ``--reward``, ...): the
    environment's arguments of those names (:class:`envs.config.EnvConfig`)."""

    scenario: Name
    split: Literal[SPLITS]
    reward: Literal[REWARDS]
    weights: Literal[WEIGHTS]
    action_type: Literal[ACTION_TYPES]


# ============================================================================ flags and runs


class RunOptions(_Strict):
    """The command line of ``train.py`` (each field is a flag: ``--num-envs`` is ``num_envs``).

    ``None``: the recipe's value (or the rule in the field's description)."""

    recipe: Name = Field("ppo-finetune", description="recipe name (agents/recipes/) or YAML file")
    scenario: Name = Field(default("scenario"), description="scenario name, YAML file or family")
    split: Literal[SPLITS] = Field(default("split"), description="family split to train on")
    reward: Literal[REWARDS] = Field(
        default("reward"),
        description="the objective: the RL reward and the imitation labels' score",
    )
    weights: Literal[WEIGHTS] = Field(
        default("weights"), description="per-tenant weights or one global vector"
    )
    action_type: Literal[ACTION_TYPES] = Field(
        default("action_type"), description="Box(-1, 1) actions or MultiDiscrete"
    )
    max_tenants: Int(1, MAX_TENANTS) | None = Field(
        None, description="tenant slots (default: the scenario's maximum)"
    )
    timesteps: Int(1) | None = Field(
        None,
        description="the run's budget of environment steps (default: the recipe's): RL steps, "
        "rounded up to whole rollouts; a smaller budget than the imitation phase takes shrinks "
        "its episodes to fit; with --resume: a new total",
    )
    num_envs: Int(1, 1 << 16) | None = Field(
        None, description="parallel instances for RL (default: the recipe's n_envs)"
    )
    seed: Int(0, 2**31 - 1) = Field(0, description="random seed")
    set: list[str] = Field(
        [], description="override one recipe entry, KEY=VALUE with a dotted KEY (repeatable)"
    )
    run_dir: Path | None = Field(
        None, description="run folder (default: RUNS_ROOT/{scenario}__{recipe}__{seed}__{time})"
    )
    runs_root: Path = Field(Path("runs"), description="parent of default run folders")
    eval_interval: Int(0) | None = Field(
        None,
        description="RL steps between evaluations on held-out seeds, also at step 0 "
        "(default: 20 points over the budget; 0: off)",
    )
    eval_episodes: Int(1, 1 << 16) = Field(
        64, description="validation-split episodes per held-out evaluation during training"
    )
    checkpoint_interval: Int(0) | None = Field(
        None, description="RL steps between checkpoints (default: a quarter of the budget)"
    )
    compare_episodes: Int(0, 1 << 16) = Field(
        64, description="test-split episodes of the final comparison (0 skips it)"
    )
    references: Name | None = Field(
        None,
        description="comma-separated policies the held-out evaluations and the final "
        "comparison score beside the learned policy (default: every deployable heuristic "
        "and selector of the catalogue, baselines/catalogue.py; for a recipe on the host "
        "view, env.observation host, the policies a host can run)",
    )
    resume: Path | None = Field(
        None, description="continue the run in this folder from where it stopped"
    )
    quiet: bool = Field(False, description="print only errors and the final table")
    no_progress: bool = Field(False, description="no progress bars")
    list_recipes: bool = Field(False, description="list the recipes and exit")

    @field_validator("references")
    @classmethod
    def _known_references(cls, v: str | None) -> str | None:
        if v is not None:
            known = catalogue.names()
            for name in v.split(","):
                if name not in known and not name.startswith("static:"):
                    raise ValueError(
                        f"unknown policy {name!r}; expected names of {known} or static:W1:W2[@RATE]"
                    )
        return v

    def reference_names(self, host_view: bool = False) -> list[str]:
        """The references of the run: ``--references``, else every deployable heuristic and
        selector (``adaptive``); for a run on the host view the policies a host can run."""
        if self.references is not None:
            return self.references.split(",")
        if host_view:
            return catalogue.names(host=True)
        return [*catalogue.names(kind="heuristic", deployable=True), *catalogue.names("selector")]

    def task(self, weights: str | None = None) -> Task:
        """The task of the command line; ``weights`` (a recipe's) where ``--weights`` is not
        given."""
        return Task(
            scenario=self.scenario,
            split=self.split,
            reward=self.reward,
            weights=self.weights
            if weights is None or "weights" in self.model_fields_set
            else weights,
            action_type=self.action_type,
        )


#: ``evaluate.py --references`` values: the catalogue's policies a host can run, or none.
HOST_REFERENCES = "host"
NO_REFERENCES = "none"


class EvaluateOptions(_Strict):
    """The command line of ``evaluate.py`` (each field is a flag, as for :class:`RunOptions`)."""

    scenarios: Name = Field(
        ",".join([*scenario_names(), "mixed"]),
        description="comma-separated scenario names, YAML files or families (default: every "
        "shipped scenario and mixed)",
    )
    policies: Name = Field(
        ",".join(catalogue.names(compared=True)),
        description="comma-separated baseline names, static:W1:W2[@RATE], or trained run "
        "folders / model files, each optionally LABEL=... (default: every heuristic, "
        "static-best, best-heuristic-per-episode and the clairvoyant planner)",
    )
    episodes: Int(1, 1 << 16) = Field(16, description="episodes per scenario and policy")
    seed: Int(0, 2**31 - 1) = Field(0, description="seed; episode i runs with seed + i")
    split: Literal[SPLITS] = Field(
        "test", description="family split (val for choices: ablations, settings; test for reports)"
    )
    reference: Name = Field("dram-first", description="policy the ratios are taken against")
    metric: Literal[METRICS] = Field("geomean_perf", description="primary metric")
    output: Path = Field(Path("results"), description="output folder")
    no_plots: bool = Field(False, description="skip the PNG plots")
    no_progress: bool = Field(False, description="no progress bar")
    workers: Int(1, 1 << 12) | None = Field(
        None,
        description="run the grid's cells (scenario x policy x seed block) as Ray tasks on N "
        "local workers, Ray started in-process; results equal the single-process run's "
        "(default: one process, no Ray; with --ray-address: at most N cells at once)",
    )
    ray_address: Name | None = Field(
        None,
        description="run the cells on the Ray cluster at ADDRESS (its head's HOST:PORT; "
        "default: $RAY_ADDRESS if set)",
    )
    generator_chances: Name | None = Field(
        None,
        description="comma-separated NAME=P of envs.generator.CHANCES: the generator's "
        "families (gen-*, unseen-*, broad-*) drawn with these chances instead of the "
        "documented ones, e.g. channels=1 (every machine's DRAM channel count drawn within "
        "its bounds); other scenarios ignore it (default: the documented chances)",
    )
    references: Name | None = Field(
        None,
        description="comma-separated policies compared beside --policies (added after them, "
        f"repeats dropped), '{HOST_REFERENCES}' (the catalogue's heuristics a Linux host can "
        f"run: {','.join(catalogue.names(host=True))}) or '{NO_REFERENCES}' (default: "
        f"'{HOST_REFERENCES}' when a --policies entry is a run trained on the host view, "
        "observation='host'; otherwise none)",
    )

    def chances(self) -> dict[str, float] | None:
        """``--generator-chances`` as a mapping (checked), or None where not given.

        Raises:
            ValueError: an entry that is not NAME=P, an unknown name or a value outside [0, 1].
        """
        if self.generator_chances is None:
            return None
        given: dict[str, Any] = {}
        for entry in self.generator_chances.split(","):
            name, eq, value = entry.partition("=")
            try:
                if not eq:
                    raise ValueError(entry)
                given[name.strip()] = float(value)
            except ValueError:
                raise ValueError(
                    f"--generator-chances {self.generator_chances!r}: entry {entry!r}, "
                    "expected NAME=P (a chance of envs.generator.CHANCES and a number)"
                ) from None
        try:
            checked = check_chances(given)
        except ValueError as exc:
            raise ValueError(f"--generator-chances: {exc}") from None
        return {k: checked[k] for k in given}


class SweepOptions(_Strict):
    """The command line of ``sweep.py`` (each field is a flag, as for :class:`RunOptions`)."""

    sweep: Path = Field(description="sweep file (YAML)", json_schema_extra=POSITIONAL)
    output: Path | None = Field(
        None,
        description="sweep folder (default: runs/sweeps/NAME); one of the same sweep is resumed",
    )
    workers: Int(1, 1 << 12) | None = Field(
        None,
        description="local CPUs for Ray (default: all cores); trials at once = workers / "
        "cpus_per_trial",
    )
    ray_address: Name | None = Field(
        None,
        description="run the trials on this Ray cluster (HOST:PORT of its head; default: "
        "$RAY_ADDRESS, none: local)",
    )
    no_progress: bool = Field(False, description="no trial lines or progress bar")


#: Options a resumed run can change; the rest define the training and stay as recorded.
RESUME_OVERRIDES = (
    "timesteps",
    "eval_interval",
    "eval_episodes",
    "checkpoint_interval",
    "compare_episodes",
    "no_progress",
    "quiet",
)


def trained_names(env: Mapping[str, Any], scenarios: Sequence[str] = ()) -> list[str]:
    """What a run with env settings ``env`` trained on, in order, without repeats: its
    scenario, its ``train_families`` and ``scenarios`` (an imitation phase's)."""
    names = [env["scenario"], *(env.get("train_families") or []), *scenarios]
    return list(dict.fromkeys(str(n) for n in names))


class RunConfig(_Strict):
    """Everything a run needs to be repeated or resumed: the run folder's ``config.yml``."""

    model_config = ConfigDict(extra="forbid", frozen=False, validate_default=True)

    format: Literal[FORMAT_VERSION] = FORMAT_VERSION
    recipe: Recipe = Field(description="the recipe as resolved: --set and the budget applied")
    recipe_source: str
    task: Task
    seed: Int(0, 2**31 - 1)
    eval_interval: Int(0)
    eval_episodes: Int(1, 1 << 16)
    checkpoint_interval: Int(0)
    references: list[Name] = Field(default_factory=list)
    created: str = ""
    options: dict[str, Any] = Field({}, description="the command line's options, for --resume")

    @model_validator(mode="after")
    def _task_rules(self) -> RunConfig:
        algo = self.recipe.algo
        if self.task.action_type != "box":
            if algo in ("sac", "td3"):
                raise ValueError(
                    f"action_type: {algo} needs a continuous (box) action space: got "
                    f"{self.task.action_type!r}, expected 'box'"
                )
            if self.recipe.hyperparams.use_sde:
                raise ValueError("action_type: rl.hyperparams.use_sde: true needs 'box'")
        return self

    # the names the rest of the project reads a run by
    @property
    def algo(self) -> str:
        return self.recipe.algo

    @property
    def total_timesteps(self) -> int:
        return self.recipe.total_timesteps

    @property
    def n_envs(self) -> int:
        return self.recipe.n_envs

    @property
    def env(self) -> dict[str, Any]:
        """The environment's settings: the task, then the recipe's ``env`` (what evaluation
        and a saved model record)."""
        return {**self.task.given(), **self.recipe.env.given()}

    @property
    def finetune(self) -> FineTuneSettings | None:
        """The RL phase's fine-tuning guards (``rl.finetune``), if any."""
        return self.recipe.rl.finetune if self.recipe.rl is not None else None

    @property
    def trained_on(self) -> list[str]:
        """The scenarios and families the run trained on (their ``train`` splits): the task's
        scenario, the recipe's ``train_families`` and the imitation phase's ``scenarios``."""
        im = self.recipe.imitation
        return trained_names(
            self.env, im.scenarios if im is not None and im.scenario_episodes > 0 else ()
        )

    @property
    def hyperparams(self) -> dict[str, Any]:
        """The training settings as one flat mapping (TensorBoard's hyperparameter table)."""
        r = self.recipe
        out: dict[str, Any] = {
            "recipe": r.name,
            "trainers": "+".join(r.trainers),
            "policy": r.policy,
            **r.hyperparams.given(),
        }
        if r.rl is not None:
            out.update(n_envs=r.rl.n_envs, normalize_reward=r.rl.normalize_reward)
        pk = {k: v for k, v in r.policy_kwargs.given().items() if k != "layout"}
        if pk:
            out["policy_kwargs"] = pk
        if r.imitation is not None:
            out.update(
                {f"imitation.{k}": v for k, v in r.imitation.model_dump(mode="json").items()}
            )
        return out
