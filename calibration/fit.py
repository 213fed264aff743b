"""The fitted parameters of each memory and the fit itself (bounded least squares).

Every residual is computed through the model (:class:`calibration.bench.MLCBench`).
``scipy`` is imported only when :func:`fit_memory` runs.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from calibration.bench import SETUPS, MLCBench
from calibration.data import (
    F64,
    MEMORIES,
    MIXES,
    Series,
    mixes_of,
    random_peak_ratios,
    read_fraction,
)
from calibration.presets import a1000_2s_hardware, a1000_hardware
from envs.hardware import mix_peak, turnaround_penalty

__all__ = [
    "INITIAL",
    "NODE_KEYS",
    "PARAMETERS",
    "Param",
    "fit",
    "fit_memory",
    "hardware_with",
    "node_values",
    "random_peaks",
    "theta_of",
]


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
    """The 1:1 peak (GB/s) of read peak ``r``, write peak ``w`` and turnaround ``c``."""
    return float(mix_peak(r, w, c, 0.5))


def _turn(r: float, w: float, m: float) -> float:
    """The turnaround ``c`` that gives the 1:1 peak ``m``."""
    return float(turnaround_penalty(r, w, m))


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


#: the preset node (and which of its parameters, local or remote) each memory of the data fits
NODE_KEYS = {
    "mmem": ("dram0", "local"),
    "cxl": ("cxl0", "local"),
    "cxl_remote": ("cxl0", "remote"),
    "mmem_remote": ("dram0", "remote"),
}


def hardware_with(memory: str, base: Mapping[str, Any], values: Mapping[str, float]) -> dict:
    """``base`` (spr-a1000 or -2s mapping) with ``values`` on the node of ``memory``."""
    hw = copy.deepcopy(dict(base))
    target = NODE_KEYS[memory][0]
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
    """log(model / measured) latency at the fitted points of every mix of ``memory`` in
    ``series`` (through the model).

    Returns the residuals and the shift (ns) of the ``"idle"`` parameter that makes the
    model's latency at the lowest-load point of the 1:0 series (or, without one, of the
    most-read mix) equal the measured idle latency (zero for a memory without one). At a
    fixed bandwidth the probe latency is that parameter plus terms that do not depend on
    it, so the shift is exact.
    """
    rfs: list[float] = []
    bws: list[float] = []
    lats: list[float] = []
    mixes = mixes_of(memory, series)
    for mix in mixes:
        s = series[(memory, mix)]
        m = s.fitted
        rfs += [read_fraction(mix)] * int(m.sum())
        bws += list(s.bandwidth[m])
        lats += list(s.latency[m])
    anchored = any(p.stage == "idle" for p in PARAMETERS[memory])
    ref = series[(memory, "1:0")] if (memory, "1:0") in series else series[(memory, mixes[0])]
    if anchored:
        rfs.append(read_fraction(ref.mix))
        bws.append(float(ref.bandwidth[0]))
    if not bws:
        return np.zeros(0), 0.0
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
    """log(model / measured) peak bandwidth of every mix of ``memory`` in ``series``."""
    mixes = mixes_of(memory, series)
    peaks = MLCBench(hw, memory, [read_fraction(m) for m in mixes]).capacity()
    return np.log(peaks / np.array([series[(memory, m)].peak for m in mixes]))


def fit_memory(
    memory: str,
    base: Mapping[str, Any],
    series: Mapping[tuple[str, str], Series],
    theta0: Sequence[float],
    verbose: bool = False,
    held: Collection[str] = (),
) -> tuple[dict[str, float], list[Any]]:
    """Fit one memory: peaks first (peak parameters), then the curve (curve parameters), over
    the mixes ``series`` has of it; the parameters named in ``held`` keep their start values
    (those a user's logs cannot place: ``python -m calibration mlc``). The idle latency is
    tied to the measured one after the curve stage (after the peaks, without one)."""
    from scipy.optimize import least_squares

    ps = PARAMETERS[memory]
    theta = np.asarray(theta0, dtype=float).copy()
    anchor = [i for i, p in enumerate(ps) if p.stage == "idle"]
    results = []
    tied = False
    for stage, loss in (("peak", "linear"), ("curve", "soft_l1")):
        idx = [i for i, p in enumerate(ps) if p.stage == stage and p.key not in held]
        if not idx:
            continue
        lo = np.array([ps[i].lo for i in idx])
        hi = np.array([ps[i].hi for i in idx])
        x0 = np.clip(theta[idx], lo + 1e-6 * (hi - lo), hi - 1e-6 * (hi - lo))

        def hw_of(x: F64, idx: list[int] = idx) -> dict:
            th = theta.copy()
            th[idx] = x
            return hardware_with(memory, base, node_values(memory, th))

        def fun(x: F64, stage: str = stage) -> F64:
            hw = hw_of(x)
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
            theta[anchor] += _curve_residuals(memory, hw_of(res.x), series)[1]
            tied = True
        results.append(res)
    if anchor and not tied and "idle_latency_ns" not in held:
        hw = hardware_with(memory, base, node_values(memory, theta))
        theta[anchor] += _curve_residuals(memory, hw, series)[1]
    return node_values(memory, theta), results


def fit(
    series: Mapping[tuple[str, str], Series],
    verbose: bool = False,
    data: str | Path | None = None,
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
    dram.update(random_peaks("mmem", dram, data))
    cxl.update(random_peaks("cxl", cxl, data))
    return dram, cxl


def random_peaks(memory: str, node: Mapping[str, float], data: Any = None) -> dict[str, float]:
    """A node's random-access peaks (``"data"`` parameters): its fitted read and write peaks
    times the measured random/sequential peak ratios (:func:`random_peak_ratios`); empty
    without the data."""
    ratios = random_peak_ratios(data)
    if ratios is None:
        return {}
    r = ratios[memory]
    return {
        "random_read_gbps": node["read_gbps"] * r["read"],
        "random_write_gbps": node["write_gbps"] * r["write"],
    }


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
