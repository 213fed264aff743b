"""Calibrate the hardware presets on Intel MLC loaded-latency curves, and validate them.

Commands (from the project root)::

    python -m envs.calibrate              # fit spr-a1000 / spr-a1000-2s, derive spr-4cxl, write the YAML
    python -m envs.calibrate --report     # regenerate docs/validation.md and docs/img/*.png
    python -m envs.calibrate --check      # print the must-show checks; exit status 1 if one fails
    python -m envs.calibrate --data DIR   # read the measurements from DIR (default ../shared/calibration)

The measurement (``loaded_latency_fig3_seq.csv``, see ``../shared/calibration/README.md``)
is MLC's ``--loaded_latency`` test: 16 traffic threads stream over a buffer on one memory
node with a read:write mix and an injection delay, and one more thread measures the
latency of dependent reads. It is reproduced *inside the model*, as a scenario: a tenant
``mlc`` with 16 threads and the mix's ``read_fraction``, all of its pages on the measured
node (interleave weights), its threads on socket 0 (local memories, preset ``spr-a1000``)
or socket 1 (remote memories, preset ``spr-a1000-2s``). MLC's injection delay becomes the
tenant's ``compute_ns``: for each measured point, ``compute_ns`` is solved (bisection) so
that the closed-loop fixed point of :func:`envs.solver.solve_fixed_point`, on the arrays
:func:`envs.model.compile_params` builds from that scenario, carries exactly the measured
bandwidth. The model's probe latency is then the loaded latency of an access to that node:
``node_latency_ns`` for a local node, the tenant's latency (which adds the remote path)
for a remote one. ``tests/test_calibration.py`` checks that :class:`envs.Simulator` gives
the same numbers.

Definitions used in the fit and the report:

- *measured idle latency*: the latency of the lowest-load point (inject delay 20000
  cycles) of the 16-thread 1:0 series, i.e. the paper's "initial latency" (97.0 ns local
  DDR5, 250.4 ns CXL, 485.2 ns remote CXL). The model's idle latency is its probe
  latency at that same bandwidth. Per-mix lowest-load points are reported too.
- *measured peak*: the highest bandwidth of the 16-thread series (the series the scenario
  reproduces); the highest over all thread counts is reported beside it. The *model peak*
  is the closed loop's throughput with ``compute_ns = 0`` and unbounded requests in
  flight, i.e. the capacity of the bottleneck resource at that mix.
- *saturated points*: the first point at or above 95% of the series' peak and every point
  after it (smaller delays). There the closed loop is saturated: bandwidth stays at the
  peak and latency grows with the number of requests MLC keeps in flight (Little's law),
  not with load, so such a point has no place on the curve below the peak. They set the
  measured peak and are left out of the latency fit and of the latency errors.
- the latency error is ``|model - measured| / measured`` at the measured bandwidth; the
  must-show statistic is its median over the non-saturated points up to 90% of the peak.

The fit (:func:`fit`) uses ``scipy.optimize.least_squares`` on log latency errors of the
non-saturated points plus log peak errors, one memory at a time, seven physical
parameters each (listed in :data:`PARAMETERS`).
"""

from __future__ import annotations

import argparse
import copy
import csv
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from numpy.typing import NDArray

from envs.model import LINE_BYTES, Params, compile_params
from envs.scenario import hardware_presets, load_scenario
from envs.solver import Solution, solve_fixed_point

__all__ = [
    "DATA_DIR",
    "MEMORIES",
    "MIXES",
    "CalibrationDataError",
    "MLCBench",
    "Series",
    "fit",
    "interleave_experiment",
    "load_series",
    "memory_metrics",
    "must_show_checks",
]

F64 = NDArray[np.float64]

ROOT = Path(__file__).resolve().parents[1]
#: Where the shared measurements live: ``../shared/calibration`` next to the project root.
DATA_DIR = ROOT.parent / "shared" / "calibration"
FIG3_CSV = "loaded_latency_fig3_seq.csv"
TARGETS_JSON = "targets.json"
HARDWARE_DIR = Path(__file__).resolve().parent / "data" / "hardware"
SCENARIO_DIR = Path(__file__).resolve().parent / "data" / "scenarios"
DOC = ROOT / "docs" / "validation.md"
IMG_DIR = ROOT / "docs" / "img"

#: MLC read:write mixes and their read fraction (bytes read / bytes moved).
MIXES: dict[str, float] = {"1:0": 1.0, "3:1": 0.75, "2:1": 2.0 / 3.0, "1:1": 0.5, "0:1": 0.0}
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
#: requests in flight per MLC thread while a measured point is placed on the curve; any
#: number that lets compute_ns >= 0 reach the point does: a single tenant's latency at a
#: given bandwidth does not depend on it
PLACE_MLP = 64.0
#: requests in flight per thread for the model peak (the unbounded-injection limit)
PEAK_MLP = 1e7
BISECTION_STEPS = 48

TOL = {"peak": 0.07, "idle": 0.05, "median": 0.10}


class CalibrationDataError(FileNotFoundError):
    """The shared calibration data is missing."""


# --------------------------------------------------------------------------- measurements


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
        """Points before saturation (see the module docstring)."""
        hit = np.flatnonzero(self.bandwidth >= SATURATION * self.peak)
        first = int(hit[0]) if hit.size else len(self.bandwidth)
        return np.arange(len(self.bandwidth)) < first

    @property
    def in_error_range(self) -> NDArray[np.bool_]:
        """Non-saturated points up to :data:`ERROR_RANGE` of the peak."""
        return self.on_curve & (self.bandwidth <= ERROR_RANGE * self.peak)

    @property
    def fitted(self) -> NDArray[np.bool_]:
        """Points the latency fit uses (quirks of the data excluded, see :func:`fit`)."""
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


def mlc_lines_in_flight(series: Mapping[tuple[str, str], Series], memories: Sequence[str]) -> float:
    """Median requests in flight per MLC thread at inject delay 0 (Little's law: X * L / 64 B)."""
    vals = [
        s.bandwidth[-1] * s.latency[-1] / LINE_BYTES / SERIES_THREADS
        for (m, _), s in series.items()
        if m in memories
    ]
    return float(np.median(vals))


def mix_label(rf: float) -> str:
    for k, v in MIXES.items():
        if abs(v - rf) < 1e-9:
            return k
    return f"{rf:.2f}"


# --------------------------------------------------------------------------- the MLC test as a scenario


@dataclass(frozen=True)
class Setup:
    """Where a memory of the data lives in the presets and where MLC's threads run."""

    preset: str
    node: str
    socket: int


SETUPS = {
    "mmem": Setup("spr-a1000", "dram0", 0),
    "cxl": Setup("spr-a1000", "cxl0", 0),
    "cxl_remote": Setup("spr-a1000-2s", "cxl0", 1),
    "mmem_remote": Setup("spr-a1000-2s", "dram0", 1),
}


def mlc_scenario(
    hardware: str | Mapping[str, Any],
    memory: str,
    read_fraction: float,
    compute_ns: float = 0.0,
    mlp: float = PLACE_MLP,
) -> dict[str, Any]:
    """MLC's loaded-latency test on ``memory`` as a scenario mapping (keys of envs.scenario)."""
    st = SETUPS[memory]
    return {
        "name": f"mlc-{memory}-{mix_label(read_fraction)}",
        "description": "Intel MLC --loaded_latency: 16 traffic threads on one memory node",
        "interval_s": 1.0,
        "episode_steps": 1,
        "hardware": hardware,
        "tenants": [
            {
                "name": "mlc",
                "threads": SERIES_THREADS,
                "socket": st.socket,
                "mlp": mlp,
                "compute_ns": compute_ns,
                "read_fraction": read_fraction,
                "working_set_gib": 1.0,
                "weights": {st.node: 1},
            }
        ],
    }


class MLCBench:
    """A batch of MLC tests on one memory: element ``i`` runs read fraction ``read_fractions[i]``.

    The arrays come from :func:`envs.model.compile_params` on the scenario of
    :func:`mlc_scenario`; :meth:`solve` runs :func:`envs.solver.solve_fixed_point`
    on them, exactly as one interval of :func:`envs.model.step` does once the
    tenant's pages are on the node.
    """

    def __init__(
        self, hardware: str | Mapping[str, Any], memory: str, read_fractions: Sequence[float]
    ) -> None:
        rfs = [float(r) for r in read_fractions]
        scs = {r: load_scenario(mlc_scenario(hardware, memory, r)) for r in set(rfs)}
        p: Params = compile_params([scs[r] for r in rfs])
        self.params = p
        self.memory = memory
        self.node = p.node_names.index(SETUPS[memory].node)
        w = p.init_weights  # (T, N, B) the tenant's weights: the measured node only
        self.share = w / w.sum(1, keepdims=True)
        self.remote = (p.socket[:, 0][:, None, :] != p.node_socket[None]).astype(float)
        self.is_remote = bool(self.remote[0, self.node].all())
        self.threads = p.threads[:, 0]
        self.rfrac = p.read_fraction[:, 0]
        n, b = p.n_nodes, p.batch_size
        self.zeros = np.zeros((n, b))
        self.size = b

    def solve(self, compute_ns: F64, mlp: float = PLACE_MLP, x0: F64 | None = None) -> Solution:
        cap = LINE_BYTES * self.threads * mlp
        compute = np.broadcast_to(np.asarray(compute_ns, dtype=float), (self.size,))[None]
        return solve_fixed_point(
            cap,
            compute.copy(),
            self.rfrac,
            self.share,
            self.remote,
            self.zeros,
            self.zeros,
            self.params.curves,
            x0=x0,
        )

    def probe(self, sol: Solution) -> F64:
        """Latency (ns) of an access to the measured node: what MLC's probe thread sees."""
        if self.is_remote:
            return sol.tenant_latency_ns[0]
        return sol.node_latency_ns[self.node]

    def capacity(self) -> F64:
        """Model peak (GB/s): the closed loop with no compute and unbounded requests in flight."""
        return self.solve(np.zeros(self.size), mlp=PEAK_MLP).throughput[0]

    def place(self, bandwidth: F64) -> tuple[F64, F64, NDArray[np.bool_]]:
        """Probe latency where the closed loop carries ``bandwidth`` GB/s.

        Returns (latency ns, compute_ns, reachable). ``compute_ns`` is found by
        bisection (throughput falls as compute grows). Where even ``compute_ns = 0``
        cannot carry the bandwidth, the point is beyond the model's curve:
        ``reachable`` is False and the latency is the one at ``compute_ns = 0``.
        """
        target = np.asarray(bandwidth, dtype=float)
        c_cap = LINE_BYTES * self.threads[0] * PLACE_MLP
        s0 = self.solve(np.zeros(self.size))
        x_max = s0.throughput[0]
        reach = x_max >= target
        lo = np.zeros(self.size)
        hi = c_cap / np.maximum(target, 1e-9)  # at this compute the latency alone holds X < target
        x0 = np.minimum(target, x_max)[None]
        for _ in range(BISECTION_STEPS):
            mid = 0.5 * (lo + hi)
            x = self.solve(mid, x0=x0).throughput[0]
            above = x > target
            lo = np.where(above, mid, lo)
            hi = np.where(above, hi, mid)
        c = np.where(reach, 0.5 * (lo + hi), 0.0)
        sol = self.solve(c, x0=np.minimum(target, x_max)[None])
        return self.probe(sol), c, reach


def model_curve(
    hardware: str | Mapping[str, Any],
    memory: str,
    read_fraction: float,
    upto: float = 0.995,
    n: int = 60,
) -> tuple[F64, F64]:
    """The model's loaded-latency curve of one mix: (bandwidth GB/s, probe latency ns)."""
    cap = float(MLCBench(hardware, memory, [read_fraction]).capacity()[0])
    bw = cap * np.concatenate([np.geomspace(0.005, 0.5, n // 3), np.linspace(0.5, upto, n)[1:]])
    lat, _, _ = MLCBench(hardware, memory, [read_fraction] * bw.size).place(bw)
    return bw, lat


# --------------------------------------------------------------------------- metrics


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
    """Measured vs model for every mix of ``memory`` (all points placed in one batch)."""
    items: list[tuple[str, str, int, float]] = []  # (mix, kind, index, bandwidth)
    for mix in MIXES:
        s = series[(memory, mix)]
        for j in np.flatnonzero(s.on_curve):
            items.append((mix, "pt", int(j), float(s.bandwidth[j])))
        items.append((mix, "idle", 0, float(s.bandwidth[0])))
        for f in fractions:
            items.append((mix, f"f{f}", 0, f * s.peak))
    rfs = [MIXES[m] for m, *_ in items]
    bench = MLCBench(hardware, memory, rfs)
    lat, _, reach = bench.place(np.array([b for *_, b in items]))
    lat = np.where(reach, lat, np.nan)
    peak_bench = MLCBench(hardware, memory, list(MIXES.values()))
    peaks = dict(zip(MIXES, peak_bench.capacity(), strict=True))
    out = {}
    for mix in MIXES:
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


# --------------------------------------------------------------------------- parameters


@dataclass(frozen=True)
class Param:
    """One parameter of the fit: its bounds, unit, meaning and fit stage.

    ``stage`` is ``"peak"`` (fitted to the five peak bandwidths), ``"curve"`` (fitted
    to the latency of the non-saturated points, peaks held) or ``"data"`` (set from one
    measured number, see :func:`fit`).
    """

    key: str
    lo: float
    hi: float
    unit: str
    meaning: str
    stage: str


def _p(key: str, lo: float, hi: float, unit: str, meaning: str, stage: str) -> Param:
    return Param(key, lo, hi, unit, meaning, stage)


_SLOPE = "latency added in proportion to utilisation (ns at u = 1)"
_KNEE = "scale of the knee term knee*u^e/(1-u)"
_EXP = "exponent e of the knee: larger = later and sharper knee"

#: The parameters of each memory of the data (seven each). ``turn`` is the read/write
#: turnaround term ``c`` of the utilisation ``Rd/R + Wr/W + c*Rd*Wr/(Rd+Wr)``; the
#: preset stores it as the 1:1 peak ``mixed_gbps = 1/(0.5/R + 0.5/W + c/4)``.
PARAMETERS: dict[str, list[Param]] = {
    "mmem": [
        _p("idle_latency_ns", 60, 200, "ns", "latency of a read on an idle DDR5 node", "idle"),
        _p("read_gbps", 30, 150, "GB/s", "peak bandwidth, reads only", "peak"),
        _p("write_gbps", 30, 150, "GB/s", "peak bandwidth, writes only", "peak"),
        _p("turn", 0.0, 0.05, "1/(GB/s)", "read/write turnaround c (sets mixed_gbps)", "peak"),
        _p("queue_slope_ns", 0, 400, "ns", _SLOPE, "curve"),
        _p("knee_ns", 0.01, 400, "ns", _KNEE, "curve"),
        _p("knee_exp", 0.3, 12, "-", _EXP, "curve"),
    ],
    "cxl": [
        _p("idle_latency_ns", 150, 400, "ns", "latency of a read on an idle A1000", "idle"),
        _p("device_gbps", 30, 120, "GB/s", "peak of the expander's memory, any mix", "peak"),
        _p("link_read_gbps", 20, 80, "GB/s", "CXL link, device-to-host (carries reads)", "peak"),
        _p("link_write_gbps", 20, 80, "GB/s", "CXL link, host-to-device (carries writes)", "peak"),
        _p("queue_slope_ns", 0, 800, "ns", _SLOPE, "curve"),
        _p("knee_ns", 0.01, 800, "ns", _KNEE, "curve"),
        _p("knee_exp", 0.3, 12, "-", _EXP, "curve"),
    ],
    "cxl_remote": [
        _p("remote_latency_ns", 50, 500, "ns", "latency added by the other socket's path", "idle"),
        _p("remote_read_gbps", 5, 80, "GB/s", "remote path peak, reads only", "peak"),
        _p("remote_write_gbps", 5, 80, "GB/s", "remote path peak, writes only", "peak"),
        _p(
            "remote_turn",
            0.0,
            0.2,
            "1/(GB/s)",
            "remote turnaround (sets remote_mixed_gbps)",
            "peak",
        ),
        _p("remote_queue_slope_ns", 0, 2000, "ns", _SLOPE + ", remote path", "curve"),
        _p("remote_knee_ns", 0.01, 2000, "ns", _KNEE + ", remote path", "curve"),
        _p("remote_knee_exp", 0.3, 12, "-", _EXP + ", remote path", "curve"),
    ],
    "mmem_remote": [
        _p("remote_latency_ns", 20, 300, "ns", "latency added by the other socket's path", "curve"),
        _p(
            "remote_read_gbps",
            20,
            200,
            "GB/s",
            "remote path peak, reads (= measured 1:0 peak)",
            "data",
        ),
        _p("remote_write_gbps", 10, 150, "GB/s", "remote path peak, writes only", "peak"),
        _p(
            "remote_turn",
            0.0,
            0.1,
            "1/(GB/s)",
            "remote turnaround (sets remote_mixed_gbps)",
            "peak",
        ),
        _p("remote_queue_slope_ns", 0, 1000, "ns", _SLOPE + ", remote path", "curve"),
        _p("remote_knee_ns", 0.01, 1000, "ns", _KNEE + ", remote path", "curve"),
        _p("remote_knee_exp", 0.3, 12, "-", _EXP + ", remote path", "curve"),
    ],
}


def _mixed(r: float, w: float, c: float) -> float:
    return 1.0 / (0.5 / r + 0.5 / w + 0.25 * c)


def _turn(r: float, w: float, m: float) -> float:
    return max(0.0, 4.0 * (1.0 / m - 0.5 / r - 0.5 / w))


def node_values(memory: str, theta: Sequence[float] | F64) -> dict[str, float]:
    """Node keys (as in the presets) from a parameter vector of :data:`PARAMETERS`."""
    v = {p.key: float(x) for p, x in zip(PARAMETERS[memory], theta, strict=True)}
    if memory == "mmem":
        v["mixed_gbps"] = _mixed(v["read_gbps"], v["write_gbps"], v.pop("turn"))
    elif memory == "cxl":
        d = v.pop("device_gbps")
        v.update(read_gbps=d, write_gbps=d, mixed_gbps=d)
    else:
        r, w = v["remote_read_gbps"], v["remote_write_gbps"]
        v["remote_mixed_gbps"] = _mixed(r, w, v.pop("remote_turn"))
    return v


def theta_of(memory: str, node: Mapping[str, Any]) -> list[float]:
    """The parameter vector of :data:`PARAMETERS` held by a preset node."""
    out = []
    for p in PARAMETERS[memory]:
        if p.key == "turn":
            out.append(_turn(node["read_gbps"], node["write_gbps"], node["mixed_gbps"]))
        elif p.key == "remote_turn":
            out.append(
                _turn(
                    node["remote_read_gbps"], node["remote_write_gbps"], node["remote_mixed_gbps"]
                )
            )
        elif p.key == "device_gbps":
            out.append(node["mixed_gbps"])
        else:
            out.append(float(node[p.key]))
    return [min(max(x, p.lo), p.hi) for x, p in zip(out, PARAMETERS[memory], strict=True)]


# --------------------------------------------------------------------------- presets


CAPACITY = {"dram": 119.2, "cxl": 238.4}
NODE_ORDER = [
    "kind",
    "socket",
    "capacity_gib",
    "idle_latency_ns",
    "read_gbps",
    "write_gbps",
    "mixed_gbps",
    "link_read_gbps",
    "link_write_gbps",
    "queue_slope_ns",
    "knee_ns",
    "knee_exp",
    "remote_latency_ns",
    "remote_read_gbps",
    "remote_write_gbps",
    "remote_mixed_gbps",
    "remote_queue_slope_ns",
    "remote_knee_ns",
    "remote_knee_exp",
]


def _round(key: str, v: float) -> float:
    if key.endswith("_exp"):
        return round(v, 3)
    if key.endswith("_ns"):
        return round(v, 2)
    if key in ("mixed_gbps", "remote_mixed_gbps"):
        return math.floor(v * 100) / 100  # stay under the harmonic mean after rounding
    return round(v, 2)


def rounded(node: Mapping[str, float]) -> dict[str, float]:
    return {k: _round(k, float(v)) if isinstance(v, float) else v for k, v in node.items()}


def a1000_hardware(dram: Mapping[str, float], cxl: Mapping[str, float]) -> dict[str, Any]:
    """The spr-a1000 preset as a mapping: one SNC-4 DDR5 node and one A1000, socket 0."""
    return {
        "name": "spr-a1000",
        "description": "Sapphire Rapids SNC-4 DDR5-4800 node (2 channels) + one A1000 CXL expander",
        "nodes": [
            {
                "name": "dram0",
                "kind": "dram",
                "socket": 0,
                "capacity_gib": CAPACITY["dram"],
                **dram,
            },
            {"name": "cxl0", "kind": "cxl", "socket": 0, "capacity_gib": CAPACITY["cxl"], **cxl},
        ],
    }


def a1000_2s_hardware(dram: Mapping[str, float], cxl: Mapping[str, float]) -> dict[str, Any]:
    """The spr-a1000-2s preset: the same machine seen as two sockets."""
    hw = a1000_hardware(dram, cxl)
    hw["name"] = "spr-a1000-2s"
    dram1 = {**hw["nodes"][0], "name": "dram1", "socket": 1}
    hw["nodes"] = [hw["nodes"][0], dram1, hw["nodes"][1]]
    return hw


# spr-4cxl: see docs/validation.md section 4 for the reasons behind each number
SPR4_CHANNELS = 8
SPR4_CHANNEL_RATE = 5600.0 / 4800.0  # per-channel bandwidth relative to the EuroSys SPR's
SPR4_EXPANDERS = 4
SPR4_LINK_LANES = 8  # vs the A1000's x16
SPR4_DRAM_GIB = 476.8  # 8 x 64 GB RDIMM
SPR4_CXL_GIB = 238.4  # 256 GB per expander


def spr4cxl_hardware(dram: Mapping[str, float], cxl: Mapping[str, float]) -> dict[str, Any]:
    """The spr-4cxl preset derived from the fitted SNC node and A1000 (scalings documented)."""
    k = SPR4_CHANNEL_RATE
    scale_d = SPR4_CHANNELS / 2 * k  # the SNC node has 2 channels
    scale_c = 1 / 2 * k  # one channel behind each expander
    link = SPR4_LINK_LANES / 16
    d = {
        "idle_latency_ns": dram["idle_latency_ns"],
        "read_gbps": dram["read_gbps"] * scale_d,
        "write_gbps": dram["write_gbps"] * scale_d,
        "mixed_gbps": dram["mixed_gbps"] * scale_d,
        "queue_slope_ns": dram["queue_slope_ns"],
        "knee_ns": dram["knee_ns"],
        "knee_exp": dram["knee_exp"],
    }
    c = {
        "idle_latency_ns": cxl["idle_latency_ns"],
        "read_gbps": dram["read_gbps"] * scale_c,
        "write_gbps": dram["write_gbps"] * scale_c,
        "mixed_gbps": dram["mixed_gbps"] * scale_c,
        "link_read_gbps": cxl["link_read_gbps"] * link,
        "link_write_gbps": cxl["link_write_gbps"] * link,
        "queue_slope_ns": cxl["queue_slope_ns"],
        "knee_ns": cxl["knee_ns"],
        "knee_exp": cxl["knee_exp"],
    }
    nodes = [{"name": "dram0", "kind": "dram", "socket": 0, "capacity_gib": SPR4_DRAM_GIB, **d}]
    for i in range(SPR4_EXPANDERS):
        nodes.append(
            {"name": f"cxl{i}", "kind": "cxl", "socket": 0, "capacity_gib": SPR4_CXL_GIB, **c}
        )
    return {
        "name": "spr-4cxl",
        "description": "one socket, 8 DDR5 channels, four x8 CXL memory expanders",
        "nodes": nodes,
    }


# ---- YAML text with comments


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        s = f"{v:.3f}".rstrip("0")
        return s + "0" if s.endswith(".") else s
    return str(v)


def _node_yaml(node: Mapping[str, Any], notes: Mapping[str, str]) -> list[str]:
    lines = [f"  - name: {node['name']}"]
    for k in NODE_ORDER:
        if k not in node:
            continue
        txt = f"    {k}: {_fmt(node[k])}"
        note = notes.get(k)
        if note:
            txt = f"{txt:<34}# {note}"
        lines.append(txt)
    return lines


def _header(text: str) -> list[str]:
    return ["# " + ln if ln else "#" for ln in text.strip("\n").splitlines()]


A1000_HEADER = """
One sub-NUMA (SNC-4) DDR5 node of a Sapphire Rapids socket plus one Astera Labs
A1000 CXL expander on that socket: the EuroSys'24 machine ("Exploring Performance
and Cost Optimization with ASIC-Based CXL Memory"; MLC logs in
bytedance/eurosys24-artifacts@1cd95f3, see ../shared/calibration/README.md).

Latency/bandwidth numbers are FITTED by `python -m envs.calibrate` to the MLC
loaded-latency curves (16-thread series of loaded_latency_fig3_seq.csv, every mix);
docs/validation.md lists each parameter's meaning and the fit's errors. Rerun the
script rather than editing them by hand (it rewrites this file). "tied": set so the
model reproduces one measured point exactly; "data": one measured number. The remote_*
keys matter only where a tenant runs on another socket (preset spr-a1000-2s).
"""

A1000_2S_HEADER = """
The spr-a1000 machine seen as two sockets (dram1 is socket 1's SNC node, identical to
dram0), so that remote access is possible: a tenant on socket 1 reaches dram0 and cxl0
through the socket link. Remote parameters are FITTED by `python -m envs.calibrate` to
the remote series (mmem_remote: other socket's DDR5 node; cxl_remote: the A1000 from
the other socket); local parameters are those of spr-a1000. Rerun the script rather
than editing by hand; docs/validation.md has the fit and its errors.
"""

SPR4_HEADER = """
A single-socket Xeon with 8 DDR5 channels and four CXL memory expanders: the kind of
box behind the weighted-interleave MLC results in the Linux weighted-interleave
auto-tuning thread (Jan 2025, data by Ravi Jonnalagadda, Micron: "single-socket
server, multiple CXL memory expanders"; CPU, DIMMs and expanders not stated; targets
wi-* in ../shared/calibration/targets.json). Nothing here is measured on that box:
every number is DERIVED by `python -m envs.calibrate` from the fitted spr-a1000 nodes
by these assumptions (docs/validation.md section 6 gives the reasons in full):
- DRAM: 8 channels; each delivers 5600/4800 of the EuroSys SPR's measured per-channel
  bandwidth at every mix, i.e. DDR5-5600 at that machine's efficiency (an Emerald
  Rapids socket, the 2023 refresh of this platform). At DDR5-4800 and that efficiency
  DRAM-only MLC would give ~245 GB/s at 2:1, 18% under the published 298.8 GB/s, which
  is 97% of 8 x DDR5-4800's theoretical 307.2 GB/s. Latency curve: the SNC node's.
- CXL: 4 expanders, Micron CZ120-class (E3.S, PCIe Gen5 x8, 256 GB, one DDR5 channel
  behind an SMC 2000 x8 controller). Link = half the A1000's measured x16 link (75% of
  raw per direction); at 2:1 it allows 24.0/(2/3) = 36 GB/s, Micron's CZ120 figure for
  MLC 2:1. Device memory = one channel at the rate above. Latency curve: the A1000's.
- The kernel's auto weights read each node's min(read, write) peak (23:2:2:2:2 here).
"""


def a1000_notes(kind: str, fit_info: Mapping[str, str]) -> dict[str, str]:
    if kind == "dram":
        n = {
            "capacity_gib": "1 TB / 2 sockets / SNC-4 = 128 GB",
            "idle_latency_ns": "tied: model = 97.0 ns at mmem 1:0 lowest-load point",
            "read_gbps": "fit: mmem peaks (16 threads: 67.5 GB/s at 1:0)",
            "write_gbps": "fit: mmem peaks (54.7 GB/s at 0:1, non-temporal)",
            "mixed_gbps": "fit: mmem peaks (59.1 GB/s at 1:1)",
            "queue_slope_ns": "fit: mmem curve shape",
            "knee_ns": "fit: mmem knee",
            "knee_exp": "fit: mmem knee",
            "remote_latency_ns": "fit: mmem_remote above 15% of peak (was 56.7: random-read low load)",
            "remote_read_gbps": "data: mmem_remote 1:0 peak 70.8 GB/s",
            "remote_write_gbps": "fit: mmem_remote peaks (34.5 GB/s at 0:1)",
            "remote_mixed_gbps": "fit: mmem_remote peaks (38.1 GB/s at 1:1)",
            "remote_queue_slope_ns": "fit: mmem_remote curve",
            "remote_knee_ns": "fit: mmem_remote knee",
            "remote_knee_exp": "fit: mmem_remote knee",
        }
    else:
        n = {
            "capacity_gib": "256 GB DDR5-4800 behind the A1000",
            "idle_latency_ns": "tied: model = 250.4 ns at cxl 1:0 lowest-load point",
            "read_gbps": "fit: cxl 3:1..1:1 peaks (54.1-54.5 GB/s): device memory",
            "write_gbps": "= read_gbps: the device memory is only seen at mixed traffic",
            "mixed_gbps": "= read_gbps",
            "link_read_gbps": "fit: cxl 1:0 peak 48.0 GB/s (x16 Gen5: 75% of 64 GB/s)",
            "link_write_gbps": "fit: cxl 0:1 peak 47.0 GB/s (non-temporal writes)",
            "queue_slope_ns": "fit: cxl curve shape",
            "knee_ns": "fit: cxl knee",
            "knee_exp": "fit: cxl knee",
            "remote_latency_ns": "tied: model = 485.2 ns at cxl_remote 1:0 lowest load",
            "remote_read_gbps": "fit: cxl_remote peaks (20.3 GB/s at 1:0)",
            "remote_write_gbps": "fit: cxl_remote peaks (27.7 GB/s at 0:1)",
            "remote_mixed_gbps": "fit: cxl_remote peaks (21.5 GB/s at 1:1)",
            "remote_queue_slope_ns": "fit: cxl_remote curve",
            "remote_knee_ns": "fit: cxl_remote knee",
            "remote_knee_exp": "fit: cxl_remote knee (at its upper bound, see docs)",
        }
    n.update(fit_info)
    return n


def preset_yaml(hw: Mapping[str, Any], header: str, notes: Mapping[str, dict[str, str]]) -> str:
    lines = _header(header)
    lines += [f"name: {hw['name']}", "description: >-"]
    lines += ["  " + ln for ln in _wrap(hw["description"], 86)]
    lines.append("nodes:")
    for node in hw["nodes"]:
        lines += _node_yaml(node, notes.get(node["name"], {}))
    return "\n".join(lines) + "\n"


def _wrap(text: str, width: int) -> list[str]:
    out, cur = [], ""
    for word in text.split():
        if cur and len(cur) + 1 + len(word) > width:
            out.append(cur)
            cur = word
        else:
            cur = f"{cur} {word}" if cur else word
    return [*out, cur] if cur else out


def write_presets(dram: Mapping[str, float], cxl: Mapping[str, float]) -> list[Path]:
    """Write spr-a1000.yaml, spr-a1000-2s.yaml and spr-4cxl.yaml from fitted node values."""
    dram, cxl = rounded(dram), rounded(cxl)
    dn, cn = a1000_notes("dram", {}), a1000_notes("cxl", {})
    files = []
    hw = a1000_hardware(dram, cxl)
    hw["description"] = (
        "Sapphire Rapids, SNC-4 sub-NUMA DDR5-4800 node (2 channels, 76.8 GB/s theoretical) + one "
        "A1000 CXL 1.1 expander (PCIe Gen5 x16, 256 GB DDR5-4800) on socket 0."
    )
    files.append(("spr-a1000.yaml", preset_yaml(hw, A1000_HEADER, {"dram0": dn, "cxl0": cn})))
    hw2 = a1000_2s_hardware(dram, cxl)
    hw2["description"] = (
        "The spr-a1000 machine as two sockets: dram0 (socket 0), dram1 (socket 1, identical), "
        "cxl0 (the A1000, socket 0). Remote parameters fitted to the remote-socket MLC series."
    )
    dn1 = {**dn, "capacity_gib": "socket 1's SNC node, same as dram0"}
    files.append(
        (
            "spr-a1000-2s.yaml",
            preset_yaml(hw2, A1000_2S_HEADER, {"dram0": dn, "dram1": dn1, "cxl0": cn}),
        )
    )
    hw4 = spr4cxl_hardware(dram, cxl)
    for node in hw4["nodes"]:
        node.update(rounded({k: v for k, v in node.items() if isinstance(v, float)}))
    hw4["description"] = (
        "Single-socket Xeon (Sapphire/Emerald Rapids platform), 8 DDR5 channels at the DDR5-5600 "
        "per-channel rate, four CZ120-class CXL expanders (PCIe Gen5 x8, one DDR5 channel each). "
        "Derived from the fitted spr-a1000 nodes, not measured."
    )
    n4d = {
        "capacity_gib": "8 x 64 GB RDIMM = 512 GB",
        "idle_latency_ns": "= spr-a1000 dram0 (fitted)",
        "read_gbps": "= 4 x spr-a1000 dram0 x 5600/4800",
        "write_gbps": "= 4 x spr-a1000 dram0 x 5600/4800",
        "mixed_gbps": "= 4 x spr-a1000 dram0 x 5600/4800",
        "queue_slope_ns": "= spr-a1000 dram0 (curve shape in utilisation)",
        "knee_ns": "= spr-a1000 dram0",
        "knee_exp": "= spr-a1000 dram0",
    }
    n4c = {
        "capacity_gib": "256 GB per expander",
        "idle_latency_ns": "= spr-a1000 cxl0 (fitted A1000)",
        "read_gbps": "one DDR5 channel: spr-a1000 dram0 / 2 x 5600/4800",
        "write_gbps": "one DDR5 channel: spr-a1000 dram0 / 2 x 5600/4800",
        "mixed_gbps": "one DDR5 channel: spr-a1000 dram0 / 2 x 5600/4800",
        "link_read_gbps": "x8: half the A1000's measured x16 link",
        "link_write_gbps": "x8: half the A1000's measured x16 link",
        "queue_slope_ns": "= spr-a1000 cxl0",
        "knee_ns": "= spr-a1000 cxl0",
        "knee_exp": "= spr-a1000 cxl0",
    }
    notes4 = {"dram0": n4d, "cxl0": n4c}
    files.append(("spr-4cxl.yaml", preset_yaml(hw4, SPR4_HEADER, notes4)))
    out = []
    for name, text in files:
        path = HARDWARE_DIR / name
        yaml.safe_load(text)  # a template bug must not ship
        path.write_text(text)
        out.append(path)
    hardware_presets.cache_clear()
    return out


def read_preset(name: str) -> dict[str, Any]:
    """A preset mapping read from its file now (not the cached package copy)."""
    for f in HARDWARE_DIR.glob("*.yaml"):
        data = yaml.safe_load(f.read_text())
        if data.get("name") == name:
            return data
    raise KeyError(f"no hardware preset {name!r} in {HARDWARE_DIR}")


def node_of(hw: Mapping[str, Any], name: str) -> dict[str, Any]:
    for n in hw["nodes"]:
        if n["name"] == name:
            return dict(n)
    raise KeyError(name)


_NODE_KEYS = {
    "mmem": ("dram0", "local"),
    "cxl": ("cxl0", "local"),
    "cxl_remote": ("cxl0", "remote"),
    "mmem_remote": ("dram0", "remote"),
}


def _hardware_with(memory: str, base: Mapping[str, Any], values: Mapping[str, float]) -> dict:
    """``base`` (spr-a1000 or -2s mapping) with ``values`` on the node of ``memory``."""
    hw = copy.deepcopy(dict(base))
    target = _NODE_KEYS[memory][0]
    for n in hw["nodes"]:
        if n["name"] == target or (target == "dram0" and n["kind"] == "dram"):
            n.update(values)
    return hw


# --------------------------------------------------------------------------- the fit


#: Starting point of the fit: the hand-set spr-a1000 numbers before calibration
#: (remote DDR parameters at NodeSpec's defaults, remote latency 154.3 - 97.6 ns).
INITIAL: dict[str, dict[str, float]] = {
    "dram": {
        "idle_latency_ns": 97.0,
        "read_gbps": 69.3,
        "write_gbps": 59.6,
        "mixed_gbps": 59.3,
        "queue_slope_ns": 20.0,
        "knee_ns": 8.0,
        "knee_exp": 1.5,
        "remote_latency_ns": 56.7,
        "remote_read_gbps": 100.0,
        "remote_write_gbps": 100.0,
        "remote_mixed_gbps": 100.0,
        "remote_queue_slope_ns": 20.0,
        "remote_knee_ns": 10.0,
        "remote_knee_exp": 1.5,
    },
    "cxl": {
        "idle_latency_ns": 245.0,
        "read_gbps": 54.3,
        "write_gbps": 54.3,
        "mixed_gbps": 54.3,
        "link_read_gbps": 48.0,
        "link_write_gbps": 47.1,
        "queue_slope_ns": 60.0,
        "knee_ns": 20.0,
        "knee_exp": 1.5,
        "remote_latency_ns": 225.0,
        "remote_read_gbps": 20.35,
        "remote_write_gbps": 29.68,
        "remote_mixed_gbps": 23.34,
        "remote_queue_slope_ns": 150.0,
        "remote_knee_ns": 50.0,
        "remote_knee_exp": 1.5,
    },
}


def _curve_residuals(
    memory: str, hw: Mapping[str, Any], series: Mapping[tuple[str, str], Series]
) -> tuple[F64, float]:
    """log(model / measured) latency at the fitted points of every mix (through the model).

    Returns the residuals and the shift (ns) of the ``"idle"`` parameter that makes the
    model's latency at the lowest-load 1:0 point equal the measured idle latency (zero
    for a memory without one). At a fixed bandwidth the probe latency is that parameter
    plus terms that do not depend on it, so the shift is exact.
    """
    rfs, bws, lats = [], [], []
    for mix, rf in MIXES.items():
        s = series[(memory, mix)]
        m = s.fitted
        rfs += [rf] * int(m.sum())
        bws += list(s.bandwidth[m])
        lats += list(s.latency[m])
    anchored = any(p.stage == "idle" for p in PARAMETERS[memory])
    ref = series[(memory, "1:0")]
    if anchored:
        rfs.append(1.0)
        bws.append(float(ref.bandwidth[0]))
    lat, _, reach = MLCBench(hw, memory, rfs).place(np.array(bws))
    shift = 0.0
    if anchored:
        shift = ref.idle - float(lat[-1])
        lat, reach = lat[:-1] + shift, reach[:-1]
    # a point beyond the model's reach: its latency at compute 0 and a penalty
    res = np.where(reach, 0.0, 1.0) + np.log(np.maximum(lat, 1.0) / np.array(lats))
    return res, shift


def _peak_residuals(
    memory: str, hw: Mapping[str, Any], series: Mapping[tuple[str, str], Series]
) -> F64:
    """log(model / measured) peak bandwidth of every mix."""
    peaks = MLCBench(hw, memory, list(MIXES.values())).capacity()
    return np.log(peaks / np.array([series[(memory, m)].peak for m in MIXES]))


def fit_memory(
    memory: str,
    base: Mapping[str, Any],
    series: Mapping[tuple[str, str], Series],
    theta0: Sequence[float],
    verbose: bool = False,
) -> tuple[dict[str, float], list[Any]]:
    """Fit one memory: peaks first (peak parameters), then the curve (curve parameters)."""
    from scipy.optimize import least_squares

    ps = PARAMETERS[memory]
    theta = np.asarray(theta0, dtype=float).copy()
    anchor = [i for i, p in enumerate(ps) if p.stage == "idle"]
    results = []
    for stage, loss in (("peak", "linear"), ("curve", "soft_l1")):
        idx = [i for i, p in enumerate(ps) if p.stage == stage]
        lo = np.array([ps[i].lo for i in idx])
        hi = np.array([ps[i].hi for i in idx])
        x0 = np.clip(theta[idx], lo + 1e-6 * (hi - lo), hi - 1e-6 * (hi - lo))

        def hw_of(x: F64, idx: list[int] = idx) -> tuple[dict, F64]:
            th = theta.copy()
            th[idx] = x
            return _hardware_with(memory, base, node_values(memory, th)), th

        def fun(x: F64, stage: str = stage) -> F64:
            hw, _ = hw_of(x)
            if stage == "peak":
                return _peak_residuals(memory, hw, series)
            return _curve_residuals(memory, hw, series)[0]

        res = least_squares(
            fun,
            x0,
            bounds=(lo, hi),
            x_scale=np.maximum(np.abs(x0), 1e-2 * (hi - lo)),
            diff_step=1e-4,
            loss=loss,
            f_scale=0.05,
            max_nfev=300,
            verbose=2 if verbose else 0,
        )
        theta[idx] = res.x
        if stage == "curve" and anchor:
            hw, _ = hw_of(res.x)
            theta[anchor] += _curve_residuals(memory, hw, series)[1]
        results.append(res)
    return node_values(memory, theta), results


def fit(
    series: Mapping[tuple[str, str], Series], verbose: bool = False
) -> tuple[dict[str, float], dict[str, float]]:
    """Fit dram0 and cxl0 (local, then remote parameters); returns their node values.

    Starting point: :data:`INITIAL` (the hand-set numbers the presets had before any
    fit), with peaks from the data, so the fit does not depend on what the presets hold
    now. The one
    ``"data"`` parameter (mmem_remote's remote read peak) is the measured 1:0 remote
    peak: the DDR node's own read peak binds before it, so the curves cannot place it.
    """
    dram, cxl = dict(INITIAL["dram"]), dict(INITIAL["cxl"])
    for memory in MEMORIES:
        node = dram if memory.startswith("mmem") else cxl
        base = (
            a1000_hardware(dram, cxl)
            if SETUPS[memory].preset == "spr-a1000"
            else a1000_2s_hardware(dram, cxl)
        )
        start = {**node, **_peak_guess(memory, series, node)}
        for p in PARAMETERS[memory]:
            start.setdefault(p.key, p.lo + 0.1 * (p.hi - p.lo))
        theta0 = theta_of(memory, start)
        vals, res = fit_memory(memory, base, series, theta0, verbose=verbose)
        node.update(vals)
        cost = ", ".join(f"{r.cost:.4f}" for r in res)
        print(f"fit {memory}: cost (peak, curve) {cost}", file=sys.stderr)
        for k, v in vals.items():
            print(f"    {k:<24} {v:10.3f}", file=sys.stderr)
    return dram, cxl


def _peak_guess(memory: str, series: Mapping[tuple[str, str], Series], node: Mapping) -> dict:
    pk = {m: series[(memory, m)].peak for m in MIXES}
    if memory == "mmem":
        return {"read_gbps": pk["1:0"], "write_gbps": pk["0:1"], "mixed_gbps": pk["1:1"]}
    if memory == "cxl":
        dev = (pk["3:1"] + pk["2:1"] + pk["1:1"]) / 3
        return {
            "read_gbps": dev,
            "write_gbps": dev,
            "mixed_gbps": dev,
            "link_read_gbps": pk["1:0"],
            "link_write_gbps": pk["0:1"],
        }
    r, w = series[(memory, "1:0")].peak_all_threads, pk["0:1"]
    return {
        "remote_read_gbps": r,
        "remote_write_gbps": w,
        "remote_mixed_gbps": min(pk["1:1"], 0.999 / (0.5 / r + 0.5 / w)),
    }


# --------------------------------------------------------------------------- spr-4cxl: weighted interleave


SPR4_SCENARIO = SCENARIO_DIR / "mlc-bandwidth.yaml"
#: step whose outputs represent each mix of the scenario (2:1 until 10 s, then 1:1)
SPR4_STEPS = {"2:1": 9, "1:1": 19}
POLICIES = ("dram-only", "interleave", "weighted-interleave")
WI_TARGETS = {
    ("2:1", "dram-only"): 298.8,
    ("2:1", "interleave"): 113.04,
    ("2:1", "weighted-interleave"): 412.5,
    ("1:1", "dram-only"): 273.2,
    ("1:1", "interleave"): 117.23,
    ("1:1", "weighted-interleave"): 382.7,
}
WI_GAIN = {"2:1": 1.38, "1:1": 1.40}


def firmware_bandwidth(hw: Mapping[str, Any]) -> F64:
    """Per-node bandwidth the kernel's auto mode reads (HMAT/CDAT): min(read, write) peak.

    A CXL node's read (write) peak is the smaller of its memory's and its link's.
    """
    from baselines.algorithms import node_bandwidth_for_weights

    rd, wr = [], []
    for n in hw["nodes"]:
        rd.append(min(n["read_gbps"], n.get("link_read_gbps") or math.inf))
        wr.append(min(n["write_gbps"], n.get("link_write_gbps") or math.inf))
    return node_bandwidth_for_weights(rd, wr)


def interleave_experiment(
    scenario: str | Path | Mapping[str, Any] = SPR4_SCENARIO, weights: Sequence[int] | None = None
) -> dict:
    """Run the MLC-like tenant under the three placements; GB/s per (mix, policy).

    ``weights`` replaces the auto-tuned weights (a sensitivity check).
    """
    from baselines.algorithms import auto_interleave_weights
    from envs.simulator import Simulator

    sc = load_scenario(scenario if not isinstance(scenario, Path) else str(scenario))
    hw = sc.hardware.model_dump()
    n = len(hw["nodes"])
    auto = auto_interleave_weights(firmware_bandwidth(hw)) if weights is None else weights
    w = np.zeros((len(POLICIES), 1, n))
    w[0, 0, 0] = 1.0  # DRAM only (membind: the DRAM node)
    w[1, 0, :] = 1.0  # MPOL_INTERLEAVE over all nodes
    w[2, 0, :] = auto  # MPOL_WEIGHTED_INTERLEAVE, auto-tuned weights
    sim = Simulator(sc, batch_size=len(POLICIES))
    outs = sim.run(w)
    res: dict[Any, Any] = {"weights": [int(w) for w in auto], "nodes": sim.node_names}
    for mix, k in SPR4_STEPS.items():
        for i, pol in enumerate(POLICIES):
            res[(mix, pol)] = float(outs[k].total_throughput_gbps[i])
            res[(mix, pol, "latency")] = float(outs[k].tenant_latency_ns[i, 0])
            res[(mix, pol, "util")] = [float(u) for u in outs[k].node_utilization[i]]
    return res


# --------------------------------------------------------------------------- checks


@dataclass
class Check:
    """One line of the must-show table (``required`` False: shown for information)."""

    name: str
    value: str
    target: str
    ok: bool
    required: bool = True


def must_show_checks(
    series: Mapping[tuple[str, str], Series],
    metrics: Mapping[str, Mapping[str, MixMetrics]] | None = None,
    wi: Mapping[Any, Any] | None = None,
) -> list[Check]:
    """The issue's must-show list, evaluated on the shipped presets through the model."""
    if metrics is None:
        metrics = {m: memory_metrics(preset_for(m), m, series) for m in CHECKED}
    out = []
    for m in CHECKED:
        mm = metrics[m]
        worst = max(mm.values(), key=lambda x: abs(x.peak_rel))
        out.append(
            Check(
                f"{m}: peak bandwidth, every mix",
                f"worst {worst.mix}: {worst.peak_model:.1f} vs {worst.peak_meas:.1f} GB/s "
                f"({100 * worst.peak_rel:+.1f}%)",
                "within 7%",
                all(abs(x.peak_rel) <= TOL["peak"] for x in mm.values()),
            )
        )
        idle = mm["1:0"]
        out.append(
            Check(
                f"{m}: idle latency (1:0 lowest-load point; the fit ties it)",
                f"{idle.idle_model:.1f} vs {idle.idle_meas:.1f} ns ({100 * idle.idle_rel:+.1f}%)",
                "within 5%",
                abs(idle.idle_rel) <= TOL["idle"],
            )
        )
        low = max(mm.values(), key=lambda x: abs(x.idle_rel))
        out.append(
            Check(
                f"{m}: lowest-load latency of every mix (extra)",
                f"worst {low.mix}: {low.idle_model:.1f} vs {low.idle_meas:.1f} ns "
                f"({100 * low.idle_rel:+.1f}%)",
                "within 5%",
                all(abs(x.idle_rel) <= TOL["idle"] for x in mm.values()),
                required=False,
            )
        )
        med = pooled_median(mm)
        out.append(
            Check(
                f"{m}: median latency error up to 90% of peak (all mixes)",
                f"{100 * med:.1f}%",
                "at most 10%",
                med <= TOL["median"],
            )
        )
    if wi is None:
        wi = interleave_experiment()
    for mix in ("2:1", "1:1"):
        for pol in ("dram-only", "weighted-interleave"):
            v, t = wi[(mix, pol)], WI_TARGETS[(mix, pol)]
            out.append(
                Check(
                    f"spr-4cxl {mix}: {pol}",
                    f"{v:.1f} vs {t} GB/s ({100 * (v / t - 1):+.1f}%)",
                    "within 10%",
                    abs(v / t - 1) <= 0.10,
                )
            )
        gain = wi[(mix, "weighted-interleave")] / wi[(mix, "dram-only")]
        out.append(
            Check(
                f"spr-4cxl {mix}: weighted / DRAM only",
                f"{gain:.3f} vs {WI_GAIN[mix]}",
                "within 0.08",
                abs(gain - WI_GAIN[mix]) <= 0.08,
            )
        )
        gap = wi[(mix, "dram-only")] - wi[(mix, "interleave")]
        pub = WI_TARGETS[(mix, "dram-only")] - WI_TARGETS[(mix, "interleave")]
        out.append(
            Check(
                f"spr-4cxl {mix}: default interleave below DRAM only",
                f"{wi[(mix, 'interleave')]:.1f} GB/s, {gap:.1f} under DRAM only "
                f"(published {WI_TARGETS[(mix, 'interleave')]}, {pub:.1f} under)",
                f">= {pub / 2:.1f} GB/s under",
                gap >= pub / 2,
            )
        )
    return out


def preset_for(memory: str) -> str:
    return SETUPS[memory].preset


# --------------------------------------------------------------------------- report


def _plot(
    memory: str,
    hw: Mapping[str, Any],
    mm: Mapping[str, MixMetrics],
    path: Path,
    series: Mapping[tuple[str, str], Series],
) -> None:
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


def _pct(x: float) -> str:
    return "n/a" if not np.isfinite(x) else f"{100 * x:+.1f}%"


def _ns(x: float) -> str:
    return "sat." if not np.isfinite(x) else f"{x:.0f}"


def _mem_table(mm: Mapping[str, MixMetrics]) -> list[str]:
    rows = [
        "| mix | idle meas / model (ns) | peak meas (all threads) / model (GB/s) | "
        "L @50% meas / model | L @80% meas / model | L @95% meas / model | "
        "median err <=90% (n) | median err, all non-sat. |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for mix, m in mm.items():
        cells = [
            mix,
            f"{m.idle_meas:.1f} / {m.idle_model:.1f} ({_pct(m.idle_rel)})",
            f"{m.peak_meas:.1f} ({m.peak_all_threads:.1f}) / {m.peak_model:.1f} ({_pct(m.peak_rel)})",
        ]
        for f in (0.5, 0.8, 0.95):
            meas, gap, mod = m.at_frac[f]
            mark = "~" if gap else ""
            cells.append(f"{mark}{_ns(meas)} / {_ns(mod)}")
        cells.append(f"{100 * m.median_err:.1f}% ({m.n_err})" if m.n_err else "n/a (0)")
        cells.append(f"{100 * m.median_err_all:.1f}%")
        rows.append("| " + " | ".join(cells) + " |")
    return rows


def sensitivity_runs() -> list[tuple[str, Mapping[Any, Any]]]:
    """The spr-4cxl experiment under other choices of the guessed assumptions."""
    base = yaml.safe_load(SPR4_SCENARIO.read_text())
    out: list[tuple[str, Mapping[Any, Any]]] = []
    for name, threads, mlp, weights in (
        ("as shipped (64 cores, 32 in flight, auto weights)", None, None, None),
        ("56 cores (Sapphire Rapids 8480+)", 56, None, None),
        ("41 in flight (median of the cxl series)", None, 41.0, None),
        ("weights 11:1 (nominal DDR5-4800 HMAT figure)", None, None, [11, 1, 1, 1, 1]),
    ):
        sc = copy.deepcopy(base)
        if threads:
            sc["tenants"][0]["threads"] = threads
        if mlp:
            sc["tenants"][0]["mlp"] = mlp
        out.append((name, interleave_experiment(sc, weights=weights)))
    return out


def write_report(data: str | Path | None = None) -> Path:
    """Generate docs/validation.md and docs/img/calibration-*.png from the shipped presets."""
    series = load_series(data)
    hardware_presets.cache_clear()
    hws = {name: read_preset(name) for name in ("spr-a1000", "spr-a1000-2s", "spr-4cxl")}
    metrics = {m: memory_metrics(hws[SETUPS[m].preset], m, series) for m in MEMORIES}
    wi = interleave_experiment()
    checks = must_show_checks(series, metrics, wi)
    for m in MEMORIES:
        _plot(m, hws[SETUPS[m].preset], metrics[m], IMG_DIR / f"calibration-{m}.png", series)
    text = _report_text(
        series,
        hws,
        metrics,
        wi,
        checks,
        sensitivity_runs(),
        random_remote_check(hws["spr-a1000-2s"], data),
    )
    DOC.parent.mkdir(parents=True, exist_ok=True)
    DOC.write_text(text)
    return DOC


def random_remote_check(hw: Mapping[str, Any], data: str | Path | None = None) -> list[tuple]:
    """Model vs MLC random-read latency from the other socket (mmem_remote, 1:0, 16 threads).

    A cross-check of dram0's remote latency on a series the fit did not see. Returns
    rows ``(bandwidth, measured ns, model ns)``.
    """
    path = resolve_data_dir(data) / "loaded_latency_all.csv"
    if not path.is_file():
        return []
    pts = []
    with path.open(newline="") as f:
        for r in csv.DictReader(f):
            if (
                r["memory"] == "mmem_remote"
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
    bw = np.array([p[1] for p in pts])
    lat = np.array([p[2] for p in pts])
    keep = bw < SATURATION * bw.max()
    model, _, reach = MLCBench(hw, "mmem_remote", [1.0] * int(keep.sum())).place(bw[keep])
    return [
        (float(b), float(m), float(x) if r else float("nan"))
        for b, m, x, r in zip(bw[keep], lat[keep], model, reach, strict=True)
    ]


def _report_text(
    series: Mapping[tuple[str, str], Series],
    hws: Mapping[str, Mapping[str, Any]],
    metrics: Mapping[str, Mapping[str, MixMetrics]],
    wi: Mapping[Any, Any],
    checks: Sequence[Check],
    sensitivity: Sequence[tuple[str, Mapping[Any, Any]]],
    random_remote: Sequence[tuple],
) -> str:
    a2 = hws["spr-a1000-2s"]
    dram, cxl = node_of(a2, "dram0"), node_of(a2, "cxl0")
    n_params = sum(len(v) for v in PARAMETERS.values())
    n_points = sum(int(s.fitted.sum()) for s in series.values())
    in_flight = mlc_lines_in_flight(series, ("mmem", "cxl"))
    L: list[str] = []
    w = L.append
    w("# Validation of the memory model against measurements")
    w("")
    w("Generated by `python -m envs.calibrate --report` from the shipped presets and the")
    w("shared data in `../shared/calibration/`; do not edit by hand. The fit itself is")
    w("`python -m envs.calibrate` (rewrites `envs/data/hardware/spr-a1000.yaml`,")
    w("`spr-a1000-2s.yaml` and `spr-4cxl.yaml`); `python -m envs.calibrate --check` prints")
    w("the checks below and `pytest tests/test_calibration.py` asserts them. Both read the")
    w("data from `../shared/calibration` (option `--data DIR`). The fit needs `scipy`.")
    w("")
    w("## 1. Must-show checks")
    w("")
    w("| check | model vs measured | target | met |")
    w("|---|---|---|---|")
    for c in checks:
        met = "yes" if c.ok else ("**no**" if c.required else "no")
        w(f"| {c.name} | {c.value} | {c.target} | {met} |")
    w("")
    w("Every number comes from the model the environment runs (`envs.solver.solve_fixed_point`")
    w("on the arrays `envs.model.compile_params` builds from a scenario; the Simulator gives the")
    w("same, which `tests/test_calibration.py` checks). The checks that are not met are")
    w("explained in section 5 and 6; the model was not bent to meet them.")
    w("")
    w("## 2. How the MLC measurement is reproduced")
    w("")
    w("The data (`loaded_latency_fig3_seq.csv`) are Intel MLC `--loaded_latency` runs on the")
    w("EuroSys'24 Sapphire Rapids machine: traffic threads stream over one memory node with a")
    w("read:write mix and an injection delay while one more thread measures dependent-read")
    w("latency. The test is rebuilt as a scenario (`envs.calibrate.mlc_scenario`):")
    w("")
    w("- one tenant `mlc` with 16 threads (the `c16` logs, the curves of the paper's Fig. 3),")
    w("  `read_fraction` from the mix (1:0 = 1, 3:1 = 0.75, 2:1 = 2/3, 1:1 = 0.5, 0:1 = 0),")
    w("  all pages on the measured node through its interleave weights;")
    w("- `mmem` = `dram0` and `cxl` = `cxl0` of `spr-a1000`, threads on socket 0;")
    w("  `mmem_remote` = `dram0` and `cxl_remote` = `cxl0` of `spr-a1000-2s`, threads on socket 1;")
    w("- MLC's injection delay becomes `compute_ns`: for each measured point it is solved")
    w("  (bisection, 48 steps) so that the closed-loop fixed point carries exactly the measured")
    w("  bandwidth. For one tenant the latency at a given bandwidth does not depend on how many")
    w(f"  requests it keeps in flight, so `mlp` only has to be large enough ({PLACE_MLP:g});")
    w("- the probe latency is the model's latency of an access to that node: `node_latency_ns`")
    w("  for a local node, the tenant's latency (which adds the remote path) for a remote one.")
    w("")
    w("Definitions:")
    w("")
    w("- **Idle latency, measured**: the lowest-load point (inject delay 20000 cycles) of the")
    w("  16-thread 1:0 series: the paper's initial latencies (97.0, 250.4, 485.2 ns; 130.9 ns")
    w("  for `mmem_remote`, which is unreliable, see below). **Model**: the model's probe")
    w("  latency at that same bandwidth. The per-mix tables also compare every mix's")
    w("  lowest-load point.")
    w("- **Peak bandwidth, measured**: the highest bandwidth of the 16-thread series (the")
    w("  highest over all thread counts, 1-16, is shown in brackets). **Model**: the closed")
    w(
        f"  loop's throughput with `compute_ns = 0` and unbounded requests in flight (mlp {PEAK_MLP:g}),"
    )
    w("  i.e. the capacity of the bottleneck resource (memory, link direction or remote path).")
    w(f"- **Saturated points**: the first point at or above {100 * SATURATION:.0f}% of the series'")
    w("  peak and every point after it (smaller delays). Beyond that point the closed loop is")
    w("  saturated: bandwidth stays at the peak while latency keeps growing with the number of")
    w("  requests MLC has in flight (Little's law), not with load, so these points cannot be")
    w("  placed on a latency-vs-bandwidth curve below the peak. They define the measured peak;")
    w("  they are left out of the latency fit and of every latency error (open markers in the")
    w("  plots).")
    w("- **Latency error**: |model - measured| / measured at the measured bandwidth; the")
    w(
        f"  must-show statistic is its median over the non-saturated points up to {100 * ERROR_RANGE:.0f}% of the"
    )
    w("  peak, pooled over the five mixes of a memory (per-mix medians in section 4).")
    w("- **Latency at 50/80/95% of peak**: measured = linear interpolation of the series")
    w("  (up to its first saturated point) at that fraction of the measured peak; `~` marks a")
    w("  value interpolated across a gap of more than 10% of the peak between two measured")
    w("  points (MLC's delay steps jump from ~70% to the peak on several curves); model = the")
    w("  probe latency placed at that bandwidth; `sat.` = beyond the model's peak.")
    w("")
    w("Quirks of the data (calibration README) and how they are treated:")
    w("")
    w(
        "- the 16 ns `cxl` log (`log_d0_c1_w0_r0`, cache hits) is not among the Fig. 3 series used here;"
    )
    w("- `0:1` is MLC's non-temporal write mode in every series;")
    w("- `mmem_remote`: latency falls at the lightest loads (to 72-131 ns, below local DDR's")
    w(
        f"  97 ns): its points under {100 * REMOTE_DDR_RELIABLE:.0f}% of the peak are left out of the fit, and so is its"
    )
    w("  whole 0:1 series, whose probe latency (70-114 ns) stays below local DDR's at every load;")
    w("- `cxl_remote` 0:1 (non-temporal writes from the other socket): the probe's reads get")
    w("  *faster* than at idle (365-435 ns against 485 ns for 1:0); left out of the curve fit;")
    w("- the paper's CXL 2:1 peak of 56.7 GB/s is not in the logs (54.1 GB/s): the logs are used.")
    w("")
    w("## 3. Fitted parameters")
    w("")
    w(f"{n_params} numbers for four memories and five mixes, fitted to {n_points} latency points")
    w("and 20 peaks (the 4 x 5 series). Each memory has seven parameters, all physical: an idle")
    w("or added latency (ns), three peak-bandwidth parameters (GB/s, or a turnaround in")
    w("1/(GB/s) that sets the 1:1 peak) and three of the knee of `slope*u + knee*u^e/(1-u)`.")
    w("They are fitted in stages, one memory at a time, local before remote, each stage by")
    w("`scipy.optimize.least_squares` through the model:")
    w("")
    w(
        "1. *peak*: the peak-bandwidth parameters, on log(model peak / measured peak) of the five mixes;"
    )
    w("2. *curve*: slope, knee and exponent, on log(model / measured latency) of the")
    w("   non-saturated points of every mix (soft-L1 loss, scale 5%), with the idle (or remote)")
    w("   latency tied so that the model reproduces the measured idle latency exactly;")
    w("3. *idle*: that tie (one number from one measured point, not a free parameter);")
    w("   *data*: `mmem_remote`'s remote read peak is the measured 1:0 peak (70.8 GB/s): the DDR")
    w("   node's own read peak binds first, so the curves cannot identify it.")
    w("")
    w("`mmem_remote` has no reliable idle point, so its `remote_latency_ns` is a curve parameter.")
    at_bound = []
    for memory in MEMORIES:
        theta = theta_of(memory, node_of(a2, _NODE_KEYS[memory][0]))
        for p, v in zip(PARAMETERS[memory], theta, strict=True):
            if p.stage != "data" and min(v - p.lo, p.hi - v) <= 1e-3 * (p.hi - p.lo):
                at_bound.append(f"{memory} `{p.key}` = {v:.4g} (bounds {p.lo:g}..{p.hi:g})")
    if at_bound:
        w("Parameters at a bound of the fit: " + "; ".join(at_bound) + ". For `cxl_remote` the")
        w("curve then rises linearly and turns up only just before the peak: the write mixes pull")
        w("the slope up at low and medium load (section 5), and no knee shape fits both.")
    w("")
    w("| memory (node) | parameter | value | unit | meaning | stage |")
    w("|---|---|---|---|---|---|")
    for memory in MEMORIES:
        node = node_of(a2, _NODE_KEYS[memory][0])
        theta = theta_of(memory, node)
        for p, v in zip(PARAMETERS[memory], theta, strict=True):
            shown = f"{v:.4g}"
            if p.key == "turn":
                shown += f" (`mixed_gbps` {node['mixed_gbps']:.2f})"
            if p.key == "remote_turn":
                shown += f" (`remote_mixed_gbps` {node['remote_mixed_gbps']:.2f})"
            if p.key == "device_gbps":
                shown += " (`read/write/mixed_gbps`)"
            w(
                f"| {memory} ({_NODE_KEYS[memory][0]}) | `{p.key}` | {shown} | {p.unit} | {p.meaning} | {p.stage} |"
            )
    w("")
    w("The CXL expander's memory is seen only at mixed traffic (at 1:0 and 0:1 its link binds")
    w("first: 48.0 and 47.0 GB/s, 75% and 73% of PCIe Gen5 x16's 64 GB/s per direction), where")
    w("it is flat at 54.1-54.5 GB/s: one number serves as its read, write and 1:1 peak.")
    w("")
    w(
        f"`remote_latency_ns` of dram0 is now {dram['remote_latency_ns']:.1f} ns, fitted to `mmem_remote` above"
    )
    w("15% of its peak. The previous 56.7 ns (random-read low-load latency from the other")
    w("socket, 154.3 - 97.6 ns) comes from the same unreliable low-load end: the random-read")
    w("series itself climbs from 154 ns at 1.2 GB/s to 188 ns at 4.5 GB/s and stays near 190-230")
    w("ns from there to 46 GB/s. The fitted value reproduces that random-read series, which the")
    w("fit did not see:")
    w("")
    if random_remote:
        w("| bandwidth (GB/s) | " + " | ".join(f"{b:.1f}" for b, *_ in random_remote) + " |")
        w("|---|" + "---|" * len(random_remote))
        w(
            "| measured random-read (ns) | "
            + " | ".join(f"{m:.0f}" for _, m, _ in random_remote)
            + " |"
        )
        w("| model (ns) | " + " | ".join(_ns(x) for *_, x in random_remote) + " |")
    w("")
    w("## 4. Measured vs model, per memory and mix")
    w("")
    w("Latencies in ns, bandwidths in GB/s; relative errors in brackets. Plots: measured")
    w("16-thread points (filled: fitted; x: left out of the fit, section 2; open: saturated)")
    w("and the model's curve of each mix, placed through the same scenario.")
    w("")
    notes = {
        "mmem": "Local DDR5 (one SNC-4 node, 2 channels). The model's curve is one function of utilisation for every mix, so the knee does not move left with writes as the measured one does (0:1 reaches 156 ns at 55% of peak; the model gives ~120 ns); the 80% and 95% columns of 1:1 and 0:1 are interpolated across MLC's jump from ~70% to the peak.",
        "cxl": "The A1000 from its own socket. Peaks: link read (1:0), link write (0:1), device memory (mixed).",
        "cxl_remote": "The A1000 from the other socket. The peak is the remote path's (~20-28 GB/s). Latency depends on the mix even at the lightest load, which the model cannot follow (section 5).",
        "mmem_remote": "The other socket's DDR5 node. Caveat: its latency keeps falling at the lightest loads, below local DDR (1:1: 100 ns at 1.1 GB/s; 0:1: 72 ns at every load below the peak); those points are not a remote access the model can represent and are excluded from the fit; the idle row is shown for completeness only. Its 1:0 peak (70.8 GB/s) is above the DDR node's local read peak, which binds in the model (-4.9%).",
    }
    for memory in MEMORIES:
        mm = metrics[memory]
        w(f"### {memory}")
        w("")
        w(notes[memory])
        w("")
        w(f"Median latency error up to 90% of peak, all mixes: **{100 * pooled_median(mm):.1f}%**.")
        w("")
        L.extend(_mem_table(mm))
        w("")
        w(f"![{memory}](img/calibration-{memory}.png)")
        w("")
    w("## 5. What the model cannot fit, and why")
    w("")
    cr = metrics["cxl_remote"]
    w(
        f"- **`cxl_remote` latency error ({100 * pooled_median(cr):.1f}% median, target 10%: not met).** At the"
    )
    w("  lightest load the 16-thread series start at 485 ns (1:0), 560 (3:1), 574 (2:1), 609")
    w("  (1:1) and 392 ns (0:1); 1:1 and 1:0 are 124 ns apart at the same 0.7-0.8 GB/s, 4% of")
    w("  the remote path's peak. The model's latency depends on the mix only through")
    w("  utilisation, so it cannot separate them. With one thread every mix starts near")
    w("  470 ns, so the spread is an effect of 16 writing threads from the other socket")
    w("  (the paper blames the remote snoop filter), not of bandwidth. The fit ties the idle")
    w("  latency to the read-only series (485 ns, the design brief's figure) and fits the")
    w(
        "  curve to the four mixes with reads; per-mix medians: "
        + ", ".join(f"{k} {100 * v.median_err:.1f}%" for k, v in cr.items())
        + "."
    )
    w("  The 0:1 series (non-temporal writes) is below the idle latency at every load and")
    w("  cannot be matched by any curve that rises from the idle latency.")
    c01 = metrics["cxl"]["0:1"]
    w(
        f"- **`cxl` 0:1 in mid-load ({100 * c01.median_err:.1f}% median, met, but visible in the plot).** The"
    )
    w("  model's read probe queues at the expander's memory and on the device-to-host link")
    w("  direction; write-only traffic loads the other direction, so the probe stays near")
    w("  300 ns while the measured one climbs to 392 ns at 13 GB/s and 470 ns at 30 GB/s")
    w("  (non-temporal writes also load the device's write path, which the model folds into")
    w("  one memory resource that the writes use at 87% of its peak).")
    w("- **Thread count.** At the same bandwidth CXL latency grows with the number of MLC")
    w("  threads (cxl 1:0 at 12-14 GB/s: 251 ns with 1 thread, 274 ns with 4, 288 ns with")
    w("  16); the model's latency is a function of bandwidth alone and is fitted to 16 threads.")
    w("- **Knee position by mix.** The measured knee comes earlier with more writes (mmem")
    w("  0:1: 156 ns at 55% of peak, 1:0: 116 ns at 55%); in the model the knee sits at the")
    w("  same utilisation for every mix. The peak itself does follow the mix.")
    w("- **Saturated latency.** Latency on the vertical part of each curve is set by MLC's")
    w("  requests in flight, not by the hardware: it is not a calibration target (section 2).")
    w(
        f"- **Write-only peak with fewer threads.** mmem 0:1 reaches {series[('mmem', '0:1')].peak_all_threads:.1f} GB/s with 2 threads but"
    )
    w(
        f"  {series[('mmem', '0:1')].peak:.1f} GB/s with 16; the model has one peak per mix and follows the 16-thread series."
    )
    w("")
    w("## 6. spr-4cxl: the weighted-interleave MLC results")
    w("")
    w("The published results (Linux weighted-interleave auto-tuning thread, Jan 2025; data")
    w('by Ravi Jonnalagadda, Micron; targets `wi-*`): Intel MLC on "a single-socket server with')
    w('multiple CXL memory expanders"; CPU, DIMMs, expander count and interleave weights are')
    w("not stated. `envs/data/hardware/spr-4cxl.yaml` is that kind of box, derived from the")
    w("fitted spr-a1000 nodes; `envs/data/scenarios/mlc-bandwidth.yaml` runs MLC on it.")
    w("")
    w("### Assumptions about the box, with reasons")
    w("")
    w("| assumption | value | reason |")
    w("|---|---|---|")
    w(
        "| memory channels | 8 (one socket) | the issue's box and the thread's own estimate (8 DDR5 channels, ~300 GB/s) |"
    )
    w(
        f"| per-channel bandwidth | {SPR4_CHANNEL_RATE:.4f} x the EuroSys SPR's measured per-channel bandwidth, at every mix (= DDR5-5600 at that machine's efficiency) | 8 x DDR5-4800 at the only DDR5 efficiency measured here (EuroSys SNC node: 61.3 of 76.8 GB/s at 2:1, 80%) gives 245 GB/s at 2:1, 18% under the published DRAM-only 298.8 GB/s; 298.8 GB/s would be 97% of 8 x DDR5-4800's theoretical 307.2 GB/s, beyond any DDR5 result at a 2:1 mix. DDR5-5600 (the Emerald Rapids refresh of the same platform, on the market since Dec 2023) at the EuroSys efficiency gives 286 GB/s. This factor is not fitted to the published numbers. |"
    )
    w(
        "| CPU | 64 cores (MLC: one traffic thread per core) | a DDR5-5600 Xeon on this platform is Emerald Rapids; its top part (8592+) has 64 cores. With 56 cores (Sapphire Rapids 8480+) see the sensitivity table |"
    )
    w(
        f"| DRAM latency curve | the fitted SNC node's (idle {dram['idle_latency_ns']:.1f} ns, same knee in utilisation) | the only DDR5 curve measured; a whole-socket node has a few ns more idle latency, immaterial at these loads |"
    )
    w(
        "| DRAM capacity | 8 x 64 GB | a typical 1-DIMM-per-channel configuration; MLC's 64 GiB fits either way |"
    )
    w(
        f"| CXL expanders | {SPR4_EXPANDERS}, Micron CZ120-class (E3.S, PCIe Gen5 x8, 256 GB) | the data is Micron's; Micron's own CZ120 bandwidth demo used four modules; the published weighted-interleave gain over DRAM only (113.7 GB/s at 2:1, 109.5 at 1:1) needs ~28 GB/s from each of four x8 devices, under their peak as weighted interleave assumes |"
    )
    w(
        f"| CXL link | x8: {SPR4_LINK_LANES}/16 of the A1000's fitted x16 link ({cxl['link_read_gbps'] * SPR4_LINK_LANES / 16:.1f} / {cxl['link_write_gbps'] * SPR4_LINK_LANES / 16:.1f} GB/s) | same PCIe Gen5 efficiency (75% of raw per direction) as the measured A1000; the link-read limit at 2:1 (24.0 / (2/3) = 36 GB/s) is Micron's CZ120 figure (36 GB/s, MLC 2:1) |"
    )
    w(
        "| CXL device memory | one DDR5 channel at the per-channel rate above (2:1 peak 35.7 GB/s) | the CZ120's controller (Microchip SMC 2000, x8 part; the x16 part drives two channels); also 36 GB/s at 2:1 |"
    )
    w("| CXL latency curve | the fitted A1000's | the only CXL curve measured |")
    w(
        "| MLC tenant | all cores, no compute, 32 lines in flight per thread, 64 GiB | in-flight count = median of Little's law (bandwidth x latency / 64 B / 16 threads) at MLC's saturated points of the EuroSys mmem and cxl series: "
        + f"{in_flight:.1f} |"
    )
    w(
        "| auto weights input | each node's modelled peak, min(read, write), CXL capped by its link (what HMAT/CDAT report stands for) | the kernel uses min(read, write) of the firmware-reported bandwidth (`node_bandwidth_for_weights`); nominal figures (8 x 44.8 GB/s vs min(32 GB/s link, device)) give the same 23:2 |"
    )
    w("")
    wts = ":".join(str(x) for x in wi["weights"])
    w(
        f"Auto weights (`baselines.algorithms.auto_interleave_weights`): {wts} over {', '.join(wi['nodes'])}"
    )
    w(f"(DRAM takes {100 * wi['weights'][0] / sum(wi['weights']):.1f}% of the pages).")
    w("")
    w(
        "### Results (GB/s; closed-loop steady state, `mlc-bandwidth` at 9 s for 2:1 and 19 s for 1:1)"
    )
    w("")
    w(
        "| mix | policy | published | model | model / published | mean latency (ns) | node utilisation |"
    )
    w("|---|---|---|---|---|---|---|")
    for mix in ("2:1", "1:1"):
        for pol in POLICIES:
            t, v = WI_TARGETS[(mix, pol)], wi[(mix, pol)]
            util = ", ".join(f"{u:.2f}" for u in wi[(mix, pol, "util")])
            w(
                f"| {mix} | {pol} | {t} | {v:.1f} | {v / t:.3f} | {wi[(mix, pol, 'latency')]:.0f} | {util} |"
            )
    w("")
    w(
        "| mix | weighted / DRAM only, published | model | DRAM only - default interleave, published | model |"
    )
    w("|---|---|---|---|---|")
    for mix in ("2:1", "1:1"):
        gp = WI_TARGETS[(mix, "weighted-interleave")] / WI_TARGETS[(mix, "dram-only")]
        gm = wi[(mix, "weighted-interleave")] / wi[(mix, "dram-only")]
        dp = WI_TARGETS[(mix, "dram-only")] - WI_TARGETS[(mix, "interleave")]
        dm = wi[(mix, "dram-only")] - wi[(mix, "interleave")]
        w(f"| {mix} | {gp:.3f} | {gm:.3f} | {dp:.1f} | {dm:.1f} |")
    w("")
    w("What the model reproduces and what it does not:")
    w("")
    u_d = wi[("2:1", "dram-only", "util")][0]
    u_wi = wi[("2:1", "weighted-interleave", "util")][0]
    w(
        f"- **DRAM only** is the DRAM node's peak at the mix, reached to {100 * u_d:.1f}% by the closed loop"
    )
    w("  (the knee's latency limits it). The published 2:1 / 1:1 ratio is 1.094; the EuroSys")
    w("  mix shape that the model carries gives 1.04, so the model is low at 2:1 and close at 1:1.")
    w("- **Weighted interleave** is bound by DRAM: with weights 23:2 DRAM carries 74% of the")
    w("  traffic, so the gain cannot exceed 31/23 = 1.348 (the published 1.38 and 1.40 would")
    w("  need DRAM at 72% or less, e.g. weights 10:1 or 11:1). The closed loop keeps DRAM at")
    w(
        f"  utilisation {u_wi:.3f} rather than the {u_d:.3f} of DRAM only, because the CXL share adds"
    )
    w("  latency with the same requests in flight. Where the 2:1 weighted result misses its")
    w("  10% band, it inherits the low 2:1 DRAM peak (above) and the 1.348 cap.")
    w("- **Default interleave** sends 20% of the traffic to each node, so the four x8")
    w("  expanders saturate (utilisation ~0.97) and the total is about 5 x 35 GB/s: well below")
    w("  DRAM only, as published, but the published 113-117 GB/s would mean only ~23 GB/s per")
    w("  expander, under Micron's own 36 GB/s single-module figure; the model does not reach")
    w("  that low without an assumption (shared links, an expander cap under interleaving) that")
    w("  nothing in the data supports.")
    w("")
    w("### Sensitivity to the assumptions that are guesses")
    w("")
    w("| variant | D 2:1 | WI 2:1 | gain 2:1 | D 1:1 | WI 1:1 | gain 1:1 | default 2:1 / 1:1 |")
    w("|---|---|---|---|---|---|---|---|")
    for name, r in sensitivity:
        g1 = r[("2:1", "weighted-interleave")] / r[("2:1", "dram-only")]
        g2 = r[("1:1", "weighted-interleave")] / r[("1:1", "dram-only")]
        w(
            f"| {name} | {r[('2:1', 'dram-only')]:.0f} | {r[('2:1', 'weighted-interleave')]:.0f} | {g1:.3f} | "
            f"{r[('1:1', 'dram-only')]:.0f} | {r[('1:1', 'weighted-interleave')]:.0f} | {g2:.3f} | "
            f"{r[('2:1', 'interleave')]:.0f} / {r[('1:1', 'interleave')]:.0f} |"
        )
    w("")
    w("## 7. Dependencies")
    w("")
    w("The fit uses `scipy.optimize.least_squares` (`scipy` is imported only by `python -m")
    w("envs.calibrate` without `--report`/`--check`); the report uses matplotlib (Agg).")
    w("")
    return "\n".join(L)


# --------------------------------------------------------------------------- CLI


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m envs.calibrate",
        description="Fit the spr-a1000 presets to MLC loaded-latency curves and validate them.",
    )
    ap.add_argument("--data", default=None, help=f"calibration folder (default {DATA_DIR})")
    ap.add_argument(
        "--report",
        action="store_true",
        help="regenerate docs/validation.md and docs/img/ from the shipped presets (no fit)",
    )
    ap.add_argument(
        "--check", action="store_true", help="print the must-show checks; exit 1 if one fails"
    )
    ap.add_argument("--verbose", action="store_true", help="print the optimiser's progress")
    args = ap.parse_args(argv)
    try:
        series = load_series(args.data)
    except CalibrationDataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.report:
        print(f"wrote {write_report(args.data)}")
        return 0
    if args.check:
        checks = must_show_checks(series)
        for c in checks:
            tag = "met" if c.ok else ("NOT MET" if c.required else "not met (extra)")
            print(f"[{tag}] {c.name}: {c.value} (target {c.target})")
        return 0 if all(c.ok for c in checks if c.required) else 1
    dram, cxl = fit(series, verbose=args.verbose)
    for p in write_presets(dram, cxl):
        print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
