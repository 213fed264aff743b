"""``python -m calibration damon``: a tenant from a DAMON access record.

Reads what ``damo record`` writes (section 3 of the host design notes), with our own
code (damo's internals are not a stable API):

- ``damon.data`` as damo writes it by default: ``zlib`` of a JSON list of records
  ``{kdamond_idx, context_idx, intervals: {sample_us, aggr_us, ...}, target_id,
  snapshots: [{start_time, end_time, regions: [{start, end, nr_accesses: {samples,
  percent}, age}], total_bytes}]}``; the same JSON uncompressed
  (``--output_type json``); older files with numbers as text (``"94,827,419,009,024"``,
  ``"5 ms"``) or ``nr_accesses`` as a plain number;
- ``perf script`` text of the ``damon:damon_aggregated`` tracepoint (``... target_id=N
  nr_regions=M START-END: NR_ACCESSES AGE``; one snapshot per timestamp), whose
  intervals are not in the file (``--intervals``, default DAMON's 5 ms / 100 ms).

From a record to a tenant (:func:`tenant_from_record`):

- a region's access frequency is ``nr_accesses / (aggr_us / sample_us)`` (the share of
  sampling intervals in which it was accessed);
- the working set of a snapshot is the bytes of the regions accessed at all (clamped
  set to ``--resident-gib``, the resident memory, when given: pages never seen accessed
  are idle pages, and a virtual address range's holes are not memory);
- a region's frequency ``f`` becomes accesses per sampling interval ``-ln(1 - f)``
  (DAMON samples one page per interval; Poisson accesses), :func:`_intensity`;
- phases start where the working set (the bytes holding half the accesses) changes
  by more than ``--ws-change`` (25%) or less than ``--hot-overlap`` (50%) of the
  accesses fall on the addresses they fell on at the phase's start (the hot ranges
  move), judged on windows of ``--window`` snapshots, for two windows in a row;
- a phase's hotness is the size-weighted distribution of its pages' mean intensity,
  sorted hottest first into a CDF (:class:`envs.scenario.CdfHotness`), written at page
  fractions that include the model's bucket edges, so the model's access shares
  (:func:`envs.model.bucket_access_shares`) are the record's exactly.

DAMON gives relative intensity only: the tenant's bandwidth comes from ``--gbps`` (the
tenant's demand at idle local DRAM latency, with ``--threads`` and ``--mlp``), or from
the ``--compute-ns`` the user sets.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from numpy.typing import NDArray

from calibration.data import F64
from envs.errors import report_error
from envs.kernel import LINE_BYTES
from envs.model import BUCKET_EDGES
from envs.scenario import ScenarioError, hardware_presets, load_scenario

__all__ = [
    "DamonError",
    "Phase",
    "Record",
    "Snapshot",
    "cdf_grid",
    "find_phases",
    "main",
    "phase_hotness",
    "read_records",
    "tenant_from_record",
]

GIB = float(1 << 30)
#: DAMON's default sampling and aggregation intervals (us), for perf script text
DEFAULT_INTERVALS = (5000.0, 100000.0)
#: the working set phases are judged on: the bytes holding this share of the accesses
#: (the bytes seen at all change with sampling noise where most are rarely accessed)
WS_MASS = 0.5


class DamonError(ValueError):
    """A record the ``damon`` command cannot use (one line)."""


@dataclass
class Snapshot:
    """One aggregation interval's regions: [start, end) bytes and access frequency 0..1."""

    start_ns: float
    end_ns: float
    start: NDArray[np.int64]
    end: NDArray[np.int64]
    freq: F64

    @property
    def size(self) -> F64:
        return (self.end - self.start).astype(float)

    @property
    def working_set_bytes(self) -> float:
        return float(self.size[self.freq > 0].sum())


@dataclass
class Record:
    """The snapshots of one monitoring target, and the intervals behind its frequencies."""

    target_id: Any
    sample_us: float
    aggr_us: float
    snapshots: list[Snapshot]
    source: str


@dataclass
class Phase:
    """Snapshots ``first .. last`` (inclusive) of a record: one tenant phase."""

    first: int
    last: int
    at_s: float
    working_set_gib: float
    pages: list[float]
    cdf: list[float]
    seen_gib: float = 0.0
    notes: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------- reading


_UNIT_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9, "m": 60e9, "h": 3600e9, "d": 86400e9}


def _num(v: Any, where: str) -> float:
    """A number, or one written as text (``"94,827,419,009,024"``, ``"12.5 %"``)."""
    if isinstance(v, bool):
        raise DamonError(f"{where}: got {v!r}, expected a number")
    if isinstance(v, int | float):
        return float(v)
    if isinstance(v, str):
        t = v.replace(",", "").replace("%", "").strip()
        try:
            return float(t)
        except ValueError:
            pass
    raise DamonError(f"{where}: got {v!r}, expected a number")


def _time_ns(v: Any, where: str, unit_ns: float) -> float:
    """A time: a number in ``unit_ns`` units, or text such as ``"5 ms"`` or ``"1 s 500 ms"``."""
    if isinstance(v, str) and re.search(r"[a-z]", v):
        parts = re.findall(r"([0-9][0-9,]*(?:\.[0-9]+)?)\s*(ns|us|ms|s|m|h|d)\b", v)
        if not parts:
            raise DamonError(f"{where}: got {v!r}, expected a time such as '5 ms'")
        return sum(float(n.replace(",", "")) * _UNIT_NS[u] for n, u in parts)
    return _num(v, where) * unit_ns


def _from_json(data: Any, path: str, fmt: str) -> list[Record]:
    if isinstance(data, Mapping):
        data = data.get("records", [data])
    if not isinstance(data, list):
        raise DamonError(
            f"{path}: expected a JSON list of DAMON records, got {type(data).__name__}"
        )
    out = []
    for i, rec in enumerate(data):
        w = f"{path}: records[{i}]"
        if not isinstance(rec, Mapping) or "snapshots" not in rec:
            raise DamonError(f"{w}: expected a record with snapshots (damo record's format)")
        iv = rec.get("intervals") or {}
        sample_us = (
            _time_ns(iv["sample_us"], f"{w}.intervals.sample_us", 1e3) / 1e3
            if "sample_us" in iv
            else None
        )
        aggr_us = (
            _time_ns(iv["aggr_us"], f"{w}.intervals.aggr_us", 1e3) / 1e3
            if "aggr_us" in iv
            else None
        )
        snaps = []
        for j, s in enumerate(rec["snapshots"] or []):
            sw = f"{w}.snapshots[{j}]"
            regs = s.get("regions") if isinstance(s, Mapping) else None
            if not isinstance(regs, list):
                raise DamonError(f"{sw}: expected regions: [...]")
            st, en, fr = [], [], []
            for k, r in enumerate(regs):
                rw = f"{sw}.regions[{k}]"
                a, b = _num(r.get("start"), f"{rw}.start"), _num(r.get("end"), f"{rw}.end")
                if b <= a:
                    raise DamonError(f"{rw}: end {b:.0f} is not after start {a:.0f}")
                na = r.get("nr_accesses")
                if isinstance(na, Mapping):
                    if "samples" in na and sample_us and aggr_us:
                        f = _num(na["samples"], f"{rw}.nr_accesses.samples") / (aggr_us / sample_us)
                    elif "percent" in na:
                        f = _num(na["percent"], f"{rw}.nr_accesses.percent") / 100.0
                    else:
                        f = _num(na.get("samples"), f"{rw}.nr_accesses.samples") / (
                            DEFAULT_INTERVALS[1] / DEFAULT_INTERVALS[0]
                        )
                else:
                    ratio = (
                        (aggr_us / sample_us)
                        if (sample_us and aggr_us)
                        else (DEFAULT_INTERVALS[1] / DEFAULT_INTERVALS[0])
                    )
                    f = _num(na, f"{rw}.nr_accesses") / ratio
                st.append(int(a))
                en.append(int(b))
                fr.append(min(max(f, 0.0), 1.0))
            t0 = _time_ns(s.get("start_time", 0), f"{sw}.start_time", 1.0)
            t1 = _time_ns(s.get("end_time", t0), f"{sw}.end_time", 1.0)
            order = np.argsort(st)
            snaps.append(
                Snapshot(
                    t0,
                    t1,
                    np.array(st, dtype=np.int64)[order],
                    np.array(en, dtype=np.int64)[order],
                    np.array(fr, dtype=float)[order],
                )
            )
        out.append(
            Record(
                target_id=rec.get("target_id", i),
                sample_us=sample_us or DEFAULT_INTERVALS[0],
                aggr_us=aggr_us or DEFAULT_INTERVALS[1],
                snapshots=snaps,
                source=fmt,
            )
        )
    return out


_PERF = re.compile(
    r"\s(\d+\.\d+):\s+damon:damon_aggregated:\s+target_id=(\d+)\s+nr_regions=(\d+)\s+"
    r"(\d+)-(\d+):\s+(\d+)\s+(\d+)"
)


def _from_perf_script(text: str, path: str, intervals: tuple[float, float]) -> list[Record]:
    by_target: dict[int, dict[float, list[tuple[int, int, int]]]] = {}
    for ln in text.splitlines():
        m = _PERF.search(ln)
        if not m:
            continue
        t = float(m.group(1))
        tid = int(m.group(2))
        by_target.setdefault(tid, {}).setdefault(t, []).append(
            (int(m.group(4)), int(m.group(5)), int(m.group(6)))
        )
    sample_us, aggr_us = intervals
    out = []
    for tid, snaps in sorted(by_target.items()):
        times = sorted(snaps)
        rec = []
        for i, t in enumerate(times):
            regs = sorted(snaps[t])
            prev = times[i - 1] if i else t - aggr_us / 1e6
            rec.append(
                Snapshot(
                    prev * 1e9,
                    t * 1e9,
                    np.array([r[0] for r in regs], dtype=np.int64),
                    np.array([r[1] for r in regs], dtype=np.int64),
                    np.minimum(
                        np.array([r[2] for r in regs], dtype=float) / (aggr_us / sample_us), 1.0
                    ),
                )
            )
        out.append(Record(tid, sample_us, aggr_us, rec, "perf_script"))
    return out


def read_records(path: str | Path, intervals: tuple[float, float] | None = None) -> list[Record]:
    """Every target's record in a DAMON record file (compressed JSON, JSON or perf script)."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise DamonError(f"{p}: cannot be read ({exc.strerror or exc})") from None
    data = None
    fmt = ""
    try:
        data = json.loads(zlib.decompress(raw))
        fmt = "json_compressed"
    except (zlib.error, ValueError):
        try:
            data = json.loads(raw.decode("utf-8"))
            fmt = "json"
        except (UnicodeDecodeError, ValueError):
            data = None
    if data is not None:
        recs = _from_json(data, str(p), fmt)
    else:
        text = raw.decode("utf-8", errors="replace")
        if "damon:damon_aggregated" not in text:
            raise DamonError(
                f"{p}: not a DAMON record (expected damo record's JSON, compressed or not, or "
                "perf script text of damon:damon_aggregated)"
            )
        recs = _from_perf_script(text, str(p), intervals or DEFAULT_INTERVALS)
    if not recs or not any(r.snapshots for r in recs):
        raise DamonError(f"{p}: the record has no snapshot (did damo record run long enough?)")
    return recs


# --------------------------------------------------------------------------- phases


def _similarity(a: tuple[F64, F64, F64], b: tuple[F64, F64, F64]) -> float:
    """How much of two windows' accesses fall on the same addresses: the sum over
    address ranges of the smaller of their shares of the accesses (1 - total variation);
    1 for the same distribution over addresses, 0 for disjoint hot ranges."""
    pos = np.unique(np.concatenate([a[0], a[1], b[0], b[1]]))
    if pos.size < 2:
        return 1.0
    mid = 0.5 * (pos[:-1] + pos[1:])
    width = np.diff(pos)

    def density(s: tuple[F64, F64, F64]) -> F64:
        lo, hi, lam = s
        total = float((lam * (hi - lo)).sum())
        i = np.searchsorted(lo, mid, side="right") - 1
        ok = i >= 0
        ok[ok] &= mid[ok] < hi[i[ok]]
        out = np.zeros(mid.size)
        out[ok] = lam[i[ok]]
        return out * width / total if total > 0 else out

    return float(np.minimum(density(a), density(b)).sum())


def _intensity(f: F64, max_samples: float) -> F64:
    """Accesses per sampling interval from the share of intervals with an access.

    DAMON checks one page of a region per sampling interval; with Poisson accesses at
    ``lam`` per interval it sees one with probability ``1 - exp(-lam)``, so
    ``lam = -ln(1 - f)``: the same as ``f`` for rarely accessed regions, larger where
    DAMON's count nears every interval. A region seen in every interval is capped at
    half an interval short of that (its true rate is beyond what DAMON can tell).
    """
    cap = 1.0 - 0.5 / max(max_samples, 1.0)
    return -np.log1p(-np.minimum(f, cap))


def _aggregate(snaps: Sequence[Snapshot], max_samples: float) -> tuple[F64, F64, F64]:
    """(start, end, mean intensity) of the address ranges of ``snaps`` (0 where a
    snapshot has no region), only ranges with accesses."""
    pos = np.concatenate([s.start for s in snaps] + [s.end for s in snaps])
    lam = [_intensity(s.freq, max_samples) for s in snaps]
    delta = np.concatenate(lam + [-x for x in lam])
    order = np.argsort(pos, kind="stable")
    pos, delta = pos[order], delta[order]
    uniq, first = np.unique(pos, return_index=True)
    level = np.cumsum(np.add.reduceat(delta, first))[:-1] / len(snaps)
    level = np.where(np.abs(level) < 1e-12, 0.0, level)
    keep = (level > 0) & (np.diff(uniq) > 0)
    return uniq[:-1][keep].astype(float), uniq[1:][keep].astype(float), level[keep]


def _mass_bytes(lo: F64, hi: F64, lam: F64, share: float) -> float:
    """Bytes of the hottest ranges that hold ``share`` of the accesses (read within a
    range linearly, so a large range at the boundary counts in part)."""
    w = hi - lo
    mass = lam * w
    if mass.sum() <= 0:
        return 0.0
    order = np.argsort(-lam, kind="stable")
    x = np.concatenate([[0.0], np.cumsum(w[order])])
    y = np.concatenate([[0.0], np.cumsum(mass[order]) / mass.sum()])
    return float(np.interp(share, y, x))


def find_phases(
    snaps: Sequence[Snapshot],
    max_samples: float,
    ws_change: float = 0.25,
    hot_overlap: float = 0.5,
    max_phases: int = 8,
    window: int = 5,
) -> list[tuple[int, int]]:
    """(first, last) snapshot of each phase.

    Snapshots are taken ``window`` at a time (one snapshot misses most rarely accessed
    regions); a phase starts at a window whose working set (the bytes holding
    :data:`WS_MASS` of the accesses) differs from the phase's first window's by more than
    ``ws_change`` or whose accesses fall on the same addresses as its for less than
    ``hot_overlap`` of them (:func:`_similarity`), when the next window differs too (or
    it is the last).
    """
    live = [i for i, s in enumerate(snaps) if s.working_set_bytes > 0]
    if not live:
        return []
    w = max(1, min(window, len(live) // 2 or 1))
    blocks = [live[i : i + w] for i in range(0, len(live), w)]
    if len(blocks) > 1 and len(blocks[-1]) < w:
        blocks[-2] += blocks.pop()
    ws, dist = [], []
    for bl in blocks:
        seg = _aggregate([snaps[i] for i in bl], max_samples)
        ws.append(_mass_bytes(*seg, WS_MASS))
        dist.append(seg)

    def differs(ref: int, k: int) -> float:
        d_ws = abs(ws[k] / ws[ref] - 1.0)
        same = _similarity(dist[ref], dist[k])
        return max(d_ws / ws_change, (1.0 - same) / max(1.0 - hot_overlap, 1e-9))

    starts, scores = [0], []
    ref = 0
    for k in range(1, len(blocks)):
        score = differs(ref, k)
        if score > 1.0 and (k + 1 >= len(blocks) or differs(ref, k + 1) > 1.0):
            starts.append(k)
            scores.append(score)
            ref = k
    if len(starts) > max_phases:
        keep = sorted(np.argsort(scores)[::-1][: max_phases - 1])
        starts = [0] + [starts[i + 1] for i in keep]
    ends = [*starts[1:], len(blocks)]
    return [(blocks[a][0], blocks[b - 1][-1]) for a, b in zip(starts, ends, strict=True)]


def cdf_grid() -> F64:
    """Page fractions a written CDF is given at: the model's bucket edges, a log grid at the
    hot end and a linear one (the model reads between them linearly)."""
    g = np.concatenate([BUCKET_EDGES, np.geomspace(1e-5, 1.0, 41), np.linspace(0.0, 1.0, 21)])
    return np.unique(np.round(g, 8))


@dataclass
class Hotness:
    """A phase's pages: bytes accessed, resident bytes, and the CDF over the resident ones."""

    seen_bytes: float
    bytes: float
    pages: F64
    cdf: F64
    saturated: float  # share of the accesses in ranges DAMON saw in every interval


def phase_hotness(
    snaps: Sequence[Snapshot], max_samples: float, resident_bytes: float | None = None
) -> Hotness:
    """The hotness of one phase: each address range's mean intensity (:func:`_intensity`)
    over the snapshots, sorted hottest first into a CDF over the pages.

    The working set is the bytes with accesses; with ``resident_bytes`` (the tenant's
    resident memory) it is that: pages DAMON never saw accessed are added as idle pages
    (the CDF is flat over them), and seen bytes beyond it (a virtual address range's
    holes) are scaled down to it.
    """
    lo, hi, lam = _aggregate(snaps, max_samples)
    w = hi - lo
    seen = float(w.sum())
    if seen <= 0:
        raise DamonError("a phase has no accessed bytes")
    cap = -np.log(0.5 / max(max_samples, 1.0))
    sat = float((lam * w)[lam >= cap * (1 - 1e-9)].sum() / (lam * w).sum())
    o = np.argsort(-lam, kind="stable")
    lam, w = lam[o], w[o]
    total = seen if resident_bytes is None else resident_bytes
    x = np.concatenate([[0.0], np.cumsum(w) / seen * min(1.0, seen / total)])
    y = np.concatenate([[0.0], np.cumsum(lam * w)])
    y /= y[-1]
    if x[-1] < 1.0:
        x, y = np.append(x, 1.0), np.append(y, 1.0)
    grid = cdf_grid()
    cdf = np.interp(grid, x, y)
    cdf[0], cdf[-1] = 0.0, 1.0
    return Hotness(seen, total, grid, cdf, sat)


# --------------------------------------------------------------------------- the tenant


def _idle_dram_ns(machine: Mapping[str, Any] | None, socket: int) -> float:
    nodes = (machine or hardware_presets()["spr-a1000"])["nodes"]
    for n in nodes:
        if n["kind"] == "dram" and int(n["socket"]) == socket:
            return float(n["idle_latency_ns"])
    raise DamonError(f"the machine has no DRAM node on socket {socket}")


def tenant_from_record(
    rec: Record,
    name: str,
    threads: int = 8,
    mlp: float = 4.0,
    gbps: float | None = None,
    compute_ns: float | None = None,
    read_fraction: float = 0.8,
    socket: int = 0,
    machine: Mapping[str, Any] | None = None,
    resident_gib: float | None = None,
    ws_change: float = 0.25,
    hot_overlap: float = 0.5,
    max_phases: int = 8,
    window: int = 5,
) -> tuple[dict[str, Any], dict[str, str], list[Phase]]:
    """The tenant mapping (``envs.scenario.TenantSpec`` keys), the provenance of its keys,
    and the phases found."""
    if gbps is None and compute_ns is None:
        raise DamonError(
            "DAMON gives relative intensity only: give --gbps X (the tenant's bandwidth) or "
            "--compute-ns"
        )
    prov: dict[str, str] = {}
    if gbps is not None:
        if gbps <= 0:
            raise DamonError(f"--gbps: got {gbps}, expected a positive bandwidth (GB/s)")
        idle = _idle_dram_ns(machine, socket)
        compute = LINE_BYTES * threads * mlp / gbps - idle
        if compute < 0:
            most = LINE_BYTES * threads * mlp / idle
            raise DamonError(
                f"--gbps {gbps}: {threads} threads x {mlp} misses in flight reach at most "
                f"{most:.1f} GB/s at {idle:.0f} ns; raise --threads or --mlp"
            )
        prov["compute_ns"] = (
            f"from --gbps {gbps}: demand {gbps} GB/s at idle local DRAM ({idle:.1f} ns)"
        )
    else:
        compute = float(compute_ns)  # type: ignore[arg-type]
        prov["compute_ns"] = "set by you (--compute-ns)"
    prov["threads"] = "set by you (--threads)"
    prov["mlp"] = "set by you (--mlp)"
    prov["read_fraction"] = "set by you (--read-fraction): DAMON does not tell reads from writes"
    snaps = rec.snapshots
    max_samples = rec.aggr_us / rec.sample_us
    bounds = find_phases(snaps, max_samples, ws_change, hot_overlap, max_phases, window)
    if not bounds:
        raise DamonError("the record has no accessed region in any snapshot")
    t0 = snaps[0].start_ns
    resident = resident_gib * GIB if resident_gib else None
    phases = []
    for a, b in bounds:
        h = phase_hotness(snaps[a : b + 1], max_samples, resident)
        notes = []
        if h.saturated > 0.001:
            notes.append(
                f"{h.saturated:.1%} of the measured accesses (at least) are in ranges DAMON saw "
                "in every sampling interval: they are hotter than DAMON can tell, and the "
                "distribution's head is flatter than the workload's (sample more often)"
            )
        if resident is not None and h.seen_bytes < h.bytes:
            notes.append(
                f"{(h.bytes - h.seen_bytes) / GIB:.2f} GiB of the resident memory never seen "
                "accessed: idle pages"
            )
        phases.append(
            Phase(
                first=a,
                last=b,
                at_s=round((snaps[a].start_ns - t0) / 1e9, 3),
                working_set_gib=round(h.bytes / GIB, 4),
                pages=[float(x) for x in h.pages],
                cdf=[round(float(c), 12) for c in h.cdf],
                seen_gib=round(h.seen_bytes / GIB, 4),
                notes=notes,
            )
        )
    first = phases[0]
    tenant: dict[str, Any] = {
        "name": name,
        "threads": threads,
        "socket": socket,
        "mlp": mlp,
        "compute_ns": round(compute, 2),
        "read_fraction": read_fraction,
        "working_set_gib": first.working_set_gib,
        "hotness": {"cdf": first.cdf, "pages": first.pages},
    }
    how = f"measured: bytes DAMON saw accessed (snapshots {first.first}-{first.last})"
    if resident_gib:
        how = (
            f"set by you (--resident-gib): its resident memory; DAMON saw {first.seen_gib:g} GiB "
            "of it accessed"
        )
    prov["working_set_gib"] = how
    prov["hotness"] = "measured: the distribution of accesses over pages, hottest first"
    if len(phases) > 1:
        tenant["phases"] = [
            {
                "at_s": ph.at_s,
                "working_set_gib": ph.working_set_gib,
                "hotness": {"cdf": ph.cdf, "pages": ph.pages},
            }
            for ph in phases[1:]
        ]
    return tenant, prov, phases


def tenant_yaml(tenant: Mapping[str, Any], prov: Mapping[str, str], header: Sequence[str]) -> str:
    """The tenant as YAML (a list item of a scenario's ``tenants:``), keys commented."""
    lines = [f"# {h}" for h in header]
    body = yaml.safe_dump(dict(tenant), sort_keys=False, default_flow_style=None, width=100)
    for ln in body.splitlines():
        key = ln.split(":", 1)[0] if not ln.startswith(" ") else ""
        if key in prov:
            ln = f"{ln:<34}# {prov[key]}" if len(ln) < 60 else f"# {key}: {prov[key]}\n{ln}"
        lines.append(ln)
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m calibration damon``; returns the exit status (2: bad input)."""
    ap = argparse.ArgumentParser(
        prog="python -m calibration damon",
        description="Turn a DAMON record (damo record) into a TierGym tenant.",
    )
    ap.add_argument("record", help="damon.data (compressed JSON), JSON, or perf script text")
    ap.add_argument("--gbps", type=float, default=None, help="the tenant's bandwidth demand (GB/s)")
    ap.add_argument("--compute-ns", type=float, default=None, help="CPU time between misses")
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--mlp", type=float, default=4.0, help="misses in flight per thread")
    ap.add_argument("--read-fraction", type=float, default=0.8)
    ap.add_argument("--socket", type=int, default=0)
    ap.add_argument("--machine", default=None, help="hardware file for the idle DRAM latency")
    ap.add_argument("--name", default=None, help="tenant name (default: the record's file name)")
    ap.add_argument("--target", default=None, help="DAMON target id (default: the first)")
    ap.add_argument(
        "--resident-gib",
        type=float,
        default=None,
        help="the tenant's resident memory (RSS): the working set, idle pages included",
    )
    ap.add_argument("--window", type=int, default=5, help="snapshots per phase-detection window")
    ap.add_argument("--intervals", default=None, metavar="SAMPLE_US,AGGR_US",
                    help="perf script records: DAMON's intervals (default 5000,100000)")  # fmt: skip
    ap.add_argument("--ws-change", type=float, default=0.25)
    ap.add_argument("--hot-overlap", type=float, default=0.5)
    ap.add_argument("--max-phases", type=int, default=8)
    ap.add_argument("-o", "--output", default=None, help="write the tenant here (default stdout)")
    args = ap.parse_args(argv)
    try:
        return _run(args)
    except DamonError as exc:
        return report_error(exc)


def _run(args: argparse.Namespace) -> int:
    intervals = None
    if args.intervals:
        try:
            a, b = (float(x) for x in args.intervals.split(","))
        except ValueError:
            raise DamonError(
                f"--intervals: got {args.intervals!r}, expected SAMPLE_US,AGGR_US"
            ) from None
        if a <= 0 or b < a:
            raise DamonError(
                f"--intervals: got {args.intervals!r}, expected 0 < SAMPLE_US <= AGGR_US"
            )
        intervals = (a, b)
    recs = read_records(args.record, intervals)
    if args.target is not None:
        recs = [r for r in recs if str(r.target_id) == str(args.target)]
        if not recs:
            raise DamonError(f"--target {args.target}: no such target in {args.record}")
    rec = next((r for r in recs if r.snapshots), None)
    if rec is None:
        raise DamonError(f"{args.record}: the record has no snapshot")
    machine = None
    if args.machine:
        try:
            machine = yaml.safe_load(Path(args.machine).read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise DamonError(f"--machine {args.machine}: cannot be read ({exc})") from None
    if not 0 <= args.read_fraction <= 1:
        raise DamonError(f"--read-fraction: got {args.read_fraction}, expected 0..1")
    name = args.name or re.sub(r"[^A-Za-z0-9_-]+", "-", Path(args.record).stem) or "tenant"
    tenant, prov, phases = tenant_from_record(
        rec,
        name,
        threads=args.threads,
        mlp=args.mlp,
        gbps=args.gbps,
        compute_ns=args.compute_ns,
        read_fraction=args.read_fraction,
        socket=args.socket,
        machine=machine,
        resident_gib=args.resident_gib,
        window=args.window,
        ws_change=args.ws_change,
        hot_overlap=args.hot_overlap,
        max_phases=args.max_phases,
    )
    # the tenant must load in a scenario on the machine it names (or spr-a1000)
    try:
        load_scenario(
            {
                "name": "check",
                "episode_steps": 1,
                "hardware": machine or "spr-a1000",
                "tenants": [tenant],
            }
        )
    except ScenarioError as exc:
        raise DamonError(
            f"the tenant does not validate: {str(exc).splitlines()[-1].strip()}"
        ) from None
    span = (rec.snapshots[-1].end_ns - rec.snapshots[0].start_ns) / 1e9
    header = [
        f"Written by `python -m calibration damon` from {args.record} ({rec.source}, target "
        f"{rec.target_id}, {len(rec.snapshots)} snapshots over {span:.1f} s, sampling "
        f"{rec.sample_us:g} us, aggregation {rec.aggr_us / 1000:g} ms).",
        "A tenant for a scenario's tenants: list (docs/your-machine.md). Phases at "
        + ", ".join(f"{p.at_s:g} s ({p.working_set_gib:g} GiB)" for p in phases)
        + ".",
    ]
    for i, ph in enumerate(phases):
        header += [f"note, phase {i} (from {ph.at_s:g} s): {n}" for n in ph.notes]
    text = tenant_yaml(tenant, prov, header)
    if args.output:
        Path(args.output).write_text(text)
        print(f"wrote {args.output}: {len(phases)} phase(s), working set "
              f"{phases[0].working_set_gib:g} GiB at the start")  # fmt: skip
    else:
        sys.stdout.write(text)
    return 0
