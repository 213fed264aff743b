"""The sums of the final placement a step reports and the fixed point reads, compiled:
each tenant's GiB per node and per bucket, its resident set, its accesses per node (the
fixed point's access shares), and the DRAM parts of both (:func:`envs.model.step`).

One pass over the placement instead of one per sum and a (T, K, N, B) temporary. As in
:mod:`envs.reclaim`, the batch runs ``_W`` elements at a time in the lanes of small
arrays, every loop over lanes innermost over 1-D views, each sum in the order numpy's
fixed-order sums (:func:`envs.solver.lsum`) take: batched and single runs agree.
"""

from __future__ import annotations

import numpy as np

from envs.jit import inline, jit

_W = 256  # lanes: batch elements side by side


# --------------------------------------------------------------------------- lane sums
# (shared by the compiled phases: the placement's sums in numpy's order)


@inline
def node_pages(place, t, n, b0, nb, out):  # pragma: no cover (compiled)
    """``out`` (W,): tenant ``t``'s GiB on node ``n`` in elements ``b0 ..`` of ``place``
    (T, K, N, B), its buckets summed in order."""
    K = place.shape[1]
    e = b0 + nb
    src = place[t, 0, n, b0:e]
    for i in range(nb):
        out[i] = src[i]
    for k in range(1, K):
        src = place[t, k, n, b0:e]
        for i in range(nb):
            out[i] = out[i] + src[i]


@inline
def node_sum(x, t, b0, nb, out):  # pragma: no cover (compiled)
    """``out`` (W,): row ``t`` of ``x`` (T, N, B) in elements ``b0 ..`` summed over the
    nodes in order (as :func:`envs.solver.lsum` adds them)."""
    for n in range(x.shape[1]):
        src = x[t, n, b0 : b0 + nb]
        for i in range(nb):
            out[i] = src[i] if n == 0 else out[i] + src[i]


@inline
def dram_sum(x, t, x0, is_cxl, b0, nb, out):  # pragma: no cover (compiled)
    """``out`` (W,): row ``t`` of ``x`` (T, N, ...) summed over the nodes in order, each
    times 1 where the node is DRAM in element ``b0 + i`` and 0 where CXL (numpy's sum of
    ``x * is_dram``); ``x`` read from column ``x0`` (0 for lanes, ``b0`` for the batch)."""
    N = x.shape[1]
    for n in range(N):
        src, cx = x[t, n, x0 : x0 + nb], is_cxl[n, b0 : b0 + nb]
        for i in range(nb):
            v = src[i] * (0.0 if cx[i] else 1.0)
            out[i] = v if n == 0 else out[i] + v


# --------------------------------------------------------------------------- the step's sums


@jit
def placement_sums(  # pragma: no cover (compiled)
    place, access_share, phase, active, is_cxl,
    tenant_node, rss, tenant_bucket, node_share, dram_share, dram_res, used, resident,
):  # fmt: skip
    """Of ``place`` (T, K, N, B), written: ``tenant_node`` (T, N, B) GiB per node,
    ``rss`` (T, B) their sum, ``tenant_bucket`` (T, K, B) GiB per bucket, ``node_share``
    (T, N, B) the share of each tenant's accesses each node serves (its buckets' shares
    of the phase, ``access_share`` (T, P, K, B), spread over their pages; zero for an
    inactive tenant), ``dram_share`` and ``dram_res`` (T, B) their DRAM parts, ``used``
    (N, B) GiB per node and ``resident`` (T, B) the sum of the buckets."""
    T, K, N, B = place.shape
    density = np.empty((K, _W))
    for b0 in range(0, B, _W):
        nb = min(_W, B - b0)
        e = b0 + nb
        for t in range(T):
            ph, on = phase[t, b0:e], active[t, b0:e]
            for n in range(N):
                node_pages(place, t, n, b0, nb, tenant_node[t, n, b0:e])
            node_sum(tenant_node, t, b0, nb, rss[t, b0:e])
            res = resident[t, b0:e]
            for k in range(K):
                acc, d = tenant_bucket[t, k, b0:e], density[k]
                for n in range(N):
                    src = place[t, k, n, b0:e]
                    for i in range(nb):
                        acc[i] = src[i] if n == 0 else acc[i] + src[i]
                for i in range(nb):
                    d[i] = access_share[t, ph[i], k, b0 + i] / max(acc[i], 1e-300)
                    res[i] = acc[i] if k == 0 else res[i] + acc[i]
            for n in range(N):
                ns = node_share[t, n, b0:e]
                for k in range(K):
                    src, d = place[t, k, n, b0:e], density[k]
                    for i in range(nb):
                        x = src[i] * d[i]
                        ns[i] = x if k == 0 else ns[i] + x
                for i in range(nb):
                    ns[i] = ns[i] if on[i] else 0.0
            dram_sum(node_share, t, b0, is_cxl, b0, nb, dram_share[t, b0:e])
            dram_sum(tenant_node, t, b0, is_cxl, b0, nb, dram_res[t, b0:e])
        for n in range(N):
            u = used[n, b0:e]
            for t in range(T):
                src = tenant_node[t, n, b0:e]
                for i in range(nb):
                    u[i] = src[i] if t == 0 else u[i] + src[i]
