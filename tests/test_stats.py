"""Tests for agents.stats: IQM, stratified bootstrap, summaries, ratios, geometric mean."""

from __future__ import annotations

import math

import numpy as np
import pytest

from agents.stats import (
    geometric_mean,
    iqm,
    ratio_to_reference,
    stratified_bootstrap_ci,
    stratified_resample,
    summarize,
)

# ----------------------------------------------------------------------------- IQM


def test_iqm_multiple_of_four_is_mean_of_middle_half() -> None:
    assert iqm(np.arange(1, 9)) == pytest.approx(4.5)  # mean of 3, 4, 5, 6
    assert iqm([8, 1, 7, 2, 6, 3, 5, 4]) == pytest.approx(4.5)  # order does not matter
    # Outliers at both ends are ignored entirely.
    assert iqm([-1e9, 2.0, 3.0, 1e9]) == pytest.approx(2.5)


def test_iqm_fractional_boundary_weights_n5() -> None:
    # n=5: sorted weights (in 1/10) are 0, 3, 4, 3, 0.
    # [0, 0, 1, 5, 9] -> (3*0 + 4*1 + 3*5) / 10 = 1.9 (scipy trim_mean would give 2.0).
    assert iqm([9, 0, 5, 1, 0]) == pytest.approx(1.9)
    assert iqm([1, 2, 3, 4, 100]) == pytest.approx(3.0)


def test_iqm_fractional_boundary_weights_n6_and_small_n() -> None:
    # n=6: weights (in 1/12) are 0, 2, 4, 4, 2, 0.
    # [1, 2, 4, 8, 16, 32] -> (2*2 + 4*4 + 4*8 + 2*16) / 12 = 84 / 12 = 7.
    assert iqm([1, 2, 4, 8, 16, 32]) == pytest.approx(7.0)
    # n=3: weights 1/6, 2/3, 1/6.
    assert iqm([0.0, 6.0, 60.0]) == pytest.approx(0 / 6 + 2 * 6 / 3 + 60 / 6)
    assert iqm([5.0]) == 5.0
    assert iqm([1.0, 3.0]) == pytest.approx(2.0)


def test_iqm_constant_is_exact_and_axis_vectorised() -> None:
    assert iqm(np.full(7, 1.0)) == 1.0
    rng = np.random.default_rng(1)
    x = rng.normal(size=(5, 11))
    rows = iqm(x, axis=1)
    assert rows.shape == (5,)
    np.testing.assert_allclose(rows, [iqm(r) for r in x])
    np.testing.assert_allclose(iqm(x.T, axis=0), rows)


def test_iqm_errors() -> None:
    with pytest.raises(ValueError, match="empty"):
        iqm([])
    with pytest.raises(ValueError, match="non-finite"):
        iqm([1.0, math.nan])


# ----------------------------------------------------------------------------- bootstrap


def test_bootstrap_ci_contains_true_mean_and_narrows_with_more_data() -> None:
    rng = np.random.default_rng(123)
    widths = []
    for n in (30, 300, 3000):
        sample = rng.normal(loc=5.0, scale=2.0, size=n)
        lo, hi = stratified_bootstrap_ci([sample], np.mean, seed=7)
        assert lo < 5.0 < hi
        assert lo < float(np.mean(sample)) < hi
        widths.append(hi - lo)
    assert widths[0] > widths[1] > widths[2]


def test_bootstrap_ci_is_deterministic_for_a_seed() -> None:
    sample = np.random.default_rng(0).normal(size=50)
    a = stratified_bootstrap_ci({"s": sample}, "iqm", seed=3)
    b = stratified_bootstrap_ci({"s": sample}, "iqm", seed=3)
    c = stratified_bootstrap_ci({"s": sample}, "iqm", seed=4)
    assert a == b
    assert a != c


def test_stratified_resample_keeps_strata_and_counts() -> None:
    a = np.array([1.0, 2.0, 3.0])
    b = np.array([100.0, 200.0, 300.0, 400.0, 500.0, 600.0, 700.0])
    rep = stratified_resample([a, b], n_boot=500, seed=0)
    assert rep.shape == (500, 10)
    assert np.isin(rep[:, :3], a).all()
    assert np.isin(rep[:, 3:], b).all()


def test_stratified_ci_never_mixes_strata() -> None:
    # Constant within strata of very different means: a stratified replicate always keeps
    # 3 zeros and 7 hundreds, so its mean is exactly 70; unstratified resampling varies.
    low = np.zeros(3)
    high = np.full(7, 100.0)
    lo, hi = stratified_bootstrap_ci([low, high], np.mean, seed=0)
    assert lo == pytest.approx(70.0) and hi == pytest.approx(70.0)
    ulo, uhi = stratified_bootstrap_ci([np.concatenate([low, high])], np.mean, seed=0)
    assert uhi - ulo > 10.0
    assert (hi - lo) < (uhi - ulo)


def test_bootstrap_validation_errors() -> None:
    with pytest.raises(ValueError, match="no strata"):
        stratified_bootstrap_ci([], np.mean)
    with pytest.raises(ValueError, match="empty"):
        stratified_bootstrap_ci([[1.0, 2.0], []], np.mean)
    with pytest.raises(ValueError, match="confidence"):
        stratified_bootstrap_ci([[1.0, 2.0]], np.mean, confidence=1.5)
    with pytest.raises(ValueError, match="n_boot"):
        stratified_bootstrap_ci([[1.0, 2.0]], np.mean, n_boot=0)
    with pytest.raises(ValueError, match="unknown statistic"):
        stratified_bootstrap_ci([[1.0, 2.0]], "mode")
    with pytest.raises(ValueError, match="one value per replicate"):
        stratified_bootstrap_ci([[1.0, 2.0]], lambda x, axis=-1: np.mean(x))


# ----------------------------------------------------------------------------- summarize


def test_summarize_keys_and_values() -> None:
    values = np.arange(1.0, 9.0)
    strata = np.repeat([0, 1], 4)
    s = summarize(values, strata=strata, seed=0)
    assert set(s) == {"mean", "mean_ci", "iqm", "iqm_ci", "n"}
    assert s["n"] == 8
    assert s["mean"] == pytest.approx(4.5)
    assert s["iqm"] == pytest.approx(4.5)
    assert s["mean_ci"][0] <= s["mean"] <= s["mean_ci"][1]
    assert s["iqm_ci"][0] <= s["iqm"] <= s["iqm_ci"][1]
    assert s == summarize(values, strata=strata, seed=0)


def test_summarize_errors() -> None:
    with pytest.raises(ValueError, match="empty"):
        summarize([])
    with pytest.raises(ValueError, match="one label per value"):
        summarize([1.0, 2.0], strata=[0])


# ----------------------------------------------------------------------------- ratios


def test_ratio_to_reference_paired() -> None:
    ref = np.array([1.0, 2.0, 4.0, 8.0])
    out = ratio_to_reference(ref * 1.5, ref, strata=[0, 0, 1, 1])
    np.testing.assert_allclose(out["ratios"], 1.5)
    assert out["mean"] == pytest.approx(1.5)
    assert out["ci"] == pytest.approx((1.5, 1.5))
    assert out["n"] == 4


def test_ratio_of_reference_to_itself_is_exactly_one() -> None:
    ref = np.random.default_rng(2).uniform(0.1, 3.0, size=20)
    out = ratio_to_reference(ref, ref)
    assert out["mean"] == 1.0
    assert out["ci"] == (1.0, 1.0)


def test_ratio_errors() -> None:
    with pytest.raises(ValueError, match="paired"):
        ratio_to_reference([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="zero"):
        ratio_to_reference([1.0, 2.0], [1.0, 0.0])
    with pytest.raises(ValueError, match="empty"):
        ratio_to_reference([], [])


# ----------------------------------------------------------------------------- geometric mean


def test_geometric_mean() -> None:
    assert geometric_mean([2.0, 8.0]) == pytest.approx(4.0)
    assert geometric_mean([1.0, 1.0, 1.0]) == 1.0
    assert geometric_mean([0.5, 2.0]) == pytest.approx(1.0)


@pytest.mark.parametrize("bad", [[1.0, 0.0], [2.0, -1.0], [math.nan, 1.0]])
def test_geometric_mean_rejects_non_positive(bad: list[float]) -> None:
    with pytest.raises(ValueError, match=r"positive|non-finite"):
        geometric_mean(bad)


def test_geometric_mean_rejects_empty() -> None:
    with pytest.raises(ValueError, match="empty"):
        geometric_mean([])
