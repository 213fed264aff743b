"""The sweep file: its schema (pydantic, the one error format of :mod:`agents.config`).

A sweep file (YAML; only ``budget.timesteps`` is required)::

    name: ppo-kv-store          # default: the file's stem; the folder runs/sweeps/NAME
    recipe: ppo                 # a recipe name or YAML file, or a list of them (a grid)
    scenario: kv-store          # scenario name, YAML file or family; or a list (a grid)
    seeds: [0, 1, 2]            # training seeds (a grid; default 0)
    train:                      # train.py options fixed for every trial: split, reward,
      num_envs: 64              #   weights, action_type, max_tenants, num_envs, eval_interval
                                #   (default 0), eval_episodes, checkpoint_interval (default:
                                #   half a stage)
    hyperparams:                # recipe overrides per trial, as train.py --set KEY=VALUE: an
      learning_rate: {loguniform: [1.0e-4, 1.0e-3]}   # algorithm argument (rl.hyperparams.KEY)
      n_epochs: {grid: [4, 8]}                         # or a dotted path into the recipe; a
      env.base_policy: {choice: [colloid, tpp]}        # constant or one of DISTRIBUTIONS
      gamma: 0.98
    search:                     # optional
      algorithm: random         #   random (default: grids crossed, the rest sampled), or a Ray
                                #   Tune searcher installed beside ray (optuna, hyperopt, ...)
      num_samples: 4            #   samples per grid point (default 1)
      seed: 0                   #   seed of the sampling (default 0)
      max_concurrent: 2         #   trials at once (default: as the CPUs allow)
      options: {}               #   keyword arguments of the searcher
    scheduler:                  # optional early stopping, at the reports: asha, hyperband,
      name: asha                #   median or fifo (none), with their options (SCHEDULERS)
      grace_period: 1           #   (in reports)
    budget:
      timesteps: 262144         # per trial, as train.py --timesteps (RL: whole rollouts)
      reports: 4                # objective evaluated 4 times (default 1, 4 with a scheduler;
                                #   1 for a recipe without an RL phase)
    objective:
      metric: geomean_perf      # an episode metric of agents.rollout (default geomean_perf)
      mode: max                 # max or min (default: min for mean_latency_ns, else max)
      episodes: 16              # validation episodes (default 16)
      seed: 50000               # their first seed (default 50000)
      split: val                # family split (default val: choices are made on the
                                #   validation split; test is for reports only)
      scenario: kv-store        # default: the trial's scenario
    resources:
      cpus_per_trial: 1

Relative paths (recipe and scenario files) are taken from the sweep file's folder if they
exist there, else from the current folder.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

import yaml
from pydantic import BeforeValidator, Field, PrivateAttr, create_model, model_validator

from agents.config import RunOptions, TrainingError, check
from agents.config.fields import Int, Name, Num, PlainMap, _plain, _Strict
from agents.report import LOWER_IS_BETTER
from agents.report import METRICS as RECORD_METRICS

__all__ = [
    "DISTRIBUTIONS",
    "METRICS",
    "SCHEDULERS",
    "TRAIN_KEYS",
    "Dist",
    "SweepError",
    "SweepSpec",
    "load_sweep",
]


class SweepError(TrainingError):
    """A sweep that cannot run: a bad sweep file, an empty search space, a foreign sweep folder."""


#: Distributions of a search-space entry, ``{NAME: ARGS}``, and their argument counts.
DISTRIBUTIONS: dict[str, int | None] = {
    "grid": None,  # every value, crossed with the other grids
    "choice": None,  # one value drawn per trial
    "uniform": 2,
    "quniform": 3,
    "loguniform": 2,
    "qloguniform": 3,
    "randint": 2,  # [low, high): high excluded, as in Ray Tune
    "qrandint": 3,
    "lograndint": 2,
    "randn": 2,  # [mean, sd]
}
#: Schedulers and the options each takes (besides ``name``).
SCHEDULERS: dict[str, tuple[str, ...]] = {
    "fifo": (),
    "asha": ("grace_period", "reduction_factor", "brackets"),
    "hyperband": ("reduction_factor",),
    "median": ("grace_period", "min_samples_required", "hard_stop"),
}
#: train.py options a sweep may fix for every trial (``train:``).
TRAIN_KEYS = (
    "split",
    "reward",
    "weights",
    "action_type",
    "max_tenants",
    "num_envs",
    "eval_interval",
    "eval_episodes",
    "checkpoint_interval",
)
#: Episode metrics an objective may use: the record contract's, less the solver diagnostic.
METRICS = tuple(m for m in RECORD_METRICS if m != "unconverged_steps")
#: Default validation seeds: held out from training (seeded from the run seed) and from the
#: seeds train.py evaluates on (10,000 + seed) and compares on (20,000 + seed).
VALIDATION_SEED = 50_000


# ============================================================================ search-space entries


@dataclass(frozen=True)
class Dist:
    """A search-space distribution, ``{kind: args}`` in the file (a top-level list: a grid)."""

    kind: str
    args: tuple[Any, ...]

    def points(self) -> list[Any]:
        """Values to check before the sweep: every grid/choice value, a range's ends
        (``randint``'s high excluded), ``randn``'s mean."""
        a = list(self.args)
        if self.kind in ("grid", "choice"):
            return a
        if self.kind == "randn":
            return [a[0]]
        if self.kind in ("randint", "lograndint"):
            return [a[0], a[1] - 1]
        return [a[0], a[1]]

    def tune(self) -> Any:
        """The Ray Tune search-space object."""
        from ray import tune

        if self.kind == "grid":
            return self.args[0] if len(self.args) == 1 else tune.grid_search(list(self.args))
        if self.kind == "choice":
            return tune.choice(list(self.args))
        return getattr(tune, self.kind)(*self.args)

    def map(self, fn: Callable[[Any], Any]) -> Dist:
        """The same distribution over ``fn`` of each value (grid and choice only)."""
        if self.kind in ("grid", "choice"):
            return Dist(self.kind, tuple(fn(v) for v in self.args))
        return self


def _dist_of(value: Any) -> tuple[str, Any] | None:
    if isinstance(value, dict) and len(value) == 1 and next(iter(value)) in DISTRIBUTIONS:
        kind = next(iter(value))
        return kind, value[kind]
    return None


def _range_rules(kind: str, args: list[Any]) -> None:
    """A numeric distribution's arguments (a ValueError saying what is wrong)."""
    n = DISTRIBUTIONS[kind] or 0
    names = ["mean", "sd"] if kind == "randn" else ["low", "high", "q"][:n]
    numbers = isinstance(args, list) and all(
        isinstance(a, int | float) and not isinstance(a, bool) and math.isfinite(a) for a in args
    )
    if not numbers or len(args) != n:
        raise ValueError(f"{kind} takes [{', '.join(names)}], numbers")
    if kind == "randn":
        if args[1] <= 0:
            raise ValueError(f"randn's sd must be > 0, got {args[1]}")
        return
    lo, hi = args[0], args[1]
    if kind.endswith("randint") and not all(isinstance(a, int) for a in (lo, hi)):
        raise ValueError(f"{kind} takes integer low and high")
    if kind in ("randint", "lograndint") and hi - lo < 1:
        raise ValueError(f"empty search space ({kind} over [{lo}, {hi}), high excluded)")
    if not lo < hi:
        raise ValueError(f"empty search space ({kind} over [{lo}, {hi}]: expected low < high)")
    if kind in ("loguniform", "qloguniform", "lograndint") and lo <= 0:
        raise ValueError(f"{kind} needs low > 0, got {lo}")
    if n == 3 and args[2] <= 0:
        raise ValueError(f"{kind}'s q must be > 0, got {args[2]}")


def _entry(value: Any) -> Any:
    """A hyperparameter entry: a constant (plain data) or a :class:`Dist`."""
    if isinstance(value, Dist):
        return value
    found = _dist_of(value)
    if found is None:
        return _plain(value)
    kind, args = found
    if kind in ("grid", "choice"):
        if not isinstance(args, list):
            raise ValueError(f"{kind} takes a list of values")
        if not args:
            raise ValueError(f"empty search space ({kind} of no values)")
        return Dist(kind, tuple(_plain(a) for a in args))
    _range_rules(kind, args)
    return Dist(kind, tuple(args))


def _top_entry(value: Any) -> Any:
    """A recipe, scenario or seeds entry: a value, a list (a grid) or ``{choice: [...]}``."""
    if isinstance(value, list):
        value = {"grid": value}
    entry = _entry(value)
    if isinstance(entry, Dist) and entry.kind not in ("grid", "choice"):
        raise ValueError("expected a value, a list (a grid) or {choice: [...]}")
    return entry


def _values_of(entry: Any) -> list[Any]:
    return list(entry.args) if isinstance(entry, Dist) else [entry]


def _names(entry: Any) -> Any:
    if not all(isinstance(v, str) and v for v in _values_of(entry)):
        raise ValueError("expected names (text)")
    return entry


def _seeds(entry: Any) -> Any:
    for v in _values_of(entry):
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 2**31:
            raise ValueError("expected integer seeds in [0, 2**31)")
    return entry


Entry = Annotated[Any, BeforeValidator(_entry)]
NamesEntry = Annotated[Any, BeforeValidator(lambda v: _names(_top_entry(v)))]
SeedsEntry = Annotated[Any, BeforeValidator(lambda v: _seeds(_top_entry(v)))]


# ============================================================================ sections


class _Section(_Strict):
    """A mapping of the sweep file whose unknown keys are named with the keys it takes."""

    where: ClassVar[str] = ""

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key in data:
                if key not in cls.model_fields:
                    raise ValueError(
                        f"{cls.where}{key}: unknown key {str(key)!r}; expected one of "
                        f"{list(cls.model_fields)}"
                    )
        return data


#: ``train:``: the fields of :class:`agents.config.RunOptions` (their types and checks).
TrainOptions: Any = create_model(  # type: ignore[call-overload]
    "TrainOptions",
    __base__=_Section,
    **{k: (RunOptions.model_fields[k].annotation, RunOptions.model_fields[k]) for k in TRAIN_KEYS},
)
TrainOptions.where = "train."


class Search(_Section):
    where = "search."
    algorithm: Name = "random"
    num_samples: Int(0) = 1  # type: ignore[valid-type]
    seed: Int(0) = 0  # type: ignore[valid-type]
    max_concurrent: Int(1) | None = None  # type: ignore[valid-type]
    options: PlainMap = Field(default_factory=dict)

    @model_validator(mode="after")
    def _samples(self) -> Search:
        if self.num_samples == 0:
            raise ValueError("search.num_samples: empty search space (0 samples); expected >= 1")
        return self


class Scheduler(_Section):
    """Early stopping at the reports; each scheduler takes its own options (:data:`SCHEDULERS`)."""

    where = "scheduler."
    name: Literal[tuple(SCHEDULERS)]  # type: ignore[valid-type]
    grace_period: Num(ge=0) | None = None  # type: ignore[valid-type]
    reduction_factor: Num(gt=1) | None = None  # type: ignore[valid-type]
    brackets: Int(1) | None = None  # type: ignore[valid-type]
    min_samples_required: Int(1) | None = None  # type: ignore[valid-type]
    hard_stop: bool | None = None

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"name": data}
        if isinstance(data, dict) and data.get("name") in SCHEDULERS:
            takes = SCHEDULERS[data["name"]]
            for key in data:
                if key != "name" and key not in takes:
                    raise ValueError(
                        f"scheduler.{key}: {data['name']} takes no {str(key)!r}; expected some "
                        f"of {list(takes)}"
                    )
        return data

    @model_validator(mode="after")
    def _asha(self) -> Scheduler:
        g = self.grace_period
        if self.name == "asha" and g is not None and not (g >= 1 and float(g).is_integer()):
            raise ValueError(f"scheduler.grace_period: asha counts whole reports >= 1 (got {g})")
        return self


class Budget(_Section):
    where = "budget."
    timesteps: Int(1) = Field(description="environment steps per trial")  # type: ignore[valid-type]
    reports: Int(1) | None = None  # type: ignore[valid-type]


class Objective(_Section):
    where = "objective."
    metric: Literal[METRICS] = "geomean_perf"  # type: ignore[valid-type]
    mode: Literal["max", "min"] | None = None
    episodes: Int(1, 1 << 16) = 16  # type: ignore[valid-type]
    seed: Int(0, 2**31 - 1) = VALIDATION_SEED  # type: ignore[valid-type]
    split: Literal["train", "val", "test"] = "val"  # envs.families.SELECT_SPLIT
    scenario: Name | None = None


class Resources(_Section):
    where = "resources."
    cpus_per_trial: Num(gt=0) = 1.0  # type: ignore[valid-type]


# ============================================================================ the sweep


class SweepSpec(_Section):
    """A checked sweep file (:func:`load_sweep`; the module docstring documents the keys)."""

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=59)]
    recipe: NamesEntry = "ppo"
    scenario: NamesEntry = "mixed"
    seeds: SeedsEntry = 0
    train: TrainOptions = TrainOptions()
    hyperparams: dict[Annotated[str, Field(min_length=1)], Entry] = Field(default_factory=dict)
    search: Search = Search()
    scheduler: Scheduler | None = None
    budget: Budget
    objective: Objective = Objective()
    resources: Resources = Resources()

    _source: str = PrivateAttr("")
    _raw: dict[str, Any] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _rules(self) -> SweepSpec:
        if self.search.algorithm != "random":
            grids = [
                k for k, v in self.entries().items() if isinstance(v, Dist) and v.kind == "grid"
            ]
            if grids:
                raise ValueError(
                    f"search.algorithm: {self.search.algorithm!r} samples its own points and "
                    f"cannot take grids ({grids}); use {{choice: [...]}} or algorithm: random"
                )
        if self.scheduled and self.reports < 2:
            raise ValueError(
                f"budget.reports: scheduler {self.scheduled!r} stops trials between reports; "
                f"expected at least 2 (got {self.reports})"
            )
        s = self.scheduler
        if s is not None and s.name == "asha" and (s.grace_period or 1) > self.reports:
            raise ValueError(
                f"scheduler.grace_period: asha's grace period is in reports; expected at most "
                f"budget.reports = {self.reports} (got {s.grace_period:g})"
            )
        return self

    @property
    def source(self) -> str:
        """The sweep file, as given."""
        return self._source

    @property
    def raw(self) -> dict[str, Any]:
        """The file's mapping as read (a rerun compares it with the folder's ``sweep.yml``)."""
        return self._raw

    @property
    def scheduled(self) -> str | None:
        """The early-stopping scheduler's name (``None`` for none or ``fifo``)."""
        s = self.scheduler
        return None if s is None or s.name == "fifo" else s.name

    @property
    def reports(self) -> int:
        return self.budget.reports or (4 if self.scheduled else 1)

    @property
    def metric(self) -> str:
        return str(self.objective.metric)

    @property
    def mode(self) -> str:
        return self.objective.mode or ("min" if self.metric in LOWER_IS_BETTER else "max")

    def train_options(self) -> dict[str, Any]:
        """The ``train:`` options the file gives (the others keep train.py's defaults)."""
        return self.train.model_dump(mode="json", include=self.train.model_fields_set)

    def entries(self) -> dict[str, Any]:
        """Every search-space entry by name: recipe, scenario, seed, then the hyperparameters."""
        return {
            "recipe": self.recipe,
            "scenario": self.scenario,
            "seed": self.seeds,
            **self.hyperparams,
        }

    def n_trials(self) -> int:
        """Trials the sweep runs: ``num_samples`` times the product of the grids."""
        n = self.search.num_samples
        for v in self.entries().values():
            if isinstance(v, Dist) and v.kind == "grid":
                n *= len(v.args)
        return n

    def varying(self) -> list[str]:
        """Names of the entries that differ between trials (for tables)."""
        return [k for k, v in self.entries().items() if isinstance(v, Dist)]


def _file_paths(entry: Any, base: Path) -> Any:
    """YAML files in a recipe or scenario entry, made absolute (trials run in other folders):
    relative to the sweep file's folder ``base`` if they exist there, else as given."""

    def one(v: Any) -> Any:
        p = Path(str(v))
        if not str(v).endswith((".yaml", ".yml")):
            return v
        if not p.is_absolute() and (base / p).exists():
            return str((base / p).resolve())
        return str(p.resolve()) if p.exists() else v

    return entry.map(one) if isinstance(entry, Dist) else one(entry)


def load_sweep(path: str | Path) -> SweepSpec:
    """Read and check a sweep file (the module docstring documents it); every problem is
    one :class:`SweepError` line, ``sweep file 'x.yml': budget.reports: expected ...``."""
    src = str(path)
    p = Path(path)
    if not p.is_file():
        raise SweepError(f"sweep file {src!r} does not exist")
    try:
        raw = yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        raise SweepError(
            f"sweep file {src!r}: not valid YAML: {' '.join(str(exc).split())}"
        ) from None
    raw = {} if raw is None else raw
    data = raw
    if isinstance(raw, dict):  # an empty section (``search:``) is the section's defaults
        data = {"name": p.stem, **{k: v for k, v in raw.items() if v is not None or k == "budget"}}
    try:
        spec = check(SweepSpec, data, f"sweep file {src!r}")
    except TrainingError as exc:
        raise SweepError(str(exc)) from None
    base = p.resolve().parent
    obj = spec.objective
    spec = spec.model_copy(
        update={
            "recipe": _file_paths(spec.recipe, base),
            "scenario": _file_paths(spec.scenario, base),
            "objective": obj.model_copy(
                update={"scenario": obj.scenario and _file_paths(obj.scenario, base)}
            ),
        }
    )
    spec._source, spec._raw = src, raw
    return spec
