"""``python -m calibration probe``: a Linux host's own description, as a hardware file.

Reads, read only, the files under a root directory (default ``/``) that describe the
memory of a machine (docs/your-machine.md; the file list is section 1 of the host
design notes):

- nodes: ``sys/devices/system/node/{online,has_cpu,has_memory}``, each node's
  ``cpulist``, ``distance`` (one SLIT row) and ``meminfo`` (``MemTotal``);
- sockets: ``sys/devices/system/cpu/cpuK/topology/physical_package_id`` of each CPU;
- memory tiers: ``sys/devices/virtual/memory_tiering/memory_tierN/nodelist``;
- HMAT / CDAT performance: ``nodeY/access{1,0}/initiators/{read,write}_{bandwidth,latency}``
  and a CXL region's ``access{1,0}/...`` (latency ns, bandwidth MB/s);
- CXL: ``sys/bus/cxl/devices/regionZ`` (its ``dax_regionZ/daxZ.N/target_node``) and
  ``sys/bus/dax/devices/daxX.Y/target_node``.

Each node with memory is classified (:func:`classify`): a node with CPUs is DRAM; a
CPU-less node that a CXL region's dax device targets is CXL; any other CPU-less node
with memory in a slower tier than DRAM's is "slow memory of unknown kind" (CXL, PMEM
or HBM, the files do not say), modelled as a ``cxl`` node; a CPU-less node in DRAM's
tier is a CPU-less DRAM node. Distance alone never decides a kind.

The host gives capacities, sockets, distances and, where firmware has HMAT (or CDAT
for CXL), idle latencies and peak bandwidths. Everything else (the loaded-latency
curve, the knee, the remote path, a CXL expander's memory behind its link, the 1:1
peak) comes from the nearest shipped preset node (:func:`nearest_preset_node`). The
written file says, per value, whether it was *read* from the host, *assumed* from a
preset, or (after ``python -m calibration mlc``) *measured*.

``--snapshot DIR2`` copies exactly the files the probe read (symlinks as symlinks)
into a tree that ``probe --root DIR2`` reads on another machine: nothing else (no
process list, no user data).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envs.scenario import HardwareSpec, ScenarioError, hardware_presets, load_hardware

__all__ = [
    "Host",
    "HostNode",
    "HostReader",
    "ProbeError",
    "classify",
    "machine_from_host",
    "machine_yaml",
    "nearest_preset_node",
    "parse_cpulist",
    "probe",
    "read_host",
]

NODE_DIR = "sys/devices/system/node"
CPU_DIR = "sys/devices/system/cpu"
TIER_DIR = "sys/devices/virtual/memory_tiering"
CXL_DIR = "sys/bus/cxl/devices"
DAX_DIR = "sys/bus/dax/devices"
#: the tier the kernel puts DRAM in (mm/memory-tiers.c: MEMTIER_ADISTANCE_DRAM / chunk)
DRAM_TIER = 4
KIB_PER_GIB = 1024.0 * 1024.0


class ProbeError(ValueError):
    """The tree under the root is not a Linux host's description the probe can read."""


def parse_cpulist(text: str, where: str = "cpulist") -> list[int]:
    """``0-3,8,10-11`` -> ``[0, 1, 2, 3, 8, 10, 11]`` (an empty string is no CPUs)."""
    out: list[int] = []
    text = text.strip()
    if not text:
        return out
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)(?:-(\d+))?(?::(\d+)/\d+)?\s*", part)
        if not m:
            raise ProbeError(f"{where}: got {text!r}, expected a cpulist such as 0-3,8")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        step = int(m.group(3)) if m.group(3) else 1
        if hi < lo or hi - lo > 1 << 16:
            raise ProbeError(
                f"{where}: got range {part.strip()!r}, expected LOW-HIGH with LOW <= HIGH"
            )
        out.extend(range(lo, hi + 1, step))
    return sorted(set(out))


class HostReader:
    """Reads files relative to a root directory and remembers every path it touched.

    Only reads: no file under the root is ever opened for writing. ``touched`` (paths
    relative to the root) is what ``--snapshot`` copies.
    """

    def __init__(self, root: str | Path = "/") -> None:
        self.root = Path(root)
        self.touched: set[str] = set()
        self.listed: set[str] = set()

    def path(self, rel: str) -> Path:
        return self.root / rel

    def text(self, rel: str) -> str | None:
        """The file's text, or None when it does not exist or cannot be read."""
        p = self.path(rel)
        try:
            data = p.read_text(errors="replace")
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        except OSError:
            return None
        self.touched.add(rel)
        return data

    def listdir(self, rel: str) -> list[str]:
        """Entries of a directory (sorted), empty when it does not exist."""
        p = self.path(rel)
        try:
            names = sorted(os.listdir(p))
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            return []
        self.listed.add(rel)
        return names

    def is_dir(self, rel: str) -> bool:
        return self.path(rel).is_dir()


@dataclass
class HostNode:
    """One NUMA node as the host describes it."""

    id: int
    cpus: list[int]
    mem_kib: int
    distance: list[int] | None
    sockets: list[int] = field(default_factory=list)
    tier: int | None = None
    #: HMAT/CDAT access coordinates: {"read_bandwidth": MB/s, "read_latency": ns, ...}
    perf: dict[str, float] = field(default_factory=dict)
    perf_source: str = ""
    cxl_region: str | None = None
    dax: list[str] = field(default_factory=list)
    kind: str = ""  # "dram", "cxl" or "slow" after classify()
    why: str = ""

    @property
    def capacity_gib(self) -> float:
        return self.mem_kib / KIB_PER_GIB


@dataclass
class Host:
    """A host's memory description: its nodes (with memory) and what else was found."""

    root: str
    nodes: list[HostNode]
    all_node_ids: list[int]
    kernel: str | None
    notes: list[str] = field(default_factory=list)


PERF_KEYS = ("read_bandwidth", "write_bandwidth", "read_latency", "write_latency")


def _read_perf(r: HostReader, base: str) -> tuple[dict[str, float], str]:
    """Access coordinates under ``base`` (a node or a CXL region): access1 (best CPU
    initiator) when present, else access0 (best initiator of any kind)."""
    for acc, sub in (("access1", "access1/initiators"), ("access0", "access0/initiators")):
        for d in (f"{base}/{sub}", f"{base}/{acc}"):
            vals: dict[str, float] = {}
            for k in PERF_KEYS:
                t = r.text(f"{d}/{k}")
                if t is None:
                    continue
                try:
                    v = float(t.strip())
                except ValueError:
                    raise ProbeError(
                        f"{r.path(f'{d}/{k}')}: got {t.strip()!r}, expected a number"
                    ) from None
                if v > 0:
                    vals[k] = v
            if vals:
                return vals, f"{d}"
    return {}, ""


def _meminfo_total(r: HostReader, nid: int) -> int:
    rel = f"{NODE_DIR}/node{nid}/meminfo"
    t = r.text(rel)
    if t is None:
        raise ProbeError(f"{r.path(rel)}: missing, expected the node's meminfo")
    m = re.search(r"MemTotal:\s*(\d+)\s*kB", t)
    if not m:
        raise ProbeError(f"{r.path(rel)}: no 'Node {nid} MemTotal: N kB' line")
    return int(m.group(1))


def read_host(root: str | Path = "/", reader: HostReader | None = None) -> Host:
    """Read the host's memory description under ``root`` (read only)."""
    r = reader or HostReader(root)
    online = r.text(f"{NODE_DIR}/online")
    if online is None:
        raise ProbeError(
            f"{r.path(NODE_DIR + '/online')}: not found; expected a Linux sysfs tree under "
            f"{r.root} (give --root the directory that holds sys/)"
        )
    ids = parse_cpulist(online, str(r.path(f"{NODE_DIR}/online")))
    if not ids:
        raise ProbeError(f"{r.path(NODE_DIR + '/online')}: lists no node")
    has_mem_t = r.text(f"{NODE_DIR}/has_memory")
    has_mem = set(parse_cpulist(has_mem_t)) if has_mem_t is not None else None
    kernel = r.text("proc/sys/kernel/osrelease")
    # memory tiers
    tier_of: dict[int, int] = {}
    for name in r.listdir(TIER_DIR):
        m = re.fullmatch(r"memory_tier(\d+)", name)
        if not m:
            continue
        t = r.text(f"{TIER_DIR}/{name}/nodelist")
        if t is None:
            t = r.text(f"{TIER_DIR}/{name}/nodes")  # the name in the documentation
        for n in parse_cpulist(t or "", str(r.path(f"{TIER_DIR}/{name}/nodelist"))):
            tier_of[n] = int(m.group(1))
    # CXL regions and the nodes their dax devices target
    cxl_of: dict[int, str] = {}
    region_perf: dict[str, tuple[dict[str, float], str]] = {}
    cxl_dax: set[str] = set()
    for name in r.listdir(CXL_DIR):
        if not re.fullmatch(r"region\d+", name):
            continue
        region_perf[name] = _read_perf(r, f"{CXL_DIR}/{name}")
        for sub in r.listdir(f"{CXL_DIR}/{name}"):
            if not sub.startswith("dax_region"):
                continue
            for dev in r.listdir(f"{CXL_DIR}/{name}/{sub}"):
                if not re.fullmatch(r"dax\d+\.\d+", dev):
                    continue
                cxl_dax.add(dev)
                t = r.text(f"{CXL_DIR}/{name}/{sub}/{dev}/target_node")
                if t is not None and t.strip().lstrip("-").isdigit() and int(t) >= 0:
                    cxl_of[int(t)] = name
    dax_of: dict[int, list[str]] = {}
    for dev in r.listdir(DAX_DIR):
        t = r.text(f"{DAX_DIR}/{dev}/target_node")
        if t is None or not t.strip().lstrip("-").isdigit() or int(t) < 0:
            continue
        dax_of.setdefault(int(t), []).append(dev)
        if dev not in cxl_dax:
            link = _link_region(r, f"{DAX_DIR}/{dev}")
            if link is not None and r.is_dir(f"{CXL_DIR}/{link}"):
                cxl_of.setdefault(int(t), link)
    nodes = []
    notes = []
    for nid in ids:
        base = f"{NODE_DIR}/node{nid}"
        if not r.is_dir(base):
            raise ProbeError(f"{r.path(base)}: missing, but {NODE_DIR}/online lists node {nid}")
        cpus = parse_cpulist(r.text(f"{base}/cpulist") or "", str(r.path(f"{base}/cpulist")))
        kib = _meminfo_total(r, nid)
        if kib <= 0 or (has_mem is not None and nid not in has_mem):
            notes.append(f"node {nid} has no memory (CPUs {cpus or 'none'}): left out")
            continue
        dt = r.text(f"{base}/distance")
        dist = None
        if dt is not None:
            try:
                dist = [int(x) for x in dt.split()]
            except ValueError:
                raise ProbeError(
                    f"{r.path(base + '/distance')}: got {dt.strip()!r}, expected integers"
                ) from None
        sockets = []
        for c in cpus:
            t = r.text(f"{CPU_DIR}/cpu{c}/topology/physical_package_id")
            if t is not None and t.strip().isdigit():
                sockets.append(int(t))
        perf, src = _read_perf(r, base)
        node = HostNode(
            id=nid,
            cpus=cpus,
            mem_kib=kib,
            distance=dist,
            sockets=sockets,
            tier=tier_of.get(nid),
            perf=perf,
            perf_source=src,
            cxl_region=cxl_of.get(nid),
            dax=dax_of.get(nid, []),
        )
        if not node.perf and node.cxl_region and region_perf.get(node.cxl_region, ({}, ""))[0]:
            node.perf, node.perf_source = region_perf[node.cxl_region]
        nodes.append(node)
    if not nodes:
        raise ProbeError(f"{r.path(NODE_DIR)}: no node with memory")
    host = Host(
        root=str(r.root), nodes=nodes, all_node_ids=ids, kernel=(kernel or "").strip() or None
    )
    host.notes.extend(notes)
    classify(host)
    return host


def _link_region(r: HostReader, rel: str) -> str | None:
    """The CXL region (``regionN``) on the path a dax device's sysfs link points to."""
    try:
        target = os.readlink(r.path(rel))
    except OSError:
        return None
    r.touched.add(rel)
    for part in reversed(Path(target).parts):
        if re.fullmatch(r"region\d+", part):
            return part
    return None


def classify(host: Host) -> None:
    """Set each node's ``kind`` (``dram``, ``cxl`` or ``slow``) and the reason."""
    dram_tiers = {n.tier for n in host.nodes if n.cpus and n.tier is not None}
    dram_tier = min(dram_tiers) if dram_tiers else DRAM_TIER
    for n in host.nodes:
        if n.cpus:
            n.kind, n.why = "dram", f"has CPUs {_cpus(n.cpus)}"
        elif n.cxl_region:
            n.kind, n.why = "cxl", f"CPU-less; CXL {n.cxl_region}'s dax device targets it"
        elif n.tier is not None and n.tier > dram_tier:
            n.kind = "slow"
            n.why = (
                f"CPU-less, memory tier {n.tier} (DRAM's is {dram_tier}), no CXL region: slow "
                "memory of unknown kind (CXL, PMEM or HBM), modelled as a cxl node"
            )
        elif n.dax:
            n.kind = "slow"
            n.why = (
                f"CPU-less, onlined from {', '.join(n.dax)} (no CXL region): slow memory of "
                "unknown kind, modelled as a cxl node"
            )
        else:
            n.kind, n.why = "dram", "CPU-less, in DRAM's memory tier: a CPU-less DRAM node"


def _cpus(cpus: list[int]) -> str:
    parts, start = [], None
    for i, c in enumerate(cpus):
        if start is None:
            start = c
        if i + 1 == len(cpus) or cpus[i + 1] != c + 1:
            parts.append(str(start) if start == c else f"{start}-{c}")
            start = None
    return ",".join(parts)


# --------------------------------------------------------------------------- the machine


#: preset nodes a probed node may take its unread values from, by model kind
CANDIDATES = {"dram": [("spr-a1000", "dram0"), ("spr-4cxl", "dram0")],
              "cxl": [("spr-a1000", "cxl0"), ("spr-4cxl", "cxl0")]}  # fmt: skip
#: the one preset node of each kind whose remote path is measured (spr-a1000-2s's fit)
REMOTE_SOURCE = {"dram": ("spr-a1000", "dram0"), "cxl": ("spr-a1000", "cxl0")}
REMOTE_KEYS = (
    "remote_latency_ns",
    "remote_read_gbps",
    "remote_write_gbps",
    "remote_mixed_gbps",
    "remote_queue_slope_ns",
    "remote_knee_ns",
    "remote_knee_exp",
)
CURVE_KEYS = ("queue_slope_ns", "knee_ns", "knee_exp")


def _preset_node(preset: str, name: str) -> dict[str, Any]:
    for n in hardware_presets()[preset]["nodes"]:
        if n["name"] == name:
            return dict(n)
    raise KeyError(f"{preset}:{name}")


def nearest_preset_node(kind: str, node: HostNode) -> tuple[str, str, str]:
    """(preset, node, why) of the shipped node closest to ``node``: by the firmware's
    read bandwidth when HMAT/CDAT gives one, else by capacity (log ratio); ties go to the
    measured spr-a1000."""
    bw = node.perf.get("read_bandwidth")
    best: tuple[float, str, str] | None = None
    for preset, name in CANDIDATES[kind]:
        p = _preset_node(preset, name)
        if bw:
            ref = p["link_read_gbps"] if kind == "cxl" else p["read_gbps"]
            d = abs(math.log(bw / 1000.0 / ref))
        else:
            d = abs(math.log(node.capacity_gib / p["capacity_gib"]))
        if best is None or d < best[0] - 1e-12:
            best = (d, preset, name)
    assert best is not None
    how = "firmware read bandwidth" if bw else "capacity, no HMAT bandwidth"
    return best[1], best[2], f"nearest by {how}"


def _harmonic(r: float, w: float) -> float:
    return 1.0 / (0.5 / r + 0.5 / w)


def _node_values(n: HostNode, socket: int) -> tuple[dict[str, Any], dict[str, str]]:
    """A NodeSpec mapping for host node ``n`` and the provenance of each value."""
    kind = "dram" if n.kind == "dram" else "cxl"
    preset, pname, why = nearest_preset_node(kind, n)
    base = _preset_node(preset, pname)
    src = f"assumed: preset {preset} {pname} ({why})"
    out: dict[str, Any] = {"name": f"node{n.id}", "kind": kind, "socket": socket}
    prov: dict[str, str] = {"kind": f"read: {n.why}"}
    prov["socket"] = (
        f"read: physical_package_id of CPUs {_cpus(n.cpus)}"
        if n.cpus
        else "read: socket of the nearest node with CPUs (distance)"
    )
    if not n.cpus and kind == "dram":
        out["cpus"] = False
        prov["cpus"] = "read: the node's cpulist is empty"
    out["capacity_gib"] = round(n.capacity_gib, 3)
    prov["capacity_gib"] = f"read: node{n.id}/meminfo MemTotal {n.mem_kib} kB"
    perf, psrc = n.perf, n.perf_source.replace(NODE_DIR + "/", "")
    lat = perf.get("read_latency")
    if lat:
        out["idle_latency_ns"] = round(lat, 2)
        prov["idle_latency_ns"] = f"read: {psrc}/read_latency (firmware's idle figure)"
    else:
        out["idle_latency_ns"] = base["idle_latency_ns"]
        prov["idle_latency_ns"] = src
    rd, wr = perf.get("read_bandwidth"), perf.get("write_bandwidth")
    rd_g = rd / 1000.0 if rd else None
    wr_g = wr / 1000.0 if wr else None
    if rd_g and not wr_g:
        ref_r = base["link_read_gbps"] if kind == "cxl" else base["read_gbps"]
        ref_w = base["link_write_gbps"] if kind == "cxl" else base["write_gbps"]
        wr_g = rd_g * ref_w / ref_r
    bw_note = f"read: {psrc}/read_bandwidth, write_bandwidth (MB/s / 1000)"
    scale = 1.0
    if kind == "dram":
        if rd_g and wr_g:
            out["read_gbps"], out["write_gbps"] = round(rd_g, 2), round(wr_g, 2)
            prov["read_gbps"] = prov["write_gbps"] = bw_note
            ratio = base["mixed_gbps"] / _harmonic(base["read_gbps"], base["write_gbps"])
            out["mixed_gbps"] = math.floor(_harmonic(rd_g, wr_g) * ratio * 100) / 100
            prov["mixed_gbps"] = f"assumed: {preset} {pname}'s 1:1 peak / harmonic mean"
            for k, ref in (("random_read_gbps", "read_gbps"), ("random_write_gbps", "write_gbps")):
                if k in base:
                    out[k] = round(out[ref] * base[k] / base[ref], 2)
                    prov[k] = f"assumed: {preset} {pname}'s random/sequential ratio"
        else:
            for k in ("read_gbps", "write_gbps", "mixed_gbps", "random_read_gbps",
                      "random_write_gbps"):  # fmt: skip
                if k in base:
                    out[k], prov[k] = base[k], src
    else:
        if rd_g and wr_g:
            out["link_read_gbps"], out["link_write_gbps"] = round(rd_g, 2), round(wr_g, 2)
            prov["link_read_gbps"] = prov["link_write_gbps"] = (
                bw_note + ": the path's bound, taken as the link's"
            )
            scale = rd_g / base["link_read_gbps"]
        for k in ("read_gbps", "write_gbps", "mixed_gbps", "random_read_gbps",
                  "random_write_gbps"):  # fmt: skip
            if k in base:
                out[k] = round(base[k] * scale, 2) if scale != 1.0 else base[k]
                prov[k] = (
                    f"assumed: {preset} {pname}'s device memory x the link ratio {scale:.3f}"
                    if scale != 1.0
                    else src
                )
        if "mixed_gbps" in out:
            out["mixed_gbps"] = min(
                out["mixed_gbps"],
                math.floor(_harmonic(out["read_gbps"], out["write_gbps"]) * 100) / 100,
            )
        for k in ("link_read_gbps", "link_write_gbps"):
            if k not in out:
                out[k], prov[k] = base[k], src
    for k in CURVE_KEYS:
        out[k], prov[k] = base[k], src + ": curve shape"
    rp, rn = REMOTE_SOURCE[kind]
    rbase = _preset_node(rp, rn)
    for k in REMOTE_KEYS:
        if k in rbase:
            out[k] = rbase[k]
            prov[k] = f"assumed: preset {rp}-2s {rn} (the measured remote path)"
    return out, prov


def machine_from_host(
    host: Host, name: str = "probed"
) -> tuple[dict[str, Any], dict[str, dict[str, str]]]:
    """The hardware mapping (``envs.scenario.HardwareSpec`` keys) of a probed host, and
    the provenance of each node value (``read`` / ``assumed``)."""
    idx = {nid: i for i, nid in enumerate(host.all_node_ids)}
    sock: dict[int, int] = {}
    for n in host.nodes:
        if n.sockets:
            sock[n.id] = max(set(n.sockets), key=n.sockets.count)
    for n in host.nodes:
        if n.id in sock:
            continue
        cands = [m for m in host.nodes if m.id in sock]
        if not cands:
            raise ProbeError(
                f"{host.root}: no node with CPUs, so no socket to attach node {n.id} to"
            )
        if n.distance and len(n.distance) == len(host.all_node_ids):
            near = min(cands, key=lambda m: (n.distance[idx[m.id]], m.id))  # type: ignore[index]
        else:
            near = cands[0]
        sock[n.id] = sock[near.id]
    nodes, prov = [], {}
    for n in host.nodes:
        vals, p = _node_values(n, sock[n.id])
        nodes.append(vals)
        prov[vals["name"]] = p
    desc = (
        f"Probed from {host.root} (Linux {host.kernel or 'release unknown'}) by python -m "
        "calibration probe: "
        + "; ".join(f"node{n.id} {n.kind} ({n.capacity_gib:.1f} GiB)" for n in host.nodes)
        + ". Comments say, per value, whether it was read from the host or assumed from a preset."
    )
    hw: dict[str, Any] = {"name": name, "description": desc, "nodes": nodes}
    rows = []
    ok = all(n.distance and len(n.distance) == len(host.all_node_ids) for n in host.nodes)
    if ok:
        for n in host.nodes:
            rows.append([n.distance[idx[m.id]] for m in host.nodes])  # type: ignore[index]
        try:
            HardwareSpec.model_validate({**hw, "distance": rows})
            hw["distance"] = rows
        except Exception as exc:  # a SLIT the model cannot use: derive distances instead
            host.notes.append(f"distance matrix not used ({str(exc).splitlines()[-1].strip()})")
    else:
        host.notes.append("no complete distance rows: distances derived from socket and kind")
    return hw, prov


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        s = f"{v:.3f}".rstrip("0")
        return s + "0" if s.endswith(".") else s
    return str(v)


def machine_yaml(
    hw: Mapping[str, Any], prov: Mapping[str, Mapping[str, str]], header: Iterable[str] = ()
) -> str:
    """The machine as YAML with a provenance comment on every node value."""
    lines = [f"# {h}" if h else "#" for h in header]
    lines.append(f"name: {hw['name']}")
    lines.append("description: >-")
    words, cur = str(hw["description"]).split(), ""
    for w in words:
        if cur and len(cur) + 1 + len(w) > 86:
            lines.append("  " + cur)
            cur = w
        else:
            cur = f"{cur} {w}" if cur else w
    if cur:
        lines.append("  " + cur)
    lines.append("nodes:")
    for node in hw["nodes"]:
        lines.append(f"  - name: {node['name']}")
        p = prov.get(node["name"], {})
        for k, v in node.items():
            if k == "name":
                continue
            txt = f"    {k}: {_fmt(v)}"
            if k in p:
                txt = f"{txt:<34}# {p[k]}"
            lines.append(txt)
    if hw.get("distance"):
        lines.append("distance:                         # read: nodeN/distance (the SLIT)")
        for row in hw["distance"]:
            lines.append(f"  - [{', '.join(str(x) for x in row)}]")
    if hw.get("socket_link"):
        lines.append("socket_link:")
        for k, v in hw["socket_link"].items():
            lines.append(f"  {k}: {_fmt(v)}")
    return "\n".join(lines) + "\n"


def _mirror_links(reader: HostReader, dest: Path, rel: str) -> None:
    """Recreate under ``dest`` every relative symlink on the way to ``rel`` in the source."""
    parts = Path(rel).parts
    for i in range(1, len(parts) + 1):
        sub = Path(*parts[:i])
        src = reader.path(str(sub))
        out = dest / sub
        if not src.is_symlink() or out.is_symlink() or out.exists():
            continue
        target = os.readlink(src)
        if os.path.isabs(target):
            continue  # followed as a plain directory copy instead
        out.parent.resolve().mkdir(parents=True, exist_ok=True)
        os.symlink(target, out.parent.resolve() / out.name)


def _inside(path: Path, dest: Path) -> Path:
    real = Path(os.path.realpath(path))
    if not real.is_relative_to(dest):
        raise ProbeError(f"--snapshot: {path} leads outside the snapshot folder; not copied")
    return real


def snapshot(reader: HostReader, dest: str | Path) -> list[str]:
    """Copy the files ``reader`` read (and the directories it listed) under ``dest``.

    Relative symlinks are copied as symlinks (sysfs reaches devices through them);
    nothing but what the probe read is copied. Returns the relative paths copied.
    """
    d = Path(dest)
    if d.exists() and (not d.is_dir() or any(d.iterdir())):
        raise ProbeError(f"--snapshot {d}: exists and is not an empty folder, expected a new one")
    d.mkdir(parents=True, exist_ok=True)
    d = Path(os.path.realpath(d))
    copied = []
    for rel in sorted(reader.listed | reader.touched):
        _mirror_links(reader, d, rel)
        src = reader.path(rel)
        if rel in reader.listed or src.is_dir():
            _inside(d / rel, d).mkdir(parents=True, exist_ok=True)
            continue
        out = _inside(d / rel, d)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(src.read_bytes())
        copied.append(rel)
    return copied


def probe(
    root: str | Path = "/",
    out: str | Path | None = None,
    snapshot_dir: str | Path | None = None,
    name: str = "probed",
) -> tuple[str, Host]:
    """Probe the host under ``root``: the machine's YAML text (written to ``out`` when
    given) and what was read. Raises :class:`ProbeError` with a one-line reason."""
    reader = HostReader(root)
    host = read_host(root, reader)
    hw, prov = machine_from_host(host, name)
    try:
        load_hardware(hw)
    except ScenarioError as exc:  # a bug here, or a host the model cannot represent
        raise ProbeError(f"the probed machine does not validate: {exc}") from None
    header = [
        "Written by `python -m calibration probe` (read only). Every node value says where it",
        "came from: 'read' from the host's files, 'assumed' from the nearest shipped preset",
        "(curve shapes, knees and the remote path are never in the host's files); replace",
        "them with your own MLC runs: `python -m calibration mlc LOG... --machine THIS_FILE`.",
        "Use it as a scenario's `hardware:` mapping (docs/your-machine.md).",
    ]
    for n in host.nodes:
        header.append(f"node{n.id}: {n.kind}: {n.why}")
    header += [f"note: {x}" for x in host.notes]
    text = machine_yaml(hw, prov, header)
    if out is not None:
        Path(out).write_text(text)
    if snapshot_dir is not None:
        snapshot(reader, snapshot_dir)
    return text, host
