"""``adaptive``: an online selector of the heuristics, a causal reference a learned policy must beat.

What a careful operator (or an ARMS-like runtime: adapt instead of trusting one fixed
setting) would do with the kernel's own heuristics and no learning: try each heuristic
for a few intervals, keep the one whose measured performance was best, and try them all
again when what it measures changes. It knows nothing a running host could not know: no
future arrival, phase or departure, no replay; every decision is a function of the
observations and metrics of the steps already run (causal), so it is deployable in the
catalogue's sense (as ``caption``, which reads the same signal).

How (per instance of the batch, all state arrays with the batch axis first):

- **Candidates**: by default the catalogue's deployable heuristics
  (``catalogue.names(kind="heuristic", deployable=True)``; the selector's own kind is
  ``selector``) whose kernel configuration is a tiering mode of the environment
  (:data:`envs.spaces.TIERING_MODES`: ``tpp`` and ``colloid`` run ``tpp``, ``memcg-fair``
  its mode, ``damon-tiering`` ``damon``, the rest ``default``); the selector's
  ``tiering_modes`` are all of them, so evaluation builds its environment with the mode
  entry and each step's action carries the kept candidate's mode. Every candidate is
  bound to the same environment and observes every step's metrics, whether it is in
  force or not (its controller runs on the counters, as a kernel daemon would; only the
  action in force is the selected one's).
- **Signal** (``signal``): ``"norm-perf"`` (default), the geometric mean over the running
  tenants of ``tenant_norm_perf``, each tenant's performance over the same tenant alone
  in local DRAM: the model's reported per-step performance, the quantity the episode is
  scored on and the estimate ``caption`` hill-climbs on, so every heuristic may see it.
  ``"throughput"``: the geometric mean of the running tenants' ``tenant_throughput_gbps``
  (their memory traffic, what resctrl MBM counts on a host; a real host can measure it
  without the simulator's normalisation, at the price of comparing intervals whose
  demand may differ).
- **Trials**: a test round is a tournament of the candidates against the one in force
  (the incumbent; at an episode's start the first in catalogue order): the incumbent runs
  ``trial_steps`` intervals, then a challenger (the others in catalogue order, each once)
  runs as many; the first ``settle_steps`` intervals of a trial are not scored (pages
  placed under the previous candidate are still where it put them) and the rest are
  averaged. A challenger that scores more than ``min_gain`` (relative) above the
  incumbent's last trial becomes the incumbent; after a loss the incumbent runs another
  trial before the next challenger, so that each challenger is compared with the
  incumbent measured just before it, in the state it inherits (a challenger run after
  one that promoted pages would otherwise win on its predecessor's work). After the last
  challenger the incumbent is kept. A round takes at most ``2 * (C - 1) * trial_steps +
  trial_steps`` intervals for ``C`` candidates.
- **Re-test**: a new round starts, from the candidate kept, when the set of running
  tenants changes (an arrival or a departure; also in the middle of a round, whose
  scores would no longer compare) or when the kept candidate's signal, smoothed by an
  EWMA (``ewma_alpha``), moves more than ``change_threshold`` (relative) from its
  level. The level is the signal at the ``settle_steps + 1``-th kept interval (after
  the pages the last trial placed have settled), not the trial's score, which was
  measured from another candidate's placement. A step with no running tenant changes
  nothing.

What it cannot do: a candidate acts through the weights of new pages and through
migration; the pages a tenant placed while another candidate was in force stay where they
were put until migration moves them. Where a tenant places its whole footprint in its first
interval (``mlc-bandwidth``, ``fallback-hotspot-prefix``) every later trial measures the same
placement, the trials tie and the first incumbent (``dram-first``, Linux's default before
anything is measured) is kept: it scores what that first candidate scores there.

Constants: ARMS (Yadalam et al., "ARMS: Adaptive and Robust Memory Tiering System",
arXiv 2508.04417, 2025) tunes hot/cold thresholds from short- and long-term moving
averages and a cost/benefit rule; it is not a selector of heuristics and gives no
constants for one, so ``trial_steps``, ``settle_steps``, ``min_gain``, ``change_threshold``
and ``ewma_alpha`` are this module's choices. ``trial_steps``, ``settle_steps`` and
``min_gain`` were chosen on the ``val`` split of the generator's ``gen-*`` families and
``mixed-2s``/``mixed-4cxl`` (8 episodes each; never the shipped scenarios or a ``test``
split), among one-, two- and four-interval trials (two and four with half unscored) and
gains 0 and 1%: geometric-mean ratio to ``dram-first`` 1.061 (1, 0, 0), 1.053 (1, 0, 1%),
1.053 (2, 1, 0), 1.047 (2, 1, 1%), 1.026 (4, 2, 1%); shorter rounds pay because a tenant's
first pages stay where the candidate in force put them (docs/experiments/2026-12-06-adaptive.md).
``change_threshold`` 0.05 scored 1.060 there, the ``throughput`` signal 1.058.

Kernel: :data:`~baselines.policies.STATIC_KERNEL` (the environment's default), modes
over it. Reads info: every candidate's keys, ``tenant_active`` and the signal's key.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from baselines import catalogue
from baselines.policies import STATIC_KERNEL, HeuristicPolicy, make_policy
from envs.core import Hardware, Metrics
from envs.spaces import TIERING_MODES, tiering_mode_of

__all__ = ["SIGNALS", "Adaptive", "default_candidates"]

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

#: The measures of performance the selector can compare candidates on, by the metric each reads.
SIGNALS: dict[str, str] = {"norm-perf": "tenant_norm_perf", "throughput": "tenant_throughput_gbps"}


def default_candidates() -> list[str]:
    """The catalogue's deployable single heuristics (kind ``heuristic``: not ``adaptive``,
    whose kind is ``selector``), less any policy of this module should one be listed so."""
    return [
        n
        for n in catalogue.names(kind="heuristic", deployable=True)
        if not catalogue.entry(n).factory.startswith(__name__ + ":")
    ]


class Adaptive(HeuristicPolicy):
    """``adaptive``: try the heuristics a few intervals each, keep the best, re-test on change.

    See the module docstring for the algorithm and its signal.

    Args:
        candidates: heuristic names (``make_policy`` names) to choose among; None (default):
            :func:`default_candidates`, those whose kernel the environment cannot run left
            out. A name given here whose kernel is not a tiering mode of the environment is
            an error at ``bind``.
        trial_steps: intervals of a trial (1: with ten candidates a round takes 10 to 19
            intervals).
        settle_steps: first intervals of a trial (and of a kept period) not scored (0).
            ``0 <= settle_steps < trial_steps``.
        min_gain: how much better (relative) a challenger's trial must score than the
            incumbent's to replace it (0: strictly better).
        change_threshold: relative move of the kept candidate's smoothed signal from its
            level that starts a re-test (0.1, a choice: above the interval-to-interval noise
            of the model's jittered signal, below the gaps between heuristics that matter).
        ewma_alpha: weight of a new interval in the smoothed signal (0.5, a choice: two
            intervals' memory, so one noisy interval does not trigger a re-test alone).
        signal: ``"norm-perf"`` (default) or ``"throughput"`` (:data:`SIGNALS`).
    """

    name = "adaptive"
    kernel = STATIC_KERNEL
    tiering_modes: tuple[str, ...] | None = tuple(TIERING_MODES)

    def __init__(
        self,
        candidates: Sequence[str] | None = None,
        trial_steps: int = 1,
        settle_steps: int = 0,
        min_gain: float = 0.0,
        change_threshold: float = 0.1,
        ewma_alpha: float = 0.5,
        signal: str = "norm-perf",
    ) -> None:
        super().__init__()
        if int(trial_steps) != trial_steps or trial_steps < 1:
            raise ValueError(f"adaptive trial_steps: got {trial_steps!r}, expected an integer >= 1")
        if int(settle_steps) != settle_steps or not 0 <= settle_steps < trial_steps:
            raise ValueError(
                f"adaptive settle_steps: got {settle_steps!r}, expected an integer in "
                f"0..trial_steps-1 ({int(trial_steps) - 1})"
            )
        if not (math.isfinite(min_gain) and min_gain >= 0):
            raise ValueError(f"adaptive min_gain: got {min_gain!r}, expected >= 0")
        if not (math.isfinite(change_threshold) and change_threshold > 0):
            raise ValueError(f"adaptive change_threshold: got {change_threshold!r}, expected > 0")
        if not (math.isfinite(ewma_alpha) and 0 < ewma_alpha <= 1):
            raise ValueError(f"adaptive ewma_alpha: got {ewma_alpha!r}, expected in (0, 1]")
        if signal not in SIGNALS:
            raise ValueError(f"adaptive signal: got {signal!r}, expected one of {list(SIGNALS)}")
        self.explicit = candidates is not None
        names = list(default_candidates() if candidates is None else candidates)
        if not names:
            raise ValueError("adaptive candidates: expected at least one heuristic name")
        if len(set(names)) != len(names):
            raise ValueError(f"adaptive candidates: got {names}, expected distinct names")
        self.all_candidates: list[HeuristicPolicy] = [make_policy(n) for n in names]
        self.trial_steps = int(trial_steps)
        self.settle_steps = int(settle_steps)
        self.min_gain = float(min_gain)
        self.change_threshold = float(change_threshold)
        self.ewma_alpha = float(ewma_alpha)
        self.signal = signal
        self.candidates: list[HeuristicPolicy] = []
        self.modes: I64 = np.zeros(0, dtype=np.int64)
        self._alloc(0, 0, 0)

    def _alloc(self, B: int, C: int, T: int) -> None:
        """The selector's state for ``B`` instances, ``C`` candidates, ``T`` tenant slots."""
        self.n_cands = C
        self.cur: I64 = np.zeros(B, dtype=np.int64)  # candidate in force
        self.inc: I64 = np.zeros(B, dtype=np.int64)  # the incumbent: the candidate kept
        self.first: I64 = np.zeros(B, dtype=np.int64)  # the incumbent when the round began
        self.k: I64 = np.zeros(B, dtype=np.int64)  # challengers tried in the round
        self.inc_trial = np.ones(B, dtype=bool)  # the trial running is the incumbent's
        self.t_in: I64 = np.zeros(B, dtype=np.int64)  # intervals of the current trial
        self.testing = np.ones(B, dtype=bool)
        self.acc: F64 = np.zeros(B)  # the trial's summed signal
        self.cnt: I64 = np.zeros(B, dtype=np.int64)
        self.inc_level: F64 = np.zeros(B)  # the incumbent's last trial score
        self.kept: I64 = np.zeros(B, dtype=np.int64)  # intervals since the round ended
        self.level: F64 = np.zeros(B)  # the kept candidate's signal after it settled
        self.ewma: F64 = np.zeros(B)
        self.prev_active = np.zeros((B, T), dtype=bool)
        self.seen = np.zeros(B, dtype=bool)  # a tenant ran since the reset
        self.rounds: I64 = np.zeros(B, dtype=np.int64)  # test rounds started (the first too)

    # ----------------------------------------------------------------- binding
    def _bound(self) -> None:
        params = self._p()
        modes = tuple(params.codec.modes)
        keep: list[HeuristicPolicy] = []
        mode_of: list[int] = []
        refused: list[str] = []
        for c in self.all_candidates:
            try:
                if modes:
                    m = tiering_mode_of(c.kernel, params.kernel, modes)
                elif c.kernel == params.kernel:
                    m = 0
                else:
                    raise ValueError(c.name)
            except ValueError:
                refused.append(c.name)
                continue
            keep.append(c)
            mode_of.append(m)
        if refused and self.explicit:
            raise ValueError(
                f"adaptive candidates {refused}: their kernel configuration is none of this "
                f"environment's tiering modes {list(modes)}; build it with tiering_modes "
                f"including theirs (envs.spaces.TIERING_MODES) or leave them out"
            )
        if not keep:
            raise ValueError(
                f"adaptive: no candidate can run in this environment (tiering modes "
                f"{list(modes)}); build it with the selector's tiering_modes"
            )
        self.candidates = keep
        self.modes = np.asarray(mode_of, dtype=np.int64)
        for c in keep:
            c.bind(params, self._B)

    @property
    def candidate_names(self) -> list[str]:
        """The names of the candidates of the present binding, in trial order."""
        return [c.name for c in self.candidates]

    # ----------------------------------------------------------------- state
    def _reset(self, mask: NDArray[np.bool_]) -> None:
        B, C, T = self._B, len(self.candidates), self._p().n_tenants
        if self.prev_active.shape != (B, T) or self.n_cands != C:
            self._alloc(B, C, T)
        self.inc[mask] = 0
        self.rounds[mask] = 0
        self._start_round(mask)
        self.kept[mask] = 0
        self.level[mask] = 0.0
        self.ewma[mask] = 0.0
        self.prev_active[mask] = False
        self.seen[mask] = False
        for c in self.candidates:
            c._reset(mask)

    def _start_round(self, mask: NDArray[np.bool_]) -> None:
        """A new test round for instances ``mask``: the incumbent's trial first."""
        self.first[mask] = self.inc[mask]
        self.cur[mask] = self.inc[mask]
        self.k[mask] = 0
        self.inc_trial[mask] = True
        self.t_in[mask] = 0
        self.acc[mask] = 0.0
        self.cnt[mask] = 0
        self.testing[mask] = True
        self.rounds[mask] += 1

    def challenger(self, k: I64, first: I64) -> I64:
        """The ``k``-th challenger of a round that began with incumbent ``first``: the
        candidates in catalogue order, ``first`` left out."""
        return np.where(k < first, k, k + 1)

    # ----------------------------------------------------------------- protocol
    def observe(self, metrics: Any, hardware: Hardware) -> None:
        """Every candidate observes (its controller runs whether in force or not), then the
        selector scores the step (:meth:`HeuristicPolicy.observe`)."""
        for c in self.candidates:
            c.observe(metrics, hardware)
        super().observe(metrics, hardware)

    def measure(self, info: Mapping[str, Any] | Metrics) -> tuple[F64, NDArray[np.bool_]]:
        """(B,) the step's signal (geometric mean over the running tenants; 0 with none) and
        (B, T) which tenants ran."""
        active = np.asarray(info["tenant_active"], dtype=bool)
        v = np.asarray(info[SIGNALS[self.signal]], dtype=float)
        n = active.sum(axis=1)
        logv = np.where(active, np.log(np.maximum(v, 1e-9)), 0.0).sum(axis=1)
        return np.where(n > 0, np.exp(logv / np.maximum(n, 1)), 0.0), active

    def _observe(self, info: Mapping[str, Any]) -> None:
        s, active = self.measure(info)
        run = active.any(axis=1)
        changed = run & self.seen & (active != self.prev_active).any(axis=1)
        self.prev_active = active.copy()
        self.seen |= run
        was_testing = self.testing.copy()
        self._start_round(changed)  # this step's signal belongs to the old set: not scored
        step = run & ~changed
        self._trial_step(step & was_testing, s)
        self._kept_step(step & ~was_testing, s)

    def _trial_step(self, te: NDArray[np.bool_], s: F64) -> None:
        rows = np.flatnonzero(te)
        self.t_in[rows] += 1
        scored = rows[self.t_in[rows] > self.settle_steps]
        self.acc[scored] += s[scored]
        self.cnt[scored] += 1
        done = rows[self.t_in[rows] >= self.trial_steps]
        score = self.acc[done] / np.maximum(self.cnt[done], 1)
        self.t_in[done] = 0
        self.acc[done] = 0.0
        self.cnt[done] = 0
        n_ch = self.n_cands - 1
        # the incumbent's trial ended: its level, then the next challenger
        inc = done[self.inc_trial[done]]
        self.inc_level[inc] = score[self.inc_trial[done]]
        self.inc_trial[inc] = False
        # a challenger's trial ended: it replaces the incumbent if it scored better by
        # more than min_gain; the next challenger follows at once after a win (the new
        # incumbent was just measured), after a new trial of the incumbent otherwise
        ch_sel = ~self.inc_trial[done]
        ch_sel[np.isin(done, inc)] = False
        ch = done[ch_sel]
        ch_score = score[ch_sel]
        win = ch_score > self.inc_level[ch] * (1.0 + self.min_gain)
        self.inc[ch[win]] = self.cur[ch[win]]
        self.inc_level[ch[win]] = ch_score[win]
        self.k[ch] += 1
        self.inc_trial[ch[~win]] = True
        fin = done[self.k[done] >= n_ch]
        self.testing[fin] = False
        self.kept[fin] = 0
        self.cur[fin] = self.inc[fin]
        go = done[self.k[done] < n_ch]
        nxt = np.where(
            self.inc_trial[go], self.inc[go], self.challenger(self.k[go], self.first[go])
        )
        self.cur[go] = nxt

    def _kept_step(self, ke: NDArray[np.bool_], s: F64) -> None:
        rows = np.flatnonzero(ke)
        self.kept[rows] += 1
        anchor = rows[self.kept[rows] == self.settle_steps + 1]
        self.level[anchor] = s[anchor]
        self.ewma[anchor] = s[anchor]
        upd = rows[self.kept[rows] > self.settle_steps + 1]
        a = self.ewma_alpha
        self.ewma[upd] = (1.0 - a) * self.ewma[upd] + a * s[upd]
        drift = upd[
            np.abs(self.ewma[upd] - self.level[upd]) > self.change_threshold * self.level[upd]
        ]
        retest = np.zeros(self._B, dtype=bool)
        retest[drift] = True
        self._start_round(retest)

    def _decide(self, obs: NDArray) -> tuple[I64, F64]:
        params = self._p()
        w = np.zeros((self._B, params.codec.n_weight_rows, params.n_nodes), dtype=np.int64)
        rate = np.zeros(self._B)
        for i in np.unique(self.cur):  # only the candidates in force somewhere
            ci, ri = self.candidates[int(i)]._decide(obs)
            sel = self.cur == i
            w[sel] = np.asarray(ci)[sel]
            rate[sel] = np.broadcast_to(np.asarray(ri, dtype=float), (self._B,))[sel]
        return w, rate

    def _tiering_mode(self) -> NDArray[np.int64] | int:
        return self.modes[self.cur]

    def current(self) -> list[str]:
        """The name of the candidate in force in each instance."""
        return [self.candidates[int(i)].name for i in self.cur]
