"""The observation's entries written by one compiled pass (:class:`envs.spaces.ObservationEncoder`),
and the box actions' entries read (:meth:`envs.spaces.ActionCodec.decode`).

The encoder's arithmetic is divisions, minima and products, each as numpy does it
(``np.minimum`` keeps a NaN, ``x * 0.0`` of a negative ``x`` is ``-0.0``), so the pass
writes the float32 values numpy's expressions give, bit for bit, clipped to [0, 1] as
``np.clip`` clips them; the logarithms (the migration traffic, the descriptors) stay
numpy's and arrive computed.
"""

from __future__ import annotations

import numpy as np

from envs.gather import phase_now, running
from envs.jit import array_form, inline, jit, jit_any_layout, np_clip, np_maximum, np_minimum


@jit_any_layout("obs")  # obs: allocated C-ordered, walked in order
def fill_observation(
    obs, has_out, util, lat, idle, used, cap, active, perf, dram_share, dram_res, resident,
    demand, peak, rfrac, log_promo, log_demo, mbps_scale, weights, t, steps, present,
    start_rfrac, desc, extra,
):  # fmt: skip  # pragma: no cover (compiled)
    """Every entry of ``obs`` (B, size), clipped to [0, 1] as ``np.clip`` does (a NaN and
    a ``-0.0`` stay), batch-first arguments.

    With ``has_out``, the interval's outputs: per node (B, N) ``util``, ``lat``, ``used``
    (``idle``, ``cap`` the instances'), per tenant (B, T) ``active``, ``perf``,
    ``dram_share``, ``dram_res``, ``resident``, ``demand``, ``rfrac``; ``peak`` (B,);
    the migration entries ``log_promo`` and ``log_demo`` (B,, the log1p of the MB/s)
    over ``mbps_scale``. Rows with ``t == 0`` (all rows without ``has_out``) show the
    start instead: ``present`` (B, T), ``start_rfrac`` (B, T) and the weights, nothing
    of a node. ``weights`` (B, T, N); ``desc`` (B, T, k) and ``extra`` (B, e) the
    descriptors and extra globals (k = 0: the basic layout).
    """
    B, T, N = weights.shape
    K, E = desc.shape[2], 6
    per = E + N + K
    t0, g0 = 3 * N, obs.shape[1] - 3
    for b in range(B):
        fresh = (not has_out) or t[b] == 0
        if fresh:
            for j in range(t0):
                obs[b, j] = 0.0
            obs[b, g0] = 0.0
            obs[b, g0 + 1] = 0.0
        else:
            for n in range(N):
                obs[b, 3 * n] = util[b, n]
                obs[b, 3 * n + 1] = np_minimum((lat[b, n] / idle[b, n] - 1.0) / 4.0, 1.0)
                obs[b, 3 * n + 2] = used[b, n] / cap[b, n]
            obs[b, g0] = log_promo[b] / mbps_scale
            obs[b, g0 + 1] = log_demo[b] / mbps_scale
        for tt in range(T):
            o = t0 + tt * per
            if fresh:
                a = 1.0 if present[b, tt] else 0.0
                obs[b, o] = a
                for j in range(1, 5):
                    obs[b, o + j] = 0.0
                obs[b, o + 5] = start_rfrac[b, tt] * a
            else:
                a = 1.0 if active[b, tt] else 0.0
                ws = np_maximum(resident[b, tt], 1e-12)
                obs[b, o] = a
                obs[b, o + 1] = np_minimum(perf[b, tt] / 2.0, 1.0) * a
                obs[b, o + 2] = dram_share[b, tt] * a
                obs[b, o + 3] = dram_res[b, tt] / ws * a
                obs[b, o + 4] = np_minimum(demand[b, tt] / peak[b], 1.0) * a
                obs[b, o + 5] = rfrac[b, tt] * a
            for n in range(N):
                obs[b, o + E + n] = weights[b, tt, n] * a
            for j in range(K):
                obs[b, o + E + N + j] = desc[b, tt, j]
        for j in range(extra.shape[1]):
            obs[b, t0 + T * per + j] = extra[b, j]
        obs[b, g0 + 2] = t[b] / max(steps[b], 1)
        for j in range(obs.shape[1]):
            obs[b, j] = np_clip(obs[b, j], 0.0, 1.0)


@inline
def log_scale_exponent(x, off):  # pragma: no cover (compiled)
    """The exponent of a box entry ``x`` (in [-1, 1]) on its log scale: ``(x - off) /
    (1 - off)`` clipped to [0, 1] (``off`` and below: 0, the scale's 1)."""
    return np_clip((x - off) / (1.0 - off), 0.0, 1.0)


#: the same for arrays (:func:`envs.spaces._log_scale`); compiled code inlines the above
log_scale_exponents = array_form("float64(float64, float64)", log_scale_exponent)


@jit_any_layout()
def box_exponents(a, off, ew, er, w_off, r_off):  # pragma: no cover (compiled)
    """A batch of box actions ``a`` (B, n + 1: n weight entries, then the rate), each
    entry clipped to [-1, 1] and mapped to the exponent of its log scale, clipped to
    [0, 1] (``(x - off) / (1 - off)``): ``ew`` (B, n) and ``er`` (B,); ``w_off``,
    ``r_off`` where the entry lies below ``off`` (off). False if ``a`` holds a NaN or an
    infinity (nothing is then left to use)."""
    B, n = ew.shape
    for b in range(B):
        for j in range(n + 1):
            x = np.float64(a[b, j])
            if not np.isfinite(x):
                return False
            x = np_clip(x, -1.0, 1.0)
            e = log_scale_exponent(x, off)
            if j < n:
                ew[b, j], w_off[b, j] = e, x < off
            else:
                er[b], r_off[b] = e, x < off
    return True


@jit
def box_levels(scaled, off, out):  # pragma: no cover (compiled)
    """The integer weights of box entries: the log scale's value ``scaled`` rounded to
    the nearest integer (half to even), 0 where the entry is ``off``."""
    flat_s, flat_o, flat = scaled.reshape(-1), off.reshape(-1), out.reshape(-1)
    for i in range(flat.shape[0]):
        flat[i] = 0 if flat_o[i] else np.int64(np.rint(flat_s[i]))


@jit_any_layout()
def reward_perf(active, norm_perf, perf):  # pragma: no cover (compiled)
    """Each tenant's performance as the rewards count it (B, T): its normalised
    performance, at least 1e-6, where ``active``; 1 elsewhere (a log of 0)."""
    B, T = perf.shape
    for b in range(B):
        for t in range(T):
            perf[b, t] = np_maximum(norm_perf[b, t], 1e-6) if active[b, t] else 1.0


@jit_any_layout()
def reward_sums(
    active, perf, log_perf, total, peak, log_geomean, throughput, speedup, harmonic
):  # fmt: skip  # pragma: no cover (compiled)
    """Every reward term (B,) from the active tenants' ``perf`` and its logarithm
    ``log_perf`` (B, T) (:func:`reward_perf`, numpy's log), each sum over the tenants
    in slot order: the mean log (0 with no tenant), the total throughput over the
    machine's ``peak``, the sum of performances and their harmonic mean."""
    B, T = perf.shape
    for b in range(B):
        n, logs, inv, ws = 0, 0.0, 0.0, 0.0
        for t in range(T):
            if active[b, t]:
                n += 1
                logs += log_perf[b, t]
                inv += 1.0 / perf[b, t]
                ws += perf[b, t]
        log_geomean[b] = logs / max(n, 1) if n > 0 else 0.0
        throughput[b] = total[b] / peak[b]
        speedup[b] = ws
        harmonic[b] = n / np_maximum(inv, 1e-12) if n > 0 else 0.0


@jit
def descriptor_rows(
    t, interval_s, present, start_s, stop_s, phase_at, specs, log_dram, log_cxl, log_promote,
    gib_scale, mbps_scale, desc, extra,
):  # fmt: skip  # pragma: no cover (compiled)
    """The ``"full"`` observation's tenant descriptors ``desc`` (B, T, 1 + k) and extra
    globals ``extra`` (B, 4) for the interval after step ``t`` (B,) (it starts at ``t``
    times ``interval_s``).

    A tenant slot runs then where it is ``present`` and started, not stopped (``start_s``,
    ``stop_s`` (T, B)): its row is 1, then its spec of that phase, the phase being the
    last of ``phase_at`` (T, P, B) started by then (its first before it starts), read from
    ``specs`` (T, P, k, B); every other row is 0. The globals: ``log_dram`` and
    ``log_cxl`` (B,, the log2 of 1 + GiB) over ``gib_scale``, ``log_promote`` (B,, the
    log1p of the promotion limit in force) over ``mbps_scale``, and the interval over 10 s.
    """
    T, _, K, B = specs.shape
    for b in range(B):
        now = t[b] * interval_s[b]
        for i in range(T):
            row = desc[b, i]
            if running(present[i, b], start_s[i, b], stop_s[i, b], now):
                ph = phase_now(phase_at, i, b, now)
                row[0] = 1.0
                for j in range(K):
                    row[1 + j] = specs[i, ph, j, b]
            else:
                for j in range(K + 1):
                    row[j] = 0.0
        extra[b, 0] = log_dram[b] / gib_scale
        extra[b, 1] = log_cxl[b] / gib_scale
        extra[b, 2] = log_promote[b] / mbps_scale
        extra[b, 3] = interval_s[b] / 10.0
