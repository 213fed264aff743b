"""Measured vs model, per memory and mix: peaks, idle latency, latency errors."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from calibration.bench import MLCBench
from calibration.data import ERROR_RANGE, F64, Series, mixes_of, read_fraction

__all__ = ["MixMetrics", "memory_metrics", "pooled_median"]


def _interp_measured(s: Series, bw: float) -> tuple[float, bool]:
    """Measured latency at ``bw`` GB/s: linear between the two nearest points of the curve.

    The curve here is the series up to and including its first saturated point (what a
    plot of the series shows). Returns (latency, gap) where ``gap`` is True when the
    nearest points are more than 10% of the peak apart (a coarse interpolation).
    """
    keep = s.on_curve.copy()
    first_sat = int(np.argmin(keep)) if not keep.all() else len(keep)
    if first_sat < len(keep):
        keep[first_sat] = True
    b, lat = s.bandwidth[keep], s.latency[keep]
    order = np.argsort(b)
    b, lat = b[order], lat[order]
    if bw > b[-1]:
        return float("nan"), True
    j = int(np.searchsorted(b, bw))
    j = min(max(j, 1), len(b) - 1)
    gap = bool(b[j] - b[j - 1] > 0.10 * s.peak)
    return float(np.interp(bw, b, lat)), gap


@dataclass
class MixMetrics:
    """Measured vs model for one memory and mix."""

    memory: str
    mix: str
    idle_meas: float
    idle_model: float
    peak_meas: float
    peak_all_threads: float
    peak_model: float
    at_frac: dict[float, tuple[float, bool, float]]  # fraction -> (measured, gap, model)
    median_err: float  # over points up to ERROR_RANGE of the peak
    median_err_all: float  # over every non-saturated point
    n_err: int
    bandwidth: F64  # the series, for plots
    latency: F64
    model_latency: F64  # nan where saturated
    saturated: NDArray[np.bool_]
    errors: F64  # relative error per point (nan where saturated)

    @property
    def peak_rel(self) -> float:
        return self.peak_model / self.peak_meas - 1.0

    @property
    def idle_rel(self) -> float:
        return self.idle_model / self.idle_meas - 1.0


def memory_metrics(
    hardware: Mapping[str, Any] | str,
    memory: str,
    series: Mapping[tuple[str, str], Series],
    fractions: Sequence[float] = (0.5, 0.8, 0.95),
) -> dict[str, MixMetrics]:
    """Measured vs model for every mix of ``memory`` in ``series`` (all points placed in one
    batch; ``python -m calibration mlc`` reports a user's logs with it too)."""
    items: list[tuple[str, str, int, float]] = []  # (mix, kind, index, bandwidth)
    mixes = mixes_of(memory, series)
    for mix in mixes:
        s = series[(memory, mix)]
        for j in np.flatnonzero(s.on_curve):
            items.append((mix, "pt", int(j), float(s.bandwidth[j])))
        items.append((mix, "idle", 0, float(s.bandwidth[0])))
        for f in fractions:
            items.append((mix, f"f{f}", 0, f * s.peak))
    rfs = [read_fraction(m) for m, *_ in items]
    bench = MLCBench(hardware, memory, rfs)
    lat, _, reach = bench.place(np.array([b for *_, b in items]))
    lat = np.where(reach, lat, np.nan)
    peak_bench = MLCBench(hardware, memory, [read_fraction(m) for m in mixes])
    peaks = dict(zip(mixes, peak_bench.capacity(), strict=True))
    out = {}
    for mix in mixes:
        s = series[(memory, mix)]
        model_lat = np.full(len(s.bandwidth), np.nan)
        idle_model = float("nan")
        at: dict[float, tuple[float, bool, float]] = {}
        for k, (m, kind, i, b) in enumerate(items):
            if m != mix:
                continue
            if kind == "pt":
                model_lat[i] = lat[k]
            elif kind == "idle":
                idle_model = float(lat[k])
            else:
                f = float(kind[1:])
                meas, gap = _interp_measured(s, b)
                at[f] = (meas, gap, float(lat[k]))
        err = np.abs(model_lat / s.latency - 1.0)
        rng = s.in_error_range
        out[mix] = MixMetrics(
            memory=memory,
            mix=mix,
            idle_meas=s.idle,
            idle_model=idle_model,
            peak_meas=s.peak,
            peak_all_threads=s.peak_all_threads,
            peak_model=float(peaks[mix]),
            at_frac=at,
            median_err=float(np.nanmedian(np.where(rng, err, np.nan))) if rng.any() else np.nan,
            median_err_all=float(np.nanmedian(np.where(s.on_curve, err, np.nan))),
            n_err=int(rng.sum()),
            bandwidth=s.bandwidth,
            latency=s.latency,
            model_latency=model_lat,
            saturated=~s.on_curve,
            errors=np.where(s.on_curve, err, np.nan),
        )
    return out


def pooled_median(metrics: Mapping[str, MixMetrics]) -> float:
    """Median latency error over the points up to 90% of the peak of every mix."""
    errs = []
    for m in metrics.values():
        rng = ~m.saturated & (m.bandwidth <= ERROR_RANGE * m.peak_meas)
        errs.append(m.errors[rng])
    return float(np.nanmedian(np.concatenate(errs)))
