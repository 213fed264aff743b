"""PNG plots of evaluation results: ratios to the reference, and one episode's trajectory.

:func:`plot_ratio_bars` draws a summary's paired ratios per scenario and policy
with their intervals; :func:`plot_timeseries` draws one episode's recorded series
(the ``series`` of a record made with ``record_series``). Plots use matplotlib's
object-oriented API with the Agg canvas, so no display is needed and the global
pyplot backend is left untouched; matplotlib is imported when a plot is drawn.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["plot_ratio_bars", "plot_timeseries"]


def _new_figure(figsize: tuple[float, float]) -> Any:
    """A matplotlib Figure bound to the Agg canvas (no pyplot, no display)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Any, path: str | Path) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png", dpi=120)
    return out


def _ratio_bars(
    summary: Mapping[str, Any], pol: str, scenarios: Sequence[str]
) -> tuple[list[float], list[float], list[float]]:
    """One policy's bars: mean ratio per scenario and the distances to its CI bounds.

    A scenario without a ratio for the policy gets a NaN bar with no error bar.
    """
    means, lo_err, hi_err = [], [], []
    for scen in scenarios:
        entry = summary["per_scenario"][scen].get(pol)
        if entry is None or entry["ratio"] is None:
            means.append(math.nan)
            lo_err.append(0.0)
            hi_err.append(0.0)
            continue
        m = entry["ratio"]["mean"]
        lo, hi = entry["ratio"]["ci"]
        means.append(m)
        lo_err.append(max(0.0, m - lo))
        hi_err.append(max(0.0, hi - m))
    return means, lo_err, hi_err


def plot_ratio_bars(summary: Mapping[str, Any], path: str | Path) -> Path:
    """PNG grouped bar chart of each policy's ratio to the reference per scenario.

    Bars are the mean paired ratio, error bars its bootstrap CI, and a dashed line marks
    parity (1.0).  The reference itself (always exactly 1) is omitted.  Returns the path
    written.

    Raises:
        ValueError: if the summary has no reference policy.
    """
    ref = summary.get("reference")
    if ref is None:
        raise ValueError("plot_ratio_bars needs a summary made with a reference policy")
    scenarios = list(summary["scenarios"])
    policies = [p for p in summary["policies"] if p != ref]
    n_bars = max(1, len(policies))
    fig = _new_figure((min(30.0, max(6.0, 1.5 + len(scenarios) * (0.4 + 0.3 * n_bars))), 4.5))
    ax = fig.add_subplot(1, 1, 1)
    x = np.arange(len(scenarios), dtype=float)
    width = 0.8 / max(1, len(policies))
    for j, pol in enumerate(policies):
        means, lo_err, hi_err = _ratio_bars(summary, pol, scenarios)
        ax.bar(
            x - 0.4 + width * (j + 0.5),
            means,
            width,
            yerr=np.array([lo_err, hi_err]),
            capsize=3,
            label=pol,
        )
    ax.axhline(1.0, color="black", linestyle="--", linewidth=1)
    ax.set_xticks(x)
    ax.set_xticklabels(scenarios, rotation=30, ha="right")
    ax.set_ylabel(f"{summary['metric']} / {ref}")
    ax.set_title(f"Ratio to {ref} ({summary['confidence']:.0%} CI)")
    if policies:
        ax.legend(fontsize="small")
    return _save(fig, path)


def plot_timeseries(series: Mapping[str, Any], path: str | Path, title: str) -> Path:
    """PNG of one episode: three stacked panels sharing the time-step axis.

    Panels: each tenant's normalised performance; each tenant's DRAM access share; the
    policy's actions (per-node weights as lines, promotion rate in MB/s on a twin axis).

    ``series`` is ``{"t": [...], "tenants": {name: {"norm_perf": [...],
    "dram_access_share": [...]}}, "weights": {label: [...]},
    "promotion_rate_mbps": [...]}``; every list must have the length of ``t``.
    Returns the path written.

    Raises:
        ValueError: for a missing key, an empty ``t`` or a list of the wrong length.
    """
    for key in ("t", "tenants", "weights", "promotion_rate_mbps"):
        if key not in series:
            raise ValueError(f"series lacks key {key!r}")
    t = np.asarray(series["t"], dtype=float)
    if t.ndim != 1 or t.size == 0:
        raise ValueError("series['t'] must be a non-empty list of time steps")

    def _check(values: Any, what: str) -> np.ndarray:
        arr = np.asarray(values, dtype=float)
        if arr.shape != t.shape:
            raise ValueError(f"{what} has {arr.size} values but t has {t.size}")
        return arr

    fig = _new_figure((9.0, 8.0))
    ax_perf = fig.add_subplot(3, 1, 1)
    ax_share = fig.add_subplot(3, 1, 2, sharex=ax_perf)
    ax_act = fig.add_subplot(3, 1, 3, sharex=ax_perf)
    for name, tvals in series["tenants"].items():
        for key in ("norm_perf", "dram_access_share"):
            if key not in tvals:
                raise ValueError(f"tenant {name!r} lacks {key!r}")
        ax_perf.plot(t, _check(tvals["norm_perf"], f"tenant {name!r} norm_perf"), label=name)
        ax_share.plot(
            t, _check(tvals["dram_access_share"], f"tenant {name!r} dram_access_share"), label=name
        )
    ax_perf.set_ylabel("normalised perf")
    ax_share.set_ylabel("DRAM access share")
    ax_share.set_ylim(-0.02, 1.02)
    lines = []
    for label, w in series["weights"].items():
        lines += ax_act.plot(t, _check(w, f"weights {label!r}"), label=f"weight {label}")
    ax_act.set_ylabel("node weight")
    ax_rate = ax_act.twinx()
    lines += ax_rate.plot(
        t,
        _check(series["promotion_rate_mbps"], "promotion_rate_mbps"),
        color="black",
        linestyle=":",
        label="promotion MB/s",
    )
    ax_rate.set_ylabel("promotion rate (MB/s)")
    ax_act.set_xlabel("time step")
    if series["tenants"]:
        ax_perf.legend(fontsize="small", loc="best")
        ax_share.legend(fontsize="small", loc="best")
    ax_act.legend(lines, [ln.get_label() for ln in lines], fontsize="small", loc="best")
    for ax in (ax_perf, ax_share):
        ax.tick_params(labelbottom=False)
    fig.suptitle(title)
    return _save(fig, path)
