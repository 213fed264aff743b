"""Each tenant's value of its current phase, gathered by a compiled kernel.

``gather_phase(tab, phase)``: ``tab`` (T, P, B) or (T, P, K, B) per tenant slot and
phase, ``phase`` (T, B) -> (T, B) or (T, K, B). The model's phases and the environment
core read a dozen such tables a step; numpy's fancy indexing over three index arrays,
or one ``np.where`` per phase, costs several passes where this is one. The tables are
read in whatever memory layout they have (a batch drawn from a pool is often not
C-contiguous, and copying it first would cost more than the gather).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from envs.jit import inline, jit, jit_any_layout


@inline
def running(present, start_s, stop_s, now):  # pragma: no cover (compiled)
    """Whether a tenant slot runs in the interval starting at ``now``: present, started,
    not stopped."""
    return present and start_s <= now and now < stop_s


@inline
def phase_now(phase_at, i, b, now):  # pragma: no cover (compiled)
    """The phase of tenant slot ``i`` of element ``b`` at time ``now``: the last of its
    phases started by then (``phase_at`` (T, P, B), increasing), its first before it
    starts."""
    started = 0
    for q in range(phase_at.shape[1]):
        if phase_at[i, q, b] <= now:
            started += 1
    return max(started - 1, 0)


@jit
def phases_now(phase_at, now, out):  # pragma: no cover (compiled)
    """:func:`phase_now` of every tenant slot (T, B) at ``now`` (B,)."""
    T, B = out.shape
    for i in range(T):
        for b in range(B):
            out[i, b] = phase_now(phase_at, i, b, now[b])


@jit_any_layout()
def _gather3(tab, phase, out):  # pragma: no cover (compiled)
    """``out[t, b] = tab[t, phase[t, b], b]``."""
    T, _, B = tab.shape
    for t in range(T):
        for b in range(B):
            out[t, b] = tab[t, phase[t, b], b]


@jit_any_layout()
def _gather4(tab, phase, out):  # pragma: no cover (compiled)
    """``out[t, k, b] = tab[t, phase[t, b], k, b]``."""
    T, _, K, B = tab.shape
    for t in range(T):
        for k in range(K):
            for b in range(B):
                out[t, k, b] = tab[t, phase[t, b], k, b]


def gather_phase(tab: np.ndarray, phase: NDArray[np.int64]) -> np.ndarray:
    """Values of the current phase: ``tab`` (T, P, [K,] B), ``phase`` (T, B) -> (T, [K,] B)."""
    if tab.shape[1] == 1:
        return tab[:, 0]
    out = np.empty((tab.shape[0], *tab.shape[2:]), dtype=tab.dtype)
    if tab.ndim == 3:
        _gather3(tab, phase, out)
    elif tab.ndim == 4:
        _gather4(tab, phase, out)
    else:
        raise ValueError(f"gather_phase: tab must be (T, P, B) or (T, P, K, B), got {tab.shape}")
    return out
