"""How well a policy fitted to the planner's plans reproduces them (the plan labels, agents.imitation).

Labels ``--episodes`` training episodes of each of the default run's families with
plans (``imitation_plans`` with ``residual_bases: [dram-first]`` and
``residual_scale: 2.0``), fits a fresh policy of the default's shape to them
(no DAgger), and prints, on the first family's fitted episodes:

- the fitted policy forced onto the plan's branch (dram-first's corner, its own
  residual), against the plans' scores and against dram-first;
- the plans with the fitted policy's weights, or its rate, in place of theirs;
- with the box codec, how often a tenant slot the plan leaves local-first gets a node
  turned on; with the share codec, the share entries' mean error;
- the fitted policy, as it is and forced, on the mixed test split (64 episodes).

    python scripts/plan_fit.py --episodes 256 --epochs 100
    python scripts/plan_fit.py --residual-codec share --policy TenantPolicy --width 64

The labels are scored and planned on ``log-geomean`` (``geomean_perf``, the
score this script reports); the warm start's other values are the default
run's (:data:`DEFAULT_RUN`), with ``--episodes``, ``--epochs``, ``--batch-size``
and ``--off-margin`` in their place. A run takes about 4 minutes on 2 cores with
``--episodes 256``. Figures vary a little from run to run (torch's threads).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents import imitation as im
from agents.evaluation import LearnedPolicy
from agents.imitation import ImitationSettings
from agents.residual import RESIDUAL_CODECS, agent_spaces, make_training_vec_env
from agents.rollout import make_params, rollout
from agents.training import SPECIAL_KEYS, build_model, load_hyperparams, with_policy_layout

#: The default run's warm start (agents/hyperparams/ppo.yml, ``mixed``); the episodes, epochs,
#: batch size and off margin come from the command line, and no DAgger round runs.
DEFAULT_RUN: dict[str, Any] = {
    "episodes": 256,
    "plans": True,
    "scenarios": [],
    "scenario_episodes": 0,
    "rounds": 0,
    "epochs": 40,
    "batch_size": 1024,
    "learning_rate": 1e-3,
    "stride": 2,
    "seed": 20_000_000,
    "tie_tolerance": 1e-3,
    "corner_margin": 2.0,
    "off_margin": 2.0,
    "on_margin": 0.005,
    "plan_search": {"segments": 1, "population": 16, "iterations": 4},
}
OBJECTIVE = "log-geomean"


def _scores(policy: Any, scenario: str, n: int, seed: int, split: str, kw: Any) -> np.ndarray:
    recs = sorted(rollout(policy, scenario, n, seed, split, kw), key=lambda r: r["seed"])
    return np.array([r["metrics"]["geomean_perf"] for r in recs])


def _gmean(x: np.ndarray) -> float:
    return float(np.exp(np.mean(np.log(x))))


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--episodes", type=int, default=256, help="planned episodes per family")
    ap.add_argument("--epochs", type=int, default=100)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--residual-weight", type=float, default=4.0, help="the residual's loss weight")
    ap.add_argument(
        "--off-margin",
        type=float,
        default=DEFAULT_RUN["off_margin"],
        help="ImitationSettings.off_margin",
    )
    ap.add_argument(
        "--residual-codec",
        default=RESIDUAL_CODECS[0],
        choices=list(RESIDUAL_CODECS),
        help="env.residual_codec of the plan branch (agents.residual)",
    )
    ap.add_argument(
        "--policy",
        default=None,
        choices=["MlpPolicy", "TenantPolicy"],
        help="the policy network (default: the mixed section's)",
    )
    ap.add_argument("--width", type=int, default=None, help="net_arch [w, w] (default: the file's)")
    return ap


def _label_and_fit(
    args: argparse.Namespace, settings: ImitationSettings
) -> tuple[dict[str, Any], list[im.Labelled], Any]:
    """``(env settings, each family's labels, the fitted model)``."""
    hp, _ = load_hyperparams("ppo", "mixed", None, [])
    env = {
        **hp["env"],
        "scenario": "mixed",
        "residual_bases": ["dram-first"],
        "residual_scale": 2.0,
        "residual_codec": args.residual_codec,
    }
    families = ["mixed", *env["train_families"]]
    seed, N = settings.seed, settings.episodes
    got = [
        im.label_episodes(
            env, f, N, seed + 100_000 * n, settings, objective=OBJECTIVE, plans=settings.plans
        )
        for n, f in enumerate(families)
    ]
    if args.policy is not None:
        hp["policy"] = args.policy
    if args.width is not None:
        hp["policy_kwargs"] = {**hp.get("policy_kwargs", {}), "net_arch": [args.width] * 2}
    model = build_model(
        "ppo",
        with_policy_layout({k: v for k, v in hp.items() if k not in SPECIAL_KEYS}, env),
        make_training_vec_env(6, env),
        0,
    )
    parts = [[(g.obs, g.targets, g.fit_residual * args.residual_weight)] for g in got]
    mixing = len(env["base_policy"]) - 1
    im.fit_targets(
        model.policy,
        parts,
        mixing,
        settings.epochs,
        settings.batch_size,
        settings.learning_rate,
        0,
    )
    return env, got, model


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    settings = ImitationSettings(
        **{
            **DEFAULT_RUN,
            "episodes": args.episodes,
            "epochs": args.epochs,
            "batch_size": args.batch_size,
            "off_margin": args.off_margin,
        }
    )
    env, got, model = _label_and_fit(args, settings)
    names = list(env["base_policy"])
    K, j = len(names), names.index("dram-first")
    kw = {k: v for k, v in env.items() if k != "scenario"}
    seed, N = settings.seed, settings.episodes
    g = got[0]
    params = make_params(None, "mixed", "train", {**kw, "split": "train"})
    spaces = agent_spaces(params, names, env["pad_nodes"], args.residual_codec)
    plans = g.episodes.plans
    assert plans is not None

    class Forced:
        observation_space, action_space = model.observation_space, model.action_space

        def predict(
            self, obs: Any, state: Any = None, episode_start: Any = None, deterministic=True
        ):
            a, _ = model.predict(obs, deterministic=True)
            a = np.array(a, dtype=np.float32)
            a[:, -(K - 1) :] = -1.0
            a[:, -(K - 1) + j - 1] = 1.0
            return a, state

    class Swap(im.LabelFollower):
        part = slice(0)

        def predict(
            self, obs: Any, state: Any = None, episode_start: Any = None, deterministic=True
        ):
            a, _ = super().predict(obs, state)
            p, _ = model.predict(obs, deterministic=True)
            a[:, self.part] = p[:, self.part]
            return a, state

    plan_score, df_score = g.scores[:, K], g.scores[:, j]
    planned = g.labels == K
    forced = _scores(LearnedPolicy(Forced(), kw, "f", "t"), "mixed", N, seed, "train", kw)
    print(f"fitted episodes (mixed, {N}; the plan is the label of {planned.mean():.1%}):")
    print(f"  plans / dram-first                      {_gmean(plan_score / df_score):.4f}")
    print(
        f"  forced policy / plans (planned)         {_gmean(forced[planned] / plan_score[planned]):.4f}"
    )
    print(f"  forced policy / dram-first              {_gmean(forced / df_score):.4f}")
    T, M = params.n_tenants, env["pad_nodes"]
    n_w = T * M if args.residual_codec == "box" else T  # the action's weight entries
    for what, part in (("weights", slice(0, n_w)), ("rate", slice(n_w, n_w + 1))):
        swap = Swap(*spaces, np.full(N, K), K, plans)
        swap.part = part
        s = _scores(LearnedPolicy(swap, kw, "s", "t"), "mixed", N, seed, "train", kw)
        print(f"  plans with the policy's {what:8s} / plans {_gmean(s / plan_score):.4f}")
    act, _ = model.predict(g.obs, deterministic=True)
    rows = planned[np.arange(len(g.obs)) % N]
    if args.residual_codec == "box":
        target_on = g.targets[rows, : T * M].reshape(-1, T, M) >= 0.05
        got_on = np.asarray(act)[rows, : T * M].reshape(-1, T, M) >= 0.05
        local = ~target_on.any(axis=2)
        print(
            f"  local-first slots with a node on        {(got_on.any(axis=2) & local).sum() / local.sum():.2%}"
        )
    else:
        err = np.abs(np.clip(np.asarray(act)[rows, :T], -1, 1) - g.targets[rows, :T])
        print(f"  mean |share entry error| (planned rows) {err.mean():.4f}")
    df = _scores("dram-first", "mixed", 64, 20000, "test", None)
    asis = _scores(LearnedPolicy(model, kw, "m", "t"), "mixed", 64, 20000, "test", kw)
    test_forced = _scores(LearnedPolicy(Forced(), kw, "f", "t"), "mixed", 64, 20000, "test", kw)
    print("mixed test split (64 episodes, seed 20000), ratio to dram-first:")
    print(
        f"  fitted policy {_gmean(asis / df):.4f}, forced onto the plan branch {_gmean(test_forced / df):.4f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
