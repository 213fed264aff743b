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

Plans (``plans=True``, the run's ``imitation_plans``): choosing among heuristics
caps what the policy can reach (on ``mixed``, ``best-heuristic-per-episode``
takes 60% of the planner's headroom); the rest is per-tenant placement no
heuristic makes. So each training family episode is also planned by the
clairvoyant planner (:class:`baselines.planner.Planner`, :data:`PLAN_SEARCH`:
one static per-tenant DRAM share and promotion rate for the episode, under the
base's own tiering mode; :func:`plan_actions`). The plan is run through the
agent's interface as the residual over ``residual_bases``' first base (that base
at its corner; the residual reaches the plan's box action exactly where
``residual_scale`` spans it) and scored like every base; where it beats the best
base, it is the episode's label. The residual entries are fitted to the plan on
every planned episode, whatever its label (with hard mixing they act only where
the listed base is picked, and the placement then rests on all of them), by
mean squared error, with the entries that switch something off (a weight of 0,
promotion off) :data:`OFF_MARGIN` past the clip. On the scenario jobs, which are
not planned, the residual is fitted to 0 where a listed base is near-best, so that
the base runs as it is there (``cxl-spill``, where ``dram-first`` is best, lost 20%
to the placement learned on the families without it). The plan's weights are written
unreduced at the planner's resolution, so that a DRAM share maps to the box
continuously. Residual targets are computed per recorded state from the base
action the agent observes there. With ``residual_codec: share``
(:mod:`agents.residual`) the plan's weights are one target per tenant slot, the
step from the base's DRAM share to the plan's (:class:`ShareTargets`; 0 for slots
the episode does not use): the quantity the planner searched, where the box
codec asks for a log weight and an on/off threshold per node. The planner sees the episode's future; the
fitted policy sees only its observation (every tenant's descriptors from the
step before it starts), so what it learns is the placement that is best on
average for what it sees.

The labels come from the training split only (seeds from ``seed``), never from
the episodes a run is evaluated on. Reinforcement learning then starts from a
policy that already picks a base per machine and mix, and refines it with the
residual.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from agents.view import base_names, make_interface, residual_base_mask
from baselines.placement import SHARE_TOP, dram_share
from envs.spaces import ActionCodec

__all__ = [
    "CORNER_MARGIN",
    "DAGGER_ROUNDS",
    "OFF_MARGIN",
    "PLAN_SEARCH",
    "TIE_TOLERANCE",
    "LabelFollower",
    "Labelled",
    "Plans",
    "ShareTargets",
    "fit_targets",
    "label_episodes",
    "plan_actions",
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
#: The planner's search for the plan labels: one static plan per episode, a small fraction of
#: the evaluation planner's candidates. On 64 episodes of mixed's test split (mean over
#: episodes of the ratio to dram-first; Planner(**kwargs) through agents.rollout.rollout):
#: the evaluation planner (4 segments, 64 candidates x 12 iterations) 1.151, one segment 1.149,
#: one segment at 32 x 6 1.143 (30 s of search), at 16 x 4 1.135 (16.5 s).
PLAN_SEARCH: dict[str, Any] = {"segments": 1, "population": 16, "iterations": 4}
#: Residual targets of plan entries that switch something off (a weight of 0, promotion off)
#: lie this far below the box's -1 (clipped to the residual's range), so that an uncertain fit
#: leaves them off: a tenant whose plan the fit cannot tell stays local-first, as its base
#: places it, instead of turning on one node (a lone CXL weight sends every new page there).
#: Measured by ``python scripts/plan_fit.py`` (256 planned training episodes of each mixed
#: family, a flat [128, 128] policy fitted 100 epochs, no DAgger): of the local-first tenant
#: slots of the recorded steps, 0.5 turns a node on in 6.8%, 2.0 in 1.2%; the policy forced onto
#: the plan's branch keeps 0.87 and 0.91 of the plans' score on the episodes it was fitted on
#: (measured when the residual was fitted only where the plan is the label).
OFF_MARGIN = 2.0
#: Plan entries that are on lie at least this far above the box's threshold of "off" (-0.9,
#: a weight or rate of 1), so that float rounding cannot turn them off.
ON_MARGIN = 0.005


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


@dataclass
class ShareTargets:
    """What the ``share`` residual codec's targets need besides the box (:func:`plan_actions`).

    ``share`` (E, R) each episode's planned DRAM share per weight row (0..SHARE_TOP, above
    1 local-first), ``used`` (E, R) the rows of tenants the episode has (the others keep
    the base: target 0), ``is_cxl`` (E, M) the agent's (padded) nodes' kind, ``span`` the
    interface's share step (:attr:`agents.residual.AgentInterface.share_span`).
    """

    share: NDArray[np.float64]
    used: NDArray[np.bool_]
    is_cxl: NDArray[np.bool_]
    span: float


class Plans:
    """Each episode's plan as a residual target: box actions in the agent's (padded) layout
    (:func:`plan_actions`).

    ``box`` (E, A) each episode's plan as a box action, ``off`` (E, A) its entries that
    switch something off, ``base`` the index of the base it is a residual over, ``scale``
    the residual scale; ``shares`` with the ``share`` residual codec (its weight targets).
    """

    def __init__(
        self,
        box: NDArray[np.float32],
        off: NDArray[np.bool_],
        base: int,
        scale: float,
        shares: ShareTargets | None = None,
    ) -> None:
        self.box, self.off, self.base, self.scale = box, off, base, scale
        self.shares = shares

    def residual(self, obs: NDArray[np.float32], rows: NDArray[np.int64], k: int) -> NDArray:
        """Residual targets (S, A) of observations ``obs`` (S, obs_dim) of episodes ``rows``:
        what takes the base action the agent observes there to the plan."""
        a = self.box.shape[1]
        start = obs.shape[1] - k * a + self.base * a
        base = 2.0 * obs[:, start : start + a].astype(np.float64) - 1.0
        box = self.box[rows]
        target = np.where(self.off[rows], -1.0 - OFF_MARGIN, box)
        res = np.clip((target - base) / self.scale, -1.0, 1.0)
        if self.shares is None:
            return res.astype(np.float32)
        sh = self.shares
        R, M = sh.share.shape[1], sh.is_cxl.shape[1]
        weights = ActionCodec.box_weights(base[:, : R * M].reshape(-1, R, M))
        x0 = dram_share(weights, sh.is_cxl[rows])
        step = np.clip((sh.share[rows] - x0) / sh.span, -1.0, 1.0)
        step = np.where(sh.used[rows], step, 0.0)
        return np.concatenate([step, res[:, R * M :]], axis=1).astype(np.float32)


class LabelFollower(_Recording):
    """Instance ``i`` follows label ``labels[i]``: base ``j < k`` at its corner (residual 0,
    mixing entry ``j - 1`` at 1 and the others at -1), or label ``k``: the plan, the residual
    of ``plans`` at its base's corner."""

    def __init__(
        self,
        obs_space: Any,
        act_space: Any,
        labels: NDArray[np.int64],
        k: int,
        plans: Plans | None = None,
    ) -> None:
        super().__init__(obs_space, act_space)
        self.k, self.plans = k, plans
        self.planned = labels == k
        corner = np.where(self.planned, plans.base if plans is not None else 0, labels)
        self.actions = np.zeros((len(labels), act_space.shape[0]), dtype=np.float32)
        self.actions[:, -(k - 1) :] = np.where(
            corner[:, None] == np.arange(1, k)[None, :], 1.0, -1.0
        )

    def predict(self, obs: Any, state: Any = None, episode_start: Any = None, deterministic=True):
        self._record(obs)
        act = self.actions[: len(obs)].copy()
        if self.plans is not None and self.planned.any():
            rows = np.flatnonzero(self.planned[: len(obs)])
            res = self.plans.residual(np.asarray(obs, np.float32)[rows], rows, self.k)
            act[rows, : res.shape[1]] = res
        return act, state


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


class _EpisodeTargets:
    """One job's per-episode targets, turned into per-row targets of recorded observations.

    ``mixing`` (E, size) the corner targets (:func:`_targets`; a planned episode's: its
    base's corner); ``fit_residual`` (E,) the episodes whose residual is fitted;
    ``from_plan`` (E,) those fitted to the plan (every episode of a planned job; the others'
    target is 0); ``plans`` the plans. Rows of a recording are whole batches of the episodes
    in seed order.
    """

    def __init__(
        self,
        mixing: NDArray[np.float32],
        fit_residual: NDArray[np.bool_],
        from_plan: NDArray[np.bool_],
        plans: Plans | None,
        k: int,
    ) -> None:
        self.mixing, self.fit_residual, self.from_plan = mixing, fit_residual, from_plan
        self.plans, self.k = plans, k

    def rows(self, obs: NDArray[np.float32]) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
        """``(targets (S, size), residual weights (S,))`` of recorded observations (S, ...)."""
        e = np.arange(len(obs)) % len(self.mixing)
        targets = self.mixing[e].copy()
        rows = np.flatnonzero(self.from_plan[e])
        if self.plans is not None and len(rows):
            res = self.plans.residual(obs[rows], e[rows], self.k)
            targets[rows, : res.shape[1]] = res
        return targets, self.fit_residual[e].astype(np.float32)


def _env_for(env: Mapping[str, Any]) -> dict[str, Any]:
    """A run's env settings as rollout's ``env_kwargs`` on the training split."""
    return {**{k: v for k, v in env.items() if k != "scenario"}, "split": "train"}


@dataclass
class Labelled:
    """What :func:`label_episodes` gives for one family or scenario.

    ``obs`` (S, obs_dim) the recorded observations (whole batches of the episodes in seed
    order: row ``r`` belongs to episode ``r % episodes``), ``targets`` (S, act_dim) and
    ``fit_residual`` (S,) their targets and residual weights (1 where the residual is
    fitted), ``labels`` (episodes,) each episode's label (a base's index, or the number of
    bases for the plan), ``scores`` (episodes, columns) each base's ``geomean_perf`` (then
    the plan's), ``episodes`` the per-episode targets (for the policy's own states),
    ``plan_seconds`` the planner's search time.
    """

    obs: NDArray[np.float32]
    targets: NDArray[np.float32]
    fit_residual: NDArray[np.float32]
    labels: NDArray[np.int64]
    scores: NDArray[np.float64]
    episodes: _EpisodeTargets
    plan_seconds: float = 0.0


def plan_actions(
    env: Mapping[str, Any], family: str, episodes: int, seed: int
) -> tuple[Plans, NDArray[np.float64], float]:
    """The planner's plan (:data:`PLAN_SEARCH`) of ``episodes`` training episodes of ``family``
    (seeds ``seed`` on) as box actions in the agent's layout (padded to ``pad_nodes``).

    The plan is searched under the kernel of ``residual_bases``' first base (its tiering
    mode, which the plan's mode entry keeps): the agent's residual then only places pages
    and sets the rate, and a mode entry that the fit gets slightly wrong cannot switch the
    kernel (a mode is a category; its entry does not interpolate).

    Returns ``(plans, score (episodes,), seconds)``: the plans over that base with the
    run's residual scale (:class:`Plans`; ``off`` marks the entries that switch something
    off: a weight of 0, promotion off, padded nodes) and the planner's ``geomean_perf`` of
    each. The weights are the planner's share mapping unreduced (continuous in the share);
    entries that are on lie :data:`ON_MARGIN` above the threshold of off.

    Raises:
        ValueError: ``env`` has no ``residual_bases``.
    """
    from agents.rollout import make_params
    from baselines.placement import share_or_local_to_weights
    from baselines.planner import Planner
    from envs import core
    from envs.spaces import OFF

    if env.get("residual_bases") is None:
        raise ValueError("imitation plans: need residual_bases (the plan's base is its first)")
    kw = _env_for(env)
    params = make_params(None, family, "train", kw)
    iface = make_interface(kw)
    iface.bind(params, episodes)
    base = iface.names.index(next(iter(kw["residual_bases"])))
    # the base's own kernel, no mode entry: the planner replays exactly that mode
    plan_params = make_params(iface.policies[base], family, "train", {**kw, "tiering_modes": None})
    planner = Planner(**PLAN_SEARCH)
    seeds = np.arange(seed, seed + episodes, dtype=np.uint64)
    planner.bind(plan_params, episodes)
    planner.plan_episodes(seeds)
    state = core.reset(params, seeds)[0]
    hw = core.hardware(state)
    share = planner.plan_share[:, 0]  # (E, R): one segment
    w = share_or_local_to_weights(share, hw.firmware_gbps, hw.is_cxl, planner.weight_scale)
    box = params.codec.encode_box(w, planner.plan_rate_mbps[:, 0], iface.modes[base])
    off = box <= -1.0  # weight 0 or promotion off (a mode entry lies mid-bin, above -1)
    box = np.where(off, box, np.maximum(box, OFF + ON_MARGIN)).astype(np.float32)
    is_cxl = np.asarray(hw.is_cxl, dtype=bool)
    if iface.pad_nodes is not None:
        box = iface.pad_action(box, -1.0)
        off = iface.pad_action(off.astype(np.float32), 1.0) > 0.5
        is_cxl = np.pad(is_cxl, ((0, 0), (0, iface.pad_nodes - is_cxl.shape[1])))
    shares = None
    if iface.codec == "share":
        rows = params.codec.n_weight_rows
        used = state.instance.present.T if rows > 1 else np.ones((episodes, 1), dtype=bool)
        shares = ShareTargets(np.clip(share, 0.0, SHARE_TOP), used, is_cxl, iface.share_span)
    plans = Plans(box, off, base, iface.scale, shares)
    return plans, planner.plan_score, planner.plan_seconds


def label_episodes(
    env: Mapping[str, Any],
    family: str,
    episodes: int,
    seed: int,
    stride: int = 2,
    plans: bool = False,
    hold_listed: bool = False,
) -> Labelled:
    """Label ``episodes`` training episodes of ``family`` (seeds ``seed`` on) with their best base.

    Every base runs every episode at its corner; with ``plans`` the planner's plan of each
    episode runs too, as the residual over ``residual_bases``' first base (see the module).
    ``hold_listed`` (a run with plans, on a job without them): where a base the residual
    adjusts is near-best, the residual is fitted to 0, so that the base runs as it is there.
    Then every episode runs again following its label, every ``stride``-th step recorded.
    """
    from agents.evaluation import LearnedPolicy
    from agents.rollout import make_params, rollout

    names = base_names(env.get("base_policy"))
    k = len(names)
    if k < 2:
        raise ValueError("imitation: needs base_policy with at least two heuristics")
    kw = _env_for(env)
    params = make_params(None, family, "train", kw)
    spaces = make_interface(kw).spaces(params)
    adjusted = residual_base_mask(names, env.get("residual_bases"))

    def scores_of(model: LabelFollower) -> list[float]:
        recs = rollout(
            LearnedPolicy(model, kw, "corner", "imitation"), family, episodes, seed, "train", kw
        )
        recs.sort(key=lambda r: r["seed"])
        return [r["metrics"]["geomean_perf"] for r in recs]

    scores = np.empty((episodes, k + int(plans)))
    for j in range(k):
        scores[:, j] = scores_of(LabelFollower(*spaces, np.full(episodes, j, dtype=np.int64), k))
    plan: Plans | None = None
    seconds = 0.0
    if plans:
        plan, _, seconds = plan_actions(env, family, episodes, seed)
        scores[:, k] = scores_of(
            LabelFollower(*spaces, np.full(episodes, k, dtype=np.int64), k, plan)
        )
    best = scores[:, :k].max(axis=1, keepdims=True)
    near = scores[:, :k] >= best * (1.0 - TIE_TOLERANCE)
    # the plan where it beats every base by more than a tie
    planned = np.zeros(episodes, dtype=bool)
    if plans:
        planned = scores[:, k] > best[:, 0] * (1.0 + TIE_TOLERANCE)
    labels = np.where(planned, k, np.argmax(scores[:, :k], axis=1)).astype(np.int64)
    near[planned] = np.arange(k) == (plan.base if plan is not None else 0)
    model = LabelFollower(*spaces, labels, k, plan)
    mixing = _targets(near, model.actions.shape[1])
    # the residual follows the plan on every planned episode, whatever its label: with hard
    # mixing it acts only where the listed base is picked, and the placement it learns
    # then rests on every planned episode, not only on those the plan won
    from_plan = np.full(episodes, plans)
    fit = from_plan | (near & adjusted).any(axis=1) if hold_listed else from_plan
    per_episode = _EpisodeTargets(mixing, fit, from_plan, plan, k)
    model.stride = stride
    rollout(LearnedPolicy(model, kw, "follower", "imitation"), family, episodes, seed, "train", kw)
    obs = np.concatenate(model.seen)
    targets, weights = per_episode.rows(obs)
    return Labelled(obs, targets, weights, labels, scores, per_episode, seconds)


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


def fit_targets(
    policy: Any,
    parts: Sequence[Sequence[tuple[NDArray[np.float32], NDArray[np.float32], NDArray[np.float32]]]],
    mixing: int,
    epochs: int,
    batch_size: int,
    learning_rate: float,
    seed: int,
) -> float:
    """Fit ``policy``'s action mean to the targets of ``parts`` (per family or scenario, its
    ``(obs, targets, fit_residual)`` chunks; each family or scenario weighing the same) by
    mean squared error: the mixing entries (the last ``mixing``) on every row, the residual
    entries on the rows whose ``fit_residual`` is 1. Without any such row the residual's rows
    of the action layer are zero and stay so (the policy's mean residual is exactly 0).
    Returns the last batch's loss."""
    import torch

    device = policy.device
    chunks = [(o, t, f, sum(len(c) for c, _, _ in job)) for job in parts for o, t, f in job]
    x = torch.as_tensor(np.concatenate([c[0] for c in chunks]), device=device)
    y = torch.as_tensor(np.concatenate([c[1] for c in chunks]), device=device)
    fit_res = torch.as_tensor(np.concatenate([c[2] for c in chunks]), device=device)
    w = torch.as_tensor(
        np.concatenate([np.full(len(c[0]), 1.0 / c[3], np.float32) for c in chunks]),
        device=device,
    )
    head = policy.action_net
    residual = int(policy.action_space.shape[0]) - mixing
    with_residual = bool(fit_res.any())
    if not with_residual and hasattr(head, "zero_rows"):  # agents.networks.TenantHead
        head.zero_rows(residual)
    elif not with_residual:
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
            mean = policy.get_distribution(x[b]).distribution.mean
            err = torch.mean((mean[:, residual:] - y[b, residual:]) ** 2, dim=1)
            if with_residual:
                err = err + fit_res[b] * torch.mean(
                    (mean[:, :residual] - y[b, :residual]) ** 2, dim=1
                )
            loss = torch.sum(w[b] * err) / torch.sum(w[b])
            opt.zero_grad()
            loss.backward()
            opt.step()  # Adam leaves zero rows alone: their gradient is 0
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
    plans: bool = False,
) -> dict[str, Any]:
    """Fit ``model``'s action mean to the best base (or plan) of each training episode (see the module).

    The episodes are ``episodes`` of each training family (``scenario`` and
    ``train_families``; planned too with ``plans``) and ``scenario_episodes`` of each of
    ``scenarios`` (training split: other seeds than any evaluation's); ``rounds`` DAgger
    rounds follow the first fit of ``epochs`` epochs, each over the aggregate with as many
    gradient steps as the first (``epochs / (round + 1)`` epochs). Returns a summary: the
    episodes, the share of each label (the bases, then the plan) overall and per scenario,
    the samples and final loss of each fit, and the seconds spent labelling (the plans'
    search included), searching plans, fitting and running the policy.
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
    columns = len(names) + int(plans)
    t0 = time.time()
    # per job, its (obs, targets, fit_residual) chunks: the labels' runs, then one per DAgger round
    parts: list[list[tuple[NDArray[np.float32], NDArray[np.float32], NDArray[np.float32]]]] = []
    per_episode: list[_EpisodeTargets] = []
    counts = np.zeros(columns)
    per: dict[str, list[float]] = {}
    seconds = {"label": 0.0, "plan": 0.0, "fit": 0.0, "dagger": 0.0}
    for n, (fam, count) in enumerate(jobs):
        got = label_episodes(
            env,
            fam,
            count,
            seed + 100_000 * n,
            plans=plans and n < len(families),
            hold_listed=plans,
        )
        parts.append([(got.obs, got.targets, got.fit_residual)])
        per_episode.append(got.episodes)
        seconds["plan"] += got.plan_seconds
        share = np.bincount(got.labels, minlength=columns)
        counts += share
        per[fam] = (share / share.sum()).round(3).tolist()
    seconds["label"] = time.time() - t0
    samples, losses = [], []
    for r in range(rounds + 1):
        if r:
            t0 = time.time()
            for n, (fam, count) in enumerate(jobs):
                obs = policy_observations(model, env, fam, count, seed + 100_000 * n)
                parts[n].append((obs, *per_episode[n].rows(obs)))
            seconds["dagger"] += time.time() - t0
        t0 = time.time()
        # the aggregate is r + 1 times the first data set: as many gradient steps as the first fit
        passes = max(1, round(epochs / (r + 1)))
        losses.append(
            round(
                fit_targets(
                    model.policy, parts, mixing, passes, batch_size, learning_rate, seed + r
                ),
                5,
            )
        )
        seconds["fit"] += time.time() - t0
        samples.append(int(sum(len(o) for job in parts for o, _, _ in job)))
    return {
        "bases": names + (["plan"] if plans else []),
        "episodes_per_family": episodes,
        "families": families,
        "planned_families": families if plans else [],
        "scenario_episodes": scenario_episodes if len(jobs) > len(families) else 0,
        "scenarios": [j[0] for j in jobs[len(families) :]],
        "dagger_rounds": rounds,
        "samples": samples,
        "label_share": (counts / counts.sum()).round(3).tolist(),
        "label_share_per_scenario": per,
        "loss": losses,
        "seconds": {k: round(v, 1) for k, v in seconds.items()},
    }
