"""``python -m calibration mlc``: fit one memory node to Intel MLC loaded-latency logs.

Reads MLC ``--loaded_latency`` console logs (any version's ``Inject / Latency /
Bandwidth`` table, the section after "Measuring Loaded Latencies" in a plain ``mlc``
run), their command lines (``-jN`` target node, ``-kLIST`` traffic cores, ``-WN``
mix, ``-R`` reads, ``-U`` random access) and fits the node with the model and the
staged least-squares fit the shipped presets use (:mod:`calibration.fit`):

- the measured curves become :class:`calibration.data.Series` (per mix, the run with
  the most threads; its peak over every thread count beside it), with the same
  saturation, error-range and left-out points as the shipped fit;
- each run is *local* (its cores on the node's socket) or *remote*; local runs fit
  the node's own parameters (``mmem`` or ``cxl`` of :data:`calibration.fit.PARAMETERS`),
  remote runs its remote path (``mmem_remote`` / ``cxl_remote``), local first;
- each stage is :func:`scipy.optimize.least_squares` through
  :class:`calibration.bench.MLCBench` (the MLC test rebuilt as a scenario), with the
  residuals of :mod:`calibration.fit` computed over the mixes the logs have (the
  shipped fit's five when they are all there, :func:`fit_role`);
- random-access peaks (``random_read_gbps``, ``random_write_gbps``) from the
  random/sequential peak ratio of ``-U`` runs, as :func:`calibration.fit.random_peaks`.

The result is the node (or the machine with the node replaced) with a provenance
comment on each value, and a report of the fit: per mix, peak and idle latency
measured vs model and the median latency error up to 90% of the peak, pooled per
memory, as docs/validation.md gives them.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from numpy.typing import NDArray

from calibration.data import ERROR_RANGE, F64, Series, mixes_of, read_fraction
from calibration.fit import INITIAL, PARAMETERS, fit_memory, hardware_with, theta_of
from calibration.metrics import MixMetrics, memory_metrics, pooled_median
from calibration.presets import a1000_2s_hardware, a1000_hardware, rounded
from calibration.probe import ProbeError, machine_yaml, parse_cpulist
from envs.errors import report_error
from envs.hardware import mix_peak
from envs.scenario import ScenarioError, hardware_presets, load_hardware

__all__ = [
    "DEFAULT_CODES",
    "MLC_MIXES",
    "FitResult",
    "MLCError",
    "MLCRun",
    "fit_logs",
    "fit_role",
    "main",
    "parse_log",
    "series_from_runs",
]

#: MLC ``-W`` codes: (reads, writes, write type). 0 (or -R, or no -W) is reads only.
MLC_MIXES: dict[int, tuple[int, int, str]] = {
    0: (1, 0, "none"),
    2: (2, 1, "regular"),
    3: (3, 1, "regular"),
    4: (3, 2, "regular"),
    5: (1, 1, "regular"),
    6: (0, 1, "non-temporal"),
    7: (2, 1, "non-temporal"),
    8: (1, 1, "non-temporal"),
    9: (3, 1, "non-temporal"),
    10: (2, 1, "non-temporal-triad"),
    11: (3, 1, "regular-rfo"),
    **{c: (c - 8, 1, "regular") for c in range(12, 18)},  # 4:1 .. 9:1
}
#: the mixes the shipped presets are fitted to (1:0, 3:1, 2:1, 1:1, 0:1 non-temporal)
DEFAULT_CODES = (0, 3, 2, 5, 6)
#: a local node whose loaded runs start at or above this latency is taken as CXL
#: (the lower bound of the CXL idle latency in :data:`calibration.fit.PARAMETERS`)
CXL_IDLE_NS = 150.0


class MLCError(ValueError):
    """A log, flag or machine the ``mlc`` command cannot use (one line)."""


@dataclass(frozen=True)
class MLCRun:
    """One MLC loaded-latency run: its flags and its table (largest delay first)."""

    path: str
    version: str | None
    target: int | None
    cores: tuple[int, ...]
    code: int
    random: bool
    delay: NDArray[np.int64]
    latency: F64
    bandwidth: F64  # GB/s (MB/s / 1000)

    @property
    def mix(self) -> str:
        r, w, _ = MLC_MIXES[self.code]
        return f"{r}:{w}"

    @property
    def read_fraction(self) -> float:
        r, w, _ = MLC_MIXES[self.code]
        return r / (r + w)

    @property
    def threads(self) -> int:
        return len(self.cores) if self.cores else 0


_ROW = re.compile(r"^\s*(\d+)\s+([0-9]+(?:\.[0-9]*)?)\s+([0-9]+(?:\.[0-9]*)?)\s*$")


def parse_log(path: str | Path) -> MLCRun:
    """One MLC console log: its command line and its loaded-latency table."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise MLCError(f"{p}: cannot be read ({exc.strerror or exc})") from None
    if b"\x00" in raw[:4096]:
        raise MLCError(f"{p}: not an MLC console log (binary data)")
    text = raw.decode("utf-8", errors="replace")
    lines = text.splitlines()
    m = re.search(r"Memory Latency Checker\s*-\s*v?([0-9][\w.]*)", text)
    version = m.group(1) if m else None
    cmd = next((ln for ln in lines if "Command line parameters" in ln), None)
    start = next((i for i, ln in enumerate(lines) if "Measuring Loaded Latencies" in ln), None)
    hdr = None
    for i in range(start or 0, len(lines)):
        low = lines[i].lower()
        if "inject" in low and "latency" in low and "bandwidth" in low:
            hdr = i
            break
    if version is None and cmd is None and hdr is None:
        raise MLCError(
            f"{p}: not an MLC console log (no 'Intel(R) Memory Latency Checker' banner and no "
            "'Inject Latency Bandwidth' table)"
        )
    if hdr is None:
        raise MLCError(
            f"{p}: MLC log without a loaded-latency section (no 'Inject Latency Bandwidth' "
            "table; run mlc --loaded_latency)"
        )
    rows: list[tuple[int, float, float]] = []
    for ln in lines[hdr + 1 :]:
        s = ln.strip()
        if not s or set(s) <= set("=-") or s.lower().startswith("delay"):
            if rows and not s:
                break
            continue
        r = _ROW.match(ln)
        if not r:
            break
        rows.append((int(r.group(1)), float(r.group(2)), float(r.group(3))))
    if len(rows) < 2:
        raise MLCError(f"{p}: the loaded-latency table has {len(rows)} rows, expected several")
    args = cmd.split(":", 1)[1].split() if cmd else []
    target = cores = None
    code, random = 0, False
    for i, a in enumerate(args):
        nxt = args[i + 1] if i + 1 < len(args) else ""
        if a.startswith("-j"):
            v = a[2:] or nxt
            if not v.isdigit():
                raise MLCError(f"{p}: command line {a!r}: expected -jN (a node number)")
            target = int(v)
        elif a.startswith("-k"):
            v = a[2:] or nxt
            try:
                cores = tuple(parse_cpulist(v, "-k"))
            except ProbeError:
                raise MLCError(f"{p}: command line {a!r}: expected -kLIST of cores") from None
        elif a.startswith("-W"):
            v = a[2:] or nxt
            if not v.isdigit() or int(v) not in MLC_MIXES:
                raise MLCError(f"{p}: command line {a!r}: unknown MLC traffic type")
            code = int(v)
        elif a == "-R":
            code = 0
        elif a == "-U":
            random = True
    rows.sort(key=lambda t: -t[0])
    arr = np.array(rows, dtype=float)
    return MLCRun(
        path=str(p),
        version=version,
        target=target,
        cores=cores or (),
        code=code,
        random=random,
        delay=arr[:, 0].astype(np.int64),
        latency=arr[:, 1],
        bandwidth=arr[:, 2] / 1000.0,
    )


def series_from_runs(runs: Sequence[MLCRun], role: str) -> dict[tuple[str, str], Series]:
    """The curves a fit uses, keyed ``(role, mix)``: per mix, the run with the most threads
    (sequential only), its peak over every thread count beside it."""
    by_mix: dict[str, list[MLCRun]] = {}
    for r in runs:
        if not r.random:
            by_mix.setdefault(r.mix, []).append(r)
    out = {}
    for mix, rs in by_mix.items():
        best = max(rs, key=lambda r: (r.threads, -rs.index(r)))
        out[(role, mix)] = Series(
            memory=role,
            mix=mix,
            bandwidth=best.bandwidth.copy(),
            latency=best.latency.copy(),
            delay=best.delay.copy(),
            peak_all_threads=float(max(r.bandwidth.max() for r in rs)),
        )
    return out


# --------------------------------------------------------------------------- the fit


def _held(role: str, series: Mapping[tuple[str, str], Series]) -> set[str]:
    """Peak parameters the mixes present cannot place (kept at their start value)."""
    rfs = [read_fraction(m) for m in mixes_of(role, series)]
    has_read = any(r == 1.0 for r in rfs)
    has_write = any(r == 0.0 for r in rfs)
    has_mixed = any(0.0 < r < 1.0 for r in rfs)
    held = set()
    read_keys = {"read_gbps", "link_read_gbps", "remote_read_gbps"}
    write_keys = {"write_gbps", "link_write_gbps", "remote_write_gbps"}
    mixed_keys = {"turn", "device_gbps", "remote_turn"}
    if not has_read:
        held |= read_keys
    if not has_write:
        held |= write_keys
    if not has_mixed:
        held |= mixed_keys
    n_points = sum(int(series[(role, m)].fitted.sum()) for m in mixes_of(role, series))
    if n_points < 4:
        held |= {p.key for p in PARAMETERS[role] if p.stage == "curve"}
    return held


def fit_role(
    role: str,
    base: Mapping[str, Any],
    series: Mapping[tuple[str, str], Series],
    theta0: Sequence[float],
    verbose: bool = False,
) -> tuple[dict[str, float], set[str]]:
    """:func:`calibration.fit.fit_memory` over the mixes present, the parameters they cannot
    place held (:func:`_held`). Returns the node values and the held parameters."""
    held = _held(role, series)
    values, _ = fit_memory(role, base, series, theta0, verbose=verbose, held=held)
    return values, held


def _peak_guess(role: str, series: Mapping[tuple[str, str], Series]) -> dict[str, float]:
    """:func:`calibration.fit._peak_guess` from the mixes present (others keep the start)."""
    pk = {m: series[(role, m)].peak for m in mixes_of(role, series)}
    rd = pk.get("1:0")
    wr = pk.get("0:1")
    mixed = [v for m, v in pk.items() if 0 < read_fraction(m) < 1]
    out: dict[str, float] = {}
    if role == "mmem":
        if rd:
            out["read_gbps"] = rd
        if wr:
            out["write_gbps"] = wr
        if "1:1" in pk:
            out["mixed_gbps"] = pk["1:1"]
    elif role == "cxl":
        if mixed:
            dev = float(np.mean(mixed))
            out.update(read_gbps=dev, write_gbps=dev, mixed_gbps=dev)
        if rd:
            out["link_read_gbps"] = rd
        if wr:
            out["link_write_gbps"] = wr
    else:
        if "1:0" in pk:
            out["remote_read_gbps"] = series[(role, "1:0")].peak_all_threads
        if wr:
            out["remote_write_gbps"] = wr
        r = out.get("remote_read_gbps")
        w = out.get("remote_write_gbps")
        if r and w and "1:1" in pk:
            out["remote_mixed_gbps"] = min(pk["1:1"], 0.999 / (0.5 / r + 0.5 / w))
    return out


#: the node keys a fit parameter sets
_NODE_KEYS_OF = {
    "turn": ("mixed_gbps",),
    "remote_turn": ("remote_mixed_gbps",),
    "device_gbps": ("read_gbps", "write_gbps", "mixed_gbps"),
}


def _consistent(node: dict[str, float], prefix: str) -> None:
    """Keep ``mixed <= harmonic(read, write)`` after some keys changed (NodeSpec's rule)."""
    r, w, m = (node.get(f"{prefix}{k}_gbps") for k in ("read", "write", "mixed"))
    if r and w and m:
        node[f"{prefix}mixed_gbps"] = min(m, 0.999999 / (0.5 / r + 0.5 / w))


# --------------------------------------------------------------------------- report


#: What each memory role of the fit is (the report's headings).
ROLE_TEXT = {
    "mmem": "local DRAM",
    "cxl": "local CXL",
    "mmem_remote": "DRAM from another socket",
    "cxl_remote": "CXL from another socket",
}


@dataclass
class FitResult:
    """A fitted node, its provenance, and the fit's report per memory role."""

    node: dict[str, Any]
    provenance: dict[str, str]
    reports: dict[str, dict[str, MixMetrics]] = field(default_factory=dict)
    bench: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def report_text(self) -> str:
        """The fit's report as Markdown (docs/validation.md's columns)."""
        L = [f"# MLC fit of {self.node['name']} ({self.node['kind']})", ""]
        for role, rep in self.reports.items():
            L.append(f"## {role}: {ROLE_TEXT[role]}")
            L.append("")
            L.append(
                f"Median latency error up to {ERROR_RANGE:.0%} of peak, all mixes: "
                f"**{pooled_median(rep):.1%}**."
            )
            L.append("")
            L.append(
                "| mix | idle meas / model (ns) | peak meas (all threads) / model (GB/s) | "
                f"median err <={ERROR_RANGE:.0%} (n) |"
            )
            L.append("|---|---|---|---|")
            for r in rep.values():
                idle = f"{r.idle_meas:.1f} / {r.idle_model:.1f} ({r.idle_model / r.idle_meas - 1:+.1%})"
                peak = (
                    f"{r.peak_meas:.1f} ({r.peak_all_threads:.1f}) / {r.peak_model:.1f} "
                    f"({r.peak_rel:+.1%})"
                )
                med = "-" if np.isnan(r.median_err) else f"{r.median_err:.1%}"
                L.append(f"| {r.mix} | {idle} | {peak} | {med} ({r.n_err}) |")
            L.append("")
        if self.notes:
            L += [f"- {n}" for n in self.notes]
            L.append("")
        return "\n".join(L)


def _socket_of_cores(root: str | Path, cores: Sequence[int]) -> set[int]:
    socks = set()
    for c in cores:
        p = Path(root) / f"sys/devices/system/cpu/cpu{c}/topology/physical_package_id"
        try:
            socks.add(int(p.read_text().strip()))
        except (OSError, ValueError):
            raise MLCError(f"{p}: cannot read core {c}'s socket (is --root a host tree?)") from None
    return socks


def _preset_node(kind: str) -> dict[str, Any]:
    name = "dram0" if kind == "dram" else "cxl0"
    return dict(next(n for n in hardware_presets()["spr-a1000"]["nodes"] if n["name"] == name))


def fit_logs(
    runs: Sequence[MLCRun],
    node: Mapping[str, Any] | None = None,
    kind: str | None = None,
    remote_cores: Sequence[int] | None = None,
    root: str | Path | None = None,
    codes: Sequence[int] = DEFAULT_CODES,
    verbose: bool = False,
) -> FitResult:
    """Fit a node to MLC runs (all on that node). ``node``: the node to update (from a
    machine), else the spr-a1000 node of ``kind``. Remote runs are those on
    ``remote_cores``, or on cores of another socket than the node's under ``root``."""
    notes: list[str] = []
    used = [r for r in runs if r.code in codes]
    skipped = sorted({f"-W{r.code}" for r in runs if r.code not in codes})
    if skipped:
        notes.append(
            f"skipped traffic types {', '.join(skipped)} (not in --mixes; the shipped fit uses "
            "-W0/-R, -W3, -W2, -W5, -W6)"
        )
    if not [r for r in used if not r.random]:
        raise MLCError(
            "no sequential run with a traffic type to fit (--mixes "
            f"{','.join(str(c) for c in codes)}); got {', '.join(sorted({r.path for r in runs}))}"
        )
    node_socket = int(node["socket"]) if node is not None else 0

    def is_remote(r: MLCRun) -> bool:
        if remote_cores is not None:
            return bool(r.cores) and set(r.cores) <= set(remote_cores)
        if root is not None and r.cores:
            socks = _socket_of_cores(root, r.cores)
            return node_socket not in socks
        return False

    local = [r for r in used if not is_remote(r)]
    remote = [r for r in used if is_remote(r)]
    if remote_cores is None and root is None and runs:
        notes.append("no --root or --remote-cores: every run is taken as local")
    kind, kind_how = _kind_of(kind, node, local, notes)
    base_node = dict(node) if node is not None else _preset_node(kind)
    name = str(base_node.get("name", "dram0" if kind == "dram" else "cxl0"))
    values: dict[str, Any] = {**base_node, "kind": kind}
    prov: dict[str, str] = {"kind": kind_how}
    # the fit's start: the hand-set numbers of the shipped fit (calibration.fit.INITIAL);
    # a role without logs keeps the node's own values (the remote fit needs the local ones)
    cur = dict(INITIAL[kind])
    other = _preset_node("cxl" if kind == "dram" else "dram")
    local_role, remote_role = ("mmem", "mmem_remote") if kind == "dram" else ("cxl", "cxl_remote")
    local_seq = [r for r in local if not r.random]
    remote_seq = [r for r in remote if not r.random]
    if not local_seq:
        cur.update(
            {k: float(v) for k, v in base_node.items() if k in cur and not k.startswith("remote_")}
        )
    result = FitResult(node={}, provenance={})
    for role, seq in ((local_role, local_seq), (remote_role, remote_seq)):
        if not seq:
            continue
        series = series_from_runs(seq, role)
        dn, cn = (cur, other) if kind == "dram" else (other, cur)
        base = a1000_hardware(dn, cn) if role == local_role else a1000_2s_hardware(dn, cn)
        held = _held(role, series)
        keep = {k2 for k in held for k2 in _NODE_KEYS_OF.get(k, (k,))}
        start = {**cur, **{k: float(base_node[k]) for k in keep if k in base_node}}
        start.update({k: v for k, v in _peak_guess(role, series).items() if k not in keep})
        for p in PARAMETERS[role]:
            start.setdefault(p.key, p.lo + 0.1 * (p.hi - p.lo))
        vals, _ = fit_role(role, base, series, theta_of(role, start), verbose=verbose)
        cur.update(vals)
        mixes = ", ".join(mixes_of(role, series))
        for k, v in vals.items():
            values[k] = v
            prov[k] = (
                "kept: the node's value (no log places it)"
                if k in keep
                else f"measured: fit to {len(seq)} MLC logs ({ROLE_TEXT[role]}; mixes {mixes})"
            )
        if held:
            notes.append(f"{role}: the logs cannot place {', '.join(sorted(keep))}: kept")
        hw_now = hardware_with(role, base, vals)
        result.reports[role] = memory_metrics(hw_now, role, series)
        result.bench[role] = hw_now
    _random_peaks(values, prov, base_node, local, kind)
    result.node, result.provenance, result.notes = _finished(name, values, prov, node), prov, notes
    return result


def _kind_of(
    kind: str | None, node: Mapping[str, Any] | None, local: Sequence[MLCRun], notes: list[str]
) -> tuple[str, str]:
    """The node's kind and where it came from: given, the machine's, or measured from the
    local runs' idle latency (a note says so)."""
    kind_how = "set by you (--kind)"
    if kind is None and node is not None:
        kind, kind_how = node["kind"], "kept: the machine's value"
    if kind is None:
        seq = [r for r in local if not r.random]
        if not seq:
            raise MLCError("only remote runs: give --kind dram|cxl or --machine")
        idle = float(np.median([r.latency[0] for r in seq]))
        kind = "cxl" if idle >= CXL_IDLE_NS else "dram"
        notes.append(
            f"kind {kind}: local runs start at {idle:.0f} ns (CXL from {CXL_IDLE_NS:.0f} ns); "
            "--kind or --machine sets it"
        )
        kind_how = f"measured: local runs start at {idle:.0f} ns (CXL from {CXL_IDLE_NS:.0f} ns)"
    if kind not in ("dram", "cxl"):
        raise MLCError(f"--kind: got {kind!r}, expected dram or cxl")
    return kind, kind_how


def _random_peaks(
    values: dict[str, Any],
    prov: dict[str, str],
    base_node: Mapping[str, Any],
    local: Sequence[MLCRun],
    kind: str,
) -> None:
    """The random-access peaks: from -U runs where there are some, else the node's own
    random/sequential ratio before the fit."""
    rnd = _random_ratios([r for r in local if r.random], [r for r in local if not r.random], kind)
    for side, ratio in rnd.items():
        key = f"random_{side}_gbps"
        values[key] = float(values[f"{side}_gbps"] * ratio)
        prov[key] = f"measured: {side}_gbps x random/sequential peak of -U runs ({ratio:.3f})"
    for side in ("read", "write"):
        key = f"random_{side}_gbps"
        if side not in rnd and key in base_node and base_node.get(f"{side}_gbps"):
            values[key] = float(
                base_node[key] * values[f"{side}_gbps"] / float(base_node[f"{side}_gbps"])
            )
            prov[key] = "assumed: the node's random/sequential ratio before the fit (no -U runs)"


def _finished(
    name: str, values: dict[str, Any], prov: dict[str, str], node: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The fitted node, rounded as the presets are, its mixed peaks within what its read and
    write peaks allow, and a provenance for every value (``prov`` filled in)."""
    _consistent(values, "")
    _consistent(values, "remote_")
    values = {"name": name, **{k: v for k, v in values.items() if k != "name"}}
    floats = {k: v for k, v in values.items() if isinstance(v, float)}
    values.update(rounded(floats))
    for k in ("mixed_gbps", "remote_mixed_gbps"):
        r_, w_ = (("read_gbps", "write_gbps") if k == "mixed_gbps" else
                  ("remote_read_gbps", "remote_write_gbps"))  # fmt: skip
        if k in values and r_ in values and w_ in values:
            values[k] = min(
                values[k], float(np.floor(mix_peak(values[r_], values[w_], 0.0, 0.5) * 100) / 100)
            )
    for k in values:
        if k not in prov and k != "name":
            prov[k] = (
                "kept: the machine's value" if node is not None else "assumed: preset spr-a1000"
            )
    return values


def _random_ratios(random: Sequence[MLCRun], seq: Sequence[MLCRun], kind: str) -> dict[str, float]:
    """Random over sequential peak, as :data:`calibration.data.RANDOM_PEAK_RUNS`: DRAM reads
    from 1:0 and writes from 0:1; CXL both from 1:1 (where its memory, not its link, binds)."""
    pk_r: dict[int, float] = {}
    pk_s: dict[int, float] = {}
    for r in random:
        if r.threads == max(x.threads for x in random):
            pk_r[r.code] = max(pk_r.get(r.code, 0.0), float(r.bandwidth.max()))
    for r in seq:
        pk_s[r.code] = max(pk_s.get(r.code, 0.0), float(r.bandwidth.max()))
    want = {"read": 0, "write": 6} if kind == "dram" else {"read": 5, "write": 5}
    return {s: pk_r[c] / pk_s[c] for s, c in want.items() if c in pk_r and c in pk_s}


# --------------------------------------------------------------------------- command line


def _load_machine(path: str) -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        if path in hardware_presets():
            return dict(hardware_presets()[path])
        raise MLCError(f"--machine {path}: no such file or preset")
    try:
        data = yaml.safe_load(p.read_text())
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise MLCError(f"--machine {path}: not YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
        raise MLCError(f"--machine {path}: expected a hardware file with a nodes: list")
    try:
        load_hardware(data)
    except ScenarioError as exc:
        raise MLCError(f"--machine {path}: {str(exc).splitlines()[0]}") from None
    return data


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m calibration mlc``; returns the exit status (2: bad input)."""
    ap = argparse.ArgumentParser(
        prog="python -m calibration mlc",
        description="Fit a memory node to Intel MLC --loaded_latency console logs.",
    )
    ap.add_argument("logs", nargs="+", metavar="LOG", help="MLC console logs (one run each)")
    ap.add_argument("--node", default=None, help="the node to fit (default: node<N> of -jN)")
    ap.add_argument(
        "--machine", default=None, help="hardware file (e.g. from probe) or preset name"
    )
    ap.add_argument(
        "--kind", choices=("dram", "cxl"), default=None, help="node kind without --machine"
    )
    ap.add_argument("--remote-cores", default=None, metavar="CPULIST",
                    help="cores on another socket than the node (their runs fit the remote path)")  # fmt: skip
    ap.add_argument("--root", default=None, help="host tree to read each core's socket from")
    ap.add_argument("--mixes", default=",".join(str(c) for c in DEFAULT_CODES),
                    help="MLC -W codes to fit (default 0,3,2,5,6: the shipped fit's mixes)")  # fmt: skip
    ap.add_argument("-o", "--output", default=None, help="write the node or machine here")
    ap.add_argument("--report", default=None, help="also write the fit's report (Markdown) here")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args(argv)
    try:
        return _run(args)
    except (MLCError, ProbeError) as exc:
        return report_error(exc)


def _run(args: argparse.Namespace) -> int:
    try:
        codes = tuple(int(x) for x in args.mixes.split(",") if x.strip())
    except ValueError:
        raise MLCError(
            f"--mixes: got {args.mixes!r}, expected MLC -W codes such as 0,2,5"
        ) from None
    bad = [c for c in codes if c not in MLC_MIXES]
    if bad or not codes:
        raise MLCError(f"--mixes: unknown MLC traffic types {bad}, expected {sorted(MLC_MIXES)}")
    runs = [parse_log(p) for p in args.logs]
    targets = sorted({r.target for r in runs if r.target is not None})
    if len(targets) > 1 and args.node is None:
        raise MLCError(f"the logs load several nodes ({targets}): fit one at a time (--node)")
    machine = _load_machine(args.machine) if args.machine else None
    node = None
    if machine is not None:
        names = [n["name"] for n in machine["nodes"]]
        want = args.node or (f"node{targets[0]}" if targets else None)
        if want is None or want not in names:
            raise MLCError(
                f"--node {want}: no such node in {args.machine}, expected one of {names}"
            )
        node = next(n for n in machine["nodes"] if n["name"] == want)
    remote = parse_cpulist(args.remote_cores, "--remote-cores") if args.remote_cores else None
    res = fit_logs(runs, node, args.kind, remote, args.root, codes, args.verbose)
    if node is None and args.node:
        res.node["name"] = args.node
    header = [
        "Written by `python -m calibration mlc`: 'measured' values are fitted to the MLC logs",
        "below with the model and the fit of the shipped presets (docs/your-machine.md).",
        *_log_lines(runs),
    ]
    if machine is not None:
        hw = dict(machine)
        hw["nodes"] = [res.node if n is node else n for n in machine["nodes"]]
        prov = {res.node["name"]: res.provenance}
        text = machine_yaml(hw, prov, header)
    else:
        text = _node_yaml(res.node, res.provenance, header)
    if args.output:
        Path(args.output).write_text(text)
        print(f"wrote {args.output}")
    else:
        sys.stdout.write(text)
    report = res.report_text()
    print(report)
    if args.report:
        Path(args.report).write_text(report + "\n")
    return 0


def _log_lines(runs: Sequence[MLCRun]) -> list[str]:
    """The logs fitted, one line per folder: its number of logs and their names."""
    by_dir: dict[str, list[str]] = {}
    for r in runs:
        p = Path(r.path)
        by_dir.setdefault(str(p.parent), []).append(p.name)
    out = []
    for d, names in by_dir.items():
        shown = ", ".join(names[:6]) + (f", ... ({len(names)} logs)" if len(names) > 6 else "")
        out.append(f"logs in {d}: {shown}")
    return out


def _node_yaml(node: Mapping[str, Any], prov: Mapping[str, str], header: Sequence[str]) -> str:
    """One node as YAML (a list item for a machine's ``nodes:``), values commented."""
    text = machine_yaml({"name": "x", "description": "x", "nodes": [node]}, {node["name"]: prov})
    body = text.split("nodes:\n", 1)[1]
    lines = [f"# {h}" for h in header]
    lines.append("# One node: paste it into a machine's nodes: list (docs/your-machine.md).")
    return "\n".join(lines) + "\n" + body
