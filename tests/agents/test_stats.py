"""Tests for agents.stats: IQM, (stratified) bootstrap intervals, ratios, geometric means.

The interval tests run on episode values from :func:`agents.rollout.rollout`, the
values the evaluation reports; the arithmetic tests use small hand-made arrays.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import pytest
import scipy.stats

from agents.stats import (
    _RNG_KEYWORD,
    bootstrap_ci,
    geomean_ratio,
    geometric_mean,
    iqm,
    ratio_of_means,
    ratio_to_reference,
    stratified_bootstrap_ci,
    summarize,
)


@cache
def episode_values(policy: str, scenario: str, n: int, seed: int = 0) -> np.ndarray:
    """geomean_perf of ``n`` episodes of ``policy`` on ``scenario`` (seeds seed..seed+n-1)."""
    from agents.rollout import rollout

    recs = rollout(policy, scenario, n, seed=seed)
    assert [r["seed"] for r in recs] == list(range(seed, seed + n))
    return np.array([r["metrics"]["geomean_perf"] for r in recs])


# ----------------------------------------------------------------------------- IQM


def test_iqm_is_scipy_trim_mean() -> None:
    assert iqm(np.arange(1, 9)) == pytest.approx(4.5)  # mean of 3, 4, 5, 6
    assert iqm([8, 1, 7, 2, 6, 3, 5, 4]) == pytest.approx(4.5)  # order does not matter
    assert iqm([-1e9, 2.0, 3.0, 1e9]) == pytest.approx(2.5)  # outliers ignored
    # n=5: floor(5/4) = 1 value dropped at each end -> mean(0, 1, 5)
    assert iqm([9, 0, 5, 1, 0]) == pytest.approx(2.0)
    assert iqm([5.0]) == 5.0 and iqm([1.0, 3.0]) == pytest.approx(2.0)
    x = np.random.default_rng(0).normal(size=37)
    assert iqm(x) == scipy.stats.trim_mean(x, 0.25)


def test_iqm_axis_vectorised() -> None:
    x = np.random.default_rng(1).normal(size=(5, 11))
    rows = iqm(x, axis=1)
    assert rows.shape == (5,)
    np.testing.assert_allclose(rows, [iqm(r) for r in x])
    np.testing.assert_allclose(iqm(x.T, axis=0), rows)


def test_iqm_errors() -> None:
    with pytest.raises(ValueError, match="empty"):
        iqm([])
    with pytest.raises(ValueError, match="non-finite"):
        iqm([1.0, math.nan])


# ----------------------------------------------------------------------------- intervals


@pytest.mark.parametrize("method", ["percentile", "BCa", "basic"])
def test_interval_on_episodes_is_scipy_bootstrap(method: str) -> None:
    vals = episode_values("random", "kv-store", 16)
    lo, hi = stratified_bootstrap_ci([vals], np.mean, n_boot=999, seed=4, method=method)
    ref = scipy.stats.bootstrap(
        (vals,),
        np.mean,
        n_resamples=999,
        method=method,
        **{_RNG_KEYWORD: np.random.default_rng(4)},  # rng= from scipy 1.15
    ).confidence_interval
    assert (lo, hi) == pytest.approx((ref.low, ref.high), rel=1e-12)
    assert lo < float(np.mean(vals)) < hi


def test_interval_contains_estimate_and_narrows_with_more_episodes() -> None:
    widths = {}
    for stat in (np.mean, iqm):
        for n in (4, 64):
            vals = episode_values("random", "kv-store", n)
            point = stat(vals)
            lo, hi = stratified_bootstrap_ci([vals], stat, seed=0)
            assert lo <= point <= hi
            widths[stat, n] = hi - lo
        assert widths[stat, 64] < 0.6 * widths[stat, 4]


def test_interval_is_deterministic_for_a_seed() -> None:
    vals = episode_values("random", "kv-store", 16)
    a = stratified_bootstrap_ci({"kv-store": vals}, iqm, seed=3)
    assert a == stratified_bootstrap_ci({"kv-store": vals}, iqm, seed=3)
    assert a != stratified_bootstrap_ci({"kv-store": vals}, iqm, seed=4)


def test_stratified_interval_never_mixes_strata() -> None:
    # two scenarios of very different level: resampling within each keeps 4 episodes
    # of each in every replicate, so the pooled mean varies only with the noise inside
    # a scenario; pooled (one-stratum) resampling also varies the mix
    kv = episode_values("random", "kv-store", 4)
    big = kv + 10.0
    strat = stratified_bootstrap_ci([kv, big], np.mean, seed=0)
    pooled = stratified_bootstrap_ci([np.concatenate([kv, big])], np.mean, seed=0)
    assert strat[1] - strat[0] < 0.1 * (pooled[1] - pooled[0])
    assert strat[0] <= np.mean([*kv, *big]) <= strat[1]
    # constant strata never move, whatever their size (scipy rejects size-1 samples)
    assert stratified_bootstrap_ci([np.zeros(3), np.full(7, 100.0), [5.0]], np.mean) == (
        pytest.approx(705 / 11),
        pytest.approx(705 / 11),
    )


def test_bootstrap_ci_statistic_of_strata() -> None:
    # the statistic sees the strata separately: the difference of two scenario means
    a = episode_values("random", "kv-store", 16)
    b = episode_values("random", "kv-store", 16, seed=100)
    lo, hi = bootstrap_ci([a, b], lambda s: np.mean(s[0], axis=-1) - np.mean(s[1], axis=-1))
    assert lo <= np.mean(a) - np.mean(b) <= hi


def test_interval_validation_errors() -> None:
    with pytest.raises(ValueError, match="no strata"):
        stratified_bootstrap_ci([], np.mean)
    with pytest.raises(ValueError, match="empty"):
        stratified_bootstrap_ci([[1.0, 2.0], []], np.mean)
    with pytest.raises(ValueError, match="non-finite"):
        stratified_bootstrap_ci([[1.0, math.inf]], np.mean)
    with pytest.raises(ValueError, match="confidence"):
        stratified_bootstrap_ci([[1.0, 2.0]], np.mean, confidence=1.5)
    with pytest.raises(ValueError, match="n_boot"):
        stratified_bootstrap_ci([[1.0, 2.0]], np.mean, n_boot=0)
    with pytest.raises(ValueError, match="method"):
        stratified_bootstrap_ci([[1.0, 2.0]], np.mean, method="normal")
    with pytest.raises(ValueError, match="one value per replicate"):
        stratified_bootstrap_ci([[1.0, 2.0]], lambda x, axis=-1: np.asarray(x))


# ----------------------------------------------------------------------------- summarize


def test_summarize_episodes() -> None:
    vals = episode_values("random", "kv-store", 16)
    s = summarize(vals, seed=0)
    assert set(s) == {"mean", "mean_ci", "iqm", "iqm_ci", "n", "n_strata"}
    assert s["n"] == 16 and s["n_strata"] == 1
    assert s["mean"] == pytest.approx(float(np.mean(vals)))
    assert s["iqm"] == scipy.stats.trim_mean(vals, 0.25)
    assert s["mean_ci"][0] <= s["mean"] <= s["mean_ci"][1]
    assert s["iqm_ci"][0] <= s["iqm"] <= s["iqm_ci"][1]
    assert s == summarize(vals, seed=0)
    assert summarize(vals, strata=np.repeat([0, 1], 8))["n_strata"] == 2


def test_summarize_errors() -> None:
    with pytest.raises(ValueError, match="empty"):
        summarize([])
    with pytest.raises(ValueError, match="one label per value"):
        summarize([1.0, 2.0], strata=[0])


# ----------------------------------------------------------------------------- ratios


def test_ratio_of_a_policy_to_itself_is_exactly_one() -> None:
    ref = episode_values("random", "kv-store", 16)
    out = ratio_to_reference(ref, ref)
    assert out["mean"] == 1.0
    assert out["ci"] == (1.0, 1.0)  # zero width


def test_ratio_to_reference_is_paired() -> None:
    ref = episode_values("dram-first", "kv-store", 16)
    pol = episode_values("random", "kv-store", 16)
    out = ratio_to_reference(pol, ref)
    np.testing.assert_array_equal(out["ratios"], pol / ref)
    assert out["mean"] == pytest.approx(float(np.mean(pol / ref)))
    assert out["ci"][0] <= out["mean"] <= out["ci"][1]
    # a constant factor is a constant ratio: the interval has no width
    scaled = ratio_to_reference(ref * 1.5, ref)
    assert scaled["ci"] == pytest.approx((1.5, 1.5))


def test_ratio_errors() -> None:
    with pytest.raises(ValueError, match="paired"):
        ratio_to_reference([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="zero"):
        ratio_to_reference([1.0, 2.0], [1.0, 0.0])
    with pytest.raises(ValueError, match="empty"):
        ratio_to_reference([], [])


def test_ratio_of_means_is_the_ratio_of_the_means_paired() -> None:
    ref = episode_values("dram-first", "kv-store", 16)
    pol = episode_values("random", "kv-store", 16)
    out = ratio_of_means(pol, ref)
    assert out["mean"] == pytest.approx(float(pol.mean() / ref.mean())) and out["n"] == 16
    assert out["ci"][0] < out["mean"] < out["ci"][1]
    assert ratio_of_means(ref * 1.5, ref)["ci"] == pytest.approx((1.5, 1.5))
    # pairing: a shared per-episode swing cancels, so the paired interval is the narrower
    rng = np.random.default_rng(3)
    swing = rng.uniform(0.2, 1.0, 64)
    a, b = swing * rng.normal(1.0, 0.01, 64), swing * rng.normal(1.02, 0.01, 64)
    lo, hi = ratio_of_means(a, b)["ci"]
    ulo, uhi = bootstrap_ci([a, b], lambda st: st[0].mean(axis=-1) / st[1].mean(axis=-1))
    assert lo < a.mean() / b.mean() < hi and ulo < lo and hi < uhi
    assert hi - lo < (uhi - ulo) / 5
    with pytest.raises(ValueError, match="not aligned"):
        ratio_of_means([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="reference mean must be positive"):
        ratio_of_means([1.0, 2.0], [0.0, 0.0])


# ----------------------------------------------------------------------------- geometric means


def test_geometric_mean() -> None:
    assert geometric_mean([2.0, 8.0]) == pytest.approx(4.0)
    assert geometric_mean([1.0, 1.0, 1.0]) == 1.0
    assert geometric_mean([0.5, 2.0]) == pytest.approx(1.0)


@pytest.mark.parametrize("bad", [[1.0, 0.0], [2.0, -1.0], [math.nan, 1.0], []])
def test_geometric_mean_rejects_bad_input(bad: list[float]) -> None:
    with pytest.raises(ValueError, match=r"positive|non-finite|empty"):
        geometric_mean(bad)


def test_geomean_ratio_is_stratified_by_scenario() -> None:
    kv = episode_values("random", "kv-store", 8) / episode_values("dram-first", "kv-store", 8)
    co = episode_values("random", "colocation", 8) / episode_values("dram-first", "colocation", 8)
    g = geomean_ratio({"kv-store": kv, "colocation": co}, seed=0)
    assert g["n_strata"] == 2 and g["n"] == 16
    assert g["geomean"] == pytest.approx(math.sqrt(np.mean(kv) * np.mean(co)))
    assert g["ci"][0] <= g["geomean"] <= g["ci"][1]
    ones = geomean_ratio([np.ones(4), np.ones(3)])
    assert ones["geomean"] == 1.0 and ones["ci"] == (1.0, 1.0)
    with pytest.raises(ValueError, match="positive"):
        geomean_ratio([[1.0, 2.0], [0.0, 0.0]])
