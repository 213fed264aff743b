"""Figures of docs/validation.md: measured MLC curves against the model's (matplotlib, Agg)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from calibration.bench import model_curve
from calibration.data import MIXES, Series
from calibration.metrics import MixMetrics

__all__ = ["plot_memory"]


def plot_memory(
    memory: str,
    hw: Mapping[str, Any],
    mm: Mapping[str, MixMetrics],
    path: Path,
    series: Mapping[tuple[str, str], Series],
) -> None:
    """Every mix of ``memory``: measured points and the model's curve, saved to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.8), dpi=110)
    colors = dict(zip(MIXES, ["C0", "C1", "C2", "C3", "C4"], strict=True))
    for mix, rf in MIXES.items():
        m = mm[mix]
        c = colors[mix]
        sat = m.saturated
        used = series[(memory, mix)].fitted
        out = ~sat & ~used
        ax.plot(m.bandwidth[used], m.latency[used], "o", color=c, ms=4, label=f"{mix} measured")
        ax.plot(m.bandwidth[out], m.latency[out], "x", color=c, ms=5)
        ax.plot(m.bandwidth[sat], m.latency[sat], "o", mfc="none", color=c, ms=4)
        bw, lat = model_curve(hw, memory, rf)
        ax.plot(bw, lat, "-", color=c, lw=1.4, label=f"{mix} model")
    top = max(np.nanmax(np.where(m.saturated, np.nan, m.latency)) for m in mm.values())
    top_all = max(float(m.latency.max()) for m in mm.values())
    ax.set_ylim(0, min(top_all * 1.05, 3.0 * top))
    ax.set_xlabel("bandwidth (GB/s)")
    ax.set_ylabel("probe latency (ns)")
    ax.set_title(
        f"{memory}: MLC loaded latency, 16 threads vs model (open: saturated; x: not fitted)",
        fontsize=10,
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2, loc="upper left")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
