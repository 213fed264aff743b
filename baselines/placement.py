"""A weight row's DRAM share of new pages and the interleave weights that give it.

One quantity places a tenant's pages on a DRAM+CXL machine: ``x``, the share of
its new pages that go to DRAM, on the range ``0..SHARE_TOP``. ``x`` above 1 is
local-first allocation (all weights 0, Linux's default, what ``dram-first``
does); ``0 <= x <= 1`` interleaves ``x`` of new pages over the DRAM nodes and the
rest over the CXL nodes, each tier split by firmware bandwidth (weights in
1/100 by default). The clairvoyant planner (:mod:`baselines.planner`) searches
this range and the agent's ``residual_codec: share`` (:mod:`agents.view.codec`)
moves a base heuristic's share along it; ``colloid`` and ``bw-aware-interleave``
(:mod:`baselines.policies`) set shares of ``0..1``. All of them map shares to
weights here.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["SHARE_TOP", "dram_share", "share_or_local_to_weights", "share_to_weights"]

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

#: The top of a weight row's DRAM share: shares above 1 are local-first, and the range
#: ends here so that a sampled or moved share reaches local-first with a margin.
SHARE_TOP = 1.25


def share_to_weights(
    share_dram: F64, bandwidth: F64, is_cxl: NDArray[np.bool_], scale: int = 100
) -> I64:
    """Integer weights (B, R, N) that send ``share_dram`` (B, R) of new pages to DRAM.

    The DRAM share is split over the DRAM nodes and the rest over the CXL nodes
    in proportion to their bandwidth (B, N); fractions are scaled by ``scale``
    and rounded (a node rounding to 0 leaves the interleave mask). A NaN share
    gives all-zero weights (local-first).
    """
    dram = np.where(is_cxl, 0.0, bandwidth)
    cxl = np.where(is_cxl, bandwidth, 0.0)
    dram = dram / np.maximum(dram.sum(axis=1, keepdims=True), 1e-300)
    cxl = cxl / np.maximum(cxl.sum(axis=1, keepdims=True), 1e-300)
    no_cxl: NDArray[np.bool_] = ~np.any(is_cxl, axis=1, keepdims=True)
    s = np.where(no_cxl, 1.0, np.clip(np.nan_to_num(share_dram, nan=1.0), 0.0, 1.0))
    frac = s[:, :, None] * dram[:, None] + (1.0 - s)[:, :, None] * cxl[:, None]
    w = np.rint(frac * scale).astype(np.int64)
    return np.where(np.isnan(share_dram)[:, :, None], 0, w)


def share_or_local_to_weights(
    x: F64, bandwidth: F64, is_cxl: NDArray[np.bool_], scale: int = 100
) -> I64:
    """:func:`share_to_weights` of a DRAM share on the range ``0..SHARE_TOP``: ``x`` above 1
    gives all-zero weights (local-first, Linux's default), ``0 <= x <= 1`` sends ``x`` of
    new pages to DRAM."""
    x = np.asarray(x, dtype=float)
    w = share_to_weights(np.clip(x, 0.0, 1.0), bandwidth, is_cxl, scale)
    return np.where((x > 1.0)[..., None], 0, w)


def dram_share(weights: NDArray, is_cxl: NDArray[np.bool_]) -> F64:
    """(B, R) the DRAM share of integer weights (B, R, N) on nodes ``is_cxl`` (B, N);
    :data:`SHARE_TOP` for a row without weights (local-first)."""
    w = np.asarray(weights, dtype=float)
    total = w.sum(axis=2)
    dram = np.where(np.asarray(is_cxl)[:, None, :], 0.0, w).sum(axis=2)
    return np.where(total > 0, dram / np.maximum(total, 1e-300), SHARE_TOP)
