"""Fine-tuning that does not forget: the RL phase's guards around a pre-trained policy.

PPO's first updates after a warm start follow advantages from a value function that has
never been fitted, and nothing pulls the policy back when its mean drifts. Three guards,
each a recipe key of ``rl.finetune`` (docs/training.md), each from the literature:

- **critic warm-up** (PIRLNav, CVPR 2023): the first ``critic_warmup`` rollouts train the
  value function alone; every parameter the action distribution depends on is frozen
  (found by differentiating the distribution, so it holds for any policy class);
- **an anchor to the pre-trained policy** (DAPG, Rajeswaran et al. 2018; Wolczyk et al.,
  ICML 2024): ``anchor_coef * decay**k * mean ||mu(o) - mu_ref(o)||^2``, ``mu_ref`` the
  policy as RL found it (frozen), ``k`` the updates done, over the rollout's observations
  or given ones. With ``anchor_steps`` 0 it is a term of PPO's loss: its gradient joins
  every PPO gradient step's (after PPO's gradient clipping), so ``anchor_coef`` weighs it
  against PPO's objective. With ``anchor_steps`` > 0 it is instead that many steps of a
  separate Adam after each update; Adam's steps do not depend on the scale of the loss, so
  there its strength is ``anchor_steps`` and ``anchor_learning_rate`` and ``anchor_coef``
  acts only once its decay brings the gradient down to Adam's epsilon.
  With both policies' log-std fixed and equal the term is their KL divergence up to a factor;
- **a fixed log-std** (``log_std``): exploration stays as small as the recipe sets it, and
  the KL above stays the squared distance of the means.

PPO's own ``target_kl`` (``rl.hyperparams``) stops an update's epochs early as well.
:class:`FineTuneGuards` is one stable-baselines3 callback that applies the first two;
:func:`fix_log_std` the third.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch as th
from stable_baselines3.common.callbacks import BaseCallback
from torch import nn

__all__ = ["FineTuneGuards", "actor_parameters", "fix_log_std"]


def fix_log_std(policy: Any, value: float) -> None:
    """Set a Gaussian policy's log-std to ``value`` everywhere and stop training it."""
    log_std = getattr(policy, "log_std", None)
    if not isinstance(log_std, nn.Parameter):
        raise ValueError("rl.finetune.log_std: the policy has no state-independent log-std")
    with th.no_grad():
        log_std.fill_(value)
    log_std.requires_grad_(False)


def _mean_actions(policy: Any, obs: th.Tensor) -> th.Tensor:
    """The mean (deterministic, before any squashing) action of ``policy`` for ``obs``."""
    return policy.get_distribution(obs).distribution.mean


def actor_parameters(policy: Any, obs: th.Tensor) -> list[nn.Parameter]:
    """The trainable parameters the action distribution depends on (for ``obs``): those of
    its mean and of its standard deviation."""
    params = [p for p in policy.parameters() if p.requires_grad]
    dist = policy.get_distribution(obs).distribution
    grads = th.autograd.grad(dist.mean.sum() + dist.stddev.sum(), params, allow_unused=True)
    return [p for p, g in zip(params, grads, strict=True) if g is not None]


class FineTuneGuards(BaseCallback):
    """Critic warm-up and the decaying anchor to the policy at the start of RL (on-policy).

    ``critic_warmup``: rollouts whose update trains the value function only;
    ``anchor_coef``, ``anchor_decay``: the anchor term's weight at the first update and its
    factor per update (a zero coefficient: no anchor); ``anchor_steps``: 0, the term joins
    every gradient step of the algorithm's own optimizer; more, the separate Adam steps it
    takes after each update instead, at ``learning_rate``; ``anchor_batch``: observations
    per gradient step of the term.
    ``anchor_states``: observations to take the anchor on instead of each rollout's (the
    states of what RL does not train on, so that the policy keeps its behaviour there).
    Logs ``train/anchor_coef``, ``train/anchor_mse`` and ``train/critic_warmup``.
    """

    def __init__(
        self,
        critic_warmup: int = 0,
        anchor_coef: float = 0.0,
        anchor_decay: float = 1.0,
        anchor_steps: int = 0,
        anchor_batch: int = 4096,
        learning_rate: float = 1e-4,
        anchor_states: np.ndarray | None = None,
    ) -> None:
        super().__init__()
        self.critic_warmup = critic_warmup
        self.anchor_coef = anchor_coef
        self.anchor_decay = anchor_decay
        self.anchor_steps = anchor_steps
        self.anchor_batch = anchor_batch
        self.learning_rate = learning_rate
        #: fixed observations to take the anchor on (None: each rollout's)
        self.anchor_states = None if anchor_states is None else th.as_tensor(anchor_states)
        self.updates = 0  # PPO updates this callback has seen end
        self._reference: Any = None
        self._actor: list[nn.Parameter] = []
        self._obs: th.Tensor | None = None
        self._targets: th.Tensor | None = None  # the frozen copy's mean action on each of _obs
        self._fixed_targets: th.Tensor | None = None  # the same on anchor_states (per learn call)
        self._optimizer: th.optim.Optimizer | None = None  # the separate steps' Adam
        self._hook: Any = None  # the in-loss term's handle on the algorithm's optimizer
        self._gen: th.Generator | None = None
        self._mses: list[float] = []
        self._frozen = False
        self._updating = False  # a rollout ended: its update runs before the next one starts

    @property
    def anchoring(self) -> bool:
        return self.anchor_coef > 0

    def _on_training_start(self) -> None:
        policy = self.model.policy
        rollout = getattr(self.model, "n_steps", 0) * self.model.n_envs
        if not hasattr(self.model, "rollout_buffer") or rollout < 1:
            raise ValueError("rl.finetune: the guards need an on-policy algorithm (ppo, a2c)")
        self.updates = self.model.num_timesteps // rollout
        if self.anchoring:  # a frozen copy, rebuilt as SB3 loads a policy (no deepcopy of
            # tensors an imitation fit may have left in the module's attributes)
            self._reference = type(policy)(**policy._get_constructor_parameters())
            self._reference.load_state_dict(policy.state_dict())
            self._reference.requires_grad_(False)
            if self.anchor_states is not None:  # its means there, for every update of this call
                self._fixed_targets = self._reference_means(self.anchor_states)
        obs_space = policy.observation_space
        probe = th.as_tensor(np.stack([obs_space.sample() for _ in range(4)]), dtype=th.float32)
        self._actor = actor_parameters(policy, probe)
        if self.anchoring and self.anchor_steps > 0:
            self._optimizer = th.optim.Adam(self._actor, lr=self.learning_rate)
        elif self.anchoring:  # SB3's on-policy algorithms step policy.optimizer once a batch
            self._hook = policy.optimizer.register_step_pre_hook(self._anchor_in_loss)

    def _set_actor_frozen(self, frozen: bool) -> None:
        if frozen != self._frozen:
            for p in self._actor:
                p.requires_grad_(not frozen)
            self._frozen = frozen

    def _on_rollout_end(self) -> None:
        # the update that follows this rollout: the critic alone during the warm-up
        warm = self.updates < self.critic_warmup
        self._set_actor_frozen(warm)
        self.logger.record("train/critic_warmup", float(warm))
        self._updating = True
        if self.anchoring and self.anchor_states is not None:
            self._obs, self._targets = self.anchor_states, self._fixed_targets
        elif self.anchoring:  # the rollout's observations, for the anchor after the update
            obs = self.model.rollout_buffer.observations  # type: ignore[attr-defined]
            self._obs = th.as_tensor(obs.reshape(-1, *obs.shape[2:]).copy(), dtype=th.float32)
            self._targets = self._reference_means(self._obs)
        self._gen = th.Generator().manual_seed(int(self.model.num_timesteps))

    @property
    def _coef(self) -> float:
        return self.anchor_coef * self.anchor_decay**self.updates

    def _reference_means(self, obs: th.Tensor) -> th.Tensor:
        """The frozen copy's mean action on every observation of ``obs``, once, rather than on
        each batch drawn from them (a row's mean does not depend on the rows beside it)."""
        with th.no_grad():
            return _mean_actions(self._reference, obs)

    def _anchor_loss(self) -> th.Tensor:
        """The anchor's squared distance on a batch of its observations (with the graph)."""
        assert self._obs is not None and self._targets is not None and self._gen is not None
        n = self._obs.shape[0]
        idx = th.randint(n, (min(self.anchor_batch, n),), generator=self._gen)
        mse = (_mean_actions(self.model.policy, self._obs[idx]) - self._targets[idx]) ** 2
        mse = mse.sum(-1).mean()
        self._mses.append(float(mse.detach()))
        return mse

    def _anchor_in_loss(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        """Before each step of the algorithm's optimizer: the term's gradient joins PPO's."""
        if self._updating and not self._frozen and self._obs is not None and self._coef > 0:
            (self._coef * self._anchor_loss()).backward()

    def _anchor(self) -> None:
        """At an update's end: the separate steps (``anchor_steps`` > 0), then the logs."""
        if self._obs is None or not self.anchoring:
            return
        coef = self._coef
        self.logger.record("train/anchor_coef", coef)
        if self._optimizer is not None and coef > 0 and not self._frozen:
            for _ in range(self.anchor_steps):
                loss = coef * self._anchor_loss()
                self._optimizer.zero_grad()
                loss.backward()
                self._optimizer.step()
        if self._mses:
            self.logger.record("train/anchor_mse", float(np.mean(self._mses)))
        self._mses = []

    def _update_ended(self) -> None:
        if self._updating:
            self._anchor()
            self.updates += 1
            self._obs = self._targets = None
            self._updating = False

    def _on_rollout_start(self) -> None:
        self._update_ended()

    def _on_training_end(self) -> None:
        self._update_ended()
        self._set_actor_frozen(False)
        if self._hook is not None:
            self._hook.remove()
            self._hook = None

    def _on_step(self) -> bool:
        return True
