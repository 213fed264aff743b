"""The warm start over several bases (agents.imitation): labels and the fitted policy."""

from __future__ import annotations

import numpy as np
from stable_baselines3 import PPO

from agents.imitation import CORNER_MARGIN, label_episodes, warm_start
from agents.residual import make_training_vec_env
from agents.rollout import rollout
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
    """Each episode's label is the base with the highest native geomean_perf on it (the
    corner of the mixing entries is that heuristic exactly); the recorded observations
    follow the label, with the label's corner as the target."""
    n, seed = 12, 700
    obs, targets, labels = label_episodes(ENV, "mixed", n, seed, stride=10)
    native = np.array(
        [
            [
                r["metrics"]["geomean_perf"]
                for r in sorted(rollout(b, "mixed", n, seed, "train"), key=lambda r: r["seed"])
            ]
            for b in BASES
        ]
    ).T
    assert labels.tolist() == np.argmax(native, axis=1).tolist()
    assert len(set(labels.tolist())) > 1  # the best base differs between episodes
    assert obs.shape[0] == targets.shape[0] and obs.shape[0] % n == 0
    mix = targets[:n, -2:]  # the first recorded step of each episode
    for lab, m in zip(labels, mix, strict=True):
        want = [-CORNER_MARGIN, -CORNER_MARGIN]  # past the clip of the mixing entries
        if lab > 0:
            want[lab - 1] = CORNER_MARGIN
        assert m.tolist() == want
    assert not targets[:, :-2].any()  # residual 0: the base as it is


def test_warm_start_fits_the_labels() -> None:
    """After the warm start the deterministic policy picks each training episode's label
    on most of the recorded steps (it has learned the choice, not a constant)."""
    venv = make_training_vec_env(4, ENV)
    model = PPO(
        "MlpPolicy", venv, n_steps=8, batch_size=32, seed=0, policy_kwargs={"net_arch": [64, 64]}
    )
    summary = warm_start(model, ENV, 12, seed=700, epochs=60, batch_size=256)
    assert summary["families"] == ["mixed"] and summary["samples"] > 0
    obs, targets, _ = label_episodes(ENV, "mixed", 12, 700)
    act, _ = model.predict(obs, deterministic=True)
    picked = np.where(act[:, -2:].max(axis=1) > 0, 1 + np.argmax(act[:, -2:], axis=1), 0)
    want = np.where(targets[:, -2:].max(axis=1) > 0, 1 + np.argmax(targets[:, -2:], axis=1), 0)
    assert len(set(want.tolist())) > 1
    assert np.mean(picked == want) > 0.9
