"""Fixture trees of Linux hosts for ``python -m calibration probe`` tests.

Each builder writes, under a test's temporary folder, the files section 1 of the host
design notes lists (``sys/devices/system/node``, ``sys/devices/system/cpu``, memory
tiers, HMAT access coordinates, CXL regions and dax devices), in the formats the
kernel uses (cpulists, one SLIT row per node, ``Node N MemTotal: X kB``), with sysfs's
relative symlinks from ``sys/bus/{cxl,dax}/devices`` to the device tree. Nothing here
reads the real ``/sys``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "FixtureNode",
    "build_host",
    "one_socket_one_expander",
    "published_two_socket",
    "two_socket_hmat",
]

CXL_ROOT = "sys/devices/platform/ACPI0017:00/root0"


@dataclass
class FixtureNode:
    """One NUMA node of a fixture: CPUs (with their socket), memory and extras."""

    id: int
    cpus: Sequence[int] = ()
    socket: int | None = None
    mem_kib: int = 0
    #: access1 (best CPU) coordinates, e.g. {"read_bandwidth": 150000, "read_latency": 110}
    hmat: Mapping[str, float] | None = None
    #: CXL region number when a CXL region's dax device onlines this node
    cxl_region: int | None = None
    region_perf: Mapping[str, float] | None = None
    #: a dax device of another kind (hmem) that onlines this node
    hmem_dax: str | None = None
    extra: dict[str, str] = field(default_factory=dict)


def _cpulist(xs: Sequence[int]) -> str:
    xs = sorted(xs)
    parts, start = [], None
    for i, c in enumerate(xs):
        if start is None:
            start = c
        if i + 1 == len(xs) or xs[i + 1] != c + 1:
            parts.append(str(start) if start == c else f"{start}-{c}")
            start = None
    return ",".join(parts)


def _write(root: Path, rel: str, text: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def _link(root: Path, rel: str, target_rel: str) -> None:
    """A relative symlink at ``rel`` to ``target_rel`` (both relative to root), as sysfs."""
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(os.path.relpath(root / target_rel, p.parent), p)


def build_host(
    root: Path,
    nodes: Sequence[FixtureNode],
    distance: Sequence[Sequence[int]] | None,
    tiers: Mapping[int, Sequence[int]] | None = None,
    kernel: str = "6.18.0-fixture",
) -> Path:
    """Write a host's tree under ``root`` and return ``root``."""
    ids = [n.id for n in nodes]
    nd = "sys/devices/system/node"
    _write(root, f"{nd}/online", _cpulist(ids) + "\n")
    _write(root, f"{nd}/possible", _cpulist(ids) + "\n")
    _write(root, f"{nd}/has_cpu", _cpulist([n.id for n in nodes if n.cpus]) + "\n")
    _write(root, f"{nd}/has_memory", _cpulist([n.id for n in nodes if n.mem_kib]) + "\n")
    _write(root, "proc/sys/kernel/osrelease", kernel + "\n")
    for i, n in enumerate(nodes):
        base = f"{nd}/node{n.id}"
        _write(root, f"{base}/cpulist", _cpulist(n.cpus) + "\n")
        if distance is not None:
            _write(root, f"{base}/distance", " ".join(str(d) for d in distance[i]) + "\n")
        _write(
            root,
            f"{base}/meminfo",
            f"Node {n.id} MemTotal:       {n.mem_kib} kB\nNode {n.id} MemFree:        "
            f"{n.mem_kib // 2} kB\nNode {n.id} MemUsed:        {n.mem_kib - n.mem_kib // 2} kB\n",
        )
        for c in n.cpus:
            _write(
                root,
                f"sys/devices/system/cpu/cpu{c}/topology/physical_package_id",
                f"{n.socket}\n",
            )
        if n.hmat:
            for k, v in n.hmat.items():
                _write(root, f"{base}/access1/initiators/{k}", f"{int(v)}\n")
                _write(root, f"{base}/access0/initiators/{k}", f"{int(v)}\n")
        if n.cxl_region is not None:
            z = n.cxl_region
            reg = f"{CXL_ROOT}/decoder0.{z}/region{z}"
            _write(root, f"{reg}/mode", "ram\n")
            _write(root, f"{reg}/size", hex(n.mem_kib * 1024) + "\n")
            _write(root, f"{reg}/dax_region{z}/dax{z}.0/target_node", f"{n.id}\n")
            if n.region_perf:
                for k, v in n.region_perf.items():
                    _write(root, f"{reg}/access0/{k}", f"{int(v)}\n")
            _link(root, f"sys/bus/cxl/devices/region{z}", reg)
            _link(root, f"sys/bus/dax/devices/dax{z}.0", f"{reg}/dax_region{z}/dax{z}.0")
        if n.hmem_dax is not None:
            dev = f"sys/devices/platform/hmem.0/{n.hmem_dax}"
            _write(root, f"{dev}/target_node", f"{n.id}\n")
            _link(root, f"sys/bus/dax/devices/{n.hmem_dax}", dev)
        for rel, text in n.extra.items():
            _write(root, rel, text)
    (root / "sys/bus/cxl/devices").mkdir(parents=True, exist_ok=True)
    (root / "sys/bus/dax/devices").mkdir(parents=True, exist_ok=True)
    for tier, members in (tiers or {}).items():
        _write(
            root,
            f"sys/devices/virtual/memory_tiering/memory_tier{tier}/nodelist",
            _cpulist(members) + "\n",
        )
    # things a probe must never copy into a snapshot
    _write(root, "proc/1/cmdline", "/sbin/init\x00splash\x00")
    _write(root, "home/user/notes.txt", "private\n")
    return root


def one_socket_one_expander(root: Path) -> Path:
    """One socket (16 CPUs, 64 GiB of DRAM) and one CXL expander (128 GiB) onlined
    through CXL region 0's dax device, with CDAT performance on the region (6.9+) and no
    HMAT on the nodes; memory tiers 4 (DRAM) and 22 (the expander). Illustrative numbers."""
    nodes = [
        FixtureNode(0, cpus=range(16), socket=0, mem_kib=64 * 1024 * 1024),
        FixtureNode(
            1,
            mem_kib=128 * 1024 * 1024,
            cxl_region=0,
            region_perf={
                "read_bandwidth": 30000,
                "write_bandwidth": 28000,
                "read_latency": 280,
                "write_latency": 290,
            },
        ),
    ]
    return build_host(root, nodes, [[10, 14], [14, 10]], tiers={4: [0], 22: [1]})


def two_socket_hmat(root: Path) -> Path:
    """Two sockets (nodes 0, 1: 32 CPUs and 256 GiB each) and two CXL expanders on
    socket 0 (nodes 2, 3: 128 GiB each), with HMAT access coordinates on every node
    (DRAM 120/100 GB/s read/write at 110 ns; CXL 45/40 GB/s at 270 ns). Illustrative
    firmware numbers; the distances follow the published layout of
    :func:`published_two_socket` (14 local CXL, 24 remote CXL, 26 between expanders
    of different sockets; 21 between sockets) with both expanders on socket 0."""
    dram = {"read_bandwidth": 120000, "write_bandwidth": 100000, "read_latency": 110}
    cxl = {"read_bandwidth": 45000, "write_bandwidth": 40000, "read_latency": 270}
    g = 1024 * 1024
    nodes = [
        FixtureNode(0, cpus=range(32), socket=0, mem_kib=256 * g, hmat=dram),
        FixtureNode(1, cpus=range(32, 64), socket=1, mem_kib=256 * g, hmat=dram),
        FixtureNode(2, mem_kib=128 * g, hmat=cxl, cxl_region=0),
        FixtureNode(3, mem_kib=128 * g, hmat=cxl, cxl_region=1),
    ]
    dist = [[10, 21, 14, 14], [21, 10, 24, 24], [14, 24, 10, 16], [14, 24, 16, 10]]
    return build_host(root, nodes, dist, tiers={4: [0, 1], 22: [2, 3]})


#: Steve Scargall, "How To Map a CXL Endpoint to a CPU Socket in Linux" (Dec 2022,
#: stevescargall.com): `numactl -H` of a two-socket server with two CXL Type 3
#: expanders. Node 0: CPUs 0-51,104-155, 64167 MB; node 1: CPUs 52-103,156-207,
#: 64472 MB; node 2: no CPUs, 65536 MB; node 3: no CPUs, 131072 MB; distances below.
#: numactl prints MemTotal in MiB ("MB"), so MemTotal kB = MB x 1024.
PUBLISHED_DISTANCE = [[10, 21, 14, 24], [21, 10, 24, 14], [14, 24, 10, 26], [24, 14, 26, 10]]
PUBLISHED_MB = {0: 64167, 1: 64472, 2: 65536, 3: 131072}


def published_two_socket(root: Path) -> Path:
    """The published two-socket CXL server above, without HMAT (its post shows none):
    DRAM nodes 0 (socket 0) and 1 (socket 1); CXL node 2 attached to socket 0 and
    node 3 to socket 1 (distance 14 to their socket's DRAM), each onlined through a CXL
    region's dax device."""
    s0 = [*range(0, 52), *range(104, 156)]
    s1 = [*range(52, 104), *range(156, 208)]
    nodes = [
        FixtureNode(0, cpus=s0, socket=0, mem_kib=PUBLISHED_MB[0] * 1024),
        FixtureNode(1, cpus=s1, socket=1, mem_kib=PUBLISHED_MB[1] * 1024),
        FixtureNode(2, mem_kib=PUBLISHED_MB[2] * 1024, cxl_region=0),
        FixtureNode(3, mem_kib=PUBLISHED_MB[3] * 1024, cxl_region=1),
    ]
    return build_host(root, nodes, PUBLISHED_DISTANCE)
