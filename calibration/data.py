"""The measured MLC loaded-latency curves: where they live, how they are read, their labels."""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from envs.model import LINE_BYTES

__all__ = [
    "CHECKED",
    "DATA_DIR",
    "MEMORIES",
    "MIXES",
    "CalibrationDataError",
    "Series",
    "load_series",
    "mix_label",
    "random_read_series",
    "resolve_data_dir",
]

F64 = NDArray[np.float64]

ROOT = Path(__file__).resolve().parents[1]
#: Where the shared measurements live: ``../shared/calibration`` next to the project root.
DATA_DIR = ROOT.parent / "shared" / "calibration"
FIG3_CSV = "loaded_latency_fig3_seq.csv"
#: every MLC log, random access included (the cross-check of :mod:`calibration.checks`)
ALL_CSV = "loaded_latency_all.csv"
TARGETS_JSON = "targets.json"
HARDWARE_DIR = ROOT / "envs" / "data" / "hardware"
SCENARIO_DIR = ROOT / "envs" / "data" / "scenarios"
DOC = ROOT / "docs" / "validation.md"
IMG_DIR = ROOT / "docs" / "img"

#: MLC read:write mixes and their read fraction (bytes read / bytes moved).
MIXES: dict[str, float] = {"1:0": 1.0, "3:1": 0.75, "2:1": 2.0 / 3.0, "1:1": 0.5, "0:1": 0.0}


def read_fraction(mix: str) -> float:
    """The read fraction of a mix ``"R:W"`` (``"2:1"``: 2/3)."""
    r, w = (int(x) for x in mix.split(":"))
    return r / (r + w)


def mixes_of(memory: str, series: Mapping[tuple[str, str], Series]) -> list[str]:
    """The mixes of ``memory`` in ``series``, most reads first (the order of :data:`MIXES`)."""
    return sorted((m for (r, m) in series if r == memory), key=lambda m: -read_fraction(m))


MEMORIES = ("mmem", "cxl", "cxl_remote", "mmem_remote")
#: the memories whose curves must meet the must-show tolerances
CHECKED = ("mmem", "cxl", "cxl_remote")
SERIES_THREADS = 16
#: a point at or above this fraction of the series' peak starts the saturated part
SATURATION = 0.95
#: the latency error statistic covers points up to this fraction of the peak
ERROR_RANGE = 0.90
#: mmem_remote: points under this fraction of the peak are the unreliable low-load end
#: (latency falls below local DDR's there, see the calibration README)
REMOTE_DDR_RELIABLE = 0.15


class CalibrationDataError(FileNotFoundError):
    """The shared calibration data is missing."""


@dataclass(frozen=True)
class Series:
    """One MLC loaded-latency curve (16 threads), lightest load first."""

    memory: str
    mix: str
    bandwidth: F64  # GB/s, inject delay descending
    latency: F64  # ns
    delay: NDArray[np.int64]  # MLC inject delay, cycles
    peak_all_threads: float  # highest bandwidth over every thread count of this memory and mix

    @property
    def read_fraction(self) -> float:
        return MIXES[self.mix]

    @property
    def peak(self) -> float:
        return float(self.bandwidth.max())

    @property
    def idle(self) -> float:
        """Latency of the lowest-load point (the largest inject delay)."""
        return float(self.latency[0])

    @property
    def on_curve(self) -> NDArray[np.bool_]:
        """Points before saturation (see the :mod:`calibration` docstring)."""
        hit = np.flatnonzero(self.bandwidth >= SATURATION * self.peak)
        first = int(hit[0]) if hit.size else len(self.bandwidth)
        return np.arange(len(self.bandwidth)) < first

    @property
    def in_error_range(self) -> NDArray[np.bool_]:
        """Non-saturated points up to :data:`ERROR_RANGE` of the peak."""
        return self.on_curve & (self.bandwidth <= ERROR_RANGE * self.peak)

    @property
    def fitted(self) -> NDArray[np.bool_]:
        """Points the latency fit uses (quirks of the data excluded, see
        :func:`calibration.fit.fit`)."""
        m = self.on_curve.copy()
        if self.memory == "mmem_remote":
            if self.mix == "0:1":
                return np.zeros_like(m)
            m &= self.bandwidth >= REMOTE_DDR_RELIABLE * self.peak
        if self.memory == "cxl_remote" and self.mix == "0:1":
            return np.zeros_like(m)
        return m


def resolve_data_dir(data: str | Path | None = None) -> Path:
    """The calibration folder, or a clear error when it is not there."""
    d = Path(data) if data is not None else DATA_DIR
    if not (d / FIG3_CSV).is_file():
        raise CalibrationDataError(
            f"calibration data not found: {d / FIG3_CSV} does not exist. The measurements live in "
            f"../shared/calibration next to the project root ({DATA_DIR}); pass --data DIR to "
            "read them from elsewhere."
        )
    return d


def load_series(data: str | Path | None = None) -> dict[tuple[str, str], Series]:
    """The 16-thread series of every memory and mix, keyed ``(memory, mix)``."""
    path = resolve_data_dir(data) / FIG3_CSV
    rows: dict[tuple[str, str], list[tuple[int, float, float]]] = {}
    peak_all: dict[tuple[str, str], float] = {}
    with path.open(newline="") as f:
        for r in csv.DictReader(f):
            key = (r["memory"], r["rw_mix"])
            bw = float(r["bandwidth_gbps"])
            peak_all[key] = max(peak_all.get(key, 0.0), bw)
            if int(r["threads"]) == SERIES_THREADS:
                rows.setdefault(key, []).append(
                    (int(r["inject_delay_cycles"]), bw, float(r["latency_ns"]))
                )
    out = {}
    for key, pts in rows.items():
        pts.sort(key=lambda p: -p[0])
        arr = np.array(pts, dtype=float)
        out[key] = Series(
            memory=key[0],
            mix=key[1],
            bandwidth=arr[:, 1],
            latency=arr[:, 2],
            delay=arr[:, 0].astype(np.int64),
            peak_all_threads=peak_all[key],
        )
    missing = [(m, x) for m in MEMORIES for x in MIXES if (m, x) not in out]
    if missing:
        raise CalibrationDataError(f"{path}: no 16-thread series for {missing}")
    return out


def random_read_series(
    data: str | Path | None = None, memory: str = "mmem_remote"
) -> tuple[F64, F64] | None:
    """The 16-thread random-read 1:0 series of ``memory``: (bandwidth GB/s, latency ns).

    Lightest load first, read from :data:`ALL_CSV`; ``None`` when that file is absent.
    """
    path = resolve_data_dir(data) / ALL_CSV
    if not path.is_file():
        return None
    pts = []
    with path.open(newline="") as f:
        for r in csv.DictReader(f):
            if (
                r["memory"] == memory
                and r["access"] == "random"
                and r["rw_mix"] == "1:0"
                and int(r["threads"]) == SERIES_THREADS
            ):
                pts.append(
                    (
                        int(r["inject_delay_cycles"]),
                        float(r["bandwidth_gbps"]),
                        float(r["latency_ns"]),
                    )
                )
    pts.sort(key=lambda p: -p[0])
    return np.array([p[1] for p in pts]), np.array([p[2] for p in pts])


#: The MLC runs whose random/sequential peak ratio sets a node's random-access peaks:
#: (memory, mix, write type). DDR5: reads only and non-temporal writes only (the read
#: and write peaks); A1000: 1:1 with regular stores, where the expander's memory and not
#: its link binds (its 1:0 and 0:1 peaks are the link's, the same for both accesses).
RANDOM_PEAK_RUNS = {
    "mmem": {"read": ("1:0", "none"), "write": ("0:1", "non-temporal")},
    "cxl": {"read": ("1:1", "regular"), "write": ("1:1", "regular")},
}


def random_peak_ratios(data: str | Path | None = None) -> dict[str, dict[str, float]] | None:
    """Random over sequential peak bandwidth of the runs in :data:`RANDOM_PEAK_RUNS`.

    16-thread runs on node 0's CPUs (``cpu_set`` d0), the same mix and write type for
    both accesses, from :data:`ALL_CSV`; ``None`` when that file is absent.
    """
    path = resolve_data_dir(data) / ALL_CSV
    if not path.is_file():
        return None
    peak: dict[tuple[str, str, str, str], float] = {}
    with path.open(newline="") as f:
        for r in csv.DictReader(f):
            if int(r["threads"]) != SERIES_THREADS or r["cpu_set"] != "d0":
                continue
            k = (r["memory"], r["access"], r["rw_mix"], r["write_type"])
            peak[k] = max(peak.get(k, 0.0), float(r["bandwidth_gbps"]))
    out: dict[str, dict[str, float]] = {}
    for memory, runs in RANDOM_PEAK_RUNS.items():
        out[memory] = {}
        for side, (mix, wt) in runs.items():
            rnd = peak.get((memory, "random", mix, wt))
            seq = peak.get((memory, "sequential", mix, wt))
            if not rnd or not seq:
                raise CalibrationDataError(
                    f"{path}: no 16-thread {memory} {mix} {wt} run of both accesses on d0"
                )
            out[memory][side] = rnd / seq
    return out


def mlc_lines_in_flight(series: Mapping[tuple[str, str], Series], memories: Sequence[str]) -> float:
    """Median requests in flight per MLC thread at inject delay 0 (Little's law: X * L / 64 B)."""
    vals = [
        s.bandwidth[-1] * s.latency[-1] / LINE_BYTES / SERIES_THREADS
        for (m, _), s in series.items()
        if m in memories
    ]
    return float(np.median(vals))


def mix_label(rf: float) -> str:
    """The MLC mix (``"2:1"``) of a read fraction, or the fraction itself when it is none."""
    for k, v in MIXES.items():
        if abs(v - rf) < 1e-9:
            return k
    return f"{rf:.2f}"
