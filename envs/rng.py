"""Counter-based random numbers: each batch element draws from its own key.

A number depends only on (key, stream, counter), never on what else is in
the batch or on the order of calls, so batched and single runs agree bit for
bit and a state can be replayed from its seed.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from envs.jit import array_form, inline

__all__ = ["normal32", "splitmix", "uniform"]

F64 = NDArray[np.float64]


@inline
def _splitmix(x):  # pragma: no cover (compiled)
    """splitmix64's finaliser of ``x`` (uint64; the arithmetic wraps modulo 2**64)."""
    z = x + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@inline
def _unit(key, salt, counter):  # pragma: no cover (compiled)
    """The uniform in (0, 1) of (key, stream, counter), ``salt`` the stream's constant:
    the top 53 bits of the hash, centred in their interval."""
    h = _splitmix(_splitmix(key ^ salt) + counter)
    return (np.float64(h >> np.uint64(11)) + 0.5) / 9007199254740992.0  # 2**53


#: splitmix64's finaliser on uint64 arrays
splitmix = array_form("uint64(uint64)", _splitmix)
_unit_hash = array_form("float64(uint64, uint64, uint64)", _unit)


def _salt(stream: int) -> np.uint64:
    return np.uint64((stream * 0x632BE59BD9B4E019) % (1 << 64))


def uniform(key: ArrayLike, counter: ArrayLike, stream: int) -> F64:
    """Counter-based uniforms in (0, 1): element-wise hash of (key, stream, counter).

    Each batch element draws from its own key, so its numbers do not depend
    on what else is in the batch. ``key`` and ``counter`` broadcast together.
    """
    k = np.asarray(key, dtype=np.uint64)
    c = np.asarray(counter, dtype=np.uint64)
    return np.asarray(_unit_hash(k, _salt(stream), c), dtype=np.float64)


def normal32(key: ArrayLike, counter: ArrayLike, stream: int) -> NDArray[np.float32]:
    """Standard normals (Box-Muller) in float32, whose log and cos numpy vectorises.

    The uniforms of streams ``stream`` and ``stream + 1``."""
    u1 = uniform(key, counter, stream).astype(np.float32)
    u2 = uniform(key, counter, stream + 1).astype(np.float32)
    return np.sqrt(np.float32(-2.0) * np.log(u1)) * np.cos(np.float32(2.0 * np.pi) * u2)
