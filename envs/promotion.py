"""Phases 3 and 5 of an interval compiled: the NUMA-balancing scanner's promotion
candidates and their promotion (the mechanisms: :func:`envs.model.promotion_candidates`
and :func:`envs.model.promote`, which drive these kernels).

As in :mod:`envs.reclaim`, the batch runs ``_W`` elements at a time in the lanes of
small arrays, every loop over lanes innermost over 1-D views, each lane on its own
element's numbers in the order the mechanism gives. The hint-fault chance is
:func:`envs.model.access_probability`, whose float32 tanh is numpy's: the phase is
:func:`accesses` (the placement's sums, each bucket's access rate, the tanh's
arguments) and :func:`pick` (the candidates, the room they need), with numpy's tanh,
the scanner's noise and its coverage between them.

Arrays are batch-last, as in :mod:`envs.model`.
"""

from __future__ import annotations

import numpy as np

from envs.jit import inline, jit, np_clip, np_maximum, np_minimum, np_mod
from envs.kernel import (
    GIB,
    LINE_BYTES,
    PAGES_PER_GIB,
    pgdat_free_space_enough,
    scan_max_of,
    scan_min_of,
    scan_period_after,
    threshold_after_period,
)
from envs.placement import dram_sum, node_pages
from envs.reclaim import exposure, from_tanh, migration_free_gib, tanh_arg

_W = 256  # lanes: batch elements side by side
LINES_PER_GB = 1e9 / LINE_BYTES


@inline
def _placement_sums(place, is_cxl, b0, nb, tenant_node, used, dram_use):  # pragma: no cover
    """Each tenant's GiB per node (``tenant_node`` (T, N, B)), each node's (``used``
    (N, B)) and each tenant's on DRAM (``dram_use`` (T, B)), elements ``b0 ..``."""
    T, N = place.shape[0], place.shape[2]
    e = b0 + nb
    for t in range(T):
        for n in range(N):
            node_pages(place, t, n, b0, nb, tenant_node[t, n, b0:e])
        dram_sum(tenant_node, t, b0, is_cxl, b0, nb, dram_use[t, b0:e])
    for n in range(N):
        u, src = used[n, b0:e], tenant_node[0, n, b0:e]
        for i in range(nb):
            u[i] = src[i]
        for t in range(1, T):
            src = tenant_node[t, n, b0:e]
            for i in range(nb):
                u[i] = u[i] + src[i]


@jit
def accesses(  # pragma: no cover (compiled)
    place, is_cxl, capacity, wm_promo, access_share, phase, active, local, throughput,
    solo_gbps, bucket_size, threshold_ms, scan_period_s, touch_lines, passes,
    tenant_node, used, dram_use, access_rate, passes_t, plentiful, h,
):  # fmt: skip
    """The placement's sums (``tenant_node``, ``used``, ``dram_use``), each bucket's
    references per page per second (``access_rate`` (T, K, B): its line accesses per
    page per second over the tenant's ``touch_lines``), whether each tenant's references
    are periodic (``passes_t`` (T, B), from ``passes`` (T, P, B)), whether each node has
    plenty of free memory (``plentiful`` (N, B)) and the tanh's arguments of the chance
    of a hint fault within the scan window (``h`` (T, K, B) float32,
    :func:`envs.reclaim.exposure`), written."""
    T, K, N, B = place.shape
    lines, window = np.empty((T, _W)), np.empty((T, _W))
    for b0 in range(0, B, _W):
        nb = min(_W, B - b0)
        e = b0 + nb
        _placement_sums(place, is_cxl, b0, nb, tenant_node, used, dram_use)
        for n in range(N):
            cap, u, wm, pl = capacity[n, b0:e], used[n, b0:e], wm_promo[n, b0:e], plentiful[n, b0:e]
            for i in range(nb):
                pl[i] = pgdat_free_space_enough(cap[i] - u[i], wm[i], cap[i])
        for t in range(T):
            ph, on, loc, x = phase[t, b0:e], active[t, b0:e], local[t, b0:e], throughput[t, b0:e]
            ln, win, ps = lines[t], window[t], passes_t[t, b0:e]
            for i in range(nb):
                b = b0 + i
                # last interval's throughput; in a tenant's first, its throughput alone;
                # as references: line accesses over the lines one reference reads
                gbps = x[i] if x[i] > 0 else solo_gbps[t, ph[i], b]
                ln[i] = (gbps if on[i] else 0.0) * LINES_PER_GB / touch_lines[t, ph[i], b]
                ps[i] = passes[t, ph[i], b]
                n = loc[i]
                win[i] = scan_period_s[b] if plentiful[n, b] else threshold_ms[n, b] / 1000.0
            for k in range(K):
                size, rate, hh = bucket_size[t, k, b0:e], access_rate[t, k, b0:e], h[t, k, b0:e]
                for i in range(nb):
                    share = access_share[t, ph[i], k, b0 + i]
                    r = ln[i] * share / max(size[i] * PAGES_PER_GIB, 1.0)
                    rate[i] = r
                    hh[i] = tanh_arg(exposure(r * win[i], ps[i]))


@jit
def pick(  # pragma: no cover (compiled)
    th, place, is_cxl, cxl_nodes, active_only, noise, scanned, throttle, high, dram_use,
    local, used, capacity, wm_high, plentiful, rate_mbps, dt,
    cand, tscale, per_target, want, need_room,
):  # fmt: skip
    """The candidates on each CXL node ``cxl_nodes[j]`` (``cand[j]`` (T, K, B) GiB), the
    share of them each tenant may promote (``tscale`` (T, B)), the candidates per target
    DRAM node (``per_target``), what promotion would move (``want``) and the room kswapd
    must make for it (``need_room``) (N, B), written. ``th``: numpy's tanh of
    :func:`accesses`'s ``h``; ``noise`` and ``scanned`` (T, B): the scanner's sampling
    noise and the share of each working set it covered; ``throttle`` (T, B) the memcg
    promotion throttle, or (T, 0) for none anywhere."""
    T, K, N, B = place.shape
    C = cxl_nodes.shape[0]
    pk, ct = np.empty((K, _W)), np.empty((T, _W))
    rows = np.empty(_W)
    for b0 in range(0, B, _W):
        nb = min(_W, B - b0)
        e = b0 + nb
        squared = active_only[b0:e]
        for t in range(T):
            nz, sc = noise[t, b0:e], scanned[t, b0:e]
            for k in range(K):
                tk, p_ = th[t, k, b0:e], pk[k]
                for i in range(nb):
                    detect = from_tanh(tk[i])
                    detect = detect * detect if squared[i] else detect
                    p_[i] = min(max(detect * nz[i], 0.0), 1.0) * sc[i]
            c_t = ct[t]
            for i in range(nb):
                c_t[i] = 0.0
            for j in range(C):
                n = cxl_nodes[j]
                cx = is_cxl[n, b0:e]
                for k in range(K):  # the candidates, and each tenant's sum of them
                    src, dst, p_ = place[t, k, n, b0:e], cand[j, t, k, b0:e], pk[k]
                    for i in range(nb):
                        dst[i] = src[i] * (p_[i] if cx[i] else 0.0)
                        rows[i] = dst[i] if k == 0 else rows[i] + dst[i]
                for i in range(nb):
                    c_t[i] = c_t[i] + rows[i]
            hi, du, ts = high[t, b0:e], dram_use[t, b0:e], tscale[t, b0:e]
            if throttle.shape[1] > 0:  # the memcg throttle scales the candidates and the share
                thr = throttle[t, b0:e]
                for i in range(nb):
                    c = c_t[i] * thr[i]
                    room = max(hi[i] - du[i], 0.0)
                    ts[i] = thr[i] * min(1.0, room / max(c, 1e-300))
                    c_t[i] = min(c, room)
            else:
                for i in range(nb):
                    room = max(hi[i] - du[i], 0.0)
                    ts[i] = min(1.0, room / max(c_t[i], 1e-300))
                    c_t[i] = min(c_t[i], room)
        for n in range(N):
            pt, loc = per_target[n, b0:e], local[0, b0:e]
            c0 = ct[0]
            for i in range(nb):
                pt[i] = c0[i] * (1.0 if loc[i] == n else 0.0)
            for t in range(1, T):
                c_t, loc = ct[t], local[t, b0:e]
                for i in range(nb):
                    pt[i] = pt[i] + c_t[i] * (1.0 if loc[i] == n else 0.0)
            w, nr, pl = want[n, b0:e], need_room[n, b0:e], plentiful[n, b0:e]
            cap, u, wh = capacity[n, b0:e], used[n, b0:e], wm_high[n, b0:e]
            for i in range(nb):
                b = b0 + i
                rate_gib = rate_mbps[b] * 1e6 / GIB * dt[b]
                w[i] = pt[i] if pl[i] else min(rate_gib, pt[i])
                nr[i] = max(w[i] - max(cap[i] - u[i] - wh[i], 0.0), 0.0)


@jit
def promote(  # pragma: no cover (compiled)
    place, by_node, cxl_nodes, tscale, want, per_target, util, local, capacity, wm_high,
    migrate_max_util, peak_rd, peak_wr, dt, promo_from, promo_to, promo_t,
):  # fmt: skip
    """Phase 5: each CXL node's candidates ``by_node[j]`` (T, K, B) move to their tenant's
    local DRAM, scaled by ``tscale`` (T, B) and the room on that node, and as far as the
    bandwidth left to migration (``util``: the share the demotion used) lets each node
    give and take them. ``place`` is updated; GiB promoted from each node
    (``promo_from``), to each node (``promo_to``) (N, B) and per tenant (``promo_t``
    (T, B)) are written."""
    T, K, N, B = place.shape
    C = cxl_nodes.shape[0]
    ratio, read_room = np.empty((N, _W)), np.empty((N, _W))
    scale, rows, src = np.empty((T, _W)), np.empty(_W), np.empty(_W)
    moved, promo_tk = np.empty((T, K, _W)), np.empty((T, K, _W))
    for b0 in range(0, B, _W):
        nb = min(_W, B - b0)
        e = b0 + nb
        mmu, dtb = migrate_max_util[b0:e], dt[b0:e]
        for n in range(N):  # the room above HIGH and the bandwidth on each node
            u = ratio[n]  # the node's usage, then its ratio
            for t in range(T):
                for k in range(K):
                    pg = place[t, k, n, b0:e]
                    for i in range(nb):
                        rows[i] = pg[i] if k == 0 else rows[i] + pg[i]
                for i in range(nb):
                    u[i] = rows[i] if t == 0 else u[i] + rows[i]
            cap, wh, w, pt = capacity[n, b0:e], wm_high[n, b0:e], want[n, b0:e], per_target[n, b0:e]
            ut, prd, pwr, rr = util[n, b0:e], peak_rd[n, b0:e], peak_wr[n, b0:e], read_room[n]
            for i in range(nb):
                free = migration_free_gib(mmu[i], ut[i], dtb[i])
                rr[i] = free * prd[i]
                budget = min(min(w[i], max(cap[i] - u[i] - wh[i], 0.0)), free * pwr[i])
                u[i] = min(1.0, budget / max(pt[i], 1e-300))
        for t in range(T):
            ts, loc, sc = tscale[t, b0:e], local[t, b0:e], scale[t]
            for i in range(nb):
                sc[i] = ts[i] * ratio[loc[i], i]
            for k in range(K):
                got = promo_tk[t, k]
                for i in range(nb):
                    got[i] = 0.0
        for j in range(C):
            n = cxl_nodes[j]
            for t in range(T):
                for k in range(K):
                    c, mv, sc = by_node[j, t, k, b0:e], moved[t, k], scale[t]
                    for i in range(nb):
                        mv[i] = c[i] * sc[i]
                        rows[i] = mv[i] if k == 0 else rows[i] + mv[i]
                for i in range(nb):
                    src[i] = rows[i] if t == 0 else src[i] + rows[i]
            rr = read_room[n]
            for i in range(nb):  # as far as the CXL node's bandwidth gives
                src[i] = min(1.0, rr[i] / max(src[i], 1e-300))
            pf = promo_from[n, b0:e]
            for t in range(T):
                for k in range(K):
                    mv, pg, got = moved[t, k], place[t, k, n, b0:e], promo_tk[t, k]
                    for i in range(nb):
                        m = mv[i] * src[i]
                        pg[i] = pg[i] - m
                        got[i] = got[i] + m
                        rows[i] = m if k == 0 else rows[i] + m
                for i in range(nb):
                    pf[i] = rows[i] if t == 0 else pf[i] + rows[i]
        for t in range(T):
            pt_, loc = promo_t[t, b0:e], local[t, b0:e]
            for k in range(K):
                got = promo_tk[t, k]
                for i in range(nb):
                    pt_[i] = got[i] if k == 0 else pt_[i] + got[i]
                    place[t, k, loc[i], b0 + i] += got[i]  # into the tenant's local DRAM
        for n in range(N):
            to = promo_to[n, b0:e]
            for t in range(T):
                pt_, loc = promo_t[t, b0:e], local[t, b0:e]
                for i in range(nb):
                    add = pt_[i] * (1.0 if loc[i] == n else 0.0)
                    to[i] = add if t == 0 else to[i] + add


@jit
def adapt(
    threshold_ms, cand_mb, per_target, mb_per_gib, rate, period_s, period_end, adapt_on, is_cxl,
    plentiful, start_ms, th_out, cand_out,
):  # fmt: skip  # pragma: no cover (compiled)
    """The hot threshold of every target node (N, B) after the interval, and the candidate
    MB counted in the period (:func:`envs.model.adapt_threshold`): the period's candidates
    ``cand_mb`` plus this interval's ``per_target`` (GiB); at a ``period_end`` where
    ``adapt_on`` and promotion is on (``rate`` > 0), a DRAM node's threshold adapted to
    them (:func:`envs.kernel.threshold_after_period`, ``period_s`` long); reset to
    ``start_ms`` where the node has ``plentiful`` free memory; the count restarts at a
    period's end."""
    N, B = threshold_ms.shape
    for n in range(N):
        th, cm, pt, cx, pl = threshold_ms[n], cand_mb[n], per_target[n], is_cxl[n], plentiful[n]
        to, co = th_out[n], cand_out[n]
        for b in range(B):
            c = cm[b] + pt[b] * mb_per_gib
            on = rate[b] > 0 and not cx[b]
            t = th[b]
            if period_end[b] and adapt_on[b] and on:
                t = threshold_after_period(t, c, rate[b] * period_s[b])
            to[b] = start_ms if (pl[b] and on) else t
            co[b] = 0.0 if period_end[b] else c


@jit
def coverage(
    tenant_node, per_task, scan_task, scan_period_ms, t, dt, scan_next_s, ws, active, rate,
    numa_mof, scan_gib_per_s, scan_size_mb, scan_min_ms, scan_max_ms,
    scan_gib, scanned, smin, smax,
):  # fmt: skip  # pragma: no cover (compiled)
    """What the NUMA-balancing scanner covers this interval (:func:`envs.model.promotion_candidates`):
    the GiB of each tenant's address space scanned (``scan_gib``) and their share of its
    working set ``ws`` (``scanned``), (T, B), written; nothing where the tenant is not
    running, promotion is off (``rate`` 0) or its mempolicy lacks ``MPOL_F_MOF``
    (``numa_mof``). The elements without per-task scanning scan ``scan_gib_per_s``.
    With ``per_task``, the tenants' ``task_scan_min``/``task_scan_max`` (``smin``,
    ``smax``) are written too, from their resident sets in ``tenant_node`` (T, N, B),
    and the elements with per-task scanning (``scan_task``) scan as ``task_numa_work``
    (kernel/sched/fair.c) does: ``scan_size_mb`` every scan period (``task_scan_min``
    before the first pass ends), from ``numa_balancing_scan_delay`` after the tenant
    starts (``scan_next_s``), at most the whole working set once per interval."""
    T, N, B = tenant_node.shape
    for k in range(T):
        tn, per, nxt = tenant_node[k], scan_period_ms[k], scan_next_s[k]
        w, on, mof = ws[k], active[k], numa_mof[k]
        out_g, out_s, lo_, hi_ = scan_gib[k], scanned[k], smin[k], smax[k]
        for b in range(B):
            g = scan_gib_per_s[b] * dt[b]
            if per_task:
                rss = tn[0, b]
                for n in range(1, N):
                    rss = rss + tn[n, b]
                rss_mb = rss * (GIB / 1e6)  # migration keeps the resident set
                lo = scan_min_of(rss_mb, scan_size_mb[b], scan_min_ms[b])
                lo_[b] = lo
                hi_[b] = scan_max_of(rss_mb, scan_size_mb[b], scan_min_ms[b], scan_max_ms[b])
                if scan_task[b]:  # task_scan_gib
                    period = per[b] if per[b] > 0 else lo
                    running = np_clip(t[b] * dt[b] + dt[b] - nxt[b], 0.0, dt[b])
                    g = np_minimum(scan_size_mb[b] * (1e6 / GIB) * running * 1000.0 / period, w[b])
            if not (on[b] and rate[b] > 0):
                g = 0.0
            out_g[b] = g
            s = np_minimum(1.0, g / np_maximum(w[b], 1e-300))
            out_s[b] = s if mof[b] else 0.0


@jit
def scan_update(
    scan_task, scan_gib, smin, smax, rss, promo_t, active, scan_period_ms, scan_offset_gib,
    numa_faults_mb, period_out, offset_out, faults_out,
):  # fmt: skip  # pragma: no cover (compiled)
    """Each tenant's scan state after the interval (:func:`envs.model.numa_scan_update`),
    (T, B), written: the scan period, the offset and the hint faults recorded since the
    period's last update; the period updated (:func:`envs.kernel.scan_period_after`) where
    a pass over the resident set ``rss`` ended with faults recorded; all 0 for a tenant
    not running."""
    T, B = scan_gib.shape
    for k in range(T):
        for b in range(B):
            sg = scan_gib[k, b]
            scanning = scan_task[b] and sg > 0
            period = scan_period_ms[k, b]
            if scanning and period <= 0:
                period = smin[k, b]
            faults = numa_faults_mb[k, b] + promo_t[k, b] * (GIB / 1e6)
            offset = scan_offset_gib[k, b] + sg
            whole = np_maximum(rss[k, b], 1e-9)
            if scanning and offset >= whole:  # a pass ended
                if faults > 0:
                    period = scan_period_after(
                        period, 0.0, faults, faults, 0.0, 0.0, smin[k, b], smax[k, b]
                    )
                    faults = 0.0
                offset = np_mod(offset, whole)
            if not active[k, b]:
                period, offset, faults = 0.0, 0.0, 0.0
            period_out[k, b], offset_out[k, b], faults_out[k, b] = period, offset, faults
