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

The box (hardware preset ``spr-a1000-box``) does not publish its DRAM channel count,
and the latecomer's workload not its lines per operation (how many of a page's 64
lines one touch reads, which sets how often reclaim's reference check and the hint
faults see its pages referenced). ``--channels 4,6,8`` runs the variants with the
DRAM node at each channel count (each channel the calibrated SNC node's per-channel
bandwidth; 2 is the narrow node of spr-a1000), ``--lines 1,8,64`` with the
latecomer's ``lines_per_op`` at each value, ``--streamer-threads 16,48`` with the
streamer's threads at each value (its pass time: the source gives ~1 s, not the
threads); each prints the same table as ``--range``.

    python -m scripts.tiering_fairness                                  # kernel defaults
    python -m scripts.tiering_fairness --range                          # R across its bounds
    python -m scripts.tiering_fairness --channels 4,6,8                 # the box's bounds
    python -m scripts.tiering_fairness --lines 1,8,64                   # latecomer's lines/op
    python -m scripts.tiering_fairness --streamer-threads 16,48         # streamer's pass
    python -m scripts.tiering_fairness memcg_limits=dram numa_scan=fixed  # TierGym before
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import yaml

from envs import KernelConfig, Simulator, load_scenario
from envs.kernel import GIB, MAX_RECLAIM_RETRIES, PROMOTE_RATE_LIMIT_MBPS
from envs.scenario import Scenario, hardware_presets

VARIANTS = (
    "tiering-fairness-alone",
    "tiering-fairness",
    "tiering-fairness-low",
    "tiering-fairness-low-high",
)
RATE_MBPS = PROMOTE_RATE_LIMIT_MBPS  # the kernel default, 65536 MB/s
LATECOMER = "latecomer"
STREAMER_GIB = 256  # the streamer's working set: its pass is this over its throughput
#: kswapd scan throughputs R (4 KiB pages/s) of the range: reclaim.md's bounds and the default
SCAN_RANGE = (200_000.0, 500_000.0, 1_000_000.0)
#: the latecomer's performance relative to alone on the measured box, per variant (the
#: tiering-fairness RFC's experiment as issue #11 summarises it; never fitted)
PUBLISHED = ("1", "-25.9% (0.741)", "-11.1% (0.889)", "under 1% (> 0.99)")
#: the box's DRAM channels: published bounds (4 x 64 GB .. 8 x 32 GB) and the preset's 8
BOX = "spr-a1000-box"
BOX_CHANNELS = 8
CHANNEL_RANGE = (4, 6, 8)
#: the latecomer's lines per operation: one line (a pointer chase) to a whole page
LINES_RANGE = (1.0, 8.0, 64.0)
_SCENARIOS = Path(__file__).resolve().parent.parent / "envs" / "data" / "scenarios"
_BANDWIDTH = ("read_gbps", "write_gbps", "mixed_gbps", "random_read_gbps", "random_write_gbps")


def box_dram(channels: float) -> dict[str, float]:
    """The box's DRAM node at ``channels`` channels: each bandwidth key of the preset's
    (8 channels) scaled by ``channels / 8``."""
    if not channels > 0:
        raise ValueError(f"--channels: got {channels}, expected a number of channels > 0")
    node = next(n for n in hardware_presets()[BOX]["nodes"] if n["kind"] == "dram")
    return {k: float(node[k]) * channels / BOX_CHANNELS for k in _BANDWIDTH}


def variant(
    name: str,
    channels: float | None = None,
    lines: float | None = None,
    streamer_threads: int | None = None,
) -> Scenario:
    """Variant ``name`` with the box's DRAM at ``channels`` channels, the latecomer's
    ``lines_per_op`` at ``lines`` and the streamer's threads at ``streamer_threads``
    (None: as shipped)."""
    if channels is None and lines is None and streamer_threads is None:
        return load_scenario(name)
    data = yaml.safe_load((_SCENARIOS / f"{name}.yaml").read_text())
    if channels is not None:
        data["hardware"] = {"preset": BOX, "nodes": {"dram0": box_dram(channels)}}
    for t in data["tenants"]:
        if lines is not None and t["name"] == LATECOMER:
            t["lines_per_op"] = float(lines)
        if streamer_threads is not None and t["name"] != LATECOMER:
            t["threads"] = int(streamer_threads)
    return load_scenario(data)


def run_variants(
    kernel: KernelConfig | None = None,
    channels: float | None = None,
    lines: float | None = None,
    streamer_threads: int | None = None,
) -> dict[str, Any]:
    """Per-step latecomer series (steps, variants) and the streamer's DRAM GiB."""
    scs = [variant(v, channels, lines, streamer_threads) for v in VARIANTS]
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
        "streamer_gbps",
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
        rec["streamer_gbps"][s] = np.where(
            np.arange(T)[None] != late[:, None], out.tenant_throughput_gbps, 0
        ).sum(1)
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


def print_range(recs: dict[Any, dict[str, Any]], label: str = "R (pages/s)") -> None:
    """The latecomer relative to alone per variant and value of the range, then its DRAM
    GiB at the end."""

    def name(r: Any) -> str:
        return f"{r / 1e6:g}M" if label.startswith("R ") else f"{r:g}"

    print("latecomer's mean performance relative to alone")
    print(f"| {label} | " + " | ".join(VARIANTS[1:]) + " |")
    print("|---" * len(VARIANTS) + "|")
    print("| published | " + " | ".join(PUBLISHED[1:]) + " |")
    for r, rec in recs.items():
        cells = [f"{rec['rel_alone'][b]:.3f}" for b in range(1, len(VARIANTS))]
        print(f"| {name(r)} | " + " | ".join(cells) + " |")
    print()
    print("latecomer's DRAM GiB at the end / when kswapd gave up on DRAM (s)")
    print(f"| {label} | " + " | ".join(VARIANTS[1:]) + " |")
    print("|---" * len(VARIANTS) + "|")
    for r, rec in recs.items():
        cells = [
            f"{rec['dram_gib'][-1, b]:.1f} / {gave_up_s(rec, b):g}" for b in range(1, len(VARIANTS))
        ]
        print(f"| {name(r)} | " + " | ".join(cells) + " |")


def _fail(message: str) -> NoReturn:
    """A one-line usage error on stderr, exit status 2."""
    print(f"tiering_fairness: {message}", file=sys.stderr)
    raise SystemExit(2)


def _numbers(flag: str, text: str) -> tuple[float, ...]:
    """``--flag 4,6,8``'s numbers, or a one-line error naming the flag."""
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        _fail(f"{flag}: got {text!r}, expected numbers separated by commas")
    if not values or not all(np.isfinite(values)) or min(values) <= 0:
        _fail(f"{flag}: got {text!r}, expected numbers > 0")
    return values


def main(argv: list[str]) -> None:
    ranges: dict[str, tuple[float, ...]] = {}
    rest: list[str] = []
    it = iter(argv)
    for a in it:
        if a in ("--channels", "--lines", "--streamer-threads"):
            text = next(it, None)
            if text is None:
                _fail(f"{a}: expected a comma-separated list of numbers after it")
            ranges[a] = _numbers(a, text)
        elif a != "--range":
            rest.append(a)
    for a in rest:
        if "=" not in a:
            _fail(
                f"argument {a!r}: expected --range, --channels N,.., --lines N,.. "
                "or KernelConfig FIELD=VALUE"
            )
    fields = dict(a.split("=", 1) for a in rest)
    base = KernelConfig()
    for k in fields:
        if not hasattr(base, k):
            _fail(f"argument {k}=: expected a KernelConfig field")
    kw = {k: type(getattr(base, k))(v) for k, v in fields.items()}
    if "--channels" in ranges:
        if "--lines" in ranges and len(ranges["--lines"]) > 1:
            _fail("--channels with --lines: give --lines one value")
        lines = ranges["--lines"][0] if "--lines" in ranges else None
        recs = {
            c: run_variants(KernelConfig(**kw), channels=c, lines=lines)
            for c in ranges["--channels"]
        }
        print_range(recs, "DRAM channels")
        return
    if "--lines" in ranges:
        recs = {x: run_variants(KernelConfig(**kw), lines=x) for x in ranges["--lines"]}
        print_range(recs, "latecomer lines/op")
        return
    if "--streamer-threads" in ranges:
        if any(x != int(x) for x in ranges["--streamer-threads"]):
            _fail(f"--streamer-threads: got {ranges['--streamer-threads']}, expected whole numbers")
        recs = {
            x: run_variants(KernelConfig(**kw), streamer_threads=int(x))
            for x in ranges["--streamer-threads"]
        }
        print_range(recs, "streamer threads")
        return
    if "--range" in argv:
        print_range(run_range(kernel=KernelConfig(**kw)))
        return
    rec = run_variants(KernelConfig(**kw))
    print(
        "| variant | latecomer perf | relative to alone | streamer perf | streamer DRAM GiB"
        " | streamer pass (s) |"
    )
    print("|---|---|---|---|---|---|")
    ws = float(STREAMER_GIB) * GIB / 1e9  # GB
    for b, v in enumerate(VARIANTS):
        gbps = float(np.median(rec["streamer_gbps"][:, b]))
        streamer = (
            f"{rec['streamer_mean_perf'][b]:.3f} | {rec['streamer_dram_gib'][-1, b]:.1f}"
            f" | {ws / gbps:.2f}"
            if rec["streamer_dram_gib"][-1, b] > 0
            else "- | - | -"  # the alone variant has no streamer
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
