"""The tiering-fairness scenario's four variants side by side (docs/scenarios.md).

Runs ``tiering-fairness-alone``, ``tiering-fairness`` (stacked),
``tiering-fairness-low`` and ``tiering-fairness-low-high`` in one batch under
NUMA-balancing tiering (local-first allocation, the kernel's promotion rate
limit 65536 MB/s) and prints, per variant, the latecomer's mean normalised
performance over its run, that mean relative to the latecomer alone, and its
DRAM access share, DRAM-resident GiB, performance and NUMA-balancing scan
period at a few times.

    python -m scripts.tiering_fairness                                  # kernel defaults
    python -m scripts.tiering_fairness memcg_limits=dram numa_scan=fixed  # TierGym before
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from envs import KernelConfig, Simulator, load_scenario
from envs.kernel import PROMOTE_RATE_LIMIT_MBPS

VARIANTS = (
    "tiering-fairness-alone",
    "tiering-fairness",
    "tiering-fairness-low",
    "tiering-fairness-low-high",
)
RATE_MBPS = PROMOTE_RATE_LIMIT_MBPS  # the kernel default, 65536 MB/s
LATECOMER = "latecomer"


def run_variants(kernel: KernelConfig | None = None) -> dict[str, Any]:
    """Per-step latecomer series (steps, variants) and the streamer's DRAM GiB."""
    scs = [load_scenario(v) for v in VARIANTS]
    sim = Simulator(scs, batch_size=len(VARIANTS), kernel=kernel)
    p = sim.params
    B, T, N = p.batch_size, p.n_tenants, p.n_nodes
    steps = int(sim.scenarios[0].episode_steps)
    late = np.array([sim.tenant_names[b].index(LATECOMER) for b in range(B)])
    rows = np.arange(B)
    keys = (
        "perf",
        "share",
        "dram_gib",
        "period_ms",
        "active",
        "streamer_dram_gib",
        "streamer_perf",
    )
    rec: dict[str, Any] = {k: np.zeros((steps, B)) for k in keys}
    for s in range(steps):
        out = sim.step(np.zeros((B, T, N)), RATE_MBPS)
        rec["perf"][s] = out.tenant_norm_perf[rows, late]
        rec["share"][s] = out.tenant_dram_access_share[rows, late]
        rec["dram_gib"][s] = out.tenant_dram_resident_gib[rows, late]
        rec["period_ms"][s] = sim.state.scan_period_ms[late, rows]
        rec["active"][s] = out.tenant_active[rows, late]
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


def main(argv: list[str]) -> None:
    fields = {f: v for f, v in (a.split("=", 1) for a in argv)}
    base = KernelConfig()
    kw = {k: type(getattr(base, k))(v) for k, v in fields.items()}
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
    print("latecomer: DRAM access share / DRAM GiB / norm. perf / scan period ms")
    print("| t (s) | " + " | ".join(VARIANTS) + " |")
    print("|---" * (len(VARIANTS) + 1) + "|")
    for ts in (65, 70, 90, 120, 300, 600, 1260):
        s = int(np.searchsorted(rec["time_s"], ts))
        cells = [
            f"{rec['share'][s, b]:.2f} / {rec['dram_gib'][s, b]:.1f} / "
            f"{rec['perf'][s, b]:.2f} / {rec['period_ms'][s, b]:.0f}"
            for b in range(len(VARIANTS))
        ]
        print(f"| {ts} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
