"""The experts the warm start imitates: each base at its corner, and the planner's plans
(or the causal mpc's actions).

Each base runs through the agent's own interface at its corner (its mixing entry
at 1, the others at -1, the residual 0), which is that heuristic exactly, so an
expert's score is what the agent reaches by picking that base.

The plans: choosing among heuristics caps what the policy can reach; the rest
is per-tenant placement no heuristic makes. So each training family episode can
also be planned by the clairvoyant planner (:class:`baselines.planner.Planner`,
searched as the settings' ``plan_search`` says: one static per-tenant DRAM share
and promotion rate for the episode, under the base's own tiering mode;
:func:`plan_actions`). The plan runs through the agent's interface as the
residual over ``residual_bases``' first base (that base at its corner; the
residual reaches the plan's box action exactly where ``residual_scale`` spans
it) and is scored like every base. The plan's weights are written unreduced at
the planner's resolution, so that a DRAM share maps to the box continuously.
Residual targets are computed per recorded state from the base action the agent
observes there (:meth:`Plans.residual`). With ``residual_codec: share`` the
plan's weights are one target per tenant slot, the step from the base's DRAM
share to the plan's (:class:`ShareTargets`; 0 for slots the episode does not
use): the quantity the planner searched, where the box codec asks for a log
weight and an on/off threshold per node. The planner sees the episode's future;
the fitted policy sees only its observation (every tenant's descriptors from the
step before it starts), so what it learns is the placement that is best on
average for what it sees.

The causal teacher (``teacher: mpc``, :func:`mpc_actions`): instead of the plan, the
residual's targets are the actions of :class:`baselines.mpc.MPC`, which decides from the
present model state alone (no arrival, phase or departure to come), one per step of the
episode. The same code path carries them: :class:`Plans` with one box per step (and one
share per step and tenant), the follower and the recorded rows read the target of their
step. What the student cannot infer from its observation is then only the model's exact
present state, not the episode's future.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from agents.config.imitation import ImitationSettings
from agents.imitation.objective import check_objective, record_score, score_metric, scoring_env
from agents.rollout import make_params, rollout, run_episodes
from agents.view import LearnedPolicy, make_interface, privileged_width
from baselines.mpc import MPC
from baselines.placement import SHARE_TOP, dram_share, share_or_local_to_weights, tenant_orders
from baselines.planner import Planner
from envs import core
from envs.spaces import OFF, ActionCodec

__all__ = [
    "TEACHERS",
    "LabelFollower",
    "Plans",
    "Recording",
    "ShareTargets",
    "expert_scores",
    "mpc_actions",
    "plan_actions",
    "teacher_actions",
    "train_env",
]


def train_env(env: Mapping[str, Any]) -> dict[str, Any]:
    """A run's env settings as rollout's ``env_kwargs`` on the training split."""
    return {**{k: v for k, v in env.items() if k != "scenario"}, "split": "train"}


class Recording:
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
    1 local-first), or (E, S, R) one per step of the episode (the ``mpc`` teacher),
    ``used`` (E, R) the rows of tenants the episode has (the others keep the base: target 0), ``is_cxl`` (E, M) the agent's (padded) nodes' kind, ``span`` the
    interface's share step (:attr:`agents.view.AgentInterface.share_span`).
    """

    share: NDArray[np.float64]
    used: NDArray[np.bool_]
    is_cxl: NDArray[np.bool_]
    span: float


@dataclass
class Plans:
    """Each episode's plan as a residual target: box actions in the agent's (padded) layout
    (:func:`plan_actions`).

    ``box`` (E, A) each episode's plan as a box action, or (E, S, A) one per step of the
    episode (the ``mpc`` teacher's decisions, :func:`mpc_actions`; a step past the last
    takes the last), ``off`` (E, A) or (E, S, A) its entries that switch something off,
    ``base`` the index of the base it is a residual over, ``scale`` the residual scale,
    ``off_margin`` how far below the box's -1 the entries that are off are fitted
    (:attr:`ImitationSettings.off_margin`); ``shares`` with the ``share`` residual codec (its
    weight targets); ``tail`` the entries of the agent's observation after the base actions
    (the critic's privileged entries, :func:`agents.view.privileged_width`).
    """

    box: NDArray[np.float32]
    off: NDArray[np.bool_]
    base: int
    scale: float
    off_margin: float
    shares: ShareTargets | None = None
    tail: int = 0

    @property
    def per_step(self) -> bool:
        """Whether the targets change over the episode (one box per step: ``mpc``)."""
        return self.box.ndim == 3

    def residual(
        self,
        obs: NDArray[np.float32],
        rows: NDArray[np.int64],
        k: int,
        steps: NDArray[np.int64] | None = None,
    ) -> NDArray:
        """Residual targets (S, A) of observations ``obs`` (S, obs_dim) of episodes ``rows``
        at steps ``steps`` (S,) of their episodes (read only when the targets are per step):
        what takes the base action the agent observes there to the plan.

        Raises:
            ValueError: per-step targets and no ``steps``.
        """
        at: tuple[NDArray[np.int64], ...] = (rows,)
        if self.per_step:
            if steps is None:
                raise ValueError("imitation: per-step teacher targets need each row's step")
            at = (rows, np.clip(np.asarray(steps, dtype=np.int64), 0, self.box.shape[1] - 1))
        a = self.box.shape[-1]
        start = obs.shape[1] - self.tail - k * a + self.base * a
        base = 2.0 * obs[:, start : start + a].astype(np.float64) - 1.0
        box = self.box[at]
        target = np.where(self.off[at], -1.0 - self.off_margin, box)
        res = np.clip((target - base) / self.scale, -1.0, 1.0)
        if self.shares is None:
            return res.astype(np.float32)
        sh = self.shares
        R, M = sh.share.shape[-1], sh.is_cxl.shape[1]
        weights = ActionCodec.box_weights(base[:, : R * M].reshape(-1, R, M))
        x0 = dram_share(weights, sh.is_cxl[rows])
        step = np.clip((sh.share[at] - x0) / sh.span, -1.0, 1.0)
        step = np.where(sh.used[rows], step, 0.0)
        return np.concatenate([step, res[:, R * M :]], axis=1).astype(np.float32)


class LabelFollower(Recording):
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
        step = self.steps  # every instance is at this step of its first episode
        self._record(obs)
        act = self.actions[: len(obs)].copy()
        if self.plans is not None and self.planned.any():
            rows = np.flatnonzero(self.planned[: len(obs)])
            at = np.full(len(rows), step, dtype=np.int64)
            res = self.plans.residual(np.asarray(obs, np.float32)[rows], rows, self.k, at)
            act[rows, : res.shape[1]] = res
        return act, state


def expert_scores(
    model: Any, kw: Mapping[str, Any], family: str, episodes: int, seed: int, objective: str
) -> list[float]:
    """Run ``model`` (an expert, :class:`LabelFollower`) through the agent's interface on
    ``episodes`` training episodes of ``family`` (seeds ``seed`` on; env settings ``kw``) and
    return each episode's score under ``objective`` (:mod:`agents.imitation.objective`), in
    seed order."""

    skw = dict(scoring_env(kw, objective))
    recs = rollout(
        LearnedPolicy(model, skw, "corner", "imitation"), family, episodes, seed, "train", skw
    )
    recs.sort(key=lambda r: r["seed"])
    return [record_score(r, objective) for r in recs]


def _teacher_setup(
    env: Mapping[str, Any], family: str, episodes: int, objective: str, scored: bool = False
) -> tuple[Any, Any, int, Any]:
    """What both teachers share: ``(params, iface, base, teacher_params)``: the agent's env
    parameters (training split) and its bound interface, the index of
    ``residual_bases``' first base, and the env parameters the teacher runs on: that base's
    own kernel with no mode entry (the teacher keeps that mode exactly), with ``scored`` the
    objective's reward (:func:`~agents.imitation.objective.scoring_env`: its episodes' records
    are then scored as the experts are).

    Raises:
        ValueError: ``env`` has no ``residual_bases``; ``objective`` is no reward name.
    """
    check_objective(objective)
    if env.get("residual_bases") is None:
        raise ValueError("imitation plans: need residual_bases (the plan's base is its first)")
    kw = train_env(env)
    params = make_params(None, family, "train", kw)
    iface = make_interface(kw)
    iface.bind(params, episodes)
    base = iface.names.index(next(iter(kw["residual_bases"])))
    teacher_kw = {**(scoring_env(kw, objective) if scored else kw), "tiering_modes": None}
    teacher_params = make_params(iface.policies[base], family, "train", teacher_kw)
    return params, iface, base, teacher_params


def _as_plans(
    params: Any,
    iface: Any,
    base: int,
    state: Any,
    weights: NDArray,
    rate: NDArray,
    share: NDArray[np.float64],
    settings: ImitationSettings,
) -> Plans:
    """The teacher's actions as residual targets (:class:`Plans`) in the agent's layout.

    ``weights`` (E, [S,] R, N) integer or unreduced weights, ``rate`` (E, [S]) the nominal
    promotion rates and ``share`` (E, [S,] R) the DRAM shares they make, per episode (the
    ``plan``) or per episode and step (``mpc``), on the episodes ``state`` was reset to.
    """
    E = weights.shape[0]
    lead = weights.shape[:-2]  # (E,) or (E, S)
    R, N = weights.shape[-2:]
    box = params.codec.encode_box(weights.reshape(-1, R, N), rate.reshape(-1), iface.modes[base])
    off = box <= -1.0  # weight 0 or promotion off (a mode entry lies mid-bin, above -1)
    box = np.where(off, box, np.maximum(box, OFF + settings.on_margin)).astype(np.float32)
    hw = core.hardware(state)
    is_cxl = np.asarray(hw.is_cxl, dtype=bool)
    if iface.pad_nodes is not None:
        box = iface.pad_action(box, -1.0)
        off = iface.pad_action(off.astype(np.float32), 1.0) > 0.5
        is_cxl = np.pad(is_cxl, ((0, 0), (0, iface.pad_nodes - is_cxl.shape[1])))
    box = box.reshape(*lead, box.shape[-1])
    off = off.reshape(*lead, off.shape[-1])
    shares = None
    if iface.codec == "share":
        rows = params.codec.n_weight_rows
        used = state.instance.present.T if rows > 1 else np.ones((E, 1), dtype=bool)
        shares = ShareTargets(np.clip(share, 0.0, SHARE_TOP), used, is_cxl, iface.share_span)
    tail = privileged_width(params, iface.privileged_critic)
    return Plans(box, off, base, iface.scale, settings.off_margin, shares, tail)


def plan_actions(
    env: Mapping[str, Any],
    family: str,
    episodes: int,
    seed: int,
    settings: ImitationSettings,
    *,
    objective: str,
    on_iteration: Callable[[], None] | None = None,
) -> tuple[Plans, NDArray[np.float64], float]:
    """The planner's plan (``settings.plan_search``, maximising ``objective``) of ``episodes``
    training episodes of ``family`` (seeds ``seed`` on) as box actions in the agent's layout
    (padded to ``pad_nodes``). ``on_iteration`` is called after each step of the search.

    The plan is searched under the kernel of ``residual_bases``' first base (its tiering
    mode, which the plan's mode entry keeps): the agent's residual then only places pages
    and sets the rate, and a mode entry that the fit gets slightly wrong cannot switch the
    kernel (a mode is a category; its entry does not interpolate).

    Returns ``(plans, score (episodes,), seconds)``: the plans over that base with the
    run's residual scale (:class:`Plans`; ``off`` marks the entries that switch something
    off: a weight of 0, promotion off, padded nodes) and the planner's score of each
    (:mod:`agents.imitation.objective`). The weights are the planner's share mapping
    unreduced (continuous in the share); entries that are on lie ``settings.on_margin``
    above the threshold of off.

    Raises:
        ValueError: ``env`` has no ``residual_bases``; ``objective`` is no reward name.
    """

    params, iface, base, plan_params = _teacher_setup(env, family, episodes, objective)
    planner = Planner(**settings.plan_search.model_dump(), objective=objective)
    seeds = np.arange(seed, seed + episodes, dtype=np.uint64)
    planner.bind(plan_params, episodes)
    planner.plan_episodes(seeds, on_iteration=on_iteration)
    state = core.reset(params, seeds)[0]
    hw = core.hardware(state)
    share = planner.plan_share[:, 0]  # (E, R): one segment
    w = share_or_local_to_weights(
        share,
        hw.firmware_gbps,
        hw.is_cxl,
        planner.weight_scale,
        tenant_orders(hw, share.shape[1]),  # each tenant's nearest nodes
        hw.socket,
    )
    rate = planner.plan_rate_mbps[:, 0]
    plans = _as_plans(params, iface, base, state, w, rate, share, settings)
    return plans, planner.plan_score, planner.plan_seconds


class _RecordedMPC(MPC):
    """:class:`baselines.mpc.MPC` that keeps the action in force after every step's decision:
    ``taken`` holds one ``(weights (B, R, N), nominal rates (B,))`` per step."""

    def __init__(self, tick: Callable[[], None] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.tick = tick
        self.taken: list[tuple[NDArray[np.int64], NDArray[np.float64]]] = []

    def _decide(self, obs: NDArray) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        w, rate = super()._decide(obs)
        self.taken.append((w.copy(), rate.copy()))
        if self.tick is not None:
            self.tick()
        return w, rate


def mpc_actions(
    env: Mapping[str, Any],
    family: str,
    episodes: int,
    seed: int,
    settings: ImitationSettings,
    *,
    objective: str,
    on_iteration: Callable[[], None] | None = None,
) -> tuple[Plans, NDArray[np.float64], float]:
    """The causal teacher: ``mpc``'s action at every step of ``episodes`` training episodes of
    ``family`` (seeds ``seed`` on) as per-step box actions in the agent's layout, the targets
    :func:`plan_actions` gives for the plan (the same :class:`Plans`, one box per step).

    :class:`baselines.mpc.MPC` (its defaults: a decision every 10 intervals and at every
    arrival or departure, a horizon of 20; ``settings.plan_search``'s ``population`` and
    ``iterations`` size its search, maximising ``objective``) runs the episodes under the
    kernel of ``residual_bases``' first base, as the planner plans them, and decides from
    the present model state alone: it knows no arrival, phase or departure to come. A step
    after an episode's end (the batch runs until its longest episode ends) keeps the last.
    ``on_iteration`` is called after each step of the episodes.

    Returns ``(plans, score (episodes,), seconds)``: the per-step targets (:class:`Plans`),
    mpc's own score of each episode under ``objective`` and the seconds its run took.

    Raises:
        ValueError: ``env`` has no ``residual_bases``; ``objective`` is no reward name.
    """

    params, iface, base, mpc_params = _teacher_setup(env, family, episodes, objective, True)
    search = settings.plan_search
    mpc = _RecordedMPC(
        tick=on_iteration,
        population=search.population,
        iterations=search.iterations,
        tiering_modes=None,
        objective=objective,
    )
    seeds = np.arange(seed, seed + episodes, dtype=np.uint64)
    t0 = time.perf_counter()
    stats = run_episodes(mpc, mpc_params, seeds)
    seconds = time.perf_counter() - t0
    w = np.stack([t[0] for t in mpc.taken], axis=1)  # (E, S, R, N)
    rate = np.stack([t[1] for t in mpc.taken], axis=1)  # (E, S)
    state = core.reset(params, seeds)[0]
    E, S, R, N = w.shape
    is_cxl = np.repeat(np.asarray(core.hardware(state).is_cxl, dtype=bool), S, axis=0)
    share = dram_share(w.reshape(E * S, R, N), is_cxl).reshape(E, S, R)
    plans = _as_plans(params, iface, base, state, w, rate, share, settings)
    return plans, np.asarray(stats.metrics()[score_metric(objective)], dtype=np.float64), seconds


#: The teachers of :attr:`ImitationSettings.teacher`: what labels the residual with plans.
TEACHERS: dict[str, Callable[..., tuple[Plans, NDArray[np.float64], float]]] = {
    "plan": plan_actions,
    "mpc": mpc_actions,
}


def teacher_actions(
    env: Mapping[str, Any],
    family: str,
    episodes: int,
    seed: int,
    settings: ImitationSettings,
    *,
    objective: str,
    on_iteration: Callable[[], None] | None = None,
) -> tuple[Plans, NDArray[np.float64], float]:
    """The residual targets of ``settings.teacher`` (:data:`TEACHERS`): :func:`plan_actions`
    or :func:`mpc_actions`, same arguments and result."""
    return TEACHERS[settings.teacher](
        env, family, episodes, seed, settings, objective=objective, on_iteration=on_iteration
    )
