"""The tiering-fairness scenario's four variants side by side (docs/scenarios.md).

Runs ``tiering-fairness-alone``, ``tiering-fairness`` (stacked),
``tiering-fairness-low`` and ``tiering-fairness-low-high`` in one batch under
NUMA-balancing tiering (local-first allocation, the kernel's promotion rate
limit 65536 MB/s) and prints, per variant, the latecomer's mean normalised
performance over its run, that mean relative to the latecomer alone, and its
DRAM access share, DRAM-resident GiB, performance, NUMA-balancing scan period
and the DRAM node's ``kswapd_failures`` at a few times. ``--range`` runs the four
variants at kswapd scan throughputs ``R`` of 0.2M, 0.5M and 1M pages/s (the bounds
of ``../shared/calibration/reclaim.md`` and the default between them) and prints the
latecomer's performance relative to alone beside the published figures.

    python -m scripts.tiering_fairness                                  # kernel defaults
    python -m scripts.tiering_fairness --range                          # R across its bounds
    python -m scripts.tiering_fairness memcg_limits=dram numa_scan=fixed  # TierGym before
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

import numpy as np

from envs import KernelConfig, Simulator, load_scenario
from envs.kernel import MAX_RECLAIM_RETRIES, PROMOTE_RATE_LIMIT_MBPS

VARIANTS = (
    "tiering-fairness-alone",
    "tiering-fairness",
    "tiering-fairness-low",
    "tiering-fairness-low-high",
)
RATE_MBPS = PROMOTE_RATE_LIMIT_MBPS  # the kernel default, 65536 MB/s
LATECOMER = "latecomer"
#: kswapd scan throughputs R (4 KiB pages/s) of the range: reclaim.md's bounds and the default
SCAN_RANGE = (200_000.0, 500_000.0, 1_000_000.0)
#: the latecomer's performance relative to alone on the measured box, per variant (the
#: tiering-fairness RFC's experiment as issue #11 summarises it; never fitted)
PUBLISHED = ("1", "-25.9% (0.741)", "-11.1% (0.889)", "under 1% (> 0.99)")


def run_variants(kernel: KernelConfig | None = None) -> dict[str, Any]:
    """Per-step latecomer series (steps, variants) and the streamer's DRAM GiB."""
    scs = [load_scenario(v) for v in VARIANTS]
    sim = Simulator(scs, batch_size=len(VARIANTS), kernel=kernel)
    p = sim.params
    B, T, N = p.batch_size, p.n_tenants, p.n_nodes
    steps = int(sim.scenarios[0].episode_steps)
    late = np.array([sim.tenant_names[b].index(LATECOMER) for b in range(B)])
    dram = np.argmax(~p.is_cxl, axis=0)  # (B,) the DRAM node
    rows = np.arange(B)
    keys = (
        "perf",
        "share",
        "dram_gib",
        "period_ms",
        "active",
        "streamer_dram_gib",
        "streamer_perf",
        "kswapd_failures",
    )
    rec: dict[str, Any] = {k: np.zeros((steps, B)) for k in keys}
    for s in range(steps):
        out = sim.step(np.zeros((B, T, N)), RATE_MBPS)
        rec["perf"][s] = out.tenant_norm_perf[rows, late]
        rec["share"][s] = out.tenant_dram_access_share[rows, late]
        rec["dram_gib"][s] = out.tenant_dram_resident_gib[rows, late]
        rec["period_ms"][s] = sim.state.scan_period_ms[late, rows]
        rec["active"][s] = out.tenant_active[rows, late]
        rec["kswapd_failures"][s] = sim.state.kswapd_failures[dram, rows]
        other = np.where(np.arange(T)[None] != late[:, None], out.tenant_dram_resident_gib, 0)
        rec["streamer_dram_gib"][s] = other.sum(1)
        rec["streamer_perf"][s] = np.where(
            np.arange(T)[None] != late[:, None], out.tenant_norm_perf, 0
        ).sum(1)
    on = rec["active"] > 0
    mean = (rec["perf"] * on).sum(0) / on.sum(0)
    rec["mean_perf"] = mean
    rec["rel_alone"] = mean / mean[0]
    rec["streamer_mean_perf"] = (rec["streamer_perf"] * on).sum(0) / on.sum(0)
    rec["time_s"] = (np.arange(steps) + 1) * p.interval_s[0]
    return rec


def run_range(
    rates: tuple[float, ...] = SCAN_RANGE, kernel: KernelConfig | None = None
) -> dict[float, dict[str, Any]]:
    """:func:`run_variants` at each kswapd scan throughput of ``rates`` (pages/s)."""
    base = kernel or KernelConfig()
    return {r: run_variants(dataclasses.replace(base, kswapd_scan_pages_per_s=r)) for r in rates}


def gave_up_s(rec: dict[str, Any], b: int) -> float:
    """When kswapd first gave up on the DRAM node in variant ``b`` (s; inf: never)."""
    hit = np.flatnonzero(rec["kswapd_failures"][:, b] >= MAX_RECLAIM_RETRIES)
    return float(rec["time_s"][hit[0]]) if hit.size else float("inf")


def print_range(recs: dict[float, dict[str, Any]]) -> None:
    """The latecomer relative to alone per variant and R, then its DRAM GiB at the end."""
    print("latecomer's mean performance relative to alone")
    print("| R (pages/s) | " + " | ".join(VARIANTS[1:]) + " |")
    print("|---" * len(VARIANTS) + "|")
    print("| published | " + " | ".join(PUBLISHED[1:]) + " |")
    for r, rec in recs.items():
        cells = [f"{rec['rel_alone'][b]:.3f}" for b in range(1, len(VARIANTS))]
        print(f"| {r / 1e6:g}M | " + " | ".join(cells) + " |")
    print()
    print("latecomer's DRAM GiB at the end / when kswapd gave up on DRAM (s)")
    print("| R (pages/s) | " + " | ".join(VARIANTS[1:]) + " |")
    print("|---" * len(VARIANTS) + "|")
    for r, rec in recs.items():
        cells = [
            f"{rec['dram_gib'][-1, b]:.1f} / {gave_up_s(rec, b):g}" for b in range(1, len(VARIANTS))
        ]
        print(f"| {r / 1e6:g}M | " + " | ".join(cells) + " |")


def main(argv: list[str]) -> None:
    fields = {f: v for f, v in (a.split("=", 1) for a in argv if a != "--range")}
    base = KernelConfig()
    kw = {k: type(getattr(base, k))(v) for k, v in fields.items()}
    if "--range" in argv:
        print_range(run_range(kernel=KernelConfig(**kw)))
        return
    rec = run_variants(KernelConfig(**kw))
    print("| variant | latecomer perf | relative to alone | streamer perf | streamer DRAM GiB |")
    print("|---|---|---|---|---|")
    for b, v in enumerate(VARIANTS):
        streamer = (
            f"{rec['streamer_mean_perf'][b]:.3f} | {rec['streamer_dram_gib'][-1, b]:.1f}"
            if rec["streamer_dram_gib"][-1, b] > 0
            else "- | -"  # the alone variant has no streamer
        )
        print(f"| {v} | {rec['mean_perf'][b]:.3f} | {rec['rel_alone'][b]:.3f} | {streamer} |")

    print()
    print(
        "latecomer: DRAM access share / DRAM GiB / norm. perf / scan period ms"
        " / DRAM node's kswapd_failures"
    )
    print("| t (s) | " + " | ".join(VARIANTS) + " |")
    print("|---" * (len(VARIANTS) + 1) + "|")
    for ts in (65, 70, 90, 120, 300, 600, 1260):
        s = int(np.searchsorted(rec["time_s"], ts))
        cells = [
            f"{rec['share'][s, b]:.2f} / {rec['dram_gib'][s, b]:.1f} / "
            f"{rec['perf'][s, b]:.2f} / {rec['period_ms'][s, b]:.0f} / "
            f"{rec['kswapd_failures'][s, b]:.0f}"
            for b in range(len(VARIANTS))
        ]
        print(f"| {ts} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
