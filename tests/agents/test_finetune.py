"""The fine-tuning guards (agents.finetune): critic warm-up, the anchor, a fixed log-std."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch as th
from stable_baselines3 import PPO

from agents.finetune import FineTuneGuards, actor_parameters, fix_log_std
from envs import load_scenario
from envs.sb3 import make_vec_env

SHORT = load_scenario("kv-store", episode_steps=8)


def _model(seed: int = 0) -> PPO:
    env = make_vec_env(4, scenario=SHORT, reward_baseline="colloid")
    return PPO("MlpPolicy", env, n_steps=8, batch_size=16, n_epochs=2, seed=seed, device="cpu")


def _state(model: PPO) -> dict[str, th.Tensor]:
    return {k: v.clone() for k, v in model.policy.state_dict().items()}


def _obs(model: PPO, n: int = 64) -> th.Tensor:
    rng = np.random.default_rng(0)
    space = model.observation_space
    return th.as_tensor(rng.uniform(0, 1, (n, *space.shape)), dtype=th.float32)


def test_actor_parameters_are_the_ones_the_action_distribution_depends_on() -> None:
    model = _model()
    names = {id(p): k for k, p in model.policy.named_parameters()}
    actor = {names[id(p)] for p in actor_parameters(model.policy, _obs(model, 4))}
    assert all(k.startswith(("mlp_extractor.policy_net", "action_net", "log_std")) for k in actor)
    assert {"mlp_extractor.policy_net.0.weight", "action_net.weight", "log_std"} <= actor


def test_critic_warmup_trains_the_value_function_alone_then_both() -> None:
    model = _model()
    before = _state(model)
    guards = FineTuneGuards(critic_warmup=2)
    model.learn(2 * 8 * 4, callback=[guards])  # two rollouts, both warm-up updates
    after = _state(model)
    changed = {k for k in before if not th.equal(before[k], after[k])}
    assert changed and all(k.startswith(("mlp_extractor.value_net", "value_net")) for k in changed)
    model.learn(8 * 4, callback=[guards], reset_num_timesteps=False)  # the third: both
    assert not th.equal(after["action_net.weight"], model.policy.state_dict()["action_net.weight"])
    assert guards.updates == 3


def _moved_from_start(coef: float, steps: int) -> float:
    """The squared distance of the action mean from where PPO (at a high learning rate)
    started, after four updates with the anchor of ``coef`` and ``steps``."""
    model = _model()
    start = PPO("MlpPolicy", model.env, seed=0, device="cpu").policy
    start.load_state_dict(model.policy.state_dict())
    model.learning_rate = 3e-3
    model._setup_lr_schedule()
    model.learn(4 * 8 * 4, callback=[FineTuneGuards(anchor_coef=coef, anchor_steps=steps,
                                                    learning_rate=3e-3)])  # fmt: skip
    obs = _obs(model)
    with th.no_grad():
        d = (model.policy.get_distribution(obs).distribution.mean
             - start.get_distribution(obs).distribution.mean).pow(2).sum(-1).mean()  # fmt: skip
    return float(d)


@pytest.mark.parametrize(("coef", "steps"), [(0.0, 0), (50.0, 0), (50.0, 20)],
                         ids=["none", "in-the-loss", "separate-steps"])  # fmt: skip
def test_the_anchor_pulls_the_mean_back_to_the_starting_policy(coef: float, steps: int) -> None:
    # without the anchor PPO moves the mean; with it, in either form, the mean stays near
    d = _moved_from_start(coef, steps)
    assert (d > 1e-3) if coef == 0 else (d < 1e-3)


def test_in_the_loss_the_coefficient_weighs_the_anchor_against_ppo() -> None:
    """anchor_steps 0: the term's gradient joins PPO's, so a larger coefficient holds the
    mean closer to the start (in the separate Adam steps the coefficient's scale cancels)."""
    free, weak, strong = (_moved_from_start(c, 0) for c in (0.0, 0.5, 50.0))
    assert strong < weak < free


def test_the_in_loss_anchor_leaves_the_optimizer_as_it_found_it() -> None:
    """The term hooks the algorithm's optimizer for the training call only: a later call
    without the guards trains PPO alone."""
    model = _model()
    guards = FineTuneGuards(anchor_coef=1.0)
    model.learn(8 * 4, callback=[guards])
    assert guards._mses == [] and guards.updates == 1  # logged and reset at the update's end
    calls = []
    guards._anchor_loss = lambda: calls.append(1)  # type: ignore[method-assign]
    model.learn(8 * 4, reset_num_timesteps=False)
    assert calls == []


def test_fixed_log_std_stays_fixed() -> None:
    model = _model()
    fix_log_std(model.policy, -2.5)
    model.learn(2 * 8 * 4, callback=[FineTuneGuards(anchor_coef=1.0, anchor_steps=2)])
    np.testing.assert_array_equal(model.policy.log_std.detach().numpy(), -2.5)
    with pytest.raises(ValueError, match="log-std"):
        fix_log_std(object(), -1.0)


def test_the_anchor_reference_is_a_frozen_copy_of_the_weights_alone() -> None:
    model = _model()
    # what an imitation fit can leave on a module: a tensor inside an autograd graph, which
    # copy.deepcopy refuses
    model.policy.leftover = th.ones(1, requires_grad=True) * 2.0
    start = _state(model)
    guards = FineTuneGuards(anchor_coef=1.0, anchor_steps=1)
    model.learn(8 * 4, callback=[guards])
    ref = guards._reference
    assert ref is not model.policy and not any(p.requires_grad for p in ref.parameters())
    assert not hasattr(ref, "leftover")
    assert all(th.equal(v, start[k]) for k, v in ref.state_dict().items())


@pytest.mark.parametrize("given", [False, True], ids=["rollout-states", "given-states"])
def test_the_anchor_is_the_distance_to_the_frozen_copy_on_the_drawn_states(given: bool) -> None:
    """The frozen copy's means are made once for all the anchor's states; the loss on a
    drawn batch is still the squared distance of the two policies' means on that batch."""
    model = _model()
    kept = _obs(model, 40).numpy() if given else None
    guards = FineTuneGuards(anchor_coef=1.0, anchor_steps=2, anchor_batch=16, anchor_states=kept)
    loss_of_batch, seen = guards._anchor_loss, []

    def spy() -> th.Tensor:
        assert guards._gen is not None and guards._obs is not None
        redraw = th.Generator()
        redraw.set_state(guards._gen.get_state())  # the batch the loss is about to draw
        obs = guards._obs[th.randint(guards._obs.shape[0], (16,), generator=redraw)]
        loss = loss_of_batch()
        with th.no_grad():
            mean = model.policy.get_distribution(obs).distribution.mean
            ref = guards._reference.get_distribution(obs).distribution.mean
        seen.append((float(loss), float((mean - ref).pow(2).sum(-1).mean())))
        return loss

    guards._anchor_loss = spy  # type: ignore[method-assign]
    model.learn(2 * 8 * 4, callback=[guards])
    assert len(seen) == 4 and seen[-1][1] > 0  # two updates of two steps; PPO moved the mean
    # a second training call anchors to the policy it starts from, as its frozen copy is
    model.learn(8 * 4, callback=[guards], reset_num_timesteps=False)
    assert len(seen) == 6
    np.testing.assert_allclose(*zip(*seen, strict=True), rtol=1e-6)


def test_an_anchor_on_given_states_keeps_the_policy_there() -> None:
    """anchor_states: the anchor is taken on the given observations (not the rollout's), so
    the action mean stays near the starting policy's on them while PPO moves it elsewhere."""
    model = _model()
    start = PPO("MlpPolicy", model.env, seed=0, device="cpu").policy
    start.load_state_dict(model.policy.state_dict())
    model.learning_rate = 3e-3
    model._setup_lr_schedule()
    kept = _obs(model, 32)
    guards = FineTuneGuards(anchor_coef=1.0, anchor_steps=20, learning_rate=3e-3,
                            anchor_states=kept.numpy())  # fmt: skip
    model.learn(4 * 8 * 4, callback=[guards])

    def moved(obs: th.Tensor) -> float:
        with th.no_grad():
            a = model.policy.get_distribution(obs).distribution.mean
            return float((a - start.get_distribution(obs).distribution.mean).pow(2).sum(-1).mean())

    rollout = th.as_tensor(model.rollout_buffer.observations.reshape(-1, kept.shape[1]))
    assert moved(kept) < 1e-3 < moved(rollout)


def test_labelled_states_are_the_jobs_of_the_other_families(tmp_path: Path) -> None:
    """labelled_states: every job's recorded states but those of the excluded families; a
    checkpoint without any is a clear error naming the folder."""
    import json

    from agents.imitation.checkpoint import CheckpointError, labelled_states

    for i, (family, value) in enumerate(
        [("mixed", 0.0), ("gen-2s-snc", 1.0), ("gen-1s-4cxl", 2.0)]
    ):
        np.savez(tmp_path / f"job-{i:03d}.npz", obs=np.full((3, 5), value, np.float32))
        (tmp_path / f"job-{i:03d}.json").write_text(json.dumps({"family": family}))
    got = labelled_states(tmp_path, exclude=["mixed"])
    assert got.shape == (6, 5) and sorted(set(got[:, 0].tolist())) == [1.0, 2.0]
    with pytest.raises(CheckpointError, match=str(tmp_path)):
        labelled_states(tmp_path, exclude=["mixed", "gen-2s-snc", "gen-1s-4cxl"])
