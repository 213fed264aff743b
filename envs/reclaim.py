"""Phase 4 of an interval compiled: kswapd and memory.high reclaim through the LRU's
reference check, and the demotion it makes (the mechanism: :func:`envs.model.lru_reclaim`
and :func:`envs.model.reclaim_and_demote`, which drive these kernels).

Each kernel loops over the batch and runs every element on its own numbers, in the
order the mechanism's description gives (sums over tenants and buckets in index order),
so that an element's results do not depend on the rest of the batch. The reference
check's ``1 - exp(-x)`` (``x`` the page's exposure, :func:`exposure`) is
:func:`envs.model.access_probability`, whose float32 tanh is
numpy's (not libm's, which rounds differently): a DRAM node's reclaim is therefore two
kernels with numpy's tanh between them, :func:`look` (who reclaims, how much, and the
tanh's arguments) and :func:`take` (what the check lets go, the take, the move).

Arrays are batch-last, as in :mod:`envs.model`: ``place`` (T, K, N, B) and so on.
"""

from __future__ import annotations

import numpy as np

from envs.jit import inline, jit, ufunc
from envs.kernel import (
    GB_PER_GIB,
    MEMCG_CHARGE_BATCH,
    MEMCG_MIN_HIGH_DELAY_S,
    PAGES_PER_GIB,
    SWAP_CLUSTER_MAX,
    high_delay_s,
    inactive_anon_target,
    kswapd_failures_after,
    kswapd_hopeless,
    reclaim_scan,
)
from envs.placement import node_pages

# --------------------------------------------------------------------------- scalar pieces


@ufunc("float32(float64)")
def tanh_arg(x: float) -> np.float32:
    """The float32 argument of :func:`envs.model.access_probability`'s tanh: ``x / 2``."""
    return np.float32(0.5 * x)


@ufunc("float64(float64, float64)")
def exposure(x: float, periodic: float) -> float:
    """The Poisson exposure ``-ln(1 - p)`` of a page's chance ``p`` of a reference within
    a window, ``x`` its references expected in the window (its references per second
    times the window): ``x`` itself for references at random times (``p = 1 - exp(-x)``),
    and ``-ln(1 - min(1, x))`` (inf from ``x = 1`` on) for a page referenced once per
    pass of ``P`` seconds at a phase the window does not know (``periodic`` > 0), whose
    ``p = min(1, window / P)``. :func:`envs.model.access_probability` of it is ``p``."""
    if periodic > 0.0:
        return -np.log1p(-min(x, 1.0))
    return x


@ufunc("float64(float32)")
def from_tanh(th: np.float32) -> float:
    """``2 th / (1 + th)`` in float32, ``th = tanh(x / 2)``: ``1 - exp(-x)``."""
    return float((th + th) / (th + np.float32(1.0)))


@ufunc("float64(float64, float64, float64)")
def migration_free_gib(max_util: float, util: float, dt: float) -> float:
    """GiB-seconds per peak GB/s left to migration on a node whose bandwidth migration
    already uses the share ``util`` (``read / R + write / W``, the CXL link included in
    the peaks ``R`` and ``W``; migration may use up to ``max_util`` of it): times a
    node's read or write peak, the GiB it may still read from or write to the node this
    interval."""
    return max(max_util - util, 0.0) * dt / GB_PER_GIB


@ufunc("float64(float64, float64, float64, float64, float64, float64)")
def bandwidth_share(
    util: float, read_gib: float, write_gib: float, dt: float, peak_rd: float, peak_wr: float
) -> float:
    """``util`` plus the share of a node's bandwidth that reading and writing these GiB takes."""
    return util + read_gib * GB_PER_GIB / dt / peak_rd + write_gib * GB_PER_GIB / dt / peak_wr


# --------------------------------------------------------------------------- a block's sums
#
# The kernels run the batch ``_W`` elements at a time, side by side in the lanes of small
# arrays (the lane axis last). Every loop over lanes is innermost and runs over 1-D views
# (``x[t, b0:e]``) indexed by the loop's own counter: numba then knows the index is not
# negative, and the loop vectorises (indexing ``x[t, b0 + i]`` instead makes the same
# sums 5x slower). The phase is bound by memory traffic: the node's pages are copied
# into the block's lanes once and read there, and the placement's sums are taken from
# the promotion phase's (:class:`envs.model.Candidates`) until an element has demoted.
# Each lane runs its own element's numbers; an element that does not reclaim is
# computed alongside and not written.

_W = 256  # lanes: batch elements side by side
_MIN_SCAN = float(SWAP_CLUSTER_MAX)
_CHARGE_BATCH = float(MEMCG_CHARGE_BATCH)


@inline
def _node_lanes(place, m, b0, nb, on):  # pragma: no cover (compiled)
    """Elements ``b0 ..`` of node ``m``'s pages ``place[:, :, m]`` into ``on`` (T, K, W)."""
    T, K, _, _ = place.shape
    for t in range(T):
        for k in range(K):
            src, dst = place[t, k, m, b0 : b0 + nb], on[t, k]
            for i in range(nb):
                dst[i] = src[i]


@inline
def _any_nonzero(rows, b0, nb, out):  # pragma: no cover (compiled)
    """``out`` (W,): whether any row of ``rows`` (R, B) is nonzero in element ``b0 + i``."""
    for i in range(nb):
        out[i] = False
    for r in range(rows.shape[0]):
        x = rows[r, b0 : b0 + nb]
        for i in range(nb):
            out[i] = out[i] or x[i] != 0.0


@inline
def _usage_sums(  # pragma: no cover (compiled)
    place, is_cxl, m, b0, nb, tenant_node0, dram_use0, demoted, size_m, dram_use, acc
):
    """Each tenant's GiB on node ``m`` (``size_m``) and on DRAM (``dram_use``), (T, W):
    ``tenant_node0`` and ``dram_use0`` (the sums of the phase's start) unless an element
    of the block has ``demoted``, else summed from ``place`` as they were (buckets, then
    nodes in order; a node that is CXL in every lane adds zeros and is left out)."""
    T, N = place.shape[0], place.shape[2]
    e = b0 + nb
    fresh = False
    for i in range(nb):
        fresh = fresh or demoted[i]
    for t in range(T):
        sz, d = size_m[t], dram_use[t]
        if not fresh:
            src, du = tenant_node0[t, m, b0:e], dram_use0[t, b0:e]
            for i in range(nb):
                sz[i], d[i] = src[i], du[i]
            continue
        for i in range(nb):
            d[i] = 0.0
        for n in range(N):
            cx = is_cxl[n, b0:e]
            dram = False
            for i in range(nb):
                dram = dram or not cx[i]
            if not dram and n != m:
                continue
            node_pages(place, t, n, b0, nb, acc)
            if n == m:
                for i in range(nb):
                    sz[i] = acc[i]
            for i in range(nb):
                d[i] = d[i] + acc[i] * (0.0 if cx[i] else 1.0)


@inline
def _start(  # pragma: no cover (compiled)
    tenant_node0, dram_use0, high, tot_high, charged, b0, nb, over_high, total_use
):
    """Each cgroup's share of its DRAM over memory.high (``over_high`` (T, W), 1 for a
    cgroup over memory.high on its total usage that charged a page) and its total usage
    (T, W), from the placement at the start of the phase."""
    T, N, _ = tenant_node0.shape
    e = b0 + nb
    for t in range(T):
        oh, tu = over_high[t], total_use[t]
        du, hi, src = dram_use0[t, b0:e], high[t, b0:e], tenant_node0[t, 0, b0:e]
        for i in range(nb):
            oh[i] = max(du[i] - hi[i], 0.0) / max(du[i], 1e-300)
            tu[i] = src[i]
        for n in range(1, N):
            src = tenant_node0[t, n, b0:e]
            for i in range(nb):
                tu[i] = tu[i] + src[i]
        if charged.shape[1] > 0:
            ch, th = charged[t, b0:e], tot_high[t, b0:e]
            for i in range(nb):
                if ch[i] * PAGES_PER_GIB >= 1.0:
                    if high_delay_s(tu[i], th[i], _CHARGE_BATCH) > MEMCG_MIN_HIGH_DELAY_S:
                        oh[i] = 1.0


@inline
def _lru_look(  # pragma: no cover (compiled)
    on, b0, nb, low, usage, scan_pps, size, inactive, scan, pass_pages, pass_s
):
    """The LRUs of a node whose pages are ``on`` (T, K, W): each cgroup's size, inactive
    target and scan (T, W), and each pass's pages and seconds (W,). ``low``, ``usage``
    (T, B) GiB."""
    T, K, _ = on.shape
    e = b0 + nb
    for t in range(T):
        sz, ina, sc, us, lo = size[t], inactive[t], scan[t], usage[t, b0:e], low[t, b0:e]
        src = on[t, 0]
        for i in range(nb):
            sz[i] = max(src[i], 0.0)
        for k in range(1, K):
            src = on[t, k]
            for i in range(nb):
                sz[i] = sz[i] + max(src[i], 0.0)
        for i in range(nb):
            ina[i] = inactive_anon_target(sz[i] * PAGES_PER_GIB)
            prot = min(lo[i], us[i])
            sc[i] = reclaim_scan(ina[i], prot * PAGES_PER_GIB, us[i] * PAGES_PER_GIB, _MIN_SCAN)
    sc = scan[0]
    for i in range(nb):
        pass_pages[i] = sc[i]
    for t in range(1, T):
        sc = scan[t]
        for i in range(nb):
            pass_pages[i] = pass_pages[i] + sc[i]
    r = scan_pps[b0:e]
    for i in range(nb):
        pass_s[i] = pass_pages[i] / r[i]


@inline
def _lru_args(  # pragma: no cover (compiled)
    access_rate, passes, b0, nb, inactive, scan, pass_s, age, h
):
    """The tanh's arguments (T, K, B float32) of the reference check within each list's
    age: ``access_rate`` (T, K, B) references per page per second, ``passes`` (T, B) 1
    where they are periodic (:func:`exposure`)."""
    T, K, _ = access_rate.shape
    e = b0 + nb
    for t in range(T):
        ina, sc, ps = inactive[t], scan[t], passes[t, b0:e]
        for i in range(nb):
            age[i] = pass_s[i] * ina[i] / sc[i] if sc[i] > 0 else 0.0
        for k in range(K):
            ar, hh = access_rate[t, k, b0:e], h[t, k, b0:e]
            for i in range(nb):
                hh[i] = tanh_arg(exposure(ar[i] * age[i], ps[i]))


@inline
def _lru_rates(  # pragma: no cover (compiled)
    on, fresh, th, m, b0, nb, dt, scan_pps, size, scan, pass_pages, pass_s, lanes, rate,
    per_pass,
):  # fmt: skip
    """GiB a second the check lets go from each bucket (``rate`` (T, K, W)) and the pages
    a whole pass would reclaim (``per_pass`` (W,)), from the tanh ``th`` (T, K, B) of
    :func:`_lru_args`; ``on`` (T, K, W) the node's pages, ``fresh[:, :, m]`` those
    allocated this interval. ``lanes`` (3+, W): scratch."""
    T, K, _ = on.shape
    e = b0 + nb
    first_look, gib_s, shares = lanes[0], lanes[1], lanes[2]
    dtb, r = dt[b0:e], scan_pps[b0:e]
    for i in range(nb):
        first_look[i] = min(1.0, pass_s[i] / dtb[i])
    for t in range(T):
        sz, sc = size[t], scan[t]
        for i in range(nb):
            gib_s[i] = r[i] / PAGES_PER_GIB * sc[i] / max(pass_pages[i], 1e-300)
        for k in range(K):
            tk, pg, fr, out = th[t, k, b0:e], on[t, k], fresh[t, k, m, b0:e], rate[t, k]
            for i in range(nb):
                miss = 1.0 - from_tanh(tk[i])
                let_go = max(max(pg[i], 0.0) - fr[i] * first_look[i], 0.0) * miss
                share = let_go / max(sz[i], 1e-300)
                out[i] = share * gib_s[i]
                shares[i] = share if k == 0 else shares[i] + share
        for i in range(nb):
            add = sc[i] * shares[i]
            per_pass[i] = add if t == 0 else per_pass[i] + add


# --------------------------------------------------------------------------- lru_reclaim alone


@jit
def lru_args(place, access_rate, passes, low, usage, scan_pps, h):  # pragma: no cover (compiled)
    """:func:`envs.model.lru_reclaim`'s first half on node 0 of ``place`` (T, K, 1, B)."""
    T, K, _, B = place.shape
    size, inactive, scan = np.empty((3, T, _W))
    pass_pages, pass_s, age = np.empty(_W), np.empty(_W), np.empty(_W)
    on = np.empty((T, K, _W))
    for b0 in range(0, B, _W):
        nb = min(_W, B - b0)
        _node_lanes(place, 0, b0, nb, on)
        _lru_look(on, b0, nb, low, usage, scan_pps, size, inactive, scan, pass_pages, pass_s)
        _lru_args(access_rate, passes, b0, nb, inactive, scan, pass_s, age, h)


@jit
def lru_rates(  # pragma: no cover (compiled)
    place, fresh, th, low, usage, scan_pps, dt, rate, per_pass, pass_s
):
    """:func:`envs.model.lru_reclaim`'s second half: ``rate`` (T, K, B), ``per_pass`` and
    ``pass_s`` (B,) written."""
    T, K, _, B = place.shape
    size, inactive, scan = np.empty((3, T, _W))
    pages, seconds, passes, lanes = np.empty(_W), np.empty(_W), np.empty(_W), np.empty((3, _W))
    on, r = np.empty((T, K, _W)), np.empty((T, K, _W))
    for b0 in range(0, B, _W):
        nb = min(_W, B - b0)
        _node_lanes(place, 0, b0, nb, on)
        _lru_look(on, b0, nb, low, usage, scan_pps, size, inactive, scan, pages, seconds)
        _lru_rates(
            on, fresh, th, 0, b0, nb, dt, scan_pps, size, scan, pages, seconds, lanes, r,
            passes,
        )  # fmt: skip
        for i in range(nb):
            per_pass[b0 + i], pass_s[b0 + i] = passes[i], seconds[i]
        for t in range(T):
            for k in range(K):
                src, dst = r[t, k], rate[t, k, b0 : b0 + nb]
                for i in range(nb):
                    dst[i] = src[i]


# --------------------------------------------------------------------------- reclaim_and_demote


@jit
def look(  # pragma: no cover (compiled)
    m, place, used, failures, dem_from, need_room, promo_on, dt, charged,
    tenant_node0, dram_use0, high, tot_high, low,
    is_cxl, demote_target, capacity, wm_low, wm_high, wm_promo,
    demotion, demote_wm_frac, kswapd_gibps, scan_pps, memcg_mode, access_rate, passes,
    kswapd, excess, usage, h,
):  # fmt: skip
    """Who reclaims on DRAM node ``m`` and how much: kswapd's GiB (``kswapd`` (B,)),
    memory.high's (``excess`` (T, B)), the usage memory.low protects (``usage`` (T, B))
    and the tanh's arguments of the reference check (``h`` (T, K, B)); ``usage`` and
    ``h`` are written only in the blocks where something reclaims. Returns how many
    elements reclaim."""
    T, K, _, B = place.shape
    size_m, dram_use = np.empty((T, _W)), np.empty((T, _W))
    over_high, total_use = np.empty((T, _W)), np.empty((T, _W))
    size, inactive, scan = np.empty((3, T, _W))
    pass_pages, pass_s, age = np.empty(_W), np.empty(_W), np.empty(_W)
    can, reclaims, demoted = np.empty(_W, np.bool_), np.empty(_W, np.bool_), np.empty(_W, np.bool_)
    on = np.empty((T, K, _W))
    busy = 0
    for b0 in range(0, B, _W):
        nb = min(_W, B - b0)
        e = b0 + nb
        _any_nonzero(dem_from, b0, nb, demoted)
        _start(tenant_node0, dram_use0, high, tot_high, charged, b0, nb, over_high, total_use)
        _usage_sums(
            place, is_cxl, m, b0, nb, tenant_node0, dram_use0, demoted, size_m, dram_use, age
        )
        cx, tgt = is_cxl[m, b0:e], demote_target[m, b0:e]
        for i in range(nb):  # a DRAM node with a demotion target
            can[i] = not cx[i] and tgt[i] >= 0
        for t in range(T):
            ex, oh, sz = excess[t, b0:e], over_high[t], size_m[t]
            for i in range(nb):
                ex[i] = oh[i] * sz[i] if can[i] else 0.0
        cap, use, frac = capacity[m, b0:e], used[m, b0:e], demote_wm_frac[b0:e]
        wl, wh, wp, room = wm_low[m, b0:e], wm_high[m, b0:e], wm_promo[m, b0:e], need_room[m, b0:e]
        on_, dem, fails = promo_on[b0:e], demotion[b0:e], failures[m, b0:e]
        gib, dtb, ks_out = kswapd_gibps[b0:e], dt[b0:e], kswapd[b0:e]
        for i in range(nb):
            free_m = cap[i] - use[i]
            if frac[i] > 0:  # TPP's demotion watermark
                wake = max(frac[i] * cap[i], 2 * wh[i])
                target = wake
            elif on_[i]:
                wake, target = wh[i], wp[i]
            else:
                wake, target = wl[i], wh[i]
            ks = max(target - free_m, 0.0) if free_m < wake else 0.0
            ks = max(ks, room[i])
            if not (dem[i] and can[i]) or kswapd_hopeless(fails[i]):
                ks = 0.0
            ks = min(ks, gib[i] * dtb[i])
            ks_out[i] = ks
        _any_nonzero(excess, b0, nb, reclaims)
        in_block = 0
        for i in range(nb):
            reclaims[i] = reclaims[i] or ks_out[i] > 0
            in_block += 1 if reclaims[i] else 0
        busy += in_block
        if in_block == 0:
            continue
        mm = memcg_mode[b0:e]
        for t in range(T):  # memory.low on total usage with memcg_limits "total", else DRAM
            us, tu, du = usage[t, b0:e], total_use[t], dram_use[t]
            for i in range(nb):
                us[i] = tu[i] if mm[i] == 0 else du[i]
        _node_lanes(place, m, b0, nb, on)
        _lru_look(on, b0, nb, low, usage, scan_pps, size, inactive, scan, pass_pages, pass_s)
        _lru_args(access_rate, passes, b0, nb, inactive, scan, pass_s, age, h)
    return busy


@jit
def take(  # pragma: no cover (compiled)
    m, th, place, fresh, used, util, failures, dem_from, dem_to, dt, kswapd, excess, usage,
    low, demote_target, capacity, wm_low, migrate_max_util, peak_rd, peak_wr, scan_pps,
):  # fmt: skip
    """What the reference check lets go on DRAM node ``m`` (``th``: numpy's tanh of
    :func:`look`'s ``h``), memory.high's take first, kswapd's, as far as the target's
    room and both nodes' migration bandwidth go; kswapd_failures; the move into the
    demotion target. ``place``, ``used``, ``util``, ``failures``, ``dem_from`` and
    ``dem_to`` are updated in place, in the elements that reclaim."""
    T, K, N, B = place.shape
    size, inactive, scan = np.empty((3, T, _W))
    pass_pages, pass_s, per_pass = np.empty(_W), np.empty(_W), np.empty(_W)
    lanes = np.empty((6, _W))
    on, rate, amount = np.empty((T, K, _W)), np.empty((T, K, _W)), np.empty((T, K, _W))
    live, over = np.empty(_W, np.bool_), np.empty(_W, np.bool_)
    for b0 in range(0, B, _W):
        nb = min(_W, B - b0)
        e = b0 + nb
        high_gib, fit, moved = lanes[3], lanes[4], lanes[5]
        ks = kswapd[b0:e]
        _any_nonzero(excess, b0, nb, over)
        for t in range(T):
            ex = excess[t, b0:e]
            for i in range(nb):
                high_gib[i] = ex[i] if t == 0 else high_gib[i] + ex[i]
        in_block, over_block = 0, False
        for i in range(nb):
            live[i] = ks[i] > 0 or over[i]
            in_block += 1 if live[i] else 0
            over_block = over_block or over[i]
        if in_block == 0:
            continue
        _node_lanes(place, m, b0, nb, on)
        _lru_look(on, b0, nb, low, usage, scan_pps, size, inactive, scan, pass_pages, pass_s)
        _lru_rates(
            on, fresh, th, m, b0, nb, dt, scan_pps, size, scan, pass_pages, pass_s, lanes,
            rate, per_pass,
        )  # fmt: skip
        if over_block:  # memory.high's reclaim first: what the check lets go, then the rest
            wsum, firsts, lefts = lanes[0], lanes[1], lanes[2]
            for t in range(T):
                ex = excess[t, b0:e]
                r = rate[t, 0]
                for i in range(nb):
                    wsum[i] = r[i]
                for k in range(1, K):
                    r = rate[t, k]
                    for i in range(nb):
                        wsum[i] = wsum[i] + r[i]
                for k in range(K):
                    pg, r, got = on[t, k], rate[t, k], amount[t, k]
                    for i in range(nb):
                        first = min(max(pg[i], 0.0), r[i] * (ex[i] / max(wsum[i], 1e-300)))
                        got[i] = first
                        firsts[i] = first if k == 0 else firsts[i] + first
                for k in range(K):
                    pg, got = on[t, k], amount[t, k]
                    for i in range(nb):
                        left = max(pg[i], 0.0) - got[i]
                        lefts[i] = left if k == 0 else lefts[i] + left
                for i in range(nb):  # the share of the rest taken (in firsts from here on)
                    firsts[i] = min(1.0, max(ex[i] - firsts[i], 0.0) / max(lefts[i], 1e-300))
                for k in range(K):
                    pg, got = on[t, k], amount[t, k]
                    for i in range(nb):
                        got[i] = got[i] + (max(pg[i], 0.0) - got[i]) * firsts[i]
        # kswapd's scan meanwhile: what the check lets go of the rest, up to its GiB
        cap_sum, caps = lanes[0], lanes[1]
        dtb = dt[b0:e]
        for t in range(T):
            for k in range(K):
                pg, r, got = on[t, k], rate[t, k], amount[t, k]
                for i in range(nb):
                    left = max(pg[i] - got[i], 0.0) if over[i] else max(pg[i], 0.0)
                    c = min(r[i] * dtb[i], left)
                    r[i] = c  # the cap from here on
                    caps[i] = c if k == 0 else caps[i] + c
            for i in range(nb):
                cap_sum[i] = caps[i] if t == 0 else cap_sum[i] + caps[i]
        by, total, row = lanes[0], lanes[1], lanes[2]
        for i in range(nb):
            by[i] = min(1.0, ks[i] / max(cap_sum[i], 1e-300))
        for t in range(T):
            for k in range(K):
                pg, r, got = on[t, k], rate[t, k], amount[t, k]
                for i in range(nb):
                    g = r[i] * by[i]
                    g = got[i] + g if over[i] else g + 0.0
                    g = min(g, max(pg[i], 0.0))  # no rounding past the pages there
                    got[i] = g
                    row[i] = g if k == 0 else row[i] + g
            for i in range(nb):
                total[i] = row[i] if t == 0 else total[i] + row[i]
        for i in range(nb):
            b = b0 + i
            if not live[i]:
                fit[i] = 0.0
                continue
            n = demote_target[m, b]
            mmu = migrate_max_util[b]
            read_room = migration_free_gib(mmu, util[m, b], dt[b]) * peak_rd[m, b]
            write_room = migration_free_gib(mmu, util[n, b], dt[b]) * peak_wr[n, b]
            tfree = capacity[n, b] - used[n, b] - wm_low[n, b]
            room = min(min(max(tfree, 0.0), read_room), write_room)
            fit[i] = min(1.0, room / max(total[i], 1e-300))
            # kswapd_failures: a pass that reclaims under a page (nothing let go, or no
            # room on the target) is fruitless, and kswapd then runs for the whole interval
            ran = ks[i] > 0
            fruitless = min(per_pass[i], room * PAGES_PER_GIB) < 1.0
            progress = (ran and not fruitless) or high_gib[i] * fit[i] * PAGES_PER_GIB >= 1.0
            failures[m, b] = kswapd_failures_after(
                failures[m, b], dt[b] / max(pass_s[i], 1e-300), ran and fruitless, progress
            )
        for t in range(T):
            for k in range(K):
                got = amount[t, k]
                for i in range(nb):
                    g = got[i] * fit[i] if live[i] else 0.0
                    got[i] = g
                    row[i] = g if k == 0 else row[i] + g
            for i in range(nb):
                moved[i] = row[i] if t == 0 else moved[i] + row[i]
        # the move (zero where nothing moves: x - 0 and x + 0 are x)
        dst = demote_target[m, b0:e]
        for t in range(T):
            for k in range(K):
                src, got = place[t, k, m, b0:e], amount[t, k]
                for i in range(nb):
                    src[i] = src[i] - got[i]
        for n in range(N):
            into = False
            for i in range(nb):
                into = into or (dst[i] == n and moved[i] != 0.0)
            if not into:
                continue
            for t in range(T):
                for k in range(K):
                    to, got = place[t, k, n, b0:e], amount[t, k]
                    for i in range(nb):
                        to[i] = to[i] + (got[i] if dst[i] == n else 0.0)
        for i in range(nb):
            if not live[i] or moved[i] == 0.0:
                continue  # nothing moved (the sums below would add zeros)
            b = b0 + i
            n = demote_target[m, b]
            dem_from[m, b] += moved[i]
            dem_to[n, b] += moved[i]
            for j in range(N):
                d = (1.0 if j == n else 0.0) - (1.0 if j == m else 0.0)
                used[j, b] = used[j, b] + moved[i] * d
                util[j, b] = bandwidth_share(
                    util[j, b],
                    moved[i] if j == m else 0.0,
                    moved[i] if j == n else 0.0,
                    dt[b],
                    peak_rd[j, b],
                    peak_wr[j, b],
                )
