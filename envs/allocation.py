"""Phases 1 and 2 of an interval compiled: who runs, in which phase, under which cgroup
limits (``tenants``); for the pages, those beyond a bucket's size and churned ones freed
(``frees``), then the missing ones allocated by the interleave weights, local-first
fallback, memory.high (``allocate``). The mechanisms: :func:`envs.model.tenant_phase`
and :func:`envs.model.allocate_pages`, which drive these kernels.

As in :mod:`envs.reclaim`, the batch runs ``_W`` elements at a time in the lanes of
small arrays, every loop over lanes innermost over 1-D views, each lane on its own
element's numbers, every sum in the order the numpy code took it."""

from __future__ import annotations

import numpy as np

from envs.gather import phase_now, running
from envs.jit import inline, jit, np_clip, np_maximum
from envs.kernel import dram_high_in_force, low_in_force, total_high_in_force
from envs.placement import dram_sum, node_pages, node_sum

_W = 256  # lanes: batch elements side by side


@jit
def tenants(
    phase_at, now, dt, present, start_s, stop_s, grow_tab, ws_tab, jit_ws, churn_tab,
    local_tab, high_tab, low_tab, memcg_mode, toptier, widths,
    phase, active, ws, bucket_size, churn_keep, local, loc1h, high, low, tot_high,
):  # fmt: skip  # pragma: no cover (compiled)
    """Who runs in the interval starting at ``now`` (B,) of length ``dt``, in which phase,
    how big each bucket should be and the cgroup limits in force
    (:func:`envs.model.tenant_phase`, :func:`envs.model.memcg_limits`).

    Tables (T, P, B) per tenant slot and phase: ``phase_at`` (its start), ``grow_tab``,
    ``ws_tab``, ``churn_tab``, ``local_tab``, ``high_tab``, ``low_tab``; (T, B):
    ``present``, ``start_s``, ``stop_s``, ``jit_ws`` (the working set's jitter); (B,):
    ``memcg_mode`` (:data:`envs.kernel.MEMCG_TOTAL` ...), ``toptier`` (the DRAM share);
    ``widths`` (K,) each bucket's share of the working set. Written: ``phase``,
    ``active``, ``ws``, ``churn_keep`` (the share churn leaves), ``local``, ``high``,
    ``low``, ``tot_high`` (T, B), ``bucket_size`` (T, K, B), ``loc1h`` (T, N, B)."""
    T, B = phase_at.shape[0], phase_at.shape[2]
    K, N = widths.shape[0], loc1h.shape[1]
    for t in range(T):
        ph, on, w, ck, loc = phase[t], active[t], ws[t], churn_keep[t], local[t]
        pr, st, sp, jw = present[t], start_s[t], stop_s[t], jit_ws[t]
        for b in range(B):
            ph[b] = phase_now(phase_at, t, b, now[b])
            on[b] = running(pr[b], st[b], sp[b], now[b])
            x = ws_tab[t, ph[b], b] * jw[b] + grow_tab[t, ph[b], b] * np_maximum(
                now[b] + dt[b] - phase_at[t, ph[b], b], 0.0
            )
            w[b] = np_maximum(x, 1e-6) if on[b] else 0.0
            ck[b] = 1.0 - np_clip(churn_tab[t, ph[b], b] * dt[b], 0.0, 1.0)
            loc[b] = local_tab[t, ph[b], b]
        for k in range(K):
            bs, wk = bucket_size[t, k], widths[k]
            for b in range(B):
                bs[b] = w[b] * wk
        for n in range(N):
            oh = loc1h[t, n]
            for b in range(B):
                oh[b] = 1.0 if loc[b] == n else 0.0
        hi, lo, th = high[t], low[t], tot_high[t]
        for b in range(B):
            h, mode = high_tab[t, ph[b], b], memcg_mode[b]
            hi[b] = dram_high_in_force(h, mode, toptier[b])
            lo[b] = low_in_force(low_tab[t, ph[b], b], mode, toptier[b])
            th[b] = total_high_in_force(h, mode)


@jit
def frees(place, bucket_size, churn_keep, out):  # pragma: no cover (compiled)
    """``place`` (T, K, N, B) with each bucket cut to its size (T, K, B) and the share
    ``churn_keep`` (T, B) of it kept, written to ``out`` (``place`` is not modified)."""
    T, K, N, B = place.shape
    keep = np.empty(_W)
    for b0 in range(0, B, _W):
        nb = min(_W, B - b0)
        e = b0 + nb
        for t in range(T):
            ck = churn_keep[t, b0:e]
            for k in range(K):
                size = bucket_size[t, k, b0:e]
                for n in range(N):
                    src = place[t, k, n, b0:e]
                    for i in range(nb):
                        keep[i] = src[i] if n == 0 else keep[i] + src[i]
                for i in range(nb):  # the share kept: the size over the pages where too big
                    keep[i] = min(size[i] / max(keep[i], 1e-300), 1.0) * ck[i]
                for n in range(N):
                    src, dst = place[t, k, n, b0:e], out[t, k, n, b0:e]
                    for i in range(nb):
                        dst[i] = src[i] * keep[i]


@jit
def weights_in_force(
    aw, loc1h, use_policy, policy_on, policy_w, active, prev, out
):  # fmt: skip  # pragma: no cover (compiled)
    """Each tenant's interleave weights in force (T, N, B): where it runs (``active``
    (T, B)), the action's weights ``aw`` (T, N, B) as fractions of their sum; all-zero
    weights mean its mempolicy's own weights ``policy_w`` (T, N, B) where it has some
    (``use_policy`` and ``policy_on`` (T, 1, B)), else local-first (``loc1h`` (T, N, B),
    the one-hot of its local DRAM node). Where it does not run, the weights before
    (``prev``). The sum adds the nodes in order, as :func:`envs.solver.lsum` does."""
    T, N, B = aw.shape
    tot = np.empty(_W)
    for b0 in range(0, B, _W):
        nb = min(_W, B - b0)
        e = b0 + nb
        for t in range(T):
            node_sum(aw, t, b0, nb, tot)
            run = active[t, b0:e]
            for n in range(N):
                a, oh, pv, o = aw[t, n, b0:e], loc1h[t, n, b0:e], prev[t, n, b0:e], out[t, n, b0:e]
                for i in range(nb):
                    if not run[i]:
                        o[i] = pv[i]
                    elif tot[i] > 0:
                        o[i] = a[i] / tot[i]
                    elif use_policy and policy_on[t, 0, b0 + i]:
                        o[i] = policy_w[t, n, b0 + i]
                    else:
                        o[i] = oh[i]


@inline
def _grant(req, free, room, is_cxl, b0, nb, lanes, out):  # pragma: no cover (compiled)
    """What requests ``req`` (T, N, W) get (``out``, added to): each tenant's DRAM
    requests scaled to its memory.high ``room`` (T, W), then each node's requests to its
    ``free`` memory (N, W), tenants competing for a node in proportion to their
    requests. ``req`` is scaled in place; ``lanes`` (2, W): scratch."""
    T, N, _ = req.shape
    dram_req, col = lanes[0], lanes[1]
    e = b0 + nb
    for t in range(T):
        dram_sum(req, t, 0, is_cxl, b0, nb, dram_req)
        rm = room[t]
        for i in range(nb):  # the memory.high scale (in dram_req from here on)
            dram_req[i] = min(1.0, rm[i] / max(dram_req[i], 1e-300))
        for n in range(N):
            rq, cx = req[t, n], is_cxl[n, b0:e]
            for i in range(nb):
                rq[i] = rq[i] if cx[i] else rq[i] * dram_req[i]
    for n in range(N):
        for t in range(T):
            rq = req[t, n]
            for i in range(nb):
                col[i] = rq[i] if t == 0 else col[i] + rq[i]
        fr = free[n]
        for i in range(nb):  # the node's share (in col from here on)
            col[i] = min(1.0, max(fr[i], 0.0) / max(col[i], 1e-300))
        for t in range(T):
            rq, o = req[t, n], out[t, n]
            for i in range(nb):
                o[i] = o[i] + rq[i] * col[i]


@jit
def allocate(  # pragma: no cover (compiled)
    place, bucket_size, weights, high, is_cxl, capacity, wm_low, wm_min, fallback,
    fresh, charged,
):  # fmt: skip
    """Each bucket's missing GiB (its size less its pages) allocated: ``charged`` (T, B)
    what each tenant asks for, ``fresh`` (T, K, N, B) the pages it gets, by its
    ``weights`` (T, N, B) into free memory above each node's LOW watermark, then what
    is left in its ``fallback`` order (T, N, B node indices, -1: none; above LOW, then
    above MIN), its DRAM under ``high`` (T, B); written, and added to ``place``."""
    T, K, N, B = place.shape
    deficit, tenant_node = np.empty((T, K, _W)), np.empty((T, N, _W))
    got, req = np.empty((T, N, _W)), np.empty((T, N, _W))
    room0, room, left = np.empty((T, _W)), np.empty((T, _W)), np.empty((T, _W))
    used, free = np.empty((N, _W)), np.empty((N, _W))
    lanes = np.empty((2, _W))
    for b0 in range(0, B, _W):
        nb = min(_W, B - b0)
        e = b0 + nb
        for t in range(T):  # each bucket's deficit and the tenant's pages per node
            need = charged[t, b0:e]
            for k in range(K):
                d, size = deficit[t, k], bucket_size[t, k, b0:e]
                for n in range(N):
                    src = place[t, k, n, b0:e]
                    for i in range(nb):
                        d[i] = src[i] if n == 0 else d[i] + src[i]
                for i in range(nb):
                    d[i] = max(size[i] - d[i], 0.0)
                    need[i] = d[i] if k == 0 else need[i] + d[i]
            for n in range(N):
                node_pages(place, t, n, b0, nb, tenant_node[t, n])
        for n in range(N):
            u = used[n]
            for t in range(T):
                tn = tenant_node[t, n]
                for i in range(nb):
                    u[i] = tn[i] if t == 0 else u[i] + tn[i]
        for t in range(T):
            r0, hi = room0[t], high[t, b0:e]
            dram_sum(tenant_node, t, 0, is_cxl, b0, nb, r0)
            for i in range(nb):
                r0[i] = max(hi[i] - r0[i], 0.0)
        # first by the weights, above LOW
        for t in range(T):
            need = charged[t, b0:e]
            for n in range(N):
                rq, w, g = req[t, n], weights[t, n, b0:e], got[t, n]
                for i in range(nb):
                    rq[i] = need[i] * w[i]
                    g[i] = 0.0
        for n in range(N):
            fr, cap, u, wl = free[n], capacity[n, b0:e], used[n], wm_low[n, b0:e]
            for i in range(nb):
                fr[i] = cap[i] - u[i] - wl[i]
        _grant(req, free, room0, is_cxl, b0, nb, lanes, got)
        # then what is left in the fallback order, above LOW, then above MIN
        done = False
        for stage in range(2):
            mark = wm_low if stage == 0 else wm_min
            for r in range(N):
                any_left = False
                for t in range(T):
                    lt, need = left[t], charged[t, b0:e]
                    for n in range(N):
                        g = got[t, n]
                        for i in range(nb):
                            lt[i] = g[i] if n == 0 else lt[i] + g[i]
                    for i in range(nb):
                        x = need[i] - lt[i]
                        lt[i] = x if x > 1e-12 else 0.0  # per element: batching cannot change it
                        any_left = any_left or lt[i] != 0.0
                if not any_left:
                    done = True
                    break
                for t in range(T):
                    rm, r0, lt, fb = room[t], room0[t], left[t], fallback[t, r, b0:e]
                    dram_sum(got, t, 0, is_cxl, b0, nb, rm)
                    for i in range(nb):
                        rm[i] = r0[i] - rm[i]
                    for n in range(N):
                        rq = req[t, n]
                        for i in range(nb):
                            rq[i] = lt[i] * (1.0 if fb[i] == n else 0.0)
                for n in range(N):
                    fr, cap, u, mk = free[n], capacity[n, b0:e], used[n], mark[n, b0:e]
                    for t in range(T):
                        g = got[t, n]
                        for i in range(nb):
                            lanes[0, i] = g[i] if t == 0 else lanes[0, i] + g[i]
                    for i in range(nb):
                        fr[i] = cap[i] - u[i] - lanes[0, i] - mk[i]
                _grant(req, free, room, is_cxl, b0, nb, lanes, got)
            if done:
                break
        # the pages got, spread over the buckets by their deficits
        for t in range(T):
            need = charged[t, b0:e]
            for k in range(K):
                d = deficit[t, k]
                for i in range(nb):
                    d[i] = d[i] / max(need[i], 1e-300)  # the bucket's share (in deficit)
                for n in range(N):
                    g, f, pl = got[t, n], fresh[t, k, n, b0:e], place[t, k, n, b0:e]
                    for i in range(nb):
                        f[i] = g[i] * d[i]
                        pl[i] = pl[i] + f[i]
