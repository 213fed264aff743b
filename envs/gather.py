"""Each tenant's value of its current phase, gathered by a compiled kernel.

``gather_phase(tab, phase)``: ``tab`` (T, P, ..., B) per tenant slot and phase,
``phase`` (T, B) -> (T, ..., B). The model's phases and the environment core read a
dozen such tables a step; numpy's fancy indexing over three index arrays, or one
``np.where`` per phase, costs several passes where this is one.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from envs.jit import jit


@jit
def _gather(tab, phase, out):  # pragma: no cover (compiled)
    """``out[t, r, b] = tab[t, phase[t, b], r, b]`` for ``tab`` (T, P, R, B)."""
    T, _, R, B = tab.shape
    for t in range(T):
        ph = phase[t]
        for r in range(R):
            o = out[t, r]
            for b in range(B):
                o[b] = tab[t, ph[b], r, b]


def gather_phase(tab: np.ndarray, phase: NDArray[np.int64]) -> np.ndarray:
    """Values of the current phase: ``tab`` (T, P, ..., B), ``phase`` (T, B) -> (T, ..., B)."""
    if tab.shape[1] == 1:
        return tab[:, 0]
    T, P, B = tab.shape[0], tab.shape[1], tab.shape[-1]
    flat = np.ascontiguousarray(tab).reshape(T, P, -1, B)
    out = np.empty((T, flat.shape[2], B), dtype=tab.dtype)
    _gather(flat, np.ascontiguousarray(phase, dtype=np.int64), out)
    return out.reshape((T, *tab.shape[2:-1], B))
