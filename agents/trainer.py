"""A training run, end to end: the recipe's phases (imitation, then RL), checkpoints, TensorBoard.

:func:`run` is what ``train.py`` calls with checked options: it starts a run (or resumes
one), trains it and compares the result with the heuristics on the test split.
Everything a user chooses by while the run trains (the held-out evaluations in
TensorBoard, the checkpoint they keep) is scored on the validation split
(:data:`envs.families.SELECT_SPLIT`); only the closing comparison reads the test split
(:data:`envs.families.REPORT_SPLIT`). docs/training.md, "Splits: train, val, test".

- **imitation** (recipes with ``imitation:``): :func:`agents.imitation.warm_start` fits the
  policy on labelled training episodes; its labelled data and fits are kept in
  ``RUN/imitation`` as they finish, so an interrupted phase resumes there.
- **RL** (recipes with ``rl:``): stable-baselines3's ``learn`` on the native vector env
  with the callbacks of :mod:`agents.callbacks`: environment metrics, held-out evaluations
  against the reference heuristics (validation split), checkpoints at rollout boundaries,
  a clean stop on SIGINT/SIGTERM. A recipe without it still gets the held-out evaluation at step 0.

The policy is named by its recipe in the run folder, in TensorBoard and in the tables.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from agents import callbacks as cb
from agents import persist, report
from agents import tensorboard as tb
from agents.config import (
    ON_POLICY,
    RESUME_OVERRIDES,
    RunConfig,
    RunOptions,
    TrainingError,
    trained_names,
)
from agents.config.load import whole_rollouts
from agents.evaluation import leaderboard_text, load_policy, run_comparison
from agents.finetune import FineTuneGuards, fix_log_std
from agents.imitation import warm_start
from agents.imitation.checkpoint import labelled_states
from agents.interrupts import InterruptGuard
from agents.models import build_model
from agents.plan import make_plan, plan_run
from agents.runs import (
    checkpoint_steps,
    checkpoints,
    read_config,
    resume_model,
    run_dir_path,
    save_checkpoint,
    save_final,
    write_config,
)
from agents.view import environment_config, make_training_vec_env
from baselines import catalogue
from envs.core import EnvParams, make_params
from envs.families import REPORT_SPLIT

__all__ = ["UPPER_REFERENCES", "final_comparison", "plan_resume", "run", "train"]

#: Added to the final comparison only (not scored during training): the catalogue's closing
#: upper bounds, so ``RUN/results`` has the headroom share
#: ``(policy - dram-first) / (planner - dram-first)``.
UPPER_REFERENCES = tuple(catalogue.names(closing=True))
#: First seeds of the held-out evaluations (plus the run's seed; validation split) and of the
#: final comparison (test split).
EVAL_SEED = 10_000
COMPARE_SEED = 20_000


class _Out:
    """What a run prints (nothing but errors and the final table with ``quiet``)."""

    def __init__(self, quiet: bool, no_progress: bool) -> None:
        self.quiet = quiet
        self.progress = not (no_progress or quiet)

    def __call__(self, msg: str) -> None:
        if not self.quiet:
            print(msg, flush=True)


# ============================================================================ start or resume


def plan_resume(opts: RunOptions, given: set[str]) -> tuple[RunConfig, Path | None]:
    """The recorded run to continue and its latest checkpoint (``None``: from step 0).

    The run keeps the options it was started with; a flag given again (``given``) overrides
    its own option if it is one of :data:`agents.config.RESUME_OVERRIDES`, and must repeat
    the recorded value otherwise. Everything is checked; nothing is written.
    """
    run_dir = opts.resume
    assert run_dir is not None
    if not run_dir.is_dir():
        raise TrainingError(f"--resume {str(run_dir)!r}: no such run folder")
    cks = checkpoints(run_dir)
    try:
        cfg = read_config(run_dir)
    except TrainingError as exc:
        if cks:
            raise
        raise TrainingError(
            f"run folder {str(run_dir)!r} has no checkpoint to resume from, and cannot restart "
            f"from step 0: {exc}"
        ) from None
    recorded = cfg.options
    for key in sorted(given - {"resume"}):
        if key in ("run_dir", "runs_root"):
            raise TrainingError(
                f"--{key.replace('_', '-')} cannot be combined with --resume "
                f"(the run folder is {str(run_dir)!r})"
            )
        if key in RESUME_OVERRIDES:
            continue
        now = getattr(opts, key)
        now = str(now) if isinstance(now, Path) else now
        if now != recorded.get(key):
            raise TrainingError(
                f"--{key.replace('_', '-')} {getattr(opts, key)}: this run was started with "
                f"{recorded.get(key)!r}, and a resumed run keeps its training settings "
                "(start a new run to change them)"
            )
    ck = cks[-1] if cks else None
    if ck is not None and cfg.recipe.rl is None:
        raise TrainingError(
            f"--resume {str(run_dir)!r}: the run is complete (recipe {cfg.recipe.name!r} has no "
            "RL phase to continue); compare it again with: python evaluate.py --policies "
            f"{run_dir}"
        )
    if ck is not None:  # never a pickle archive: refused before anything is written
        try:
            persist.require_safe(ck / "model.zip")
        except persist.ModelFileError as exc:
            raise TrainingError(str(exc)) from None
    update: dict[str, Any] = {k: getattr(opts, k) for k in given & set(RESUME_OVERRIDES)}
    if "timesteps" in update and cfg.recipe.rl is not None:
        total = whole_rollouts(cfg.recipe, update["timesteps"])
        done = checkpoint_steps(ck) if ck is not None else 0
        if total < done:
            raise TrainingError(
                f"--timesteps {update['timesteps']}: this run already stands at {done:,} steps "
                f"({ck.name if ck else ''}); expected at least {done}"
            )
        rl = cfg.recipe.rl.model_copy(update={"total_timesteps": total})
        cfg.recipe = cfg.recipe.model_copy(update={"rl": rl})
    for key in ("eval_interval", "eval_episodes", "checkpoint_interval"):
        if key in update:
            setattr(cfg, key, update[key])
    cfg.options = {
        **recorded,
        **{k: (str(v) if isinstance(v, Path) else v) for k, v in update.items()},
    }
    return cfg, ck


# ============================================================================ the phases


def _imitation(model: Any, cfg: RunConfig, run_dir: Path, out: _Out) -> dict[str, Any]:
    """The recipe's imitation phase on ``model``; its summary (also ``warm_start.json``)."""

    im = cfg.recipe.imitation
    assert im is not None
    out(
        f"imitation: labelling {im.episodes} training episodes per family"
        + (f" and {im.scenario_episodes} per scenario" if im.scenario_episodes else "")
        + f", then {im.rounds} DAgger rounds ..."
    )
    t0 = time.time()
    warm = warm_start(
        model,
        # the labels and the DAgger rollouts score each policy alone: no paired twins
        {k: v for k, v in cfg.env.items() if k != "reward_baseline"},
        im,
        seed=cfg.seed,
        objective=cfg.task.reward,
        checkpoint_dir=run_dir / "imitation",
        progress=out.progress,
        workers=len(os.sched_getaffinity(0)),
    )
    warm["wall_s"] = round(time.time() - t0, 1)
    (run_dir / "warm_start.json").write_text(json.dumps(warm, indent=2))
    out(f"imitation: done in {warm['wall_s']:.0f} s; losses {warm['loss']}")
    return warm


def _rl_env(cfg: RunConfig) -> dict[str, Any]:
    """The env settings of the RL phase: the run's, on ``rl.train_families`` if set."""
    rl = cfg.recipe.rl
    if rl is None or rl.train_families is None:
        return cfg.env
    return {**cfg.env, "train_families": rl.train_families}


def _training_env(cfg: RunConfig) -> tuple[Any, Any]:
    """The RL environment (the SB3 adapter in the agent's view, monitored; on the scenario
    and ``rl.train_families`` if the recipe names them, else ``env.train_families``, with
    ``rl.scenario_share`` of the instances on the scenario) and its VecNormalize wrapper on
    rewards if the recipe asks for it."""
    from stable_baselines3.common.vec_env import VecNormalize

    rl = cfg.recipe.rl
    venv = make_training_vec_env(cfg.n_envs, _rl_env(cfg), rl.scenario_share if rl else None)
    venv.seed(cfg.seed)
    norm = None
    if rl is not None and rl.normalize_reward:
        gamma = cfg.recipe.hyperparams.gamma or 0.99
        norm = VecNormalize(venv, norm_obs=False, norm_reward=True, gamma=gamma)
    return venv, norm


def _anchor_states(cfg: RunConfig, run_dir: Path) -> Any:
    """The imitation phase's states of the families the RL phase does not draw, for
    ``rl.finetune.anchor_states: imitation`` (None otherwise: each rollout's)."""
    ft = cfg.finetune
    if ft is None or ft.anchor_states != "imitation":
        return None
    return labelled_states(run_dir / "imitation", exclude=trained_names(_rl_env(cfg)))


def _callbacks(
    cfg: RunConfig,
    params: EnvParams,
    run_dir: Path,
    norm: Any,
    warm: dict[str, Any] | None,
    argv: list[str],
) -> tuple[list[Any], cb.StopOnSignal]:
    """The run's callbacks: the TensorBoard card, env metrics, evaluations, checkpoints, stop
    (``params``: the scenario's, which the tags and the layout name nodes and slots by)."""
    label, eval_seed = cfg.recipe.name, EVAL_SEED + cfg.seed
    nodes, slots = params.node_names, params.n_tenants
    held_out = cb.HeldOutEvaluation(cfg.task.scenario, cfg.env, label, cfg.eval_episodes, eval_seed)
    refs = held_out.references(cfg.references) if cfg.eval_interval > 0 else {}
    means = {k: float(v.mean()) for k, v in refs.items()}
    texts = {
        "guide": tb.guide_markdown(
            label, means, nodes, slots, cfg.task.reward, cfg.eval_interval, cfg.eval_episodes,
            eval_seed, cfg.task.scenario, family=params.family.pool_size > 1,
        ),
        "hyperparameters": tb.hyperparameter_markdown(cfg, argv, eval_seed, means),
        **({"warm_start": tb.warm_start_markdown(warm)} if warm is not None else {}),
    }  # fmt: skip
    stopper = cb.StopOnSignal(on_policy=cfg.algo in ON_POLICY)
    ft = cfg.finetune
    guards = []
    if ft is not None:  # before the evaluation: it scores the policy after the anchor steps
        guards.append(
            FineTuneGuards(
                ft.critic_warmup,
                ft.anchor_coef,
                ft.anchor_decay,
                ft.anchor_steps,
                ft.anchor_batch,
                learning_rate=ft.anchor_learning_rate,
                anchor_states=_anchor_states(cfg, run_dir),
            )
        )
    return [
        *guards,
        cb.TensorBoardRunCard(tb.layout(label, nodes, slots, cfg.task.reward), texts),
        cb.EnvMetricsCallback(nodes, cfg.task.reward),
        # train/ at the step it trained on, written before a checkpoint at that step
        *([cb.LogUpdateAtItsStep()] if cfg.algo in ON_POLICY else []),
        cb.EvalAgainstReferences(
            held_out, refs, cfg.eval_interval, label, start_file=run_dir / "eval_start.json"
        ),
        cb.CheckpointAtRollout(
            lambda m, steps: save_checkpoint(run_dir, m, steps, norm, cfg), cfg.checkpoint_interval
        ),
        stopper,
    ], stopper


def _hparams(model: Any, cfg: RunConfig) -> None:
    """The run's settings through TensorBoard's hparams plugin, at step 0 (a new run only)."""
    from stable_baselines3.common.logger import HParam

    label = cfg.recipe.name
    metrics = {tb.EVAL: 0.0}  # the learned policy's (each reference is a run of its own)
    for versus in ("best_ref", "dram-first"):
        metrics[tb.ratio_tags(label, versus)[0]] = 0.0
    model.logger.record(
        "hparams", HParam(tb.hparam_values(cfg), metrics), exclude=("stdout", "log", "json", "csv")
    )


def _at_step_zero(model: Any, callbacks: list[Any]) -> None:
    """Run what the callbacks do at the start of training (the card, the evaluation at
    step 0) for a recipe without an RL phase."""
    from stable_baselines3.common.callbacks import CallbackList

    chain = CallbackList(callbacks)
    chain.init_callback(model)
    chain.on_training_start(locals(), globals())
    chain.on_training_end()


# ============================================================================ the run


def train(
    cfg: RunConfig,
    run_dir: Path,
    argv: list[str],
    out: _Out,
    guard: InterruptGuard,
    resume_from: Path | None = None,
    spaces: tuple[Any, Any] | None = None,
) -> Path | None:
    """Train the run in ``run_dir`` (already holding its ``config.yml``); its folder, or
    ``None`` if it was interrupted (a checkpoint, or the imitation phase's parts, kept).
    ``spaces``: the agent's (:class:`agents.plan.RunPlan`'s), for a recipe without RL."""
    venv = norm = None
    if cfg.recipe.rl is not None:
        venv, norm = _training_env(cfg)
        params = venv.params
    else:  # the imitation phase alone: no training env, only its spaces and parameters
        params = make_params(environment_config(cfg.env))
    env = norm if norm is not None else venv
    warm = None
    if resume_from is not None:
        model = resume_model(resume_from, cfg, venv, norm)
        done = model.num_timesteps
        assert venv is not None
        venv.seed(cfg.seed + done)  # fresh episodes, seeded from where the run stands
        out(f"resuming {run_dir} from {resume_from.name}")
    else:
        if env is None:  # the imitation phase alone: a stand-in with the agent's spaces
            assert spaces is not None, "a new run without RL needs its plan's spaces"
            env = persist.SpacesOnlyEnv(1, *spaces)
        model = build_model(cfg.recipe, env, cfg.seed)
        done = 0
        if cfg.recipe.imitation is not None:
            warm = _imitation(model, cfg, run_dir, out)
    ft = cfg.finetune
    if ft is not None and ft.log_std is not None:
        fix_log_std(model.policy, ft.log_std)
    guard.save = lambda: save_checkpoint(run_dir, model, done, norm, cfg)
    # a resumed run drops what the killed process logged past its checkpoint's step
    purge = done + 1 if resume_from is not None else None
    model.set_logger(
        tb.make_logger(str(run_dir / "tensorboard"), stdout=not out.quiet, purge_step=purge)
    )
    if done == 0:
        _hparams(model, cfg)
    if cfg.eval_interval > 0:
        out(f"scoring the reference heuristics on {cfg.eval_episodes} held-out episodes ...")
    callbacks, stopper = _callbacks(cfg, params, run_dir, norm, warm, argv)
    guard.defer()  # StopOnSignal takes the signals inside learn; a signal before it is noted
    wall = 0.0
    if cfg.recipe.rl is None:
        _at_step_zero(model, callbacks)
    else:
        t0 = time.time()
        model.learn(
            cfg.total_timesteps - done,
            callback=callbacks,
            reset_num_timesteps=False,
            progress_bar=out.progress,
        )
        wall = time.time() - t0
    if stopper.stopped or guard.signalled:
        steps = stopper.resume_timesteps if stopper.stopped else model.num_timesteps
        ck = save_checkpoint(run_dir, model, steps, norm, cfg)
        guard.release()
        print(
            f"interrupted: checkpoint {ck} at {steps:,} steps; continue with: "
            f"python train.py --resume {run_dir}",
            flush=True,
        )
        return None
    save_checkpoint(run_dir, model, model.num_timesteps, norm, cfg)
    path = save_final(run_dir, model, cfg)
    _summary(run_dir, model, venv, cfg.total_timesteps - done, wall, out, path)
    guard.release()  # the run is complete on disk: the comparison can be stopped as usual
    return run_dir


def _summary(
    run_dir: Path, model: Any, venv: Any, steps: int, wall: float, out: _Out, path: Path
) -> None:
    sps = steps / wall if wall > 0 and steps > 0 else float("nan")
    env_sps = venv.env_steps / max(venv.env_seconds, 1e-9) if venv is not None else float("nan")
    summary = {
        "timesteps": int(model.num_timesteps),
        "wall_s": round(wall, 1),
        "steps_per_s": round(sps, 1),
        "env_steps_per_s": round(env_sps, 1),
    }
    (run_dir / "training.json").write_text(json.dumps(summary, indent=2))
    if steps > 0:
        out(
            f"trained {model.num_timesteps:,} steps in {wall:.0f} s ({sps:,.0f} steps/s; the env "
            f"alone {env_sps:,.0f} steps/s); model {path}"
        )
    else:
        out(f"model {path}")


def final_comparison(
    run_dir: Path, episodes: int, progress: bool, command: list[str] | None = None
) -> dict[str, Any]:
    """The learned policy against the heuristics on the test split (the code path of
    ``evaluate.py``), written to ``RUN/results``; prints the tables, returns the summary."""

    cfg = read_config(run_dir)
    summary = run_comparison(
        [load_policy(str(run_dir), label=cfg.recipe.name), *cfg.references, *UPPER_REFERENCES],
        [cfg.task.scenario],
        episodes,
        run_dir / "results",
        seed=COMPARE_SEED + cfg.seed,
        split=REPORT_SPLIT,
        reference="dram-first",
        plots=False,
        show_progress=progress,
        command=command,
    )
    print(report.markdown_table(summary))
    print()
    print(leaderboard_text(summary), end="")
    return summary


def run(opts: RunOptions, given: set[str], argv: list[str], guard: InterruptGuard) -> Path | None:
    """Check everything, then start (or resume) the run, train it and compare it; its folder
    (``None``: interrupted). ``given``: the options the command line gave; ``argv``: the
    command line with the script first."""
    out = _Out(opts.quiet, opts.no_progress)
    resume_from = None
    spaces = None
    if opts.resume is not None:
        cfg, resume_from = plan_resume(opts, given)
        if resume_from is None:  # from step 0, as a new run of the recorded configuration
            plan = make_plan(cfg)
            cfg, spaces = plan.cfg, (plan.obs_space, plan.act_space)
        run_dir = opts.resume
        out = _Out(cfg.options["quiet"], cfg.options["no_progress"])  # as recorded, or given
    else:
        plan = plan_run(opts)
        cfg, spaces = plan.cfg, (plan.obs_space, plan.act_space)
        run_dir = run_dir_path(
            opts.runs_root, opts.scenario, cfg.recipe.name, opts.seed, opts.run_dir
        )
    guard.arm(run_dir)  # from here SIGINT/SIGTERM keep what is done
    if opts.resume is None:
        run_dir.mkdir(parents=True, exist_ok=True)
        write_config(run_dir, cfg, argv)
        out(
            f"run folder {run_dir}: recipe {cfg.recipe.name} ({' then '.join(cfg.recipe.trainers)}) "
            f"on {cfg.task.scenario}"
            + (
                f" for {cfg.total_timesteps:,} RL steps with {cfg.n_envs} instances"
                if cfg.recipe.rl
                else ""
            )
        )
    else:
        write_config(run_dir, cfg, argv, append=True)
        if resume_from is None:
            out(f"{run_dir} has no checkpoint yet: continuing it from where it stopped")
    done = train(cfg, run_dir, argv, out, guard, resume_from, spaces)
    episodes = int(cfg.options.get("compare_episodes", 64))
    if done is not None and episodes > 0:
        final_comparison(run_dir, episodes, out.progress, argv)
    return done
