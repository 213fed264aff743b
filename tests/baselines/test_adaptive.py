"""``adaptive``, the online selector of heuristics: causal, deterministic, batched, and it
selects and re-selects as documented.

Two harnesses: the environment itself (a shipped scenario, the candidates' real actions and
metrics), and a scripted one, where the step's metrics are a real step's with each
tenant's performance set by a payoff of the candidate in force, so that which heuristic
wins, and when the behaviour changes, is known exactly.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from agents.rollout import make_params
from baselines import catalogue
from baselines.adaptive import SIGNALS, Adaptive, default_candidates
from envs import core
from envs.core import EnvParams

SCENARIO = "cxl-spill"  # 10-step episodes, three tenants, several candidates differ


def _env(pol: Adaptive, B: int, scenario: str = SCENARIO) -> EnvParams:
    params = make_params(pol, scenario, "test")
    pol.bind(params, B)
    return params


def _actions(seeds: list[int], steps: int | None = None, **kw: Any) -> np.ndarray:
    """(steps, B, act) the selector's actions stepping the real environment from ``seeds``."""
    pol = Adaptive(**kw)
    params = _env(pol, len(seeds))
    state, obs = core.reset(params, np.asarray(seeds, dtype=np.uint64))
    pol.observe(None, core.hardware(state))
    start = np.ones(len(seeds), dtype=bool)
    out = []
    for _ in range(steps or int(state.instance.episode_steps.max())):
        a, _ = pol.predict(obs, episode_start=start)
        start[:] = False
        out.append(np.asarray(a).copy())
        state, obs, _, _, _, m, _ = core.step_autoreset(params, state, a)
        pol.observe(m, core.hardware(state))
    return np.stack(out)


# --------------------------------------------------------------------------- scripted harness


class Scripted:
    """The step's metrics from one real step of ``SCENARIO``, every tenant running, each
    tenant's ``tenant_norm_perf`` the payoff of the candidate in force in its instance."""

    def __init__(self, pol: Adaptive, B: int) -> None:
        self.pol = pol
        self.params = _env(pol, B)
        # one seed for every instance: the instances' metrics differ only where a test says
        state, self.obs = core.reset(self.params, np.full(B, 20000, dtype=np.uint64))
        self.hw = core.hardware(state)
        _, _, _, _, _, m, _ = core.step_autoreset(
            self.params, state, np.zeros((B, self.params.codec.size), dtype=np.float32)
        )
        self.base = {k: np.asarray(v).copy() for k, v in m.to_dict().items()}
        self.base["tenant_active"][:] = True
        pol.observe(None, self.hw)
        self.start = np.ones(B, dtype=bool)

    def step(
        self, payoff: np.ndarray, active: np.ndarray | None = None
    ) -> tuple[np.ndarray, list[str]]:
        """One interval: the action, then metrics whose performance is ``payoff`` (B, C) of the
        candidate that acted; returns the action and the names in force when it acted."""
        a, _ = self.pol.predict(self.obs, episode_start=self.start)
        self.start[:] = False
        acted = self.pol.current()
        info = {k: v.copy() for k, v in self.base.items()}
        perf = payoff[np.arange(len(acted)), self.pol.cur]
        info["tenant_norm_perf"] = np.broadcast_to(
            perf[:, None], info["tenant_norm_perf"].shape
        ).copy()
        if active is not None:
            info["tenant_active"] = active.copy()
        self.pol.observe(info, self.hw)
        return np.asarray(a), acted


def _payoff(
    pol: Adaptive, winner: str, B: int = 1, good: float = 0.9, bad: float = 0.6
) -> np.ndarray:
    p = np.full((B, len(pol.candidates)), bad)
    p[:, pol.candidate_names.index(winner)] = good
    return p


def test_candidates_are_the_catalogue_deployable_heuristics_and_their_modes() -> None:
    pol = Adaptive()
    params = _env(pol, 1)
    want = [n for n in catalogue.names(kind="heuristic", deployable=True) if n != "adaptive"]
    assert default_candidates() == want and pol.candidate_names == want
    modes = list(params.codec.modes)
    by = dict(zip(pol.candidate_names, pol.modes.tolist(), strict=True))
    assert modes[by["tpp"]] == "tpp" and modes[by["colloid"]] == "tpp"
    assert modes[by["memcg-fair"]] == "memcg-fair" and modes[by["damon-tiering"]] == "damon"
    assert modes[by["dram-first"]] == "default" and modes[by["caption"]] == "default"
    # in an environment without modes only the candidates of its kernel remain; named
    # candidates it cannot run are an error naming them
    plain = core.make_params(scenario=SCENARIO, split="test")
    only = Adaptive()
    only.bind(plain, 1)
    assert "tpp" not in only.candidate_names and "dram-first" in only.candidate_names
    with pytest.raises(ValueError, match=r"adaptive candidates \['tpp'\]"):
        Adaptive(candidates=["dram-first", "tpp"]).bind(plain, 1)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"trial_steps": 0}, "trial_steps"),
        ({"settle_steps": 2, "trial_steps": 2}, "settle_steps"),
        ({"change_threshold": 0.0}, "change_threshold"),
        ({"ewma_alpha": 1.5}, "ewma_alpha"),
        ({"signal": "ipc"}, "signal"),
        ({"candidates": []}, "at least one"),
        ({"candidates": ["tpp", "tpp"]}, "distinct"),
        ({"candidates": ["no-such"]}, "unknown policy"),
    ],
)
def test_bad_parameters_are_named(kw: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Adaptive(**kw)


def _round_steps(pol: Adaptive) -> int:
    """The most intervals a test round takes (the module docstring's bound)."""
    return (2 * (len(pol.candidates) - 1) + 1) * pol.trial_steps


def test_ends_on_the_clear_winner_of_a_stationary_scenario() -> None:
    """Each winner in turn: within one round the selector keeps it, every candidate was
    tried, and it keeps the winner while nothing changes (no further round)."""
    for winner in default_candidates():
        pol = Adaptive()
        h = Scripted(pol, 1)
        pay = _payoff(pol, winner)
        seen = []
        while pol.testing[0]:
            seen.append(h.step(pay)[1][0])
            assert len(seen) <= _round_steps(pol)
        assert set(seen) == set(pol.candidate_names)
        assert seen[: pol.trial_steps] == [pol.candidate_names[0]] * pol.trial_steps
        for _ in range(30):
            assert h.step(pay)[1] == [winner]
        assert int(pol.rounds[0]) == 1 and not pol.testing[0]


class Reference:
    """The module docstring's algorithm for one instance, written plainly (a loop, no
    arrays): what the batched selector must do step for step."""

    def __init__(self, pol: Adaptive) -> None:
        self.C, self.trial, self.settle = len(pol.candidates), pol.trial_steps, pol.settle_steps
        self.gain, self.thr, self.alpha = pol.min_gain, pol.change_threshold, pol.ewma_alpha
        self.inc, self.rounds, self.kept, self.level, self.ewma = 0, 0, 0, 0.0, 0.0
        self.prev: tuple[bool, ...] | None = None
        self.seen = False
        self.new_round()

    def new_round(self) -> None:
        self.first = self.cur = self.inc
        self.scores: list[float] = []
        self.k, self.inc_trial, self.t = 0, True, 0
        self.testing, self.rounds = True, self.rounds + 1

    def step(self, s: float, active: tuple[bool, ...]) -> None:
        run = any(active)
        changed = run and self.seen and active != self.prev
        self.prev, self.seen = active, self.seen or run
        if changed:
            self.new_round()
            return
        if not run:
            return
        if not self.testing:
            self.kept += 1
            if self.kept == self.settle + 1:
                self.level = self.ewma = s
            elif self.kept > self.settle + 1:
                self.ewma = (1 - self.alpha) * self.ewma + self.alpha * s
                if abs(self.ewma - self.level) > self.thr * self.level:
                    self.new_round()
            return
        self.t += 1
        if self.t > self.settle:
            self.scores.append(s)
        if self.t < self.trial:
            return
        score = sum(self.scores) / len(self.scores)
        self.t, self.scores = 0, []
        if self.inc_trial:
            self.inc_level, self.inc_trial = score, False
        else:
            if score > self.inc_level * (1 + self.gain):
                self.inc, self.inc_level = self.cur, score
            else:
                self.inc_trial = True
            self.k += 1
        if self.k >= self.C - 1:
            self.testing, self.kept, self.cur = False, 0, self.inc
        elif self.inc_trial:
            self.cur = self.inc
        else:
            self.cur = self.k if self.k < self.first else self.k + 1


@pytest.mark.parametrize(
    ("scenario", "kw", "min_rounds"),
    [
        ("kv-store", {}, 1),  # one round, then kept
        ("tiering-fairness", {"trial_steps": 3, "settle_steps": 1, "change_threshold": 0.03}, 2),
    ],
)
def test_follows_its_algorithm_step_for_step_on_the_environment(
    scenario: str, kw: dict[str, Any], min_rounds: int
) -> None:
    """On real episodes (their metrics, arrivals and departures), the batched selector's
    candidate in force is the plain reference's at every step, in every instance."""
    pol = Adaptive(**kw)
    seeds = [20000, 20001]
    params = _env(pol, len(seeds), scenario)
    state, obs = core.reset(params, np.asarray(seeds, dtype=np.uint64))
    pol.observe(None, core.hardware(state))
    refs = [Reference(pol) for _ in seeds]
    start = np.ones(len(seeds), dtype=bool)
    rounds, kept = 0, False
    for _ in range(int(state.instance.episode_steps.min())):
        a, _ = pol.predict(obs, episode_start=start)
        start[:] = False
        assert pol.current() == [pol.candidate_names[r.cur] for r in refs]
        state, obs, _, _, _, m, _ = core.step_autoreset(params, state, a)
        s, active = pol.measure(m)
        for i, r in enumerate(refs):
            r.step(float(s[i]), tuple(bool(x) for x in active[i]))
        pol.observe(m, core.hardware(state))
        assert pol.rounds.tolist() == [r.rounds for r in refs]
        rounds = max(rounds, *pol.rounds.tolist())
        kept |= not pol.testing.all()
    assert kept and rounds >= min_rounds  # what the comparison covered
    # the action is the kept candidate's, in its tiering mode
    a, _ = pol.predict(obs)
    for i in range(len(seeds)):
        c = pol.candidates[int(pol.cur[i])]
        w, rate = c._decide(obs)
        want = params.codec.encode_box(
            w, np.broadcast_to(np.asarray(rate, dtype=float), (len(seeds),)), pol.modes[pol.cur]
        )
        np.testing.assert_array_equal(a[i], want[i])


def test_retests_when_the_kept_heuristic_measures_a_change() -> None:
    pol = Adaptive(change_threshold=0.1)
    h = Scripted(pol, 1)
    pay = _payoff(pol, "tpp")
    for _ in range(_round_steps(pol) + 5):
        h.step(pay)
    assert pol.current() == ["tpp"] and int(pol.rounds[0]) == 1
    # a move of 5%: inside the threshold, no re-test
    for _ in range(10):
        h.step(pay * 0.95)
    assert int(pol.rounds[0]) == 1 and pol.current() == ["tpp"]
    # the behaviour changes: tpp drops to 0.5, caption becomes the clear winner
    changed = _payoff(pol, "caption", good=0.95, bad=0.5)
    acted = [h.step(changed)[1][0] for _ in range(1 + pol.trial_steps)]
    assert int(pol.rounds[0]) == 2 and pol.testing[0]
    assert acted == ["tpp"] * (1 + pol.trial_steps)  # the round starts with the incumbent
    for _ in range(_round_steps(pol)):
        h.step(changed)
    assert pol.current() == ["caption"] and not pol.testing[0]


def test_retests_when_a_tenant_arrives_or_leaves() -> None:
    pol = Adaptive()
    h = Scripted(pol, 1)
    T = h.base["tenant_active"].shape[1]
    assert T >= 2
    pay = _payoff(pol, "numa-tiering")
    two = np.zeros((1, T), dtype=bool)
    two[0, :2] = True
    for _ in range(_round_steps(pol) + 3):
        h.step(pay, two)
    assert int(pol.rounds[0]) == 1 and pol.current() == ["numa-tiering"]
    one = two.copy()
    one[0, 1] = False  # a departure
    h.step(pay, one)
    assert int(pol.rounds[0]) == 2 and pol.testing[0]
    h.step(pay, two)  # an arrival in the middle of the round: a new round
    assert int(pol.rounds[0]) == 3
    nobody = np.zeros((1, T), dtype=bool)
    h.step(pay, nobody)  # no tenant: nothing measured, nothing changes
    h.step(pay, nobody)
    assert int(pol.rounds[0]) == 3


def test_causal_identical_prefixes_give_identical_actions() -> None:
    """Two instances see the same metrics up to step ``j``, then different ones: their
    actions are identical up to the action after step ``j`` and may differ only later."""
    pol = Adaptive()
    h = Scripted(pol, 2)
    j = _round_steps(pol) + 4
    same = _payoff(pol, "tpp", B=2)
    split = same.copy()
    split[1] = _payoff(pol, "caption")[0] * 0.5  # instance 1's behaviour changes after j
    acts = []
    for t in range(j + 1 + _round_steps(pol)):
        a, _ = h.step(same if t <= j else split)
        acts.append(a)
    acts_arr = np.stack(acts)
    np.testing.assert_array_equal(acts_arr[: j + 2, 0], acts_arr[: j + 2, 1])
    assert (acts_arr[j + 2 :, 0] != acts_arr[j + 2 :, 1]).any()  # the test can see a difference


def test_deterministic_and_batch_equals_single() -> None:
    seeds = [20000, 20001, 20002]
    steps = 24  # past the end of the first 10-step episodes: the reset path too
    batch = _actions(seeds, steps)
    np.testing.assert_array_equal(batch, _actions(seeds, steps))
    for i, s in enumerate(seeds):
        np.testing.assert_array_equal(batch[:, i], _actions([s], steps)[:, 0])
    assert len({tuple(x) for x in batch[:, 0]}) > 1  # it does switch between candidates


def test_throughput_signal() -> None:
    pol = Adaptive(signal="throughput")
    h = Scripted(pol, 1)
    s, active = pol.measure(h.base)
    tp = h.base[SIGNALS["throughput"]][0][active[0]]
    assert s[0] == pytest.approx(float(np.exp(np.mean(np.log(tp)))))
