"""``TenantPolicy``: a permutation-invariant actor-critic for the agent's padded view.

The flat ``MlpPolicy`` reads tenant slot 3 with other weights than slot 0, so
each slot's decision is learned from a quarter of the data, and a tenant's
share has to be found among every entry of every slot. ``TenantPolicy`` reads
the agent's observation (:mod:`agents.view`, ``pad_nodes`` set) the way it
is laid out:

- each node's entries and descriptors go through one small network, averaged
  over the machine's real nodes (the node mask): the machine;
- each tenant slot's entries and descriptors, with its rows of every base
  action, go through one network with weights shared by all slots (``phi``);
  sums and means over the slots that run or arrive (``present`` or
  ``upcoming``) give the tenant context (Deep Sets, Zaheer et al., 2017);
- the machine, the tenant context, the global entries and the bases' global
  entries give the global latent (``g``);
- with ``residual_codec: share``, each slot's share entry comes from one head
  shared by all slots on ``[phi_t, g]``; the rate, mode and mixing entries
  come from a linear head on ``g``;
- the critic has encoders of its own and reads the value from its ``g``; with
  ``critic_tenant_features`` (``env.privileged_critic``) its slot network also reads each
  slot's privileged entries at the end of the observation (what the episode still holds,
  :func:`envs.core.coming_tenants`), which the actor never reads: an asymmetric
  actor-critic (Pinto et al., 2018), whose value need not guess the coming arrivals.

It is SB3's ``ActorCriticPolicy`` with another ``mlp_extractor`` (whose actor
latent is every slot's ``phi_t`` and ``g``) and ``action_net`` (the heads), so
PPO and A2C train it unchanged and :mod:`agents.persist` saves it as data. The
layout of the observation and action (:func:`agents.view.agent_layout`)
is a ``policy_kwargs`` entry that ``train.py`` fills from the environment.
Measured against ``MlpPolicy``: docs/experiments/2026-12-01-how-the-default-was-found.md.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import torch as th
from gymnasium import spaces
from stable_baselines3.common.policies import ActorCriticPolicy
from torch import nn

__all__ = ["LAYOUT_KEYS", "TenantExtractor", "TenantHead", "TenantPolicy", "check_layout"]

#: The entries of ``policy_kwargs.layout`` (:func:`agents.view.agent_layout`).
LAYOUT_KEYS = (
    "nodes",  # M: node slots (pad_nodes)
    "node_features",  # entries per node (the first three entries, then mask, ...)
    "node_mask",  # index of the node mask among them
    "tenants",  # T: tenant slots
    "tenant_features",  # entries per tenant slot
    "tenant_present",  # index of "present" among them
    "tenant_upcoming",  # index of "upcoming" among them
    "globals",  # global entries after the tenant slots
    "bases",  # K: base actions at the end of the observation
    "base_action",  # entries of one base action (padded box layout: T x M weights, then the rest)
    "shares",  # share entries at the start of the action (0: the box codec)
    "critic_tenant_features",  # privileged entries per slot closing the observation (critic)
)
#: Layout keys a model saved before they existed lacks (their value then: 0).
OPTIONAL_LAYOUT_KEYS = ("critic_tenant_features",)


def check_layout(layout: Any) -> dict[str, int]:
    """``layout`` as a checked dict of non-negative ints.

    Raises:
        ValueError: a key is missing or unknown, or a value is not an integer >= 0.
    """
    if not isinstance(layout, Mapping):
        raise ValueError(f"layout: got {layout!r}, expected a mapping of {list(LAYOUT_KEYS)}")
    layout = {**dict.fromkeys(OPTIONAL_LAYOUT_KEYS, 0), **layout}
    missing = [k for k in LAYOUT_KEYS if k not in layout]
    unknown = [k for k in layout if k not in LAYOUT_KEYS]
    if missing or unknown:
        raise ValueError(
            f"layout: missing {missing}, unknown {unknown}; expected {list(LAYOUT_KEYS)}"
        )
    out = {}
    for k in LAYOUT_KEYS:
        v = layout[k]
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValueError(f"layout.{k}: got {v!r}, expected an integer >= 0")
        out[k] = v
    return out


class _Encoder(nn.Module):
    """Observation (B, obs) -> per-slot embeddings (B, T, h) and the global latent (B, h).

    ``privileged``: the slot network also reads the slots' privileged entries (the critic's).
    """

    def __init__(self, lay: Mapping[str, int], hidden: int, privileged: bool = False) -> None:
        super().__init__()
        self.lay = dict(lay)
        M, T, K = lay["nodes"], lay["tenants"], lay["bases"]
        self.rest = lay["base_action"] - T * M  # a base action's global entries
        self.extra = lay["critic_tenant_features"] if privileged else 0
        node_h = max(hidden // 4, 8)
        self.node = nn.Sequential(nn.Linear(lay["node_features"], node_h), nn.Tanh())
        self.phi = nn.Sequential(
            nn.Linear(lay["tenant_features"] + K * M + self.extra, hidden),
            nn.Tanh(),
            nn.Linear(hidden, hidden),
            nn.Tanh(),
        )
        self.glob = nn.Sequential(
            nn.Linear(2 * hidden + node_h + lay["globals"] + K * self.rest, hidden),
            nn.Tanh(),
            nn.Linear(hidden, hidden),
            nn.Tanh(),
        )

    def forward(self, obs: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        lay = self.lay
        B = obs.shape[0]
        M, F, T, P = lay["nodes"], lay["node_features"], lay["tenants"], lay["tenant_features"]
        K, A = lay["bases"], lay["base_action"]
        nodes = obs[:, : M * F].reshape(B, M, F)
        mask = nodes[:, :, lay["node_mask"] : lay["node_mask"] + 1]
        machine = (self.node(nodes) * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        at = M * F
        slots = obs[:, at : at + T * P].reshape(B, T, P)
        at += T * P
        glob = obs[:, at : at + lay["globals"]]
        at += lay["globals"]
        bases = obs[:, at : at + K * A].reshape(B, K, A)
        rows = bases[:, :, : T * M].reshape(B, K, T, M).permute(0, 2, 1, 3).reshape(B, T, K * M)
        inputs = [slots, rows]
        if self.extra:
            at += K * A
            inputs.append(obs[:, at : at + T * self.extra].reshape(B, T, self.extra))
        phi = self.phi(th.cat(inputs, dim=2))
        up = (
            (slots[:, :, lay["tenant_present"]] > 0.5) | (slots[:, :, lay["tenant_upcoming"]] > 0.5)
        ).to(phi.dtype)[..., None]
        total = (phi * up).sum(1)
        mean = total / up.sum(1).clamp(min=1.0)
        g = self.glob(
            th.cat([total / T, mean, machine, glob, bases[:, :, T * M :].reshape(B, -1)], dim=1)
        )
        return phi, g


class TenantExtractor(nn.Module):
    """SB3's ``mlp_extractor``: actor latent ``[phi_1 .. phi_T, g]`` (B, (T + 1) h), critic
    latent its own ``g`` (B, h)."""

    def __init__(self, lay: Mapping[str, int], hidden: int) -> None:
        super().__init__()
        self.actor = _Encoder(lay, hidden)
        self.critic = _Encoder(lay, hidden, privileged=True)
        self.latent_dim_pi = (lay["tenants"] + 1) * hidden
        self.latent_dim_vf = hidden

    def forward_actor(self, features: th.Tensor) -> th.Tensor:
        phi, g = self.actor(features)
        return th.cat([phi.flatten(1), g], dim=1)

    def forward_critic(self, features: th.Tensor) -> th.Tensor:
        return self.critic(features)[1]

    def forward(self, features: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        return self.forward_actor(features), self.forward_critic(features)


class TenantHead(nn.Module):
    """SB3's ``action_net``: the actor latent -> the action mean (B, A): the share entries from
    one head shared by the slots (``[phi_t, g]``), the other entries from a linear head on ``g``."""

    def __init__(self, lay: Mapping[str, int], hidden: int, n_actions: int) -> None:
        super().__init__()
        self.T, self.h, self.shares = lay["tenants"], hidden, lay["shares"]
        if self.shares not in (0, self.T):
            raise ValueError(
                f"TenantPolicy: {self.shares} share entries for {self.T} tenant slots; "
                "expected per-tenant weights (weights='per-tenant')"
            )
        self.share = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.Tanh(), nn.Linear(hidden, 1))
        self.out = nn.Linear(hidden, n_actions - self.shares)

    def forward(self, latent: th.Tensor) -> th.Tensor:
        B, T, h = latent.shape[0], self.T, self.h
        g = latent[:, T * h :]
        rest = self.out(g)
        if not self.shares:
            return rest
        phi = latent[:, : T * h].reshape(B, T, h)
        share = self.share(th.cat([phi, g[:, None].expand(B, T, h)], dim=2))[..., 0]
        return th.cat([share, rest], dim=1)

    def zero_rows(self, n: int) -> None:
        """Hold the first ``n`` action entries at 0 (the residual; :func:`agents.imitation.fit_targets`)."""
        with th.no_grad():
            if self.shares:
                last = self.share[-1]
                assert isinstance(last, nn.Linear)
                last.weight.zero_()
                last.bias.zero_()
            self.out.weight[: n - self.shares] = 0.0
            self.out.bias[: n - self.shares] = 0.0


class TenantPolicy(ActorCriticPolicy):
    """Actor-critic with per-tenant and per-node shared weights (see the module).

    Args:
        layout: the observation's and action's layout (:data:`LAYOUT_KEYS`;
            ``train.py`` fills it from the environment).
        net_arch: ``[h, h]``: the width ``h`` of the encoders' two layers and the heads
            (default ``[128, 128]``, ``MlpPolicy``'s default here).
        log_std_init, ortho_init, optimizer_class, optimizer_kwargs: as SB3's; ``use_sde``
            must be false.
    """

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        lr_schedule: Any,
        layout: Mapping[str, int] | None = None,
        net_arch: list[int] | None = None,
        log_std_init: float = 0.0,
        ortho_init: bool = True,
        optimizer_class: type[th.optim.Optimizer] = th.optim.Adam,
        optimizer_kwargs: dict[str, Any] | None = None,
        use_sde: bool = False,
    ) -> None:
        if use_sde:
            raise ValueError("TenantPolicy: use_sde=true is not supported (a Gaussian policy)")
        arch = [128, 128] if net_arch is None else list(net_arch)
        if len(arch) != 2 or arch[0] != arch[1] or not isinstance(arch[0], int) or arch[0] < 1:
            raise ValueError(
                f"TenantPolicy: net_arch {net_arch!r}: expected [h, h] (two equal widths)"
            )
        if layout is None:
            raise ValueError("TenantPolicy: needs policy_kwargs.layout (train.py fills it)")
        self.layout = check_layout(layout)
        self.hidden = arch[0]
        lay = self.layout
        want = (
            lay["nodes"] * lay["node_features"]
            + lay["tenants"] * lay["tenant_features"]
            + lay["globals"]
            + lay["bases"] * lay["base_action"]
            + lay["tenants"] * lay["critic_tenant_features"]
        )
        if observation_space.shape != (want,):
            raise ValueError(
                f"TenantPolicy: layout {lay} gives observations of {want} entries, the "
                f"environment's have shape {observation_space.shape}"
            )
        super().__init__(
            observation_space,
            action_space,
            lr_schedule,
            log_std_init=log_std_init,
            ortho_init=ortho_init,
            optimizer_class=optimizer_class,
            optimizer_kwargs=optimizer_kwargs,
        )

    def _build_mlp_extractor(self) -> None:
        self.mlp_extractor = TenantExtractor(self.layout, self.hidden)  # type: ignore[assignment]

    def _build(self, lr_schedule: Any) -> None:
        super()._build(lr_schedule)  # a linear action_net, replaced by the heads
        n = int(self.action_space.shape[0])  # type: ignore[index]
        self.action_net = TenantHead(self.layout, self.hidden, n)
        if self.ortho_init:
            self.action_net.apply(lambda m: self.init_weights(m, gain=0.01))
        self.optimizer = self.optimizer_class(  # type: ignore[call-arg]
            self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs
        )

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data.update(layout=self.layout, net_arch=[self.hidden, self.hidden])
        # ActorCriticPolicy's arguments that this constructor takes (use_sde: always false)
        taken = inspect.signature(TenantPolicy.__init__).parameters
        return {k: v for k, v in data.items() if k in taken and k != "use_sde"}
