"""Train a stable-baselines3 agent on TierGym and compare it with the kernel heuristics.

With no arguments: a PPO policy for the ``mixed`` family (train split), residual over
six heuristics, fitted by a warm start that imitates per episode the best of them or,
where it beats them, a planner's per-tenant placement, with DAgger rounds, and followed
by no PPO steps (``agents/hyperparams/ppo.yml``: PPO after it has only lowered the
score; about eleven minutes on a 2-core machine), then the
learned policy against the heuristic baselines on the test split (the code path of
``evaluate.py``). Watch it with ``tensorboard --logdir runs``.

Examples::

    python train.py
    python train.py --algo sac --scenario kv-store --timesteps 200000
    python train.py --set learning_rate=1e-4 --set n_envs=64
    python train.py --resume runs/mixed__ppo__0__20261130-101500

Ctrl-C or SIGTERM saves a checkpoint and exits (even before the first
rollout: a checkpoint at step 0); ``--resume RUN`` continues it with its
timestep count, optimizer, reward-normalisation statistics, replay buffer and
random state, and with the options the run was started with (a flag given
again on the resume command overrides its own option: ``--timesteps``, the
evaluation, checkpoint and comparison settings, ``--quiet``, ``--progress``;
the training settings cannot change). A run folder with no checkpoint yet
restarts from step 0 with its recorded configuration.

Every value is checked before any work starts (README "Trust model" and
``agents.training``'s schema); a bad one is a one-line error and exit code 2.
Models and checkpoints are saved in formats that load without running code;
``--trust-pickle`` is needed only to resume a run saved by the older,
pickle-based code.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from agents.training import ALGOS, ON_POLICY, RunConfig, TrainingError

REFERENCES = ("dram-first", "interleave", "weighted-interleave", "numa-tiering", "tpp", "colloid")
#: First seed of the training-split episodes that label the warm start (agents.imitation)
IMITATION_SEED = 500_000
#: Added to the final comparison only (not scored during training): the per-tenant
#: bandwidth-aware heuristic and the upper bounds, so ``RUN/results`` has the headroom share
#: ``(policy - dram-first) / (planner - dram-first)``.
UPPER_REFERENCES = ("bw-aware-interleave", "best-heuristic-per-episode", "planner")


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``train.py: error: argument --seed: ...``), exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    ap = _Parser(
        prog="train.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--algo", default="ppo", help=f"algorithm, one of {list(ALGOS)} (default: ppo)")
    ap.add_argument(
        "--scenario", default="mixed", help="scenario name, YAML file or family (default: mixed)"
    )
    ap.add_argument(
        "--split",
        default="train",
        choices=["train", "test"],
        help="family split to train on (default: train)",
    )
    ap.add_argument(
        "--reward",
        default="log-geomean",
        help="log-geomean (default), throughput, weighted-speedup or harmonic",
    )
    ap.add_argument(
        "--weights",
        default="per-tenant",
        choices=["per-tenant", "global"],
        help="per-tenant weights or one global vector",
    )
    ap.add_argument(
        "--action-type",
        default="box",
        choices=["box", "discrete"],
        help="Box(-1, 1) actions or MultiDiscrete",
    )
    ap.add_argument(
        "--max-tenants",
        type=int,
        default=None,
        help="tenant slots (default: the scenario's maximum)",
    )
    ap.add_argument(
        "--timesteps",
        type=int,
        default=None,
        help="total environment steps, rounded up to whole rollouts (default: the hyperparameter file's total_timesteps); with --resume: a new total for the run",
    )
    ap.add_argument(
        "--num-envs",
        type=int,
        default=None,
        help="parallel instances of the native vector env (default: hyperparameter file)",
    )
    ap.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    ap.add_argument(
        "--run-dir",
        type=Path,
        default=None,
        help="run folder (default: runs/{scenario}__{algo}__{seed}__{time}); must not exist",
    )
    ap.add_argument(
        "--runs-root",
        type=Path,
        default=Path("runs"),
        help="parent of default run folders (default: runs)",
    )
    ap.add_argument(
        "--hyperparams",
        type=Path,
        default=None,
        help="hyperparameter YAML (default: agents/hyperparams/{algo}.yml)",
    )
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one hyperparameter (repeatable)",
    )
    ap.add_argument(
        "--eval-interval",
        type=int,
        default=None,
        help="timesteps between evaluations on held-out seeds, also run at step 0 (default: 1/19 of the budget, 20 points; 0 turns it off)",
    )
    ap.add_argument(
        "--eval-episodes", type=int, default=32, help="episodes per evaluation (default: 32)"
    )
    ap.add_argument(
        "--checkpoint-interval",
        type=int,
        default=None,
        help="timesteps between checkpoints (default: 1/4 of the budget)",
    )
    ap.add_argument(
        "--compare-episodes",
        type=int,
        default=64,
        help="test-split episodes of the final comparison (default: 64; 0 skips it)",
    )
    ap.add_argument(
        "--resume",
        type=Path,
        default=None,
        metavar="RUN",
        help="continue the run in this folder from its last checkpoint",
    )
    ap.add_argument(
        "--trust-pickle",
        action="store_true",
        help="DANGEROUS: allow --resume of a run saved by the older pickle-based code (SB3 "
        "model.zip, *.pkl). Unpickling runs any code the file's author put in it: use it only "
        "for runs you made yourself. Never recorded, so every resume must give it again",
    )
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")
    ap.add_argument(
        "--progress",
        dest="no_progress",
        action="store_false",
        default=False,
        help="show the progress bar (undoes a --no-progress recorded in a resumed run)",
    )
    ap.add_argument(
        "--quiet",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="print only errors and the final table (--no-quiet undoes a recorded --quiet)",
    )
    return ap


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def explicit_options(argv: list[str]) -> set[str]:
    """The options (``dest`` names) given on the command line, as opposed to defaults."""
    ap = build_parser()
    for action in ap._actions:
        action.default = argparse.SUPPRESS
    return set(vars(ap.parse_args(argv)))


# options a resumed run can change; the rest define the training and stay as recorded
RESUME_OVERRIDES = (
    "timesteps",
    "eval_interval",
    "eval_episodes",
    "checkpoint_interval",
    "compare_episodes",
    "no_progress",
    "quiet",
)
NOT_RECORDED = ("resume", "trust_pickle")


def flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def recorded_options(args: argparse.Namespace) -> dict[str, Any]:
    """Every option of the command (JSON/YAML-safe), as config.yml records it."""
    return {
        k: (str(v) if isinstance(v, Path) else list(v) if isinstance(v, list) else v)
        for k, v in vars(args).items()
        if k not in NOT_RECORDED
    }


def validate_args(args: argparse.Namespace) -> None:
    """Each flag that stands for a schema value, checked with the schema's rule (before any work)."""
    from agents.training import ENV_SETTINGS, RUN_OPTIONS, SPECIAL, check_new_dir, check_value

    if args.algo not in ALGOS:
        raise TrainingError(
            f"--algo {args.algo}: unknown algorithm {args.algo!r}, expected one of {list(ALGOS)}"
        )
    if args.algo in ("sac", "td3") and args.action_type != "box":
        raise TrainingError(
            f"--algo {args.algo} needs a continuous (box) action space: got --action-type "
            f"{args.action_type}, expected --action-type box"
        )
    rules = {
        "timesteps": SPECIAL["total_timesteps"],
        "num_envs": SPECIAL["n_envs"],
        "max_tenants": ENV_SETTINGS["max_tenants"],
        "reward": ENV_SETTINGS["reward"],
        **RUN_OPTIONS,
    }
    for dest, rule in rules.items():
        value = getattr(args, dest)
        if value is not None:
            check_value(rule, value, f"{flag(dest)} {value}")
    if args.resume is None:
        check_new_dir(args.runs_root, "--runs-root", must_be_empty=False)
        if args.run_dir is not None:
            check_new_dir(args.run_dir, "--run-dir")
        if args.hyperparams is not None and not args.hyperparams.is_file():
            raise TrainingError(
                f"--hyperparams {str(args.hyperparams)!r}: no such file; expected a hyperparameter YAML file"
            )


class Interrupted(BaseException):
    """SIGINT or SIGTERM before training started (raised by an armed :class:`InterruptGuard`).

    A ``BaseException``, like ``KeyboardInterrupt``: library code's ``except Exception`` lets it through.
    """


class InterruptGuard:
    """SIGINT/SIGTERM from the moment a run folder is written until training starts.

    ``arm``: a signal raises :class:`Interrupted` wherever the program is
    (building the env, scoring the references); :func:`main` then calls
    :meth:`report`, which saves ``save()`` (a checkpoint at the step the run
    stands, 0 for a new run) if a model exists: the folder can always be
    resumed. ``defer`` (just before ``learn``): a signal is only noted in
    ``signalled``; inside ``learn`` the StopOnSignal callback takes over.
    ``release``: the original handlers are back.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.run_dir: Path | None = None
        self.save: Callable[[], Path] | None = None
        self.signalled = False
        self._previous: dict[int, Any] = {}

    def _raise(self, signum: int, frame: Any) -> None:
        self.signalled = True
        raise Interrupted(signal.Signals(signum).name)

    def _note(self, signum: int, frame: Any) -> None:
        self.signalled = True

    def _install(self, handler: Callable[[int, Any], None]) -> None:
        if not self.enabled:
            return
        for sig in self.SIGNALS:
            try:
                previous = signal.signal(sig, handler)
            except ValueError:  # not the main thread: no signal handling
                self.enabled = False
                return
            self._previous.setdefault(sig, previous)

    def arm(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self._install(self._raise)

    def defer(self) -> None:
        self._install(self._note)

    def release(self) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous.clear()

    def report(self) -> None:
        """After :class:`Interrupted`: save the checkpoint if a model exists; say how to continue."""
        from agents.training import checkpoint_steps

        self.defer()  # a second signal while saving is noted, not fatal
        try:
            again = f"python train.py --resume {self.run_dir}"
            if self.save is not None:
                ck = self.save()
                print(
                    f"interrupted: checkpoint {ck} at {checkpoint_steps(ck):,} steps; continue with: {again}",
                    flush=True,
                )
            else:
                print(
                    f"interrupted before the model was built: {self.run_dir} keeps its configuration; "
                    f"start it with: {again}",
                    flush=True,
                )
        finally:
            self.release()


def log(args: argparse.Namespace, msg: str) -> None:
    if not args.quiet:
        print(msg, flush=True)


def whole_rollouts(algo: str, total: int, n_envs: int, hp: dict[str, Any]) -> int:
    """``total`` rounded up to whole rollouts (on-policy), so a run and a resumed one end exactly there."""
    if algo not in ON_POLICY:
        return total
    chunk = n_envs * int(hp.get("n_steps", {"ppo": 2048, "a2c": 5}.get(algo, 128)))
    return -(-total // chunk) * chunk


def build_config(args: argparse.Namespace) -> RunConfig:
    """The run's configuration from the flags and the hyperparameter file, every value checked.

    Nothing is written: the model is built once on a stand-in env (so
    stable-baselines3's own checks run here too) and thrown away.
    """
    from agents.training import (
        DEFAULT_N_ENVS,
        check_combination,
        dry_build,
        load_hyperparams,
        with_policy_layout,
    )
    from envs.families import make_family
    from envs.scenario import ScenarioError

    validate_args(args)
    try:  # validates the scenario early, with its own error
        family = make_family(args.scenario, pool_size=8)
    except ScenarioError as exc:
        raise TrainingError(f"--scenario {args.scenario}: {exc}") from None
    key = family.name if args.scenario in ("mixed",) else args.scenario
    hp, source = load_hyperparams(args.algo, key, args.hyperparams, args.set)
    env = dict(hp.pop("env", {}) or {})
    env.update(
        scenario=args.scenario,
        split=args.split,
        reward=args.reward,
        weights=args.weights,
        action_type=args.action_type,
    )
    # record the slots, so the model can be evaluated on scenarios with fewer tenants
    if args.max_tenants is not None:
        env["max_tenants"] = args.max_tenants
    env.setdefault("max_tenants", family.max_tenants)
    env.setdefault("observation", "full")  # recorded: a run without it is read as "basic"
    if env["max_tenants"] < family.max_tenants:
        where = f"--max-tenants {args.max_tenants}" if args.max_tenants is not None else source
        raise TrainingError(
            f"{where}: scenario {args.scenario!r} has up to {family.max_tenants} tenants; "
            f"expected max_tenants >= {family.max_tenants}"
        )
    n_envs = args.num_envs if args.num_envs is not None else int(hp.pop("n_envs", DEFAULT_N_ENVS))
    hp.pop("n_envs", None)
    file_total = hp.pop("total_timesteps", None)
    if args.timesteps is None and file_total is None:
        raise TrainingError(
            f"hyperparameter file {source!r} has no total_timesteps; add one or pass --timesteps N"
        )
    total = int(args.timesteps if args.timesteps is not None else file_total)
    where = f"hyperparameters for {args.algo} ({source} and --set)"
    check_combination(args.algo, hp, n_envs, env, where)
    if total == 0 and int(hp.get("imitation_episodes", 0)) == 0:
        what = (
            f"--timesteps {args.timesteps}"
            if args.timesteps is not None
            else f"{where}: total_timesteps=0"
        )
        raise TrainingError(
            f"{what} trains nothing without a warm start; expected an integer >= 1, or "
            "imitation_episodes >= 1 (the warm start alone)"
        )
    # whole rollouts only, so a run (and a resumed one) ends exactly at its total
    total = whole_rollouts(args.algo, total, n_envs, hp)
    # 19 evaluations after the one at step 0: a 20-point curve (131,072 steps for the default: section)
    eval_interval = args.eval_interval if args.eval_interval is not None else max(total // 19, 1)
    ck_interval = (
        args.checkpoint_interval if args.checkpoint_interval is not None else max(total // 4, 1)
    )
    cfg = RunConfig(
        algo=args.algo,
        seed=args.seed,
        total_timesteps=total,
        n_envs=n_envs,
        env=env,
        hyperparams=with_policy_layout(hp, env),
        hyperparams_source=source,
        eval_interval=eval_interval,
        eval_episodes=args.eval_episodes,
        checkpoint_interval=ck_interval,
        references=list(REFERENCES),
        created=time.strftime("%Y-%m-%d %H:%M:%S"),
        options=recorded_options(args),
    )
    dry_build(cfg)
    return cfg


def plan_resume(args: argparse.Namespace, explicit: set[str]) -> tuple[RunConfig, Path | None]:
    """The recorded run to continue and its latest checkpoint (``None``: restart from step 0).

    The run keeps the options it was started with (``config.yml``'s
    ``options``); a flag given on the resume command (``explicit``) overrides
    its own option if it is one of :data:`RESUME_OVERRIDES`, and must repeat
    the recorded value if it defines the training. ``args`` is updated to the
    merged options. Everything is checked; nothing is written.
    """
    from agents.training import (
        checkpoint_is_legacy,
        checkpoint_steps,
        checkpoints,
        legacy_refusal,
        read_config,
    )

    run_dir = args.resume
    if not run_dir.is_dir():
        raise TrainingError(f"--resume {str(run_dir)!r}: no such run folder")
    cks = checkpoints(run_dir)
    try:
        cfg = read_config(run_dir)
    except TrainingError as exc:
        if cks:
            raise
        raise TrainingError(
            f"run folder {str(run_dir)!r} has no checkpoint to resume from, and cannot restart from step 0: {exc}"
        ) from None
    ck = cks[-1] if cks else None
    fixed: dict[str, Any] = {
        "algo": cfg.algo,
        "scenario": cfg.env["scenario"],
        "split": cfg.env["split"],
        "reward": cfg.env.get("reward"),
        "weights": cfg.env.get("weights"),
        "action_type": cfg.env.get("action_type"),
        "max_tenants": cfg.env.get("max_tenants"),
        "num_envs": cfg.n_envs,
        "seed": cfg.seed,
        "hyperparams": cfg.options.get("hyperparams"),
        "set": cfg.options.get("set", []),
    }
    for dest in sorted(explicit):
        if dest in ("run_dir", "runs_root"):
            raise TrainingError(
                f"{flag(dest)} cannot be combined with --resume (the run folder is {str(run_dir)!r})"
            )
        if dest in fixed:
            given = getattr(args, dest)
            given = str(given) if isinstance(given, Path) else given
            if given != fixed[dest]:
                raise TrainingError(
                    f"{flag(dest)} {getattr(args, dest)}: this run was started with {fixed[dest]!r}, "
                    "and a resumed run keeps its training settings (start a new run to change them)"
                )
    # args as the run was started, then the overrides given now
    for dest, value in fixed.items():
        if dest == "hyperparams":
            value = None if value is None else Path(value)
        setattr(args, dest, value)
    for dest in RESUME_OVERRIDES:
        if dest not in explicit and dest in cfg.options:
            setattr(args, dest, cfg.options[dest])
    validate_args(args)  # the recorded options too (a hand-edited config.yml)
    if "timesteps" in explicit:
        total = whole_rollouts(cfg.algo, args.timesteps, cfg.n_envs, cfg.hyperparams)
        done = checkpoint_steps(ck) if ck is not None else 0
        if total < done:
            raise TrainingError(
                f"--timesteps {args.timesteps}: this run already stands at {done:,} steps "
                f"({ck.name if ck else ''}); expected at least {done}"
            )
        cfg.total_timesteps = total
    for dest in ("eval_interval", "eval_episodes", "checkpoint_interval"):
        if dest in explicit:
            setattr(cfg, dest, getattr(args, dest))
    cfg.options.update({d: getattr(args, d) for d in RESUME_OVERRIDES if d in explicit})
    if ck is not None and checkpoint_is_legacy(ck) and not args.trust_pickle:
        raise legacy_refusal(ck)
    return cfg, ck


def make_training_env(cfg: RunConfig) -> tuple[Any, Any]:
    """The SB3 adapter under VecMonitor (and VecNormalize on rewards if asked)."""
    from stable_baselines3.common.vec_env import VecNormalize

    from agents.residual import make_training_vec_env

    venv = make_training_vec_env(cfg.n_envs, cfg.env)
    venv.seed(cfg.seed)
    norm = None
    if cfg.hyperparams.get("normalize_reward", False):
        norm = VecNormalize(
            venv, norm_obs=False, norm_reward=True, gamma=cfg.hyperparams.get("gamma", 0.99)
        )
    return venv, norm


def references_scores(cfg: RunConfig, seed: int) -> dict[str, float]:
    from agents.evaluation import compare, mean_score

    scores = {}
    for name in cfg.references:
        recs = compare([name], [cfg.env["scenario"]], cfg.eval_episodes, seed=seed, split="test")
        scores[name] = mean_score(recs)
    return scores


def learned_score(model: Any, cfg: RunConfig, seed: int) -> float:
    from agents.evaluation import LearnedPolicy, mean_score
    from agents.rollout import rollout

    env_kwargs = {k: v for k, v in cfg.env.items() if k not in ("scenario", "split")}
    policy = LearnedPolicy(model, env_kwargs, cfg.algo, "training")
    return mean_score(
        rollout(
            policy,
            cfg.env["scenario"],
            cfg.eval_episodes,
            seed=seed,
            split="test",
            env_kwargs=env_kwargs,
        )
    )


def tensorboard_hparams(model: Any, cfg: RunConfig, references: dict[str, float]) -> None:
    """The run's settings through the hparams plugin, with their real types, at step 0.

    Numbers are numbers and booleans booleans (:func:`agents.tensorboard.hparam_values`);
    the metrics are the ``eval/`` scores and the ``eval_ratio/`` lines. The text
    cards (the complete hyperparameter table with the evaluation settings and the
    command line, the guide) and the Custom Scalars layout are written by the
    :class:`~agents.callbacks.TensorBoardRunCard` callback. A resumed run writes
    nothing here: its first event file has it.
    """
    from stable_baselines3.common.logger import HParam

    from agents import tensorboard as tb

    if model.num_timesteps > 0:
        return
    metrics = {
        tb.eval_tag(cfg.algo): 0.0,
        **{tb.eval_tag(k): v for k, v in references.items()},
        **{t: 0.0 for t in tb.ratio_tags(cfg.algo, "best_ref")[:1]},
        **{t: 0.0 for t in tb.ratio_tags(cfg.algo, "dram-first")[:1]},
    }
    model.logger.record(
        "hparams",
        HParam(tb.hparam_values(cfg), metrics),
        exclude=("stdout", "log", "json", "csv"),
    )


def train(
    args: argparse.Namespace, argv: list[str], guard: InterruptGuard | None = None
) -> Path | None:
    """Check everything, then train (or resume) the run; its folder, or ``None`` if interrupted.

    ``argv`` is the command line with the script name first. ``guard``
    (:class:`InterruptGuard`, given by :func:`main`) turns SIGINT/SIGTERM before
    training starts into a checkpoint.
    """
    from agents import tensorboard as tb
    from agents.callbacks import (
        CheckpointAtRollout,
        EnvMetricsCallback,
        EvalAgainstReferences,
        HeldOutEvaluation,
        LogUpdateAtItsStep,
        StopOnSignal,
        TensorBoardRunCard,
    )
    from agents.training import (
        build_model,
        resume_model,
        run_dir_path,
        save_checkpoint,
        save_final,
        write_config,
    )

    guard = guard or InterruptGuard(enabled=False)
    # every check first: nothing is written before the whole command is known to be valid
    resume_from: Path | None = None
    if args.resume is not None:
        cfg, resume_from = plan_resume(args, explicit_options(argv[1:]))
        run_dir = args.resume
    else:
        cfg = build_config(args)
        scenario = cfg.env["scenario"]
        run_dir = run_dir_path(args.runs_root, scenario, cfg.algo, cfg.seed, args.run_dir)
    guard.arm(run_dir)  # from here SIGINT/SIGTERM leave a checkpoint (or a config to restart from)
    if args.resume is None:
        run_dir.mkdir(parents=True, exist_ok=True)
        write_config(run_dir, cfg, argv)
        log(
            args,
            f"run folder {run_dir}: {cfg.algo} on {cfg.env['scenario']} for {cfg.total_timesteps:,} steps with {cfg.n_envs} instances",
        )

    venv, norm = make_training_env(cfg)
    warm: dict[str, Any] | None = None  # the warm start's summary, if this run does one
    train_env = norm if norm is not None else venv
    if resume_from is not None:
        model, norm = resume_model(resume_from, cfg, venv, norm, trust_pickle=args.trust_pickle)
        train_env = norm if norm is not None else venv
        done = model.num_timesteps
        venv.seed(cfg.seed + done)  # fresh episodes, seeded from where the run stands
        log(args, f"resuming {run_dir} from {resume_from.name}")
    else:
        model = build_model(cfg.algo, cfg.hyperparams, train_env, cfg.seed)
        done = 0
        imitation = int(cfg.hyperparams.get("imitation_episodes", 0))
        if imitation > 0:  # check_combination made sure there are bases to choose between
            from agents.imitation import DAGGER_ROUNDS, warm_start

            log(
                args,
                f"warm start: the best of each base on {imitation} training episodes per family ...",
            )
            t_ws = time.time()
            warm = warm_start(
                model,
                cfg.env,
                imitation,
                seed=IMITATION_SEED + cfg.seed,
                scenarios=cfg.hyperparams.get("imitation_scenarios") or (),
                scenario_episodes=int(cfg.hyperparams.get("imitation_scenario_episodes", 0)),
                rounds=int(cfg.hyperparams.get("imitation_rounds", DAGGER_ROUNDS)),
                plans=bool(cfg.hyperparams.get("imitation_plans", False)),
            )
            warm["wall_s"] = round(time.time() - t_ws, 1)
            (run_dir / "warm_start.json").write_text(json.dumps(warm, indent=2))
            log(args, f"warm start: {warm}")
        if args.resume is not None:
            log(args, f"{run_dir} has no checkpoint yet: starting it from step 0 as recorded")
    if args.resume is not None:
        # the merged options; command.txt gets this command line
        write_config(run_dir, cfg, argv, append=True)
    guard.save = lambda: save_checkpoint(run_dir, model, done, norm, cfg)
    # a resumed run drops what the killed process logged past its checkpoint's step
    # (everything, when it restarts from step 0 for want of a checkpoint)
    purge = done + 1 if resume_from is not None else (0 if args.resume is not None else None)
    model.set_logger(
        tb.make_logger(str(run_dir / "tensorboard"), stdout=not args.quiet, purge_step=purge)
    )

    refs: dict[str, float] = {}
    eval_seed = 10_000 + cfg.seed
    if cfg.eval_interval > 0:
        log(args, f"scoring the reference heuristics on {cfg.eval_episodes} held-out episodes ...")
        refs = references_scores(cfg, eval_seed)
    tensorboard_hparams(model, cfg, refs)
    stopper = StopOnSignal(on_policy=cfg.algo in ON_POLICY)
    nodes, slots = venv.params.node_names, venv.params.n_tenants
    held_out = HeldOutEvaluation(
        cfg.env["scenario"], cfg.env, cfg.algo, cfg.eval_episodes, eval_seed
    )
    # per-episode values on the evaluation seeds, for the paired ratios (scored once)
    ref_episodes = held_out.references(cfg.references) if cfg.eval_interval > 0 else {}
    card = TensorBoardRunCard(
        tb.layout(cfg.algo, cfg.references, nodes, slots, cfg.env["reward"]),
        {
            "guide": tb.guide_markdown(
                cfg.algo,
                refs,
                nodes,
                slots,
                cfg.env["reward"],
                cfg.eval_interval,
                cfg.eval_episodes,
                eval_seed,
                str(cfg.env["scenario"]),
                family=venv.params.family.pool_size > 1,
            ),
            "hyperparameters": tb.hyperparameter_markdown(cfg, argv, eval_seed, refs),
            **({"warm_start": tb.warm_start_markdown(warm)} if warm is not None else {}),
        },
    )
    callbacks = [
        card,
        EnvMetricsCallback(nodes, slots, cfg.env["reward"]),
        # train/ at the step it trained on, written before a checkpoint at that step
        *([LogUpdateAtItsStep()] if cfg.algo in ON_POLICY else []),
        EvalAgainstReferences(held_out, ref_episodes, cfg.eval_interval, cfg.algo),
        CheckpointAtRollout(
            lambda m, steps: save_checkpoint(run_dir, m, steps, norm, cfg), cfg.checkpoint_interval
        ),
        stopper,
    ]
    remaining = cfg.total_timesteps - done
    guard.defer()  # StopOnSignal takes the signals inside learn; a signal before it is noted
    t0 = time.time()
    if (
        remaining > 0 or resume_from is None
    ):  # a fresh run of 0 steps still logs its step-0 evaluation
        model.learn(
            remaining,
            callback=callbacks,
            reset_num_timesteps=False,
            progress_bar=not args.no_progress and not args.quiet,
        )
    wall = time.time() - t0
    if stopper.stopped or guard.signalled:
        steps = stopper.resume_timesteps if stopper.stopped else model.num_timesteps
        ck = save_checkpoint(run_dir, model, steps, norm, cfg)
        guard.release()
        print(
            f"interrupted: checkpoint {ck} at {steps:,} steps; continue with: python train.py --resume {run_dir}",
            flush=True,
        )
        return None  # interrupted: main() exits 0 without the final comparison
    save_checkpoint(run_dir, model, model.num_timesteps, norm, cfg)
    path = save_final(run_dir, model, cfg)
    sps = remaining / wall if wall > 0 and remaining > 0 else float("nan")
    summary = {
        "timesteps": int(model.num_timesteps),
        "wall_s": round(wall, 1),
        "steps_per_s": round(sps, 1),
        "env_steps_per_s": round(venv.env_steps / max(venv.env_seconds, 1e-9), 1),
    }
    (run_dir / "training.json").write_text(json.dumps(summary, indent=2))
    if remaining > 0:
        log(
            args,
            f"trained {model.num_timesteps:,} steps in {wall:.0f} s ({sps:,.0f} steps/s; the env alone {summary['env_steps_per_s']:,.0f} steps/s); model {path}",
        )
    else:
        log(args, f"no steps to train (total_timesteps {cfg.total_timesteps:,}); model {path}")
    guard.release()  # the run is complete on disk: the comparison can be stopped as usual
    return run_dir


def final_comparison(
    args: argparse.Namespace, run_dir: Path, command: list[str] | None = None
) -> dict[str, Any]:
    """The learned policy against the references on the test split; prints the tables.

    The code path of ``evaluate.py`` (:func:`agents.evaluation.run_comparison`),
    writing ``RUN/results``; returns the summary.
    """
    from agents import report
    from agents.evaluation import load_policy, run_comparison
    from agents.training import read_config

    cfg = read_config(run_dir)
    scenario = cfg.env["scenario"]
    summary = run_comparison(
        [load_policy(str(run_dir), label=cfg.algo), *REFERENCES, *UPPER_REFERENCES],
        [scenario],
        args.compare_episodes,
        run_dir / "results",
        seed=20_000 + cfg.seed,
        split="test",
        reference="dram-first",
        plots=False,
        show_progress=not (args.no_progress or args.quiet),
        command=command,
    )
    print(report.markdown_table(summary))
    print()
    print(report.leaderboard_markdown(summary))
    return summary


def one_line(exc: BaseException) -> str:
    """An error message on one line (a multi-line one joined with '; ')."""
    return "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())


def main(argv: list[str] | None = None) -> int:
    """Parse, check everything, train, compare; the exit code (2: bad input, nothing done)."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = parse_args(argv)
    except SystemExit as exc:  # --help (0) or a one-line argparse error (2)
        return exc.code if isinstance(exc.code, int) else 2
    guard = InterruptGuard()
    try:
        run_dir = train(args, ["train.py", *argv], guard)
        if run_dir is not None and args.compare_episodes > 0:
            final_comparison(args, run_dir, ["train.py", *argv])
    except Interrupted:
        guard.report()
        return 0
    except (TrainingError, ValueError) as exc:
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return 2
    finally:
        guard.release()
    return 0


if __name__ == "__main__":
    sys.exit(main())
