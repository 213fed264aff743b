"""Sweeps on Ray Tune: seeds, scenarios, algorithms and hyperparameters, one run folder per trial.

A sweep file (YAML, :func:`load_sweep`) names the grid or search space, the
budget of a trial, the objective (an evaluation metric on validation seeds)
and optionally a scheduler that stops poor trials early. :func:`run_sweep`
runs the trials as Ray Tune trials, locally (Ray in-process on the local
cores) or on a cluster (``address`` / ``$RAY_ADDRESS``), and writes::

    SWEEP_DIR/
      sweep.yml            the sweep file (a rerun checks it is the same sweep)
      trials/<trial>/      ordinary run folders (config.yml, model.zip, checkpoints/,
                           tensorboard/) plus sweep_trial.json (its stages and objective)
      tune/                Ray Tune's experiment state (what an interrupted sweep resumes from)
      summary.csv, summary.md, summary.png   every trial, ranked by the objective
      best.yml             the best trial's hyperparameters: train.py --hyperparams accepts it
      best.json            the best trial, its objective, run folder and train.py command

A trial trains in ``budget.reports`` stages: the first is ``train.py --run-dir
RUN --timesteps T1``, each next one ``train.py --resume RUN --timesteps Tk``
(whole rollouts), and after each stage the latest checkpoint is scored on
the validation episodes and the score reported to Tune (and written to the
run's TensorBoard as ``sweep/<metric>``); a scheduler compares trials at
these reports. Training itself is ``train.py``'s, passed in as
:class:`TrainHooks` (this package sits below the scripts). The environment
stays one batched process per trial: Ray distributes runs, never steps.

An interrupted sweep resumes when the same command is run again: Tune
restores its trials, and a trial picks up from its run folder (stages already
scored are not trained again, a stage cut short resumes from its last
checkpoint).
"""

from __future__ import annotations

import csv
import json
import math
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from ray import tune

from agents.distributed import RayError, ray_address, ray_session
from agents.report import METRICS as RECORD_METRICS

__all__ = [
    "DISTRIBUTIONS",
    "SweepError",
    "SweepSpec",
    "SweepTrial",
    "TrainHooks",
    "load_sweep",
    "run_sweep",
    "summarize_sweep",
]


class SweepError(ValueError):
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
TOP_KEYS = (
    "name",
    "algo",
    "scenario",
    "seeds",
    "train",
    "hyperparams",
    "search",
    "scheduler",
    "budget",
    "objective",
    "resources",
)
#: train.py options a sweep may fix for every trial (``train:``).
TRAIN_KEYS = (
    "split",
    "reward",
    "weights",
    "action_type",
    "max_tenants",
    "num_envs",
    "hyperparams",
    "eval_interval",
    "eval_episodes",
    "checkpoint_interval",
)
SEARCH_KEYS = ("algorithm", "num_samples", "seed", "max_concurrent", "options")
BUDGET_KEYS = ("timesteps", "reports")
OBJECTIVE_KEYS = ("metric", "mode", "episodes", "seed", "split", "scenario")
RESOURCE_KEYS = ("cpus_per_trial",)
#: Schedulers and the options each takes (besides ``name``).
SCHEDULERS: dict[str, tuple[str, ...]] = {
    "fifo": (),
    "asha": ("grace_period", "reduction_factor", "brackets"),
    "hyperband": ("reduction_factor",),
    "median": ("grace_period", "min_samples_required", "hard_stop"),
}
#: Episode metrics an objective may use: the record contract's, less the solver diagnostic.
METRICS = tuple(m for m in RECORD_METRICS if m != "unconverged_steps")
LOWER_IS_BETTER = ("mean_latency_ns",)
#: Default validation seeds: held out from training (seeded from the run seed) and from the
#: seeds train.py evaluates on (10,000 + seed) and compares on (20,000 + seed).
VALIDATION_SEED = 50_000


# --------------------------------------------------------------------------- the sweep file


@dataclass
class SweepSpec:
    """A validated sweep file (:func:`load_sweep` documents the format)."""

    name: str
    source: str
    raw: dict[str, Any]
    algos: Any  # a constant, a list (grid) or a {distribution: args} dict
    scenarios: Any
    seeds: Any
    train: dict[str, Any]
    hyperparams: dict[str, Any]
    algorithm: str = "random"
    num_samples: int = 1
    search_seed: int = 0
    max_concurrent: int | None = None
    search_options: dict[str, Any] = field(default_factory=dict)
    scheduler: str | None = None
    scheduler_options: dict[str, Any] = field(default_factory=dict)
    timesteps: int = 0
    reports: int = 1
    metric: str = "geomean_perf"
    mode: str = "max"
    episodes: int = 16
    objective_seed: int = VALIDATION_SEED
    objective_split: str = "train"
    objective_scenario: str | None = None
    cpus_per_trial: float = 1.0

    def n_trials(self) -> int:
        """Trials the sweep runs: ``num_samples`` times the product of the grids."""
        n = self.num_samples
        for v in [self.algos, self.scenarios, self.seeds, *self.hyperparams.values()]:
            kind = _dist_kind(v, top=True)
            if kind == "grid":
                n *= len(v["grid"] if isinstance(v, dict) else v)
        return n

    def varying(self) -> list[str]:
        """Names of the entries that differ between trials (for tables): algo, scenario, seed, hp keys."""
        out = []
        for key, v in (("algo", self.algos), ("scenario", self.scenarios), ("seed", self.seeds)):
            if _dist_kind(v, top=True) != "constant":
                out.append(key)
        out += [k for k, v in self.hyperparams.items() if _dist_kind(v) != "constant"]
        return out


def _dist_kind(value: Any, top: bool = False) -> str:
    """``constant``, ``grid`` or the distribution's name; at the top level a list is a grid."""
    if isinstance(value, dict) and len(value) == 1 and next(iter(value)) in DISTRIBUTIONS:
        return next(iter(value))
    if top and isinstance(value, list):
        return "grid"
    return "constant"


def _keys(
    where: str, data: Any, allowed: Sequence[str], err: Callable[[str], SweepError]
) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise err(f"{where}: expected a mapping of key: value, got {type(data).__name__}")
    bad = sorted(str(k) for k in set(data) - set(allowed))
    if bad:
        raise err(f"{where}: unknown key(s) {bad}; expected some of {list(allowed)}")
    return data


def _int(where: str, v: Any, lo: int, err: Callable[[str], SweepError]) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise err(f"{where}: expected an integer >= {lo}, got {v!r}")
    return v


def _check_entry(where: str, value: Any, top: bool, err: Callable[[str], SweepError]) -> None:
    """A search-space entry: a constant, a grid list (top level) or ``{distribution: args}``."""
    kind = _dist_kind(value, top)
    if kind == "constant":
        return
    args = value if (top and isinstance(value, list)) else value[kind]
    n = DISTRIBUTIONS[kind]
    if kind in ("grid", "choice"):
        if not isinstance(args, list):
            raise err(f"{where}: {kind} takes a list of values, got {args!r}")
        if not args:
            raise err(f"{where}: empty search space ({kind} of no values)")
        return
    if not isinstance(args, list) or len(args) != n:
        raise err(
            f"{where}: {kind} takes [{', '.join(['low', 'high', 'q'][: n or 0])}], got {args!r}"
        )
    if not all(isinstance(a, int | float) and not isinstance(a, bool) for a in args):
        raise err(f"{where}: {kind} takes numbers, got {args!r}")
    if kind == "randn":
        if args[1] <= 0:
            raise err(f"{where}: randn's sd must be > 0, got {args[1]}")
        return
    lo, hi = args[0], args[1]
    if kind.endswith("randint") and not (isinstance(lo, int) and isinstance(hi, int)):
        raise err(f"{where}: {kind} takes integers, got {args!r}")
    if kind in ("randint", "lograndint") and hi - lo < 1:
        raise err(f"{where}: empty search space ({kind} over [{lo}, {hi}), high excluded)")
    if not lo < hi:
        raise err(f"{where}: empty search space ({kind} over [{lo}, {hi}]: expected low < high)")
    if kind in ("loguniform", "qloguniform", "lograndint") and lo <= 0:
        raise err(f"{where}: {kind} needs low > 0, got {lo}")
    if n == 3 and args[2] <= 0:
        raise err(f"{where}: {kind}'s q must be > 0, got {args[2]}")


def _resolve_path(text: str, base: Path) -> str:
    """A path in a sweep file: relative to the sweep file's folder if it exists there, else as given."""
    p = Path(text)
    if not p.is_absolute() and (base / p).exists():
        return str((base / p).resolve())
    return str(p.resolve()) if p.exists() else text


def _maybe_paths(value: Any, base: Path) -> Any:
    """Scenario YAML files in a scenario entry, made absolute (trials run in other folders)."""
    if isinstance(value, str) and value.endswith((".yaml", ".yml")):
        return _resolve_path(value, base)
    if isinstance(value, list):
        return [_maybe_paths(v, base) for v in value]
    if isinstance(value, dict) and _dist_kind(value) != "constant":
        k = next(iter(value))
        return {k: _maybe_paths(value[k], base)}
    return value


def load_sweep(path: str | Path) -> SweepSpec:
    """Read and check a sweep file; every problem is one :class:`SweepError` line.

    Format (YAML; only ``budget.timesteps`` is required)::

        name: ppo-kv-store          # default: the file's stem; the folder runs/sweeps/NAME
        algo: ppo                   # one algorithm, or a list (a grid)
        scenario: kv-store          # scenario name, YAML file or family; or a list (a grid)
        seeds: [0, 1, 2]            # training seeds (a grid; default 0)
        train:                      # train.py options fixed for every trial
          num_envs: 64              #   split, reward, weights, action_type, max_tenants, num_envs,
          hyperparams: base.yml     #   hyperparams (a base file), eval_interval (default 0),
                                    #   eval_episodes, checkpoint_interval (default: half a stage)
        hyperparams:                # per trial, as train.py --set KEY=VALUE: a constant, or
          learning_rate: {loguniform: [1.0e-4, 1.0e-3]}   # one of DISTRIBUTIONS
          n_epochs: {grid: [4, 8]}
          gamma: 0.98
        search:                     # optional
          algorithm: random         #   random (default: grids crossed, the rest sampled), or a Ray
                                    #   Tune searcher installed beside ray (optuna, hyperopt, ...)
          num_samples: 4            #   samples per grid point (default 1)
          seed: 0                   #   seed of the sampling (default 0)
          max_concurrent: 2         #   trials at once (default: as the CPUs allow)
          options: {}               #   keyword arguments of the searcher
        scheduler:                  # optional early stopping, at the reports: asha, hyperband,
          name: asha                #   median or fifo (none), with their options
          grace_period: 1           #   (in reports) and reduction_factor
        budget:
          timesteps: 262144         # per trial (rounded up to whole rollouts)
          reports: 4                # objective evaluated 4 times (default 1, 4 with a scheduler)
        objective:
          metric: geomean_perf      # an episode metric of agents.rollout (default geomean_perf)
          mode: max                 # max or min (default: min for mean_latency_ns, else max)
          episodes: 16              # validation episodes (default 16)
          seed: 50000               # their first seed (default 50000)
          split: train              # family split (default train: the test split is for reports)
          scenario: kv-store        # default: the trial's scenario
        resources:
          cpus_per_trial: 1

    Relative paths (scenario files, ``train.hyperparams``) are taken from the
    sweep file's folder if they exist there, else from the current folder.
    """
    src = str(path)

    def err(msg: str) -> SweepError:
        return SweepError(f"sweep file {src!r}: {msg}")

    p = Path(path)
    if not p.is_file():
        raise SweepError(f"sweep file {src!r} does not exist")
    try:
        raw = yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        raise err(f"not valid YAML: {' '.join(str(exc).split())}") from None
    if raw is None:
        raw = {}
    data = _keys("top level", raw, TOP_KEYS, err)
    base = p.resolve().parent
    name = str(data.get("name", p.stem))
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise err(f"name: {name!r} must be letters, digits, '_', '.' or '-'")
    algos = data.get("algo", "ppo")
    scenarios = _maybe_paths(data.get("scenario", "mixed"), base)
    seeds = data.get("seeds", 0)
    for key, v in (("algo", algos), ("scenario", scenarios), ("seeds", seeds)):
        _check_entry(key, v, True, err)
        if _dist_kind(v, True) not in ("constant", "grid", "choice"):
            raise err(f"{key}: expected a value, a list (grid) or {{choice: [...]}}, got {v!r}")
    hp = data.get("hyperparams") or {}
    if not isinstance(hp, dict):
        raise err(
            f"hyperparams: expected a mapping of name: value or {{distribution: args}}, got {hp!r}"
        )
    for k, v in hp.items():
        _check_entry(f"hyperparams.{k}", v, False, err)
    train = dict(_keys("train", data.get("train") or {}, TRAIN_KEYS, err))
    if "hyperparams" in train:
        train["hyperparams"] = _resolve_path(str(train["hyperparams"]), base)
    spec = SweepSpec(
        name=name,
        source=src,
        raw=raw,
        algos=algos,
        scenarios=scenarios,
        seeds=seeds,
        train=train,
        hyperparams=dict(hp),
    )
    search = _keys("search", data.get("search") or {}, SEARCH_KEYS, err)
    spec.algorithm = str(search.get("algorithm", "random"))
    spec.num_samples = _int("search.num_samples", search.get("num_samples", 1), 0, err)
    if spec.num_samples == 0:
        raise err("search.num_samples: empty search space (0 samples)")
    spec.search_seed = _int("search.seed", search.get("seed", 0), 0, err)
    if search.get("max_concurrent") is not None:
        spec.max_concurrent = _int("search.max_concurrent", search["max_concurrent"], 1, err)
    options = search.get("options") or {}
    if not isinstance(options, dict):
        raise err(f"search.options: expected a mapping of keyword: value, got {options!r}")
    spec.search_options = dict(options)
    if spec.algorithm != "random":
        grids = [k for k, v in [("algo", algos), ("scenario", scenarios), ("seeds", seeds), *hp.items()]
                 if _dist_kind(v, k in ("algo", "scenario", "seeds")) == "grid"]  # fmt: skip
        if grids:
            raise err(
                f"search.algorithm {spec.algorithm!r} samples its own points and cannot take grids "
                f"({grids}); use {{choice: [...]}} or algorithm: random"
            )
    sched = data.get("scheduler")
    if isinstance(sched, str):
        sched = {"name": sched}
    if sched is not None:
        if not isinstance(sched, dict) or "name" not in sched:
            raise err(f"scheduler: expected a name ({list(SCHEDULERS)}) or a mapping with name:")
        sname = str(sched["name"])
        if sname not in SCHEDULERS:
            raise err(
                f"scheduler.name: unknown scheduler {sname!r}; expected one of {list(SCHEDULERS)}"
            )
        opts = {k: v for k, v in sched.items() if k != "name"}
        _keys(f"scheduler ({sname})", opts, SCHEDULERS[sname], err)
        spec.scheduler = None if sname == "fifo" else sname
        spec.scheduler_options = opts
    budget = _keys("budget", data.get("budget"), BUDGET_KEYS, err) if "budget" in data else None
    if budget is None or "timesteps" not in budget:
        raise err("budget.timesteps: required (environment steps per trial)")
    spec.timesteps = _int("budget.timesteps", budget["timesteps"], 1, err)
    spec.reports = _int("budget.reports", budget.get("reports", 4 if spec.scheduler else 1), 1, err)
    if spec.scheduler and spec.reports < 2:
        raise err(
            f"budget.reports: scheduler {spec.scheduler!r} stops trials between reports; "
            f"expected at least 2, got {spec.reports}"
        )
    obj = _keys("objective", data.get("objective") or {}, OBJECTIVE_KEYS, err)
    spec.metric = str(obj.get("metric", "geomean_perf"))
    if spec.metric not in METRICS:
        raise err(
            f"objective.metric: unknown metric {spec.metric!r}; expected one of {list(METRICS)}"
        )
    spec.mode = str(obj.get("mode", "min" if spec.metric in LOWER_IS_BETTER else "max"))
    if spec.mode not in ("max", "min"):
        raise err(f"objective.mode: expected max or min, got {spec.mode!r}")
    spec.episodes = _int("objective.episodes", obj.get("episodes", 16), 1, err)
    spec.objective_seed = _int("objective.seed", obj.get("seed", VALIDATION_SEED), 0, err)
    spec.objective_split = str(obj.get("split", "train"))
    if spec.objective_split not in ("train", "test"):
        raise err(f"objective.split: expected train or test, got {spec.objective_split!r}")
    if obj.get("scenario") is not None:
        spec.objective_scenario = _maybe_paths(str(obj["scenario"]), base)
    res = _keys("resources", data.get("resources") or {}, RESOURCE_KEYS, err)
    cpus = res.get("cpus_per_trial", 1)
    if isinstance(cpus, bool) or not isinstance(cpus, int | float) or cpus <= 0:
        raise err(f"resources.cpus_per_trial: expected a number > 0, got {cpus!r}")
    spec.cpus_per_trial = float(cpus)
    return spec


# --------------------------------------------------------------------------- search space


def _tune_entry(value: Any, top: bool = False) -> Any:
    kind = _dist_kind(value, top)
    if kind == "constant":
        return value
    args = value if (top and isinstance(value, list)) else value[kind]
    if kind == "grid":
        return args[0] if len(args) == 1 else tune.grid_search(list(args))
    if kind == "choice":
        return tune.choice(list(args))
    return getattr(tune, kind)(*args)


def param_space(spec: SweepSpec) -> dict[str, Any]:
    """The Tune search space: ``{"algo", "scenario", "seed", "hp": {name: value}}``."""
    return {
        "algo": _tune_entry(spec.algos, True),
        "scenario": _tune_entry(spec.scenarios, True),
        "seed": _tune_entry(spec.seeds, True),
        "hp": {k: _tune_entry(v) for k, v in spec.hyperparams.items()},
    }


def _values(value: Any, top: bool = False) -> list[Any]:
    """Values to check before the sweep: every grid/choice value, a range's ends, randn's mean."""
    kind = _dist_kind(value, top)
    if kind == "constant":
        return [value]
    args = value if (top and isinstance(value, list)) else value[kind]
    if kind in ("grid", "choice"):
        return list(args)
    if kind == "randn":
        return [args[0]]
    if kind in ("randint", "lograndint"):
        return [args[0], args[1] - 1]
    return [args[0], args[1]]


def _set_flag(key: str, value: Any) -> str:
    """``KEY=VALUE`` for train.py --set: JSON, which YAML reads back as the same value."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return f"{key}={value!r}"
    return f"{key}={json.dumps(value)}"


def train_argv(
    spec: SweepSpec, algo: str, scenario: str, seed: int, hp: Mapping[str, Any]
) -> list[str]:
    """train.py's options for one trial (without the run folder and budget)."""
    argv = ["--algo", str(algo), "--scenario", str(scenario), "--seed", str(int(seed))]
    opts = {"eval_interval": 0, **spec.train}
    for k, v in opts.items():
        if v is not None:
            argv += [f"--{k.replace('_', '-')}", str(v)]
    for k, v in hp.items():
        argv += ["--set", _set_flag(k, v)]
    return [*argv, "--compare-episodes", "0", "--quiet", "--no-progress"]


@dataclass
class TrainHooks:
    """``train.py``, as the sweep calls it: ``build(argv) -> RunConfig`` checks a command and
    returns its configuration (nothing written); ``train(argv) -> run folder | None`` trains
    (None: interrupted). Both raise ``ValueError`` (``TrainingError``) for bad input."""

    build: Callable[[list[str]], Any]
    train: Callable[[list[str]], Path | None]


def validate_trials(spec: SweepSpec, hooks: TrainHooks) -> None:
    """Check every algorithm x scenario with the hyperparameters' values before any trial starts.

    Each value a trial can get from a grid or choice, and each end of a range,
    is checked once (the others at their first value) through ``hooks.build``:
    train.py's own checks, with train.py's message.
    """
    first = {k: _values(v)[0] for k, v in spec.hyperparams.items()}
    variants = [first]
    for k, v in spec.hyperparams.items():
        for x in _values(v)[1:]:
            variants.append({**first, k: x})
    seed = _values(spec.seeds, True)[0]
    for algo in _values(spec.algos, True):
        for scenario in _values(spec.scenarios, True):
            for hp in variants:
                argv = train_argv(spec, algo, scenario, seed, hp)
                try:
                    hooks.build([*argv, "--timesteps", str(spec.timesteps)])
                except SystemExit as exc:  # argparse: its message is already on stderr
                    raise SweepError(
                        f"sweep file {spec.source!r}: train.py refuses {' '.join(argv)} (exit {exc.code})"
                    ) from None
                except ValueError as exc:
                    raise SweepError(
                        f"sweep file {spec.source!r}: trial with algo={algo} scenario={scenario} "
                        f"{_hp_text(hp)}: {exc}"
                    ) from None


def _hp_text(hp: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={_short(v)}" for k, v in hp.items())


def _short(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    text = json.dumps(v) if not isinstance(v, str) else v
    return text if len(text) <= 40 else text[:37] + "..."


def _slug(text: str) -> str:
    stem = Path(text).stem if text.endswith((".yaml", ".yml")) else text
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", stem).strip("-")


# --------------------------------------------------------------------------- a trial


@dataclass
class TrialContext:
    """What every trial needs besides its config (sent once to the workers)."""

    out: str  # the sweep folder, absolute
    spec: SweepSpec
    hooks: TrainHooks


def trial_dir_name(index: int, config: Mapping[str, Any]) -> str:
    return f"{index:03d}-{config['algo']}-{_slug(str(config['scenario']))}-s{int(config['seed'])}"


def _trial_index(trial_id: str) -> int:
    m = re.search(r"_(\d+)$", trial_id)
    return int(m.group(1)) if m else 0


def _plain(value: Any) -> Any:
    """JSON-plain copy (tuples to lists, numpy scalars to numbers)."""
    return json.loads(
        json.dumps(value, default=lambda o: o.item() if hasattr(o, "item") else str(o))
    )


class SweepTrial(tune.Trainable):
    """One trial of a sweep: a run folder trained in stages, scored after each (Tune class API).

    ``step`` k trains the run to the k-th budget mark (``train.py --run-dir``
    the first time, ``--resume --timesteps`` after), scores its latest
    checkpoint on the validation episodes and returns the score. What a
    stage did is recorded in the run's ``sweep_trial.json``, so a restarted
    trial (an interrupted sweep) re-reports finished stages instead of
    training them again. Runs in the actor's main thread, as train.py's
    signal handling needs.
    """

    def setup(self, config: dict[str, Any], ctx: TrialContext | None = None) -> None:
        assert ctx is not None
        self.ctx = ctx
        spec = ctx.spec
        self.cfg = _plain(config)
        self.index = _trial_index(self.trial_id)
        self.run_dir = Path(ctx.out) / "trials" / trial_dir_name(self.index, self.cfg)
        self.argv = train_argv(
            spec, self.cfg["algo"], self.cfg["scenario"], self.cfg["seed"], self.cfg["hp"]
        )
        # budget marks in whole rollouts: one rollout is what a 1-step budget rounds up to
        total = int(
            ctx.hooks.build([*self.argv, "--timesteps", str(spec.timesteps)]).total_timesteps
        )
        chunk = int(ctx.hooks.build([*self.argv, "--timesteps", "1"]).total_timesteps)
        marks = [
            min(total, -(-(k * total // spec.reports) // chunk) * chunk)
            for k in range(1, spec.reports + 1)
        ]
        self.targets = [*marks[:-1], total]
        self.state_file = self.run_dir / "sweep_trial.json"
        self.state: dict[str, Any] = {
            "trial": self.run_dir.name,
            "config": self.cfg,
            "argv": self.argv,
            "targets": self.targets,
            "metric": spec.metric,
            "mode": spec.mode,
            "stages": [],
        }
        if self.state_file.is_file():
            saved = json.loads(self.state_file.read_text())
            if saved.get("config") != self.cfg:
                raise SweepError(
                    f"trial folder {str(self.run_dir)!r} holds another configuration "
                    f"({saved.get('config')}); remove it or use another sweep folder"
                )
            self.state["stages"] = saved.get("stages", [])

    def _checkpoint_steps(self) -> int | None:
        from agents.training import checkpoint_steps, latest_checkpoint

        if not self.run_dir.is_dir():
            return None
        try:
            return int(checkpoint_steps(latest_checkpoint(self.run_dir)))
        except ValueError:  # TrainingError: no checkpoint yet
            return None

    def _train_to(self, target: int) -> int:
        done = self._checkpoint_steps()
        if done is not None and done >= target:
            return done
        if not self.run_dir.is_dir():
            ck = max(1, (self.targets[0]) // 2)
            if "checkpoint_interval" not in self.ctx.spec.train:
                argv = [*self.argv, "--checkpoint-interval", str(ck)]
            else:
                argv = list(self.argv)
            argv += ["--run-dir", str(self.run_dir), "--timesteps", str(target)]
        else:  # resume: a later stage, or a stage cut short (a folder without a checkpoint restarts)
            argv = [
                "--resume",
                str(self.run_dir),
                "--timesteps",
                str(target),
                "--quiet",
                "--no-progress",
            ]
        result = self.ctx.hooks.train(argv)
        if result is None:
            raise SweepError(
                f"trial {self.run_dir.name}: training was interrupted; rerun the sweep to resume"
            )
        steps = self._checkpoint_steps()
        return int(steps if steps is not None else target)

    def _objective(self) -> float:
        from agents.evaluation import load_policy, mean_score
        from agents.rollout import rollout
        from agents.training import latest_checkpoint

        spec = self.ctx.spec
        model_file = latest_checkpoint(self.run_dir) / "model.zip"
        policy, env_kwargs = load_policy(str(model_file), label=self.cfg["algo"])
        recs = rollout(
            policy,
            spec.objective_scenario or self.cfg["scenario"],
            spec.episodes,
            seed=spec.objective_seed,
            split=spec.objective_split,
            env_kwargs=env_kwargs,
        )
        return mean_score(recs, spec.metric)

    def _log_tensorboard(self, stage: dict[str, Any]) -> None:
        from torch.utils.tensorboard import SummaryWriter

        w = SummaryWriter(str(self.run_dir / "tensorboard"))
        w.add_scalar(f"sweep/{self.ctx.spec.metric}", stage["objective"], stage["timesteps"])
        w.close()

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
            stages.append(stage)
            tmp = self.state_file.with_suffix(".json.tmp")
            tmp.write_text(json.dumps(self.state, indent=1))
            tmp.replace(self.state_file)
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


# --------------------------------------------------------------------------- progress


#: What the progress callback prints to: set by run_sweep for the run in progress.
_PROGRESS: dict[str, Any] = {"show": True, "total": 0, "spec": None}


class SweepProgress(tune.Callback):
    """One line per finished trial and a progress bar over the sweep's trials.

    Settings come from :data:`_PROGRESS` (set by :func:`run_sweep`), so a
    copy restored with an interrupted sweep's state prints as asked now.
    """

    def __init__(self) -> None:
        self.bar: Any = None
        self.done: set[str] = set()

    def _start(self, trials: Sequence[Any]) -> None:
        from tqdm import tqdm

        if self.bar is None:
            self.bar = tqdm(
                total=_PROGRESS["total"],
                desc="trials",
                disable=not _PROGRESS["show"],
                file=sys.stderr,
            )
            for t in trials:
                if t.status in ("TERMINATED", "ERROR"):
                    self.done.add(t.trial_id)
            self.bar.update(len(self.done))

    def on_step_begin(self, iteration: int, trials: list[Any], **info: Any) -> None:
        self._start(trials)

    def _line(self, trial: Any, status: str) -> None:
        from tqdm import tqdm

        self._start([])
        if trial.trial_id in self.done:
            return
        self.done.add(trial.trial_id)
        spec: SweepSpec = _PROGRESS["spec"]
        cfg = _plain(trial.config)
        res = trial.last_result or {}
        name = trial_dir_name(_trial_index(trial.trial_id), cfg)
        hp = _hp_text({k: v for k, v in cfg.get("hp", {}).items() if k in spec.varying()})
        if status == "error":
            text = f"failed: {_error_line(trial)}"
        else:
            score = res.get("objective", float("nan"))
            stage, n = res.get("stage", 0), res.get("reports", spec.reports)
            how = "complete" if stage >= n else f"stopped early by {spec.scheduler}"
            text = f"{spec.metric} {score:.4f} at {int(res.get('timesteps', 0)):,} steps ({stage}/{n} reports, {how})"
        if _PROGRESS["show"]:
            tqdm.write(
                f"[{len(self.done)}/{_PROGRESS['total']}] {name} {hp}: {text}".replace("  ", " "),
                file=sys.stderr,
            )
        if self.bar is not None:
            self.bar.update(1)

    def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self._line(trial, "complete")

    def on_trial_error(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self._line(trial, "error")

    def on_experiment_end(self, trials: list[Any], **info: Any) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def __getstate__(self) -> dict[str, Any]:
        return {"bar": None, "done": set()}  # a bar is not saved with the experiment


def _error_line(trial: Any) -> str:
    try:
        path = trial.error_file
        text = Path(path).read_text() if path and Path(path).is_file() else ""
    except Exception:
        text = ""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if re.match(r"^[\w.]*(Error|Exception)\b", ln):
            return ln.split(": ", 1)[-1] if ": " in ln else ln
    return lines[-1] if lines else "see the trial's error file under tune/"


# --------------------------------------------------------------------------- the sweep


def _scheduler(spec: SweepSpec) -> Any:
    from ray.tune.schedulers import (
        AsyncHyperBandScheduler,
        FIFOScheduler,
        HyperBandScheduler,
        MedianStoppingRule,
    )

    o = spec.scheduler_options
    if spec.scheduler == "asha":
        return AsyncHyperBandScheduler(
            time_attr="training_iteration",
            max_t=spec.reports,
            grace_period=int(o.get("grace_period", 1)),
            reduction_factor=float(o.get("reduction_factor", 2)),
            brackets=int(o.get("brackets", 1)),
        )
    if spec.scheduler == "hyperband":
        return HyperBandScheduler(
            time_attr="training_iteration",
            max_t=spec.reports,
            reduction_factor=float(o.get("reduction_factor", 3)),
        )
    if spec.scheduler == "median":
        return MedianStoppingRule(
            time_attr="training_iteration",
            grace_period=float(o.get("grace_period", 1)),
            min_samples_required=int(o.get("min_samples_required", 3)),
            hard_stop=bool(o.get("hard_stop", True)),
        )
    return FIFOScheduler()


def _searcher(spec: SweepSpec) -> Any:
    from ray.tune.search import BasicVariantGenerator, ConcurrencyLimiter, create_searcher

    if spec.algorithm == "random":
        return BasicVariantGenerator(
            random_state=spec.search_seed, max_concurrent=spec.max_concurrent or 0
        )
    try:
        searcher = create_searcher(spec.algorithm, **spec.search_options)
    except ValueError as exc:
        raise SweepError(f"sweep file {spec.source!r}: search.algorithm: {exc}") from None
    except Exception as exc:  # ImportError / AssertionError: the library is not installed
        msg = " ".join(str(exc).split()) or type(exc).__name__
        raise SweepError(
            f"sweep file {spec.source!r}: search.algorithm {spec.algorithm!r} cannot be set up: {msg} "
            f"(install its package beside ray, or use algorithm: random)"
        ) from None
    if spec.max_concurrent:
        searcher = ConcurrencyLimiter(searcher, max_concurrent=spec.max_concurrent)
    return searcher


def _prepare_output(spec: SweepSpec, output: str | Path | None) -> tuple[Path, bool]:
    """The sweep folder and whether it holds this sweep already (to resume)."""
    out = Path(output) if output is not None else Path("runs") / "sweeps" / spec.name
    out = out.resolve()
    stored = out / "sweep.yml"
    if stored.is_file():
        try:
            before = yaml.safe_load(stored.read_text())
        except yaml.YAMLError:
            before = None
        if before != spec.raw:
            raise SweepError(
                f"sweep folder {str(out)!r} holds a different sweep (its sweep.yml differs from "
                f"{spec.source!r}); use --output for a new folder, or the same file to resume it"
            )
        return out, True
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise SweepError(
            f"sweep folder {str(out)!r} exists and is not a sweep folder; use --output"
        )
    return out, False


def run_sweep(
    path: str | Path,
    hooks: TrainHooks,
    *,
    output: str | Path | None = None,
    workers: int | None = None,
    address: str | None = None,
    show_progress: bool = True,
    modules: Sequence[str] = ("envs", "baselines", "agents", "train"),
) -> dict[str, Any]:
    """Run (or resume) the sweep in ``path``; returns :func:`summarize_sweep`'s result.

    Everything is checked before a trial starts: the sweep file, every
    algorithm x scenario x hyperparameter value through train.py
    (``hooks.build``), the searcher and scheduler, the sweep folder, the Ray
    cluster and that each node imports ``modules``. ``workers``: local Ray
    CPUs (default all cores; with an address, unused).

    Raises:
        ValueError: (:class:`SweepError`, :class:`agents.distributed.RayError`)
            one line saying what to fix, before any trial starts.
    """
    spec = load_sweep(path)
    validate_trials(spec, hooks)
    scheduler = _scheduler(spec) if spec.scheduler else None
    searcher = _searcher(spec)
    out, existing = _prepare_output(spec, output)
    ctx = TrialContext(out=str(out), spec=spec, hooks=hooks)
    n = spec.n_trials()
    with ray_session(workers, address, modules) as cpus:
        if spec.cpus_per_trial > cpus:
            raise RayError(
                f"resources.cpus_per_trial {spec.cpus_per_trial:g} is more than the {cpus} CPU(s) Ray has"
            )
        import os

        # TensorBoard logs are the run folders'; Tune's own would be a second copy
        os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
        os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
        out.mkdir(parents=True, exist_ok=True)
        if not existing:
            (out / "sweep.yml").write_text(Path(path).read_text())
        (out / "trials").mkdir(exist_ok=True)
        trainable = tune.with_resources(
            tune.with_parameters(SweepTrial, ctx=ctx), {"cpu": spec.cpus_per_trial}
        )
        _PROGRESS.update(show=show_progress, total=n, spec=spec)
        tune_dir = out / "tune"
        if show_progress:
            addr = ray_address(address)
            where = f"the Ray cluster at {addr}" if addr else f"{cpus} local CPU(s)"
            verb = "resuming" if tune.Tuner.can_restore(str(tune_dir)) else "running"
            print(
                f"{verb} sweep {spec.name}: {n} trial(s) on {where}; runs in {out / 'trials'}",
                file=sys.stderr,
            )
        if tune.Tuner.can_restore(str(tune_dir)):
            tuner = tune.Tuner.restore(
                str(tune_dir), trainable=trainable, resume_unfinished=True, resume_errored=True
            )
        else:
            tuner = tune.Tuner(
                trainable,
                param_space=param_space(spec),
                tune_config=tune.TuneConfig(
                    metric="objective",
                    mode=spec.mode,
                    scheduler=scheduler,
                    search_alg=searcher,
                    num_samples=spec.num_samples,
                    reuse_actors=False,
                ),
                run_config=tune.RunConfig(
                    name="tune",
                    storage_path=str(out),
                    stop={"training_iteration": spec.reports},
                    checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=1, num_to_keep=1),
                    failure_config=tune.FailureConfig(max_failures=0),
                    callbacks=[SweepProgress()],
                    verbose=0,
                ),
            )
        grid = tuner.fit()
        errors = {}
        for i in range(len(grid)):
            r = grid[i]
            if r.error is not None:
                m = re.search(r"_(\d{5})(?:_|$)", Path(str(r.path)).name)
                errors[int(m.group(1)) if m else -1] = " ".join(str(r.error).split())[-300:]
    return summarize_sweep(out, spec, errors=errors)


# --------------------------------------------------------------------------- summary


def _trial_rows(out: Path, spec: SweepSpec, errors: Mapping[int, str]) -> list[dict[str, Any]]:
    rows = []
    for f in sorted((out / "trials").glob("*/sweep_trial.json")):
        st = json.loads(f.read_text())
        stages = st.get("stages", [])
        idx = int(f.parent.name.split("-", 1)[0])
        n = len(st.get("targets", [])) or spec.reports
        last = stages[-1] if stages else {}
        status = (
            "error"
            if idx in errors
            else "complete"
            if len(stages) >= n
            else "stopped early"
            if spec.scheduler
            else "incomplete"
        )
        cfg = st["config"]
        rows.append(
            {
                "trial": f.parent.name,
                "algo": cfg["algo"],
                "scenario": cfg["scenario"],
                "seed": cfg["seed"],
                "hp": cfg.get("hp", {}),
                "objective": last.get("objective"),
                "timesteps": last.get("timesteps", 0),
                "reports": f"{len(stages)}/{n}",
                "status": status,
                "wall_s": round(sum(s.get("wall_s", 0.0) for s in stages), 1),
                "stages": stages,
                "run_dir": str(f.parent),
            }
        )
    # trials that failed before their first stage have no sweep_trial.json
    for idx, msg in errors.items():
        if not any(int(r["trial"].split("-", 1)[0]) == idx for r in rows):
            rows.append({"trial": f"{idx:03d}", "algo": "", "scenario": "", "seed": "", "hp": {},
                         "objective": None, "timesteps": 0, "reports": f"0/{spec.reports}",
                         "status": "error", "wall_s": 0.0, "stages": [], "run_dir": "",
                         "error": msg})  # fmt: skip
    return rows


def _rank_key(spec: SweepSpec) -> Callable[[dict[str, Any]], tuple[int, float]]:
    sign = -1.0 if spec.mode == "max" else 1.0

    def key(r: dict[str, Any]) -> tuple[int, float]:
        v = r["objective"]
        ok = v is not None and math.isfinite(v)
        # complete trials first (a stopped trial's score is at a smaller budget), then the score
        return (0 if r["status"] == "complete" and ok else 1 if ok else 2, sign * v if ok else 0.0)

    return key


def summarize_sweep(
    out: str | Path, spec: SweepSpec, errors: Mapping[int, str] | None = None
) -> dict[str, Any]:
    """The sweep's summary table (CSV, Markdown), plot and best configuration, from the trial folders.

    The best trial is the best objective among the trials that ran their whole
    budget (among all, if none did); ``best.yml`` holds its resolved
    hyperparameters (``default:`` section, with ``n_envs`` and
    ``total_timesteps``) for ``train.py --hyperparams``. Returns
    ``{"rows": [...], "best": {...} | None, "files": [...]}``.
    """
    from agents.training import read_config

    out = Path(out)
    rows = sorted(_trial_rows(out, spec, errors or {}), key=_rank_key(spec))
    hp_cols = [k for k in spec.varying() if k not in ("algo", "scenario", "seed")]
    base_cols = ["rank", "trial", "algo", "scenario", "seed", *hp_cols]
    cols = [*base_cols, spec.metric, "timesteps", "reports", "status", "wall_s", "run_dir"]
    table = []
    for i, r in enumerate(rows, 1):
        table.append(
            {
                "rank": i,
                "trial": r["trial"],
                "algo": r["algo"],
                "scenario": r["scenario"],
                "seed": r["seed"],
                **{k: r["hp"].get(k) for k in hp_cols},
                spec.metric: r["objective"],
                "timesteps": r["timesteps"],
                "reports": r["reports"],
                "status": r["status"],
                "wall_s": r["wall_s"],
                "run_dir": str(Path(r["run_dir"]).relative_to(out)) if r["run_dir"] else "",
            }
        )
    with open(out / "summary.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        for row in table:
            w.writerow(
                {k: (json.dumps(v) if isinstance(v, dict | list) else v) for k, v in row.items()}
            )

    def cell(col: str, v: Any) -> str:
        if v is None:
            return "-"
        if isinstance(v, float) and col == spec.metric:
            return f"{v:.4f}" if abs(v) < 1e4 else f"{v:,.1f}"
        if isinstance(v, float) and col == "wall_s":
            return f"{v:.1f}"
        if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 1e4:
            return f"{v:,}"
        return _short(v).replace("|", "\\|")

    md = [
        f"Sweep `{spec.name}`: {len(rows)} trial(s), objective {spec.metric} ({spec.mode}) "
        f"on {spec.episodes} validation episode(s) from seed {spec.objective_seed} "
        f"({spec.objective_split} split)",
        "",
        "| " + " | ".join(cols) + " |",
        "|" + "---|" * len(cols),
    ]
    md += ["| " + " | ".join(cell(c, row[c]) for c in cols) + " |" for row in table]
    (out / "summary.md").write_text("\n".join(md) + "\n")
    files = ["summary.csv", "summary.md"]
    if any(r["stages"] for r in rows):
        _plot(rows, spec, out / "summary.png")
        files.append("summary.png")
    best = next(
        (r for r in rows if r["objective"] is not None and math.isfinite(r["objective"])), None
    )
    best_info = None
    if best is not None:
        run = Path(best["run_dir"])
        cfg = read_config(run)
        hp = _plain(dict(cfg.hyperparams))
        hp["n_envs"] = int(cfg.n_envs)
        hp["total_timesteps"] = int(cfg.total_timesteps)
        extra_env = {
            k: v
            for k, v in _plain(cfg.env).items()
            if k not in ("scenario", "split", "reward", "weights", "action_type", "max_tenants")
        }
        if extra_env:
            hp["env"] = extra_env
        flags = [
            f"--{k.replace('_', '-')} {v}"
            for k, v in spec.train.items()
            if k in ("split", "reward", "weights", "action_type", "max_tenants") and v is not None
        ]
        command = " ".join(
            [
                "python train.py",
                f"--algo {cfg.algo}",
                f"--scenario {cfg.env['scenario']}",
                f"--seed {cfg.seed}",
                *flags,
                f"--hyperparams {out / 'best.yml'}",
            ]
        )
        header = [
            f"# Best configuration of sweep {spec.name} ({out}): the resolved hyperparameters",
            f"# of trial {best['trial']} (run folder {run}),",
            f"# {spec.metric} {best['objective']:.6g} after {best['timesteps']:,} steps ({best['status']}),",
            f"# on {spec.episodes} validation episode(s) from seed {spec.objective_seed} ({spec.objective_split} split).",
            "# Train with it (add --timesteps N for another budget):",
            f"#   {command}",
        ]
        (out / "best.yml").write_text(
            "\n".join(header) + "\n" + yaml.safe_dump({"default": hp}, sort_keys=False)
        )
        best_info = {
            "trial": best["trial"],
            "run_dir": str(run),
            "metric": spec.metric,
            "mode": spec.mode,
            "objective": best["objective"],
            "timesteps": best["timesteps"],
            "status": best["status"],
            "config": {
                "algo": best["algo"],
                "scenario": best["scenario"],
                "seed": best["seed"],
                "hp": best["hp"],
            },
            "hyperparams_file": str(out / "best.yml"),
            "command": command,
        }
        (out / "best.json").write_text(json.dumps(best_info, indent=1))
        files += ["best.yml", "best.json"]
    return {"rows": table, "best": best_info, "files": files, "markdown": "\n".join(md) + "\n"}


def _plot(rows: list[dict[str, Any]], spec: SweepSpec, path: Path) -> None:
    """Objective against timesteps for every trial (left) and each trial's last score (right)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 0.5 + max(4.5, 0.28 * len(rows))))
    FigureCanvasAgg(fig)
    ax, bx = fig.subplots(1, 2, gridspec_kw={"width_ratios": [3, 2]})
    best = rows[0]["trial"] if rows else None
    for r in rows:
        if not r["stages"]:
            continue
        xs = [s["timesteps"] for s in r["stages"]]
        ys = [s["objective"] for s in r["stages"]]
        lw, alpha = (2.5, 1.0) if r["trial"] == best else (1.0, 0.6)
        ax.plot(
            xs, ys, marker="o", lw=lw, alpha=alpha, label=r["trial"] if r["trial"] == best else None
        )
    ax.set_xlabel("timesteps")
    ax.set_ylabel(f"{spec.metric} (validation)")
    ax.set_title(f"sweep {spec.name}: every trial at each report")
    ax.grid(alpha=0.3)
    if best:
        ax.legend(loc="best", fontsize=8, title="best")
    scored = [r for r in rows if r["objective"] is not None and math.isfinite(r["objective"])]
    names = [f"{r['trial']} ({r['status']})" for r in scored][::-1]
    vals = [r["objective"] for r in scored][::-1]
    colors = ["tab:green" if r["trial"] == best else "tab:blue" if r["status"] == "complete" else "tab:gray"
              for r in scored][::-1]  # fmt: skip
    bx.barh(range(len(vals)), vals, color=colors)
    bx.set_yticks(range(len(vals)))
    bx.set_yticklabels(names, fontsize=7)
    if vals:
        lo, hi = min(vals), max(vals)
        pad = (hi - lo) * 0.1 or abs(hi) * 0.01 or 0.01
        bx.set_xlim(lo - pad, hi + pad)
    bx.set_xlabel(f"{spec.metric} at the last report")
    bx.set_title("ranked (green: best, gray: stopped early)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
