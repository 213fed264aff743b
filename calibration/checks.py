"""The must-show list: the fitted curves, and spr-4cxl against the weighted-interleave results.

:func:`interleave_experiment` runs the MLC-like tenant of ``mlc-bandwidth`` on spr-4cxl
under three placements; :func:`must_show_checks` evaluates the list on the shipped
presets; :func:`random_remote_check` compares a series the fit did not see.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from calibration.bench import MLCBench, preset_for
from calibration.data import CHECKED, F64, SATURATION, SCENARIO_DIR, Series, random_read_series
from calibration.metrics import MixMetrics, memory_metrics, pooled_median
from envs.hardware import firmware_bandwidth
from envs.kernel import auto_interleave_weights
from envs.scenario import load_scenario
from envs.simulator import Simulator

__all__ = [
    "POLICIES",
    "WI_GAIN",
    "WI_TARGETS",
    "Check",
    "auto_interleave_weights",
    "interleave_experiment",
    "must_show_checks",
    "preset_firmware_bandwidth",
    "random_remote_check",
    "sensitivity_runs",
]

TOL = {"peak": 0.07, "idle": 0.05, "median": 0.10}

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


def preset_firmware_bandwidth(hw: Mapping[str, Any]) -> F64:
    """Per-node bandwidth the kernel's auto mode reads (HMAT/CDAT) for a preset mapping.

    :func:`envs.hardware.firmware_bandwidth` of each node's peaks (a node without a link
    has ``inf`` there).
    """
    nodes = hw["nodes"]
    return firmware_bandwidth(
        [n["read_gbps"] for n in nodes],
        [n["write_gbps"] for n in nodes],
        [n.get("link_read_gbps") or np.inf for n in nodes],
        [n.get("link_write_gbps") or np.inf for n in nodes],
    )


def interleave_experiment(
    scenario: str | Path | Mapping[str, Any] = SPR4_SCENARIO, weights: Sequence[int] | None = None
) -> dict:
    """Run the MLC-like tenant under the three placements; GB/s per (mix, policy).

    ``weights`` replaces the auto-tuned weights (a sensitivity check).
    """
    sc = load_scenario(scenario if not isinstance(scenario, Path) else str(scenario))
    hw = sc.hardware.model_dump()
    n = len(hw["nodes"])
    auto = auto_interleave_weights(preset_firmware_bandwidth(hw)) if weights is None else weights
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


def random_remote_check(hw: Mapping[str, Any], data: str | Path | None = None) -> list[tuple]:
    """Model vs MLC random-read latency from the other socket (mmem_remote, 1:0, 16 threads).

    A cross-check of dram0's remote latency on a series the fit did not see. Returns
    rows ``(bandwidth, measured ns, model ns)``; none when the data has no random-read logs.
    """
    measured = random_read_series(data, "mmem_remote")
    if measured is None:
        return []
    bw, lat = measured
    keep = bw < SATURATION * bw.max()
    model, _, reach = MLCBench(hw, "mmem_remote", [1.0] * int(keep.sum())).place(bw[keep])
    return [
        (float(b), float(m), float(x) if r else float("nan"))
        for b, m, x, r in zip(bw[keep], lat[keep], model, reach, strict=True)
    ]


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
