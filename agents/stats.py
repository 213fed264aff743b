"""Robust aggregate statistics for comparing placement policies (numpy only).

These are the statistics ``evaluate.py`` reports, following the recommendations of
Agarwal et al. 2021, "Deep Reinforcement Learning at the Edge of the Statistical
Precipice" (the ``rliable`` library):

* :func:`iqm` -- the interquartile mean, a point estimate that is robust to outlier
  episodes yet uses more of the data than the median;
* :func:`stratified_bootstrap_ci` -- percentile bootstrap confidence intervals where
  resampling is done with replacement *within* each stratum (scenario or seed), so
  every bootstrap replicate keeps the design of the experiment;
* :func:`summarize` -- mean and IQM with their intervals for one set of runs;
* :func:`ratio_to_reference` -- paired per-(seed, episode) ratios of a policy to a
  reference policy (e.g. a kernel heuristic) with a bootstrap interval on the mean
  ratio;
* :func:`geometric_mean` -- the aggregate of ratios across scenarios.

All functions reject empty and non-finite input with a :class:`ValueError` rather
than returning ``nan``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "Statistic",
    "geometric_mean",
    "iqm",
    "ratio_to_reference",
    "stratified_bootstrap_ci",
    "stratified_resample",
    "summarize",
]

#: A statistic that reduces along an axis: called as ``statistic(x, axis=-1)``.
#: ``np.mean``, ``np.median`` and :func:`iqm` all qualify.
Statistic = Callable[..., Any]


def _as_finite_1d(x: ArrayLike, name: str = "x") -> NDArray[np.float64]:
    """Convert ``x`` to a non-empty finite 1-D float array or raise ValueError."""
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} is empty: need at least one value")
    if not np.all(np.isfinite(arr)):
        bad = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise ValueError(f"{name} contains a non-finite value ({arr[bad]!r} at index {bad})")
    return arr


def _iqm_units(n: int) -> NDArray[np.float64]:
    """Integer weights (in units of 1/(4n)) of each sorted element in the IQM of n values.

    Sorted element ``i`` owns the probability interval ``[i/n, (i+1)/n]``; its weight is
    the length of that interval's overlap with ``[1/4, 3/4]``.  Scaled by ``4n`` both
    intervals have integer end points, so the weights are exact integers summing to
    ``2n``.
    """
    i = np.arange(n, dtype=np.int64)
    units = np.minimum(4 * i + 4, 3 * n) - np.maximum(4 * i, n)
    return np.clip(units, 0, None).astype(np.float64)


def iqm(x: ArrayLike, axis: int | None = None) -> Any:
    """Interquartile mean: the mean of the middle 50% of the values.

    What it is for: the robust point estimate rliable recommends for aggregate RL
    performance (less sensitive to outlier episodes than the mean, less noisy than the
    median).

    Semantics: the mean of the empirical distribution restricted to its quantile range
    ``[0.25, 0.75]``.  Each sorted value carries probability mass ``1/n``; values that
    straddle a quartile are weighted by the fraction of their mass inside the range,
    so the result is exact for every ``n`` (``n = 1`` gives the value itself, ``n = 2``
    the mean).  When ``n`` is a multiple of 4 this equals
    ``scipy.stats.trim_mean(x, 0.25)``, which rliable uses; for other ``n`` scipy drops
    ``floor(n/4)`` whole values from each end instead (e.g. for ``[0, 0, 1, 5, 9]`` this
    function gives 1.9, scipy 2.0).

    Args:
        x: values; with ``axis=None`` they are flattened.
        axis: axis to reduce; ``None`` reduces all values to a float.

    Returns:
        A float when ``axis`` is ``None`` (or the input is 1-D), otherwise an array with
        ``axis`` removed.

    Raises:
        ValueError: if there are no values along the axis or any value is not finite.
    """
    arr = np.asarray(x, dtype=np.float64)
    if axis is None:
        arr = arr.reshape(-1)
        axis = 0
    if arr.ndim == 0:
        arr = arr.reshape(1)
        axis = 0
    arr = np.moveaxis(arr, axis, -1)
    n = arr.shape[-1]
    if n == 0 or arr.size == 0:
        raise ValueError("iqm of an empty input is undefined: need at least one value")
    if not np.all(np.isfinite(arr)):
        raise ValueError("iqm input contains non-finite values")
    units = _iqm_units(n)
    out = np.sum(np.sort(arr, axis=-1) * units, axis=-1) / np.sum(units)
    if out.ndim == 0:
        return float(out)
    return out


def _resolve_statistic(statistic: Statistic | str) -> Statistic:
    """Map the names ``"mean"``, ``"iqm"`` and ``"median"`` to functions."""
    if isinstance(statistic, str):
        table: dict[str, Statistic] = {"mean": np.mean, "iqm": iqm, "median": np.median}
        try:
            return table[statistic]
        except KeyError:
            raise ValueError(
                f"unknown statistic {statistic!r}; use one of {sorted(table)} or a callable"
            ) from None
    if not callable(statistic):
        raise TypeError(f"statistic must be callable or a name, got {type(statistic).__name__}")
    return statistic


def _strata_list(
    samples_by_stratum: Mapping[Any, ArrayLike] | Sequence[ArrayLike],
) -> list[NDArray[np.float64]]:
    """Validate strata (a mapping or a sequence of 1-D samples) into a list of arrays."""
    if isinstance(samples_by_stratum, Mapping):
        items = list(samples_by_stratum.items())
    else:
        items = list(enumerate(samples_by_stratum))
    if not items:
        raise ValueError("no strata given: need at least one non-empty stratum")
    return [_as_finite_1d(v, name=f"stratum {k!r}") for k, v in items]


def stratified_resample(
    samples_by_stratum: Mapping[Any, ArrayLike] | Sequence[ArrayLike],
    n_boot: int = 2000,
    seed: int | np.random.Generator = 0,
) -> NDArray[np.float64]:
    """Draw stratified bootstrap replicates of the pooled sample.

    What it is for: the resampling step of :func:`stratified_bootstrap_ci`, exposed so
    callers (and tests) can inspect or reuse the replicates.

    Each stratum of size ``n_s`` is resampled with replacement to ``n_s`` values from
    itself only, so every replicate keeps the per-stratum counts.  Columns of the result
    are laid out stratum by stratum in the input order (the first ``n_0`` columns come
    from stratum 0, and so on).

    Returns:
        Array of shape ``(n_boot, sum(n_s))``.
    """
    if int(n_boot) < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    strata = _strata_list(samples_by_stratum)
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    blocks = []
    for values in strata:  # loop over strata only, never over resamples or elements
        idx = rng.integers(0, values.size, size=(int(n_boot), values.size))
        blocks.append(values[idx])
    return np.concatenate(blocks, axis=1)


def stratified_bootstrap_ci(
    samples_by_stratum: Mapping[Any, ArrayLike] | Sequence[ArrayLike],
    statistic: Statistic | str = np.mean,
    n_boot: int = 2000,
    confidence: float = 0.95,
    seed: int | np.random.Generator = 0,
) -> tuple[float, float]:
    """Percentile stratified-bootstrap confidence interval of ``statistic``.

    What it is for: interval estimates of aggregate performance that respect the
    experimental design, as in rliable -- strata are scenarios or seeds, and each
    bootstrap replicate resamples with replacement within every stratum (so a replicate
    never has more runs of one scenario/seed than the experiment did).

    The computation is vectorized: all ``n_boot`` replicates are drawn as one
    ``(n_boot, N)`` array and ``statistic`` is evaluated once on it along the last axis
    (memory is ``O(n_boot * N)``).

    Args:
        samples_by_stratum: a mapping ``stratum -> values`` or a sequence of 1-D value
            arrays, one per stratum; each must be non-empty and finite.
        statistic: reduction called as ``statistic(x, axis=-1)`` on the replicate array,
            returning one value per replicate (``np.mean``, ``np.median``, :func:`iqm`),
            or one of the names ``"mean"``, ``"iqm"``, ``"median"``.
        n_boot: number of bootstrap replicates.
        confidence: coverage of the interval, in (0, 1).
        seed: seed (or generator) of the resampling; the same seed gives the same interval.

    Returns:
        ``(low, high)``: the ``(1-confidence)/2`` and ``(1+confidence)/2`` percentiles of
        the bootstrap distribution of the statistic.

    Raises:
        ValueError: for no strata, an empty or non-finite stratum, ``n_boot < 1``, or a
            confidence outside (0, 1).
    """
    if not 0.0 < float(confidence) < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    fn = _resolve_statistic(statistic)
    replicates = stratified_resample(samples_by_stratum, n_boot=n_boot, seed=seed)
    boot = np.asarray(fn(replicates, axis=-1), dtype=np.float64)
    if boot.shape != (replicates.shape[0],):
        raise ValueError(
            "statistic must reduce along axis=-1 to one value per replicate; "
            f"got shape {boot.shape} for input shape {replicates.shape}"
        )
    alpha = 1.0 - float(confidence)
    low, high = np.quantile(boot, [alpha / 2.0, 1.0 - alpha / 2.0])
    return float(low), float(high)


def _group_by_strata(
    values: NDArray[np.float64], strata: ArrayLike | None
) -> list[NDArray[np.float64]]:
    """Split ``values`` by the aligned labels ``strata`` (one stratum if ``None``)."""
    if strata is None:
        return [values]
    labels = np.asarray(strata)
    if labels.shape != values.shape:
        raise ValueError(
            f"strata must have one label per value: {labels.shape} labels for {values.shape} values"
        )
    _, inverse = np.unique(labels, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    counts = np.bincount(inverse)
    return np.split(values[order], np.cumsum(counts)[:-1])


def summarize(
    values: ArrayLike,
    strata: ArrayLike | None = None,
    n_boot: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, Any]:
    """Mean and IQM of ``values`` with stratified-bootstrap confidence intervals.

    What it is for: the per-(scenario, policy, metric) cell of an evaluation report.

    Args:
        values: one value per run (episode).
        strata: optional label per value (e.g. the seed that produced it); resampling is
            done within each label.  ``None`` treats all values as one stratum.
        n_boot, confidence, seed: see :func:`stratified_bootstrap_ci`.

    Returns:
        ``{"mean": float, "mean_ci": (low, high), "iqm": float, "iqm_ci": (low, high),
        "n": int}``.
    """
    arr = _as_finite_1d(values, name="values")
    groups = _group_by_strata(arr, strata)
    return {
        "mean": float(np.mean(arr)),
        "mean_ci": stratified_bootstrap_ci(groups, np.mean, n_boot, confidence, seed),
        "iqm": float(iqm(arr)),
        "iqm_ci": stratified_bootstrap_ci(groups, iqm, n_boot, confidence, seed),
        "n": int(arr.size),
    }


def ratio_to_reference(
    values: ArrayLike,
    ref_values: ArrayLike,
    strata: ArrayLike | None = None,
    n_boot: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, Any]:
    """Paired ratios ``values[i] / ref_values[i]`` and a bootstrap CI on their mean.

    What it is for: "how much better than the kernel heuristic" per scenario.  The two
    arrays must be aligned so that index ``i`` is the same (seed, episode) for both
    policies -- pairing removes the variance shared by both runs of an episode.

    Args:
        values: the policy's metric, one value per (seed, episode).
        ref_values: the reference policy's metric, aligned with ``values``; must be
            non-zero.
        strata: optional label per pair (e.g. the seed) to resample within.
        n_boot, confidence, seed: see :func:`stratified_bootstrap_ci`.

    Returns:
        ``{"ratios": ndarray, "mean": float, "ci": (low, high), "n": int}``.  The ratio
        of a policy to itself is exactly 1.

    Raises:
        ValueError: for empty, misaligned or non-finite input, or a zero reference value.
    """
    num = _as_finite_1d(values, name="values")
    den = _as_finite_1d(ref_values, name="ref_values")
    if num.shape != den.shape:
        raise ValueError(
            f"values and ref_values must be paired: got {num.size} and {den.size} values"
        )
    if np.any(den == 0.0):
        bad = int(np.flatnonzero(den == 0.0)[0])
        raise ValueError(f"ref_values contains zero at index {bad}: the ratio is undefined")
    ratios = num / den
    groups = _group_by_strata(ratios, strata)
    return {
        "ratios": ratios,
        "mean": float(np.mean(ratios)),
        "ci": stratified_bootstrap_ci(groups, np.mean, n_boot, confidence, seed),
        "n": int(ratios.size),
    }


def geometric_mean(x: ArrayLike) -> float:
    """Geometric mean ``exp(mean(log x))`` of strictly positive values.

    What it is for: aggregating ratios to a reference across scenarios, where the
    arithmetic mean would let one scenario with a large ratio dominate.

    Raises:
        ValueError: for empty input or any value that is zero, negative or not finite.
    """
    arr = _as_finite_1d(x, name="geometric_mean input")
    if np.any(arr <= 0.0):
        bad = int(np.flatnonzero(arr <= 0.0)[0])
        raise ValueError(
            f"geometric mean needs strictly positive values; got {arr[bad]!r} at index {bad}"
        )
    return float(np.exp(np.mean(np.log(arr))))
