"""The warm start over several bases (agents.imitation): labels and the fitted policy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from pydantic import ValidationError
from stable_baselines3 import PPO

from agents.imitation import (
    CheckpointError,
    ImitationSettings,
    label_episodes,
    plan_actions,
    policy_observations,
    warm_start,
)
from agents.view import make_training_vec_env
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
#: Every value the warm start reads, small and fast (a test changes what it exercises).
SETTINGS: dict[str, Any] = {
    "episodes": 12,
    "plans": False,
    "scenarios": [],
    "scenario_episodes": 0,
    "rounds": 1,
    "epochs": 60,
    "batch_size": 256,
    "learning_rate": 1e-3,
    "stride": 2,
    "seed": 700,
    "tie_tolerance": 1e-3,
    "corner_margin": 2.0,
    "off_margin": 2.0,
    "on_margin": 0.005,
    "plan_search": {"segments": 1, "population": 16, "iterations": 4},
}
LOG = "log-geomean"


@pytest.fixture
def settings() -> ImitationSettings:
    return ImitationSettings(**SETTINGS)


def _model(env: dict[str, Any], width: int = 64) -> PPO:
    venv = make_training_vec_env(4, env)
    kw = {"net_arch": [width, width]}
    return PPO("MlpPolicy", venv, n_steps=8, batch_size=32, seed=0, policy_kwargs=kw)


def test_labels_are_the_best_base_of_each_episode(settings: ImitationSettings) -> None:
    """Each episode's label is the base with the highest geomean_perf on it (run at its
    corner of the mixing entries, which is that heuristic exactly: test_residual); the recorded observations
    follow the label; the targets are its corner past the clip, with bases tied with the
    best (tie_tolerance) counted as best too."""
    n, seed = 12, 700
    got = label_episodes(ENV, "mixed", n, seed, settings.updated(stride=10), objective=LOG)
    obs, targets, labels, scores = got.obs, got.targets, got.labels, got.scores
    assert labels.tolist() == np.argmax(scores, axis=1).tolist()
    assert len(set(labels.tolist())) > 1  # the best base differs between episodes
    assert obs.shape[0] == targets.shape[0] and obs.shape[0] % n == 0
    near = scores >= scores.max(axis=1, keepdims=True) * (1.0 - settings.tie_tolerance)
    m = settings.corner_margin
    want = np.where(near[:, 1:], np.where(near[:, :1], 0.0, m), -m)
    assert targets[:n, -2:].tolist() == want.tolist()  # the first recorded step of each
    assert not targets[:, :-2].any()  # residual 0: the base as it is
    assert not got.fit_residual.any()  # ... and not fitted: the residual rows stay zero


def _picked(act: np.ndarray) -> np.ndarray:
    """The base a mixing action follows whole (0: the first; the entries' corners)."""
    return np.where(act[:, -2:].max(axis=1) > 0, 1 + np.argmax(act[:, -2:], axis=1), 0)


def test_warm_start_fits_the_labels_on_the_policys_own_states(
    settings: ImitationSettings,
) -> None:
    """After the warm start (with its DAgger rounds) the deterministic policy picks a best
    base of each training episode on most steps of the states it reaches itself, and its
    residual is exactly 0, so the base it picks runs as that heuristic does."""
    model = _model(ENV)
    # the labelling seeds are settings.seed + the run's seed: 700
    summary = warm_start(model, ENV, settings.updated(seed=690), seed=10, objective=LOG)
    assert summary["families"] == ["mixed"] and summary["dagger_rounds"] == 1
    assert summary["objective"] == LOG and summary["resumed"] == {"jobs": 0, "fits": 0}
    # the round adds the policy's own run of the same episodes: as many recorded steps again
    assert summary["samples"][1] == 2 * summary["samples"][0] > 0
    got = label_episodes(ENV, "mixed", 12, 700, settings, objective=LOG)
    labels, scores = got.labels, got.scores
    near = scores >= scores.max(axis=1, keepdims=True) * (1.0 - settings.tie_tolerance)
    obs = policy_observations(model, ENV, "mixed", 12, 700, settings.stride)
    act, _ = model.predict(obs, deterministic=True)
    episode = np.arange(len(obs)) % 12  # the recorded steps are whole batches of episodes
    assert len(set(labels.tolist())) > 1
    assert np.mean(near[episode, _picked(act)]) > 0.9
    assert not act[:, :-2].any()  # the residual: exactly 0
    assert np.abs(act[:, -2:]).max() > 0.5  # the mixing entries: fitted, not zeroed


PLANNED = {**ENV, "residual_bases": ["dram-first"], "residual_scale": 2.0, "mixing": "hard"}


def test_a_plan_runs_through_the_agent_interface_as_the_planner_scored_it(
    settings: ImitationSettings,
) -> None:
    """The planner's plan of an episode, written as the residual over dram-first (the first
    of residual_bases) at dram-first's corner, scores through the agent's interface exactly
    what the planner's replay scored; it is the episode's label where it beats every base
    (by more than a tie), with dram-first's corner as the mixing target; the residual is
    fitted to the plan on every episode, whatever its label: the plan's entries, those that
    are off past the clip."""
    n, seed = 12, 700
    plan, planned_score, _ = plan_actions(PLANNED, "mixed", n, seed, settings, objective=LOG)
    box, off = plan.box, plan.off
    assert (plan.base, plan.scale) == (2, 2.0)  # dram-first, residual_scale
    s = settings.updated(stride=10)
    got = label_episodes(PLANNED, "mixed", n, seed, s, objective=LOG, plans=True)
    assert np.allclose(got.scores[:, 3], planned_score, rtol=1e-9, atol=0)
    assert (got.scores[:, 3] >= got.scores[:, 2] * (1 - 1e-9)).all()  # dram-first is a seed
    planned = got.scores[:, 3] > got.scores[:, :3].max(axis=1) * (1.0 + s.tie_tolerance)
    assert 0 < planned.sum() < n  # the plan wins some episodes, a base others
    assert (got.labels == 3).tolist() == planned.tolist()
    first = got.targets[:n]  # the first recorded step of each episode
    m = s.corner_margin
    assert first[planned, -2:].tolist() == [[-m, m]] * planned.sum()
    assert got.fit_residual.all()
    # dram-first's action is -1 everywhere but the mode entry: the residual is (plan + 1) / 2,
    # and -off_margin / 2 (clipped to -1) where the plan switches an entry off
    res = first[:, :-2]
    want = np.maximum(np.where(off, -s.off_margin, box + 1.0) / 2.0, -1.0)
    assert np.allclose(res[:, :-1], want[:, :-1], atol=1e-6)
    assert (np.abs(res) <= 1.0).all() and (res[:, :-1] > 0).any()
    assert not res[:, -1].any()  # the plan keeps dram-first's tiering mode


def test_the_recorded_rows_are_those_of_a_run_following_the_labels(
    settings: ImitationSettings,
) -> None:
    """The labelled rows come from each expert's own run; a run in which every episode
    follows its label (bases and plans mixed in one batch) records exactly the same."""
    from agents.imitation import LabelFollower
    from agents.rollout import make_params, rollout
    from agents.view import LearnedPolicy, make_interface

    n, seed = 12, 700
    s = settings.updated(stride=3)
    got = label_episodes(PLANNED, "mixed", n, seed, s, objective=LOG, plans=True)
    assert len(set(got.labels.tolist())) > 2  # several bases and the plan in one batch
    kw = {k: v for k, v in PLANNED.items() if k != "scenario"}
    spaces = make_interface(kw).spaces(make_params(None, "mixed", "train", kw))
    follower = LabelFollower(*spaces, got.labels, 3, got.episodes.plans)
    follower.stride = s.stride
    rollout(LearnedPolicy(follower, kw, "follower", "t"), "mixed", n, seed, "train", kw)
    assert np.array_equal(np.concatenate(follower.seen), got.obs)


@pytest.mark.slow
def test_labelling_in_worker_processes_gives_the_same_policy(
    settings: ImitationSettings,
) -> None:
    """The jobs labelled in two processes give the same data set, and so bit for bit the
    same fitted weights, as labelled one after the other in this one."""
    env = {**ENV, "train_families": ["mixed-2s"]}
    s = settings.updated(
        episodes=4, rounds=0, epochs=2, scenarios=["kv-store"], scenario_episodes=2
    )
    fitted = []
    for workers in (1, 2):
        model = _model(env)
        summary = warm_start(model, env, s, seed=0, objective=LOG, workers=workers)
        fitted.append((summary, model.policy.state_dict()))
    (one, a), (two, b) = fitted
    assert one["samples"] == two["samples"] and one["label_share"] == two["label_share"]
    for k in a:
        assert torch.equal(a[k], b[k]), k


@pytest.mark.slow
def test_warm_start_with_plans_beats_every_base_on_its_episodes(
    settings: ImitationSettings,
) -> None:
    """Fitted to the plans as well (imitation.plans), the policy's own decisions on its
    training episodes score above every single base there and above the best base of
    each episode taken with hindsight: it learned placements no base makes."""
    from agents.evaluation import LearnedPolicy
    from agents.rollout import rollout

    n, seed = 16, 700
    model = _model(PLANNED)
    s = settings.updated(episodes=n, seed=seed, epochs=150, plans=True)
    summary = warm_start(model, PLANNED, s, seed=0, objective=LOG)
    assert summary["bases"][-1] == "plan" and summary["label_share"][-1] > 0
    got = label_episodes(PLANNED, "mixed", n, seed, s.updated(stride=10), objective=LOG, plans=True)
    kw = {k: v for k, v in PLANNED.items() if k != "scenario"}
    recs = rollout(LearnedPolicy(model, kw, "fitted", "t"), "mixed", n, seed, "train", kw)
    fitted = np.array([r["metrics"]["geomean_perf"] for r in sorted(recs, key=lambda r: r["seed"])])
    best_base = got.scores[:, :3].max(axis=1)
    assert np.log(fitted).mean() > np.log(best_base).mean()


@pytest.mark.parametrize("privileged", [False, True])
def test_a_share_plan_runs_through_the_agent_interface_as_the_planner_scored_it(
    settings: ImitationSettings, privileged: bool
) -> None:
    """With ``residual_codec: share`` the plan is one DRAM share per tenant over dram-first
    (local-first: 1.25); through the agent's interface it scores exactly what the planner's
    replay scored, and its targets are the shares' steps (0 for slots the episode does
    not use); so too where the observation ends with the critic's privileged entries
    (``privileged_critic``), after the base actions the plan's residual is taken from
    (dram-first listed first: the entries just before the privileged ones are another
    base's, not dram-first's -1 everywhere)."""
    n, seed = 12, 800
    bases = ["dram-first", "colloid", "tpp"]
    env = {**PLANNED, "base_policy": bases, "residual_codec": "share",
           "privileged_critic": privileged}  # fmt: skip
    plan, planned_score, _ = plan_actions(env, "mixed", n, seed, settings, objective=LOG)
    assert plan.shares is not None and plan.shares.span == 1.25
    s = settings.updated(stride=10)
    got = label_episodes(env, "mixed", n, seed, s, objective=LOG, plans=True)
    assert np.allclose(got.scores[:, 3], planned_score, rtol=1e-9, atol=0)
    T = plan.shares.share.shape[1]
    first = got.targets[:n]
    want = np.where(plan.shares.used, (plan.shares.share - 1.25) / 1.25, 0.0)
    assert np.allclose(first[:, :T], want, atol=1e-6)
    assert (want < 0).any() and (want == 0).any()


def test_unplanned_jobs_hold_the_residual_where_a_listed_base_is_best(
    settings: ImitationSettings,
) -> None:
    """In a run with plans, a job without plans (a shipped scenario) fits the residual to 0
    on the episodes where a base it adjusts is near-best, so that base runs as it is there
    (``cxl-spill``: ``dram-first``, the base the residual adjusts, is the best of the three:
    the streams' pages are referenced once per pass, so colloid's and TPP's promotions cost
    them about 3% against it); without ``hold_listed`` the residual is not fitted at all."""
    env = {**PLANNED, "residual_codec": "share", "scenario": "cxl-spill"}
    s = settings.updated(stride=10)
    held = label_episodes(env, "cxl-spill", 2, 900, s, objective=LOG, hold_listed=True)
    assert (held.labels == BASES.index("dram-first")).all()
    assert held.fit_residual.all() and not held.targets[:, :-2].any()
    free = label_episodes(env, "cxl-spill", 2, 900, s, objective=LOG)
    assert not free.fit_residual.any()


def test_settings_need_every_value_within_its_bounds() -> None:
    """Every field is required (the recipe gives it), described, checked and frozen; an
    unknown key, a scenario that is not shipped, a bool for a count are errors."""
    s = ImitationSettings(**SETTINGS)
    assert all(f.description for f in ImitationSettings.model_fields.values())
    for key in SETTINGS:
        with pytest.raises(ValidationError, match=key):
            ImitationSettings(**{k: v for k, v in SETTINGS.items() if k != key})
    bad: list[tuple[str, Any]] = [
        ("episodes", 0),
        ("episodes", True),
        ("epochs", 2.0),
        ("rounds", 17),
        ("learning_rate", 0.0),
        ("stride", 0),
        ("plans", 1),
        ("corner_margin", 0.5),
        ("scenarios", ["no-such-scenario"]),
        ("scenarios", ["kv-store", "kv-store"]),
        ("plan_search", {"segments": 1, "population": 16}),
        ("plan_search", {"segments": 1, "population": 1, "iterations": 4}),
        ("unknown", 1),
    ]
    for key, value in bad:
        with pytest.raises(ValidationError, match=key):
            ImitationSettings(**{**SETTINGS, key: value})
    with pytest.raises(ValidationError):
        s.rounds = 2
    with pytest.raises(ValidationError, match="rounds"):
        s.updated(rounds=-1)
    assert s.updated(rounds=2).rounds == 2 and s.rounds == 1


def test_the_objective_ranks_the_experts(settings: ImitationSettings) -> None:
    """The labels follow the run's objective: on the same episodes, the episodes' throughput
    (the return under the ``throughput`` reward) ranks the bases otherwise than their
    geomean_perf, and each episode's label is the best base of its scores. (Seed 713:
    since the reclaim reference check the six episodes of seed 700 rank the bases alike
    under both objectives.)"""
    s = settings.updated(stride=50)
    geo = label_episodes(ENV, "mixed", 6, 713, s, objective=LOG)
    thr = label_episodes(ENV, "mixed", 6, 713, s, objective="throughput")
    assert thr.labels.tolist() == np.argmax(thr.scores, axis=1).tolist()
    assert geo.labels.tolist() == np.argmax(geo.scores, axis=1).tolist()
    assert (geo.scores <= 1.0 + 1e-9).all() and (thr.scores > 1.0).all()  # other quantities
    assert geo.labels.tolist() != thr.labels.tolist()  # ... that pick other bases


def test_a_plan_scores_under_another_objective_what_the_planner_maximised(
    settings: ImitationSettings,
) -> None:
    """The planner searches the run's objective: under ``throughput`` its plan, run through
    the agent's interface, scores the return the planner's replay scored, at least
    dram-first's (one of its seed candidates)."""
    search = {"segments": 1, "population": 4, "iterations": 1}
    s = settings.updated(stride=50, plan_search=search)
    _, planned, _ = plan_actions(PLANNED, "mixed", 4, 700, s, objective="throughput")
    got = label_episodes(PLANNED, "mixed", 4, 700, s, objective="throughput", plans=True)
    assert np.allclose(got.scores[:, 3], planned, rtol=1e-9, atol=0)
    assert (got.scores[:, 3] >= got.scores[:, 2] * (1 - 1e-9)).all()


def test_an_unknown_objective_is_a_value_error(settings: ImitationSettings) -> None:
    from baselines.planner import Planner

    with pytest.raises(ValueError, match=r"objective: got 'geomean', expected a reward name"):
        label_episodes(ENV, "mixed", 2, 700, settings, objective="geomean")
    with pytest.raises(ValueError, match=r"objective: got 'speed'"):
        warm_start(_model(ENV, 8), ENV, settings, seed=0, objective="speed")
    with pytest.raises(ValueError, match=r"planner objective: got 'geomean'"):
        Planner(objective="geomean")


#: A planned family and a held scenario job, in the share codec: every part of a checkpoint.
RESUMED = {**PLANNED, "residual_codec": "share"}


def _resumable(settings: ImitationSettings) -> ImitationSettings:
    search = {"segments": 1, "population": 4, "iterations": 1}
    return settings.updated(
        episodes=3,
        plans=True,
        scenarios=["cxl-spill"],
        scenario_episodes=2,
        rounds=2,
        epochs=3,
        stride=10,
        plan_search=search,
    )


def _same_weights(a: PPO, b: PPO) -> bool:
    sa, sb = a.policy.state_dict(), b.policy.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


@pytest.mark.slow
def test_an_interrupted_warm_start_resumes_to_the_same_weights(
    settings: ImitationSettings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopped after the first fit, a warm start called again on its checkpoint folder reads
    the labelled jobs and the first fit back (it labels nothing), runs the DAgger rounds and
    ends with the weights of an uninterrupted run, bit for bit; called once more it reads
    everything back."""
    import agents.imitation.dagger as dagger

    s, folder = _resumable(settings), tmp_path / "warm"
    whole = _model(RESUMED, 16)
    full = warm_start(whole, RESUMED, s, seed=0, objective=LOG)
    assert full["scenarios"] == ["cxl-spill"] and full["bases"][-1] == "plan"

    def stop(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("stopped")

    monkeypatch.setattr(dagger, "policy_observations", stop)  # the first DAgger round
    with pytest.raises(RuntimeError, match="stopped"):
        warm_start(_model(RESUMED, 16), RESUMED, s, seed=0, objective=LOG, checkpoint_dir=folder)
    assert (folder / "fit-00.json").exists() and not (folder / "fit-01.json").exists()
    monkeypatch.undo()

    fits: list[int] = []
    real_fit = dagger.fit_targets

    def counted_fit(*args: Any, **kwargs: Any) -> float:
        fits.append(1)
        return real_fit(*args, **kwargs)

    monkeypatch.setattr(dagger, "label_episodes", stop)  # labelled jobs are read back
    monkeypatch.setattr(dagger, "fit_targets", counted_fit)
    for resumed_fits, new_fits in ((1, 2), (3, 0)):
        fits.clear()
        model = _model(RESUMED, 16)
        got = warm_start(model, RESUMED, s, seed=0, objective=LOG, checkpoint_dir=folder)
        assert got["resumed"] == {"jobs": 2, "fits": resumed_fits} and len(fits) == new_fits
        assert _same_weights(model, whole)
        for key in ("samples", "loss", "label_share", "label_share_per_scenario"):
            assert got[key] == full[key]
    assert not _same_weights(model, _model(RESUMED, 16))  # the warm start did fit


def test_a_checkpoint_of_another_warm_start_is_refused(
    settings: ImitationSettings, tmp_path: Path
) -> None:
    """A checkpoint folder written with other settings, env settings, seed or objective is
    an error naming the folder, never reused."""
    import re

    s = settings.updated(episodes=2, rounds=0, epochs=1, stride=50)
    warm_start(_model(ENV, 8), ENV, s, seed=0, objective=LOG, checkpoint_dir=tmp_path)
    others: list[dict[str, Any]] = [
        {"settings": s.updated(epochs=2)},
        {"seed": 1},
        {"objective": "throughput"},
        {"env": {**ENV, "observation": "cgroup"}},
    ]
    for other in others:
        kw = {"settings": s, "seed": 0, "objective": LOG, "env": ENV, **other}
        with pytest.raises(CheckpointError, match=re.escape(str(tmp_path))):
            warm_start(_model(ENV, 8), checkpoint_dir=tmp_path, **kw)
    assert issubclass(CheckpointError, ValueError)


def test_progress_bars_show_each_phase_only_when_asked(
    settings: ImitationSettings, capsys: pytest.CaptureFixture[str]
) -> None:
    """``progress=True``: a bar per phase on stderr (labelling, planning, the fit, each DAgger
    round's rollouts and fit); ``progress=False``: nothing printed."""
    search = {"segments": 1, "population": 4, "iterations": 1}
    s = settings.updated(episodes=2, plans=True, epochs=2, stride=50, plan_search=search)
    warm_start(_model(PLANNED, 8), PLANNED, s, seed=0, objective=LOG)
    quiet = capsys.readouterr()
    assert quiet.out == "" and quiet.err == ""
    warm_start(_model(PLANNED, 8), PLANNED, s, seed=0, objective=LOG, progress=True)
    err = capsys.readouterr().err
    for phase in ("labelling mixed", "planning mixed", "fit", "DAgger round 1/1", "round 1/1 fit"):
        assert phase in err


def test_the_fit_reports_the_loss_of_its_whole_last_pass() -> None:
    """fit_targets returns the last pass's loss over every row, weighted as the loss weighs
    them (each job the same), not one minibatch's: at learning rate 0 the weights do not
    move, so it is the loss of the whole data set, computed here directly, and
    targets_loss's."""
    from agents.imitation.bc import fit_targets, targets_loss

    model = _model(ENV)
    policy = model.policy
    dim, A = policy.observation_space.shape[0], policy.action_space.shape[0]
    rng = np.random.default_rng(0)
    # two jobs of 700 and 300 rows (minibatches of 256: a short last one), the residual
    # fitted on a third of the rows
    parts = [
        [
            (
                rng.uniform(0, 1, (n, dim)).astype(np.float32),
                rng.uniform(-1, 1, (n, A)).astype(np.float32),
                (rng.uniform(0, 1, n) < 1 / 3).astype(np.float32),
            )
        ]
        for n in (700, 300)
    ]
    mixing = len(BASES) - 1
    got = fit_targets(policy, parts, mixing, 1, 256, 0.0, seed=0)
    res = A - mixing
    want_sum = want_w = 0.0
    with torch.no_grad():
        for job in parts:
            obs, y, fit = job[0]
            mean = policy.get_distribution(torch.as_tensor(obs)).distribution.mean.numpy()
            err = ((mean[:, res:] - y[:, res:]) ** 2).mean(1)
            err += fit * ((mean[:, :res] - y[:, :res]) ** 2).mean(1)
            want_sum += float(err.sum()) / len(obs)
            want_w += 1.0
    assert got == pytest.approx(want_sum / want_w, rel=1e-5)
    total, mix, res_part = targets_loss(policy, parts, mixing)  # the same loss, split
    assert total == pytest.approx(got, rel=1e-5) and total == pytest.approx(mix + res_part)
    assert 0 < res_part < mix


# ---------------------------------------------------------------- the causal teacher (mpc)


def test_mpc_teacher_runs_through_the_agent_interface_as_mpc_scored_it(
    settings: ImitationSettings,
) -> None:
    """``teacher: mpc``: mpc's action at every step of each episode, written as the residual
    over dram-first at dram-first's corner (the plan's code path, one box per step), scores
    through the agent's interface exactly what mpc's own run scored, so each step's target
    is the action mpc took at that step; it is the episode's label where it beats every
    base; each recorded row's target is the residual to mpc's action at that row's step
    (rows are whole batches, one every ``stride`` steps); the targets change over the
    episode (mpc decides again), where the plan's are one per episode."""
    from agents.imitation.experts import mpc_actions

    n, seed = 4, 700
    s = settings.updated(plans=True, teacher="mpc", stride=10)
    mpc, mpc_score, _ = mpc_actions(PLANNED, "mixed", n, seed, s, objective=LOG)
    plan, _, _ = plan_actions(PLANNED, "mixed", n, seed, settings, objective=LOG)
    assert plan.box.ndim == 2 and mpc.per_step and not plan.per_step
    E, S, A = mpc.box.shape
    assert (E, A) == plan.box.shape and S >= 100  # mixed: 100 steps an episode
    assert mpc.off.shape == mpc.box.shape and (mpc.box[mpc.off] <= -1.0).all()
    assert (np.abs(mpc.box) <= 1.0).all() and (mpc.box[~mpc.off] > -1.0).all()
    assert (mpc.box != mpc.box[:, :1]).any()  # a later decision differs from the first
    got = label_episodes(PLANNED, "mixed", n, seed, s, objective=LOG, plans=True)
    assert np.allclose(got.scores[:, 3], mpc_score, rtol=1e-9, atol=0)
    beats = got.scores[:, 3] > got.scores[:, :3].max(axis=1) * (1.0 + s.tie_tolerance)
    assert (got.labels == 3).tolist() == beats.tolist() and beats.any()
    r = np.arange(len(got.obs))
    steps = (r // n) * s.stride
    want = mpc.residual(got.obs, r % n, 3, steps)
    assert got.targets.shape[1] == A + 2 and np.array_equal(got.targets[:, :A], want)
    # a step before: the decision before (mpc decides every 10 steps), another target
    before = mpc.residual(got.obs, r % n, 3, np.maximum(steps - 1, 0))
    assert not np.array_equal(want, before)
    assert (np.abs(got.targets[:, :A]) <= 1.0).all() and got.fit_residual.all()
    with pytest.raises(ValueError, match="step"):
        mpc.residual(got.obs, r % n, 3)


def test_mpc_teacher_share_targets_are_per_step_shares(settings: ImitationSettings) -> None:
    """With ``residual_codec: share`` the mpc teacher's targets are one DRAM share per tenant
    slot and step (0..1.25; 1.25: local-first), scored through the agent's
    interface as mpc scored them, the residual targets within the residual's range."""
    from agents.imitation.experts import mpc_actions

    n, seed = 3, 800
    env = {**PLANNED, "residual_codec": "share"}
    s = settings.updated(plans=True, teacher="mpc", stride=10)
    mpc, mpc_score, _ = mpc_actions(env, "mixed", n, seed, s, objective=LOG)
    sh = mpc.shares
    assert sh is not None and sh.share.shape[:2] == mpc.box.shape[:2]
    assert sh.share.shape[2] == sh.used.shape[1] and mpc.box.shape[1] >= 100
    assert (sh.share >= 0.0).all() and (sh.share <= 1.25).all()
    assert (sh.share[sh.used[:, None, :].repeat(sh.share.shape[1], 1)] < 1.25).any()
    got = label_episodes(env, "mixed", n, seed, s, objective=LOG, plans=True)
    assert np.allclose(got.scores[:, 3], mpc_score, rtol=1e-9, atol=0)
    assert (np.abs(got.targets) <= s.corner_margin).all()
    assert (np.abs(got.targets[:, : sh.share.shape[2]]) <= 1.0).all()


def test_the_default_teacher_is_the_plan(settings: ImitationSettings) -> None:
    """A recipe without ``teacher`` labels with the plan, as before the field existed: the
    same targets as :func:`plan_actions`, the same checkpoint key (the settings' dump without
    the field); ``mpc`` is another key; a teacher needs ``plans``; an unknown one is refused."""
    import hashlib
    import json

    from agents.imitation.checkpoint import FORMAT, VERSION, checkpoint_key
    from agents.imitation.experts import teacher_actions

    assert "teacher" not in SETTINGS and settings.teacher == "plan"
    a, score_a, _ = plan_actions(PLANNED, "mixed", 3, 700, settings, objective=LOG)
    b, score_b, _ = teacher_actions(PLANNED, "mixed", 3, 700, settings, objective=LOG)
    assert np.array_equal(a.box, b.box) and np.array_equal(score_a, score_b)
    model = _model(ENV, 8)
    planned = settings.updated(plans=True)
    shapes = {k: [list(v.shape), str(v.dtype)] for k, v in model.policy.state_dict().items()}
    old = {k: v for k, v in planned.model_dump(mode="json").items() if k != "teacher"}
    what = {"format": FORMAT, "version": VERSION, "settings": old, "env": dict(ENV),
            "seed": 0, "objective": LOG, "policy": shapes}  # fmt: skip
    text = json.dumps(what, sort_keys=True, default=str, separators=(",", ":"))
    key = checkpoint_key(planned, ENV, 0, LOG, model.policy)
    assert key == hashlib.sha256(text.encode()).hexdigest()
    assert checkpoint_key(planned.updated(teacher="mpc"), ENV, 0, LOG, model.policy) != key
    with pytest.raises(ValidationError, match="expected plans: true"):
        settings.updated(teacher="mpc")  # SETTINGS has plans: false
    with pytest.raises(ValidationError, match="teacher"):
        planned.updated(teacher="oracle")


def test_per_step_targets_survive_a_checkpoint(settings: ImitationSettings) -> None:
    """A job labelled by mpc saves and reads back its per-step targets and its stride: the
    rows' targets computed from the read-back data are those computed before."""
    from agents.imitation.checkpoint import _labelled_arrays, _labelled_from

    s = settings.updated(plans=True, teacher="mpc", stride=10)
    got = label_episodes(PLANNED, "mixed", 2, 700, s, objective=LOG, plans=True)
    back = _labelled_from(_labelled_arrays(got), 0.0)
    assert back.episodes.stride == 10 and back.episodes.plans is not None
    assert back.episodes.plans.per_step
    assert np.array_equal(back.episodes.rows(got.obs)[0], got.episodes.rows(got.obs)[0])
    # the privileged critic's width (where the base actions end) survives too
    assert got.episodes.plans is not None
    got.episodes.plans.tail = 7
    assert _labelled_from(_labelled_arrays(got), 0.0).episodes.plans.tail == 7  # type: ignore[union-attr]
