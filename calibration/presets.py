"""The hardware presets the calibration writes: their mappings and their YAML files.

``spr-a1000`` and ``spr-a1000-2s`` hold the fitted nodes (:mod:`calibration.fit`);
``spr-4cxl`` is derived from them (:func:`spr4cxl_hardware`). The files keep a
comment on every number (:func:`preset_yaml`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from calibration.data import HARDWARE_DIR
from envs.scenario import hardware_presets

__all__ = [
    "a1000_2s_hardware",
    "a1000_hardware",
    "node_of",
    "preset_files",
    "preset_yaml",
    "read_preset",
    "spr4cxl_hardware",
    "write_presets",
]

CAPACITY = {"dram": 119.2, "cxl": 238.4}
NODE_ORDER = [
    "kind",
    "socket",
    "capacity_gib",
    "idle_latency_ns",
    "read_gbps",
    "write_gbps",
    "mixed_gbps",
    "random_read_gbps",
    "random_write_gbps",
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


#: a node's random-access peaks (scaled like the sequential ones where a preset derives
#: a node from the fitted ones)
RANDOM_KEYS = ("random_read_gbps", "random_write_gbps")


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
        **{k: dram[k] * scale_d for k in RANDOM_KEYS if k in dram},
        "queue_slope_ns": dram["queue_slope_ns"],
        "knee_ns": dram["knee_ns"],
        "knee_exp": dram["knee_exp"],
    }
    c = {
        "idle_latency_ns": cxl["idle_latency_ns"],
        "read_gbps": dram["read_gbps"] * scale_c,
        "write_gbps": dram["write_gbps"] * scale_c,
        "mixed_gbps": dram["mixed_gbps"] * scale_c,
        **{k: dram[k] * scale_c for k in RANDOM_KEYS if k in dram},
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

Latency/bandwidth numbers are FITTED by `python -m calibration` to the MLC
loaded-latency curves (16-thread series of loaded_latency_fig3_seq.csv, every mix);
docs/validation.md lists each parameter's meaning and the fit's errors. Rerun the
script rather than editing them by hand (it rewrites this file). "tied": set so the
model reproduces one measured point exactly; "data": one measured number. The remote_*
keys matter only where a tenant runs on another socket (preset spr-a1000-2s).
"""

A1000_2S_HEADER = """
The spr-a1000 machine seen as two sockets (dram1 is socket 1's SNC node, identical to
dram0), so that remote access is possible: a tenant on socket 1 reaches dram0 and cxl0
through the socket link. Remote parameters are FITTED by `python -m calibration` to
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
every number is DERIVED by `python -m calibration` from the fitted spr-a1000 nodes
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
            "random_read_gbps": "data: read_gbps x mmem random/sequential 1:0 peak (66.4/68.1)",
            "random_write_gbps": "data: write_gbps x mmem random/sequential 0:1 NT peak (50.8/53.4)",
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
            "random_read_gbps": "data: device x cxl random/sequential 1:1 peak (52.4/54.0)",
            "random_write_gbps": "data: device x cxl random/sequential 1:1 peak (52.4/54.0)",
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


def preset_files(dram: Mapping[str, float], cxl: Mapping[str, float]) -> list[tuple[str, str]]:
    """(file name, YAML text) of spr-a1000, spr-a1000-2s and spr-4cxl from fitted node values."""
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
        "random_read_gbps": "= 4 x spr-a1000 dram0 x 5600/4800",
        "random_write_gbps": "= 4 x spr-a1000 dram0 x 5600/4800",
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
        "random_read_gbps": "one DDR5 channel: spr-a1000 dram0 / 2 x 5600/4800",
        "random_write_gbps": "one DDR5 channel: spr-a1000 dram0 / 2 x 5600/4800",
        "link_read_gbps": "x8: half the A1000's measured x16 link",
        "link_write_gbps": "x8: half the A1000's measured x16 link",
        "queue_slope_ns": "= spr-a1000 cxl0",
        "knee_ns": "= spr-a1000 cxl0",
        "knee_exp": "= spr-a1000 cxl0",
    }
    notes4 = {"dram0": n4d, "cxl0": n4c}
    files.append(("spr-4cxl.yaml", preset_yaml(hw4, SPR4_HEADER, notes4)))
    return files


def write_presets(dram: Mapping[str, float], cxl: Mapping[str, float]) -> list[Path]:
    """Write spr-a1000.yaml, spr-a1000-2s.yaml and spr-4cxl.yaml from fitted node values."""
    out = []
    for name, text in preset_files(dram, cxl):
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
    """A copy of node ``name`` of a preset mapping."""
    for n in hw["nodes"]:
        if n["name"] == name:
            return dict(n)
    raise KeyError(name)
