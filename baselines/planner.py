"""``planner``: a clairvoyant upper bound that searches each episode's actions on the model itself.

NOT a deployable policy. It is handed the seeds of the episodes it will be
evaluated on (:meth:`Planner.plan_episodes`, which :func:`agents.rollout.run_episodes`
calls before the first step), replays every episode from its seed on the
batched model and searches, by the cross-entropy method (CEM), the
piecewise-constant action sequence that maximises the episode's geometric-mean
performance (or another reward's return: ``objective``, below). It therefore
knows every arrival, phase change and the jitter of the episode in advance:
what it reaches bounds what any policy acting in that environment could
reach with actions of the same form, and evaluation uses it as the top of
the headroom scale ``(policy - dram-first) / (planner - dram-first)``.

What it searches (per episode, ``S = segments`` equal parts of the episode):

- per segment and weight row (tenant slot, or one row with global weights),
  the tenant's DRAM share of new pages, ``x``: ``x > 1`` is local-first
  allocation (all weights 0: Linux's default, what ``dram-first`` does);
  ``0 <= x <= 1`` interleaves ``x`` of new pages over the DRAM nodes nearest
  to where the tenant runs and the rest over the nearest CXL nodes, each tier
  split by firmware bandwidth (:func:`baselines.placement.share_or_local_to_weights`,
  weights in 1/100; with global weights every DRAM and every CXL node);
- per segment, the promotion rate limit: off, or a power of two 1..65536 MB/s;
- per segment, the kernel's tiering mode (:data:`envs.spaces.TIERING_MODES`:
  ``default``, ``tpp``, ``memcg-fair``, ``damon``, ``no-demotion``), the action
  entry an environment built with ``tiering_modes`` has. Per segment, not per
  episode, because the environment itself switches the mode per interval
  (:func:`envs.core.step` applies :func:`envs.model.with_kernel_rows` each step,
  the mechanisms' state carrying over), so a per-segment mode is an action an
  agent can take and the replay applies it exactly as the step does.

So the planner bounds everything the agent's action interface expresses
(weights, promotion rate, tiering mode), and with it every heuristic that is a
(tiering mode, static action) pair: ``dram-first`` and ``numa-tiering``
(``default``), ``tpp`` and ``memcg-fair`` (their modes, local-first at
65536 MB/s), the static ratios and the auto weights, ``dram-first`` with
``demotion=False`` (``no-demotion``).

How the evaluation runs the planner's modes: the planner has ``tiering_modes``
(default all of :data:`~envs.spaces.TIERING_MODES`, ``default`` first), and
:func:`agents.rollout.make_params` builds the evaluation environment with them
(unless ``env_kwargs`` name others: the planner then searches the modes of the
environment it is bound to, only its kernel if it has none); its ``predict``
fills the mode entry with the plan's mode of the segment
(:meth:`HeuristicPolicy._tiering_mode`). The replay and the evaluation thus
run the same kernel rows each interval.

Why this form: the headroom on the shipped scenarios is almost all in each
tenant's DRAM:CXL ratio on bandwidth-contended machines (issue #12); weights
only steer new and churned pages, so a few segments per episode capture the
time variation that matters (a tenant's arrival, a phase), and the promotion
rate is one more knob per segment. The mode matters where a kernel mechanism
beats any placement: memcg-fair's protection on ``colocation-protected``,
TPP's proactive demotion on ``kv-store`` (searched under one kernel the
planner scored 0.777 and 0.843 there on 16 test episodes, below ``memcg-fair``'s
0.856 and ``colloid``'s 0.848; with the modes 0.864 and 0.859).

How: the episode's candidates run as one batch of ``population x episodes``
instances of the model (:func:`envs.model.step` on the rows
:func:`envs.core.reset` draws for the repeated seeds: replay from the seed, not
a cloned state; instances are independent, so a candidate's score is exactly
what the evaluation will measure). Iteration 0 evaluates the seed candidates,
in every mode (mode-major; ``5 x 18`` with the default modes):
local-first with promotion off (``dram-first``) and at the kernel's default
rate (``numa-tiering``'s action), and every DRAM share of ``static-best``'s
ratio grid plus the kernel's auto weights over each tenant's nearest nodes
(:func:`baselines.placement.auto_share`), the same for every segment. The CEM's mean starts at the best of them; each further iteration
samples ``population`` candidates around it (the best so far among them),
keeps the top ``elite_frac`` and moves the mean and spread toward them; each
segment's mode is drawn from a categorical distribution (half on the best
seed's mode, half uniform at first) that moves toward the elites' mode
frequencies. The plan played is the best candidate evaluated, so on each
episode the planner scores at least as well as every seed candidate, and so
as every (mode, static action) heuristic above. Cost: the seeds in every mode
add about 10% (16 ``mixed`` episodes: 11.9 s -> 12.9 s of search; 64: 36 s,
one loaded core).

A scenario's own ``kernel.memcg_limits`` keeps its precedence over every
mode (:func:`envs.model.with_kernel_rows`), as it does for the heuristics.

What it maximises (``objective``, a reward name of :data:`envs.spaces.REWARDS`): by
default ``log-geomean``, the episode's ``geomean_perf`` (the exp of the mean, over the
steps with an active tenant, of the per-step log-geomean term), the evaluation's
headroom metric; with another reward name, the episode's return under that reward (the
sum over the episode's steps of its per-step term, :func:`envs.spaces.reward_terms`),
the record metric ``reward`` of an environment built with that reward. The imitation
warm start plans under the run's reward (:mod:`agents.imitation.objective`).

Deterministic: each episode's random numbers (shares, rates and modes) come
from ``(seed, episode seed)``, so an episode's plan does not depend on the rest
of the batch.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from baselines.placement import SHARE_TOP, auto_share, share_or_local_to_weights, tenant_orders
from baselines.policies import STATIC_KERNEL, STATIC_RATIOS, HeuristicPolicy
from envs import core
from envs.kernel import gcd_reduce
from envs.model import Action, Params, State, with_kernel_rows
from envs.model import step as model_step
from envs.spaces import REWARDS, TIERING_MODES, reward_terms

__all__ = ["SEED_SHARES", "Planner", "check_search", "rollout_scores"]

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

#: DRAM shares of the seed candidates: ``a / (a + b)`` of the static family's DRAM:CXL
#: ratios (:data:`baselines.policies.STATIC_RATIOS`, ``static-best``'s grid), each the
#: same for every tenant and segment, promotion off.
SEED_SHARES: tuple[float, ...] = tuple(a / (a + b) for a, b in STATIC_RATIOS)
LOCAL_FIRST_X = 1.5  # any x > 1 means local-first; the seed's value
X_LO = 0.0  # samples are clipped to X_LO..SHARE_TOP (above 1: local-first)
V_LO = -2.0  # rate variable: v < 0 is promotion off, else 2 ** round(v) MB/s


def check_search(
    who: str,
    counts: Mapping[str, Any],
    elite_frac: float,
    smoothing: float,
    init_std: tuple[float, float],
    weight_scale: int,
    tiering_modes: Sequence[str] | None,
    objective: str,
) -> tuple[str, ...]:
    """The settings of a cross-entropy search on the model (the planner's, ``mpc``'s), checked
    once for both: ``counts`` maps names to integers with their least value (``population``
    2, ``iterations`` 0, others 1); returns the tiering modes as a tuple.

    Raises:
        ValueError: a bad value, named, after ``who``.
    """
    if objective not in REWARDS:
        raise ValueError(
            f"{who} objective: got {objective!r}, expected a reward name of {list(REWARDS)}"
        )
    modes = tuple(tiering_modes or ())
    bad = [m for m in modes if m not in TIERING_MODES]
    if bad or len(set(modes)) != len(modes):
        raise ValueError(
            f"{who} tiering_modes: got {list(modes)}, expected distinct names of "
            f"{list(TIERING_MODES)}"
        )
    least = {"population": 2, "iterations": 0}
    for what, v in {**counts, "weight_scale": weight_scale}.items():
        lo = least.get(what, 1)
        if isinstance(v, bool) or int(v) != v or v < lo:
            raise ValueError(f"{who} {what}: got {v!r}, expected an integer >= {lo}")
    if not 0.0 < elite_frac <= 1.0:
        raise ValueError(f"{who} elite_frac: got {elite_frac}, expected 0 < elite_frac <= 1")
    if not 0.0 < smoothing <= 1.0:
        raise ValueError(f"{who} smoothing: got {smoothing}, expected 0 < smoothing <= 1")
    if len(init_std) != 2 or min(init_std) <= 0:
        raise ValueError(f"{who} init_std: got {init_std}, expected two numbers > 0")
    return modes


class Planner(HeuristicPolicy):
    """``planner``: clairvoyant CEM over piecewise-constant actions, replaying each episode (an upper bound).

    Not deployable: see the module docstring for what it searches and how.
    Call :meth:`plan_episodes` with the evaluation's seeds after :meth:`bind`
    (:func:`agents.rollout.run_episodes` does); ``plan_score`` then holds each
    episode's searched score (``geomean_perf``; the return with another ``objective``),
    ``seed_scores`` the seed candidates'
    (``(episodes, modes x seed actions)``, mode-major; column 0 is ``dram-first``),
    ``seed_modes`` each column's mode, ``plan_mode`` the plan's mode per segment
    (index in ``tiering_modes``), ``plan_share`` its DRAM share per segment and weight
    row (``(episodes, segments, rows)``, above 1: local-first), ``plan_rate_mbps`` its
    promotion rate per segment and ``plan_seconds`` the search's wall time.
    Kernel: :data:`~baselines.policies.STATIC_KERNEL` (the agents' and the
    static policies' environment), with the tiering modes ``tiering_modes``
    as an action entry. Reads no info.

    Args:
        population: candidates per episode and CEM iteration (64).
        iterations: CEM iterations after the seed candidates (12).
        segments: equal parts of the episode with their own action (4).
        elite_frac: share of the population kept as elites (0.25).
        smoothing: weight of the elites' statistics in the mean and spread update (0.7).
        init_std: initial spread of the DRAM share (0.25) and of the rate exponent (4.0).
        weight_scale: resolution of the share-to-weights mapping (100).
        seed: seed of the search's random numbers (0).
        tiering_modes: the kernel tiering modes searched (names of
            :data:`envs.spaces.TIERING_MODES`; default all of them, ``"default"`` first);
            the evaluation environment is built with them (:func:`agents.rollout.make_params`)
            unless its ``env_kwargs`` name others, and the planner searches the modes of the
            environment it is bound to (only its kernel where it has none).
        objective: the episode score maximised (a reward name; ``"log-geomean"``:
            ``geomean_perf``, the others: the episode's return under that reward).
    """

    name = "planner"
    kernel = STATIC_KERNEL
    clairvoyant = True

    def __init__(
        self,
        population: int = 64,
        iterations: int = 12,
        segments: int = 4,
        elite_frac: float = 0.25,
        smoothing: float = 0.7,
        init_std: tuple[float, float] = (0.25, 4.0),
        weight_scale: int = 100,
        seed: int = 0,
        tiering_modes: Sequence[str] | None = tuple(TIERING_MODES),
        objective: str = "log-geomean",
    ) -> None:
        super().__init__()
        modes = check_search(
            "planner",
            {"population": population, "iterations": iterations, "segments": segments},
            elite_frac,
            smoothing,
            init_std,
            weight_scale,
            tiering_modes,
            objective,
        )
        self.objective = objective
        self.population = int(population)
        self.iterations = int(iterations)
        self.segments = int(segments)
        self.elite_frac = float(elite_frac)
        self.smoothing = float(smoothing)
        self.init_std = (float(init_std[0]), float(init_std[1]))
        self.weight_scale = int(weight_scale)
        self.seed = int(seed)
        self.tiering_modes: tuple[str, ...] | None = modes or None
        self._planned = False

    # ------------------------------------------------------------------ binding
    def _bound(self) -> None:
        params = self._p()
        codec = params.codec
        top = math.floor(math.log2(codec.max_promote_mbps))
        levels = np.array([0.0] + [float(2**k) for k in range(top + 1)])
        # the rate each level becomes in the environment (the codec's float32 round trip), so
        # the replay runs exactly the actions the evaluation will run
        zero = np.zeros((levels.size, codec.n_weight_rows, params.n_nodes), dtype=np.int64)
        act, _ = codec.decode(codec.encode_box(zero, levels))
        self.rate_levels = levels
        self.rate_exec = np.asarray(act.promote_mbps, dtype=float)
        self.n_modes = max(len(codec.modes), 1)  # without modes: the environment's kernel only
        self._planned = False

    def _reset(self, mask: NDArray[np.bool_]) -> None:
        k = getattr(self, "_k", None)
        if k is None or k.shape != (self._B,):
            self._k = np.zeros(self._B, dtype=np.int64)
        self._k[mask] = 0

    # ------------------------------------------------------------------ search
    def _decode(self, x: F64, v: F64, hw: core.Hardware) -> tuple[I64, F64, F64]:
        """Candidates (B, S, R) shares and (B, S) rate variables -> integer weights (B, S, R, N),
        the rate levels' nominal MB/s and the MB/s the environment runs (B, S)."""
        B, S, R = x.shape
        N = hw.is_cxl.shape[1]
        bw = np.repeat(hw.firmware_gbps, S, axis=0)
        cxl = np.repeat(hw.is_cxl, S, axis=0)
        order = tenant_orders(hw, R)  # each row's nearest nodes (None: global weights)
        w = share_or_local_to_weights(
            x.reshape(B * S, R),
            bw,
            cxl,
            self.weight_scale,
            None if order is None else np.repeat(order, S, axis=0),
            np.repeat(hw.socket, S, axis=0),
        )
        w = gcd_reduce(w.reshape(B, S, R, N))  # a local-first row stays all zero
        top = self.rate_levels.size - 1
        j = np.where(v < 0.0, 0, 1 + np.clip(np.rint(v), 0, top - 1).astype(np.int64))
        return w, self.rate_levels[j], self.rate_exec[j]

    def _segment(self, k: I64, steps: I64) -> I64:
        return np.minimum(k * self.segments // np.maximum(steps, 1), self.segments - 1)

    def _scores(self, seeds: NDArray[np.uint64], x: F64, v: F64, m: I64) -> F64:
        """Each candidate's episode score (B,; ``geomean_perf``, or the return under another
        ``objective``): episode ``seeds`` (B,) replayed on the model under candidate shares ``x``
        (B, S, R), rate variables ``v`` (B, S) and tiering modes ``m`` (B, S), each interval's
        mode applied as :func:`envs.core.step` applies it."""
        params = self._p()
        table = params.mode_table
        state, _ = core.reset(params, seeds)
        inst, ms = state.instance, state.model
        hw = core.hardware(state)
        w, _, rate = self._decode(x, v, hw)
        B, T, N = seeds.size, params.n_tenants, params.n_nodes
        w = np.broadcast_to(w, (B, self.segments, T, N)) if w.shape[2] == 1 else w
        steps = np.asarray(inst.episode_steps, dtype=np.int64)
        return rollout_scores(
            inst,
            ms,
            table,
            w.astype(float),
            rate,
            m,
            steps,
            lambda k: self._segment(np.full(B, k), steps),
            self.objective,
        )

    def _seed_candidates(self, hw: core.Hardware, R: int) -> tuple[F64, F64, I64]:
        """(E, K, S, R) shares, (E, K, S) rate variables and (E, K, S) modes of the seed
        candidates: every seed action in every mode, mode-major."""
        E, S = hw.is_cxl.shape[0], self.segments
        # the auto weights over each row's nearest nodes (E, R)
        auto, _ = auto_share(hw.firmware_gbps, hw.is_cxl, R, tenant_orders(hw, R), hw.socket)
        shares = [np.full((E, R), LOCAL_FIRST_X), np.full((E, R), LOCAL_FIRST_X)]
        rates = [V_LO, math.log2(self.rate_levels[-1])]  # dram-first; numa-tiering's action
        for s in (*SEED_SHARES, None):
            shares.append(auto if s is None else np.full((E, R), s))
            rates.append(V_LO)
        M = self.n_modes
        x1 = np.stack(shares, 1)  # (E, K1, R)
        K = M * x1.shape[1]
        x = np.broadcast_to(np.tile(x1, (1, M, 1))[:, :, None, :], (E, K, S, R)).copy()
        v = np.broadcast_to(np.tile(rates, M)[None, :, None], (E, K, S)).copy()
        m = np.broadcast_to(np.repeat(np.arange(M), len(rates))[None, :, None], (E, K, S)).copy()
        return x, v, m

    def plan_episodes(self, seeds: Any, on_iteration: Callable[[], None] | None = None) -> None:
        """Search the plan of each episode ``seeds[i]`` (one per bound instance); clairvoyant.

        ``on_iteration`` (a progress display) is called after the seed candidates and after
        each CEM iteration (``1 + iterations`` calls).
        """
        params = self._p()
        seeds = np.asarray([int(s) for s in np.asarray(seeds).reshape(-1)], dtype=np.uint64)
        if seeds.size != self._B:
            raise ValueError(
                f"planner: got {seeds.size} episode seeds, the policy is bound to {self._B} instances"
            )
        t0 = time.perf_counter()
        E, S, R = seeds.size, self.segments, params.codec.n_weight_rows
        state, _ = core.reset(params, seeds)
        hw = core.hardware(state)
        x0, v0, m0 = self._seed_candidates(hw, R)
        K, M = x0.shape[1], self.n_modes
        sc0 = self._scores(
            np.repeat(seeds, K), x0.reshape(E * K, S, R), v0.reshape(E * K, S), m0.reshape(E * K, S)
        )
        sc0 = np.where(np.isnan(sc0), -np.inf, sc0).reshape(E, K)
        self.seed_scores = sc0.copy()
        self.seed_modes = m0[0, :, 0].copy()
        if on_iteration is not None:
            on_iteration()
        best = np.argmax(sc0, axis=1)  # first best: dram-first on ties
        e = np.arange(E)
        bx, bv, bm, bs = x0[e, best], v0[e, best], m0[e, best], sc0[e, best]
        mx = np.clip(bx, X_LO, SHARE_TOP)
        mv = bv.copy()
        sx = np.full_like(mx, self.init_std[0])
        sv = np.full_like(mv, self.init_std[1])
        # the modes' categorical distribution per segment (E, S, M): half on the best seed's
        # mode, half uniform; the CEM moves it toward the elites' frequencies
        pm = 0.5 * (np.arange(M) == bm[..., None]) + 0.5 / M
        rngs = [np.random.default_rng([self.seed, int(s)]) for s in seeds]
        P = self.population
        n_elite = max(1, round(self.elite_frac * P))
        a = self.smoothing
        for _ in range(self.iterations):
            zx = np.stack([g.standard_normal((P, S, R)) for g in rngs])  # (E, P, S, R)
            zv = np.stack([g.standard_normal((P, S)) for g in rngs])
            um = np.stack([g.random((P, S)) for g in rngs])
            cx = np.clip(mx[:, None] + sx[:, None] * zx, X_LO, SHARE_TOP)
            cv = np.clip(mv[:, None] + sv[:, None] * zv, V_LO, math.log2(self.rate_levels[-1]))
            cdf = np.cumsum(pm, axis=-1)  # (E, S, M): inverse-CDF draws of the modes
            cm = np.minimum((um[..., None] >= cdf[:, None]).sum(-1), M - 1)
            cx[:, 0], cv[:, 0], cm[:, 0] = (
                bx,
                bv,
                bm,
            )  # the best so far (re-evaluated: deterministic)
            sc = self._scores(
                np.repeat(seeds, P),
                cx.reshape(E * P, S, R),
                cv.reshape(E * P, S),
                cm.reshape(E * P, S),
            )
            sc = np.where(np.isnan(sc), -np.inf, sc).reshape(E, P)
            order = np.argsort(-sc, axis=1, kind="stable")
            el = order[:, :n_elite]
            ex = np.take_along_axis(cx, el[:, :, None, None], axis=1)
            ev = np.take_along_axis(cv, el[:, :, None], axis=1)
            em = np.take_along_axis(cm, el[:, :, None], axis=1)  # (E, n_elite, S)
            mx = a * ex.mean(1) + (1 - a) * mx
            mv = a * ev.mean(1) + (1 - a) * mv
            sx = a * ex.std(1) + (1 - a) * sx
            sv = a * ev.std(1) + (1 - a) * sv
            pm = a * (em[..., None] == np.arange(M)).mean(1) + (1 - a) * pm
            top = order[:, 0]
            better = sc[e, top] > bs
            bx = np.where(better[:, None, None], cx[e, top], bx)
            bv = np.where(better[:, None], cv[e, top], bv)
            bm = np.where(better[:, None], cm[e, top], bm)
            bs = np.where(better, sc[e, top], bs)
            if on_iteration is not None:
                on_iteration()
        w, nominal, _ = self._decode(bx, bv, hw)
        self.plan_share = bx  # (E, S, R) DRAM shares (above 1: local-first)
        self.plan_weights = w  # (E, S, R, N) integer weights
        self.plan_rate_mbps = nominal  # (E, S) MB/s as the codec encodes them
        self.plan_mode = bm.astype(np.int64)  # (E, S) index in the environment's modes
        self.plan_score = np.where(np.isfinite(bs), bs, np.nan)
        self.plan_steps = np.asarray(state.instance.episode_steps, dtype=np.int64)
        self.plan_seconds = time.perf_counter() - t0
        self._planned = True
        self._reset(np.ones(self._B, dtype=bool))

    # ------------------------------------------------------------------ acting
    def _decide(self, obs: NDArray) -> tuple[I64, F64]:
        if not self._planned:
            raise RuntimeError(
                "planner: no plan; it is clairvoyant and must be given the episodes' seeds: "
                "plan_episodes(seeds) after bind (agents.rollout.run_episodes does this)"
            )
        rows = np.arange(self._B)
        seg = self._segment(self._k, self.plan_steps)
        self._k = self._k + 1
        self._mode_now = self.plan_mode[rows, seg]
        return self.plan_weights[rows, seg], self.plan_rate_mbps[rows, seg]

    def _tiering_mode(self) -> NDArray[np.int64] | int:
        return self._mode_now


def rollout_scores(
    inst: Params,
    ms: State,
    table: dict[str, NDArray[Any]] | None,
    weights: F64,
    rate: F64,
    modes: I64,
    steps: I64,
    segment: Callable[[int], I64],
    objective: str = "log-geomean",
) -> F64:
    """Each instance's score (B,) over its next ``steps`` (B,) intervals from model state ``ms``.

    The instances (``inst``, batch-last :class:`~envs.model.Params`, and ``ms``) run their
    candidate actions: interval ``k`` (counted from ``ms``) plays segment ``segment(k)``
    (B,) of the weights ``weights`` (B, S, T, N, floats), rates ``rate`` (B, S, MB/s as the
    environment runs them) and tiering modes ``modes`` (B, S, indices into ``table``, the
    environment's :attr:`~envs.core.EnvParams.mode_table`; ``None``: the instances' own
    kernel), each interval's mode applied as :func:`envs.core.step` applies it. The score
    is what the planner maximises (``objective``, a reward name): with ``"log-geomean"``
    the exp of the mean, over the counted intervals with an active tenant, of the per-step
    log-geomean term (``geomean_perf``; NaN with none), otherwise the sum of the reward's
    per-step term. The planner scores whole episodes replayed from their seeds with it; the
    causal ``mpc`` (:mod:`baselines.mpc`) a horizon from the present state.
    """
    B = steps.shape[0]
    peak = inst.machine_totals[2]  # the reward's peak, as the environment's
    rows = np.arange(B)
    logsum = np.zeros(B)
    n = np.zeros(B, dtype=np.int64)
    ret = np.zeros(B)  # another objective's return
    for k in range(int(steps.max())):
        seg = segment(k)
        act = Action(weights=weights[rows, seg], promote_mbps=rate[rows, seg])
        kin = inst if table is None else with_kernel_rows(inst, table, modes[rows, seg])
        ms, out = model_step(kin, ms, act, check=False)
        terms = reward_terms(out, peak)
        if objective != "log-geomean":
            ret += np.where(k < steps, terms[objective], 0.0)
            continue
        has = (k < steps) & out.tenant_active.any(axis=1)
        logsum += np.where(has, terms["log-geomean"], 0.0)
        n += has
    if objective != "log-geomean":
        return ret
    return np.where(n > 0, np.exp(logsum / np.maximum(n, 1)), np.nan)
