"""The labelled data set: each episode's best expert, and the observations that follow it.

For one job (a training family, or a shipped scenario), :func:`label_episodes`

1. runs every base on the job's training-split episodes through the agent's own
   interface, at its corner (:mod:`agents.imitation.experts`), and with plans the
   planner's plan of each episode too, scoring each under the run's objective
   (:mod:`agents.imitation.objective`);
2. labels each episode with the base that scored the highest (bases tied with the
   best within ``tie_tolerance`` count as best too), or with the plan where it
   beats every base by more than a tie;
3. runs the episodes again following their label, recording the agent's
   observations every ``stride``-th step, and gives each recorded row its
   episode's targets (:class:`EpisodeTargets`).

The mixing targets are the label's corner past the clip (``corner_margin``); the
residual's targets are 0 (the base as it is) and not fitted, except: with plans,
the residual is fitted to the plan on every planned episode, whatever its label
(with hard mixing it acts only where the listed base is picked, and the placement
it learns then rests on every planned episode, not only on those the plan won);
on the jobs of a run with plans that are not planned (``hold_listed``: the
scenario jobs), the residual is fitted to 0 where a base it adjusts is near-best,
so that the base runs as it is there instead of with the placement learned on
the families without it.

The labels come from the training split only, never from the episodes a run is
evaluated on. :func:`policy_observations` records the states a fitted policy
reaches on the same episodes (the DAgger rounds, :mod:`agents.imitation.dagger`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from agents.config.imitation import ImitationSettings
from agents.imitation.experts import (
    LabelFollower,
    Plans,
    Recording,
    expert_scores,
    teacher_actions,
    train_env,
)
from agents.imitation.objective import check_objective, scoring_env
from agents.imitation.progress import phase_bar
from agents.rollout import make_params, rollout
from agents.view import LearnedPolicy, base_names, make_interface, residual_base_mask

__all__ = [
    "EpisodeTargets",
    "Labelled",
    "PolicyFollower",
    "corner_targets",
    "label_episodes",
    "policy_observations",
]

#: One job's recorded rows: ``(obs, targets, fit_residual)``.
Chunk = tuple[NDArray[np.float32], NDArray[np.float32], NDArray[np.float32]]


def corner_targets(near: NDArray[np.bool_], size: int, margin: float) -> NDArray[np.float32]:
    """The fit's targets (episodes, size) from the near-best bases (episodes, k).

    Residual 0; a mixing entry is ``+margin`` for a near-best base, past the clip so that
    a small error of the fit still picks one base whole, 0 (indifferent) for one when the
    first base is near-best too, and ``-margin`` for the others.
    """
    out = np.zeros((len(near), size), dtype=np.float32)
    out[:, size - (near.shape[1] - 1) :] = np.where(
        near[:, 1:], np.where(near[:, :1], 0.0, margin), -margin
    )
    return out


@dataclass
class EpisodeTargets:
    """One job's per-episode targets, turned into per-row targets of recorded observations.

    ``mixing`` (E, size) the corner targets (:func:`corner_targets`; a planned episode's: its
    base's corner); ``fit_residual`` (E,) the episodes whose residual is fitted;
    ``from_plan`` (E,) those fitted to the plan (every episode of a planned job; the others'
    target is 0); ``plans`` the plans. Rows of a recording are whole batches of the episodes
    in seed order, one batch every ``stride`` steps from step 0 (the step of a row, which
    per-step targets read: the ``mpc`` teacher's).
    """

    mixing: NDArray[np.float32]
    fit_residual: NDArray[np.bool_]
    from_plan: NDArray[np.bool_]
    plans: Plans | None
    k: int
    stride: int = 1

    def rows(self, obs: NDArray[np.float32]) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
        """``(targets (S, size), residual weights (S,))`` of recorded observations (S, ...)."""
        r = np.arange(len(obs))
        e = r % len(self.mixing)
        targets = self.mixing[e].copy()
        rows = np.flatnonzero(self.from_plan[e])
        if self.plans is not None and len(rows):
            steps = (r[rows] // len(self.mixing)) * self.stride
            res = self.plans.residual(obs[rows], e[rows], self.k, steps)
            targets[rows, : res.shape[1]] = res
        return targets, self.fit_residual[e].astype(np.float32)

    def chunk(self, obs: NDArray[np.float32]) -> Chunk:
        """``(obs, targets, fit_residual)`` of recorded observations ``obs``."""
        return (obs, *self.rows(obs))


@dataclass
class Labelled:
    """What :func:`label_episodes` gives for one family or scenario.

    ``obs`` (S, obs_dim) the recorded observations (whole batches of the episodes in seed
    order: row ``r`` belongs to episode ``r % episodes``), ``targets`` (S, act_dim) and
    ``fit_residual`` (S,) their targets and residual weights (1 where the residual is
    fitted), ``labels`` (episodes,) each episode's label (a base's index, or the number of
    bases for the plan), ``scores`` (episodes, columns) each base's score under the
    objective (then the plan's), ``episodes`` the per-episode targets (for the policy's own
    states), ``plan_seconds`` the planner's search time.
    """

    obs: NDArray[np.float32]
    targets: NDArray[np.float32]
    fit_residual: NDArray[np.float32]
    labels: NDArray[np.int64]
    scores: NDArray[np.float64]
    episodes: EpisodeTargets
    plan_seconds: float = 0.0


def _choose(
    scores: NDArray[np.float64], k: int, plans: bool, tolerance: float
) -> tuple[NDArray[np.bool_], NDArray[np.bool_], NDArray[np.int64]]:
    """``(near (E, k), planned (E,), labels (E,))`` from the experts' scores (E, k [+ 1])."""
    best = scores[:, :k].max(axis=1, keepdims=True)
    near = scores[:, :k] >= best * (1.0 - tolerance)
    # the plan where it beats every base by more than a tie
    planned = np.zeros(len(scores), dtype=bool)
    if plans:
        planned = scores[:, k] > best[:, 0] * (1.0 + tolerance)
    labels = np.where(planned, k, np.argmax(scores[:, :k], axis=1)).astype(np.int64)
    return near, planned, labels


def label_episodes(
    env: Mapping[str, Any],
    family: str,
    episodes: int,
    seed: int,
    settings: ImitationSettings,
    *,
    objective: str,
    plans: bool = False,
    hold_listed: bool = False,
    progress: bool = False,
) -> Labelled:
    """Label ``episodes`` training episodes of ``family`` (seeds ``seed`` on) with their best
    expert under ``objective`` (see the module).

    Every base runs every episode at its corner; with ``plans`` the planner's plan of each
    episode runs too, as the residual over ``residual_bases``' first base. ``hold_listed``
    (a run with plans, on a job without them): where a base the residual adjusts is
    near-best, the residual is fitted to 0, so that the base runs as it is there. Then every
    episode runs again following its label, every ``settings.stride``-th step recorded.
    ``progress``: a bar counting the job's rollouts, and one of the planner's search.

    Raises:
        ValueError: fewer than two bases; ``objective`` is no reward name.
    """

    check_objective(objective)
    names = base_names(env.get("base_policy"))
    k = len(names)
    if k < 2:
        raise ValueError("imitation: needs base_policy with at least two heuristics")
    kw = train_env(env)
    params = make_params(None, family, "train", kw)
    spaces = make_interface(kw).spaces(params)
    adjusted = residual_base_mask(names, env.get("residual_bases"))

    scores = np.empty((episodes, k + int(plans)))
    plan: Plans | None = None
    seconds = 0.0
    # each expert's run records the observations too: an episode that follows its label
    # runs exactly as in its expert's run (every instance is independent of its batch), so
    # those rows are the follower's, unless the scoring env differs from the training one
    reuse = dict(scoring_env(kw, objective)) == dict(kw)
    seen: list[list[NDArray[np.float32]]] = []

    def score(j: int, follower: LabelFollower) -> None:
        follower.stride = settings.stride if reuse else 0
        scores[:, j] = expert_scores(follower, kw, family, episodes, seed, objective)
        seen.append(follower.seen)

    with phase_bar(progress, k + 2 * int(plans) + 1, f"labelling {family}", "rollout") as bar:
        for j in range(k):
            score(j, LabelFollower(*spaces, np.full(episodes, j, dtype=np.int64), k))
            bar.update()
        if plans:
            total: int | None = settings.plan_search.iterations + 1
            desc, unit = f"planning {family}", "iteration"
            if settings.teacher == "mpc":  # one tick per step of the episodes
                total, desc, unit = None, f"mpc on {family}", "step"
            with phase_bar(progress, total, desc, unit) as search:
                plan, _, seconds = teacher_actions(
                    env,
                    family,
                    episodes,
                    seed,
                    settings,
                    objective=objective,
                    on_iteration=search.update,
                )
            bar.update()
            score(k, LabelFollower(*spaces, np.full(episodes, k, dtype=np.int64), k, plan))
            bar.update()
        near, planned, labels = _choose(scores, k, plans, settings.tie_tolerance)
        near[planned] = np.arange(k) == (plan.base if plan is not None else 0)
        model = LabelFollower(*spaces, labels, k, plan)
        mixing = corner_targets(near, model.actions.shape[1], settings.corner_margin)
        # the residual follows the plan on every planned episode, whatever its label
        from_plan = np.full(episodes, plans)
        fit = from_plan | (near & adjusted).any(axis=1) if hold_listed else from_plan
        per_episode = EpisodeTargets(mixing, fit, from_plan, plan, k, settings.stride)
        if reuse:
            obs = _following(seen, labels)
        else:
            model.stride = settings.stride
            follower = LearnedPolicy(model, kw, "follower", "imitation")
            rollout(follower, family, episodes, seed, "train", kw)
            obs = np.concatenate(model.seen)
        bar.update()
    targets, weights = per_episode.rows(obs)
    return Labelled(obs, targets, weights, labels, scores, per_episode, seconds)


def _following(
    seen: list[list[NDArray[np.float32]]], labels: NDArray[np.int64]
) -> NDArray[np.float32]:
    """The recorded rows of a run in which episode ``i`` follows expert ``labels[i]``, from
    each expert's own recording ``seen[j]`` (a (B, D) array per recorded step): whole batches
    in step order, as the follower's recording would be."""
    rows = np.arange(len(labels))
    return np.concatenate([np.stack(step)[labels, rows] for step in zip(*seen, strict=True)])


class PolicyFollower(Recording):
    """A trained model's deterministic actions, its observations recorded (DAgger)."""

    def __init__(self, model: Any, stride: int) -> None:
        super().__init__(model.observation_space, model.action_space, stride)
        self.model = model

    def predict(self, obs: Any, state: Any = None, episode_start: Any = None, deterministic=True):
        self._record(obs)
        return self.model.predict(obs, state=state, episode_start=episode_start, deterministic=True)


def policy_observations(
    model: Any, env: Mapping[str, Any], family: str, episodes: int, seed: int, stride: int
) -> NDArray[np.float32]:
    """The observations ``model`` (deterministic) reaches on the episodes :func:`label_episodes`
    ran (same family, count and seed; every ``stride``-th step, whole batches in seed order)."""

    kw = train_env(env)
    follower = PolicyFollower(model, stride)
    rollout(LearnedPolicy(follower, kw, "dagger", "imitation"), family, episodes, seed, "train", kw)
    return np.concatenate(follower.seen)
