"""Warm start of a policy over several bases: imitate the best base per episode.

With ``base_policy`` listing several heuristics (:mod:`agents.residual`), the
agent's mixing entries decide which heuristic's decision it follows. Which one
is best depends on the machine and the tenant mix (``best-heuristic-per-episode``
shows how much that choice is worth), and reinforcement learning from the
heuristic-at-zero start rarely tries another base long enough to learn it.
:func:`warm_start` gives the choice a supervised start before training:

1. every base is run on ``episodes`` training-split episodes of each training
   family (and, if given, of single scenarios, so that the choice covers
   machines and mixes the families do not) through the agent's own interface (the mixing entry at its corner,
   which is that heuristic exactly), and each episode is labelled with the base
   that scored the highest ``geomean_perf`` (ties: the first);
2. the episodes are run again following their label, and the agent's
   observations are recorded (every ``stride``-th step);
3. the policy's action mean is fitted to the label's corner (residual 0, the
   label's mixing entry +2 and the others -2: past the clip, :data:`CORNER_MARGIN`;
   bases tied with the best within :data:`TIE_TOLERANCE` count as best too) by
   mean squared error, each family and scenario weighing the same.

The labels come from the training split only (seeds from ``seed``), never from
the episodes a run is evaluated on. Reinforcement learning then starts from a
policy that already picks a base per machine and mix, and refines it with the
residual.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from agents.residual import agent_spaces, base_names

__all__ = ["CORNER_MARGIN", "TIE_TOLERANCE", "label_episodes", "warm_start"]


#: The fit's mixing targets are +-CORNER_MARGIN: a blend of two bases can be worse than
#: either (interleave weights and tiering modes do not average well), so the fitted
#: choice should sit well past the clip of the mixing entries (0 and 1).
CORNER_MARGIN = 2.0
#: Bases within this relative distance of an episode's best score all count as best. Two
#: scenarios that look the same to the agent (the kernel's fallback lists are not observed:
#: fallback-hotspot and -prefix) then average to the base that is best on both, instead
#: of to whichever of a tie the label happened to name.
TIE_TOLERANCE = 1e-3


class _Corner:
    """A stand-in model whose action for instance ``i`` is the corner of base ``labels[i]``:
    residual 0, mixing entry ``labels[i] - 1`` at 1 and the others at -1."""

    def __init__(self, obs_space: Any, act_space: Any, labels: NDArray[np.int64], k: int) -> None:
        self.observation_space, self.action_space = obs_space, act_space
        self.actions = np.zeros((len(labels), act_space.shape[0]), dtype=np.float32)
        self.actions[:, -(k - 1) :] = np.where(
            labels[:, None] == np.arange(1, k)[None, :], 1.0, -1.0
        )
        self.stride = 0  # record every stride-th step's observations (0: none)
        self.seen: list[NDArray[np.float32]] = []
        self.steps = 0

    def predict(self, obs: Any, state: Any = None, episode_start: Any = None, deterministic=True):
        if self.stride and self.steps % self.stride == 0:
            self.seen.append(np.asarray(obs, dtype=np.float32).copy())
        self.steps += 1
        return self.actions[: len(obs)].copy(), state


def _targets(near: NDArray[np.bool_], size: int) -> NDArray[np.float32]:
    """The fit's targets (episodes, size) from the near-best bases (episodes, k).

    Residual 0; a mixing entry is +CORNER_MARGIN for a near-best base, past the clip
    so that a small error of the fit still picks one base whole, 0 (indifferent) for
    one when the first base is near-best too, and -CORNER_MARGIN for the others.
    """
    out = np.zeros((len(near), size), dtype=np.float32)
    out[:, size - (near.shape[1] - 1) :] = np.where(
        near[:, 1:], np.where(near[:, :1], 0.0, CORNER_MARGIN), -CORNER_MARGIN
    )
    return out


def _env_for(env: Mapping[str, Any]) -> dict[str, Any]:
    """A run's env settings as rollout's ``env_kwargs`` on the training split."""
    return {**{k: v for k, v in env.items() if k != "scenario"}, "split": "train"}


def label_episodes(
    env: Mapping[str, Any], family: str, episodes: int, seed: int, stride: int = 2
) -> tuple[NDArray[np.float32], NDArray[np.float32], NDArray[np.int64], NDArray[np.float64]]:
    """Observations, corner targets, labels and scores of ``episodes`` episodes of ``family``.

    Returns ``(obs (S, obs_dim), targets (S, act_dim), labels (episodes,), scores
    (episodes, bases))`` with ``S`` the recorded steps of every episode, each
    following its label's base, and ``scores`` each base's ``geomean_perf``.
    """
    from agents.evaluation import LearnedPolicy
    from agents.rollout import make_params, rollout

    names = base_names(env.get("base_policy"))
    k = len(names)
    if k < 2:
        raise ValueError("imitation: needs base_policy with at least two heuristics")
    kw = _env_for(env)
    params = make_params(None, family, "train", kw)
    spaces = agent_spaces(params, names, env.get("pad_nodes"))
    scores = np.empty((episodes, k))
    for j in range(k):
        model = _Corner(*spaces, np.full(episodes, j, dtype=np.int64), k)
        recs = rollout(
            LearnedPolicy(model, kw, "corner", "imitation"), family, episodes, seed, "train", kw
        )
        recs.sort(key=lambda r: r["seed"])
        scores[:, j] = [r["metrics"]["geomean_perf"] for r in recs]
    labels = np.argmax(scores, axis=1).astype(np.int64)
    near = scores >= scores.max(axis=1, keepdims=True) * (1.0 - TIE_TOLERANCE)
    model = _Corner(*spaces, labels, k)
    model.stride = stride
    rollout(LearnedPolicy(model, kw, "follower", "imitation"), family, episodes, seed, "train", kw)
    obs = np.concatenate(model.seen)
    targets = np.tile(_targets(near, model.actions.shape[1]), (len(model.seen), 1))
    return obs, targets, labels, scores


def warm_start(
    model: Any,
    env: Mapping[str, Any],
    episodes: int,
    seed: int,
    scenarios: Sequence[str] = (),
    scenario_episodes: int = 0,
    epochs: int = 40,
    batch_size: int = 1024,
    learning_rate: float = 1e-3,
) -> dict[str, Any]:
    """Fit ``model``'s action mean to the best base of each training episode (see the module).

    The episodes are ``episodes`` of each training family (``scenario`` and
    ``train_families``) and ``scenario_episodes`` of each of ``scenarios``
    (training split: other seeds than any evaluation's). Returns a summary: the
    episodes, the share of each label overall and per scenario, the final loss.
    """
    import torch

    families = [
        env["scenario"],
        *[f for f in (env.get("train_families") or []) if f != env["scenario"]],
    ]
    jobs = [(f, episodes) for f in families]
    if scenario_episodes > 0:
        jobs += [(sc, scenario_episodes) for sc in scenarios if sc not in families]
    names = base_names(env.get("base_policy"))
    obs_parts, tgt_parts, counts = [], [], np.zeros(len(names))
    per: dict[str, list[float]] = {}
    for n, (fam, count) in enumerate(jobs):
        obs, tgt, labels, _ = label_episodes(env, fam, count, seed + 100_000 * n)
        obs_parts.append(obs)
        tgt_parts.append(tgt)
        share = np.bincount(labels, minlength=len(names))
        counts += share
        per[fam] = (share / share.sum()).round(3).tolist()
    x = torch.as_tensor(np.concatenate(obs_parts), device=model.device)
    y = torch.as_tensor(np.concatenate(tgt_parts), device=model.device)
    # every family and scenario weighs the same in the fit, whatever its sample count
    w = torch.as_tensor(
        np.concatenate([np.full(len(o), 1.0 / len(o), np.float32) for o in obs_parts]),
        device=model.device,
    )
    del obs_parts, tgt_parts
    policy = model.policy
    opt = torch.optim.Adam(policy.parameters(), lr=learning_rate)
    gen = torch.Generator().manual_seed(seed)
    loss_value = float("nan")
    policy.set_training_mode(True)
    for _ in range(epochs):
        perm = torch.randperm(len(x), generator=gen)
        for i in range(0, len(x), batch_size):
            b = perm[i : i + batch_size]
            mean = policy.get_distribution(x[b]).distribution.mean
            loss = torch.sum(w[b] * torch.mean((mean - y[b]) ** 2, dim=1)) / torch.sum(w[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
            loss_value = float(loss.detach())
    policy.set_training_mode(False)
    return {
        "bases": names,
        "episodes_per_family": episodes,
        "families": families,
        "scenario_episodes": scenario_episodes if len(jobs) > len(families) else 0,
        "scenarios": [j[0] for j in jobs[len(families) :]],
        "samples": len(x),
        "label_share": (counts / counts.sum()).round(3).tolist(),
        "label_share_per_scenario": per,
        "loss": round(loss_value, 5),
    }
