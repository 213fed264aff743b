"""The fixed point's inputs and an interval's outputs, compiled (:func:`envs.model.step`).

Every value is the numpy expression's it replaces, in the same order of operations:
products and quotients as written, ``np.where`` as a select, ``np.maximum`` and
``np.minimum`` with a NaN kept, the sums over nodes and tenants one term after another
(as :func:`envs.solver.lsum` adds them). The arrays are batch-last like the model's.
"""

from __future__ import annotations

from envs.hardware import peak_at_mix
from envs.jit import jit, np_clip
from envs.jit import np_maximum as _max
from envs.jit import np_minimum as _min


@jit
def fixed_point_inputs(
    line_bytes, threads, mlp, compute_ns, read_fraction, socket, random, node_socket,
    phase, active, jit_mlp, jit_compute, cpu_loss, cap, compute, rfrac, tsock, remote, rnd,
):  # fmt: skip  # pragma: no cover (compiled)
    """Each tenant's fixed-point inputs at its ``phase`` (T, B), from the tables (T, P, B)
    of the instances: bytes in flight ``cap`` (``line_bytes`` x threads x MLP, jittered,
    less the CPU time ``cpu_loss`` lost to throttling and migration; 0 where not
    ``active``), ``compute`` ns between misses (jittered), ``rfrac`` read fraction,
    ``tsock`` its socket, ``rnd`` random access (T, B), and ``remote`` (T, N, B) 1 where
    a node is on another socket than the tenant (``node_socket`` (N, B))."""
    T, _, B = threads.shape
    N = node_socket.shape[0]
    for t in range(T):
        ph, ca, co, rf, ts, rn = phase[t], cap[t], compute[t], rfrac[t], tsock[t], rnd[t]
        ac, jm, jc, cl = active[t], jit_mlp[t], jit_compute[t], cpu_loss[t]
        for b in range(B):
            q = ph[b]
            x = line_bytes * threads[t, q, b] * mlp[t, q, b] * jm[b] * (1.0 - cl[b])
            ca[b] = x if ac[b] else 0.0
            co[b] = compute_ns[t, q, b] * jc[b]
            rf[b] = read_fraction[t, q, b]
            ts[b] = socket[t, q, b]
            rn[b] = random[t, q, b]
        for n in range(N):
            rm, ns = remote[t, n], node_socket[n]
            for b in range(B):
                rm[b] = 1.0 if ts[b] != ns[b] else 0.0


@jit
def interval_outputs(
    rd, wr, mem_read, mem_write, mem_turn, link_read, link_write, node_util, remote_util,
    x, solo, phase, active, tenant_lat, dram_share, rfrac, promo_from, dem_from, per_target,
    mb_per_gib, dt, bw, peak, util, norm_perf, lat, dshare, rf, promo, demo, cand, total,
):  # fmt: skip  # pragma: no cover (compiled)
    """An interval's outputs from its fixed point, batch-last.

    Per node (N, B): the bandwidth ``bw`` (reads ``rd`` plus writes ``wr``), the ``peak``
    at that mix (the memory's, the link's directions), the utilisation ``util`` (the
    larger of the local resources' and the remote path's). Per tenant (T, B), zero
    where not ``active``: performance over its throughput alone (``solo`` (T, P, B) at
    its ``phase``), latency, DRAM access share and read fraction. Per element (B,): the
    promotion, demotion and candidate traffic (MB/s from GiB moved per node, (N, B)
    each) and the total throughput ``x`` (T, B)."""
    N, B = rd.shape
    T = x.shape[0]
    for n in range(N):
        r, w, o_bw, o_pk, o_ut = rd[n], wr[n], bw[n], peak[n], util[n]
        mr, mw, mc, lr, lw = mem_read[n], mem_write[n], mem_turn[n], link_read[n], link_write[n]
        nu, ru = node_util[n], remote_util[n]
        for b in range(B):
            s = r[b] + w[b]
            o_bw[b] = s
            mix = r[b] / _max(s, 1e-300)
            link = _min(lr[b] / _max(mix, 1e-300), lw[b] / _max(1 - mix, 1e-300))
            o_pk[b] = _min(peak_at_mix(mr[b], mw[b], mc[b], mix), link)
            o_ut[b] = _max(nu[b], ru[b])
    for t in range(T):
        ph, ac, xt = phase[t], active[t], x[t]
        tl, ds, rft = tenant_lat[t], dram_share[t], rfrac[t]
        o_np, o_lt, o_ds, o_rf = norm_perf[t], lat[t], dshare[t], rf[t]
        for b in range(B):
            on = ac[b]
            o_np[b] = xt[b] / _max(solo[t, ph[b], b], 1e-300) if on else 0.0
            o_lt[b] = tl[b] if on else 0.0
            o_ds[b] = ds[b] if on else 0.0
            o_rf[b] = rft[b] if on else 0.0
    for b in range(B):
        sp, sd, sc = promo_from[0, b], dem_from[0, b], per_target[0, b]
        for n in range(1, N):
            sp += promo_from[n, b]
            sd += dem_from[n, b]
            sc += per_target[n, b]
        promo[b] = sp * mb_per_gib / dt[b]
        demo[b] = sd * mb_per_gib / dt[b]
        cand[b] = sc * mb_per_gib / dt[b]
        tot = x[0, b]
        for t in range(1, T):
            tot += x[t, b]
        total[b] = tot


@jit
def migration_cost(
    dem_from, promo_from, dem_to, promo_to, promo_t, threads, phase, cpu_us, gb_per_gib,
    pages_per_gib, dt, bg_rd, bg_wr, cpu_loss,
):  # fmt: skip  # pragma: no cover (compiled)
    """Migration traffic on each node (N, B), GB/s: reads ``bg_rd`` from the GiB demoted
    and promoted from it, writes ``bg_wr`` from those moved to it, over the interval
    ``dt`` (B,); and the CPU share each tenant loses to copying its promoted pages
    (T, B): ``promo_t`` GiB as pages times ``cpu_us`` (B,) microseconds each, over its
    threads (``threads`` (T, P, B) at its ``phase``) and the interval, clipped to [0, 0.9]."""
    N, B = dem_from.shape
    T = promo_t.shape[0]
    for n in range(N):
        df, pf, dto, pto, rd, wr = (
            dem_from[n],
            promo_from[n],
            dem_to[n],
            promo_to[n],
            bg_rd[n],
            bg_wr[n],
        )
        for b in range(B):
            to_gbps = gb_per_gib / dt[b]
            rd[b] = (df[b] + pf[b]) * to_gbps
            wr[b] = (dto[b] + pto[b]) * to_gbps
    for t in range(T):
        ph, pt, cl = phase[t], promo_t[t], cpu_loss[t]
        for b in range(B):
            x = pt[b] * pages_per_gib * cpu_us[b] * 1e-6 / (threads[t, ph[b], b] * dt[b])
            cl[b] = np_clip(x, 0.0, 0.9)
