"""Robust statistics and bootstrap confidence intervals for comparing placement policies.

The statistics ``evaluate.py`` reports, after Agarwal et al. 2021, "Deep Reinforcement
Learning at the Edge of the Statistical Precipice" (``rliable``), computed with
``scipy.stats``: the point estimates (:func:`iqm`, the interquartile mean;
:func:`geometric_mean`), the interval engine (:func:`bootstrap_ci`: a
``scipy.stats.bootstrap`` interval of a statistic of several strata, each stratum
resampled with replacement from itself only, its size kept, so every replicate keeps the
design of the experiment) and the comparisons of policies built on them, each saying in
its docstring what it is for.

Which unit is resampled and what the strata are is the caller's choice
(:func:`agents.report.summarize_records` documents the one evaluation uses).

Intervals are percentile intervals by default (``method="percentile"``, as rliable);
``"BCa"`` and ``"basic"`` are scipy's other methods.  Every function rejects empty and
non-finite input with a :class:`ValueError` rather than returning ``nan``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import scipy.stats
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "METHODS",
    "Statistic",
    "bootstrap_ci",
    "geomean_ratio",
    "geometric_mean",
    "headroom_share",
    "iqm",
    "ratio_of_means",
    "ratio_to_reference",
    "stratified_bootstrap_ci",
    "summarize",
    "worst_ratio_to_best",
]

#: A statistic that reduces along an axis: called as ``statistic(x, axis=-1)``.
#: ``np.mean``, ``np.median`` and :func:`iqm` all qualify.
Statistic = Callable[..., Any]

#: Interval methods of ``scipy.stats.bootstrap``.
METHODS: tuple[str, ...] = ("percentile", "BCa", "basic")

# scipy >= 1.15 takes the generator as ``rng``; older versions (the floor is 1.11)
# as ``random_state``.
_RNG_KEYWORD = (
    "rng" if "rng" in inspect.signature(scipy.stats.bootstrap).parameters else "random_state"
)


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


def iqm(x: ArrayLike, axis: int | None = None) -> Any:
    """Interquartile mean: ``scipy.stats.trim_mean(x, 0.25)``, the mean of the middle half.

    What it is for: the robust point estimate rliable recommends for aggregate RL
    performance (less sensitive to outlier episodes than the mean, less noisy than the
    median).  ``floor(n / 4)`` values are dropped from each end (for ``n < 4`` none, so it
    is the mean); for ``n`` a multiple of 4 exactly the middle 50% are averaged.

    Args:
        x: values; with ``axis=None`` they are flattened.
        axis: axis to reduce; ``None`` reduces all values to a float.

    Returns:
        A float when the result is a scalar, otherwise an array with ``axis`` removed.

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
    if arr.size == 0 or arr.shape[axis] == 0:
        raise ValueError("iqm of an empty input is undefined: need at least one value")
    if not np.all(np.isfinite(arr)):
        raise ValueError("iqm input contains non-finite values")
    out = np.asarray(scipy.stats.trim_mean(arr, 0.25, axis=axis), dtype=np.float64)
    return float(out) if out.ndim == 0 else out


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


def bootstrap_ci(
    samples_by_stratum: Mapping[Any, ArrayLike] | Sequence[ArrayLike],
    statistic: Callable[[list[NDArray[np.float64]]], Any],
    n_boot: int = 2000,
    confidence: float = 0.95,
    seed: int | np.random.Generator = 0,
    method: str = "percentile",
) -> tuple[float, float]:
    """Stratified bootstrap interval ``(low, high)`` of ``statistic(strata)`` (scipy's bootstrap).

    The strata are scipy's independent samples (``paired=False``): each replicate
    resamples every stratum with replacement from itself, keeping its size -- which is
    the stratified bootstrap.  A stratum whose values are all equal (one value, say) is
    the same in every replicate, so it is held fixed rather than handed to scipy (which
    rejects samples of one value); if every stratum is constant the interval is the
    point estimate, exactly.

    Args:
        samples_by_stratum: a mapping ``stratum -> values`` or a sequence of 1-D value
            arrays, one per stratum; each must be non-empty and finite.
        statistic: called with the list of strata (input order), each an array whose
            last axis holds the stratum's values and whose leading axes (the same for
            all) index replicates; returns one value per replicate.
        n_boot: number of bootstrap replicates.
        confidence: coverage of the interval, in (0, 1).
        seed: seed (or generator) of the resampling; the same seed gives the same interval.
        method: ``"percentile"``, ``"BCa"`` or ``"basic"`` (see ``scipy.stats.bootstrap``).

    Raises:
        ValueError: for no strata, an empty or non-finite stratum, ``n_boot < 1``, a
            confidence outside (0, 1), an unknown method, a statistic that does not
            give one value per replicate, or an interval scipy cannot compute (BCa on
            degenerate data).
    """
    if int(n_boot) < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    if not 0.0 < float(confidence) < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if method not in METHODS:
        raise ValueError(f"unknown interval method {method!r}; use one of {list(METHODS)}")
    strata = _strata_list(samples_by_stratum)
    point = np.asarray(statistic(strata), dtype=np.float64)
    if point.shape != ():
        raise ValueError(
            "statistic must reduce the strata to one value per replicate; "
            f"got shape {point.shape} for the sample itself"
        )
    varying = [i for i, s in enumerate(strata) if s.size > 1 and np.ptp(s) > 0]
    if not varying:
        return float(point), float(point)

    def on_resamples(*resampled: NDArray[np.float64], axis: int = -1) -> Any:
        # scipy passes the varying strata resampled, values on the last axis; the fixed
        # ones are broadcast to the same leading (replicate) axes
        lead = np.broadcast_shapes(*(x.shape[:-1] for x in resampled))
        full = list(strata)
        for i, x in zip(varying, resampled, strict=True):
            full[i] = np.broadcast_to(x, lead + x.shape[-1:])
        for i, s in enumerate(strata):
            if i not in varying:
                full[i] = np.broadcast_to(s, lead + s.shape)
        out = np.asarray(statistic(full), dtype=np.float64)
        if out.shape != lead:
            raise ValueError(
                "statistic must reduce along axis=-1 to one value per replicate; "
                f"got shape {out.shape} for replicate shape {lead}"
            )
        return out

    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    res = scipy.stats.bootstrap(
        tuple(strata[i] for i in varying),
        on_resamples,
        n_resamples=int(n_boot),
        vectorized=True,
        paired=False,
        axis=-1,
        confidence_level=float(confidence),
        method=method,
        **{_RNG_KEYWORD: rng},
    )
    low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if not (np.isfinite(low) and np.isfinite(high)):
        raise ValueError(
            f"the {method} interval cannot be computed for these data "
            "(degenerate bootstrap distribution); use method='percentile'"
        )
    return low, high


def stratified_bootstrap_ci(
    samples_by_stratum: Mapping[Any, ArrayLike] | Sequence[ArrayLike],
    statistic: Statistic = np.mean,
    n_boot: int = 2000,
    confidence: float = 0.95,
    seed: int | np.random.Generator = 0,
    method: str = "percentile",
) -> tuple[float, float]:
    """Stratified bootstrap interval ``(low, high)`` of ``statistic`` of the pooled values.

    Each replicate resamples every stratum within itself (see :func:`bootstrap_ci`) and
    evaluates ``statistic`` on the concatenation of the resampled strata.  With one
    stratum this is the ordinary bootstrap.

    Args:
        samples_by_stratum: see :func:`bootstrap_ci`.
        statistic: reduction called as ``statistic(x, axis=-1)`` (``np.mean``,
            ``np.median``, :func:`iqm`).
        n_boot, confidence, seed, method: see :func:`bootstrap_ci`.
    """
    return bootstrap_ci(
        samples_by_stratum,
        lambda strata: statistic(np.concatenate(strata, axis=-1), axis=-1),
        n_boot=n_boot,
        confidence=confidence,
        seed=seed,
        method=method,
    )


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
    method: str = "percentile",
) -> dict[str, Any]:
    """Mean and IQM of ``values`` with (stratified) bootstrap confidence intervals.

    What it is for: the per-(scenario, policy, metric) cell of an evaluation report.

    Args:
        values: one value per resampling unit (an episode).
        strata: optional label per value; resampling is done within each label.
            ``None`` treats all values as one stratum (the ordinary bootstrap).
        n_boot, confidence, seed, method: see :func:`bootstrap_ci`.

    Returns:
        ``{"mean": float, "mean_ci": (low, high), "iqm": float, "iqm_ci": (low, high),
        "n": int, "n_strata": int}``.
    """
    arr = _as_finite_1d(values, name="values")
    groups = _group_by_strata(arr, strata)
    kw: dict[str, Any] = dict(n_boot=n_boot, confidence=confidence, seed=seed, method=method)
    return {
        "mean": float(np.mean(arr)),
        "mean_ci": stratified_bootstrap_ci(groups, np.mean, **kw),
        "iqm": float(iqm(arr)),
        "iqm_ci": stratified_bootstrap_ci(groups, iqm, **kw),
        "n": int(arr.size),
        "n_strata": len(groups),
    }


def ratio_to_reference(
    values: ArrayLike,
    ref_values: ArrayLike,
    strata: ArrayLike | None = None,
    n_boot: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
    method: str = "percentile",
) -> dict[str, Any]:
    """Paired ratios ``values[i] / ref_values[i]`` and a bootstrap interval on their mean.

    What it is for: "how much better than the kernel heuristic" per scenario.  The two
    arrays must be aligned so that index ``i`` is the same episode (scenario and seed)
    for both policies; a pair is the resampling unit, so the variance both runs of an
    episode share cancels.

    Args:
        values: the policy's metric, one value per episode.
        ref_values: the reference policy's metric, aligned with ``values``; non-zero.
        strata: optional label per pair to resample within.
        n_boot, confidence, seed, method: see :func:`bootstrap_ci`.

    Returns:
        ``{"ratios": ndarray, "mean": float, "ci": (low, high), "n": int}``.  The ratio
        of a policy to itself is exactly 1 with the interval ``(1.0, 1.0)``.

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
        "ci": stratified_bootstrap_ci(groups, np.mean, n_boot, confidence, seed, method),
        "n": int(ratios.size),
    }


def ratio_of_means(
    values: ArrayLike,
    ref_values: ArrayLike,
    n_boot: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
    method: str = "percentile",
) -> dict[str, Any]:
    """``mean(values) / mean(ref_values)`` over paired episodes, with a bootstrap interval.

    What it is for: "is the policy below this heuristic on this scenario", where the
    question is about the two means (a heuristic's mean over the scenario's episodes),
    not about the mean of per-episode ratios. The arrays are aligned as for
    :func:`ratio_to_reference`, and a replicate resamples the pairs, so the variance both
    policies' runs of an episode share cancels.

    Returns:
        ``{"mean": float, "ci": (low, high), "n": int}``.

    Raises:
        ValueError: for empty, misaligned or non-finite input, or a reference mean <= 0.
    """
    x = _as_finite_1d(values, name="values")
    y = _as_finite_1d(ref_values, name="ref_values")
    if x.size != y.size:
        raise ValueError(f"values ({x.size}) and ref_values ({y.size}) are not aligned")
    if y.mean() <= 0.0:
        raise ValueError(f"the reference mean must be positive; got {y.mean()!r}")

    def of_pairs(strata: list[NDArray[np.float64]]) -> Any:
        pick = strata[0].astype(np.int64)  # resampled pair indices
        return x[pick].mean(axis=-1) / y[pick].mean(axis=-1)

    pairs = np.arange(x.size, dtype=np.float64)
    ci = bootstrap_ci(
        [pairs], of_pairs, n_boot=n_boot, confidence=confidence, seed=seed, method=method
    )
    return {"mean": float(x.mean() / y.mean()), "ci": ci, "n": int(x.size)}


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
    return float(scipy.stats.gmean(arr))


def _geomean_of_means(strata: Sequence[NDArray[np.float64]]) -> Any:
    """The geometric mean over strata of each stratum's mean (along the last axis)."""
    logs = [np.log(np.mean(x, axis=-1)) for x in strata]
    return np.exp(np.mean(np.stack(logs, axis=-1), axis=-1))


def geomean_ratio(
    ratios_by_stratum: Mapping[Any, ArrayLike] | Sequence[ArrayLike],
    n_boot: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
    method: str = "percentile",
) -> dict[str, Any]:
    """Geometric mean over strata of each stratum's mean ratio, with a stratified interval.

    What it is for: one number per policy across scenarios (strata = scenarios, values =
    a scenario's paired per-episode ratios to the reference).  Each replicate resamples
    every scenario's episodes within that scenario and recomputes the geometric mean of
    the per-scenario mean ratios, as rliable does for aggregates over tasks.

    Returns:
        ``{"geomean": float, "ci": (low, high), "n_strata": int, "n": int}``.

    Raises:
        ValueError: for no strata, an empty or non-finite stratum, or a stratum whose
            mean ratio is not strictly positive.
    """
    strata = _strata_list(ratios_by_stratum)
    geometric_mean([float(np.mean(s)) for s in strata])  # rejects a non-positive mean ratio
    if np.any(np.concatenate(strata) < 0.0):
        # a replicate could then have a negative mean ratio, and no geometric mean
        raise ValueError("ratios must be non-negative for an interval on the geometric mean")

    with np.errstate(divide="ignore"):  # a replicate of a stratum's zeros gives log(0)
        point = float(_geomean_of_means(strata))
        low, high = bootstrap_ci(strata, _geomean_of_means, n_boot, confidence, seed, method)
    return {
        "geomean": point,
        "ci": (low, high),
        "n_strata": len(strata),
        "n": int(sum(s.size for s in strata)),
    }


#: A headroom (upper reference's mean ratio to the lower one, minus 1) under this is not
#: resolved: the share is undefined (``None``) rather than a quotient of noise.
MIN_HEADROOM = 1e-3


def headroom_share(
    ratios_by_stratum: Sequence[ArrayLike],
    upper_by_stratum: Sequence[ArrayLike],
    n_boot: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
    method: str = "percentile",
) -> dict[str, Any]:
    """Share of the headroom a policy takes: ``(G_policy - 1) / (G_upper - 1)``, with an interval.

    What it is for: ``(policy - dram-first) / (planner - dram-first)``. Inputs are
    per-episode ratios to the lower reference, one array per stratum (scenario):
    the policy's (``ratios_by_stratum``) and the upper reference's
    (``upper_by_stratum``), aligned so index ``i`` is the same episode. ``G`` is
    the geometric mean over strata of each stratum's mean ratio (with one
    stratum, the mean ratio itself). Each bootstrap replicate resamples every
    stratum's episodes within it, the policy's and the upper reference's ratio
    of an episode together (the pair is the unit).

    Returns:
        ``{"share": float | None, "ci": (low, high) | None, "headroom": float, "n": int,
        "n_strata": int}``; ``share`` is ``None`` when the headroom ``G_upper - 1`` is
        under :data:`MIN_HEADROOM`.

    Raises:
        ValueError: for no strata, misaligned, empty or non-finite inputs, or a
            non-positive ratio.
    """
    pol = _strata_list(ratios_by_stratum)
    up = _strata_list(upper_by_stratum)
    if len(pol) != len(up) or any(a.shape != b.shape for a, b in zip(pol, up, strict=False)):
        raise ValueError("headroom_share: the policy's and the upper reference's ratios must pair")
    if any(np.any(a <= 0) for a in (*pol, *up)):
        raise ValueError("headroom_share: ratios must be positive")

    headroom = float(_geomean_of_means(up)) - 1.0
    n = int(sum(a.size for a in pol))
    if headroom < MIN_HEADROOM:
        return {"share": None, "ci": None, "headroom": headroom, "n": n, "n_strata": len(pol)}
    share = (float(_geomean_of_means(pol)) - 1.0) / headroom
    # resample episode indices, so a policy's episode and the planner's stay paired
    idx = [np.arange(a.size, dtype=np.float64) for a in pol]

    def stat(ix: list[NDArray[np.float64]]) -> Any:
        take = [i.astype(np.int64) for i in ix]
        gp = _geomean_of_means([a[t] for a, t in zip(pol, take, strict=True)])
        gu = _geomean_of_means([a[t] for a, t in zip(up, take, strict=True)])
        return (gp - 1.0) / (gu - 1.0)

    with np.errstate(divide="ignore", invalid="ignore"):
        low, high = bootstrap_ci(idx, stat, n_boot, confidence, seed, method)
    return {"share": share, "ci": (low, high), "headroom": headroom, "n": n, "n_strata": len(pol)}


def worst_ratio_to_best(
    means: Mapping[str, Mapping[str, float | None]],
    heuristics: Sequence[str],
    higher_is_better: bool = True,
) -> dict[str, Any]:
    """Per policy, its worst ratio to the best heuristic over the scenarios, and where.

    What it is for: robustness, "how much worse than the kernel's best choice can this
    policy be" (``evaluate.py``'s leaderboard, ``train.py``'s closing table, the
    generalisation groups), the one place that number is computed.

    ``means[scenario][policy]`` is a policy's mean of the primary metric on a scenario
    (``None`` or absent: it did not run there). On each scenario the best heuristic is
    the one of ``heuristics`` with the best mean there (the highest; the lowest when not
    ``higher_is_better``; ties go to the later name, as ``max`` over ``(mean, name)``),
    among those with a finite, positive mean; a scenario with none is skipped. A policy's
    ratio on a scenario is its mean over that heuristic's mean (so a heuristic that is
    the best there has 1); its worst is the lowest ratio (the highest when not
    ``higher_is_better``), ties to the first scenario by name.

    Returns:
        ``{"best": {scenario: {"heuristic": str, "mean": float}},
        "per_policy": {policy: {"worst_ratio": float, "worst_scenario": str,
        "best_heuristic": str, "ratios": {scenario: float}, "n_scenarios": int}}}``;
        a policy with no scenario that has a best heuristic is absent from ``per_policy``.
    """
    heur = list(heuristics)
    sign = 1.0 if higher_is_better else -1.0
    best: dict[str, tuple[str, float]] = {}
    for scen in sorted(means):
        row = means[scen]
        scored = {
            h: float(v)
            for h in heur
            if (v := row.get(h)) is not None and np.isfinite(v) and float(v) > 0.0
        }
        if scored:
            b = max(scored, key=lambda h: (sign * scored[h], h))
            best[scen] = (b, scored[b])
    ratios: dict[str, dict[str, float]] = {}
    for scen, (_, top) in best.items():
        for pol, v in means[scen].items():
            if v is not None and np.isfinite(v):
                ratios.setdefault(pol, {})[scen] = float(v) / top
    per_policy: dict[str, Any] = {}
    for pol, rs in ratios.items():
        worst = min(rs, key=lambda s: (sign * rs[s], s))
        per_policy[pol] = {
            "worst_ratio": rs[worst],
            "worst_scenario": worst,
            "best_heuristic": best[worst][0],
            "ratios": rs,
            "n_scenarios": len(rs),
        }
    return {
        "best": {s: {"heuristic": h, "mean": m} for s, (h, m) in best.items()},
        "per_policy": per_policy,
    }
