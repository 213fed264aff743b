"""One policy for every machine: the agent's view padded to ``pad_nodes`` nodes.

With ``pad_nodes: M`` the agent sees node entries padded to ``M`` node slots, each
with a mask and its descriptors (:data:`NODE_DESCRIPTORS`: kind, socket, read peak,
idle latency, what HMAT/CDAT give), and per-tenant weights over ``M`` nodes of which
those of padded nodes are dropped; so one network runs on machines of 2 to ``M``
nodes. :class:`PaddedLayout` is that view of one machine (one
:class:`~envs.core.EnvParams`), built once, with every part named: the observation
is the node slots, the tenant slots (each: :data:`envs.spaces.TENANT_ENTRIES`, one
weight per node, the tenant's descriptors), the global entries and the bases' padded
box actions; a box action is the weight rows over the nodes, then the rest (rate,
then the tiering mode when the environment has one).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from envs.core import EnvParams, Hardware
from envs.spaces import NODE_ENTRIES, TENANT_ENTRIES

__all__ = [
    "NODE_DESCRIPTORS",
    "BoxAction",
    "ObservationBlocks",
    "PaddedLayout",
    "TenantSlot",
    "node_descriptors",
    "pad_action",
    "pad_observation",
    "unpad_action",
]

#: What the padded view adds to a node slot's :data:`envs.spaces.NODE_ENTRIES`, in order.
NODE_DESCRIPTORS = ("mask", "is_cxl", "socket", "read_peak", "idle_latency")


@dataclass(frozen=True)
class ObservationBlocks:
    """A flat observation: node slots, tenant slots, then the global entries."""

    n_nodes: int
    node_width: int
    n_tenants: int
    tenant_width: int
    n_globals: int

    @property
    def nodes(self) -> slice:
        return slice(0, self.n_nodes * self.node_width)

    @property
    def tenants(self) -> slice:
        start = self.nodes.stop
        return slice(start, start + self.n_tenants * self.tenant_width)

    @property
    def globals(self) -> slice:
        start = self.tenants.stop
        return slice(start, start + self.n_globals)

    @property
    def size(self) -> int:
        return self.globals.stop


@dataclass(frozen=True)
class TenantSlot:
    """One tenant slot: its entries (:data:`~envs.spaces.TENANT_ENTRIES`), the weights in
    force on each node, then its descriptors."""

    n_nodes: int
    n_descriptors: int

    @property
    def entries(self) -> slice:
        return slice(0, len(TENANT_ENTRIES))

    @property
    def weights(self) -> slice:
        start = self.entries.stop
        return slice(start, start + self.n_nodes)

    @property
    def descriptors(self) -> slice:
        start = self.weights.stop
        return slice(start, start + self.n_descriptors)

    @property
    def size(self) -> int:
        return self.descriptors.stop


@dataclass(frozen=True)
class BoxAction:
    """A box action: the weight rows (``rows x n_nodes`` entries, row-major), then the rest."""

    rows: int
    n_nodes: int
    n_rest: int

    @property
    def weights(self) -> slice:
        return slice(0, self.rows * self.n_nodes)

    @property
    def rest(self) -> slice:
        start = self.weights.stop
        return slice(start, start + self.n_rest)

    @property
    def size(self) -> int:
        return self.rest.stop


@dataclass(frozen=True)
class PaddedLayout:
    """The agent's padded view of one machine: the environment's layout (``env_*``) and the
    agent's (padded to ``pad_nodes`` node slots), by part; build it with :meth:`of`.

    The agent's observation is :attr:`obs` (node slots of :attr:`node_entries` then
    :attr:`node_descriptors`, tenant slots of :attr:`slot`, the globals) followed by
    :attr:`base_actions`: ``bases`` padded box actions (:attr:`action`).
    """

    pad_nodes: int
    machine_nodes: int
    tenants: int
    descriptor_names: tuple[str, ...]
    n_globals: int
    weight_rows: int
    action_rest: int
    bases: int = 0

    @classmethod
    def of(cls, params: EnvParams, pad_nodes: int, bases: int = 0) -> PaddedLayout:
        """The padded view of ``params`` with ``bases`` base actions after the observation.

        Raises:
            ValueError: the machine has more nodes than ``pad_nodes``, or the observation
                has no tenant descriptors.
        """
        if params.n_nodes > pad_nodes:
            raise ValueError(
                f"pad_nodes: the machine has {params.n_nodes} nodes {params.node_names}, "
                f"more than {pad_nodes}"
            )
        enc, codec = params.encoder, params.codec
        if not enc.n_desc:
            raise ValueError(
                "pad_nodes: needs observation='full', 'cgroup', 'demand' or 'topology' (the tenant "
                "descriptors)"
            )
        rows = codec.n_weight_rows
        lay = cls(
            pad_nodes=pad_nodes,
            machine_nodes=params.n_nodes,
            tenants=enc.T,
            descriptor_names=tuple(enc.desc_names),
            n_globals=enc.n_glob,
            weight_rows=rows,
            action_rest=codec.size - rows * codec.n_nodes,
            bases=bases,
        )
        assert lay.env_obs.size == enc.size and lay.env_action.size == codec.size
        return lay

    # ------------------------------------------------------------------ a node slot
    @property
    def node_entries(self) -> slice:
        """A node slot's measured entries (:data:`~envs.spaces.NODE_ENTRIES`)."""
        return slice(0, len(NODE_ENTRIES))

    @property
    def node_descriptors(self) -> slice:
        """A node slot's :data:`NODE_DESCRIPTORS` (zero on a padded slot)."""
        start = self.node_entries.stop
        return slice(start, start + len(NODE_DESCRIPTORS))

    # ------------------------------------------------------------------ the two layouts
    @property
    def env_obs(self) -> ObservationBlocks:
        """The environment's observation."""
        N = self.machine_nodes
        return ObservationBlocks(
            N, len(NODE_ENTRIES), self.tenants, self.env_slot.size, self.n_globals
        )

    @property
    def obs(self) -> ObservationBlocks:
        """The padded observation (without the base actions)."""
        return ObservationBlocks(
            self.pad_nodes, self.node_descriptors.stop, self.tenants, self.slot.size, self.n_globals
        )

    @property
    def env_slot(self) -> TenantSlot:
        return TenantSlot(self.machine_nodes, len(self.descriptor_names))

    @property
    def slot(self) -> TenantSlot:
        """A padded tenant slot: the machine's nodes' weights first, then zeros."""
        return TenantSlot(self.pad_nodes, len(self.descriptor_names))

    @property
    def env_action(self) -> BoxAction:
        return BoxAction(self.weight_rows, self.machine_nodes, self.action_rest)

    @property
    def action(self) -> BoxAction:
        """A padded box action: the machine's nodes first in each weight row."""
        return BoxAction(self.weight_rows, self.pad_nodes, self.action_rest)

    @property
    def base_actions(self) -> slice:
        """The bases' padded box actions, after :attr:`obs`."""
        start = self.obs.size
        return slice(start, start + self.bases * self.action.size)

    @property
    def size(self) -> int:
        """The agent's whole observation."""
        return self.base_actions.stop

    def policy_layout(self, shares: int, critic_features: int = 0) -> dict[str, int]:
        """The entries of :class:`agents.networks.TenantPolicy`'s ``policy_kwargs.layout``
        (:data:`agents.networks.LAYOUT_KEYS`), ``shares`` share entries opening the action,
        ``critic_features`` privileged entries per tenant slot closing the observation."""
        return {
            "nodes": self.pad_nodes,
            "node_features": self.obs.node_width,
            "node_mask": self.node_descriptors.start + NODE_DESCRIPTORS.index("mask"),
            "tenants": self.tenants,
            "tenant_features": self.slot.size,
            "tenant_present": self.slot.entries.start + TENANT_ENTRIES.index("present"),
            "tenant_upcoming": self.slot.descriptors.start
            + self.descriptor_names.index("upcoming"),
            "globals": self.n_globals,
            "bases": self.bases,
            "base_action": self.action.size,
            "shares": shares,
            "critic_tenant_features": critic_features,
        }


def node_descriptors(hw: Hardware, rows: NDArray | None = None) -> dict[str, NDArray | float]:
    """Each of :data:`NODE_DESCRIPTORS` of the machines' real nodes ((B, N) or a scalar), on
    [0, 1]; ``rows``: the instances to read (default: all)."""
    sel = slice(None) if rows is None else rows
    return {
        "mask": 1.0,
        "is_cxl": hw.is_cxl[sel],
        "socket": np.minimum(hw.socket[sel], 1),
        "read_peak": np.log2(1.0 + hw.read_gbps[sel]) / np.log2(1.0 + 512.0),
        "idle_latency": np.minimum(hw.idle_latency_ns[sel] / 1000.0, 1.0),
    }


def pad_observation(
    lay: PaddedLayout, obs: NDArray, hw: Hardware, rows: NDArray | None = None
) -> NDArray:
    """The environment's observations (B, size) in the padded layout :attr:`PaddedLayout.obs`:
    node entries and descriptors in the first node slots, weights of padded nodes 0.
    ``rows``: the instances of ``hw`` that ``obs`` belongs to (default: all, in order)."""
    B, N, T = obs.shape[0], lay.machine_nodes, lay.tenants
    env, pad = lay.env_obs, lay.obs
    _check_width(obs, env.size, "observation")
    node = np.zeros((B, pad.n_nodes, pad.node_width), dtype=np.float32)
    node[:, :N, lay.node_entries] = obs[:, env.nodes].reshape(B, N, env.node_width)
    desc = node_descriptors(hw, rows)
    for j, k in enumerate(NODE_DESCRIPTORS):
        node[:, :N, lay.node_descriptors.start + j] = desc[k]
    es, ps = lay.env_slot, lay.slot
    ten = obs[:, env.tenants].reshape(B, T, es.size)
    slots = np.zeros((B, T, ps.size), dtype=np.float32)
    slots[:, :, ps.entries] = ten[:, :, es.entries]
    slots[:, :, ps.weights.start : ps.weights.start + N] = ten[:, :, es.weights]
    slots[:, :, ps.descriptors] = ten[:, :, es.descriptors]
    return np.concatenate([node.reshape(B, -1), slots.reshape(B, -1), obs[:, env.globals]], axis=1)


def pad_action(lay: PaddedLayout, a: NDArray, fill: float) -> NDArray:
    """Environment-layout box actions (B, size) -> the padded layout (padded weights ``fill``)."""
    env, pad = lay.env_action, lay.action
    _check_width(a, env.size, "action")
    R, N = env.rows, env.n_nodes
    w = np.full((a.shape[0], R, pad.n_nodes), fill, dtype=np.float32)
    w[:, :, :N] = a[:, env.weights].reshape(-1, R, N)
    return np.concatenate([w.reshape(a.shape[0], -1), a[:, env.rest]], axis=1)


def unpad_action(lay: PaddedLayout, a: NDArray) -> NDArray:
    """Padded box actions (B, size) -> the environment's layout (padded nodes' weights dropped)."""
    env, pad = lay.env_action, lay.action
    _check_width(a, pad.size, "action")
    w = a[:, pad.weights].reshape(-1, pad.rows, pad.n_nodes)[:, :, : env.n_nodes]
    return np.concatenate([w.reshape(a.shape[0], -1), a[:, pad.rest]], axis=1)


def _check_width(a: NDArray, size: int, what: str) -> None:
    if a.ndim != 2 or a.shape[1] != size:
        raise ValueError(f"{what}: got shape {a.shape}, expected (batch, {size})")
