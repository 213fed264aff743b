"""The warm start over several bases (agents.imitation): labels and the fitted policy."""

from __future__ import annotations

import numpy as np
from stable_baselines3 import PPO

from agents.imitation import (
    CORNER_MARGIN,
    TIE_TOLERANCE,
    label_episodes,
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


def test_labels_are_the_best_base_of_each_episode() -> None:
    """Each episode's label is the base with the highest geomean_perf on it (run at its
    corner of the mixing entries, which is that heuristic exactly: test_residual); the recorded observations
    follow the label; the targets are its corner past the clip, with bases tied with the
    best (TIE_TOLERANCE) counted as best too."""
    n, seed = 12, 700
    obs, targets, labels, scores = label_episodes(ENV, "mixed", n, seed, stride=10)
    assert labels.tolist() == np.argmax(scores, axis=1).tolist()
    assert len(set(labels.tolist())) > 1  # the best base differs between episodes
    assert obs.shape[0] == targets.shape[0] and obs.shape[0] % n == 0
    near = scores >= scores.max(axis=1, keepdims=True) * (1.0 - TIE_TOLERANCE)
    want = np.where(near[:, 1:], np.where(near[:, :1], 0.0, CORNER_MARGIN), -CORNER_MARGIN)
    assert targets[:n, -2:].tolist() == want.tolist()  # the first recorded step of each
    assert not targets[:, :-2].any()  # residual 0: the base as it is


def _picked(act: np.ndarray) -> np.ndarray:
    """The base a mixing action follows whole (0: the first; the entries' corners)."""
    return np.where(act[:, -2:].max(axis=1) > 0, 1 + np.argmax(act[:, -2:], axis=1), 0)


def test_warm_start_fits_the_labels_on_the_policys_own_states() -> None:
    """After the warm start (with its DAgger rounds) the deterministic policy picks a best
    base of each training episode on most steps of the states it reaches itself, and its
    residual is exactly 0, so the base it picks runs as that heuristic does."""
    venv = make_training_vec_env(4, ENV)
    model = PPO(
        "MlpPolicy", venv, n_steps=8, batch_size=32, seed=0, policy_kwargs={"net_arch": [64, 64]}
    )
    summary = warm_start(model, ENV, 12, seed=700, rounds=1, epochs=60, batch_size=256)
    assert summary["families"] == ["mixed"] and summary["dagger_rounds"] == 1
    # the round adds the policy's own run of the same episodes: as many recorded steps again
    assert summary["samples"][1] == 2 * summary["samples"][0] > 0
    _, _, labels, scores = label_episodes(ENV, "mixed", 12, 700)
    near = scores >= scores.max(axis=1, keepdims=True) * (1.0 - TIE_TOLERANCE)
    obs = policy_observations(model, ENV, "mixed", 12, 700)
    act, _ = model.predict(obs, deterministic=True)
    episode = np.arange(len(obs)) % 12  # the recorded steps are whole batches of episodes
    assert len(set(labels.tolist())) > 1
    assert np.mean(near[episode, _picked(act)]) > 0.9
    assert not act[:, :-2].any()  # the residual: exactly 0
    assert np.abs(act[:, -2:]).max() > 0.5  # the mixing entries: fitted, not zeroed
