"""Counter-based random numbers: each batch element draws from its own key.

A number depends only on (key, stream, counter), never on what else is in
the batch or on the order of calls, so batched and single runs agree bit for
bit and a state can be replayed from its seed.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["normal32", "splitmix", "uniform"]

F64 = NDArray[np.float64]


def splitmix(x: NDArray[np.uint64]) -> NDArray[np.uint64]:
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def _bits(key: ArrayLike, counter: ArrayLike, streams: tuple[int, ...]) -> NDArray[np.uint64]:
    """The hash of (key, stream, counter) for each stream, stacked on a new leading axis."""
    k = np.asarray(key, dtype=np.uint64)
    c = np.asarray(counter, dtype=np.uint64)
    s = np.array([(st * 0x632BE59BD9B4E019) % (1 << 64) for st in streams], dtype=np.uint64)
    nd = max(k.ndim, c.ndim)
    with np.errstate(over="ignore"):
        hk = splitmix(k ^ s.reshape((len(streams),) + (1,) * k.ndim))  # (S, *key)
        return splitmix(hk.reshape((len(streams),) + (1,) * (nd - k.ndim) + k.shape) + c)


def _unit(h: NDArray[np.uint64]) -> F64:
    return ((h >> np.uint64(11)).astype(np.float64) + 0.5) / float(1 << 53)


def uniform(key: ArrayLike, counter: ArrayLike, stream: int) -> F64:
    """Counter-based uniforms in (0, 1): element-wise hash of (key, stream, counter).

    Each batch element draws from its own key, so its numbers do not depend
    on what else is in the batch.
    """
    return _unit(_bits(key, counter, (stream,))[0])


def normal32(key: ArrayLike, counter: ArrayLike, stream: int) -> NDArray[np.float32]:
    """Standard normals (Box-Muller) in float32, whose log and cos numpy vectorises.

    The uniforms of streams ``stream`` and ``stream + 1``, hashed in one pass."""
    u1, u2 = _unit(_bits(key, counter, (stream, stream + 1))).astype(np.float32)
    return np.sqrt(np.float32(-2.0) * np.log(u1)) * np.cos(np.float32(2.0 * np.pi) * u2)
