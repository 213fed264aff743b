"""How well a policy fitted to the planner's plans reproduces them (the plan labels, agents.imitation).

Labels ``--episodes`` training episodes of each of the imitation recipe's families with
plans, fits a fresh policy of the recipe's shape to them (no DAgger), and prints, on the
first family's fitted episodes:

- the fitted policy forced onto the plan's branch (dram-first's corner, its own
  residual), against the plans' scores and against dram-first;
- the plans with the fitted policy's weights, or its rate, in place of theirs;
- with the box codec, how often a tenant slot the plan leaves local-first gets a node
  turned on; with the share codec, the share entries' mean error;
- the fitted policy, as it is and forced, on the mixed test split (64 episodes).

    python scripts/plan_fit.py --episodes 256 --epochs 100
    python scripts/plan_fit.py --residual-codec share --policy TenantPolicy --width 64

The labels are scored and planned on ``log-geomean`` (``geomean_perf``, the
score this script reports); the imitation phase's other values are the recipe's
(``agents/recipes/imitation.yml``), with ``--episodes``, ``--epochs``, ``--batch-size``
and ``--off-margin`` in their place. Figures vary a little from run to run (torch's threads).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents import imitation as im
from agents.config.load import load_recipe
from agents.evaluation import LearnedPolicy
from agents.imitation import ImitationSettings
from agents.models import build_model
from agents.plan import with_policy_layout
from agents.rollout import make_params, rollout
from agents.view import RESIDUAL_CODECS, agent_spaces, make_training_vec_env

#: The imitation recipe's phase, with the episodes, epochs, batch size and off margin from the
#: command line, on the families only (no scenario jobs), without DAgger, on other seeds.
RECIPE = "imitation"
SEED = 20_000_000
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
        default=None,
        help="imitation.off_margin (default: the recipe's)",
    )
    ap.add_argument(
        "--residual-codec",
        default=RESIDUAL_CODECS[0],
        choices=list(RESIDUAL_CODECS),
        help="env.residual_codec of the plan branch (agents.view)",
    )
    ap.add_argument(
        "--policy",
        default=None,
        choices=["MlpPolicy", "TenantPolicy"],
        help="the policy network (default: the recipe's)",
    )
    ap.add_argument(
        "--width", type=int, default=None, help="net_arch [w, w] (default: the recipe's)"
    )
    return ap


def _label_and_fit(
    args: argparse.Namespace, settings: ImitationSettings
) -> tuple[dict[str, Any], list[im.Labelled], Any]:
    """``(env settings, each family's labels, the fitted model)``."""
    sets = [f"env.residual_codec={args.residual_codec}"]
    if args.policy is not None:
        sets.append(f"policy={args.policy}")
    if args.width is not None:
        sets.append(f"policy_kwargs.net_arch=[{args.width}, {args.width}]")
    recipe, _ = load_recipe(RECIPE, sets)
    env = {**recipe.env.given(), "scenario": "mixed", "split": "train", "max_tenants": 4}
    families = ["mixed", *env["train_families"]]
    seed, N = settings.seed, settings.episodes
    got = [
        im.label_episodes(
            env, f, N, seed + 100_000 * n, settings, objective=OBJECTIVE, plans=settings.plans
        )
        for n, f in enumerate(families)
    ]
    model = build_model(with_policy_layout(recipe, env), make_training_vec_env(6, env), 0)
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
    phase = load_recipe(RECIPE)[0].imitation
    assert phase is not None
    settings: ImitationSettings = phase.updated(
        episodes=args.episodes,
        epochs=args.epochs,
        batch_size=args.batch_size,
        off_margin=phase.off_margin if args.off_margin is None else args.off_margin,
        scenarios=[],
        scenario_episodes=0,
        rounds=0,
        seed=SEED,
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
