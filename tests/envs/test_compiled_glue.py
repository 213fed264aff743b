"""The compiled glue of one step (issue #27): each kernel gives, bit for bit, what the
numpy expression it replaced gives, on random inputs with the edge values in them
(NaN, -0.0, all-zero weights, inactive tenants, a batch of one and of many)."""

from __future__ import annotations

import numpy as np
import pytest

from envs import allocation, encoding, interval
from envs.kernel import GB_PER_GIB, PAGES_PER_GIB
from envs.rng import lognormal32, uniform
from envs.spaces import MBPS_SCALE


def _same(a: np.ndarray, b: np.ndarray) -> None:
    """Equal as bits: the same values, NaN where NaN, the same sign of every zero."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype
    assert np.array_equal(a.view(np.uint8), np.ascontiguousarray(b).view(np.uint8))


@pytest.mark.parametrize("B", [1, 7, 300])
def test_lognormal_noise_is_numpys_box_muller_in_float32(B: int) -> None:
    rng = np.random.default_rng(B)
    T = 4
    key = rng.integers(0, 2**63, B, dtype=np.uint64)
    t = rng.integers(0, 10_000, B)
    sigma = rng.choice([0.0, 0.1, 0.5, 1.5], B)
    got = lognormal32(key, t, T, sigma, 11)
    # the numpy expression it replaced: Box-Muller in float32, then exp(s z - s^2 / 2)
    counter = t.astype(np.uint64) * np.uint64(T) + np.arange(T, dtype=np.uint64)[:, None]
    u1 = uniform(key, counter, 11).astype(np.float32)
    u2 = uniform(key, counter, 12).astype(np.float32)
    z = np.sqrt(np.float32(-2.0) * np.log(u1)) * np.cos(np.float32(2.0 * np.pi) * u2)
    s = sigma.astype(np.float32)
    want = np.exp(s * z - np.float32(0.5) * s * s).astype(float)
    _same(got, want)
    # each element's numbers are its own: the same element alone gives the same
    _same(lognormal32(key[-1:], t[-1:], T, sigma[-1:], 11), want[:, -1:])


@pytest.mark.parametrize("B", [1, 300])
@pytest.mark.parametrize("policy", [False, True])
def test_weights_in_force_are_the_fractions_numpy_gave(B: int, policy: bool) -> None:
    rng = np.random.default_rng(B + policy)
    T, N = 3, 4
    aw = rng.choice([0.0, 1.0, 3.0, 255.0], (T, N, B))
    aw[0, :, : B // 2 + 1] = 0.0  # all-zero rows: the mempolicy or local-first
    loc1h = (rng.integers(0, N, (T, 1, B)) == np.arange(N)[:, None]).astype(float)
    on = rng.random((T, 1, B)) < 0.5
    frac = rng.random((T, N, B))
    active = rng.random((T, B)) < 0.7
    prev = rng.random((T, N, B))
    out = np.empty((T, N, B))
    empty_on, empty_w = np.zeros((0, 0, 0), bool), np.zeros((0, 0, 0))
    allocation.weights_in_force(
        aw, loc1h, policy, on if policy else empty_on, frac if policy else empty_w,
        active, prev, out,
    )  # fmt: skip
    tot = aw[:, 0] + aw[:, 1] + aw[:, 2] + aw[:, 3]
    onehot = np.where(on, frac, loc1h) if policy else loc1h
    w = np.where(tot[:, None] > 0, aw / np.where(tot > 0, tot, 1.0)[:, None], onehot)
    _same(out, np.where(active[:, None], w, prev))


@pytest.mark.parametrize("B", [1, 300])
def test_migration_cost_is_the_numpy_expression(B: int) -> None:
    rng = np.random.default_rng(B)
    T, N, P = 3, 4, 2
    moved = [rng.choice([0.0, 0.5, 3.0], (N, B)) for _ in range(4)]
    promo_t = rng.choice([0.0, 0.01, 1.0, 50.0, np.nan], (T, B))
    threads = rng.choice([1.0, 4.0, 32.0], (T, P, B))
    phase = rng.integers(0, P, (T, B))
    cpu_us = rng.choice([0.0, 10.0, 40.0], B)
    dt = rng.choice([0.5, 1.0, 2.0], B)
    rd, wr, loss = np.empty((N, B)), np.empty((N, B)), np.empty((T, B))
    interval.migration_cost(
        *moved, promo_t, threads, phase, cpu_us, GB_PER_GIB, PAGES_PER_GIB, dt, rd, wr, loss
    )
    to_gbps = GB_PER_GIB / dt
    _same(rd, (moved[0] + moved[1]) * to_gbps)
    _same(wr, (moved[2] + moved[3]) * to_gbps)
    th = np.take_along_axis(threads, phase[:, None], axis=1)[:, 0]
    want = np.clip(promo_t * PAGES_PER_GIB * cpu_us * 1e-6 / (th * dt), 0.0, 0.9)
    _same(loss, want)


@pytest.mark.parametrize("B", [1, 300])
def test_reward_sums_are_the_numpy_expressions(B: int) -> None:
    rng = np.random.default_rng(B)
    T = 5
    active = rng.random((T, B)).T < 0.6  # batch-first views of batch-last arrays, as given
    active[0] = False  # an element with no tenant
    norm = rng.choice([0.0, 1e-9, 0.3, 1.0, 2.5], (T, B)).T
    perf = np.empty((B, T))
    encoding.reward_perf(active, norm, perf)
    _same(perf, np.where(active, np.maximum(norm, 1e-6), 1.0))
    total, peak = rng.random(B) * 100, rng.random(B) * 300 + 1
    got = [np.empty(B) for _ in range(4)]
    encoding.reward_sums(active, perf, np.log(perf), total, peak, *got)
    n = active.sum(1)
    logs = np.where(active, np.log(perf), 0.0).sum(1)
    inv = np.where(active, 1.0 / perf, 0.0).sum(1)
    _same(got[0], np.where(n > 0, logs / np.maximum(n, 1), 0.0))
    _same(got[1], total / peak)
    _same(got[2], np.where(active, perf, 0.0).sum(1))
    _same(got[3], np.where(n > 0, n / np.maximum(inv, 1e-12), 0.0))


def test_the_observation_pass_clips_as_np_clip_does() -> None:
    # one basic row after an interval, with entries below 0 (a negative weight, -0.0),
    # above 1 and NaN: the pass clips like np.clip (NaN and -0.0 stay)
    B, T, N = 1, 1, 2
    size = 3 * N + T * (6 + N) + 3
    obs = np.empty((B, size), dtype=np.float32)
    node = np.array([[2.0, np.nan]])
    tenant = np.array([[0.5]])
    weights = np.array([[[-0.0, -3.0]]])
    promo, demo = np.log1p(np.array([1e9])), np.log1p(np.array([0.0]))
    encoding.fill_observation(
        obs, True, node, node, np.ones((B, N)), node, np.ones((B, N)), np.ones((B, T), bool),
        tenant, tenant, tenant, tenant, tenant, np.ones(B), tenant, promo, demo, MBPS_SCALE,
        weights, np.array([3]), np.array([100]), np.ones((B, T), bool), tenant,
        np.zeros((B, T, 0)), np.zeros((B, 0)),
    )  # fmt: skip
    assert obs[0, 0] == 1.0 and np.isnan(obs[0, 3])  # utilisation 2 clipped, NaN kept
    w = obs[0, 3 * N + 6 : 3 * N + 6 + N]
    assert w[0] == 0.0 and np.signbit(w[0]) and w[1] == 0.0 and not np.signbit(w[1])
    assert obs[0, -3] == 1.0 and obs[0, -2] == 0.0  # the migration entries over their scale
    finite = obs[np.isfinite(obs)]
    assert ((finite >= 0.0) & (finite <= 1.0)).all()
