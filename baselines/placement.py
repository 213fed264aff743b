"""A weight row's DRAM share of new pages and the interleave weights that give it.

One quantity places a tenant's pages on a DRAM+CXL machine: ``x``, the share of
its new pages that go to DRAM, on the range ``0..SHARE_TOP``. ``x`` above 1 is
local-first allocation (all weights 0, Linux's default, what ``dram-first``
does); ``0 <= x <= 1`` interleaves ``x`` of new pages over the DRAM nodes
nearest to where the tenant runs and the rest over the nearest CXL nodes, each
tier split by firmware bandwidth (weights in 1/100 by default). The clairvoyant
planner (:mod:`baselines.planner`) searches this range, the imitation experts
(:mod:`agents.imitation.experts`) turn its plans into weights, and the agent's
``residual_codec: share`` (:mod:`agents.view.codec`) moves a base heuristic's share
along it; ``colloid`` and ``bw-aware-interleave`` (:mod:`baselines.policies`) set
shares of ``0..1``. All of them map shares to weights here, and only here. The
kernel-faithful ``weighted-interleave`` and ``interleave`` do not: they set the
kernel's own weights over every node, as their sources define them.

**Which nodes are "nearest"** (:func:`near_nodes`). A weight row that is one
tenant's (the action's per-tenant weights) has that tenant's allocation fallback
list: its CPU node's zonelist, which ``mm/page_alloc.c`` ``build_zonelists`` builds
by ``find_next_best_node`` from the NUMA distances, nearest first (the preferred
node's for ``MPOL_PREFERRED``, only the bind mask's nodes for ``MPOL_BIND``;
:func:`envs.model.fallback_lists`). The row's DRAM share goes to the DRAM nodes of
the socket of the first DRAM node in that list (for a default policy its CPU node:
the node itself and its sub-NUMA siblings, SNC/NPS), its CXL share to the CXL nodes
of the socket of the first CXL node in the list (the nearest expanders; on a
socket without expanders, those the list reaches first). A socket's nodes are one
distance class from a CPU node: on the model's derived distances (10 itself, 12
a sub-NUMA sibling, 14 local CXL, 20 remote DRAM, 24 remote CXL) and on the shipped
SLITs (10/12/32) a node of another socket lies at ``REMOTE_DISTANCE`` (20) or
more and one of the same socket below it, so the DRAM share never crosses the
socket link while the tenant's socket has DRAM, as the kernel's local-first
allocation does not. Farther nodes are reached only as the kernel reaches them:
what a node cannot take above its LOW watermark goes down the tenant's fallback
list (:func:`envs.allocation.allocate`), so local DRAM that is full spills to the
local expanders, then to the other socket. A row whose tier has no node in the
list (a bind mask) sends its whole share to the other tier.

A row shared by all tenants (global weights), and a machine view that does not
know its tenants (a host's, ``deploy.py``), has no fallback list: its share is
spread over every DRAM node and every CXL node of the machine, the mapping before
this module knew topology. On a one-socket machine the nearest nodes are all of
them, so every mapping here gives the same weights as that one, bit for bit.

**Bandwidth-proportional interleave across both tiers** (:func:`auto_share`): the
DRAM share of the kernel's weighted-interleave auto weights
(:func:`envs.kernel.auto_interleave_weights`, ``mm/mempolicy.c``) over a row's
nearest nodes; with it the share's weights are the auto weights of those nodes.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np
from numpy.typing import NDArray

from envs.core import Hardware
from envs.kernel import auto_tier_shares, near_nodes

__all__ = [
    "SHARE_TOP",
    "auto_share",
    "dram_share",
    "near_nodes",
    "share_or_local_to_weights",
    "share_to_weights",
    "tenant_orders",
]

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]
B8 = NDArray[np.bool_]

#: The top of a weight row's DRAM share: shares above 1 are local-first, and the range
#: ends here so that a sampled or moved share reaches local-first with a margin.
SHARE_TOP = 1.25


def tenant_orders(hw: Hardware, rows: int) -> I64 | None:
    """(B, R, N) each weight row's allocation fallback list (node indices, nearest first;
    -1 for nodes its bind mask excludes) from a machine view ``hw``
    (:class:`envs.core.Hardware`), or None where the rows have none: global weights
    (``rows`` 1: one row for every tenant) or a view without the tenants' lists
    (``tenant_fallback`` None, a host's view). With ``rows`` equal to the view's tenant
    slots, row ``r`` is slot ``r``'s list."""
    lists = hw.tenant_fallback
    if lists is None or rows == 1:
        return None
    lists = np.asarray(lists, dtype=np.int64)
    if lists.ndim != 3 or lists.shape[1] != rows:
        raise ValueError(
            f"tenant_orders: the machine view's tenant_fallback has shape {lists.shape}, "
            f"expected (B, {rows}, N) for {rows} weight rows"
        )
    return lists


def _tiers(
    bandwidth: F64, is_cxl: B8, near: tuple[B8, B8] | None, rows: int
) -> tuple[F64, F64, B8, B8]:
    """Each row's DRAM and CXL split (B, R, N) by bandwidth over its nodes, and whether it
    has no CXL node / no DRAM node (B, R)."""
    bandwidth = np.asarray(bandwidth, dtype=float)
    is_cxl = np.asarray(is_cxl, dtype=bool)
    shape = (is_cxl.shape[0], rows, is_cxl.shape[1])
    if near is None:  # every node of the machine (a machine without DRAM is not one)
        d_on = np.broadcast_to(~is_cxl[:, None, :], shape)
        c_on = np.broadcast_to(is_cxl[:, None, :], shape)
        no_dram = np.zeros(shape[:2], dtype=bool)
    else:
        d_on, c_on = near
        if d_on.shape != shape:
            raise ValueError(
                f"placement: {rows} weight rows on {shape[2]} nodes need fallback lists of "
                f"shape {shape}, got {d_on.shape}"
            )
        no_dram = np.asarray(~d_on.any(axis=2))
    bw = bandwidth[:, None, :]
    dram = np.where(d_on, bw, 0.0)
    cxl = np.where(c_on, bw, 0.0)
    dram = dram / np.maximum(dram.sum(axis=2, keepdims=True), 1e-300)
    cxl = cxl / np.maximum(cxl.sum(axis=2, keepdims=True), 1e-300)
    no_cxl: B8 = np.asarray(~c_on.any(axis=2))
    return dram, cxl, no_cxl, no_dram


#: :func:`near_nodes` of the last machines seen, by content: a policy maps shares to
#: weights every step on the same machine (its lists change at a reset), and the sets
#: cost about 30 times what their key does (0.7 ms against 27 us at B = 256, R = 8, N = 6).
#: At most :data:`_NEAR_SIZE` machines and :data:`_NEAR_BYTES` of keys and sets (the
#: planner's batches of candidates are large: 0.8 MB a key at B = 2048).
_NEAR: OrderedDict[tuple[object, ...], tuple[B8, B8]] = OrderedDict()
_NEAR_SIZE = 64
_NEAR_BYTES = 64 << 20
_NEAR_LOCK = threading.Lock()
_near_bytes = 0  # what _NEAR holds now


def _entry_bytes(key: tuple[object, ...], near: tuple[B8, B8]) -> int:
    return sum(len(k) for k in key if isinstance(k, bytes)) + near[0].nbytes + near[1].nbytes


def _near(order: I64 | None, is_cxl: B8, socket: I64 | None) -> tuple[B8, B8] | None:
    """:func:`near_nodes`, remembered for the machines seen last (read-only arrays, within
    :data:`_NEAR_SIZE` machines and :data:`_NEAR_BYTES`); None without fallback lists."""
    if order is None:
        return None
    if socket is None:
        raise ValueError("placement: fallback lists (order) need the nodes' sockets (socket)")
    arrays = (
        np.asarray(order, dtype=np.int64),
        np.asarray(is_cxl, dtype=bool),
        np.asarray(socket, dtype=np.int64),
    )
    key = tuple(x for a in arrays for x in (a.shape, a.tobytes()))
    global _near_bytes
    with _NEAR_LOCK:
        near = _NEAR.get(key)
        if near is None:
            near = near_nodes(*arrays)
            for a in near:
                a.flags.writeable = False
            _NEAR[key] = near
            _near_bytes += _entry_bytes(key, near)
            while len(_NEAR) > 1 and (len(_NEAR) > _NEAR_SIZE or _near_bytes > _NEAR_BYTES):
                _near_bytes -= _entry_bytes(*_NEAR.popitem(last=False))
        else:
            _NEAR.move_to_end(key)
    return near


def share_to_weights(
    share_dram: F64,
    bandwidth: F64,
    is_cxl: B8,
    scale: int = 100,
    order: I64 | None = None,
    socket: I64 | None = None,
) -> I64:
    """Integer weights (B, R, N) that send ``share_dram`` (B, R) of new pages to DRAM.

    The DRAM share is split over each row's nearest DRAM nodes and the rest over its
    nearest CXL nodes (:func:`near_nodes` of its fallback list ``order`` (B, R, N) and
    the nodes' ``socket`` (B, N); without ``order``: every DRAM and every CXL node) in
    proportion to their bandwidth (B, N); fractions are scaled by ``scale`` and rounded
    (a node rounding to 0 leaves the interleave mask). A row without CXL nodes sends
    everything to DRAM, one without DRAM nodes everything to CXL. A NaN share gives
    all-zero weights (local-first).
    """
    share_dram = np.asarray(share_dram, dtype=float)
    dram, cxl, no_cxl, no_dram = _tiers(
        bandwidth, is_cxl, _near(order, is_cxl, socket), share_dram.shape[1]
    )
    s = np.clip(np.nan_to_num(share_dram, nan=1.0), 0.0, 1.0)
    s = np.where(no_cxl, 1.0, np.where(no_dram, 0.0, s))
    frac = s[:, :, None] * dram + (1.0 - s)[:, :, None] * cxl
    w = np.rint(frac * scale).astype(np.int64)
    return np.where(np.isnan(share_dram)[:, :, None], 0, w)


def share_or_local_to_weights(
    x: F64,
    bandwidth: F64,
    is_cxl: B8,
    scale: int = 100,
    order: I64 | None = None,
    socket: I64 | None = None,
) -> I64:
    """:func:`share_to_weights` of a DRAM share on the range ``0..SHARE_TOP``: ``x`` above 1
    gives all-zero weights (local-first, Linux's default), ``0 <= x <= 1`` sends ``x`` of
    new pages to the row's nearest DRAM nodes."""
    x = np.asarray(x, dtype=float)
    w = share_to_weights(np.clip(x, 0.0, 1.0), bandwidth, is_cxl, scale, order, socket)
    return np.where((x > 1.0)[..., None], 0, w)


def auto_share(
    bandwidth: F64,
    is_cxl: B8,
    rows: int = 1,
    order: I64 | None = None,
    socket: I64 | None = None,
    weightiness: int = 32,
) -> tuple[F64, F64]:
    """(B, R) the DRAM share and the CXL share of bandwidth-proportional interleave across
    both tiers: of the kernel's weighted-interleave auto weights
    (:func:`envs.kernel.auto_interleave_weights` of the firmware ``bandwidth`` (B, N),
    ``weightiness``) over each row's nearest DRAM and CXL nodes (``order``, ``socket`` as
    in :func:`share_to_weights`; without ``order``: every node, for ``rows`` rows). A row
    without CXL nodes has DRAM share 1 and CXL share 0."""
    is_cxl = np.asarray(is_cxl, dtype=bool)
    near = _near(order, is_cxl, socket)
    if near is None:
        shape = (is_cxl.shape[0], rows, is_cxl.shape[1])
        near = (
            np.broadcast_to(~is_cxl[:, None, :], shape),
            np.broadcast_to(is_cxl[:, None, :], shape),
        )
    return auto_tier_shares(bandwidth, *near, weightiness=weightiness)


def dram_share(weights: NDArray, is_cxl: B8) -> F64:
    """(B, R) the DRAM share of integer weights (B, R, N) on nodes ``is_cxl`` (B, N);
    :data:`SHARE_TOP` for a row without weights (local-first)."""
    w = np.asarray(weights, dtype=float)
    total = w.sum(axis=2)
    dram = np.where(np.asarray(is_cxl)[:, None, :], 0.0, w).sum(axis=2)
    return np.where(total > 0, dram / np.maximum(total, 1e-300), SHARE_TOP)
