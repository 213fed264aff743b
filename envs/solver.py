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

Layout: the batch axis is the *last* axis of every array here (``(T, N, B)``
and so on). numpy reduces over a small leading axis of a batch-last array about
30x faster than over a small trailing axis of a batch-first one (measured in
``benchmarks/layout.py``), and the step reduces over tenants and nodes many
times. The public API (:mod:`envs.model`) speaks batch-first.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = ["NodeCurves", "Solution", "lsum", "solve_fixed_point"]

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


def lsum(x: np.ndarray, axis: int | tuple[int, ...]) -> np.ndarray:
    """Sum over leading (non-batch) axes, adding slices one after another.

    ``np.sum`` switches to pairwise summation when the reduced axes are
    contiguous in memory, which is the case for a batch of one: the same
    element would then be summed in another order alone than in a batch.
    Adding slices in a fixed order makes every element's result independent
    of the batch size (batched and single runs agree bit for bit).
    """
    if isinstance(axis, tuple):
        for ax in sorted(axis, reverse=True):
            x = lsum(x, ax)
        return x
    if x.dtype == np.bool_:
        x = x.astype(np.int64)
    pre = (slice(None),) * axis
    n = x.shape[axis]
    if n == 1:
        return x[(*pre, 0)].copy()
    out = np.add(x[(*pre, 0)], x[(*pre, 1)])  # the same as copying slice 0 and adding slice 1
    for i in range(2, n):
        out += x[(*pre, i)]
    return out


def mix_utilisation(rd: F64, wr: F64, r: F64, w: F64, c: F64) -> F64:
    """Utilisation of a resource with peaks r (reads), w (writes) and turnaround c."""
    return rd / r + wr / w + c * rd * wr / np.maximum(rd + wr, _TINY)


def queue_delay(u: F64, slope: F64, knee: F64, e: F64) -> tuple[F64, F64]:
    """Queueing delay (ns) and its derivative at utilisation u < 1."""
    u = np.clip(u, 1e-12, _U_MAX)
    ue = np.exp(e * np.log(u))
    inv = 1.0 / (1.0 - u)
    kq = knee * ue * inv
    return slope * u + kq, slope + kq * (e / u + inv)


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
        like: _Problem | None = None,
    ) -> None:
        self.cap, self.compute, self.nc = cap, compute, nc
        self.active = cap > 0
        self.all_active = bool(self.active.all())
        self.capsafe = np.maximum(cap, _TINY)
        self.share = share
        self.rshare = share * remote  # (T, N, B)
        self.remote = remote
        self.rd_w = share * rfrac[:, None]  # read share per unit throughput
        self.wr_w = share - self.rd_w
        self.rrd_w = self.rd_w * remote
        self.rwr_w = self.wr_w * remote
        self.bg_rd, self.bg_wr = bg_rd, bg_wr
        self.rfrac = rfrac
        self.T, self.N = share.shape[0], share.shape[1]
        # Structure (which terms exist) comes from the whole batch, so that a
        # sub-problem returns the same entries; a term that is absent for an
        # element adds an exact zero to it.
        if like is None:
            self.any_remote = bool(remote.any())
            # Node rows whose link direction is absent (inf) in every element have zero
            # utilisation there: their queueing delay is a constant (computed once below,
            # by the same function) and their Jacobian terms are exactly zero (skipped).
            self.rows_lr = [n for n in range(self.N) if np.isfinite(nc.link_read[n]).any()]
            self.rows_lw = [n for n in range(self.N) if np.isfinite(nc.link_write[n]).any()]
        else:
            self.any_remote = like.any_remote
            self.rows_lr, self.rows_lw = like.rows_lr, like.rows_lw
        self.any_link = bool(self.rows_lr or self.rows_lw)
        if self.any_link:
            self.q_link0 = queue_delay(
                np.zeros_like(nc.slope_ns), nc.slope_ns, nc.knee_ns, nc.knee_exp
            )[0]

    def take(self, idx: NDArray[np.int64]) -> _Problem:
        """The sub-problem of batch elements ``idx``."""
        nc = NodeCurves(**{k: v[..., idx] for k, v in vars(self.nc).items()})
        return _Problem(
            self.cap[:, idx],
            self.compute[:, idx],
            self.rfrac[:, idx],
            self.share[..., idx],
            self.remote[..., idx],
            self.bg_rd[:, idx],
            self.bg_wr[:, idx],
            nc,
            like=self,
        )

    def without_background(self) -> _Problem:
        """The same problem without background (migration) traffic."""
        return _Problem(
            self.cap,
            self.compute,
            self.rfrac,
            self.share,
            self.remote,
            self.bg_rd * 0.0,
            self.bg_wr * 0.0,
            self.nc,
            like=self,
        )

    def _link_queue(self, u: F64, rows: list[int]) -> tuple[F64, F64]:
        """Queueing delay (N, B) of one link direction and its derivative on ``rows`` only."""
        nc = self.nc
        if len(rows) == self.N:
            return queue_delay(u, nc.slope_ns, nc.knee_ns, nc.knee_exp)
        q = self.q_link0.copy()
        if not rows:
            return q, q[:0]
        qr, dqr = queue_delay(u[rows], nc.slope_ns[rows], nc.knee_ns[rows], nc.knee_exp[rows])
        q[rows] = qr
        return q, dqr

    def evaluate(self, x: F64) -> dict[str, F64]:
        nc = self.nc
        xs = x[:, None]
        rd = lsum((xs * self.rd_w), 0) + self.bg_rd
        wr = lsum((xs * self.wr_w), 0) + self.bg_wr
        u_mem = mix_utilisation(rd, wr, nc.mem_read, nc.mem_write, nc.mem_turn)
        q_mem, dq_mem = queue_delay(u_mem, nc.slope_ns, nc.knee_ns, nc.knee_exp)
        lnode = nc.idle_ns + q_mem  # (N, B) latency of a read probe
        lbar = lsum((self.share * lnode), 1)  # (T, B)
        u_loc = u_mem
        feasible = (u_mem < _U_MAX).all(0)
        out = {"x": x, "rd": rd, "wr": wr, "dq_mem": dq_mem}
        if self.any_link:
            # the link's two directions queue in series with the memory behind them:
            # reads wait on device-to-host, writes on host-to-device
            u_lr = rd / nc.link_read
            u_lw = wr / nc.link_write
            q_lr, out["dq_lr"] = self._link_queue(u_lr, self.rows_lr)
            q_lw, out["dq_lw"] = self._link_queue(u_lw, self.rows_lw)
            lnode = lnode + q_lr
            lbar = (
                lbar
                + self.rfrac * lsum((self.share * q_lr), 1)
                + (1 - self.rfrac) * lsum((self.share * q_lw), 1)
            )
            u_loc = np.maximum(u_mem, np.maximum(u_lr, u_lw))
            feasible &= (u_lr < _U_MAX).all(0) & (u_lw < _U_MAX).all(0)
        if self.any_remote:
            rrd = lsum((xs * self.rrd_w), 0)
            rwr = lsum((xs * self.rwr_w), 0)
            u_rem = mix_utilisation(rrd, rwr, nc.rem_read, nc.rem_write, nc.rem_turn)
            feasible &= (u_rem < _U_MAX).all(0)
            qr, out["dqr"] = queue_delay(u_rem, nc.rem_slope_ns, nc.rem_knee_ns, nc.rem_knee_exp)
            out["rrd"], out["rwr"] = rrd, rwr
            lbar = lbar + lsum((self.rshare * (nc.remote_ns + qr)), 1)
        else:
            u_rem = np.zeros_like(u_loc)
        denom = self.compute + lbar
        resid = np.log(np.where(self.active, np.maximum(x, _TINY) * denom / self.capsafe, 1.0))
        out.update(
            lbar=lbar,
            denom=denom,
            resid=resid,
            norm=np.abs(resid).max(0),
            feasible=feasible,
            lnode=lnode,
            u_loc=u_loc,
            u_rem=u_rem,
        )
        return out

    def jacobian(self, ev: dict[str, F64]) -> F64:
        """Jacobian (T, T, B) of the residual in log X at the point ``ev`` was evaluated at.

        ``J[t, s] = delta_ts + X_s / denom_t * d Lbar_t / d X_s``, where
        ``d Lbar_t / d X_s = sum_n left_t,n * right_s,n`` over every resource.
        """
        nc, T, N = self.nc, self.T, self.N
        rd, wr = ev["rd"], ev["wr"]
        tot = np.maximum(rd + wr, _TINY)
        dmr = 1.0 / nc.mem_read + nc.mem_turn * (wr / tot) ** 2
        dmw = 1.0 / nc.mem_write + nc.mem_turn * (rd / tot) ** 2
        sh, dq = self.share, ev["dq_mem"]
        terms = [
            (sh[:, n] * dq[n], self.rd_w[:, n] * dmr[n] + self.wr_w[:, n] * dmw[n])
            for n in range(N)
        ]
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
            terms += [
                (self.rshare[:, n] * ev["dqr"][n], self.rrd_w[:, n] * drr[n] + self.rwr_w[:, n] * drw[n])
                for n in range(N)
            ]
        # outer products added in a fixed order, into one buffer
        j = terms[0][0][:, None] * terms[0][1][None]
        tmp = np.empty_like(j)
        for left, right in terms[1:]:
            np.multiply(left[:, None], right[None], out=tmp)
            j += tmp
        np.divide(ev["x"][None], np.maximum(ev["denom"], _TINY)[:, None], out=tmp)
        j *= tmp
        if not self.all_active:
            np.copyto(j, 0.0, where=~(self.active[:, None] & self.active[None]))
        for t in range(T):
            j[t, t] += 1.0
        return j


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
        for i in range(k + 1, n):
            f = a[i, k] / piv
            a[i, k:] -= f * a[k, k:]
            b[i] -= f * b[k]
        a[k, k] = piv
    x = np.empty_like(b)
    for k in range(n - 1, -1, -1):
        s = b[k] - lsum((a[k, k + 1 :] * x[k + 1 :]), 0) if k + 1 < n else b[k]
        x[k] = s / a[k, k]
    return x


def _pick(mask: NDArray[np.bool_], new: dict[str, F64], old: dict[str, F64]) -> dict[str, F64]:
    if mask.all():
        return new
    return {k: np.where(mask, new[k], old[k]) for k in old if k in new}


def _reevaluate(pb: _Problem, ev: dict[str, F64], x: F64, mask: NDArray[np.bool_]) -> dict[str, F64]:
    """``ev`` with the elements in ``mask`` evaluated again at ``x`` (only those are computed)."""
    if not mask.any():
        return ev
    if mask.all():
        return pb.evaluate(x)
    idx = np.flatnonzero(mask)
    new = pb.take(idx).evaluate(x[:, idx])
    out = {k: v.copy() for k, v in ev.items()}
    for k, v in new.items():
        out[k][..., idx] = v
    return out


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
) -> Solution:
    """Solve every batch element's fixed point (arrays batch-last).

    ``cap`` (T, B): bytes in flight ``64*threads*mlp`` (0 for an absent
    tenant); ``compute`` (T, B) ns between misses; ``rfrac`` (T, B) read
    fraction; ``share`` (T, N, B) access shares (sum over N is 1);
    ``remote`` (T, N, B) 1 where the node is on another socket;
    ``bg_rd``/``bg_wr`` (N, B) background traffic in GB/s (migrations);
    ``x0`` (T, B) an optional warm start (used where it is feasible).

    Only the elements that need it are evaluated again (a start pulled back,
    a cold start, an infeasible start halved); the others keep their numbers.
    """
    pb = _Problem(cap, compute, rfrac, share, remote, bg_rd, bg_wr, nc)
    active = pb.active
    cold = np.ones(cap.shape[1], dtype=bool)
    if x0 is not None:
        # Warm start from the last interval's rates, pulled back below 90% utilisation:
        # Newton is slow from the saturated side of the knee, fast from below.
        x = np.where(active, x0, 0.0)
        ev = pb.evaluate(x)
        umax = np.maximum(ev["u_loc"].max(0), ev["u_rem"].max(0))
        pull = np.minimum(1.0, 0.9 / np.maximum(umax, _TINY))
        x = x * pull
        ev = _reevaluate(pb, ev, x, pull < 1.0)
        cold = ~ev["feasible"] | ((x <= 0) & active).any(0)
    if cold.any():
        # cold start: the zero-load demand scaled so that no resource passes 50%
        idx = np.flatnonzero(cold)
        cp = pb if cold.all() else pb.take(idx)
        lat0 = lsum((cp.share * cp.nc.idle_ns), 1) + lsum(
            (cp.share * cp.remote * cp.nc.remote_ns), 1
        )
        demand = np.where(cp.active, cp.cap / np.maximum(cp.compute + lat0, _TINY), 0.0)
        quiet = cp.without_background().evaluate(demand)
        umax = np.maximum(quiet["u_loc"].max(0), quiet["u_rem"].max(0))
        xc = np.where(cp.active, demand * np.minimum(1.0, 0.5 / np.maximum(umax, _TINY)), 0.0)
        evc = cp.evaluate(xc)
        if cp is pb:
            x, ev = xc, evc
        else:
            x = x.copy()
            x[:, idx] = xc
            ev = {k: v.copy() for k, v in ev.items()}
            for k, v in evc.items():
                ev[k][..., idx] = v
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
        if todo.mean() < 0.7:
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
        for _ in range(40):
            tz = sz + lam * step
            tev = sub.evaluate(np.where(sub.active, np.exp(tz), 0.0))
            ok = pending & tev["feasible"] & (tev["norm"] < sev["norm"])
            if ok.any():
                sz = np.where(ok, tz, sz)
                sev = _pick(ok, tev, sev)
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
    return Solution(
        throughput=x,
        tenant_latency_ns=ev["lbar"],
        node_latency_ns=ev["lnode"],
        node_util=ev["u_loc"],
        remote_util=ev["u_rem"],
        node_read_gbps=ev["rd"],
        node_write_gbps=ev["wr"],
        residual=ev["norm"],
        iterations=iters,
    )
