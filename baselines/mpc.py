"""``mpc``: a causal model-predictive controller, the planner's search over a receding horizon.

Where the clairvoyant ``planner`` (:mod:`baselines.planner`) replays each whole episode
from its seed and so knows every arrival, phase change and departure, ``mpc`` decides
from the present alone. Every ``every`` intervals (and at an interval where a tenant
arrives or leaves, with ``on_change``) it takes the present state of each
instance (the page placement per hotness bucket and node, the hotness thresholds, the
scanner's and kswapd's state, the tenants' episode factors: the model's
:class:`~envs.model.State`), keeps only the tenants that run in the interval about to
start, each held in the phase it is in and at the working set it has now (no arrival,
phase change, growth or departure: :func:`present_params`), rolls copies of that state
forward ``horizon`` intervals on the calibrated model under candidate actions and plays
the best: per weight row (tenant slot, or one row with global weights) the DRAM share of
new pages, the promotion rate limit and the kernel's tiering mode, held until the next
decision.

The candidates are the planner's (:meth:`baselines.planner.Planner._seed_candidates`:
``dram-first``, NUMA balancing at the kernel's rate, ``static-best``'s ratio grid and the
auto weights, in every tiering mode), plus the action in force, scored first so that it
is kept on ties; then ``iterations`` rounds of the planner's cross-entropy search
(``population`` candidates around the best so far, per-row shares and the rate exponent
Gaussian, the mode categorical) over one segment. Shares map to weights and rates to
the environment's levels exactly as the planner maps them (its ``_decode``), and a
horizon is scored by the planner's own function (:func:`baselines.planner.rollout_scores`),
so the objective is the planner's: ``geomean_perf`` over the horizon by default, another
reward's return with ``objective``. What it knows beyond a kernel is the calibrated model
and its exact present state, never the future: tests/baselines/test_mpc.py shows that two
episodes identical up to an interval get identical actions up to it.

How it sees the present state: :func:`agents.rollout.run_episodes` hands it the
episodes' seeds before the first step (the hook the planner plans with,
:class:`envs.policy.Clairvoyant`); it resets a copy of the environment's episodes with
them (:func:`envs.core.reset`, as the environment does) and steps the copy with each
action it returns (:func:`envs.core.step_autoreset`, as the loop does), so the copy is the
environment's state, interval by interval. It decides from the copy's present only
(:func:`present_params`), and checks every observed step against the copy (a loop that
steps the environment with other actions is refused with an error).

Batched: the candidates of every instance that decides run as one batch of the model
(``instances x candidates``); each instance's random numbers come from
``(seed, its episode's model key, the interval)``, so an instance's actions do not depend on
the rest of the batch, and a run is deterministic.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from baselines.placement import SHARE_TOP, dram_share
from baselines.planner import V_LO, X_LO, Planner, check_search, rollout_scores
from baselines.policies import STATIC_KERNEL, HeuristicPolicy
from envs import core
from envs.model import Params, State, with_kernel_rows
from envs.records import record
from envs.spaces import TIERING_MODES

__all__ = ["MPC", "present_params"]

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]


def present_params(p: Params, t: I64, jit_ws: F64) -> Params:
    """The instances' parameters (batch-last) with only what is known at step ``t`` (B,).

    The tenant slots that run in the interval starting at ``t`` intervals (present,
    started, not stopped) stay, run to infinity and stay in the phase they are in then
    (the later phases' start times become infinite, so their values are never read);
    every other slot is left out (a tenant that has not arrived yet is not there). A
    tenant's working set is held at its size now: the growth of its phase so far is
    folded into the working set (over its episode factor ``jit_ws`` (T, B), the model
    state's ``jit[2]``) and its growth rate set to 0. The machine, the kernel and each
    tenant's current demand are kept.
    """
    now = t * p.interval_s  # (B,)
    run = p.present & (p.start_s <= now) & (now < p.stop_s)  # (T, B)
    started = (p.phase_at <= now[None, None, :]).sum(axis=1)  # (T, B)
    phase = np.maximum(started - 1, 0)
    q = np.arange(p.n_phases)[None, :, None]
    later = q > phase[:, None, :]  # (T, P, B)
    # the growth so far, folded into the working set of the phase in force (and of every
    # phase: the later ones are never reached, the earlier ones never again)
    at = np.take_along_axis(p.phase_at, phase[:, None, :], axis=1)[:, 0]  # (T, B)
    grow = np.take_along_axis(p.grow_gib_per_s, phase[:, None, :], axis=1)[:, 0]
    ws = np.take_along_axis(p.working_set_gib, phase[:, None, :], axis=1)[:, 0]
    grown = np.where(run, grow * np.maximum(now[None, :] - np.where(run, at, 0.0), 0.0), 0.0)
    grown = grown / np.maximum(jit_ws, 1e-12)
    return dataclasses.replace(
        p,
        present=run,
        stop_s=np.where(run, np.inf, p.stop_s),
        phase_at=np.where(later, np.inf, p.phase_at),
        grow_gib_per_s=np.zeros_like(p.grow_gib_per_s),
        working_set_gib=np.broadcast_to((ws + grown)[:, None, :], p.working_set_gib.shape).copy(),
    )


def _state_rows(s: State, idx: I64) -> State:
    """The model state of batch elements ``idx`` (copies; repeated indices repeat)."""
    return record(State, {f.name: getattr(s, f.name)[..., idx] for f in dataclasses.fields(s)})


def _hardware_rows(hw: core.Hardware, idx: I64) -> core.Hardware:
    """The :class:`~envs.core.Hardware` view of instances ``idx``."""
    return dataclasses.replace(
        hw,
        **{
            f.name: getattr(hw, f.name)[idx]
            for f in dataclasses.fields(hw)
            if isinstance(getattr(hw, f.name), np.ndarray)
        },
    )


class MPC(HeuristicPolicy):
    """``mpc``: every ``every`` intervals, the planner's search over a ``horizon`` from the
    present state with the tenants present now (causal; see the module docstring).

    Not deployable on a host (it needs the model's state of every page bucket), but it
    knows nothing of the future: the causal reference a learned policy is measured
    against beside the clairvoyant ``planner``. After each decision ``last_score`` (B,)
    holds the predicted horizon score of the action played (NaN where the instance did not
    decide) and ``decisions`` counts the decisions taken.

    Args:
        every: intervals between decisions (10); the action is held in between.
        horizon: intervals each candidate is rolled forward (20).
        population: candidates per instance and search round (48).
        iterations: search rounds after the seed candidates (3).
        on_change: also decide at an interval whose running tenants differ from those of
            the last decision (an arrival or a departure: a cgroup created or emptied, which
            a kernel sees) (True).
        elite_frac: share of a round's candidates kept as elites (0.25).
        smoothing: weight of the elites' statistics in the mean and spread update (0.7).
        init_std: initial spread of the DRAM share (0.2) and of the rate exponent (3.0).
        weight_scale: resolution of the share-to-weights mapping (100, the planner's).
        seed: seed of the search's random numbers (0).
        tiering_modes: the kernel tiering modes searched (the planner's default: all of
            :data:`envs.spaces.TIERING_MODES`); the evaluation environment is built with them.
        objective: the horizon score maximised (a reward name; ``"log-geomean"``:
            ``geomean_perf``), as the planner's ``objective``.
    """

    name = "mpc"
    kernel = STATIC_KERNEL
    clairvoyant = False

    def __init__(
        self,
        every: int = 10,
        horizon: int = 20,
        population: int = 48,
        iterations: int = 3,
        on_change: bool = True,
        elite_frac: float = 0.25,
        smoothing: float = 0.7,
        init_std: tuple[float, float] = (0.2, 3.0),
        weight_scale: int = 100,
        seed: int = 0,
        tiering_modes: Sequence[str] | None = tuple(TIERING_MODES),
        objective: str = "log-geomean",
    ) -> None:
        super().__init__()
        modes = check_search(
            "mpc",
            {
                "every": every,
                "horizon": horizon,
                "population": population,
                "iterations": iterations,
            },
            elite_frac,
            smoothing,
            init_std,
            weight_scale,
            tiering_modes,
            objective,
        )
        self.every = int(every)
        self.on_change = bool(on_change)
        self.horizon = int(horizon)
        self.population = int(population)
        self.iterations = int(iterations)
        self.elite_frac = float(elite_frac)
        self.smoothing = float(smoothing)
        self.init_std = (float(init_std[0]), float(init_std[1]))
        self.weight_scale = int(weight_scale)
        self.seed = int(seed)
        self.objective = objective
        self.tiering_modes: tuple[str, ...] | None = modes or None
        self.decisions = 0
        self._env: core.EnvState | None = None
        self._copy_out: F64 | None = None

    # ------------------------------------------------------------------ binding
    def _bound(self) -> None:
        params = self._p()
        # the planner's candidates and their mapping to actions (one segment: the horizon)
        self._search = Planner(
            segments=1,
            weight_scale=self.weight_scale,
            seed=self.seed,
            tiering_modes=self.tiering_modes,
            objective=self.objective,
        )
        self._search.bind(params, self._B)
        self.n_modes = max(len(params.codec.modes), 1)
        self._env = None
        self._copy_out = None
        self._k: I64 = np.zeros(0, dtype=np.int64)  # sized again for this binding by _reset

    def _reset(self, mask: NDArray[np.bool_]) -> None:
        B, R, N = self._B, self.n_rows, self.n_nodes
        if self._k.shape != (B,):
            self._k = np.zeros(B, dtype=np.int64)
            self._w = np.zeros((B, R, N), dtype=np.int64)
            self._rate = np.zeros(B)
            self._mode = np.zeros(B, dtype=np.int64)
            self.last_score = np.full(B, np.nan)
            self._running = np.zeros((B, self._p().n_tenants), dtype=bool)
        self._k[mask] = 0
        self._running[mask] = False
        self._w[mask] = 0  # an episode starts local-first, promotion off: the env's reset
        self._rate[mask] = 0.0
        self._mode[mask] = 0

    def plan_episodes(self, seeds: Any) -> None:
        """Start the copy of the environment's episodes ``seeds`` (one per bound instance):
        :func:`envs.core.reset` with them, as the environment is reset. Nothing is planned:
        each decision reads the copy's present (:func:`present_params`)."""
        params = self._p()
        seeds = np.asarray([int(s) for s in np.asarray(seeds).reshape(-1)], dtype=np.uint64)
        if seeds.size != self._B:
            raise ValueError(
                f"mpc: got {seeds.size} episode seeds, the policy is bound to {self._B} instances"
            )
        self._env, _ = core.reset(params, seeds)
        self._copy_out = None
        self._reset(np.ones(self._B, dtype=bool))

    def track(self, state: core.EnvState) -> None:
        """Take ``state`` as the environment's present state (instead of the seeds' copy):
        for a caller that steps the environment itself and hands its state over before each
        :meth:`predict`."""
        if state.num_envs != self._B:
            raise ValueError(
                f"mpc: got a state of {state.num_envs} instances, the policy is bound to {self._B}"
            )
        self._env = state
        self._copy_out = None

    # ------------------------------------------------------------------ acting
    def predict(
        self,
        observation: NDArray,
        state: Any = None,
        episode_start: NDArray | None = None,
        deterministic: bool = True,
    ) -> tuple[NDArray[np.float32], Any]:
        """The batch's actions; the copy of the environment then runs them (as the loop will)."""
        if self._env is None:
            raise RuntimeError(
                "mpc: no copy of the environment's state; hand it the episodes' seeds with "
                "plan_episodes(seeds) after bind (agents.rollout.run_episodes does this), or "
                "the environment's state with track(state) before each predict"
            )
        act, st = super().predict(observation, state, episode_start, deterministic)
        params = self._p()
        self._env, _, _, _, _, m, _ = core.step_autoreset(
            params, self._env, np.asarray(act).reshape(self._B, -1)
        )
        self._copy_out = m.tenant_throughput_gbps
        return act, st

    def _observe(self, info: Any) -> None:
        seen = np.asarray(info["tenant_throughput_gbps"])
        if self._copy_out is not None and not np.array_equal(seen, self._copy_out, equal_nan=True):
            raise RuntimeError(
                "mpc: the environment's step differs from the copy that ran mpc's actions; "
                "step the environment with mpc's actions (agents.rollout.run_episodes) or hand "
                "it the environment's state with track(state)"
            )

    def _decide(self, obs: NDArray) -> tuple[I64, F64]:
        due_now = self._k % self.every == 0
        if self.on_change and self._env is not None:
            p, now = self._env.instance, self._env.model.t * self._env.instance.interval_s
            running = (p.present & (p.start_s <= now) & (now < p.stop_s)).T  # (B, T)
            due_now |= (running != self._running).any(axis=1)
            self._running = np.where(due_now[:, None], running, self._running)
        due = np.flatnonzero(due_now)
        self._k = self._k + 1
        self.last_score = np.full(self._B, np.nan)
        if due.size:
            w, rate, mode, score = self.decide(due)
            self._w[due], self._rate[due], self._mode[due] = w, rate, mode
            self.last_score[due] = score
            self.decisions += int(due.size)
        return self._w.copy(), self._rate.copy()

    def _tiering_mode(self) -> NDArray[np.int64] | int:
        return self._mode.copy()

    # ------------------------------------------------------------------ search
    def decide(self, idx: I64) -> tuple[I64, F64, I64, F64]:
        """The search for instances ``idx`` of the present state: their integer weights
        (n, R, N), promotion rates (n,, MB/s as the codec encodes them), tiering modes (n,)
        and predicted horizon scores (n,)."""
        if self._env is None:
            raise RuntimeError("mpc: no state to decide from (plan_episodes or track first)")
        env = self._env
        idx = np.asarray(idx, dtype=np.int64)
        n, R, M = idx.size, self.n_rows, self.n_modes
        search = self._search
        model = _state_rows(env.model, idx)
        inst = present_params(env.instance.subset(idx), model.t, model.jit[2])
        hw = _hardware_rows(core.hardware(env), idx)

        # seed candidates: the action in force first (kept on ties), then the planner's
        x0, v0, m0 = search._seed_candidates(hw, R)  # (n, K, 1, R), (n, K, 1) x2
        w_now, r_now, m_now = self._w[idx], self._rate[idx], self._mode[idx]
        x_now = np.minimum(dram_share(w_now, hw.is_cxl), SHARE_TOP)  # (n, R)
        v_now = np.where(r_now > 0, np.log2(np.maximum(r_now, 1.0)), V_LO)
        x0 = np.concatenate([x_now[:, None, None], x0], axis=1)[:, :, 0]  # (n, K, R)
        v0 = np.concatenate([v_now[:, None], v0[:, :, 0]], axis=1)  # (n, K)
        m0 = np.concatenate([m_now[:, None], m0[:, :, 0]], axis=1)
        sc0 = self._score(inst, model, hw, x0, v0, m0, exact=(w_now, r_now))
        best = np.argmax(sc0, axis=1)  # first best: the action in force on ties
        e = np.arange(n)
        bx, bv, bm, bs = x0[e, best], v0[e, best], m0[e, best], sc0[e, best]

        # the planner's CEM, one segment, around the best so far
        rngs = [
            np.random.default_rng([self.seed, int(k), int(t)])
            for k, t in zip(model.key, model.t, strict=True)
        ]
        P = self.population
        n_elite = max(1, round(self.elite_frac * P))
        a = self.smoothing
        top_v = math.log2(search.rate_levels[-1])
        mx, mv = np.clip(bx, X_LO, SHARE_TOP), bv.copy()
        sx = np.full_like(mx, self.init_std[0])
        sv = np.full_like(mv, self.init_std[1])
        pm = 0.5 * (np.arange(M) == bm[:, None]) + 0.5 / M  # (n, M)
        for _ in range(self.iterations):
            zx = np.stack([g.standard_normal((P, R)) for g in rngs])  # (n, P, R)
            zv = np.stack([g.standard_normal(P) for g in rngs])
            um = np.stack([g.random(P) for g in rngs])
            cx = np.clip(mx[:, None] + sx[:, None] * zx, X_LO, SHARE_TOP)
            cv = np.clip(mv[:, None] + sv[:, None] * zv, V_LO, top_v)
            cdf = np.cumsum(pm, axis=-1)  # (n, M)
            cm = np.minimum((um[..., None] >= cdf[:, None]).sum(-1), M - 1)
            sc = self._score(inst, model, hw, cx, cv, cm)
            order = np.argsort(-sc, axis=1, kind="stable")
            el = order[:, :n_elite]
            ex = np.take_along_axis(cx, el[:, :, None], axis=1)
            ev = np.take_along_axis(cv, el, axis=1)
            em = np.take_along_axis(cm, el, axis=1)
            mx = a * ex.mean(1) + (1 - a) * mx
            mv = a * ev.mean(1) + (1 - a) * mv
            sx = a * ex.std(1) + (1 - a) * sx
            sv = a * ev.std(1) + (1 - a) * sv
            pm = a * (em[..., None] == np.arange(M)).mean(1) + (1 - a) * pm
            top = order[:, 0]
            better = sc[e, top] > bs
            bx = np.where(better[:, None], cx[e, top], bx)
            bv = np.where(better, cv[e, top], bv)
            bm = np.where(better, cm[e, top], bm)
            bs = np.where(better, sc[e, top], bs)

        w, nominal, _ = search._decode(bx[:, None], bv[:, None], hw)  # (n, 1, R, N), (n, 1)
        w, nominal = w[:, 0], nominal[:, 0]
        # the action in force, where it won, exactly as it is (not re-decoded)
        kept = (bx == x0[:, 0]).all(axis=1) & (bv == v0[:, 0]) & (bm == m0[:, 0])
        w = np.where(kept[:, None, None], w_now, w)
        nominal = np.where(kept, r_now, nominal)
        return w, nominal, bm.astype(np.int64), np.where(np.isfinite(bs), bs, np.nan)

    def _score(
        self,
        inst: Params,
        model: State,
        hw: core.Hardware,
        x: F64,
        v: F64,
        m: I64,
        exact: tuple[I64, F64] | None = None,
    ) -> F64:
        """Horizon scores (n, C) of candidates ``x`` (n, C, R) shares, ``v`` (n, C) rate
        variables and ``m`` (n, C) modes from the present ``inst``/``model`` (n instances);
        with ``exact``, candidate 0 plays those weights (n, R, N) and nominal rates (n,)
        as they are. -inf where no tenant runs over the horizon."""
        params = self._p()
        n, C, R = x.shape
        T, N, H = params.n_tenants, params.n_nodes, self.horizon
        w, _, rate = self._search._decode(x, v, hw)  # (n, C, R, N) ints, (n, C) MB/s run
        if exact is not None:
            w[:, 0] = exact[0]
            rate[:, 0] = self._search.rate_exec[np.searchsorted(self._search.rate_levels, exact[1])]
        rep = np.repeat(np.arange(n), C)
        w = w.reshape(n * C, 1, R, N)
        w = np.broadcast_to(w, (n * C, 1, T, N)) if R == 1 else w
        kin = inst.subset(rep)
        table = params.mode_table
        if table is not None:  # the mode held over the horizon: the kernel rows once
            kin = with_kernel_rows(kin, table, m.reshape(-1))
        zero = np.zeros(n * C, dtype=np.int64)
        sc = rollout_scores(
            kin,
            _state_rows(model, rep),
            None,
            w.astype(float),
            rate.reshape(n * C, 1),
            zero[:, None],
            np.full(n * C, H, dtype=np.int64),
            lambda k: zero,
            self.objective,
        )
        return np.where(np.isnan(sc), -np.inf, sc).reshape(n, C)
