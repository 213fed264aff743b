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
    out = x[(*pre, 0)].copy()
    for i in range(1, x.shape[axis]):
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
    """One batch of fixed-point problems; arrays batch-last."""

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
    ) -> None:
        self.cap, self.compute, self.nc = cap, compute, nc
        self.active = cap > 0
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
        self.T = cap.shape[0]
        self.any_remote = bool(remote.any())
        self.any_link = bool(np.isfinite(nc.link_read).any() or np.isfinite(nc.link_write).any())

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
        )

    def evaluate(self, x: F64, jac: bool) -> dict[str, F64]:
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
        if self.any_link:
            # the link's two directions queue in series with the memory behind them:
            # reads wait on device-to-host, writes on host-to-device
            u_lr = rd / nc.link_read
            u_lw = wr / nc.link_write
            q_lr, dq_lr = queue_delay(u_lr, nc.slope_ns, nc.knee_ns, nc.knee_exp)
            q_lw, dq_lw = queue_delay(u_lw, nc.slope_ns, nc.knee_ns, nc.knee_exp)
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
            qr, dqr = queue_delay(u_rem, nc.rem_slope_ns, nc.rem_knee_ns, nc.rem_knee_exp)
            lbar = lbar + lsum((self.rshare * (nc.remote_ns + qr)), 1)
        else:
            u_rem = np.zeros_like(u_loc)
        denom = self.compute + lbar
        resid = np.log(np.where(self.active, np.maximum(x, _TINY) * denom / self.capsafe, 1.0))
        out = {
            "lbar": lbar,
            "resid": resid,
            "norm": np.abs(resid).max(0),
            "feasible": feasible,
            "lnode": lnode,
            "u_loc": u_loc,
            "u_rem": u_rem,
            "rd": rd,
            "wr": wr,
        }
        if jac:
            # J[t, s] = delta_ts + X_s / denom_t * d Lbar_t / d X_s, where
            # d Lbar_t / d X_s = sum_n (left_t,n * right_s,n) over every resource
            tot = np.maximum(rd + wr, _TINY)
            dmr = 1.0 / nc.mem_read + nc.mem_turn * (wr / tot) ** 2
            dmw = 1.0 / nc.mem_write + nc.mem_turn * (rd / tot) ** 2
            pairs = [(self.share * dq_mem, self.rd_w * dmr + self.wr_w * dmw)]
            if self.any_link:
                rf = self.rfrac[:, None]
                pairs.append((self.share * (rf * dq_lr), self.rd_w / nc.link_read))
                pairs.append((self.share * ((1 - rf) * dq_lw), self.wr_w / nc.link_write))
            if self.any_remote:
                rtot = np.maximum(rrd + rwr, _TINY)
                drr = 1.0 / nc.rem_read + nc.rem_turn * (rwr / rtot) ** 2
                drw = 1.0 / nc.rem_write + nc.rem_turn * (rrd / rtot) ** 2
                pairs.append((self.rshare * dqr, self.rrd_w * drr + self.rwr_w * drw))
            dl = np.zeros((self.T, self.T, x.shape[1]))
            for left, right in pairs:
                for n in range(left.shape[1]):
                    dl += left[:, None, n] * right[None, :, n]
            j = dl * (x[None] / np.maximum(denom, _TINY)[:, None])
            act = self.active[:, None] & self.active[None]
            j = np.where(act, j, 0.0)
            j += np.eye(self.T)[:, :, None]
            out["jac"] = j
        return out


def _solve_small(a: F64, b: F64) -> F64:
    """Solve a[:, :, i] x = b[:, i] for every batch element (Gaussian elimination, batch-last).

    The Jacobian is the identity plus a non-negative matrix with a positive
    diagonal, so elimination without pivoting is safe at these sizes.
    """
    a = a.copy()
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
    """
    pb = _Problem(cap, compute, rfrac, share, remote, bg_rd, bg_wr, nc)
    active = pb.active
    cold = np.ones(cap.shape[1], dtype=bool)
    if x0 is not None:
        # Warm start from the last interval's rates, pulled back below 90% utilisation:
        # Newton is slow from the saturated side of the knee, fast from below.
        x = np.where(active, x0, 0.0)
        ev = pb.evaluate(x, False)
        umax = np.maximum(ev["u_loc"].max(0), ev["u_rem"].max(0))
        x = x * np.minimum(1.0, 0.9 / np.maximum(umax, _TINY))
        ev = pb.evaluate(x, True)
        cold = ~ev["feasible"] | ((x <= 0) & active).any(0)
    if cold.any():
        # cold start: the zero-load demand scaled so that no resource passes 50%
        lat0 = lsum((share * nc.idle_ns), 1) + lsum((share * remote * nc.remote_ns), 1)
        demand = np.where(active, cap / np.maximum(compute + lat0, _TINY), 0.0)
        quiet = _Problem(cap, compute, rfrac, share, remote, bg_rd * 0.0, bg_wr * 0.0, nc).evaluate(
            demand, False
        )
        umax = np.maximum(quiet["u_loc"].max(0), quiet["u_rem"].max(0))
        xc = np.where(active, demand * np.minimum(1.0, 0.5 / np.maximum(umax, _TINY)), 0.0)
        evc = pb.evaluate(xc, True)
        if x0 is None:
            x, ev = xc, evc
        else:
            x = np.where(cold, xc, x)
            ev = {k: np.where(cold, evc[k], ev[k]) for k in ev}
    # Background traffic is capped by the caller; shrink a start that is still infeasible.
    for _ in range(60):
        bad = ~ev["feasible"]
        if not bad.any():
            break
        x = np.where(bad, x * 0.5, x)
        ev = pb.evaluate(x, True)
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
        step = -_solve_small(sev["jac"], sev["resid"])
        step = np.where(sub.active & todo, step, 0.0)
        lam = np.ones_like(sev["norm"])
        pending = todo.copy()
        moved = np.zeros_like(todo)
        for _ in range(40):
            tz = sz + lam * step
            tev = sub.evaluate(np.where(sub.active, np.exp(tz), 0.0), True)
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
