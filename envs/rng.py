"""Counter-based random numbers: each batch element draws from its own key.

A number depends only on (key, stream, counter), never on what else is in
the batch or on the order of calls, so batched and single runs agree bit for
bit and a state can be replayed from its seed.
"""

from __future__ import annotations

import functools

import numpy as np
from numpy.typing import ArrayLike, NDArray

from envs.jit import array_form, inline, jit

__all__ = ["lognormal32", "splitmix", "uniform"]

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


@functools.cache
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


@jit
def _box_muller_inputs(key, t, salt1, salt2, two_pi, u1, angle):  # pragma: no cover (compiled)
    """Box-Muller's inputs in float32 (n, B): ``u1`` the uniforms of the first stream
    (``salt1``) and ``angle`` those of the second times ``two_pi``, at the counters
    ``t * n + i`` of row ``i`` (``t`` (B,) steps, ``key`` (B,))."""
    n, B = u1.shape
    for i in range(n):
        for b in range(B):
            c = np.uint64(t[b]) * np.uint64(n) + np.uint64(i)
            u1[i, b] = np.float32(_unit(key[b], salt1, c))
            angle[i, b] = two_pi * np.float32(_unit(key[b], salt2, c))


@jit
def _lognormal_exponent(log_u1, cos_angle, sigma, out):  # pragma: no cover (compiled)
    """``sigma * z - sigma**2 / 2`` in float32 (n, B), ``z = sqrt(-2 log u1) cos(angle)``
    the standard normal of Box-Muller (``sigma`` (B,))."""
    n, B = out.shape
    for i in range(n):
        for b in range(B):
            s = sigma[b]
            z = np.sqrt(np.float32(-2.0) * log_u1[i, b]) * cos_angle[i, b]
            out[i, b] = s * z - np.float32(0.5) * s * s


def lognormal32(key: ArrayLike, t: ArrayLike, n: int, sigma: ArrayLike, stream: int) -> F64:
    """Log-normal factors of mean 1 (n, B): ``exp(sigma z - sigma**2 / 2)``, computed in
    float32 and returned as float64.

    ``z`` is a standard normal (Box-Muller on the uniforms of streams ``stream`` and
    ``stream + 1``) at the counter ``t * n + i`` of row ``i``: each batch element's
    numbers depend on its ``key`` (B,), its step ``t`` (B,) and ``sigma`` (B,) alone.
    The logarithm, cosine and exponential are numpy's float32 ones (vectorised); the
    rest is compiled, with numpy's float32 arithmetic.
    """
    k = np.ascontiguousarray(key, dtype=np.uint64)
    steps = np.ascontiguousarray(t, dtype=np.int64)
    u1 = np.empty((n, k.shape[0]), dtype=np.float32)
    angle = np.empty_like(u1)
    _box_muller_inputs(
        k, steps, _salt(stream), _salt(stream + 1), np.float32(2.0 * np.pi), u1, angle
    )
    x = np.empty_like(u1)
    s32 = np.ascontiguousarray(sigma, dtype=np.float32)
    _lognormal_exponent(np.log(u1, out=u1), np.cos(angle, out=angle), s32, x)
    return np.exp(x, out=x).astype(np.float64)
