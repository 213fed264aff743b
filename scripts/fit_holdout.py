"""The imitation fit's settings judged on episodes it did not fit: a held-out check on the
training split, before any evaluation.

Reads the labels a run's imitation phase saved (``RUN/imitation/job-*.npz``), holds out the
last ``--holdout`` share of each job's episodes, and fits, for each ``EPOCHS:LR`` of
``--fits``, a fresh policy of the run's recipe (its initial weights, the run's seed) to the
rest, as the run's first fit does (:func:`agents.imitation.fit_targets`: its batch size, its
shuffling seed, no DAgger round). It prints the fit's loss over its last pass (what the run
records) and, with the fitted weights, the loss the fit minimises on the fitted episodes and on
the held-out ones, split into the mixing entries (which base) and the residual's (the plan's
shares). A fit whose fitted loss falls while its held-out loss rises has learned the
episodes, not what tells them apart.

    python scripts/fit_holdout.py runs/mixed__ppo-finetune__0__20261207-114412 \\
        --fits 40:0.001,12:0.002 --holdout 0.2

With ``--holdout 0`` and the recipe's own ``EPOCHS:LR`` the last pass's loss is the run's
first fit's (``warm_start.json``'s first loss, up to torch's threads). Exit code 2 on bad input
(no run folder, no labels in it, a malformed ``--fits``).
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents import persist
from agents.config import TrainingError
from agents.imitation import CheckpointError, fit_targets, labelled_jobs, targets_loss
from agents.imitation.dataset import Chunk, Labelled
from agents.models import build_model
from agents.plan import make_plan
from agents.runs import read_config
from agents.view import base_names
from envs.errors import fail


def split_episodes(got: Labelled, holdout: float) -> tuple[Chunk, Chunk]:
    """A job's rows ``(obs, targets, fit_residual)`` of its first episodes and of the last
    ``holdout`` share of them (row ``r`` belongs to episode ``r % episodes``)."""
    n = len(got.labels)
    keep = np.arange(len(got.obs)) % n < n - round(holdout * n)
    rows = (got.obs, got.targets, got.fit_residual)
    fitted = (rows[0][keep], rows[1][keep], rows[2][keep])
    held = (rows[0][~keep], rows[1][~keep], rows[2][~keep])
    return fitted, held


def _fits(text: str) -> list[tuple[int, float]]:
    out = []
    for part in text.split(","):
        try:
            epochs, lr = part.split(":")
            item = (int(epochs), float(lr))
        except ValueError:
            fail(f"--fits {part!r}: expected EPOCHS:LR, e.g. 40:0.001")
        if item[0] < 1 or not 0.0 < item[1] <= 1.0:
            fail(f"--fits {part!r}: expected EPOCHS >= 1 and 0 < LR <= 1")
        out.append(item)
    return out


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run", type=Path, help="a run folder whose imitation phase has labelled")
    ap.add_argument("--fits", default=None, help="EPOCHS:LR,... (default: the recipe's)")
    ap.add_argument("--holdout", type=float, default=0.2, help="share of episodes held out")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if not 0.0 <= args.holdout < 1.0:
        fail(f"--holdout {args.holdout}: expected 0 <= share < 1")
    given = _fits(args.fits) if args.fits else None

    try:
        cfg = read_config(args.run)
        jobs = labelled_jobs(args.run / "imitation")
    except (TrainingError, CheckpointError, OSError) as exc:
        fail(f"{args.run}: {exc}")
    im = cfg.recipe.imitation
    if im is None:
        fail(f"{args.run}: its recipe has no imitation phase")
    fits = given or [(im.epochs, im.learning_rate)]
    plan = make_plan(cfg)
    env = persist.SpacesOnlyEnv(plan.cfg.n_envs, plan.obs_space, plan.act_space)
    start = build_model(plan.cfg.recipe, env, cfg.seed).policy
    mixing = len(base_names(cfg.env.get("base_policy"))) - 1
    pairs = [split_episodes(got, args.holdout) for _, got in jobs]
    fitted: list[list[Chunk]] = [[a] for a, _ in pairs]
    held: list[list[Chunk]] = [[b] for _, b in pairs]
    episodes = len(jobs[0][1].labels)
    print(
        f"{args.run}: {len(jobs)} jobs, {episodes} episodes each, "
        f"{args.holdout:.0%} held out; batch {im.batch_size}"
    )
    print(
        "| epochs | lr | last pass | fitted: total | mixing | residual "
        "| held out: total | mixing | residual |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for epochs, lr in fits:
        policy: Any = copy.deepcopy(start)
        last = fit_targets(policy, fitted, mixing, epochs, im.batch_size, lr, im.seed + cfg.seed)
        a = targets_loss(policy, fitted, mixing)
        b = targets_loss(policy, held, mixing) if args.holdout > 0 else (float("nan"),) * 3
        cells = " | ".join(f"{x:.4f}" for x in (*a, *b))
        print(f"| {epochs} | {lr:g} | {last:.5f} | {cells} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
