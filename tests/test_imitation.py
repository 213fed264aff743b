"""The warm start over several bases (agents.imitation): labels and the fitted policy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from pydantic import ValidationError
from stable_baselines3 import PPO

from agents.imitation import (
    CheckpointError,
    ImitationSettings,
    label_episodes,
    plan_actions,
    policy_observations,
    warm_start,
)
from agents.residual import make_training_vec_env
from envs.spaces import TIERING_MODES

BASES = ["colloid", "tpp", "dram-first"]
ENV = {
    "scenario": "mixed",
    "split": "train",
    "tiering_modes": list(TIERING_MODES),
    "base_policy": BASES,
    "max_tenants": 6,
    "observation": "full",
    "pad_nodes": 6,
}
#: Every value the warm start reads, small and fast (a test changes what it exercises).
SETTINGS: dict[str, Any] = {
    "episodes": 12,
    "plans": False,
    "scenarios": [],
    "scenario_episodes": 0,
    "rounds": 1,
    "epochs": 60,
    "batch_size": 256,
    "learning_rate": 1e-3,
    "stride": 2,
    "seed": 700,
    "tie_tolerance": 1e-3,
    "corner_margin": 2.0,
    "off_margin": 2.0,
    "on_margin": 0.005,
    "plan_search": {"segments": 1, "population": 16, "iterations": 4},
}
LOG = "log-geomean"


@pytest.fixture
def settings() -> ImitationSettings:
    return ImitationSettings(**SETTINGS)


def _model(env: dict[str, Any], width: int = 64) -> PPO:
    venv = make_training_vec_env(4, env)
    kw = {"net_arch": [width, width]}
    return PPO("MlpPolicy", venv, n_steps=8, batch_size=32, seed=0, policy_kwargs=kw)


def test_labels_are_the_best_base_of_each_episode(settings: ImitationSettings) -> None:
    """Each episode's label is the base with the highest geomean_perf on it (run at its
    corner of the mixing entries, which is that heuristic exactly: test_residual); the recorded observations
    follow the label; the targets are its corner past the clip, with bases tied with the
    best (tie_tolerance) counted as best too."""
    n, seed = 12, 700
    got = label_episodes(ENV, "mixed", n, seed, settings.updated(stride=10), objective=LOG)
    obs, targets, labels, scores = got.obs, got.targets, got.labels, got.scores
    assert labels.tolist() == np.argmax(scores, axis=1).tolist()
    assert len(set(labels.tolist())) > 1  # the best base differs between episodes
    assert obs.shape[0] == targets.shape[0] and obs.shape[0] % n == 0
    near = scores >= scores.max(axis=1, keepdims=True) * (1.0 - settings.tie_tolerance)
    m = settings.corner_margin
    want = np.where(near[:, 1:], np.where(near[:, :1], 0.0, m), -m)
    assert targets[:n, -2:].tolist() == want.tolist()  # the first recorded step of each
    assert not targets[:, :-2].any()  # residual 0: the base as it is
    assert not got.fit_residual.any()  # ... and not fitted: the residual rows stay zero


def _picked(act: np.ndarray) -> np.ndarray:
    """The base a mixing action follows whole (0: the first; the entries' corners)."""
    return np.where(act[:, -2:].max(axis=1) > 0, 1 + np.argmax(act[:, -2:], axis=1), 0)


def test_warm_start_fits_the_labels_on_the_policys_own_states(
    settings: ImitationSettings,
) -> None:
    """After the warm start (with its DAgger rounds) the deterministic policy picks a best
    base of each training episode on most steps of the states it reaches itself, and its
    residual is exactly 0, so the base it picks runs as that heuristic does."""
    model = _model(ENV)
    # the labelling seeds are settings.seed + the run's seed: 700
    summary = warm_start(model, ENV, settings.updated(seed=690), seed=10, objective=LOG)
    assert summary["families"] == ["mixed"] and summary["dagger_rounds"] == 1
    assert summary["objective"] == LOG and summary["resumed"] == {"jobs": 0, "fits": 0}
    # the round adds the policy's own run of the same episodes: as many recorded steps again
    assert summary["samples"][1] == 2 * summary["samples"][0] > 0
    got = label_episodes(ENV, "mixed", 12, 700, settings, objective=LOG)
    labels, scores = got.labels, got.scores
    near = scores >= scores.max(axis=1, keepdims=True) * (1.0 - settings.tie_tolerance)
    obs = policy_observations(model, ENV, "mixed", 12, 700, settings.stride)
    act, _ = model.predict(obs, deterministic=True)
    episode = np.arange(len(obs)) % 12  # the recorded steps are whole batches of episodes
    assert len(set(labels.tolist())) > 1
    assert np.mean(near[episode, _picked(act)]) > 0.9
    assert not act[:, :-2].any()  # the residual: exactly 0
    assert np.abs(act[:, -2:]).max() > 0.5  # the mixing entries: fitted, not zeroed


PLANNED = {**ENV, "residual_bases": ["dram-first"], "residual_scale": 2.0, "mixing": "hard"}


def test_a_plan_runs_through_the_agent_interface_as_the_planner_scored_it(
    settings: ImitationSettings,
) -> None:
    """The planner's plan of an episode, written as the residual over dram-first (the first
    of residual_bases) at dram-first's corner, scores through the agent's interface exactly
    what the planner's replay scored; it is the episode's label where it beats every base
    (by more than a tie), with dram-first's corner as the mixing target; the residual is
    fitted to the plan on every episode, whatever its label: the plan's entries, those that
    are off past the clip."""
    n, seed = 12, 700
    plan, planned_score, _ = plan_actions(PLANNED, "mixed", n, seed, settings, objective=LOG)
    box, off = plan.box, plan.off
    assert (plan.base, plan.scale) == (2, 2.0)  # dram-first, residual_scale
    s = settings.updated(stride=10)
    got = label_episodes(PLANNED, "mixed", n, seed, s, objective=LOG, plans=True)
    assert np.allclose(got.scores[:, 3], planned_score, rtol=1e-9, atol=0)
    assert (got.scores[:, 3] >= got.scores[:, 2] * (1 - 1e-9)).all()  # dram-first is a seed
    planned = got.scores[:, 3] > got.scores[:, :3].max(axis=1) * (1.0 + s.tie_tolerance)
    assert 0 < planned.sum() < n  # the plan wins some episodes, a base others
    assert (got.labels == 3).tolist() == planned.tolist()
    first = got.targets[:n]  # the first recorded step of each episode
    m = s.corner_margin
    assert first[planned, -2:].tolist() == [[-m, m]] * planned.sum()
    assert got.fit_residual.all()
    # dram-first's action is -1 everywhere but the mode entry: the residual is (plan + 1) / 2,
    # and -off_margin / 2 (clipped to -1) where the plan switches an entry off
    res = first[:, :-2]
    want = np.maximum(np.where(off, -s.off_margin, box + 1.0) / 2.0, -1.0)
    assert np.allclose(res[:, :-1], want[:, :-1], atol=1e-6)
    assert (np.abs(res) <= 1.0).all() and (res[:, :-1] > 0).any()
    assert not res[:, -1].any()  # the plan keeps dram-first's tiering mode


def test_warm_start_with_plans_beats_every_base_on_its_episodes(
    settings: ImitationSettings,
) -> None:
    """Fitted to the plans as well (imitation_plans), the policy's own decisions on its
    training episodes score above every single base there and above the best base of
    each episode taken with hindsight: it learned placements no base makes."""
    from agents.evaluation import LearnedPolicy
    from agents.rollout import rollout

    n, seed = 16, 700
    model = _model(PLANNED)
    s = settings.updated(episodes=n, seed=seed, epochs=150, plans=True)
    summary = warm_start(model, PLANNED, s, seed=0, objective=LOG)
    assert summary["bases"][-1] == "plan" and summary["label_share"][-1] > 0
    got = label_episodes(
        PLANNED, "mixed", n, seed, s.updated(stride=10), objective=LOG, plans=True
    )
    kw = {k: v for k, v in PLANNED.items() if k != "scenario"}
    recs = rollout(LearnedPolicy(model, kw, "fitted", "t"), "mixed", n, seed, "train", kw)
    fitted = np.array([r["metrics"]["geomean_perf"] for r in sorted(recs, key=lambda r: r["seed"])])
    best_base = got.scores[:, :3].max(axis=1)
    assert np.log(fitted).mean() > np.log(best_base).mean()


def test_a_share_plan_runs_through_the_agent_interface_as_the_planner_scored_it(
    settings: ImitationSettings,
) -> None:
    """With ``residual_codec: share`` the plan is one DRAM share per tenant over dram-first
    (local-first: 1.25); through the agent's interface it scores exactly what the planner's
    replay scored, and its targets are the shares' steps (0 for slots the episode does
    not use)."""
    n, seed = 12, 800
    env = {**PLANNED, "residual_codec": "share"}
    plan, planned_score, _ = plan_actions(env, "mixed", n, seed, settings, objective=LOG)
    assert plan.shares is not None and plan.shares.span == 1.25
    s = settings.updated(stride=10)
    got = label_episodes(env, "mixed", n, seed, s, objective=LOG, plans=True)
    assert np.allclose(got.scores[:, 3], planned_score, rtol=1e-9, atol=0)
    T = plan.shares.share.shape[1]
    first = got.targets[:n]
    want = np.where(plan.shares.used, (plan.shares.share - 1.25) / 1.25, 0.0)
    assert np.allclose(first[:, :T], want, atol=1e-6)
    assert (want < 0).any() and (want == 0).any()


def test_unplanned_jobs_hold_the_residual_where_a_listed_base_is_best(
    settings: ImitationSettings,
) -> None:
    """In a run with plans, a job without plans (a shipped scenario) fits the residual to 0
    on the episodes where a base it adjusts is near-best, so that base runs as it is there
    (``cxl-spill``: ``dram-first`` is the best base); without ``hold_listed`` the residual
    is not fitted at all."""
    env = {**PLANNED, "residual_codec": "share", "scenario": "cxl-spill"}
    s = settings.updated(stride=10)
    held = label_episodes(env, "cxl-spill", 2, 900, s, objective=LOG, hold_listed=True)
    assert (held.labels == 2).all()  # dram-first
    assert held.fit_residual.all() and not held.targets[:, :-2].any()
    free = label_episodes(env, "cxl-spill", 2, 900, s, objective=LOG)
    assert not free.fit_residual.any()
