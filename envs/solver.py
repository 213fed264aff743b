"""The closed-loop fixed point of tenants' request rates and nodes' loaded latencies.

Each tenant ``t`` keeps ``C_t = 64 B * threads * mlp`` bytes in flight. By
Little's law its throughput (GB/s = bytes/ns) is::

    X_t = C_t / (compute_ns_t + Lbar_t(X))

where ``Lbar_t = sum_n a_tn * L_tn`` is its mean latency over the nodes that
serve its accesses (shares ``a_tn``), and ``L_tn`` is node ``n``'s loaded
latency, which depends on every tenant's traffic. Node ``n``'s resources are
its memory (peaks ``R``, ``W`` and a read/write turnaround penalty ``c``), for
a CXL node the two link directions, and for access from another socket a
remote path. A resource's utilisation under read and write traffic
``(Rd, Wr)`` GB/s is ``Rd/R + Wr/W + c*Rd*Wr/(Rd+Wr)``, which equals the
traffic over the mix-dependent peak ``1/(r/R + (1-r)/W + c*r*(1-r))``. A
resource at utilisation ``u`` adds the queueing delay
``q(u) = slope*u + knee*u**exp/(1-u)``: small at low load, a knee, unbounded
as ``u -> 1``, so no resource's traffic can exceed its peak at the fixed
point. Queues in series add: an access to a CXL node waits on the expander's
memory and on the link direction its data takes (device-to-host for a read,
host-to-device for a write), so a tenant with read fraction ``r`` sees
``L0 + q(u_mem) + r*q(u_d2h) + (1-r)*q(u_h2d)``; a remote access adds the
remote path's latency and queue.

The solver is Newton's method on ``z = log X`` over the tenant axis of each
batch element, with backtracking that keeps every utilisation below 1 and the
residual decreasing. The residual is
``max_t |log X_t + log(compute_t + Lbar_t) - log C_t|``, the relative error of
Little's law; the default tolerance is 1e-8.

Cost: a step from a warm start typically takes one evaluation at the start
and two Newton iterations (a Jacobian, a T x T solve and an evaluation each).

Implementation: one compiled kernel (numba, ``_solve_batch``) solves the batch 32
elements at a time, side by side in the lanes of SIMD registers; each lane follows
its own element's path (its start, its steps, its backtracking), so an element's
numbers depend on its own inputs alone, whatever else is in the batch: batched and
single runs agree bit for bit. Sums run in a fixed order (tenants, nodes, links by
index), exp and log are fdlibm's polynomials in plain arithmetic (within 1 ulp of
libm; libm's calls would not vectorise). Compiled on first use and cached on disk
beside this file: a fresh install's first fixed point takes about 20 s.

Layout: the batch axis is the *last* axis of every array here (``(T, N, B)``
and so on): the lanes are then consecutive in memory, and numpy (the model's
other phases, :func:`lsum`) reduces over a small leading axis of a batch-last
array over ten times faster than over a small trailing axis of a batch-first one
(the table "Layout" of ``benchmarks/env_speed.py``). The public API
(:mod:`envs.model`) speaks batch-first.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields
from typing import Any

import numba
import numpy as np
from llvmlite import ir
from numba import prange, types
from numba.extending import intrinsic
from numpy.typing import NDArray

from envs.jit import get_threads, inline, jit, may_thread, parallel_jit
from envs.records import record

__all__ = [
    "NodeCurves",
    "Problem",
    "SocketLinks",
    "Solution",
    "link_weights",
    "lsum",
    "solve_fixed_point",
]

F64 = NDArray[np.float64]
TOL = 1e-8
MAX_ITER = 60
_U_MAX = 1.0 - 1e-12
_TINY = 1e-300


@dataclass
class NodeCurves:
    """Per-node bandwidth and latency parameters, arrays of shape (N, B)."""

    idle_ns: F64
    mem_read: F64
    mem_write: F64
    mem_turn: F64  # turnaround penalty c, in 1/(GB/s)
    link_read: F64  # inf where there is no link
    link_write: F64
    slope_ns: F64
    knee_ns: F64
    knee_exp: F64
    remote_ns: F64
    rem_read: F64
    rem_write: F64
    rem_turn: F64
    rem_slope_ns: F64
    rem_knee_ns: F64
    rem_knee_exp: F64
    rnd_read: F64  # the memory's peaks under random access (= mem_read/mem_write if unknown)
    rnd_write: F64


_CURVES = [f.name for f in fields(NodeCurves)]


@dataclass
class SocketLinks:
    """The socket links as shared queues: one per direction between two sockets.

    ``weight`` (L, T, B): bytes tenant ``t`` moves over link direction ``l`` per
    byte of its throughput (:func:`link_weights`); ``gbps`` (B,) each direction's
    bandwidth (inf: no limit, the link adds nothing); ``slope_ns``, ``knee_ns``,
    ``knee_exp`` (B,) its queue curve. A tenant's latency gains
    ``sum_l weight_lt * q(u_l)`` with ``u_l = sum_t X_t weight_lt / gbps``.
    """

    weight: F64
    gbps: F64
    slope_ns: F64
    knee_ns: F64
    knee_exp: F64


def link_weights(
    share: F64,
    rfrac: F64,
    tenant_socket: NDArray[np.int64],
    node_socket: NDArray[np.int64],
    sockets: NDArray[np.int64] | None = None,
) -> F64:
    """Share of each tenant's bytes that crosses each socket-link direction (L, T, B).

    Directions are the ordered pairs ``(a, b)`` of the sockets present, ``a != b``,
    in lexicographic order. A read by a tenant on socket ``b`` from a node on
    ``a`` moves its data from ``a`` to ``b``; a write by a tenant on ``a`` to a
    node on ``b`` moves its data from ``a`` to ``b``. ``share`` (T, N, B),
    ``rfrac`` and ``tenant_socket`` (T, B), ``node_socket`` (N, B); ``sockets`` the
    distinct values of ``node_socket``, sorted (computed when not given).
    """
    if sockets is None:
        sockets = np.unique(node_socket)
    out = []
    ts = tenant_socket[:, None]  # (T, 1, B)
    for a in sockets:
        for b in sockets:
            if a == b:
                continue
            rd_on = (node_socket == a) & (ts == b)  # (T, N, B)
            wr_on = (ts == a) & (node_socket == b)
            out.append(lsum(share * (rfrac[:, None] * rd_on + (1 - rfrac[:, None]) * wr_on), 1))
    if not out:
        return np.zeros((0, *rfrac.shape))
    return np.stack(out)


@dataclass
class Solution:
    """The fixed point of one interval (batch axis last)."""

    throughput: F64  # (T, B) GB/s
    tenant_latency_ns: F64  # (T, B) mean latency of its accesses
    node_latency_ns: F64  # (N, B) loaded latency of a local access
    node_util: F64  # (N, B) bottleneck utilisation of local resources
    remote_util: F64  # (N, B) utilisation of the remote path
    node_read_gbps: F64  # (N, B) read traffic incl. background
    node_write_gbps: F64  # (N, B)
    residual: F64  # (B,)
    iterations: NDArray[np.int64]  # (B,)
    link_util: F64  # (L, B) utilisation of each socket-link direction (L = 0: no limit)
    demand: F64  # (T, B) throughput at idle latencies: the zero-load demand (0 if absent)


def lsum(x: np.ndarray, axis: int | tuple[int, ...]) -> np.ndarray:
    """Sum over leading (non-batch) axes, adding slices one after another.

    ``np.sum`` switches to pairwise summation when the reduced axes are
    contiguous in memory, which is the case for a batch of one: the same
    element would then be summed in another order alone than in a batch.
    Adding slices in a fixed order makes every element's result independent
    of the batch size (batched and single runs agree bit for bit).

    For a batch of one (last axis of size 1) the slices are added by one call of
    ``np.add.accumulate``, which adds them in the same order (each partial sum is the
    last one plus the next slice) without a Python loop; for a bigger batch that
    call is slower than the loop (it walks the summed axis innermost).
    """
    if isinstance(axis, tuple):
        for one in sorted(axis, reverse=True):
            x = lsum(x, one)
        return x
    if x.dtype.kind == "b":
        x = x.astype(np.int64)
    ax = axis
    if ax < 0:
        ax += x.ndim
    n = x.shape[ax]
    if ax == 0:  # the common case: plain indexing, no index tuple
        if n == 1:
            return x[0].copy()
        out = np.add(x[0], x[1])
        for i in range(2, n):
            out += x[i]
        return out
    pre: tuple[Any, ...] = (slice(None),) * ax  # slice i along ``ax``: x[(*pre, i)], a view
    if n > 2 and x.shape[-1] == 1:
        return np.add.accumulate(x, axis=ax)[(*pre, -1)]
    if n == 1:
        return x[(*pre, 0)].copy()
    out = np.add(x[(*pre, 0)], x[(*pre, 1)])  # the same as copying slice 0 and adding slice 1
    for i in range(2, n):
        out += x[(*pre, i)]
    return out


# --------------------------------------------------------------------------- the compiled kernel
#
# Compiled by numba (``@njit``). Batch elements are solved ``_W`` at a time, side by side
# in the lanes of every array (the lane axis last), so that each arithmetic statement is
# one SIMD instruction over ``_W`` elements. Each lane follows its own element's path (its
# start, its Newton steps, its backtracking; ``mode`` says where it is): a lane's numbers
# depend on its own element's inputs alone, whatever else is in the batch or the block.
#
# Two rules make the loops vectorise and stay cheap: every loop over lanes is innermost
# and free of calls (the helpers below are inlined, and exp and log are the polynomial
# ones below, not libm's); and the functions that take arrays are inlined where they are
# called, once each (a call of a compiled function costs two atomic reference counts per
# array argument), except the evaluation and the Jacobian: they are compiled on their own
# and called once per Newton round of a block (a cost too small to measure against the
# round's work), so that the kernel and :func:`_evaluate_batch` share their compile (about
# a fifth less compile time for the kernel, half for the tests' evaluation).

_W = 32  # lanes: batch elements solved side by side
#: the lanes of :func:`solve_fixed_point` by default (the reference precision's)
LANES = _W
#: the lanes of the fast precision (:mod:`envs.model`): its elements mostly take the same
#: number of Newton iterations, so a wider block waits less for its slowest lane than at
#: the reference's tolerance (the numbers are the same for any width)
WIDE_LANES = 64
_HOLD = 4  # a block with this many unfinished lanes or fewer sets them aside (stragglers)
_PER_THREAD = 4  # blocks a thread solves at least, where the batch is split (set_threads)

#: rows of the packed per-node inputs ``nb`` (k, N, B): background traffic, then the curves
_BG_RD, _BG_WR = 0, 1
(
    _IDLE,
    _MEM_R,
    _MEM_W,
    _MEM_C,
    _LINK_R,
    _LINK_W,
    _SLOPE,
    _KNEE,
    _KEXP,
    _REM_NS,
    _REM_R,
    _REM_W,
    _REM_C,
    _REM_SLOPE,
    _REM_KNEE,
    _REM_KEXP,
    _RND_R,
    _RND_W,
) = range(2, 2 + len(_CURVES))

#: rows of an evaluation's per-node scratch (k, N, W)
(
    _E_RD,  # read traffic incl. background (real bytes: the links carry these)
    _E_WR,
    _E_CRD,  # costed traffic: random bytes at the memory's random peaks
    _E_CWR,
    _E_RRD,  # remote read and write traffic
    _E_RWR,
    _E_DQM,  # the memory queue's derivative
    _E_QLR,  # the link queue, read direction (device to host), and its derivative
    _E_DQLR,
    _E_QLW,  # write direction
    _E_DQLW,
    _E_LNODE,  # latency of a read probe
    _E_ULOC,  # bottleneck utilisation of the node's own resources
    _E_UREM,
    _E_QR,  # the remote path's queue and its derivative
    _E_DQR,
) = range(16)
_EN = 16
#: rows of an evaluation's per-tenant scratch (k, T, W)
_E_X, _E_LBAR, _E_DENOM, _E_RESID, _E_SLR, _E_SLW, _E_SREM, _E_SLK = range(8)
_ET = 8
#: rows of an evaluation's per-link scratch (k, L, W) and its scalars (k, W)
_E_ULK, _E_DQLK, _E_QLK = range(3)
_S_NORM, _S_FEAS, _S_ULKMAX, _S_UMAX = range(4)

#: what an element's evaluation is for (:func:`_solve_batch`)
_WARM, _PULLED, _QUIET, _COLD, _SHRUNK, _TRIAL, _DONE = range(7)

#: the kernel's decorators (:mod:`envs.jit`): compiled once and cached on disk, numpy's
#: error model; ``_inline`` for what is inlined where it is called
_jit, _inline = jit, inline


# ------------------------------------------------ exp and log, in arithmetic that vectorises


def _bitcast(to: Any, sig: Any) -> Any:
    """A numba intrinsic that reinterprets a 64-bit value's bits (LLVM's bitcast)."""

    def typer(typingctx: Any, x: Any) -> Any:  # pragma: no cover (compile time)
        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
            return builder.bitcast(args[0], to)

        return sig, codegen

    return intrinsic(typer)


_as_int: Any = _bitcast(ir.IntType(64), types.int64(types.float64))  # a float64's bits
_as_float: Any = _bitcast(ir.DoubleType(), types.float64(types.int64))  # bits as a float64


# fdlibm's e_exp.c and e_log.c (Sun Microsystems, 1993; the algorithms of every libm that
# descends from it): ln 2 split in two parts, and the minimax polynomials of each.
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_INV_LN2 = 1.44269504088896338700e00
_EXP_P = (
    1.66666666666666019037e-01,
    -2.77777777770155933842e-03,
    6.61375632143793436117e-05,
    -1.65339022054652515390e-06,
    4.13813679705723846039e-08,
)
_LOG_LG = (
    6.666666666666735130e-01,
    3.999999999940941908e-01,
    2.857142874366239149e-01,
    2.222219843214978396e-01,
    1.818357216161805012e-01,
    1.531383769920937332e-01,
    1.479819860511658591e-01,
)


@_inline
def _exp(x: float) -> float:  # pragma: no cover (compiled)
    """e**x within 1 ulp (tests/envs/test_solver.py checks it against libm): x = k ln2 + r with
    |r| <= ln2 / 2, e**r from fdlibm's polynomial, times 2**k as two exact powers of two
    (so that a subnormal result is rounded once); inf above 709.78, 0 below -745.2."""
    p1, p2, p3, p4, p5 = _EXP_P
    xc = min(max(x, -746.0), 710.0)
    k = np.floor(xc * _INV_LN2 + 0.5)
    hi = xc - k * _LN2_HI
    lo = k * _LN2_LO
    r = hi - lo
    t = r * r
    c = r - t * (p1 + t * (p2 + t * (p3 + t * (p4 + t * p5))))
    y = 1.0 - ((lo - (r * c) / (2.0 - c)) - hi)
    ki = np.int64(k)
    k1 = ki >> 1
    s1 = _as_float((k1 + 1023) << 52)
    s2 = _as_float((ki - k1 + 1023) << 52)
    out = y * s1 * s2
    out = np.inf if x > 709.782712893384 else out
    out = 0.0 if x < -745.1332191019412 else out
    return x if x != x else out


@_inline
def _log(x: float) -> float:  # pragma: no cover (compiled)
    """The natural logarithm within 1 ulp (checked against libm as ``_exp``): x = 2**k (1 + f)
    with sqrt(2)/2 <= 1 + f < sqrt(2), log(1 + f) from fdlibm's polynomial in s = f / (2 + f);
    -inf at 0, NaN below 0 and for NaN, inf at inf."""
    g1, g2, g3, g4, g5, g6, g7 = _LOG_LG
    sub = x < 2.2250738585072014e-308  # subnormal: scaled up by 2**54 first
    xs = x * 18014398509481984.0 if sub else x
    bits = _as_int(xs)
    k = (bits >> 52) - (1023 + 54 if sub else 1023)
    m = bits & 0x000FFFFFFFFFFFFF
    big = m > 0x6A09E667F3BCD  # 1 + f above sqrt(2): halved, k one more
    f = _as_float(m | (0x3FE0000000000000 if big else 0x3FF0000000000000)) - 1.0
    dk = np.float64(k + 1 if big else k)
    hfsq = 0.5 * f * f
    s = f / (2.0 + f)
    z = s * s
    w = z * z
    r = z * (g1 + w * (g3 + w * (g5 + w * g7))) + w * (g2 + w * (g4 + w * g6))
    out = dk * _LN2_HI - ((hfsq - (s * (hfsq + r) + dk * _LN2_LO)) - f)
    out = -np.inf if x == 0.0 else out
    out = np.inf if x == np.inf else out
    return np.nan if (x < 0.0 or x != x) else out


# ------------------------------------------------ scalar helpers (inlined into the lanes


@_inline
def _fmax(a: float, b: float) -> float:  # pragma: no cover (compiled)
    """``np.maximum`` of two floats: NaN propagates."""
    m = a if a >= b else b
    return a + b if (a != a or b != b) else m


@_inline
def _fmin(a: float, b: float) -> float:  # pragma: no cover (compiled)
    """``np.minimum`` of two floats: NaN propagates."""
    m = a if a <= b else b
    return a + b if (a != a or b != b) else m


@_inline
def mix_utilisation(
    rd: float, wr: float, r: float, w: float, c: float
) -> float:  # pragma: no cover
    """Utilisation of a resource with peaks r (reads), w (writes) and turnaround c."""
    return rd / r + wr / w + c * rd * wr / _fmax(rd + wr, _TINY)


@_inline
def queue_delay(
    u: float, slope: float, knee: float, e: float
) -> tuple[float, float]:  # pragma: no cover
    """Queueing delay (ns) and its derivative at utilisation u < 1."""
    u = _fmin(_fmax(u, 1e-12), _U_MAX)  # np.clip
    ue = _exp(e * _log(u))
    inv = 1.0 / (1.0 - u)
    kq = knee * ue * inv
    return slope * u + kq, slope + kq * (e / u + inv)


# ------------------------------------------------ one block of W elements


@_inline
def _copy_lanes(b0, end, pick, src, dst):  # pragma: no cover (compiled)
    """Elements ``b0 .. b0 + W - 1`` of ``src`` (..., B) into the lanes of ``dst`` (..., W)
    (a lane past ``end`` repeats element ``end - 1``), or with ``pick`` (W,) not empty,
    element ``pick[lane]`` into lane ``lane``."""
    B, W = src.shape[-1], dst.shape[-1]
    s2, d2 = src.reshape(-1, B), dst.reshape(-1, W)
    if pick.shape[0]:
        for r in range(s2.shape[0]):
            for lane in range(W):
                d2[r, lane] = s2[r, pick[lane]]
        return
    for r in range(s2.shape[0]):
        for lane in range(W):
            d2[r, lane] = s2[r, min(b0 + lane, end - 1)]


@_inline
def _load(b0, end, pick, tb, tnb, nb, ltb, lb, tl, tnl, nl, ll, lbl):  # pragma: no cover (compiled)
    """The inputs of elements ``b0 .. b0 + W - 1`` (or ``pick``) into the block's lanes."""
    _copy_lanes(b0, end, pick, tb, tl)
    _copy_lanes(b0, end, pick, tnb, tnl)
    _copy_lanes(b0, end, pick, nb, nl)
    _copy_lanes(b0, end, pick, ltb, ll)
    _copy_lanes(b0, end, pick, lb, lbl)


@_inline
def _prepare(tl, tnl, nl, lbl, w, any_link, cq):  # pragma: no cover (compiled)
    """What stays fixed while a block is solved: the weights (k, T, N, W) per unit of
    throughput (reads, writes, costed reads and writes, remote shares, remote reads and
    writes, reads and writes per unit of the link's bandwidth: 0 without a link) into
    ``w``; whether each lane's machine has a link into ``any_link``; the queue curves
    (slope, knee, exponent) of every queue into ``cq`` (3, 4N + L, W): the memory of each
    node, the link's read then write direction of each node (the memory's curve), the
    remote path of each node, the socket links. Returns whether some lane has a remote
    path and some a link."""
    W = tl.shape[2]  # lanes (a run-time value: a constant count would be unrolled, not vectorised)
    T, N = tl.shape[1], tnl.shape[2]
    for lane in range(W):
        any_link[lane] = False
    for n in range(N):
        for lane in range(W):
            has = nl[_LINK_R, n, lane] < np.inf or nl[_LINK_W, n, lane] < np.inf
            any_link[lane] = any_link[lane] or has
    blk_remote = False
    for t in range(T):
        for n in range(N):
            for lane in range(W):
                sh, rf, rnd = tnl[0, t, n, lane], tl[2, t, lane], tl[3, t, lane]
                rem = tnl[1, t, n, lane]
                rd_w = sh * rf
                wr_w = sh - rd_w
                w[0, t, n, lane] = rd_w
                w[1, t, n, lane] = wr_w
                w[2, t, n, lane] = rd_w * (
                    1.0 + rnd * (nl[_MEM_R, n, lane] / nl[_RND_R, n, lane] - 1.0)
                )
                w[3, t, n, lane] = wr_w * (
                    1.0 + rnd * (nl[_MEM_W, n, lane] / nl[_RND_W, n, lane] - 1.0)
                )
                w[4, t, n, lane] = sh * rem
                w[5, t, n, lane] = rd_w * rem
                w[6, t, n, lane] = wr_w * rem
                w[7, t, n, lane] = rd_w / nl[_LINK_R, n, lane]  # 0 without a link (inf)
                w[8, t, n, lane] = wr_w / nl[_LINK_W, n, lane]
            for lane in range(W):
                blk_remote = blk_remote or tnl[1, t, n, lane] != 0.0
    blk_link = False
    for lane in range(W):
        blk_link = blk_link or any_link[lane]
    L = cq.shape[1] - 4 * N
    for i in range(3):
        for n in range(N):
            for lane in range(W):
                c = nl[_SLOPE + i, n, lane]
                cq[i, n, lane], cq[i, N + n, lane], cq[i, 2 * N + n, lane] = c, c, c
                cq[i, 3 * N + n, lane] = nl[_REM_SLOPE + i, n, lane]
        for k in range(L):
            for lane in range(W):
                cq[i, 4 * N + k, lane] = lbl[1 + i, lane]
    # bool(): numba types a call with the argument types inferred so far and compiles the
    # callee for each; from the literal False alone it compiled _evaluate and _jacobian for
    # Literal[bool](False) first, two variants the kernel never calls (a third of its compile)
    return bool(blk_remote), bool(blk_link)


@_inline
def _zero_load(tl, tnl, nl, out):  # pragma: no cover (compiled)
    """The block's zero-load demand (T, W) into ``out``: Little's law at idle latencies."""
    W = tl.shape[2]  # lanes (a run-time value: a constant count would be unrolled, not vectorised)
    T, N = tl.shape[1], tnl.shape[2]
    for t in range(T):
        for lane in range(W):
            lat, latr = 0.0, 0.0
            for n in range(N):
                lat += tnl[0, t, n, lane] * nl[_IDLE, n, lane]
            for n in range(N):
                latr += tnl[0, t, n, lane] * tnl[1, t, n, lane] * nl[_REM_NS, n, lane]
            c = tl[0, t, lane]
            d = c / _fmax(tl[1, t, lane] + (lat + latr), _TINY)
            out[t, lane] = d if c > 0 else 0.0


@_jit
def _evaluate(x, bgs, blk, blk_remote, blk_link):  # pragma: no cover (compiled)
    """Every lane of the block ``blk`` (:func:`_block`) at throughput ``x`` (T, W):
    residual, norm, feasibility, latencies and utilisations, and what :func:`_jacobian`
    needs, into slot 1 (the trial point) of its evaluations (``en`` (2, k, N, W), ``et``
    (2, k, T, W), ``el`` (2, k, L, W), ``es`` (2, k, W); ``uq`` (4N + L, W) and ``qq``
    (2, 4N + L, W) the queues' utilisations, delays and derivatives, in the rows of
    ``cq``, :func:`_prepare`). ``bgs`` (W,) 1 with the background (migration) traffic, 0
    without. Sums over tenants, nodes and links run in index order. A term a lane lacks
    (no link, no remote path, no socket-link limit) adds an exact zero or is not added."""
    tl, tnl, nl, ll, lbl, w, any_link, cq, uq, qq, en, et, el, es = blk
    W = tl.shape[2]  # lanes (a run-time value: a constant count would be unrolled, not vectorised)
    T, N, L = tl.shape[1], tnl.shape[2], ll.shape[1]
    # 1. traffic and the utilisation of every queue
    for n in range(N):
        for r in range(_E_RD, _E_RWR + 1):
            for lane in range(W):
                en[1, r, n, lane] = 0.0
        for t in range(T):
            for lane in range(W):
                xt = x[t, lane]
                en[1, _E_RD, n, lane] += xt * w[0, t, n, lane]
                en[1, _E_WR, n, lane] += xt * w[1, t, n, lane]
                en[1, _E_CRD, n, lane] += xt * w[2, t, n, lane]
                en[1, _E_CWR, n, lane] += xt * w[3, t, n, lane]
                en[1, _E_RRD, n, lane] += xt * w[5, t, n, lane]
                en[1, _E_RWR, n, lane] += xt * w[6, t, n, lane]
        for lane in range(W):
            brd, bwr = nl[_BG_RD, n, lane] * bgs[lane], nl[_BG_WR, n, lane] * bgs[lane]
            rd, wr = en[1, _E_RD, n, lane] + brd, en[1, _E_WR, n, lane] + bwr
            crd, cwr = en[1, _E_CRD, n, lane] + brd, en[1, _E_CWR, n, lane] + bwr
            en[1, _E_RD, n, lane], en[1, _E_WR, n, lane] = rd, wr
            en[1, _E_CRD, n, lane], en[1, _E_CWR, n, lane] = crd, cwr
            uq[n, lane] = mix_utilisation(
                crd, cwr, nl[_MEM_R, n, lane], nl[_MEM_W, n, lane], nl[_MEM_C, n, lane]
            )
            # the link's two directions queue in series with the memory behind them:
            # reads wait on device-to-host, writes on host-to-device (a node without a
            # link: utilisation 0, the queue's floor, not added to a machine without any)
            uq[N + n, lane] = rd / nl[_LINK_R, n, lane]
            uq[2 * N + n, lane] = wr / nl[_LINK_W, n, lane]
            rrd, rwr = en[1, _E_RRD, n, lane], en[1, _E_RWR, n, lane]
            uq[3 * N + n, lane] = mix_utilisation(
                rrd, rwr, nl[_REM_R, n, lane], nl[_REM_W, n, lane], nl[_REM_C, n, lane]
            )
    # the socket links: shared by every tenant's remote traffic (a queue each way, the same
    # curve for both; exact zeros where the machine has no link limit)
    for k in range(L):
        for lane in range(W):
            uq[4 * N + k, lane] = 0.0
        for t in range(T):
            for lane in range(W):
                uq[4 * N + k, lane] += x[t, lane] * ll[1, k, t, lane]
    # 2. every queue's delay and derivative (the links only in a block with one, the
    # remote paths only in a block with one)
    for r in range(4 * N + L):
        if (N <= r < 3 * N and not blk_link) or (3 * N <= r < 4 * N and not blk_remote):
            continue
        for lane in range(W):
            qq[0, r, lane], qq[1, r, lane] = queue_delay(
                uq[r, lane], cq[0, r, lane], cq[1, r, lane], cq[2, r, lane]
            )
    # 3. the nodes' latencies and utilisations, feasibility
    for lane in range(W):
        es[1, _S_FEAS, lane] = 1.0
    for n in range(N):
        for lane in range(W):
            u_mem = uq[n, lane]
            en[1, _E_DQM, n, lane] = qq[1, n, lane]
            en[1, _E_LNODE, n, lane] = nl[_IDLE, n, lane] + qq[0, n, lane]  # the link's: below
            u_loc = u_mem
            if blk_link:
                en[1, _E_QLR, n, lane], en[1, _E_DQLR, n, lane] = (
                    qq[0, N + n, lane],
                    qq[1, N + n, lane],
                )
                en[1, _E_QLW, n, lane] = qq[0, 2 * N + n, lane]
                en[1, _E_DQLW, n, lane] = qq[1, 2 * N + n, lane]
                u_any = _fmax(u_mem, _fmax(uq[N + n, lane], uq[2 * N + n, lane]))
                u_loc = u_any if any_link[lane] else u_mem
            en[1, _E_ULOC, n, lane] = u_loc
            ok = u_loc < _U_MAX  # NaN is infeasible
            if blk_remote:
                u_rem = uq[3 * N + n, lane]
                en[1, _E_UREM, n, lane] = u_rem
                en[1, _E_QR, n, lane], en[1, _E_DQR, n, lane] = (
                    qq[0, 3 * N + n, lane],
                    qq[1, 3 * N + n, lane],
                )
                ok = ok and u_rem < _U_MAX
            else:
                en[1, _E_UREM, n, lane], en[1, _E_QR, n, lane], en[1, _E_DQR, n, lane] = (
                    0.0,
                    0.0,
                    0.0,
                )
            es[1, _S_FEAS, lane] = es[1, _S_FEAS, lane] if ok else 0.0
    for lane in range(W):
        es[1, _S_ULKMAX, lane] = 0.0
    for k in range(L):
        for lane in range(W):
            u = uq[4 * N + k, lane]
            el[1, _E_ULK, k, lane] = u
            m = _fmax(es[1, _S_ULKMAX, lane], u)
            es[1, _S_ULKMAX, lane] = u if k == 0 else m
            ok = u < _U_MAX
            es[1, _S_FEAS, lane] = es[1, _S_FEAS, lane] if ok else 0.0
            on = lbl[0, lane] != 0.0
            el[1, _E_QLK, k, lane] = qq[0, 4 * N + k, lane] if on else 0.0
            el[1, _E_DQLK, k, lane] = qq[1, 4 * N + k, lane] if on else 0.0
    # 4. the tenants' mean latencies and the residual
    for t in range(T):
        for r in (_E_LBAR, _E_SLR, _E_SLW, _E_SREM, _E_SLK):
            for lane in range(W):
                et[1, r, t, lane] = 0.0
        for n in range(N):
            for lane in range(W):
                et[1, _E_LBAR, t, lane] += tnl[0, t, n, lane] * en[1, _E_LNODE, n, lane]
        if blk_link:
            for n in range(N):
                for lane in range(W):
                    et[1, _E_SLR, t, lane] += tnl[0, t, n, lane] * en[1, _E_QLR, n, lane]
            for n in range(N):
                for lane in range(W):
                    et[1, _E_SLW, t, lane] += tnl[0, t, n, lane] * en[1, _E_QLW, n, lane]
        if blk_remote:
            for n in range(N):
                for lane in range(W):
                    et[1, _E_SREM, t, lane] += w[4, t, n, lane] * (
                        nl[_REM_NS, n, lane] + en[1, _E_QR, n, lane]
                    )
        for k in range(L):
            for lane in range(W):
                et[1, _E_SLK, t, lane] += ll[0, k, t, lane] * el[1, _E_QLK, k, lane]
        for lane in range(W):
            lbar = et[1, _E_LBAR, t, lane]
            rf = tl[2, t, lane]
            with_link = lbar + rf * et[1, _E_SLR, t, lane] + (1 - rf) * et[1, _E_SLW, t, lane]
            lbar = with_link if (blk_link and any_link[lane]) else lbar
            lbar = lbar + et[1, _E_SREM, t, lane] if blk_remote else lbar  # + 0 without one
            with_sock = lbar + et[1, _E_SLK, t, lane]
            lbar = with_sock if (L > 0 and lbl[0, lane] != 0.0) else lbar
            denom = tl[1, t, lane] + lbar
            xt = x[t, lane]
            et[1, _E_X, t, lane], et[1, _E_LBAR, t, lane], et[1, _E_DENOM, t, lane] = (
                xt,
                lbar,
                denom,
            )
            cap = tl[0, t, lane]
            # the relative error of Little's law (0 for an absent tenant)
            resid = _log(_fmax(xt, _TINY) * denom / _fmax(cap, _TINY))
            resid = resid if cap > 0 else 0.0
            et[1, _E_RESID, t, lane] = resid
            m = _fmax(es[1, _S_NORM, lane], abs(resid))
            es[1, _S_NORM, lane] = abs(resid) if t == 0 else m
    for lane in range(W):
        u_loc, u_rem = en[1, _E_ULOC, 0, lane], en[1, _E_UREM, 0, lane]
        for n in range(1, N):
            u_loc = _fmax(u_loc, en[1, _E_ULOC, n, lane])
            u_rem = _fmax(u_rem, en[1, _E_UREM, n, lane])
        # the highest utilisation: local resources, remote paths, socket links
        es[1, _S_UMAX, lane] = _fmax(_fmax(u_loc, u_rem), es[1, _S_ULKMAX, lane])
    if blk_link:
        for n in range(N):
            for lane in range(W):
                with_link = en[1, _E_LNODE, n, lane] + en[1, _E_QLR, n, lane]
                en[1, _E_LNODE, n, lane] = with_link if any_link[lane] else en[1, _E_LNODE, n, lane]


@_jit
def _jacobian(blk, blk_remote, blk_link, d, j):  # pragma: no cover (compiled)
    """Jacobian (T, T, W) of the residual in log X at the block's current point (slot 0
    of its evaluations, :func:`_evaluate`), into ``j`` (``d`` (k, T, N, W): scratch).

    ``J[t, s] = delta_ts + X_s / denom_t * d Lbar_t / d X_s``, where
    ``d Lbar_t / d X_s = sum_r left_t,r * right_s,r`` over every resource ``r``, added in
    a fixed order: the memory of every node, the links' read then write directions, the
    remote paths, the socket links. A term that is absent (no link, no remote path)
    adds an exact zero (or is not added in a block without any).
    """
    tl, tnl, nl, ll, w, en, et, el = (
        blk[0],
        blk[1],
        blk[2],
        blk[3],
        blk[5],
        blk[10],
        blk[11],
        blk[12],
    )
    W = tl.shape[2]  # lanes (a run-time value: a constant count would be unrolled, not vectorised)
    T, N, L = tl.shape[1], tnl.shape[2], ll.shape[1]
    for n in range(N):
        for lane in range(W):
            # the utilisations' derivatives in read and write traffic (costed bytes; a
            # square is a product, what numpy's ** 2 computes)
            tot = _fmax(en[0, _E_CRD, n, lane] + en[0, _E_CWR, n, lane], _TINY)
            fw, fr = en[0, _E_CWR, n, lane] / tot, en[0, _E_CRD, n, lane] / tot
            dmr = 1.0 / nl[_MEM_R, n, lane] + nl[_MEM_C, n, lane] * (fw * fw)
            dmw = 1.0 / nl[_MEM_W, n, lane] + nl[_MEM_C, n, lane] * (fr * fr)
            rtot = _fmax(en[0, _E_RRD, n, lane] + en[0, _E_RWR, n, lane], _TINY)
            fw, fr = en[0, _E_RWR, n, lane] / rtot, en[0, _E_RRD, n, lane] / rtot
            drr = 1.0 / nl[_REM_R, n, lane] + nl[_REM_C, n, lane] * (fw * fw)
            drw = 1.0 / nl[_REM_W, n, lane] + nl[_REM_C, n, lane] * (fr * fr)
            for t in range(T):
                sh, rf = tnl[0, t, n, lane], tl[2, t, lane]
                # left: what tenant t's latency gains per unit of the resource's load;
                # right: what tenant t's throughput adds to that load
                d[0, t, n, lane] = sh * en[0, _E_DQM, n, lane]
                d[1, t, n, lane] = w[2, t, n, lane] * dmr + w[3, t, n, lane] * dmw
                d[2, t, n, lane] = sh * (rf * en[0, _E_DQLR, n, lane])
                d[3, t, n, lane] = sh * ((1 - rf) * en[0, _E_DQLW, n, lane])
                d[4, t, n, lane] = w[4, t, n, lane] * en[0, _E_DQR, n, lane]
                d[5, t, n, lane] = w[5, t, n, lane] * drr + w[6, t, n, lane] * drw
    for t in range(T):
        for s in range(T):
            for lane in range(W):
                j[t, s, lane] = 0.0
            for n in range(N):
                for lane in range(W):
                    j[t, s, lane] += d[0, t, n, lane] * d[1, s, n, lane]
            if blk_link:
                for n in range(N):
                    for lane in range(W):
                        j[t, s, lane] += d[2, t, n, lane] * w[7, s, n, lane]
                for n in range(N):
                    for lane in range(W):
                        j[t, s, lane] += d[3, t, n, lane] * w[8, s, n, lane]
            if blk_remote:
                for n in range(N):
                    for lane in range(W):
                        j[t, s, lane] += d[4, t, n, lane] * d[5, s, n, lane]
            for k in range(L):
                for lane in range(W):
                    j[t, s, lane] += (ll[0, k, t, lane] * el[0, _E_DQLK, k, lane]) * ll[
                        1, k, s, lane
                    ]
            for lane in range(W):
                acc = j[t, s, lane] * (
                    et[0, _E_X, s, lane] / _fmax(et[0, _E_DENOM, t, lane], _TINY)
                )
                acc = acc if (tl[0, t, lane] > 0 and tl[0, s, lane] > 0) else 0.0
                j[t, s, lane] = acc + 1.0 if t == s else acc


@_inline
def _solve_small(a, rhs, out, piv, f):  # pragma: no cover (compiled)
    """Solve ``a x = rhs`` in every lane into ``out`` (Gaussian elimination; ``a`` and ``rhs``
    overwritten; ``piv`` and ``f`` (W,) scratch; every loop over lanes innermost).

    The Jacobian is the identity plus a non-negative matrix with a positive diagonal, so
    elimination without pivoting is safe at these sizes."""
    W = piv.shape[0]  # lanes (a run-time value: a constant count would be unrolled, not vectorised)
    n = a.shape[0]
    for k in range(n):
        for lane in range(W):
            p = a[k, k, lane]
            piv[lane] = 1e-300 if abs(p) < 1e-300 else p
        for i in range(k + 1, n):
            for lane in range(W):
                f[lane] = a[i, k, lane] / piv[lane]
            for c in range(k + 1, n):
                for lane in range(W):
                    a[i, c, lane] -= f[lane] * a[k, c, lane]
            for lane in range(W):
                rhs[i, lane] -= f[lane] * rhs[k, lane]
        for lane in range(W):
            a[k, k, lane] = piv[lane]
    for k in range(n - 1, -1, -1):
        for lane in range(W):
            f[lane] = 0.0
        for c in range(k + 1, n):
            for lane in range(W):
                f[lane] += a[k, c, lane] * out[c, lane]
        for lane in range(W):
            out[k, lane] = (rhs[k, lane] - f[lane]) / a[k, k, lane]


@_inline
def _block(T, N, L, W):  # pragma: no cover (compiled)
    """A block's arrays: its inputs in lanes (``tl``, ``tnl``, ``nl``, ``ll``, ``lbl``:
    :func:`_load`), what :func:`_prepare` fixes (``w``, ``any_link``, ``cq``), the queues'
    scratch (``uq``, ``qq``) and two evaluations (``en``, ``et``, ``el``, ``es``; slot 0 the
    current point, 1 the trial point), as one tuple in that order."""
    return (
        np.empty((4, T, W)),
        np.empty((2, T, N, W)),
        np.empty((2 + 18, N, W)),
        np.empty((2, L, T, W)),
        np.empty((4, W)),
        np.empty((9, T, N, W)),
        np.empty(W, dtype=np.bool_),
        np.empty((3, 4 * N + L, W)),
        np.empty((4 * N + L, W)),
        np.zeros((2, 4 * N + L, W)),
        np.zeros((2, _EN, N, W)),
        np.zeros((2, _ET, T, W)),
        np.zeros((2, 3, L, W)),
        np.zeros((2, 4, W)),
    )


@_inline
def _open(b0, end, pick, tb, tnb, nb, ltb, lb, blk):  # pragma: no cover (compiled)
    """Load elements ``b0 ..`` up to ``end`` (or ``pick``: :func:`_copy_lanes`) into the block ``blk``
    (:func:`_block`) and prepare it: whether some lane has a remote path and some a link."""
    tl, tnl, nl, ll, lbl, w, any_link, cq = blk[:8]
    _load(b0, end, pick, tb, tnb, nb, ltb, lb, tl, tnl, nl, ll, lbl)
    return _prepare(tl, tnl, nl, lbl, w, any_link, cq)


@_inline
def _move(held, r, j, rows, lane, save):  # pragma: no cover (compiled)
    """Lane ``lane`` of ``rows`` (k, W) into column ``j`` of ``held`` from row ``r`` on
    (``save``), or back from it; returns the row after them."""
    for q in range(rows.shape[0]):
        if save:
            held[r + q, j] = rows[q, lane]
        else:
            rows[q, lane] = held[r + q, j]
    return r + rows.shape[0]


@_inline
def _held(held, j, lane, st, blk, save):  # pragma: no cover (compiled)
    """Lane ``lane``'s state between two rounds into column ``j`` of ``held`` (``save``),
    or back from it: its point, its Newton step, its counters (``st``: ``x``, ``z``,
    ``step`` (T, W); ``mode``, ``n_iter``, ``tries``, ``shrinks``; ``lam`` (W,)) and its
    current evaluation (slot 0 of the block ``blk``'s). Everything else a lane holds is
    its element's inputs and what :func:`_prepare` and :func:`_zero_load` derive from them."""
    x, z, step, mode, n_iter, tries, shrinks, lam = st
    W = x.shape[1]
    r = 0
    for rows in (
        x,
        z,
        step,
        lam.reshape(1, W),
        blk[10][0].reshape(-1, W),
        blk[11][0].reshape(-1, W),
        blk[12][0].reshape(-1, W),
        blk[13][0],
    ):
        r = _move(held, r, j, rows, lane, save)
    for count in (mode, n_iter, tries, shrinks):
        r = _move(held, r, j, count.reshape(1, W), lane, save)


@_jit
def _solve_batch(
    tb, tnb, nb, ltb, lb, x0, has_x0, tol, max_iter, out_t, out_n, out_l, out_b, iters, W, lo, hi
):  # pragma: no cover
    """The fixed point of every element ``lo .. hi - 1``, ``W`` elements at a time.

    ``tb`` (4, T, B): bytes in flight, compute ns, read fraction, random access;
    ``tnb`` (2, T, N, B): access shares, remote; ``nb`` (2 + 18, N, B): background read
    and write traffic, the node curves; ``ltb`` (2, L, T, B): the socket links' weights
    per byte of throughput and per unit of bandwidth; ``lb`` (4, B): whether a limit
    exists and the links' queue curve; ``x0`` (T, B) the warm start (``has_x0``).
    Outputs: ``out_t`` (3, T, B) throughput, mean latency and zero-load demand; ``out_n`` (5, N, B)
    latency, utilisation, remote utilisation, read and write traffic; ``out_l`` (L, B)
    socket-link utilisation; ``out_b`` (B,) residual; ``iters`` (B,) Newton iterations.

    Each element: a warm start (pulled back, kept, or abandoned for a cold start), or a
    cold start evaluated without then with the background, halved while infeasible; then
    Newton steps with backtracking. Every round evaluates every lane once at the point
    its ``mode`` asks for; a lane whose element is done waits for the block's others,
    until at most ``_HOLD`` are left: those are set aside with their state
    (:func:`_held`) and go on, ``W`` at a time, after the range's blocks. An element's
    numbers depend on its own inputs alone, whichever lane and neighbours it has.
    """
    T, N, L = tb.shape[1], tnb.shape[2], ltb.shape[1]
    blk = _block(T, N, L, W)
    tl, tnl, nl, en, et, el, es = blk[0], blk[1], blk[2], blk[10], blk[11], blk[12], blk[13]
    x, z, step = np.empty((T, W)), np.zeros((T, W)), np.zeros((T, W))
    rhs, sol, demand = np.empty((T, W)), np.empty((T, W)), np.empty((T, W))
    jac, dj, piv, fac = np.empty((T, T, W)), np.empty((6, T, N, W)), np.empty(W), np.empty(W)
    bgs, lam, accept = np.empty(W), np.ones(W), np.empty(W)
    mode = np.empty(W, dtype=np.int64)
    n_iter, tries = np.zeros(W, dtype=np.int64), np.zeros(W, dtype=np.int64)
    shrinks = np.zeros(W, dtype=np.int64)
    need = np.empty(W, dtype=np.bool_)
    elem, pick = np.empty(W, dtype=np.int64), np.empty(W, dtype=np.int64)
    none = pick[:0]
    # the stragglers (elements set aside, to be solved together after the batch's
    # blocks), their state in the columns of ``held`` (:func:`_held`); none in a batch of
    # one block
    room = (hi - lo) // 4 + W if hi - lo > W else 0
    held = np.empty((3 * T + 5 + _EN * N + _ET * T + 3 * L + 4, room))
    st = (x, z, step, mode, n_iter, tries, shrinks, lam)
    held_elem = np.empty(room, dtype=np.int64)
    n_held, first_held, n_blocks, next_block = 0, 0, (hi - lo + W - 1) // W, 0
    while True:
        if next_block < n_blocks:  # the batch's elements in order, W at a time
            b0, strays = lo + next_block * W, False
            next_block += 1
            for lane in range(W):
                elem[lane] = b0 + lane if b0 + lane < hi else -1
        elif first_held < n_held:  # then the stragglers, W at a time
            b0, strays = 0, True
            for lane in range(W):
                j = first_held + lane
                elem[lane] = held_elem[j] if j < n_held else -1
                pick[lane] = held_elem[min(j, n_held - 1)]
        else:
            break
        # (one call site: the kernel inlines it once)
        blk_remote, blk_link = _open(b0, hi, pick if strays else none, tb, tnb, nb, ltb, lb, blk)
        _zero_load(tl, tnl, nl, demand)
        for lane in range(W):
            if strays:
                if elem[lane] < 0:
                    mode[lane] = _DONE
                else:
                    _held(held, first_held + lane, lane, st, blk, False)
                continue
            n_iter[lane], tries[lane], shrinks[lane], lam[lane] = 0, 0, 0, 1.0
            if elem[lane] < 0:
                mode[lane] = _DONE  # past the batch's end
            elif has_x0:
                # warm start from the last interval's rates (a tenant without one, just
                # started, from its zero-load demand)
                mode[lane] = _WARM
                for t in range(T):
                    active = tl[0, t, lane] > 0
                    xw = x0[t, elem[lane]] if active else 0.0
                    x[t, lane] = demand[t, lane] if (active and xw <= 0) else xw
            else:
                mode[lane] = _QUIET
            if mode[lane] != _WARM:
                # cold start: the zero-load demand, first evaluated without the background
                for t in range(T):
                    x[t, lane] = demand[t, lane]
        while True:
            for lane in range(W):
                bgs[lane] = 0.0 if mode[lane] == _QUIET else 1.0
            _evaluate(x, bgs, blk, blk_remote, blk_link)
            for lane in range(W):
                accept[lane], need[lane] = 0.0, False
                m = mode[lane]
                if m == _DONE:
                    continue
                feasible, norm = es[1, _S_FEAS, lane] != 0.0, es[1, _S_NORM, lane]
                if m == _TRIAL:
                    if feasible and norm < es[0, _S_NORM, lane]:
                        accept[lane] = 1.0  # the trial point is the new current point
                        for t in range(T):
                            z[t, lane] = z[t, lane] + lam[lane] * step[t, lane]
                        n_iter[lane] += 1
                        need[lane] = n_iter[lane] < max_iter
                        if not need[lane]:
                            mode[lane] = _DONE
                    else:
                        tries[lane] += 1
                        if tries[lane] == 40:
                            mode[lane] = _DONE  # nothing can improve further (machine precision)
                        lam[lane] = lam[lane] * 0.5
                    continue
                accept[lane] = 1.0  # a start's evaluation is the current point
                if m == _WARM:
                    # pulled back below 90% utilisation: Newton is slow from the saturated
                    # side of the knee, fast from below; a start that already solves the
                    # problem (a steady state: the same placement and rates as the last
                    # interval) is kept, however loaded: pulling it back would only cost
                    # Newton iterations to climb the knee again
                    pull = _fmin(1.0, 0.9 / _fmax(es[1, _S_UMAX, lane], _TINY))
                    pull = 1.0 if (feasible and norm <= tol) else pull
                    m = _PULLED
                    if pull < 1.0:
                        mode[lane] = m
                        for t in range(T):
                            x[t, lane] = x[t, lane] * pull
                        continue
                if m == _PULLED:
                    cold = not feasible
                    for t in range(T):
                        cold = cold or (x[t, lane] <= 0 and tl[0, t, lane] > 0)
                    if cold:
                        mode[lane] = _QUIET
                        for t in range(T):
                            x[t, lane] = demand[t, lane]
                        continue
                    m = _SHRUNK
                elif m == _QUIET:
                    # the zero-load demand scaled so that no resource passes 50%
                    scale = _fmin(1.0, 0.5 / _fmax(es[1, _S_UMAX, lane], _TINY))
                    for t in range(T):
                        x[t, lane] = demand[t, lane] * scale if tl[0, t, lane] > 0 else 0.0
                    mode[lane] = _COLD
                    continue
                elif m == _COLD:
                    m = _SHRUNK
                # _SHRUNK: background traffic is capped by the caller; a start that is
                # still infeasible is halved
                mode[lane] = _SHRUNK
                if not feasible and shrinks[lane] < 60:
                    shrinks[lane] += 1
                    for t in range(T):
                        x[t, lane] = x[t, lane] * 0.5
                    continue
                for t in range(T):
                    z[t, lane] = _log(_fmax(x[t, lane], _TINY))
                need[lane] = max_iter > 0
                if not need[lane]:
                    mode[lane] = _DONE
            # the evaluation becomes the current point where accepted (one select a value)
            for r in range(_EN):
                for n in range(N):
                    for lane in range(W):
                        en[0, r, n, lane] = (
                            en[1, r, n, lane] if accept[lane] != 0.0 else en[0, r, n, lane]
                        )
            for r in range(_ET):
                for t in range(T):
                    for lane in range(W):
                        et[0, r, t, lane] = (
                            et[1, r, t, lane] if accept[lane] != 0.0 else et[0, r, t, lane]
                        )
            for r in range(3):
                for k in range(L):
                    for lane in range(W):
                        el[0, r, k, lane] = (
                            el[1, r, k, lane] if accept[lane] != 0.0 else el[0, r, k, lane]
                        )
            for r in range(4):
                for lane in range(W):
                    es[0, r, lane] = es[1, r, lane] if accept[lane] != 0.0 else es[0, r, lane]
            # a Newton step where a lane is ready for one and not converged (or NaN)
            newton = False
            for lane in range(W):
                if need[lane] and not es[0, _S_NORM, lane] > tol:
                    need[lane] = False
                    mode[lane] = _DONE
                newton = newton or need[lane]
            if newton:
                _jacobian(blk, blk_remote, blk_link, dj, jac)
                for t in range(T):
                    for lane in range(W):
                        rhs[t, lane] = et[0, _E_RESID, t, lane]
                _solve_small(jac, rhs, sol, piv, fac)
                for lane in range(W):
                    if need[lane]:
                        # backtracking: the step halved until the point is feasible and the
                        # residual falls
                        mode[lane], lam[lane], tries[lane] = _TRIAL, 1.0, 0
                        for t in range(T):
                            step[t, lane] = -sol[t, lane] if tl[0, t, lane] > 0 else 0.0
            done = True
            for lane in range(W):
                done = done and mode[lane] == _DONE
            if done:
                break
            for t in range(T):
                for lane in range(W):
                    xt = _exp(z[t, lane] + lam[lane] * step[t, lane])
                    xt = xt if tl[0, t, lane] > 0 else 0.0
                    x[t, lane] = xt if mode[lane] == _TRIAL else x[t, lane]
            if strays:
                continue
            # a few lanes left: they are set aside, to go on beside other stragglers,
            # rather than keep the block's other lanes waiting for them
            left = 0
            for lane in range(W):
                left += mode[lane] != _DONE
            if left <= _HOLD and n_held + left <= room:
                for lane in range(W):
                    if mode[lane] != _DONE:
                        held_elem[n_held] = elem[lane]
                        _held(held, n_held, lane, st, blk, True)
                        n_held += 1
                        elem[lane] = -1
                break
        if strays:
            first_held += W
        # each finished lane's results (rows outer: the stores of a row are neighbours)
        for lane in range(W):
            if elem[lane] >= 0:
                iters[elem[lane]] = n_iter[lane]
                out_b[elem[lane]] = es[0, _S_NORM, lane]
        for t in range(T):
            for lane in range(W):
                if elem[lane] >= 0:
                    out_t[0, t, elem[lane]] = _exp(z[t, lane]) if tl[0, t, lane] > 0 else 0.0
            for lane in range(W):
                if elem[lane] >= 0:
                    out_t[1, t, elem[lane]] = et[0, _E_LBAR, t, lane]
            for lane in range(W):
                if elem[lane] >= 0:
                    out_t[2, t, elem[lane]] = demand[t, lane]
        for r, k in enumerate((_E_LNODE, _E_ULOC, _E_UREM, _E_RD, _E_WR)):
            for n in range(N):
                for lane in range(W):
                    if elem[lane] >= 0:
                        out_n[r, n, elem[lane]] = en[0, k, n, lane]
        for k in range(L):
            for lane in range(W):
                if elem[lane] >= 0:
                    out_l[k, elem[lane]] = el[0, _E_ULK, k, lane]


@parallel_jit
def _solve_chunks(
    tb, tnb, nb, ltb, lb, x0, has_x0, tol, max_iter, out_t, out_n, out_l, out_b, iters, W, chunks
):  # pragma: no cover
    """:func:`_solve_batch` on ``chunks`` parts of the batch (whole blocks of ``W``), side
    by side on numba's threads: every element's numbers are those of one call."""
    B = tb.shape[2]
    per = ((B + chunks - 1) // chunks + W - 1) // W * W
    for c in prange(chunks):
        lo = min(B, c * per)
        hi = min(B, lo + per)
        if hi > lo:
            _solve_batch(
                tb, tnb, nb, ltb, lb, x0, has_x0, tol, max_iter, out_t, out_n, out_l, out_b,
                iters, W, lo, hi,
            )  # fmt: skip


@_jit
def _evaluate_batch(tb, tnb, nb, ltb, lb, x, ev_t, ev_n, ev_l, ev_b, jac, W):  # pragma: no cover
    """:func:`_evaluate` and :func:`_jacobian` of every element at ``x`` (T, B), for tests:
    ``ev_t`` (8, T, B), ``ev_n`` (16, N, B), ``ev_l`` (3, L, B), ``ev_b`` (4, B), ``jac``
    (T, T, B)."""
    T, N, B, L = tb.shape[1], tnb.shape[2], tb.shape[2], ltb.shape[1]
    blk = _block(T, N, L, W)
    en, et, el, es = blk[10], blk[11], blk[12], blk[13]
    xl, bgs, pick = np.empty((T, W)), np.ones(W), np.empty(0, dtype=np.int64)
    j, dj = np.empty((T, T, W)), np.empty((6, T, N, W))
    for b0 in range(0, B, W):
        blk_remote, blk_link = _open(b0, B, pick, tb, tnb, nb, ltb, lb, blk)
        for lane in range(W):
            for t in range(T):
                xl[t, lane] = x[t, min(b0 + lane, B - 1)]
        _evaluate(xl, bgs, blk, blk_remote, blk_link)
        # element by element: numba's slice assignment compiles its broadcasting checks and
        # their error messages (about a third of this function's compile)
        for a in (en, et, el):
            for r in range(a.shape[1]):
                for i in range(a.shape[2]):
                    for lane in range(W):
                        a[0, r, i, lane] = a[1, r, i, lane]
        for r in range(es.shape[1]):
            for lane in range(W):
                es[0, r, lane] = es[1, r, lane]
        _jacobian(blk, blk_remote, blk_link, dj, j)
        for lane in range(min(W, B - b0)):
            b = b0 + lane
            for t in range(T):
                for r in range(ev_t.shape[0]):
                    ev_t[r, t, b] = et[0, r, t, lane]
                for u in range(T):
                    jac[t, u, b] = j[t, u, lane]
            for n in range(N):
                for r in range(ev_n.shape[0]):
                    ev_n[r, n, b] = en[0, r, n, lane]
            for k in range(L):
                for r in range(ev_l.shape[0]):
                    ev_l[r, k, b] = el[0, r, k, lane]
            for r in range(ev_b.shape[0]):
                ev_b[r, b] = es[0, r, lane]


def curve_rows(nc: NodeCurves, shape: tuple[int, int] | None = None) -> F64:
    """The curves' fields in their order (18, N, B), each broadcast to ``shape`` (N, B;
    default the shape of ``nc.idle_ns``): the node rows of the kernel's input after the
    migration traffic (:func:`_pack`)."""
    out = np.empty((len(_CURVES), *(np.shape(nc.idle_ns) if shape is None else shape)))
    for i, f in enumerate(_CURVES):
        out[i] = getattr(nc, f)
    return out


def _pack(
    cap: F64,
    compute: F64,
    rfrac: F64,
    share: F64,
    remote: F64,
    bg_rd: F64,
    bg_wr: F64,
    nc: NodeCurves,
    links: SocketLinks | None,
    random: F64 | None,
    rows: F64 | None = None,
) -> tuple[F64, F64, F64, F64, F64]:
    """The kernel's inputs, float64 and C-contiguous, batch-last: ``tb`` (4, T, B), ``tnb``
    (2, T, N, B), ``nb`` (20, N, B), ``ltb`` (2, L, T, B), ``lb`` (4, B) (the rows of
    :func:`_solve_batch`'s docstring). ``rows``: :func:`curve_rows` of ``nc`` where the
    caller keeps them."""
    T, N, B = share.shape[0], share.shape[1], cap.shape[-1]
    tb = np.empty((4, T, B))
    tb[0], tb[1], tb[2] = cap, compute, rfrac
    tb[3] = 0.0 if random is None else random
    tnb = np.empty((2, T, N, B))
    tnb[0], tnb[1] = share, remote
    nb = np.empty((2 + len(_CURVES), N, B))
    nb[_BG_RD], nb[_BG_WR] = bg_rd, bg_wr
    nb[2:] = curve_rows(nc, (N, B)) if rows is None else rows
    L = 0 if links is None else links.weight.shape[0]
    ltb = np.empty((2, L, T, B))
    lb = np.zeros((4, B))
    if L:
        assert links is not None
        fin = np.isfinite(links.gbps)
        ltb[0] = links.weight
        # per unit throughput, the share of a direction's bandwidth (0 without a limit)
        ltb[1] = links.weight * np.where(fin, 1.0 / np.where(fin, links.gbps, 1.0), 0.0)
        lb[0] = fin
        lb[1], lb[2], lb[3] = links.slope_ns, links.knee_ns, links.knee_exp
    return tb, tnb, nb, ltb, lb


@dataclass
class Problem:
    """One batch of fixed-point problems (arrays batch-last, as :func:`solve_fixed_point`
    takes them), to inspect: the kernel's own evaluation and Jacobian at any point."""

    cap: F64
    compute: F64
    rfrac: F64
    share: F64
    remote: F64
    bg_rd: F64
    bg_wr: F64
    nc: NodeCurves
    links: SocketLinks | None = None
    random: F64 | None = None

    @property
    def active(self) -> NDArray[np.bool_]:
        return np.asarray(self.cap) > 0

    @property
    def T(self) -> int:
        return int(self.share.shape[0])

    def _arrays(self) -> tuple[F64, F64, F64, F64, F64, F64, F64]:
        return (self.cap, self.compute, self.rfrac, self.share, self.remote, self.bg_rd, self.bg_wr)

    def evaluate_and_jacobian(self, x: F64) -> tuple[dict[str, F64], F64]:
        """The named arrays at throughput ``x`` (T, B) (``resid`` (T, B), ``lbar``, ``rd``,
        ``u_loc``, ``u_rem`` (N, B), ``u_lk`` (L, B), ``norm``, ``feasible``, ``u_lk_max``
        (B,), ...) and the Jacobian (T, T, B) of the residual in ``z = log X``."""
        tb, tnb, nb, ltb, lb = _pack(*self._arrays(), self.nc, self.links, self.random)
        T, N, L, B = tb.shape[1], tnb.shape[2], ltb.shape[1], tb.shape[2]
        ev_t, ev_n = np.empty((_ET, T, B)), np.empty((_EN, N, B))
        ev_l, ev_b = np.empty((3, L, B)), np.empty((4, B))
        jac = np.empty((T, T, B))
        xx = np.empty((T, B))
        xx[...] = x
        _evaluate_batch(tb, tnb, nb, ltb, lb, xx, ev_t, ev_n, ev_l, ev_b, jac, min(_W, B))
        ev = {
            "x": ev_t[_E_X],
            "lbar": ev_t[_E_LBAR],
            "denom": ev_t[_E_DENOM],
            "resid": ev_t[_E_RESID],
            "rd": ev_n[_E_RD],
            "wr": ev_n[_E_WR],
            "lnode": ev_n[_E_LNODE],
            "u_loc": ev_n[_E_ULOC],
            "u_rem": ev_n[_E_UREM],
            "u_lk": ev_l[_E_ULK],
            "norm": ev_b[_S_NORM],
            "feasible": ev_b[_S_FEAS] != 0.0,
            "u_lk_max": ev_b[_S_ULKMAX],
        }
        return ev, jac

    def evaluate(self, x: F64) -> dict[str, F64]:
        return self.evaluate_and_jacobian(x)[0]

    def jacobian(self, x: F64) -> F64:
        return self.evaluate_and_jacobian(x)[1]

    def take(self, idx: NDArray[np.int64]) -> Problem:
        """The sub-batch of elements ``idx``."""
        B = self.cap.shape[-1]

        def sub(a: Any) -> Any:
            return np.broadcast_to(a, (*np.shape(a)[:-1], B))[..., idx]

        nc = NodeCurves(**{k: sub(v) for k, v in vars(self.nc).items()})
        links = None
        if self.links is not None:
            links = SocketLinks(**{k: sub(v) for k, v in vars(self.links).items()})
        rnd = None if self.random is None else sub(self.random)
        cap, compute, rfrac, share, remote, bg_rd, bg_wr = (sub(a) for a in self._arrays())
        return Problem(cap, compute, rfrac, share, remote, bg_rd, bg_wr, nc, links, rnd)

    def solve(self, **kw: Any) -> Solution:
        """:func:`solve_fixed_point` of this batch."""
        return solve_fixed_point(
            *self._arrays(), self.nc, links=self.links, random=self.random, **kw
        )


def solve_fixed_point(
    cap: F64,
    compute: F64,
    rfrac: F64,
    share: F64,
    remote: F64,
    bg_rd: F64,
    bg_wr: F64,
    nc: NodeCurves,
    x0: F64 | None = None,
    tol: float = TOL,
    max_iter: int = MAX_ITER,
    retry: bool = True,
    links: SocketLinks | None = None,
    random: F64 | None = None,
    curve_rows: F64 | None = None,
    lanes: int = LANES,
) -> Solution:
    """Solve every batch element's fixed point (arrays batch-last).

    ``cap`` (T, B): bytes in flight ``64*threads*mlp`` (0 for an absent
    tenant); ``compute`` (T, B) ns between misses; ``rfrac`` (T, B) read
    fraction; ``share`` (T, N, B) access shares (sum over N is 1);
    ``remote`` (T, N, B) 1 where the node is on another socket;
    ``bg_rd``/``bg_wr`` (N, B) background traffic in GB/s (migrations);
    ``x0`` (T, B) an optional warm start (used where it is feasible);
    ``links`` the socket links (:class:`SocketLinks`; None: no limit);
    ``random`` (T, B) 1 for a tenant with random access (None: all sequential);
    ``curve_rows`` :func:`envs.solver.curve_rows` of ``nc``, where the caller keeps them
    (``nc``'s fields are then not read); ``lanes`` the elements solved side by side (a
    block; at most the batch): a matter of speed alone, every element's numbers are the
    same for any value (the fast precision of :mod:`envs.model` uses :data:`WIDE_LANES`).

    Each element: a warm start pulled back below 90% utilisation (kept where it already
    solves the problem), else a cold start at the zero-load demand scaled to 50%, halved
    while infeasible; then Newton steps in ``z = log X`` with backtracking until the
    residual is at most ``tol``. With ``retry``, an element that Newton leaves above the
    tolerance (deep saturation reached from a poor start) is solved again from a cold
    start and, if that fails too, by continuation: the bytes in flight raised in stages
    from 10% to 100%, each stage started from the last one's solution.
    """
    if isinstance(lanes, bool) or not isinstance(lanes, int | np.integer) or lanes < 1:
        raise ValueError(f"lanes: got {lanes!r}, expected an integer >= 1")
    tb, tnb, nb, ltb, lb = _pack(
        cap, compute, rfrac, share, remote, bg_rd, bg_wr, nc, links, random, curve_rows
    )
    T, N, L, B = tb.shape[1], tnb.shape[2], ltb.shape[1], tb.shape[2]
    has_x0 = x0 is not None
    xs = np.empty((T, B))  # a writable array always: one compiled signature
    xs[...] = 0.0 if x0 is None else x0
    out_t, out_n = np.empty((3, T, B)), np.empty((5, N, B))
    out_l, out_b = np.empty((L, B)), np.empty(B)
    iters = np.empty(B, dtype=np.int64)
    args = (tb, tnb, nb, ltb, lb, xs, has_x0, float(tol), int(max_iter))
    threads = get_threads()
    if threads > 1 and B >= lanes * _PER_THREAD * threads and may_thread():  # a large batch
        numba.set_num_threads(threads)
        _solve_chunks(*args, out_t, out_n, out_l, out_b, iters, lanes, threads)
    else:
        _solve_batch(*args, out_t, out_n, out_l, out_b, iters, min(lanes, B), 0, B)
    sol = record(
        Solution,
        {
            "throughput": out_t[0],
            "tenant_latency_ns": out_t[1],
            "node_latency_ns": out_n[0],
            "node_util": out_n[1],
            "remote_util": out_n[2],
            "node_read_gbps": out_n[3],
            "node_write_gbps": out_n[4],
            "residual": out_b,
            "iterations": iters,
            "link_util": out_l,
            "demand": out_t[2],
        },
    )
    if retry and np.count_nonzero(sol.residual > tol):
        _retry(
            sol,
            (cap, compute, rfrac, share, remote, bg_rd, bg_wr),
            nc,
            tol,
            max_iter,
            links,
            random,
        )
    return sol


def compile_kernel() -> None:
    """Compile the fixed point's kernel (or load it from the cache) ahead of its first use,
    by solving one small problem: every call has the same signature (:func:`_pack`'s
    arrays), so this is the compile an environment's first step would do: one half of
    :mod:`envs.warm`'s split."""
    solve_fixed_point(*_small_problem(), max_iter=0, retry=False)


def compile_evaluation() -> None:
    """Compile (or load) :class:`Problem`'s evaluation and Jacobian (the tests' view of the
    kernel's own), as :func:`compile_kernel` does the kernel."""
    problem = Problem(*_small_problem())
    problem.evaluate(np.ones((1, 1)))


def _small_problem() -> tuple[F64, F64, F64, F64, F64, F64, F64, NodeCurves]:
    """One tenant on one node: the arguments of :func:`solve_fixed_point` up to the curves."""
    one = np.ones((1, 1))
    nc = NodeCurves(**{f: one for f in _CURVES})
    return one, one, one * 0.5, one[:, :, None], 0 * one[:, :, None], one, one, nc


_CONTINUATION = (0.1, 0.3, 0.6, 0.85, 1.0)


def _retry(
    sol: Solution,
    arrays: tuple[F64, ...],
    nc: NodeCurves,
    tol: float,
    max_iter: int,
    links: SocketLinks | None = None,
    random: F64 | None = None,
) -> None:
    """Solve the unconverged elements of ``sol`` again (cold, then by continuation), in place."""
    idx = np.flatnonzero(sol.residual > tol)
    cap, compute, rfrac, share, remote, bg_rd, bg_wr = (a[..., idx] for a in arrays)
    snc = NodeCurves(**{k: v[..., idx] for k, v in vars(nc).items()})
    slk = None if links is None else SocketLinks(**{k: v[..., idx] for k, v in vars(links).items()})
    srnd = None if random is None else random[..., idx]
    rest = (compute, rfrac, share, remote, bg_rd, bg_wr, snc)
    best = solve_fixed_point(
        cap, *rest, x0=None, tol=tol, max_iter=max_iter, retry=False, links=slk, random=srnd
    )
    if (best.residual > tol).any():
        xk = None
        for lam in _CONTINUATION:
            cont = solve_fixed_point(
                cap * lam,
                *rest,
                x0=xk,
                tol=tol,
                max_iter=max_iter,
                retry=False,
                links=slk,
                random=srnd,
            )
            xk = cont.throughput
        _replace(best, cont, cont.residual < best.residual)
    _replace(sol, best, best.residual < sol.residual[idx], idx)


def _replace(
    dst: Solution, src: Solution, mask: NDArray[np.bool_], idx: NDArray[np.int64] | None = None
) -> None:
    """Rows ``mask`` of ``src`` into ``dst`` (at ``idx`` when ``dst`` is the larger batch)."""
    rows = np.flatnonzero(mask)
    at = rows if idx is None else idx[rows]
    for f in dataclasses.fields(Solution):
        d, s_ = getattr(dst, f.name), getattr(src, f.name)
        if f.name == "iterations":
            d[at] += s_[rows]
        else:
            d[..., at] = s_[..., rows]
