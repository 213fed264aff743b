"""The residual codecs: how the agent's residual adjusts the (mixed) base action.

``residual_codec: box`` (the default) adjusts the base's box action entry by entry::

    action = clip(base_action + residual_scale * gate * residual, -1, 1)

(per-tenant weights on the action codec's log scale, the promotion rate, and the
tiering-mode entry when the environment has one; ``gate``: :mod:`agents.view.mixing`),
so the zero residual IS the heuristic and learning starts from it.

``residual_codec: share`` writes the residual's weights as one entry per weight row
(tenant slot) instead of one per row and node: the row's DRAM share of new pages,
``x = x_base + residual_scale * SHARE_TOP / 2 * r`` clipped to ``0..SHARE_TOP``, where
``x_base`` is the share of the base's weights (:data:`~baselines.placement.SHARE_TOP`
where it has none: local-first). ``x`` above 1 is local-first (all weights 0, Linux's
default), ``0 <= x <= 1`` interleaves ``x`` of new pages over the DRAM nodes nearest to where
the tenant runs and the rest over the nearest CXL nodes, each tier split by firmware bandwidth
(:func:`baselines.placement.share_or_local_to_weights`, the planner's mapping); a row
whose residual is 0 keeps the base's weights exactly, so the zero residual is still the
heuristic. The rate and mode entries follow the box codec. One number per tenant is the
quantity the planner's headroom is made of (issue #12), where the box codec asks a
regression for a log weight and an on/off threshold per node; its size does not depend
on the machine.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from baselines.placement import SHARE_TOP, dram_share, share_or_local_to_weights, tenant_orders
from envs.core import Hardware
from envs.spaces import ActionCodec

__all__ = ["apply_box", "apply_share", "residual_width", "share_span"]


def residual_width(codec: str, rows: int, nodes: int, rest: int) -> int:
    """Entries of the residual (the agent's action before any mixing entries) with ``codec``
    over a box action of ``rows`` weight rows on ``nodes`` nodes and ``rest`` other entries."""
    return (rows if codec == "share" else rows * nodes) + rest


def share_span(scale: float) -> float:
    """The share that a residual entry of 1 moves a weight row's DRAM share by."""
    return scale * SHARE_TOP / 2.0


def apply_box(
    base: NDArray, gate: NDArray | float, residual: NDArray, scale: float
) -> NDArray[np.float32]:
    """``residual_codec: box``: ``clip(base + scale * gate * residual, -1, 1)`` (B, size)."""
    return np.clip(base + scale * gate * residual, -1.0, 1.0).astype(np.float32)


def apply_share(
    base: NDArray,
    gate: NDArray | float,
    residual: NDArray,
    scale: float,
    codec: ActionCodec,
    hw: Hardware,
) -> NDArray[np.float32]:
    """``residual_codec: share``: the environment's action from the (mixed) base action
    (B, size) and the residual (B, R + rest): each weight row's DRAM share moved by its
    entry, the rest as the box codec does."""
    R, N = codec.n_weight_rows, codec.n_nodes
    rows = R * N
    base_w = codec.box_weights(base[:, :rows].reshape(-1, R, N))
    step = share_span(scale) * gate * residual[:, :R]  # (B, R)
    x = np.clip(dram_share(base_w, hw.is_cxl) + step, 0.0, SHARE_TOP)
    w = share_or_local_to_weights(
        x, hw.firmware_gbps, hw.is_cxl, order=tenant_orders(hw, R), socket=hw.socket
    )
    moved = codec.encode_box(w, np.zeros(len(residual)))[:, :rows]
    keep = np.repeat(step == 0.0, N, axis=1)  # a zero residual keeps the base's weights
    weights = np.where(keep, base[:, :rows], moved)
    rest = np.clip(base[:, rows:] + scale * gate * residual[:, R:], -1.0, 1.0)
    return np.concatenate([weights, rest], axis=1).astype(np.float32)
