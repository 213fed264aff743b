"""A Linux host's tiering counters (read) and tiering knobs (write), under a root directory.

The files are those of ``docs/deploy.md`` (design: ``host.md`` sections 4 and 5); every path
is relative to ``root`` (default ``/``), so tests run on fixture trees that mirror them.

- :class:`HostReader` reads, each interval, the machine (:meth:`HostReader.machine`: nodes,
  capacities, CPU-less slow nodes, HMAT bandwidth where firmware gives it) and the
  counters (:meth:`HostReader.read`): cumulative kernel counters become rates over the
  interval since the previous read (:class:`HostSnapshot`, the first read has
  ``interval_s == 0`` and zero rates).
- :class:`HostWriter` turns a :class:`HostAction` (the values wanted; ``None`` leaves a
  knob alone) into a plan, a list of :class:`KnobWrite` ``(path, old, new)`` for the
  knobs whose value would change (:meth:`HostWriter.plan`), checks every value's range
  before anything is written (:func:`check_plan`), and applies it one ``write(2)`` per
  value (:meth:`HostWriter.apply`), reporting the kernel's refusals (``EINVAL``,
  ``EBUSY``, ``EAGAIN``, a missing file on an older kernel...) by file and value. The
  original value of every file is journalled (:class:`Journal`: JSON, written and
  fsynced before the file's first write) and :func:`restore` writes them back.

Only the knobs below are ever written (:func:`knob_kind` refuses any other path, the
journal's included); nothing is written under DAMON's sysfs tree, so no kdamond this
program did not create is touched. The weighted-interleave auto switch is named ``auto``
(Linux 6.16+) or ``__auto_type`` (some 6.18 kernels); both are accepted. Writing a
node's weight turns auto off, so a plan that sets weights while auto is on also writes
``auto: true -> N`` (journalled), and a restore writes the weights before auto.

This module imports nothing of the project (the lowest layer).
"""

from __future__ import annotations

import dataclasses
import errno
import json
import math
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "AUTO_NAMES",
    "CGROUP_ROOT",
    "DEFAULT_KNOBS",
    "DEMOTION",
    "HOST_GLOBAL_ENTRIES",
    "HOST_NODE_ENTRIES",
    "HOST_TENANT_ENTRIES",
    "INPUTS",
    "KNOBS",
    "NODE_DIR",
    "NUMA_BALANCING",
    "PROMOTE_RATE",
    "WI_DIR",
    "CgroupSample",
    "HostAction",
    "HostError",
    "HostMachine",
    "HostReader",
    "HostSnapshot",
    "HostWriter",
    "Journal",
    "KnobRefusal",
    "KnobWrite",
    "check_plan",
    "host_features",
    "host_view",
    "host_view_names",
    "host_view_size",
    "knob_kind",
    "parse_cpulist",
    "parse_size",
    "restore",
    "write_host_tree",
]

F64 = NDArray[np.float64]
GIB = float(1 << 30)

WI_DIR = "sys/kernel/mm/mempolicy/weighted_interleave"
#: The weighted-interleave auto switch: ``auto`` (6.16+), ``__auto_type`` on some 6.18 kernels.
AUTO_NAMES = ("auto", "__auto_type")
NUMA_BALANCING = "proc/sys/kernel/numa_balancing"
PROMOTE_RATE = "proc/sys/kernel/numa_balancing_promote_rate_limit_MBps"
DEMOTION = "sys/kernel/mm/numa/demotion_enabled"
NODE_DIR = "sys/devices/system/node"
VMSTAT = "proc/vmstat"
PSI_MEMORY = "proc/pressure/memory"
RESCTRL = "sys/fs/resctrl"
CGROUP_ROOT = "sys/fs/cgroup"
TIERS_DIR = "sys/devices/virtual/memory_tiering"
DAX_DIR = "sys/bus/dax/devices"

#: Knob kinds a :class:`HostWriter` may write (:func:`knob_kind`), each with its values.
KNOBS: dict[str, str] = {
    "weights": f"{WI_DIR}/nodeN: integer 1..255 (global, new pages of weighted-interleave tasks)",
    "auto": f"{WI_DIR}/auto or __auto_type: Y/N (kernel-computed weights)",
    "numa_balancing": f"{NUMA_BALANCING}: 0..3 (bit 1 normal, bit 2 memory tiering)",
    "promote_rate": f"{PROMOTE_RATE}: MB/s, 0..2147483647",
    "demotion": f"{DEMOTION}: true/false",
    "memory.low": "<cgroup>/memory.low: bytes or max (cgroup v2)",
    "memory.high": "<cgroup>/memory.high: bytes or max (cgroup v2)",
    "memory.reclaim": "<cgroup>/memory.reclaim: bytes to reclaim now (cgroup v2; not undoable)",
}
#: What a host may expose to read (:meth:`HostReader.available`), by name.
INPUTS: dict[str, str] = {
    "node-meminfo": f"{NODE_DIR}/nodeN/meminfo: capacity and used memory per node",
    "promotion": f"{VMSTAT} pgpromote_success, pgpromote_candidate (memory tiering, 5.18+)",
    "demotion": f"{VMSTAT} pgdemote_kswapd, pgdemote_direct (5.18+)",
    "hint-faults": f"{VMSTAT} numa_hint_faults, numa_hint_faults_local",
    "psi": f"{PSI_MEMORY}: memory pressure stall time",
    "cgroup-usage": "<cgroup>/memory.numa_stat and memory.current per --cgroups entry",
    "mbm": f"{RESCTRL}/mon_data/mon_L3_XX/mbm_total_bytes: memory bandwidth (resctrl MBM)",
    "hmat-bandwidth": f"{NODE_DIR}/nodeN/access1/initiators/{{read,write}}_bandwidth (HMAT/CDAT)",
    "node-latency": "loaded latency per node: uncore CHA/IMC counters through perf "
    "(CAP_PERFMON); not read from files, so never available to this reader",
}
_INT_MAX = 2**31 - 1


class HostError(ValueError):
    """A host tree that cannot be read or written as asked (one line naming the file)."""


# =============================================================================== parsing


def parse_cpulist(text: str, where: str = "cpulist") -> list[int]:
    """``"0-3,8"`` -> ``[0, 1, 2, 3, 8]`` (the kernel's list format; empty text: ``[]``)."""
    out: list[int] = []
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if m is None:
            raise HostError(f"{where}: {text.strip()!r} is not a list like '0-3,8'")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) else lo
        out.extend(range(lo, hi + 1))
    return out


_SIZE_RE = re.compile(r"^\s*(\d+)\s*([KMGT]?)\s*$", re.IGNORECASE)
_SUFFIX = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str, where: str = "size") -> float:
    """A cgroup size in bytes: ``"1073741824"``, ``"512M"``, ``"2G"``; ``"max"`` is ``inf``."""
    if text.strip() == "max":
        return math.inf
    m = _SIZE_RE.match(text)
    if m is None:
        raise HostError(f"{where}: {text.strip()!r} is not a size (bytes, K/M/G/T suffix, or max)")
    return float(int(m.group(1)) * _SUFFIX[m.group(2).upper()])


def _parse_bool(text: str) -> bool | None:
    """The kernel's ``kstrtobool`` reading of a file's text (``None`` if it is none)."""
    t = text.strip().lower()
    if t in ("y", "yes", "1", "true", "on"):
        return True
    if t in ("n", "no", "0", "false", "off"):
        return False
    return None


def _read(root: Path, rel: str) -> str | None:
    """A file's text, or ``None`` if it is absent or unreadable."""
    try:
        return (root / rel).read_text()
    except (FileNotFoundError, NotADirectoryError, PermissionError, IsADirectoryError):
        return None
    except OSError:
        return None


def _counters(text: str | None) -> dict[str, int]:
    """``name value`` lines (vmstat, numastat, memory.stat, memory.events) as integers."""
    out: dict[str, int] = {}
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) == 2 and re.fullmatch(r"-?\d+", parts[1]):
            out[parts[0]] = int(parts[1])
    return out


def _meminfo(text: str | None) -> dict[str, int]:
    """``Node 0 MemTotal:  24683792 kB`` lines -> ``{"MemTotal": 24683792}`` (KiB)."""
    out: dict[str, int] = {}
    for line in (text or "").splitlines():
        m = re.match(r"^Node\s+\d+\s+(\S+):\s+(\d+)", line)
        if m:
            out[m.group(1)] = int(m.group(2))
    return out


def _psi(text: str | None) -> dict[str, dict[str, float]]:
    """``some avg10=0.00 avg60=0.00 avg300=0.00 total=123`` lines -> nested numbers."""
    out: dict[str, dict[str, float]] = {}
    for line in (text or "").splitlines():
        parts = line.split()
        if parts and parts[0] in ("some", "full"):
            vals = {}
            for p in parts[1:]:
                k, _, v = p.partition("=")
                try:
                    vals[k] = float(v)
                except ValueError:
                    continue
            out[parts[0]] = vals
    return out


def _numa_stat(text: str | None, page_size: int) -> dict[str, dict[int, float]]:
    """``memory.numa_stat`` -> ``{key: {node: bytes}}``.

    cgroup v2 prints ``anon N0=<bytes> N1=...``; cgroup v1 ``anon=<pages> N0=<pages>``
    (converted with ``page_size``).
    """
    out: dict[str, dict[int, float]] = {}
    for line in (text or "").splitlines():
        parts = line.split()
        if not parts:
            continue
        if "=" in parts[0]:  # v1: key=total N0=pages ...
            key, scale, nodes = parts[0].split("=")[0], float(page_size), parts[1:]
        else:
            key, scale, nodes = parts[0], 1.0, parts[1:]
        per: dict[int, float] = {}
        for p in nodes:
            m = re.fullmatch(r"N(\d+)=(\d+)", p)
            if m:
                per[int(m.group(1))] = int(m.group(2)) * scale
        out[key] = per
    return out


def _uint(text: str | None) -> int | None:
    if text is None:
        return None
    t = text.strip()
    return int(t) if re.fullmatch(r"\d+", t) else None


# =============================================================================== the machine


@dataclass(frozen=True)
class HostMachine:
    """The machine as its files describe it (read once): what a heuristic's ``Hardware`` reads.

    Per node (arrays over :attr:`nodes`, the nodes with memory): capacity (GiB), whether
    it has CPUs, whether it is a slow CPU-less node (a CXL dax target, or no CPUs and a
    memory tier below DRAM's: ``is_slow``, what the simulator calls CXL), its memory tier,
    and the HMAT/CDAT read and write bandwidth (GB/s, NaN where firmware gives none) and
    read latency (ns, NaN likewise) from the best CPU initiator (``access1``).
    """

    nodes: tuple[int, ...]
    capacity_gib: F64
    has_cpu: NDArray[np.bool_]
    is_slow: NDArray[np.bool_]
    is_cxl: NDArray[np.bool_]
    tier: NDArray[np.int64]
    read_gbps: F64
    write_gbps: F64
    read_latency_ns: F64

    @property
    def n_nodes(self) -> int:
        return len(self.nodes)

    @property
    def firmware_gbps(self) -> F64:
        """``min(read, write)`` bandwidth per node, what weighted-interleave auto mode reads."""
        return np.minimum(self.read_gbps, self.write_gbps)

    @property
    def node_names(self) -> tuple[str, ...]:
        return tuple(f"node{n}" for n in self.nodes)


# =============================================================================== counters


@dataclass(frozen=True)
class CgroupSample:
    """One cgroup in one interval (v2 files; v1 where it has the same file)."""

    name: str
    version: int  # 1 or 2
    current_gib: float  # memory.current (v2) or memory.usage_in_bytes (v1)
    node_resident_gib: F64  # (N,) anon + file per node, memory.numa_stat
    memory_low_gib: float  # inf where absent (v1) or max
    memory_high_gib: float
    high_events: float  # memory.events "high" during the interval (0 at the first read)
    pressure_some: float  # share of the interval some task stalled on memory (memory.pressure)


@dataclass(frozen=True)
class HostSnapshot:
    """What a host shows in one interval; cumulative counters as rates since the last read.

    Per node (over ``node_ids``): capacity and used memory (``MemTotal - MemFree``),
    promotions into and demotions out of the node (MB/s, the node's vmstat). Totals:
    promotion, promotion candidates, demotion (MB/s of pages, ``proc/vmstat``), NUMA hint
    faults per second and their local share, the share of the interval in which some (or
    all non-idle) tasks stalled on memory (PSI ``total`` microseconds over the interval),
    memory bandwidth (GB/s, resctrl MBM summed over L3 domains; ``None`` if not exposed).
    Per cgroup: :class:`CgroupSample`. ``knobs``: the values of the tiering knobs in force
    (:meth:`HostWriter.current`).
    """

    time_s: float
    interval_s: float  # 0 at the first read (then every rate is 0)
    node_ids: tuple[int, ...]
    node_capacity_gib: F64
    node_used_gib: F64
    node_promotion_mbps: F64
    node_demotion_mbps: F64
    promotion_mbps: float
    promotion_candidates_mbps: float
    demotion_mbps: float
    hint_faults_per_s: float
    hint_faults_local_share: float
    pressure_some: float
    pressure_full: float
    bandwidth_gbps: float | None
    cgroups: tuple[CgroupSample, ...]
    knobs: dict[str, str]

    @property
    def node_used_share(self) -> F64:
        return self.node_used_gib / np.maximum(self.node_capacity_gib, 1e-12)


_DEMOTE_KEYS = ("pgdemote_kswapd", "pgdemote_direct", "pgdemote_khugepaged", "pgdemote_proactive")


@dataclass
class _Raw:
    time_s: float
    vmstat: dict[str, int]
    node_vmstat: list[dict[str, int]]
    psi: dict[str, dict[str, float]]
    mbm_bytes: int | None
    cg_high: list[int]
    cg_psi_us: list[float]


class HostReader:
    """Reads the host's counters under ``root`` into a :class:`HostSnapshot` per interval.

    ``cgroups`` are paths under ``sys/fs/cgroup`` (cgroup v2; ``memory/<name>`` of a v1
    hierarchy is found too). ``page_size`` converts page counters (default: this
    machine's). ``clock`` gives the time of a read (default ``time.monotonic``; a replay
    reads it from each snapshot's ``proc/uptime``).
    """

    def __init__(
        self,
        root: str | Path = "/",
        cgroups: Sequence[str] = (),
        page_size: int | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise HostError(f"--root {str(root)!r}: not a directory")
        self.cgroups = tuple(_check_cgroup_name(c) for c in cgroups)
        self.page_size = int(page_size or os.sysconf("SC_PAGE_SIZE"))
        self.clock = clock or time.monotonic
        self._machine: HostMachine | None = None
        self._last: _Raw | None = None

    # ------------------------------------------------------------------ machine
    def machine(self) -> HostMachine:
        """The nodes with memory and what firmware says of them (read once, then kept)."""
        if self._machine is None:
            self._machine = _read_machine(self.root)
        return self._machine

    def cgroup_dir(self, name: str) -> tuple[Path, int]:
        """The folder of cgroup ``name`` and its version (2, or 1 for ``memory/<name>``)."""
        v2 = self.root / CGROUP_ROOT / name
        if (v2 / "memory.current").is_file():
            return v2, 2
        v1 = self.root / CGROUP_ROOT / "memory" / name
        if (v1 / "memory.usage_in_bytes").is_file():
            return v1, 1
        raise HostError(
            f"--cgroups {name!r}: no {CGROUP_ROOT}/{name}/memory.current (cgroup v2) nor "
            f"{CGROUP_ROOT}/memory/{name}/memory.usage_in_bytes (v1) under {str(self.root)!r}"
        )

    def available(self) -> set[str]:
        """The names of :data:`INPUTS` this host exposes."""
        m = self.machine()
        vm = _counters(_read(self.root, VMSTAT))
        out = {"node-meminfo"}
        if "pgpromote_success" in vm:
            out.add("promotion")
        if "pgdemote_kswapd" in vm:
            out.add("demotion")
        if "numa_hint_faults" in vm:
            out.add("hint-faults")
        if _read(self.root, PSI_MEMORY) is not None:
            out.add("psi")
        if self.cgroups:
            try:
                for c in self.cgroups:
                    self.cgroup_dir(c)
                out.add("cgroup-usage")
            except HostError:
                pass
        if self._mbm() is not None:
            out.add("mbm")
        if m.n_nodes and np.isfinite(m.firmware_gbps).all():
            out.add("hmat-bandwidth")
        return out

    # ------------------------------------------------------------------ recording
    def files(self) -> list[str]:
        """Every file this reader reads (relative paths that exist now): the machine's,
        the counters', the knobs' and the cgroups'. What :meth:`snapshot` copies."""
        m = self.machine()
        rels = [f"{NODE_DIR}/{f}" for f in ("online", "possible", "has_memory", "has_cpu")]
        for n in m.nodes:
            d = f"{NODE_DIR}/node{n}"
            rels += [f"{d}/{f}" for f in ("meminfo", "vmstat", "numastat", "cpulist")]
            ini = f"{d}/access1/initiators"
            rels += [f"{ini}/{f}" for f in ("read_bandwidth", "write_bandwidth", "read_latency")]
        rels += [str(p.relative_to(self.root)) for p in (self.root / TIERS_DIR).glob("*/nodelist")]
        rels += [str(p.relative_to(self.root)) for p in (self.root / DAX_DIR).glob("*/target_node")]
        rels += [VMSTAT, PSI_MEMORY, "proc/uptime"]
        rels += [
            str(p.relative_to(self.root))
            for p in (self.root / RESCTRL / "mon_data").glob("mon_L3_*/mbm_total_bytes")
        ]
        rels += list(HostWriter(self.root, self.cgroups).current())
        for c in self.cgroups:
            cdir, _ = self.cgroup_dir(c)
            for f in (
                "memory.current",
                "memory.usage_in_bytes",
                "memory.numa_stat",
                "memory.events",
                "memory.pressure",
                "memory.low",
                "memory.high",
            ):
                rels.append(str((cdir / f).relative_to(self.root)))
        return [r for r in dict.fromkeys(rels) if (self.root / r).is_file()]

    def snapshot(self, dest: str | Path) -> list[str]:
        """Copy :meth:`files` under ``dest`` (a new or empty folder), the tree that
        ``HostReader(dest)`` reads back: a recorded interval for ``deploy.py --replay``.

        Returns the relative paths copied. Raises :class:`HostError` if ``dest`` is a
        non-empty folder or a file.
        """
        d = Path(dest)
        if d.exists() and (not d.is_dir() or any(d.iterdir())):
            raise HostError(f"snapshot {str(d)!r}: exists and is not an empty folder")
        copied = []
        for rel in self.files():
            try:
                data = (self.root / rel).read_bytes()
            except OSError:
                continue
            out = d / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(data)
            copied.append(rel)
        return copied

    # ------------------------------------------------------------------ counters
    def _mbm(self) -> int | None:
        """Total bytes counted by resctrl MBM over every L3 domain (``None``: not exposed)."""
        base = self.root / RESCTRL / "mon_data"
        if not base.is_dir():
            return None
        total, seen = 0, False
        for d in sorted(base.glob("mon_L3_*")):
            v = _uint(_read(d, "mbm_total_bytes"))
            if v is None:  # "Unavailable" or absent
                return None
            total += v
            seen = True
        return total if seen else None

    def _nodes(self, nodes: Sequence[int]) -> tuple[list[float], list[float], list[dict[str, int]]]:
        """Each node's capacity and used memory (GiB) and its vmstat counters."""
        cap, used, node_vm = [], [], []
        for n in nodes:
            info = _meminfo(_read(self.root, f"{NODE_DIR}/node{n}/meminfo"))
            if "MemTotal" not in info or "MemFree" not in info:
                raise HostError(
                    f"{NODE_DIR}/node{n}/meminfo: expected 'Node {n} MemTotal:' and 'MemFree:' lines"
                )
            cap.append(info["MemTotal"] / (1 << 20))
            used.append((info["MemTotal"] - info["MemFree"]) / (1 << 20))
            node_vm.append(_counters(_read(self.root, f"{NODE_DIR}/node{n}/vmstat")))
        return cap, used, node_vm

    def _cgroup(self, name: str, nodes: Sequence[int]) -> tuple[CgroupSample, int, float]:
        """A cgroup's usage and limits now (its rates 0), its cumulative memory.high events
        and its cumulative memory pressure (``some``, microseconds)."""
        d, ver = self.cgroup_dir(name)
        ev = _counters(_read(d, "memory.events"))
        psi_us = _psi(_read(d, "memory.pressure")).get("some", {}).get("total", 0.0)
        cur = _uint(_read(d, "memory.current" if ver == 2 else "memory.usage_in_bytes"))
        if cur is None:
            raise HostError(f"{d / 'memory.current'}: expected a number of bytes")
        ns = _numa_stat(_read(d, "memory.numa_stat"), self.page_size)
        per = np.array(
            [ns.get("anon", {}).get(n, 0.0) + ns.get("file", {}).get(n, 0.0) for n in nodes]
        )

        def limit(file: str) -> float:
            text = _read(d, file)
            return parse_size(text, str(d / file)) / GIB if text else math.inf

        sample = CgroupSample(
            name=name,
            version=ver,
            current_gib=cur / GIB,
            node_resident_gib=per / GIB,
            memory_low_gib=limit("memory.low"),
            memory_high_gib=limit("memory.high"),
            high_events=0.0,
            pressure_some=0.0,
        )
        return sample, ev.get("high", 0), psi_us

    def read(self) -> HostSnapshot:
        """The counters now, as rates over the interval since the previous :meth:`read`.

        Raises:
            HostError: a file every Linux host has (a node's meminfo, a cgroup's files)
                is missing or malformed.
        """
        m = self.machine()
        now = float(self.clock())
        vm = _counters(_read(self.root, VMSTAT))
        cap, used, node_vm = self._nodes(m.nodes)
        psi = _psi(_read(self.root, PSI_MEMORY))
        cg_static, cg_high, cg_psi = [], [], []
        for name in self.cgroups:
            sample, high_events, psi_us = self._cgroup(name, m.nodes)
            cg_static.append(sample)
            cg_high.append(high_events)
            cg_psi.append(psi_us)
        raw = _Raw(now, vm, node_vm, psi, self._mbm(), cg_high, cg_psi)
        last, self._last = self._last, raw
        dt = 0.0 if last is None else max(now - last.time_s, 0.0)

        def rate(
            new: Mapping[str, int], old: Mapping[str, int] | None, keys: Iterable[str]
        ) -> float:
            if old is None or dt <= 0:
                return 0.0
            d = sum(max(new.get(k, 0) - old.get(k, 0), 0) for k in keys)
            return d * self.page_size / dt / 1e6

        old_vm = last.vmstat if last else None
        hint = rate(vm, old_vm, ("numa_hint_faults",)) * 1e6 / self.page_size
        hint_local = rate(vm, old_vm, ("numa_hint_faults_local",)) * 1e6 / self.page_size

        def stall(kind: str) -> float:
            if last is None or dt <= 0:
                return 0.0
            us = psi.get(kind, {}).get("total", 0.0) - last.psi.get(kind, {}).get("total", 0.0)
            return float(min(max(us / 1e6 / dt, 0.0), 1.0))

        bw = None
        if raw.mbm_bytes is not None and last is not None and last.mbm_bytes is not None and dt > 0:
            bw = max(raw.mbm_bytes - last.mbm_bytes, 0) / dt / 1e9
        elif raw.mbm_bytes is not None and last is None:
            bw = 0.0
        cgs = []
        for i, cg in enumerate(cg_static):
            if last is None or dt <= 0 or len(last.cg_high) != len(cg_high):
                cgs.append(cg)
                continue
            events = float(max(cg_high[i] - last.cg_high[i], 0))
            share = float(min(max((cg_psi[i] - last.cg_psi_us[i]) / 1e6 / dt, 0.0), 1.0))
            cgs.append(dataclasses.replace(cg, high_events=events, pressure_some=share))
        olds = last.node_vmstat if last else [None] * len(m.nodes)
        return HostSnapshot(
            time_s=now,
            interval_s=dt,
            node_ids=m.nodes,
            node_capacity_gib=np.array(cap),
            node_used_gib=np.array(used),
            node_promotion_mbps=np.array(
                [rate(a, b, ("pgpromote_success",)) for a, b in zip(node_vm, olds, strict=True)]
            ),
            node_demotion_mbps=np.array(
                [rate(a, b, _DEMOTE_KEYS) for a, b in zip(node_vm, olds, strict=True)]
            ),
            promotion_mbps=rate(vm, old_vm, ("pgpromote_success",)),
            promotion_candidates_mbps=rate(vm, old_vm, ("pgpromote_candidate",)),
            demotion_mbps=rate(vm, old_vm, _DEMOTE_KEYS),
            hint_faults_per_s=hint,
            hint_faults_local_share=hint_local / hint if hint > 0 else 0.0,
            pressure_some=stall("some"),
            pressure_full=stall("full"),
            bandwidth_gbps=bw,
            cgroups=tuple(cgs),
            knobs=HostWriter(self.root, self.cgroups).current(),
        )


def _check_cgroup_name(name: str) -> str:
    n = name.strip().strip("/")
    if not n or ".." in Path(n).parts or name.startswith("/"):
        raise HostError(
            f"--cgroups {name!r}: expected a path under {CGROUP_ROOT} like 'tenants/a' (no '..')"
        )
    return n


def _read_machine(root: Path) -> HostMachine:
    base = root / NODE_DIR
    text = _read(root, f"{NODE_DIR}/has_memory") or _read(root, f"{NODE_DIR}/online")
    if text is not None:
        nodes = parse_cpulist(text, f"{NODE_DIR}/has_memory")
    else:
        nodes = sorted(
            int(p.name[4:]) for p in base.glob("node*") if re.fullmatch(r"node\d+", p.name)
        )
    if not nodes:
        raise HostError(
            f"{root / NODE_DIR}: no NUMA node with memory (expected has_memory or nodeN folders)"
        )
    cpus = {n: parse_cpulist(_read(root, f"{NODE_DIR}/node{n}/cpulist") or "") for n in nodes}
    tier_of: dict[int, int] = {}
    for t in sorted((root / TIERS_DIR).glob("memory_tier*")):
        m = re.fullmatch(r"memory_tier(\d+)", t.name)
        lst = _read(t, "nodelist") or _read(t, "nodes")
        if m and lst is not None:
            for n in parse_cpulist(lst, str(t / "nodelist")):
                tier_of[n] = int(m.group(1))
    dax_targets = set()
    for d in (root / DAX_DIR).glob("dax*"):
        v = _uint(_read(d, "target_node"))
        if v is not None:
            dax_targets.add(v)
    cap, rd, wr, lat = [], [], [], []
    for n in nodes:
        info = _meminfo(_read(root, f"{NODE_DIR}/node{n}/meminfo"))
        if "MemTotal" not in info:
            raise HostError(
                f"{root / NODE_DIR}/node{n}/meminfo: expected a 'Node {n} MemTotal:' line"
            )
        cap.append(info["MemTotal"] / (1 << 20))
        ini = f"{NODE_DIR}/node{n}/access1/initiators"
        r, w, lt = (
            _uint(_read(root, f"{ini}/{k}"))
            for k in ("read_bandwidth", "write_bandwidth", "read_latency")
        )
        rd.append(r / 1000.0 if r else math.nan)  # MB/s -> GB/s
        wr.append(w / 1000.0 if w else math.nan)
        lat.append(float(lt) if lt else math.nan)
    has_cpu = np.array([bool(cpus[n]) for n in nodes])
    tier = np.array([tier_of.get(n, -1) for n in nodes], dtype=np.int64)
    cpu_tiers = [tier_of[n] for n in nodes if cpus[n] and n in tier_of]
    dram_tier = min(cpu_tiers) if cpu_tiers else None
    is_cxl = np.array([(not cpus[n]) and n in dax_targets for n in nodes])
    below = np.array(
        [dram_tier is not None and n in tier_of and tier_of[n] > dram_tier for n in nodes]
    )
    is_slow = is_cxl | (~has_cpu & below)
    return HostMachine(
        nodes=tuple(nodes),
        capacity_gib=np.array(cap),
        has_cpu=has_cpu,
        is_slow=is_slow,
        is_cxl=is_cxl,
        tier=tier,
        read_gbps=np.array(rd),
        write_gbps=np.array(wr),
        read_latency_ns=np.array(lat),
    )


# =============================================================================== knobs


@dataclass(frozen=True)
class HostAction:
    """The knob values a policy wants (``None``/absent: leave that knob as it is).

    ``weights`` maps a node id to its global interleave weight (1..255); ``auto`` the
    weighted-interleave auto switch; ``numa_balancing`` the mode bitmask (0..3);
    ``promote_rate_mbps`` the promotion rate limit; ``demotion`` ``demotion_enabled``;
    ``memory_low`` / ``memory_high`` bytes per cgroup (``inf``: ``max``);
    ``memory_reclaim`` bytes to reclaim now per cgroup (a one-off, not undoable).
    """

    weights: Mapping[int, int] | None = None
    auto: bool | None = None
    numa_balancing: int | None = None
    promote_rate_mbps: int | None = None
    demotion: bool | None = None
    memory_low: Mapping[str, float] = field(default_factory=dict)
    memory_high: Mapping[str, float] = field(default_factory=dict)
    memory_reclaim: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class KnobWrite:
    """One planned write: ``path`` (relative to the root), its text now and the text to write."""

    path: str
    old: str
    new: str

    def __str__(self) -> str:
        return f"{self.path}: {self.old} -> {self.new}"


@dataclass(frozen=True)
class KnobRefusal:
    """A write the kernel (or the file system) refused: file, value, errno name and message."""

    path: str
    value: str
    error: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: writing {self.value!r} refused: {self.error} ({self.message})"


_CG_FILE = re.compile(r"^sys/fs/cgroup/(?:[^/]+/)*memory\.(low|high|reclaim)$")


def knob_kind(path: str) -> str:
    """The :data:`KNOBS` kind of a relative path.

    Raises:
        HostError: the path is not a knob this program writes (DAMON's tree, any other file).
    """
    p = path.strip("/")
    if ".." in p.split("/"):
        raise HostError(f"{path}: not a knob this program writes ('..' in the path)")
    if re.fullmatch(rf"{re.escape(WI_DIR)}/node\d+", p):
        return "weights"
    if p in (f"{WI_DIR}/{a}" for a in AUTO_NAMES):
        return "auto"
    if p == NUMA_BALANCING:
        return "numa_balancing"
    if p == PROMOTE_RATE:
        return "promote_rate"
    if p == DEMOTION:
        return "demotion"
    m = _CG_FILE.match(p)
    if m and not p.startswith(f"{CGROUP_ROOT}/memory/"):  # v2 only (v1 has no memory.low)
        return f"memory.{m.group(1)}"
    raise HostError(f"{path}: not a knob this program writes (expected one of: {', '.join(KNOBS)})")


def _check_value(kind: str, path: str, value: str) -> None:
    """Raise :class:`HostError` naming ``path`` if ``value`` is outside the knob's range."""
    v = value.strip()
    if kind == "weights":
        if not (v.isdigit() and 1 <= int(v) <= 255):
            raise HostError(f"{path}: weight {v!r} out of range, expected an integer 1..255")
    elif kind in ("auto", "demotion"):
        if _parse_bool(v) is None:
            raise HostError(f"{path}: {v!r} is not a boolean, expected Y/N or true/false")
    elif kind == "numa_balancing":
        if not (v.isdigit() and 0 <= int(v) <= 3):
            raise HostError(
                f"{path}: mode {v!r} out of range, expected 0..3 (bit 1 normal, bit 2 tiering)"
            )
    elif kind == "promote_rate":
        if not (v.isdigit() and 0 <= int(v) <= _INT_MAX):
            raise HostError(f"{path}: rate {v!r} out of range, expected MB/s 0..{_INT_MAX}")
    elif kind in ("memory.low", "memory.high"):
        if v != "max" and not v.isdigit():
            raise HostError(f"{path}: {v!r} is not a size, expected bytes or max")
    elif kind == "memory.reclaim":
        if not (v.isdigit() and int(v) > 0):
            raise HostError(f"{path}: {v!r} out of range, expected bytes > 0")


def check_plan(plan: Sequence[KnobWrite]) -> None:
    """Check every write of ``plan`` (a knob path, a value in range) before any is made.

    Raises:
        HostError: the first bad write, naming its file and value.
    """
    for w in plan:
        _check_value(knob_kind(w.path), w.path, w.new)


def _same(kind: str, old: str, new: str) -> bool:
    """Whether writing ``new`` would leave a knob reading ``old`` as it is."""
    if kind in ("auto", "demotion"):
        return _parse_bool(old) == _parse_bool(new)
    if kind in ("memory.low", "memory.high"):
        try:
            return parse_size(old) == parse_size(new)
        except HostError:
            return False
    if kind == "memory.reclaim":
        return False
    return old.strip() == new.strip()


def _size_text(b: float) -> str:
    return "max" if math.isinf(b) else str(round(b))


class HostWriter:
    """Plans and applies knob writes under ``root``; ``cgroups`` as :class:`HostReader`'s."""

    def __init__(self, root: str | Path = "/", cgroups: Sequence[str] = ()) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise HostError(f"--root {str(root)!r}: not a directory")
        self.cgroups = tuple(_check_cgroup_name(c) for c in cgroups)

    # --------------------------------------------------------------- inventory
    def auto_path(self) -> str | None:
        """The auto switch's relative path (``auto`` or ``__auto_type``), ``None`` if absent."""
        for a in AUTO_NAMES:
            if (self.root / WI_DIR / a).is_file():
                return f"{WI_DIR}/{a}"
        return None

    def weight_paths(self) -> dict[int, str]:
        """Each node's weight file (relative path) by node id."""
        out = {}
        for p in (self.root / WI_DIR).glob("node*"):
            m = re.fullmatch(r"node(\d+)", p.name)
            if m and p.is_file():
                out[int(m.group(1))] = f"{WI_DIR}/{p.name}"
        return dict(sorted(out.items()))

    def cgroup_path(self, name: str, knob: str) -> str:
        return f"{CGROUP_ROOT}/{name}/{knob}"

    def missing(self, kinds: Iterable[str], nodes: Sequence[int] = ()) -> list[str]:
        """The files among knob ``kinds`` (:data:`KNOBS`) this host lacks, as relative paths
        (``weights`` needs a file per node of ``nodes``; cgroup knobs one per cgroup)."""
        out: list[str] = []
        for k in kinds:
            if k == "weights":
                have = self.weight_paths()
                out += [f"{WI_DIR}/node{n}" for n in nodes if n not in have]
            elif k == "auto":
                if self.auto_path() is None:
                    out.append(f"{WI_DIR}/auto (or __auto_type; Linux 6.16+)")
            elif k in ("numa_balancing", "promote_rate", "demotion"):
                rel = {
                    "numa_balancing": NUMA_BALANCING,
                    "promote_rate": PROMOTE_RATE,
                    "demotion": DEMOTION,
                }[k]
                if not (self.root / rel).is_file():
                    out.append(rel)
            elif k.startswith("memory."):
                for c in self.cgroups:
                    rel = self.cgroup_path(c, k)
                    if not (self.root / rel).is_file():
                        out.append(rel)
            else:
                raise HostError(f"knob kind {k!r}: expected one of {list(KNOBS)}")
        return out

    def current(self) -> dict[str, str]:
        """Every knob's text now, by relative path (absent files are left out)."""
        out: dict[str, str] = {}
        paths = [*self.weight_paths().values()]
        auto = self.auto_path()
        if auto:
            paths.append(auto)
        paths += [NUMA_BALANCING, PROMOTE_RATE, DEMOTION]
        for c in self.cgroups:
            paths += [self.cgroup_path(c, "memory.low"), self.cgroup_path(c, "memory.high")]
        for p in paths:
            t = _read(self.root, p)
            if t is not None:
                out[p] = t.strip()
        return out

    # --------------------------------------------------------------- planning
    def plan(
        self,
        action: HostAction,
        current: Mapping[str, str] | None = None,
        unknown: str | None = None,
    ) -> list[KnobWrite]:
        """The writes that bring the knobs to ``action`` (only those that change a value).

        Order: the auto switch off before weights (writing a weight turns auto off
        anyway; planning it journals auto's original value), weights, auto on after them,
        then the global switches, then cgroups. ``current`` (default: read now) is the
        knobs' text, e.g. a recorded snapshot's. ``unknown`` (e.g. ``"?"``): a knob
        missing from ``current`` is planned with that as its old value instead of raising
        (a recorded snapshot that did not record the knobs).

        Raises:
            HostError: a knob the action sets is missing (one line naming the file) or a
                value is out of range.
        """
        cur = dict(self.current() if current is None else current)
        plan: list[KnobWrite] = []

        def add(rel: str, new: str) -> None:
            kind = knob_kind(rel)
            _check_value(kind, rel, new)
            if rel not in cur and kind != "memory.reclaim" and unknown is None:
                raise HostError(f"{rel}: missing on this host (needed to set {kind})")
            old = cur.get(rel, unknown if unknown is not None else "-")
            if not _same(kind, old, new):
                plan.append(KnobWrite(rel, old, new))
            if kind != "memory.reclaim":
                cur[rel] = new  # what the knob reads once the plan is made

        auto = self.auto_path() or (f"{WI_DIR}/{AUTO_NAMES[0]}" if unknown is not None else None)
        if action.weights is not None:
            if auto and _parse_bool(cur.get(auto, "")) and action.auto is not True:
                add(auto, "N")
            have = self.weight_paths()
            for n, w in sorted(action.weights.items()):
                add(have.get(n, f"{WI_DIR}/node{n}"), str(int(w)))
        if action.auto is not None:
            if auto is None:
                raise HostError(
                    f"{WI_DIR}/auto: missing on this host (auto weights need Linux 6.16+)"
                )
            add(auto, "Y" if action.auto else "N")
        if action.numa_balancing is not None:
            add(NUMA_BALANCING, str(int(action.numa_balancing)))
        if action.promote_rate_mbps is not None:
            add(PROMOTE_RATE, str(int(action.promote_rate_mbps)))
        if action.demotion is not None:
            add(DEMOTION, "true" if action.demotion else "false")
        for knob, values in (
            ("memory.low", action.memory_low),
            ("memory.high", action.memory_high),
            ("memory.reclaim", action.memory_reclaim),
        ):
            for c, b in values.items():
                if c not in self.cgroups:
                    raise HostError(
                        f"{knob} for cgroup {c!r}: not among --cgroups {list(self.cgroups)}"
                    )
                add(self.cgroup_path(c, knob), _size_text(b))
        return plan

    def not_writable(self, plan: Sequence[KnobWrite]) -> list[str]:
        """The files of ``plan`` this process may not write (``os.access``), relative paths."""
        return [w.path for w in plan if not os.access(self.root / w.path, os.W_OK)]

    # --------------------------------------------------------------- writing
    def write(self, rel: str, value: str) -> KnobRefusal | None:
        """One ``write(2)`` of ``value`` to knob ``rel`` (never creating a file); the refusal if any."""
        kind = knob_kind(rel)
        _check_value(kind, rel, value)
        data = (value.strip() + "\n").encode()
        try:
            fd = os.open(self.root / rel, os.O_WRONLY | os.O_TRUNC)
        except OSError as exc:
            return KnobRefusal(
                rel, value, errno.errorcode.get(exc.errno or 0, "E?"), exc.strerror or ""
            )
        try:
            n = os.write(fd, data)
            if n != len(data):
                return KnobRefusal(rel, value, "short write", f"{n} of {len(data)} bytes written")
        except OSError as exc:
            return KnobRefusal(
                rel, value, errno.errorcode.get(exc.errno or 0, "E?"), exc.strerror or ""
            )
        finally:
            os.close(fd)
        return None

    def apply(self, plan: Sequence[KnobWrite], journal: Journal | None) -> list[KnobRefusal]:
        """Write ``plan`` (checked first, whole), journalling each file's original value first.

        A file's original value is recorded in ``journal`` (and the journal fsynced) before
        the first write to it; later plans never overwrite that record. ``memory.reclaim``
        is not journalled (it reads nothing back and cannot be undone). Returns the
        refusals (the other writes are made).
        """
        check_plan(plan)
        if journal is not None:
            journal.record([w for w in plan if knob_kind(w.path) != "memory.reclaim"])
        out = []
        for w in plan:
            r = self.write(w.path, w.new)
            if r is not None:
                out.append(r)
        return out


# =============================================================================== journal

JOURNAL_FORMAT = "tiergym-deploy-journal"
JOURNAL_VERSION = 1


class Journal:
    """The original value of every knob a run wrote, in a JSON file fsynced before each write.

    Layout: ``{"format": "tiergym-deploy-journal", "version": 1, "root": <abs root>,
    "pid": ..., "started": <ISO time>, "entries": [{"path": rel, "old": text}, ...]}``, in
    the order the files were first written. ``restored`` is set once a restore succeeded.
    """

    def __init__(self, path: str | Path, root: str | Path) -> None:
        self.path = Path(path)
        self.root = str(Path(root).resolve())
        self.entries: dict[str, str] = {}
        self.restored: str | None = None  # when a restore wrote every original back
        self.started = time.strftime("%Y-%m-%dT%H:%M:%S%z")

    def record(self, writes: Sequence[KnobWrite]) -> None:
        """Add the original values of the files of ``writes`` not recorded yet; fsync."""
        new = [w for w in writes if w.path not in self.entries]
        if not new and self.path.exists():
            return
        for w in new:
            self.entries[w.path] = w.old
        self._save()

    def _save(self, restored: bool = False) -> None:
        doc: dict[str, Any] = {
            "format": JOURNAL_FORMAT,
            "version": JOURNAL_VERSION,
            "root": self.root,
            "pid": os.getpid(),
            "started": self.started,
            "entries": [{"path": p, "old": o} for p, o in self.entries.items()],
        }
        if restored:
            self.restored = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        if self.restored is not None:
            doc["restored"] = self.restored
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        dfd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)

    def mark_restored(self) -> None:
        self._save(restored=True)

    @classmethod
    def load(cls, path: str | Path) -> Journal:
        """A journal from its file, every entry checked (a knob path, a value in range).

        Raises:
            HostError: not a journal, or an entry names a file this program never writes.
        """
        p = Path(path)
        try:
            doc = json.loads(p.read_text())
        except FileNotFoundError:
            raise HostError(f"journal {str(p)!r}: no such file") from None
        except (OSError, ValueError) as exc:
            raise HostError(f"journal {str(p)!r}: not a JSON journal ({exc})") from None
        if not isinstance(doc, dict) or doc.get("format") != JOURNAL_FORMAT:
            raise HostError(f"journal {str(p)!r}: expected format {JOURNAL_FORMAT!r}")
        if doc.get("version") != JOURNAL_VERSION:
            raise HostError(
                f"journal {str(p)!r}: version {doc.get('version')!r}, expected {JOURNAL_VERSION}"
            )
        root, entries = doc.get("root"), doc.get("entries")
        if not isinstance(root, str) or not isinstance(entries, list):
            raise HostError(f"journal {str(p)!r}: expected 'root' (a path) and 'entries' (a list)")
        j = cls(p, root)
        j.started = str(doc.get("started", ""))
        r = doc.get("restored")
        j.restored = str(r) if r is not None else None
        for i, e in enumerate(entries):
            if not (
                isinstance(e, dict)
                and isinstance(e.get("path"), str)
                and isinstance(e.get("old"), str)
            ):
                raise HostError(
                    f"journal {str(p)!r}: entries[{i}]: expected {{'path': str, 'old': str}}"
                )
            kind = knob_kind(e["path"])
            if kind == "memory.reclaim":
                raise HostError(
                    f"journal {str(p)!r}: entries[{i}]: memory.reclaim cannot be restored"
                )
            _check_value(kind, e["path"], e["old"])
            j.entries[e["path"]] = e["old"]
        return j


def restore(
    journal: Journal, root: str | Path | None = None
) -> tuple[list[KnobWrite], list[KnobRefusal]]:
    """Write every journalled original back (weights before the auto switch).

    ``root`` defaults to the journal's. Returns the writes made (``path: now -> original``)
    and the refusals; the journal is marked restored when there is none.
    """
    w = HostWriter(root if root is not None else journal.root)
    entries = sorted(journal.entries.items(), key=lambda kv: knob_kind(kv[0]) == "auto")
    done, refused = [], []
    for rel, old in entries:
        now = (_read(w.root, rel) or "-").strip()
        r = w.write(rel, old)
        if r is None:
            done.append(KnobWrite(rel, now, old))
        else:
            refused.append(r)
    if not refused:
        journal.mark_restored()
    return done, refused


# =============================================================================== fixture trees

#: The knobs' values on a fresh 6.18 kernel (what :func:`write_host_tree` writes by default).
DEFAULT_KNOBS = {"numa_balancing": "0", "promote_rate": "65536", "demotion": "false"}


def write_host_tree(
    root: str | Path,
    mem_kib: Sequence[tuple[int, int]],
    *,
    cpus: Sequence[str] | None = None,
    slow: Sequence[bool] | None = None,
    hmat: Sequence[tuple[int, int, int]] | None = None,
    vmstat: Mapping[str, int] | None = None,
    node_vmstat: Sequence[Mapping[str, int]] | None = None,
    psi_us: tuple[int, int] = (0, 0),
    uptime_s: float = 100.0,
    weights: Sequence[int] | None = (1,),
    auto: str | None = "true",
    auto_name: str = "auto",
    knobs: Mapping[str, str] | None = None,
    cgroups: Mapping[str, Mapping[str, str]] | None = None,
    mbm_bytes: Sequence[int | str] | None = None,
) -> Path:
    """Write a host tree under ``root`` with the files :class:`HostReader` and :class:`HostWriter` use.

    For tests, recorded-snapshot fixtures and mirrors of a simulated state; never point it
    at ``/``. ``mem_kib`` is ``(MemTotal, MemFree)`` per node (KiB), nodes ``0..N-1``;
    ``cpus`` each node's cpulist (default: CPUs on the nodes not ``slow``); ``slow``
    CPU-less nodes in a lower memory tier (tier 4 DRAM, 22 slow) and a dax device targeting
    each; ``hmat`` ``(read MB/s, write MB/s, read latency ns)`` per node; ``vmstat`` and
    ``node_vmstat`` counters; ``psi_us`` the ``some``/``full`` totals; ``weights`` a weight
    file per node (the first value repeated if shorter; ``None``: no weighted-interleave
    folder); ``auto`` the auto switch's text under ``auto_name`` (``None``: absent);
    ``knobs`` overrides of :data:`DEFAULT_KNOBS` (a kind mapped to ``None``-like ``""``
    leaves its file out); ``cgroups`` file texts per cgroup (v2); ``mbm_bytes`` one
    ``mbm_total_bytes`` per L3 domain.
    """
    r = Path(root)
    if r.resolve() == Path("/"):
        raise HostError("write_host_tree: refusing to write a fixture tree over '/'")
    n = len(mem_kib)
    slow = list(slow) if slow is not None else [False] * n
    cpus = list(cpus) if cpus is not None else [("" if s else str(i)) for i, s in enumerate(slow)]

    def put(rel: str, text: str) -> None:
        p = r / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text if text.endswith("\n") else text + "\n")

    ids = ",".join(str(i) for i in range(n))
    put(f"{NODE_DIR}/online", ids)
    put(f"{NODE_DIR}/has_memory", ids)
    put(f"{NODE_DIR}/has_cpu", ",".join(str(i) for i in range(n) if cpus[i]))
    for i, (total, free) in enumerate(mem_kib):
        put(
            f"{NODE_DIR}/node{i}/meminfo",
            f"Node {i} MemTotal:       {total} kB\nNode {i} MemFree:        {free} kB\n"
            f"Node {i} MemUsed:        {total - free} kB\n",
        )
        put(f"{NODE_DIR}/node{i}/cpulist", cpus[i])
        nv = dict(node_vmstat[i]) if node_vmstat is not None else {}
        put(
            f"{NODE_DIR}/node{i}/vmstat",
            "".join(f"{k} {v}\n" for k, v in nv.items()) or "nr_free_pages 0",
        )
        if hmat is not None:
            rb, wb, lat = hmat[i]
            ini = f"{NODE_DIR}/node{i}/access1/initiators"
            put(f"{ini}/read_bandwidth", str(rb))
            put(f"{ini}/write_bandwidth", str(wb))
            put(f"{ini}/read_latency", str(lat))
        if slow[i]:
            put(f"{DAX_DIR}/dax{i}.0/target_node", str(i))
    fast = [str(i) for i in range(n) if not slow[i]]
    put(f"{TIERS_DIR}/memory_tier4/nodelist", ",".join(fast))
    if any(slow):
        put(f"{TIERS_DIR}/memory_tier22/nodelist", ",".join(str(i) for i in range(n) if slow[i]))
    put(VMSTAT, "".join(f"{k} {v}\n" for k, v in (vmstat or {}).items()) or "nr_free_pages 0")
    put(
        PSI_MEMORY,
        f"some avg10=0.00 avg60=0.00 avg300=0.00 total={psi_us[0]}\n"
        f"full avg10=0.00 avg60=0.00 avg300=0.00 total={psi_us[1]}\n",
    )
    put("proc/uptime", f"{uptime_s:.2f} 0.00")
    if weights is not None:
        for i in range(n):
            put(f"{WI_DIR}/node{i}", str(weights[i] if i < len(weights) else weights[0]))
        if auto is not None:
            put(f"{WI_DIR}/{auto_name}", auto)
    k = {**DEFAULT_KNOBS, **(knobs or {})}
    for kind, rel in (
        ("numa_balancing", NUMA_BALANCING),
        ("promote_rate", PROMOTE_RATE),
        ("demotion", DEMOTION),
    ):
        if k.get(kind):
            put(rel, k[kind])
    for name, files in (cgroups or {}).items():
        for fname, text in files.items():
            put(f"{CGROUP_ROOT}/{name}/{fname}", text)
    if mbm_bytes is not None:
        for i, b in enumerate(mbm_bytes):
            put(f"{RESCTRL}/mon_data/mon_L3_{i:02d}/mbm_total_bytes", str(b))
    return r


# =============================================================================== the host view

#: The host view (``observation="host"`` of :class:`envs.spaces.ObservationEncoder`): what a
#: host shows, defined once here for the simulator and for :func:`host_view` alike.
#: Per node: used memory over capacity, and the capacity ``log2(1 + GiB) / log2(2049)``.
HOST_NODE_ENTRIES = ("capacity_used", "capacity")
#: Per tenant slot (a cgroup of ``--cgroups`` on a host, in order): ``present`` (it holds
#: memory), its resident memory on the fast (DRAM) nodes and on the slow (CXL) nodes,
#: ``log2(1 + GiB) / log2(2049)`` each (``memory.numa_stat`` anon + file per node).
HOST_TENANT_ENTRIES = ("present", "fast_resident", "slow_resident")
#: Global: promotion, promotion candidates and demotion, ``log1p(MB/s) / log1p(65536)``
#: (``pgpromote_success``, ``pgpromote_candidate``, ``pgdemote_*`` per second).
HOST_GLOBAL_ENTRIES = ("promotion", "promotion_candidates", "demotion")
HOST_GIB_SCALE = math.log2(1.0 + 2048.0)  # the same as envs.spaces.GIB_SCALE
HOST_MBPS_SCALE = math.log1p(65536.0)  # the same as envs.spaces.MBPS_SCALE


def host_view_size(n_tenants: int, n_nodes: int) -> int:
    """Entries of the host view for ``n_tenants`` slots and ``n_nodes`` nodes."""
    return (
        len(HOST_NODE_ENTRIES) * n_nodes
        + len(HOST_TENANT_ENTRIES) * n_tenants
        + len(HOST_GLOBAL_ENTRIES)
    )


def host_view_names(node_names: Sequence[str], n_tenants: int) -> list[str]:
    """A name for every entry of the host view, in order."""
    out = [f"node[{n}].{k}" for n in node_names for k in HOST_NODE_ENTRIES]
    out += [f"tenant[{t}].{k}" for t in range(n_tenants) for k in HOST_TENANT_ENTRIES]
    return [*out, *HOST_GLOBAL_ENTRIES]


def host_features(
    node_used_gib: F64,
    node_capacity_gib: F64,
    tenant_fast_gib: F64,
    tenant_slow_gib: F64,
    promotion_mbps: F64,
    candidates_mbps: F64,
    demotion_mbps: F64,
) -> NDArray[np.float32]:
    """The host view (B, size) from batch-first quantities: per node (B, N) used and
    capacity GiB, per tenant slot (B, T) GiB on fast and on slow nodes, and (B,) MB/s of
    promotion, promotion candidates and demotion. Every entry is clipped to [0, 1]."""
    cap = np.asarray(node_capacity_gib, dtype=float)
    B = cap.shape[0]
    fast = np.maximum(np.asarray(tenant_fast_gib, dtype=float), 0.0)
    slow = np.maximum(np.asarray(tenant_slow_gib, dtype=float), 0.0)
    node = np.stack(
        [
            np.asarray(node_used_gib, dtype=float) / np.maximum(cap, 1e-12),
            np.log2(1.0 + cap) / HOST_GIB_SCALE,
        ],
        axis=-1,
    ).reshape(B, -1)
    tenant = np.stack(
        [
            ((fast + slow) > 0).astype(float),
            np.log2(1.0 + fast) / HOST_GIB_SCALE,
            np.log2(1.0 + slow) / HOST_GIB_SCALE,
        ],
        axis=-1,
    ).reshape(B, -1)
    rates = np.stack(
        [np.asarray(x, dtype=float) for x in (promotion_mbps, candidates_mbps, demotion_mbps)],
        axis=-1,
    )
    glob = np.log1p(np.maximum(rates, 0.0)) / HOST_MBPS_SCALE
    return np.clip(np.concatenate([node, tenant, glob], axis=1), 0.0, 1.0).astype(np.float32)


def host_view(
    snap: HostSnapshot, is_slow: NDArray[np.bool_], n_tenants: int
) -> NDArray[np.float32]:
    """The host view (size,) of a snapshot: the cgroups of ``--cgroups`` fill the tenant
    slots in order (the others are empty), ``is_slow`` (N,) the nodes that count as slow.

    Raises:
        HostError: more cgroups than tenant slots.
    """
    if len(snap.cgroups) > n_tenants:
        raise HostError(
            f"--cgroups: {len(snap.cgroups)} cgroups for a policy of {n_tenants} tenant slots"
        )
    slow = np.asarray(is_slow, dtype=bool)
    fast_gib, slow_gib = np.zeros((1, n_tenants)), np.zeros((1, n_tenants))
    for t, c in enumerate(snap.cgroups):
        fast_gib[0, t] = float(np.where(slow, 0.0, c.node_resident_gib).sum())
        slow_gib[0, t] = float(np.where(slow, c.node_resident_gib, 0.0).sum())
    return host_features(
        snap.node_used_gib[None],
        snap.node_capacity_gib[None],
        fast_gib,
        slow_gib,
        np.array([snap.promotion_mbps]),
        np.array([snap.promotion_candidates_mbps]),
        np.array([snap.demotion_mbps]),
    )[0]
