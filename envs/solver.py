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

The solver is Newton's method on ``z = log X`` over the tenant axis of every
batch element at once, with backtracking that keeps every utilisation below 1
and the residual decreasing. An element stops moving once converged, so its
result does not depend on what else is in the batch. The residual is
``max_t |log X_t + log(compute_t + Lbar_t) - log C_t|``, the relative error of
Little's law; the default tolerance is 1e-8.

Cost: a step from a warm start typically takes one evaluation at the start
and two Newton iterations (a Jacobian, a T x T solve and an evaluation each).
The Jacobian is built only where a Newton step is taken, not at trial points;
whatever concerns only some elements (a start pulled back, a cold start,
backtracking, the unconverged tail) is computed on those elements alone, by
gathering them into a sub-problem. Every array operation is element-wise or a
fixed-order sum over a leading axis, so an element gets the same numbers in
any sub-problem as in the whole batch.

Layout: the batch axis is the *last* axis of every array here (``(T, N, B)``
and so on). numpy reduces over a small leading axis of a batch-last array over ten times
faster than over a small trailing axis of a batch-first one (measured in
the table "Layout" of
``benchmarks/env_speed.py``), and the step reduces over tenants and nodes many
times. The public API (:mod:`envs.model`) speaks batch-first.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "CurveStructure",
    "NodeCurves",
    "SocketLinks",
    "Solution",
    "link_weights",
    "lsum",
    "solve_fixed_point",
    "zero_load_demand",
]

F64 = NDArray[np.float64]
Ev = dict[str, np.ndarray]  # an evaluation: named arrays, float and bool
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
    share: F64, rfrac: F64, tenant_socket: NDArray[np.int64], node_socket: NDArray[np.int64]
) -> F64:
    """Share of each tenant's bytes that crosses each socket-link direction (L, T, B).

    Directions are the ordered pairs ``(a, b)`` of the sockets present, ``a != b``,
    in lexicographic order. A read by a tenant on socket ``b`` from a node on
    ``a`` moves its data from ``a`` to ``b``; a write by a tenant on ``a`` to a
    node on ``b`` moves its data from ``a`` to ``b``. ``share`` (T, N, B),
    ``rfrac`` and ``tenant_socket`` (T, B), ``node_socket`` (N, B).
    """
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


def lmax(x: np.ndarray) -> np.ndarray:
    """Maximum over the leading axis (NaN propagates, as in ``x.max(0)``), by slices:
    a few calls of np.maximum cost less than a reduction over a small axis."""
    out = x[0]
    for i in range(1, x.shape[0]):
        out = np.maximum(out, x[i])
    return out


def mix_utilisation(rd: F64, wr: F64, r: F64, w: F64, c: F64) -> F64:
    """Utilisation of a resource with peaks r (reads), w (writes) and turnaround c."""
    return rd / r + wr / w + c * rd * wr / np.maximum(rd + wr, _TINY)


def queue_delay(u: F64, slope: F64, knee: F64, e: F64) -> tuple[F64, F64]:
    """Queueing delay (ns) and its derivative at utilisation u < 1."""
    u = np.minimum(np.maximum(u, 1e-12), _U_MAX)  # np.clip, without its overhead
    ue = np.exp(e * np.log(u))
    inv = 1.0 / (1.0 - u)
    kq = knee * ue * inv
    return slope * u + kq, slope + kq * (e / u + inv)


@dataclass(frozen=True)
class CurveStructure:
    """What a batch's node curves decide of its fixed points: which link rows exist, the
    constant queueing delay of the rows without one, the queue curves of the memory's
    rows then the link rows (one :func:`queue_delay` call).

    A function of the curves alone, so a batch whose curves do not change builds it once
    (:attr:`envs.model.Params.curve_structure`) and passes it to every
    :func:`solve_fixed_point`; without it the solver builds it from ``nc``.
    """

    rows_lr: list[int]  # node rows with a link in the read direction in some element
    rows_lw: list[int]
    sel_lr: slice | list[int]
    sel_lw: slice | list[int]
    q_link0: F64 | None  # (N, B) a link direction's delay where it has no link row
    local_curve: list[F64]  # slope, knee, exponent of the memory rows then the link rows

    @classmethod
    def of(cls, nc: NodeCurves) -> CurveStructure:
        N = nc.link_read.shape[0]
        # Node rows whose link direction is absent (inf) in every element have zero
        # utilisation there: their queueing delay is a constant (computed once here, by
        # the same function) and their Jacobian terms are exactly zero (skipped).
        rows_lr = np.flatnonzero(np.isfinite(nc.link_read).any(axis=1)).tolist()
        rows_lw = np.flatnonzero(np.isfinite(nc.link_write).any(axis=1)).tolist()
        q_link0 = None
        if (rows_lr or rows_lw) and len(rows_lr) + len(rows_lw) < 2 * N:
            # rows without a link in one direction or the other
            rows = [n for n in range(N) if n not in rows_lr or n not in rows_lw]
            q_link0 = np.zeros_like(nc.slope_ns)
            q_link0[rows] = queue_delay(
                np.zeros_like(nc.slope_ns[rows]),
                nc.slope_ns[rows],
                nc.knee_ns[rows],
                nc.knee_exp[rows],
            )[0]
        sel_lr, sel_lw = _rows(rows_lr), _rows(rows_lw)
        curve = _local_curve(nc, bool(rows_lr or rows_lw), sel_lr, sel_lw)
        return cls(rows_lr, rows_lw, sel_lr, sel_lw, q_link0, curve)


def _local_curve(
    nc: NodeCurves, any_link: bool, sel_lr: slice | list[int], sel_lw: slice | list[int]
) -> list[F64]:
    curve = [nc.slope_ns, nc.knee_ns, nc.knee_exp]
    if any_link:
        # the memory's rows then the link rows of each direction: one queue_delay call
        curve = [np.concatenate([c, c[sel_lr], c[sel_lw]]) for c in curve]
    return curve


class _Problem:
    """One batch of fixed-point problems; arrays batch-last.

    :meth:`evaluate` gives the residual at a point together with what the
    Jacobian needs; :meth:`jacobian` builds the Jacobian from that only where
    Newton takes a step (trial points of the line search and converged
    elements need none). Every element's numbers depend on its own inputs
    alone, so a sub-problem (:meth:`take`) gives the same numbers as the batch.
    """

    def __init__(
        self,
        cap: F64,
        compute: F64,
        rfrac: F64,
        share: F64,
        remote: F64,
        bg_rd: F64,
        bg_wr: F64,
        nc: NodeCurves,
        links: SocketLinks | None = None,
        random: F64 | None = None,
        structure: CurveStructure | None = None,
    ) -> None:
        self.T, self.N = share.shape[0], share.shape[1]
        # socket links (the caller passes them only where some machine of the batch
        # limits its link; a sub-problem keeps the structure, an element without a
        # limit gets exact zeros)
        self.n_links = 0
        if links is not None and links.weight.shape[0]:
            self.n_links = links.weight.shape[0]
            fin = np.isfinite(links.gbps)
            self.lk_w = links.weight  # (L, T, B)
            # per unit throughput, the share of a direction's bandwidth (0 without a limit)
            self.lk_r = links.weight * np.where(fin, 1.0 / np.where(fin, links.gbps, 1.0), 0.0)
            self.lk_on = np.broadcast_to(fin.astype(float), rfrac.shape)  # (T, B)
            self.lk_curve = [
                np.broadcast_to(c, rfrac.shape)
                for c in (links.slope_ns, links.knee_ns, links.knee_exp)
            ]
        # Structure (which terms exist) is decided for the whole batch and kept by
        # sub-problems, so they return the same entries; a term that is absent for
        # an element adds an exact zero to it.
        self.any_remote = bool(remote.any())
        st = CurveStructure.of(nc) if structure is None else structure
        self.rows_lr, self.rows_lw = st.rows_lr, st.rows_lw
        self.any_link = bool(self.rows_lr or self.rows_lw)
        self.const_link = st.q_link0 is not None
        self.sel_lr, self.sel_lw = st.sel_lr, st.sel_lw
        self.cap, self.compute, self.rfrac = cap, compute, rfrac
        self.share, self.remote = share, remote
        # read and write shares per unit throughput, stacked: (2, T, N, B)
        self.rw_w = np.empty((2, *np.broadcast_shapes(share.shape, rfrac[:, None].shape)))
        self.rd_w = np.multiply(share, rfrac[:, None], out=self.rw_w[0])
        self.wr_w = np.subtract(share, self.rd_w, out=self.rw_w[1])
        # random access: a random tenant's bytes use the memory at its random peaks, i.e.
        # cost R/R_random (W/W_random) of a sequential byte; "costed" traffic loads the
        # memory, real bytes load the links (decided for the whole batch, exact 1 elsewhere)
        self.any_random = random is not None and bool(np.any(random))
        if self.any_random:
            assert random is not None
            rnd = random[:, None]
            self.crw_w = np.stack(
                [
                    self.rd_w * (1.0 + rnd * (nc.mem_read / nc.rnd_read - 1.0)),
                    self.wr_w * (1.0 + rnd * (nc.mem_write / nc.rnd_write - 1.0)),
                ]
            )
        if self.any_remote:
            self.rshare = share * remote  # (T, N, B)
            self.rrw_w = self.rw_w * remote  # (2, T, N, B): remote reads, remote writes
            self.rrd_w, self.rwr_w = self.rrw_w
        self.bg = np.stack(
            [bg_rd, bg_wr] if bg_rd.shape == bg_wr.shape else np.broadcast_arrays(bg_rd, bg_wr)
        )  # (2, N, B) background traffic
        self.bg_rd, self.bg_wr = self.bg
        self.nc = nc
        if st.q_link0 is not None:
            self.q_link0 = st.q_link0
        self._derived(st.local_curve)
        self._pack: tuple[F64, F64, F64] | None = None

    def _derived(self, local_curve: list[F64] | None = None) -> None:
        self.active = self.cap > 0
        self.all_active = bool(self.active.all())
        self.capsafe = np.maximum(self.cap, _TINY)
        if local_curve is None:  # a sub-problem: its own elements' curves
            local_curve = _local_curve(self.nc, self.any_link, self.sel_lr, self.sel_lw)
        self.local_curve = local_curve

    def _packed(self) -> tuple[F64, F64, F64]:
        """The inputs packed by shape, (k, T, B), (k, T, N, B) and (k, N, B), built once:
        a sub-problem is then three gathers."""
        if self._pack is None:
            per_tn = [self.share, self.remote, self.rd_w, self.wr_w]  # rw_w: items 2 and 3
            if self.any_remote:
                per_tn += [self.rshare, self.rrd_w, self.rwr_w]
            if self.any_random:
                per_tn += [*self.crw_w]
            per_n = [self.bg_rd, self.bg_wr, *(getattr(self.nc, f) for f in _CURVES)]  # bg: 0, 1
            if self.const_link:
                per_n.append(self.q_link0)
            per_t = [self.cap, self.compute, self.rfrac]
            if self.n_links:
                per_t += [*self.lk_w, *self.lk_r, self.lk_on, *self.lk_curve]
            self._pack = (
                np.stack(np.broadcast_arrays(*per_t)),
                np.stack(np.broadcast_arrays(*per_tn)),
                np.stack(np.broadcast_arrays(*per_n)),
            )
        return self._pack

    def take(self, idx: NDArray[np.int64]) -> _Problem:
        """The sub-problem of batch elements ``idx``."""
        per_t, per_tn, per_n = self._packed()
        per_t, per_tn, per_n = per_t[..., idx], per_tn[..., idx], per_n[..., idx]
        sub = copy.copy(self)
        sub._pack = (per_t, per_tn, per_n)
        sub.cap, sub.compute, sub.rfrac = per_t[:3]
        if self.n_links:
            L = self.n_links
            sub.lk_w, sub.lk_r = per_t[3 : 3 + L], per_t[3 + L : 3 + 2 * L]
            sub.lk_on = per_t[3 + 2 * L]
            sub.lk_curve = list(per_t[4 + 2 * L : 7 + 2 * L])
        sub.share, sub.remote, sub.rd_w, sub.wr_w = per_tn[:4]
        sub.rw_w = per_tn[2:4]
        if self.any_remote:
            sub.rshare, sub.rrd_w, sub.rwr_w = per_tn[4:7]
            sub.rrw_w = per_tn[5:7]
        if self.any_random:
            k0 = 7 if self.any_remote else 4
            sub.crw_w = per_tn[k0 : k0 + 2]
        sub.bg = per_n[:2]
        sub.bg_rd, sub.bg_wr = sub.bg
        k = 2 + len(_CURVES)
        sub.nc = NodeCurves(*per_n[2:k])
        if self.const_link:
            sub.q_link0 = per_n[k]
        sub._derived()
        return sub

    def without_background(self) -> _Problem:
        """The same problem without background (migration) traffic."""
        quiet = copy.copy(self)
        quiet.bg = self.bg * 0.0
        quiet.bg_rd, quiet.bg_wr = quiet.bg
        quiet._pack = None
        return quiet

    def _link_rows(self, q: F64, rows: list[int], sel: slice | list[int]) -> F64:
        """A link direction's delay (N, B) from its link rows' ``q``."""
        if len(rows) == self.N:
            return q
        full = self.q_link0.copy()
        full[sel] = q
        return full

    def evaluate(self, x: F64) -> Ev:
        """Residual, norm, feasibility, latencies and utilisations at throughput ``x`` (T, B),
        and what :meth:`jacobian` needs."""
        nc, N = self.nc, self.N
        rd, wr = lsum(x[None, :, None] * self.rw_w, 1) + self.bg  # (N, B) each
        out = {"x": x, "rd": rd, "wr": wr}
        if self.any_random:
            crd, cwr = lsum(x[None, :, None] * self.crw_w, 1) + self.bg
            out["crd"], out["cwr"] = crd, cwr
            u_mem = mix_utilisation(crd, cwr, nc.mem_read, nc.mem_write, nc.mem_turn)
        else:
            u_mem = mix_utilisation(rd, wr, nc.mem_read, nc.mem_write, nc.mem_turn)
        if self.any_link:
            # the link's two directions queue in series with the memory behind them:
            # reads wait on device-to-host, writes on host-to-device
            u_lr = rd / nc.link_read
            u_lw = wr / nc.link_write
            u = np.concatenate([u_mem, u_lr[self.sel_lr], u_lw[self.sel_lw]])
        else:
            u = u_mem
        q, dq = queue_delay(u, *self.local_curve)  # memory rows, then link rows
        q_mem = q[:N]
        out["dq_mem"] = dq[:N]
        lnode = nc.idle_ns + q_mem  # (N, B) latency of a read probe
        lbar = lsum((self.share * lnode), 1)  # (T, B)
        u_loc = u_mem
        if self.any_link:
            k = N + len(self.rows_lr)
            q_lr = self._link_rows(q[N:k], self.rows_lr, self.sel_lr)
            q_lw = self._link_rows(q[k:], self.rows_lw, self.sel_lw)
            out["dq_lr"], out["dq_lw"] = dq[N:k], dq[k:]
            lnode = lnode + q_lr
            lbar = (
                lbar
                + self.rfrac * lsum((self.share * q_lr), 1)
                + (1 - self.rfrac) * lsum((self.share * q_lw), 1)
            )
            u_loc = np.maximum(u_mem, np.maximum(u_lr, u_lw))
        if self.any_remote:
            rrd, rwr = lsum(x[None, :, None] * self.rrw_w, 1)  # (N, B) each
            u_rem = mix_utilisation(rrd, rwr, nc.rem_read, nc.rem_write, nc.rem_turn)
            qr, out["dqr"] = queue_delay(u_rem, nc.rem_slope_ns, nc.rem_knee_ns, nc.rem_knee_exp)
            out["rrd"], out["rwr"] = rrd, rwr
            lbar = lbar + lsum((self.rshare * (nc.remote_ns + qr)), 1)
            feasible = (lmax(u_loc) < _U_MAX) & (lmax(u_rem) < _U_MAX)
        else:
            u_rem = np.zeros_like(u_loc)
            feasible = lmax(u_loc) < _U_MAX  # u_loc covers the memory and the link
        if self.n_links:
            # the socket links: shared by every tenant's remote traffic (a queue each way)
            u_lk = lsum((x[None] * self.lk_r), 1)  # (L, B)
            # the curve is the same for every tenant: its row 0
            qk, dqk = queue_delay(u_lk, *(c[0] for c in self.lk_curve))
            on = self.lk_on[0]
            qk, dqk = qk * on, dqk * on  # exact zeros where a machine has no link limit
            out["dq_lk"] = dqk
            lbar = lbar + lsum((self.lk_w * qk[:, None]), 0)
            feasible = feasible & (lmax(u_lk) < _U_MAX)
            out["u_lk"] = u_lk
            out["u_lk_max"] = lmax(u_lk)
        else:
            out["u_lk"] = np.zeros((0, *x.shape[1:]))
            out["u_lk_max"] = np.zeros(x.shape[1:])
        denom = self.compute + lbar
        ratio = np.maximum(x, _TINY) * denom / self.capsafe
        resid = np.log(ratio if self.all_active else np.where(self.active, ratio, 1.0))
        out.update(
            lbar=lbar,
            denom=denom,
            resid=resid,
            norm=lmax(np.abs(resid)),
            feasible=feasible,
            lnode=lnode,
            u_loc=u_loc,
            u_rem=u_rem,
        )
        return out

    def jacobian(self, ev: Ev) -> F64:
        """Jacobian (T, T, B) of the residual in log X at the point ``ev`` was evaluated at.

        ``J[t, s] = delta_ts + X_s / denom_t * d Lbar_t / d X_s``, where
        ``d Lbar_t / d X_s = sum_n left_t,n * right_s,n`` over every resource
        (a node row without a link in a direction would add exact zeros: skipped).
        """
        nc, T, N = self.nc, self.T, self.N
        rd, wr = (ev["crd"], ev["cwr"]) if self.any_random else (ev["rd"], ev["wr"])
        tot = np.maximum(rd + wr, _TINY)
        dmr = 1.0 / nc.mem_read + nc.mem_turn * (wr / tot) ** 2
        dmw = 1.0 / nc.mem_write + nc.mem_turn * (rd / tot) ** 2
        sh, dq = self.share, ev["dq_mem"]
        mrd_w, mwr_w = self.crw_w if self.any_random else (self.rd_w, self.wr_w)
        # every node's memory term at once: left and right (T, N, B), products (T, T, N, B)
        mem = (sh * dq)[:, None] * (mrd_w * dmr + mwr_w * dmw)[None]
        terms: list[tuple[F64, F64]] = []
        if self.any_link:
            rf = self.rfrac
            terms += [
                (sh[:, n] * (rf * ev["dq_lr"][i]), self.rd_w[:, n] / nc.link_read[n])
                for i, n in enumerate(self.rows_lr)
            ]
            terms += [
                (sh[:, n] * ((1 - rf) * ev["dq_lw"][i]), self.wr_w[:, n] / nc.link_write[n])
                for i, n in enumerate(self.rows_lw)
            ]
        if self.any_remote:
            rrd, rwr = ev["rrd"], ev["rwr"]
            rtot = np.maximum(rrd + rwr, _TINY)
            drr = 1.0 / nc.rem_read + nc.rem_turn * (rwr / rtot) ** 2
            drw = 1.0 / nc.rem_write + nc.rem_turn * (rrd / rtot) ** 2
            rem = (self.rshare * ev["dqr"])[:, None] * (self.rrd_w * drr + self.rwr_w * drw)[None]
        # outer products added in a fixed order (memory rows, link rows, remote rows,
        # socket links), into one buffer; the first is what adding it to zeros gives
        j = lsum(mem, 2)
        tmp = np.empty_like(j)
        for left, right in terms:
            np.multiply(left[:, None], right[None], out=tmp)
            j += tmp
        if self.any_remote:
            for n in range(N):
                j += rem[:, :, n]
        for k in range(self.n_links):
            np.multiply((self.lk_w[k] * ev["dq_lk"][k])[:, None], self.lk_r[k][None], out=tmp)
            j += tmp
        np.divide(ev["x"][None], np.maximum(ev["denom"], _TINY)[:, None], out=tmp)
        j *= tmp
        if not self.all_active:
            np.copyto(j, 0.0, where=~(self.active[:, None] & self.active[None]))
        diag = np.arange(T)
        j[diag, diag] += 1.0  # each diagonal entry once
        return j


def _rows(rows: list[int]) -> slice | list[int]:
    """An index for ``rows``: a slice (a view, no copy) where they are consecutive."""
    if rows and rows == list(range(rows[0], rows[-1] + 1)):
        return slice(rows[0], rows[-1] + 1)
    return rows


def _solve_small(a: F64, b: F64) -> F64:
    """Solve a[:, :, i] x = b[:, i] for every batch element (Gaussian elimination, batch-last).

    The Jacobian is the identity plus a non-negative matrix with a positive
    diagonal, so elimination without pivoting is safe at these sizes.
    ``a`` is overwritten.
    """
    b = b.copy()
    n = a.shape[0]
    for k in range(n):
        piv = a[k, k]
        piv = np.where(np.abs(piv) < 1e-300, 1e-300, piv)
        if k + 1 < n:  # eliminate column k from every row below at once
            f = a[k + 1 :, k] / piv
            a[k + 1 :, k:] -= f[:, None] * a[k, k:]
            b[k + 1 :] -= f * b[k]
        a[k, k] = piv
    x = np.empty_like(b)
    for k in range(n - 1, -1, -1):
        s = b[k] - lsum((a[k, k + 1 :] * x[k + 1 :]), 0) if k + 1 < n else b[k]
        x[k] = s / a[k, k]
    return x


def _pick(mask: NDArray[np.bool_], new: Ev, old: Ev) -> Ev:
    if mask.all():
        return new
    return {k: np.where(mask, new[k], old[k]) for k in old if k in new}


def _scatter(ev: Ev, idx: NDArray[np.int64], new: Ev) -> Ev:
    """A copy of ``ev`` with batch elements ``idx`` replaced by ``new``'s (one per index)."""
    out = {k: v.copy() for k, v in ev.items()}
    for k, v in out.items():
        v[..., idx] = new[k]
    return out


def _reevaluate(pb: _Problem, ev: Ev, x: F64, mask: NDArray[np.bool_]) -> Ev:
    """``ev`` with the elements in ``mask`` evaluated again at ``x`` (only those are computed)."""
    if not mask.any():
        return ev
    if mask.all():
        return pb.evaluate(x)
    idx = np.flatnonzero(mask)
    return _scatter(ev, idx, pb.take(idx).evaluate(x[:, idx]))


def zero_load_demand(cap: F64, compute: F64, share: F64, remote: F64, nc: NodeCurves) -> F64:
    """Each tenant's throughput (T, B) at idle latencies: its bandwidth demand (0 where ``cap`` is 0).

    ``cap`` (T, B) bytes in flight, ``compute`` (T, B) ns, ``share`` and
    ``remote`` (T, N, B): Little's law with every node at its idle latency.
    """
    lat0 = lsum((share * nc.idle_ns), 1) + lsum((share * remote * nc.remote_ns), 1)
    return np.where(cap > 0, cap / np.maximum(compute + lat0, _TINY), 0.0)


def _zero_load_demand(pb: _Problem) -> F64:
    return np.where(
        pb.active, zero_load_demand(pb.cap, pb.compute, pb.share, pb.remote, pb.nc), 0.0
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
    structure: CurveStructure | None = None,
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
    ``structure`` :meth:`CurveStructure.of` ``nc`` where the caller keeps it.

    Only the elements that need it are evaluated again (a start pulled back,
    a cold start, an infeasible start halved); the others keep their numbers.
    With ``retry``, an element that Newton leaves above the tolerance (deep
    saturation reached from a poor start) is solved again from a cold start
    and, if that fails too, by continuation: the bytes in flight raised in
    stages from 10% to 100%, each stage started from the last one's solution.
    """
    pb = _Problem(cap, compute, rfrac, share, remote, bg_rd, bg_wr, nc, links, random, structure)
    active = pb.active
    cold = np.ones(cap.shape[1], dtype=bool)
    if x0 is not None:
        # Warm start from the last interval's rates (a tenant without one, just started,
        # from its zero-load demand), pulled back below 90% utilisation: Newton is slow
        # from the saturated side of the knee, fast from below.
        x = np.where(active, x0, 0.0)
        new = active & (x <= 0)
        if new.any():
            x = np.where(new, _zero_load_demand(pb), x)
        ev = pb.evaluate(x)
        umax = np.maximum(np.maximum(lmax(ev["u_loc"]), lmax(ev["u_rem"])), ev["u_lk_max"])
        pull = np.minimum(1.0, 0.9 / np.maximum(umax, _TINY))
        # a start that already solves the problem (a steady state: the same placement and
        # rates as the last interval) is kept, however loaded: pulling it back would only
        # cost Newton iterations to climb the knee again
        pull = np.where(ev["feasible"] & (ev["norm"] <= tol), 1.0, pull)
        x = x * pull
        ev = _reevaluate(pb, ev, x, pull < 1.0)
        cold = ~ev["feasible"] | ((x <= 0) & active).any(0)
    if cold.any():
        # cold start: the zero-load demand scaled so that no resource passes 50%
        idx = np.flatnonzero(cold)
        cp = pb if cold.all() else pb.take(idx)
        demand = _zero_load_demand(cp)
        quiet = cp.without_background().evaluate(demand)
        umax = np.maximum(np.maximum(lmax(quiet["u_loc"]), lmax(quiet["u_rem"])), quiet["u_lk_max"])
        xc = np.where(cp.active, demand * np.minimum(1.0, 0.5 / np.maximum(umax, _TINY)), 0.0)
        evc = cp.evaluate(xc)
        if cp is pb:
            x, ev = xc, evc
        else:
            x = x.copy()
            x[:, idx] = xc
            ev = _scatter(ev, idx, evc)
    # Background traffic is capped by the caller; shrink a start that is still infeasible.
    for _ in range(60):
        bad = ~ev["feasible"]
        if not bad.any():
            break
        x = np.where(bad, x * 0.5, x)
        ev = _reevaluate(pb, ev, x, bad)
    z = np.log(np.maximum(x, _TINY))
    iters = np.zeros(cap.shape[1], dtype=np.int64)
    # Newton iterations on the working set of unconverged elements; the set is
    # compacted (gathered into smaller arrays) as elements converge.
    work = np.arange(cap.shape[1])
    sub, sz, sev = pb, z, ev
    for _ in range(max_iter):
        todo = sev["norm"] > tol
        if not todo.any():
            break
        if np.count_nonzero(todo) / todo.size < 0.7:  # todo.mean(), without its overhead
            if sub is pb:
                z, ev = sz, {k: v.copy() for k, v in sev.items()}
            work = work[todo]
            sub = pb.take(work)
            sz = z[:, work]
            sev = {k: v[..., work] for k, v in ev.items()}
            todo = np.ones(work.size, dtype=bool)
        step = -_solve_small(sub.jacobian(sev), sev["resid"])
        step = np.where(sub.active & todo, step, 0.0)
        lam = np.ones_like(sev["norm"])
        pending = todo.copy()
        moved = np.zeros_like(todo)
        few: tuple[NDArray[np.int64], _Problem] | None = None  # backtracking sub-problem
        for _ in range(40):
            if np.count_nonzero(pending) / pending.size > 0.5:
                tz = sz + lam * step
                tev = sub.evaluate(np.where(sub.active, np.exp(tz), 0.0))
                ok = pending & tev["feasible"] & (tev["norm"] < sev["norm"])
                if ok.any():
                    sz = np.where(ok, tz, sz)
                    sev = _pick(ok, tev, sev)
            else:
                # backtracking for a few elements: only those are evaluated again
                idx = np.flatnonzero(pending)
                if few is None or not np.array_equal(few[0], idx):
                    few = (idx, sub.take(idx))
                tz = sz[:, idx] + lam[idx] * step[:, idx]
                tev = few[1].evaluate(np.where(few[1].active, np.exp(tz), 0.0))
                ok_few = tev["feasible"] & (tev["norm"] < sev["norm"][idx])
                ok = np.zeros_like(pending)
                ok[idx] = ok_few
                if ok_few.any():
                    sz = sz.copy()
                    sz[:, idx[ok_few]] = tz[:, ok_few]
                    sev = _scatter(sev, idx[ok_few], {k: v[..., ok_few] for k, v in tev.items()})
            moved |= ok
            pending &= ~ok
            if not pending.any():
                break
            lam = np.where(pending, lam * 0.5, lam)
        iters[work] += moved
        if sub is pb:
            z, ev = sz, sev
        else:
            z[:, work] = sz
            for k, v in sev.items():
                ev[k][..., work] = v
        if not moved.any():
            break  # nothing can improve further (machine precision)
    x = np.where(active, np.exp(z), 0.0)
    sol = Solution(
        throughput=x,
        tenant_latency_ns=ev["lbar"],
        node_latency_ns=ev["lnode"],
        node_util=ev["u_loc"],
        remote_util=ev["u_rem"],
        node_read_gbps=ev["rd"],
        node_write_gbps=ev["wr"],
        residual=ev["norm"],
        iterations=iters,
        link_util=ev["u_lk"],
    )
    if retry and (sol.residual > tol).any():
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
