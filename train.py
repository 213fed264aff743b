"""Train a stable-baselines3 agent on TierGym and compare it with the kernel heuristics.

With no arguments: PPO on the ``mixed`` family (train split) with a budget that
finishes in about ten minutes on a 2-core machine, then the learned policy
against the heuristic baselines on the test split (the code path of
``evaluate.py``). Watch it with ``tensorboard --logdir runs``.

Examples::

    python train.py
    python train.py --algo sac --scenario kv-store --timesteps 200000
    python train.py --set learning_rate=1e-4 --set n_envs=64
    python train.py --resume runs/mixed__ppo__0__20261130-101500

Ctrl-C or SIGTERM saves a checkpoint and exits; ``--resume RUN`` continues it
with its timestep count, reward-normalisation statistics and random state.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from agents.training import ALGOS, ON_POLICY, RunConfig, TrainingError

# 152 PPO rollouts of 256 x 64 steps: about 10 minutes here, final table included
DEFAULT_TIMESTEPS = 2_490_368
REFERENCES = ("dram-first", "interleave", "weighted-interleave", "numa-tiering", "tpp", "colloid")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
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
        help=f"total environment steps (default: the hyperparameter file's, {DEFAULT_TIMESTEPS} for the default run)",
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
        help="timesteps between evaluations on held-out seeds (default: 1/6 of the budget; 0 turns it off)",
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
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")
    ap.add_argument("--quiet", action="store_true", help="print only errors and the final table")
    return ap.parse_args(argv)


def log(args: argparse.Namespace, msg: str) -> None:
    if not args.quiet:
        print(msg, flush=True)


def build_config(args: argparse.Namespace) -> RunConfig:
    from agents.training import load_hyperparams
    from envs.families import make_family

    if args.algo not in ALGOS:
        raise TrainingError(f"unknown algorithm {args.algo!r}, expected one of {list(ALGOS)}")
    family = make_family(
        args.scenario, pool_size=8
    )  # validates the scenario early, with its own error
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
    env["max_tenants"] = args.max_tenants or family.max_tenants
    if args.action_type == "discrete" and args.algo in ("sac", "td3"):
        raise TrainingError(
            f"{args.algo} needs a continuous (box) action space; use --action-type box"
        )
    file_envs, file_total = hp.pop("n_envs", 16), hp.pop("total_timesteps", DEFAULT_TIMESTEPS)
    n_envs = args.num_envs or int(file_envs)
    total = args.timesteps or int(file_total)
    if args.algo == "ppo" and args.timesteps is None and args.hyperparams is None and not args.set:
        total = DEFAULT_TIMESTEPS
    if args.algo in ON_POLICY:
        # whole rollouts only, so a run (and a resumed one) ends exactly at its total
        chunk = n_envs * int(hp.get("n_steps", 2048 if args.algo != "a2c" else 5))
        total = -(-total // chunk) * chunk
    eval_interval = args.eval_interval if args.eval_interval is not None else max(total // 6, 1)
    ck_interval = (
        args.checkpoint_interval if args.checkpoint_interval is not None else max(total // 4, 1)
    )
    return RunConfig(
        algo=args.algo,
        seed=args.seed,
        total_timesteps=total,
        n_envs=n_envs,
        env=env,
        hyperparams=hp,
        hyperparams_source=source,
        eval_interval=eval_interval,
        eval_episodes=args.eval_episodes,
        checkpoint_interval=ck_interval,
        references=list(REFERENCES),
        created=time.strftime("%Y-%m-%d %H:%M:%S"),
    )


def make_training_env(cfg: RunConfig) -> tuple[Any, Any]:
    """The SB3 adapter under VecMonitor (and VecNormalize on rewards if asked)."""
    from stable_baselines3.common.vec_env import VecNormalize

    from envs.sb3 import make_vec_env

    venv = make_vec_env(cfg.n_envs, **cfg.env)
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
    """Hyperparameters as a Markdown table (text tab) and through the hparams plugin."""
    from stable_baselines3.common.logger import HParam, TensorBoardOutputFormat

    flat: dict[str, bool | str | float | None] = {
        "algo": cfg.algo,
        "seed": cfg.seed,
        "n_envs": cfg.n_envs,
        "total_timesteps": cfg.total_timesteps,
    }
    flat.update({f"env.{k}": str(v) for k, v in cfg.env.items()})
    flat.update(
        {
            k: (v if isinstance(v, int | float | str | bool) else str(v))
            for k, v in cfg.hyperparams.items()
        }
    )
    table = "| key | value |\n|---|---|\n" + "\n".join(f"| {k} | {v} |" for k, v in flat.items())
    for fmt in model.logger.output_formats:
        if isinstance(fmt, TensorBoardOutputFormat):
            fmt.writer.add_text("hyperparameters", table, 0)
            fmt.writer.flush()
    metrics = {f"eval/{cfg.algo}": 0.0, **{f"eval/{k}": v for k, v in references.items()}}
    model.logger.record("hparams", HParam(flat, metrics), exclude=("stdout", "log", "json", "csv"))


def train(args: argparse.Namespace, argv: list[str]) -> Path | None:
    from stable_baselines3.common.logger import configure

    from agents.callbacks import (
        CheckpointAtRollout,
        EnvMetricsCallback,
        EvalAgainstReferences,
        StopOnSignal,
    )
    from agents.training import (
        algo_class,
        latest_checkpoint,
        new_run_dir,
        read_config,
        restore_rng,
        save_checkpoint,
        save_final,
        write_config,
    )

    resume_from = None
    if args.resume is not None:
        run_dir = args.resume
        if not run_dir.is_dir():
            raise TrainingError(f"--resume {str(run_dir)!r}: no such run folder")
        resume_from = latest_checkpoint(run_dir)
        cfg = read_config(run_dir)
        log(args, f"resuming {run_dir} from {resume_from.name}")
    else:
        cfg = build_config(args)
        run_dir = new_run_dir(args.runs_root, cfg.env["scenario"], cfg.algo, cfg.seed, args.run_dir)
        write_config(run_dir, cfg, argv)
        log(
            args,
            f"run folder {run_dir}: {cfg.algo} on {cfg.env['scenario']} for {cfg.total_timesteps:,} steps with {cfg.n_envs} instances",
        )

    cls = algo_class(cfg.algo)
    venv, norm = make_training_env(cfg)
    train_env = norm if norm is not None else venv
    hp = {k: v for k, v in cfg.hyperparams.items() if k not in ("normalize_reward",)}
    policy = hp.pop("policy", "MlpPolicy")
    if resume_from is not None:
        if norm is not None and (resume_from / "vecnormalize.pkl").is_file():
            from stable_baselines3.common.vec_env import VecNormalize

            norm = VecNormalize.load(str(resume_from / "vecnormalize.pkl"), venv)
            train_env = norm
        model = cls.load(resume_from / "model.zip", env=train_env, device="cpu")
        if (resume_from / "replay_buffer.pkl").is_file():
            model.load_replay_buffer(resume_from / "replay_buffer.pkl")
        restore_rng(resume_from, model)
        done = model.num_timesteps
        venv.seed(cfg.seed + done)  # fresh episodes, seeded from where the run stands
    else:
        model = cls(policy, train_env, seed=cfg.seed, device="cpu", verbose=0, **hp)
        done = 0
    model.set_logger(
        configure(
            str(run_dir / "tensorboard"), ["tensorboard"] + ([] if args.quiet else ["stdout"])
        )
    )

    refs: dict[str, float] = {}
    eval_seed = 10_000 + cfg.seed
    if cfg.eval_interval > 0:
        log(args, f"scoring the reference heuristics on {cfg.eval_episodes} held-out episodes ...")
        refs = references_scores(cfg, eval_seed)
    tensorboard_hparams(model, cfg, refs)
    stopper = StopOnSignal(on_policy=cfg.algo in ON_POLICY)
    callbacks = [
        EnvMetricsCallback(venv.params.node_names, venv.params.n_tenants),
        EvalAgainstReferences(
            lambda m: learned_score(m, cfg, eval_seed), refs, cfg.eval_interval, cfg.algo
        ),
        CheckpointAtRollout(
            lambda m, steps: save_checkpoint(run_dir, m, steps, norm), cfg.checkpoint_interval
        ),
        stopper,
    ]
    remaining = cfg.total_timesteps - done
    t0 = time.time()
    if remaining > 0:
        model.learn(
            remaining,
            callback=callbacks,
            reset_num_timesteps=False,
            progress_bar=not args.no_progress and not args.quiet,
        )
    wall = time.time() - t0
    if stopper.stopped:
        ck = save_checkpoint(run_dir, model, stopper.resume_timesteps, norm)
        print(
            f"interrupted: checkpoint {ck} at {stopper.resume_timesteps:,} steps; continue with: python train.py --resume {run_dir}",
            flush=True,
        )
        return None  # interrupted: main() exits 0 without the final comparison
    save_checkpoint(run_dir, model, model.num_timesteps, norm)
    path = save_final(run_dir, model, cfg)
    sps = remaining / wall if wall > 0 else float("nan")
    summary = {
        "timesteps": int(model.num_timesteps),
        "wall_s": round(wall, 1),
        "steps_per_s": round(sps, 1),
        "env_steps_per_s": round(venv.env_steps / max(venv.env_seconds, 1e-9), 1),
    }
    (run_dir / "training.json").write_text(json.dumps(summary, indent=2))
    log(
        args,
        f"trained {model.num_timesteps:,} steps in {wall:.0f} s ({sps:,.0f} steps/s; the env alone {summary['env_steps_per_s']:,.0f} steps/s); model {path}",
    )
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
    scenario = (args.scenario if args.resume is None else None) or cfg.env["scenario"]
    summary = run_comparison(
        [load_policy(str(run_dir), label=cfg.algo), *REFERENCES],
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


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    try:
        run_dir = train(args, ["train.py", *argv])
        if run_dir is not None and args.compare_episodes > 0:
            final_comparison(args, run_dir, ["train.py", *argv])
    except (TrainingError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
