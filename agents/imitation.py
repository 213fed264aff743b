"""Warm start of a policy over several bases: imitate the best base per episode.

With ``base_policy`` listing several heuristics (:mod:`agents.residual`), the
agent's mixing entries decide which heuristic's decision it follows. Which one
is best depends on the machine and the tenant mix (``best-heuristic-per-episode``
shows how much that choice is worth), and reinforcement learning from the
heuristic-at-zero start rarely tries another base long enough to learn it.
:func:`warm_start` gives the choice a supervised start before training:

1. every base is run on ``episodes`` training-split episodes of each training
   family (and, if given, of single scenarios, so that the choice covers
   machines and mixes the families do not) through the agent's own interface
   (the mixing entry at its corner, which is that heuristic exactly), and each
   episode is labelled with the base that scored the highest ``geomean_perf``
   (bases tied with the best within :data:`TIE_TOLERANCE` count as best too);
2. the episodes are run again following their label, and the agent's
   observations are recorded (every ``stride``-th step);
3. the policy's mixing entries are fitted to the label's corner (the label's
   entry +2 and the others -2: past the clip, :data:`CORNER_MARGIN`) by mean
   squared error, each family and scenario weighing the same; the residual's
   rows of the action layer are held at zero, so the policy's mean residual is
   exactly 0 and a base it picks runs as that heuristic does;
4. DAgger (Ross et al., 2011): ``rounds`` times, the fitted policy itself runs
   the same episodes, the observations it reaches are added with their
   episode's targets, and the fit continues on the aggregate. Step 2 only shows
   the policy the states a correct choice leads to; a choice the fit gets wrong
   at the first step leads to states it has never seen (the classic covariate
   shift of behaviour cloning), and these rounds label exactly those.

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

__all__ = [
    "CORNER_MARGIN",
    "DAGGER_ROUNDS",
    "TIE_TOLERANCE",
    "label_episodes",
    "policy_observations",
    "warm_start",
]


#: The fit's mixing targets are +-CORNER_MARGIN: a blend of two bases can be worse than
#: either (interleave weights and tiering modes do not average well), so the fitted
#: choice should sit well past the clip of the mixing entries (0 and 1).
CORNER_MARGIN = 2.0
#: Bases within this relative distance of an episode's best score all count as best. Two
#: scenarios that look the same to the agent (the kernel's fallback lists are not observed:
#: fallback-hotspot and -prefix) then average to the base that is best on both, instead
#: of to whichever of a tie the label happened to name.
TIE_TOLERANCE = 1e-3
#: DAgger rounds after the first fit (:func:`warm_start`).
DAGGER_ROUNDS = 3


class _Recording:
    """A stand-in model that records every ``stride``-th step's observations (0: none)."""

    def __init__(self, obs_space: Any, act_space: Any, stride: int = 0) -> None:
        self.observation_space, self.action_space = obs_space, act_space
        self.stride = stride
        self.seen: list[NDArray[np.float32]] = []
        self.steps = 0

    def _record(self, obs: Any) -> None:
        if self.stride and self.steps % self.stride == 0:
            self.seen.append(np.asarray(obs, dtype=np.float32).copy())
        self.steps += 1


class _Corner(_Recording):
    """Instance ``i`` acts at the corner of base ``labels[i]``: residual 0, mixing entry
    ``labels[i] - 1`` at 1 and the others at -1."""

    def __init__(self, obs_space: Any, act_space: Any, labels: NDArray[np.int64], k: int) -> None:
        super().__init__(obs_space, act_space)
        self.actions = np.zeros((len(labels), act_space.shape[0]), dtype=np.float32)
        self.actions[:, -(k - 1) :] = np.where(
            labels[:, None] == np.arange(1, k)[None, :], 1.0, -1.0
        )

    def predict(self, obs: Any, state: Any = None, episode_start: Any = None, deterministic=True):
        self._record(obs)
        return self.actions[: len(obs)].copy(), state


class _Follower(_Recording):
    """A trained model's deterministic actions, its observations recorded (DAgger)."""

    def __init__(self, model: Any, stride: int) -> None:
        super().__init__(model.observation_space, model.action_space, stride)
        self.model = model

    def predict(self, obs: Any, state: Any = None, episode_start: Any = None, deterministic=True):
        self._record(obs)
        return self.model.predict(obs, state=state, episode_start=episode_start, deterministic=True)


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
    The recorded steps are whole batches of the episodes in seed order, so row
    ``r`` belongs to episode ``r % episodes``.
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


def policy_observations(
    model: Any, env: Mapping[str, Any], family: str, episodes: int, seed: int, stride: int = 2
) -> NDArray[np.float32]:
    """The observations ``model`` (deterministic) reaches on the episodes :func:`label_episodes`
    ran (same family, count and seed; every ``stride``-th step, whole batches in seed order)."""
    from agents.evaluation import LearnedPolicy
    from agents.rollout import rollout

    kw = _env_for(env)
    follower = _Follower(model, stride)
    rollout(LearnedPolicy(follower, kw, "dagger", "imitation"), family, episodes, seed, "train", kw)
    return np.concatenate(follower.seen)


def _fit(
    policy: Any,
    parts: Sequence[Sequence[tuple[NDArray[np.float32], NDArray[np.float32]]]],
    mixing: int,
    epochs: int,
    batch_size: int,
    learning_rate: float,
    seed: int,
) -> float:
    """Fit ``policy``'s mixing entries (the last ``mixing`` of its action mean) to the
    targets of ``parts`` (per family or scenario, its ``(obs, targets)`` chunks; each weighing
    the same) by mean squared error; the residual's rows of the action layer are zero
    and stay so. Returns the last batch's loss."""
    import torch

    device = policy.device
    chunks = [(o, t, sum(len(c) for c, _ in job)) for job in parts for o, t in job]
    x = torch.as_tensor(np.concatenate([o for o, _, _ in chunks]), device=device)
    y = torch.as_tensor(np.concatenate([t[:, -mixing:] for _, t, _ in chunks]), device=device)
    w = torch.as_tensor(
        np.concatenate([np.full(len(o), 1.0 / n, np.float32) for o, _, n in chunks]),
        device=device,
    )
    head = policy.action_net
    residual = head.out_features - mixing
    with torch.no_grad():  # the mean residual is exactly 0: each picked base runs as it is
        head.weight[:residual] = 0.0
        head.bias[:residual] = 0.0
    opt = torch.optim.Adam(policy.parameters(), lr=learning_rate)
    gen = torch.Generator().manual_seed(seed)
    loss_value = float("nan")
    policy.set_training_mode(True)
    for _ in range(epochs):
        perm = torch.randperm(len(x), generator=gen)
        for i in range(0, len(x), batch_size):
            b = perm[i : i + batch_size]
            mean = policy.get_distribution(x[b]).distribution.mean[:, residual:]
            loss = torch.sum(w[b] * torch.mean((mean - y[b]) ** 2, dim=1)) / torch.sum(w[b])
            opt.zero_grad()
            loss.backward()
            opt.step()  # Adam leaves the zero rows alone: their gradient is 0
            loss_value = float(loss.detach())
    policy.set_training_mode(False)
    return loss_value


def warm_start(
    model: Any,
    env: Mapping[str, Any],
    episodes: int,
    seed: int,
    scenarios: Sequence[str] = (),
    scenario_episodes: int = 0,
    rounds: int = DAGGER_ROUNDS,
    epochs: int = 40,
    batch_size: int = 1024,
    learning_rate: float = 1e-3,
) -> dict[str, Any]:
    """Fit ``model``'s mixing entries to the best base of each training episode (see the module).

    The episodes are ``episodes`` of each training family (``scenario`` and
    ``train_families``) and ``scenario_episodes`` of each of ``scenarios``
    (training split: other seeds than any evaluation's); ``rounds`` DAgger rounds
    follow the first fit of ``epochs`` epochs, each over the aggregate with as many
    gradient steps as the first (``epochs / (round + 1)`` epochs). Returns a
    summary: the episodes, the share of each label overall and per scenario, the
    samples and final loss of each fit, and the seconds spent labelling and fitting.
    """
    import time

    families = [
        env["scenario"],
        *[f for f in (env.get("train_families") or []) if f != env["scenario"]],
    ]
    jobs = [(f, episodes) for f in families]
    if scenario_episodes > 0:
        jobs += [(sc, scenario_episodes) for sc in scenarios if sc not in families]
    names = base_names(env.get("base_policy"))
    mixing = len(names) - 1
    t0 = time.time()
    # per job, its (obs, targets) chunks: the labels' runs, then one per DAgger round
    parts: list[list[tuple[NDArray[np.float32], NDArray[np.float32]]]] = []
    episode_targets: list[NDArray[np.float32]] = []
    counts = np.zeros(len(names))
    per: dict[str, list[float]] = {}
    for n, (fam, count) in enumerate(jobs):
        obs, tgt, labels, _ = label_episodes(env, fam, count, seed + 100_000 * n)
        parts.append([(obs, tgt)])
        episode_targets.append(tgt[:count])
        share = np.bincount(labels, minlength=len(names))
        counts += share
        per[fam] = (share / share.sum()).round(3).tolist()
    seconds = {"label": time.time() - t0, "fit": 0.0, "dagger": 0.0}
    samples, losses = [], []
    for r in range(rounds + 1):
        if r:
            t0 = time.time()
            for n, (fam, count) in enumerate(jobs):
                obs = policy_observations(model, env, fam, count, seed + 100_000 * n)
                tgt = np.tile(episode_targets[n], (len(obs) // count, 1))
                parts[n].append((obs, tgt))
            seconds["dagger"] += time.time() - t0
        t0 = time.time()
        # the aggregate is r + 1 times the first data set: as many gradient steps as the first fit
        passes = max(1, round(epochs / (r + 1)))
        losses.append(
            round(_fit(model.policy, parts, mixing, passes, batch_size, learning_rate, seed + r), 5)
        )
        seconds["fit"] += time.time() - t0
        samples.append(int(sum(len(o) for job in parts for o, _ in job)))
    return {
        "bases": names,
        "episodes_per_family": episodes,
        "families": families,
        "scenario_episodes": scenario_episodes if len(jobs) > len(families) else 0,
        "scenarios": [j[0] for j in jobs[len(families) :]],
        "dagger_rounds": rounds,
        "samples": samples,
        "label_share": (counts / counts.sum()).round(3).tolist(),
        "label_share_per_scenario": per,
        "loss": losses,
        "seconds": {k: round(v, 1) for k, v in seconds.items()},
    }
