"""The scenario generator: random machines and workloads, with a part of the space held out.

A generated scenario is a machine **shape** (how many sockets, DRAM nodes and CXL
expanders, built from the fitted nodes of the shipped presets) with its capacities
drawn, and 1 to 4 tenants, each of a **kind** of the library with its parameters drawn
from the ranges of :data:`KINDS`: sizes, intensities, hotness, phases, arrivals and
departures, cgroup limits and memory policies. Every range is written beside its
source; the shipped scenarios' machines and tenants lie inside them
(``tests/envs/test_generator.py`` checks that), so they are points the generator can
produce, not a training set.

Families (one per node layout, so a batch can mix their scenarios):

- ``gen-<shape>``: the shape with tenants of every kind except those held out on it;
  the ``train``, ``val`` and ``test`` splits draw from disjoint seeds (:data:`SPLIT_CODES`).
- ``unseen-<shape>-<kind>``: a **held-out cell** of :data:`HELD_OUT`, a combination of
  a shape and a tenant kind that no ``gen-*`` family ever draws: its first tenant is
  of that kind, the others of any kind. Training on the ``gen-*`` families sees the
  shape (with other tenants) and the kind (on other shapes), never the two together,
  so a result on these is a result on problems the policy never met.

- ``broad-<shape>``: the situations the shipped scenarios show (:data:`MOTIFS`: spill
  over every CPU node, a stream saturating its DRAM and changing its read/write mix, a
  latecomer on DRAM a first tenant filled, under cgroup limits, memory bound to the other
  socket's DRAM), drawn on every shape and on one more (:data:`BROAD_SHAPES`), never with a
  held-out cell and never a shipped scenario itself (:func:`content_key`): those stay a
  test set. :func:`features` names what a scenario shows and :func:`coverage` counts it.

Every family has three splits from disjoint seeds: ``train``, ``val`` (every choice made
while training reads it) and ``test`` (reports only); docs/training.md, "Splits".

Group names expand to lists where families are listed (``train_families``, the
``--scenarios`` of ``evaluate.py``): ``generator`` is every ``gen-*`` family,
``unseen`` every ``unseen-*`` one and ``broad`` every ``broad-*`` one.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from types import MappingProxyType
from typing import Any

import numpy as np

from envs.scenario import Scenario, hardware_presets, load_scenario, scenario_names

__all__ = [
    "BROAD_SHAPES",
    "CHANCES",
    "CHANNELS",
    "FEATURES",
    "GROUPS",
    "HELD_OUT",
    "KINDS",
    "MOTIFS",
    "SHAPES",
    "broad_family_names",
    "broad_scenario",
    "check_chances",
    "content_key",
    "coverage",
    "expand_family_names",
    "family_name",
    "features",
    "generated_scenario",
    "generator_family_names",
    "held_out_kinds",
    "parse_broad_name",
    "unseen_family_names",
]

MAX_TENANTS = 4
#: A tenant's parameter sets: the start and at most two phase changes.
MAX_PHASES = 3
EPISODE_STEPS = 100

# --------------------------------------------------------------------------- machines


@cache
def _parts() -> dict[str, dict[str, Any]]:
    """The fitted node parameter sets machines are built from, by part name."""
    presets = hardware_presets()
    a1000 = {n["name"]: n for n in presets["spr-a1000"]["nodes"]}
    four = {n["name"]: n for n in presets["spr-4cxl"]["nodes"]}
    spill = load_scenario("cxl-spill").hardware.model_dump(exclude_none=True)
    return {
        # one SNC DDR5 node of the EuroSys Sapphire Rapids (2 channels), local and remote fitted
        "snc": dict(a1000["dram0"]),
        # the Astera Labs A1000 expander (PCIe Gen5 x16), local and remote fitted
        "a1000": dict(a1000["cxl0"]),
        # a whole socket: 8 DDR5-5600 channels (spr-4cxl, derived; no remote parameters)
        "socket": dict(four["dram0"]),
        # a CZ120-class expander (PCIe Gen5 x8), with the remote parameters of cxl-spill
        "cz120": {k: v for k, v in spill["nodes"][4].items() if k != "name"},
        # a whole socket of 8 DDR5-4800 channels, SNC off (broad-1s-socket-1cxl only): the
        # fitted SNC node's per-channel bandwidths x 8 / 2, its latency curve, no remote side
        # (derived as issue #49's tiering-fairness box, spr-a1000-box, derives its DRAM)
        "socket-4800": {
            **{k: v for k, v in a1000["dram0"].items() if not k.startswith("remote_")},
            **{
                k: round(4.0 * float(a1000["dram0"][k]), 2)
                for k in (
                    "read_gbps",
                    "write_gbps",
                    "mixed_gbps",
                    "random_read_gbps",
                    "random_write_gbps",
                )
            },
        },
    }


#: Socket link of the two-socket shapes: 4 UPI 2.0 links (cxl-spill, fallback-hotspot).
SOCKET_LINK = {"gbps": 128.0}
#: The 2021 fix's SLIT of two sockets with two SNC nodes each (fallback-hotspot).
SNC_2S_DISTANCE = [[10, 12, 32, 32], [12, 10, 32, 32], [32, 32, 10, 12], [32, 32, 12, 10]]


@dataclass(frozen=True)
class Shape:
    """A machine shape: its nodes as ``(part, socket)``, DRAM first; ``what`` says it."""

    what: str
    nodes: tuple[tuple[str, int], ...]
    distance: tuple[tuple[int, ...], ...] | None = None

    @property
    def sockets(self) -> int:
        return 1 + max(s for _, s in self.nodes)

    @property
    def dram_nodes(self) -> list[int]:
        return [i for i, (p, _) in enumerate(self.nodes) if p in DRAM_GIB]


#: The machine shapes (at most 6 nodes: the agent's padded node count).
SHAPES: dict[str, Shape] = {
    "1s-1cxl": Shape("one SNC DDR5 node and the A1000 (spr-a1000)", (("snc", 0), ("a1000", 0))),
    "1s-2cxl": Shape(
        "a whole socket of DDR5-5600 and two CZ120 expanders",
        (("socket", 0), ("cz120", 0), ("cz120", 0)),
    ),
    "1s-4cxl": Shape(
        "a whole socket of DDR5-5600 and four CZ120 expanders (spr-4cxl)",
        (("socket", 0), ("cz120", 0), ("cz120", 0), ("cz120", 0), ("cz120", 0)),
    ),
    "1s-snc-2cxl": Shape(
        "two SNC DDR5 nodes on one socket and two CZ120 expanders",
        (("snc", 0), ("snc", 0), ("cz120", 0), ("cz120", 0)),
    ),
    "2s-1cxl": Shape(
        "two sockets of one SNC DDR5 node each, the A1000 on socket 0 (spr-a1000-2s)",
        (("snc", 0), ("snc", 1), ("a1000", 0)),
    ),
    "2s-2cxl": Shape(
        "two sockets of one SNC DDR5 node each, a CZ120 expander on each socket",
        (("snc", 0), ("snc", 1), ("cz120", 0), ("cz120", 1)),
    ),
    "2s-snc": Shape(
        "two sockets of two SNC DDR5 nodes each, no expander (fallback-hotspot)",
        (("snc", 0), ("snc", 0), ("snc", 1), ("snc", 1)),
        tuple(tuple(r) for r in SNC_2S_DISTANCE),
    ),
    "2s-snc-2cxl": Shape(
        "two sockets of two SNC DDR5 nodes each, two CZ120 expanders on socket 0 (cxl-spill)",
        (("snc", 0), ("snc", 0), ("snc", 1), ("snc", 1), ("cz120", 0), ("cz120", 0)),
    ),
}

#: DRAM per node (GiB, log-uniform): from kv-store's 8 GiB to a whole node (an SNC node's
#: 256 GiB as in tiering-fairness; a socket's 8 x 64 GB).
DRAM_GIB = {"snc": (8.0, 256.0), "socket": (16.0, 476.8), "socket-4800": (16.0, 476.8)}
#: CXL capacity per expander (GiB): tiering-fairness's 64 GiB, a 128 GB and a 256 GB module.
CXL_GIB = (64.0, 119.2, 238.4)
#: DDR5 channels behind one DRAM node of each part: the part's own count, then the bounds a
#: machine of its kind is built with. ``snc``: a Sapphire Rapids socket's 8 channels seen as
#: SNC-4 nodes (2 each, the calibrated node) up to SNC-2 nodes (4 each; 3 with six channels
#: populated). ``socket`` and ``socket-4800``: a whole socket (SNC off) with 4 to 8 channels
#: populated, one DIMM each (Intel's balanced 1DPC populations; issue #49's bounds for the
#: tiering-fairness box). A drawn count scales the part's bandwidths (local and remote) by
#: ``count / own``, its latency curve unchanged, as ``socket-4800`` derives from ``snc``.
CHANNELS: Mapping[str, tuple[int, int, int]] = MappingProxyType(
    {"snc": (2, 2, 4), "socket": (8, 4, 8), "socket-4800": (8, 4, 8)}
)
#: The bandwidth fields a channel count scales.
_CHANNEL_FIELDS = (
    "read_gbps", "write_gbps", "mixed_gbps", "random_read_gbps", "random_write_gbps",
    "remote_read_gbps", "remote_write_gbps", "remote_mixed_gbps",
)  # fmt: skip
#: The seed word of the channel draw's own stream: the draw takes nothing from the machine's
#: and tenants' stream, so a scenario drawn with it differs only in its DRAM bandwidths.
CHANNEL_STREAM = 0xC4A7
#: Control interval (s) and how often each is drawn: 1 s (most scenarios), 2 s (kv-store),
#: 5 s (tiering-fairness).
INTERVALS = ((1.0, 0.6), (2.0, 0.3), (5.0, 0.1))


def _hardware(
    shape: Shape, rng: np.random.Generator, entropy: list[int], channels: float
) -> dict[str, Any]:
    """The shape's nodes with their capacities drawn from ``rng``; with probability
    ``channels`` (the chance of that name) every DRAM node's channel count is drawn within
    :data:`CHANNELS` from a stream of its own (``entropy`` plus :data:`CHANNEL_STREAM`; one
    count per part, so a machine's nodes of one part stay alike)."""
    parts = _parts()
    counts: dict[str, int] = {}
    if channels > 0.0:
        own = np.random.default_rng([*entropy, CHANNEL_STREAM])
        if own.random() < channels:
            counts = {
                part: int(own.integers(CHANNELS[part][1], CHANNELS[part][2] + 1))
                for part in sorted({p for p, _ in shape.nodes if p in CHANNELS})
            }
    nodes, n_dram, n_cxl = [], 0, 0
    for part, socket in shape.nodes:
        node = dict(parts[part])
        if part in DRAM_GIB:
            lo, hi = DRAM_GIB[part]
            node["capacity_gib"] = round(
                float(math.exp(rng.uniform(math.log(lo), math.log(hi)))), 1
            )
            node["name"], n_dram = f"dram{n_dram}", n_dram + 1
            if part in counts and counts[part] != CHANNELS[part][0]:
                scale = counts[part] / CHANNELS[part][0]
                for field in _CHANNEL_FIELDS:
                    if field in node:
                        node[field] = round(scale * float(node[field]), 2)
        else:
            node["capacity_gib"] = float(rng.choice(CXL_GIB))
            node["name"], n_cxl = f"cxl{n_cxl}", n_cxl + 1
        node["socket"] = socket
        nodes.append(node)
    hw: dict[str, Any] = {"name": "generated", "nodes": nodes}
    if shape.sockets > 1:
        hw["socket_link"] = dict(SOCKET_LINK)
    if shape.distance is not None:
        hw["distance"] = [list(r) for r in shape.distance]
    return hw


# --------------------------------------------------------------------------- tenants

#: The tenant kinds and the ranges their parameters are drawn from: ``(lo, hi)`` uniform,
#: a list a choice. Each says what it models and where its ranges come from.
KINDS: dict[str, dict[str, Any]] = {
    "llm": {  # CPU LLM inference: streams its weights, KV cache grows, threads ramp (llm-inference)
        "threads": (8, 24), "mlp": (4.0, 4.0), "compute_ns": (70.0, 130.0),
        "read_fraction": (0.95, 0.95), "working_set_gib": (3.0, 14.0), "zipf_s": (0.0, 0.0),
        "churn_per_s": (0.0, 0.02), "grow_gib_per_s": (0.0, 0.05),
    },
    "kv": {  # key-value store, Zipfian keys, latency-bound (kv-store; tiering-fairness latecomer)
        "threads": (4, 64), "mlp": (1.0, 3.0), "compute_ns": (80.0, 300.0),
        "read_fraction": (0.5, 0.95), "working_set_gib": (8.0, 48.0), "zipf_s": (0.8, 1.2),
        "churn_per_s": (0.0, 0.02),
    },
    "scan": {  # analytics scan or batch job, poor locality (analytics-scan; colocation batch)
        "threads": (8, 32), "mlp": (4.0, 10.0), "compute_ns": (40.0, 120.0),
        "read_fraction": (0.7, 0.98), "working_set_gib": (16.0, 64.0), "zipf_s": (0.0, 0.6),
        "churn_per_s": (0.0, 0.05),
    },
    "hog": {  # bandwidth hog, MLC/STREAM-like (mlc-bandwidth, cxl-spill, tiering-fairness streamer)
        "threads": (8, 64), "mlp": (6.0, 32.0), "compute_ns": (0.0, 40.0),
        "read_fraction": [0.5, 0.6667, 0.75, 1.0], "working_set_gib": (4.0, 256.0),
        "zipf_s": (0.0, 0.0),
    },
    "latency": {  # latency-sensitive service: small, hot, few misses in flight (colocation service)
        "threads": (2, 12), "mlp": (1.0, 1.5), "compute_ns": (30.0, 200.0),
        "read_fraction": (0.7, 0.95), "working_set_gib": (1.0, 8.0),
        "hot_fraction": (0.05, 0.3), "hot_access_fraction": (0.8, 0.95),
    },
    "web": {  # web or application tier: many threads, short misses, a hot session set
        "threads": (16, 64), "mlp": (1.0, 2.0), "compute_ns": (100.0, 400.0),
        "read_fraction": (0.8, 0.95), "working_set_gib": (2.0, 16.0),
        "hot_fraction": (0.1, 0.3), "hot_access_fraction": (0.7, 0.9),
    },
    "hpc": {  # bandwidth-bound HPC kernel (stencil, sparse solver): sequential or random sweeps
        "threads": (16, 64), "mlp": (8.0, 16.0), "compute_ns": (0.0, 20.0),
        "read_fraction": (0.5, 0.8), "working_set_gib": (16.0, 150.0), "zipf_s": (0.0, 0.2),
        "access": ["sequential", "random"],
    },
    "shift": {  # a job whose hot set moves: a skewed phase, then a flat one, or the reverse
        "threads": (8, 32), "mlp": (2.0, 6.0), "compute_ns": (50.0, 200.0),
        "read_fraction": (0.6, 0.95), "working_set_gib": (8.0, 48.0), "zipf_s": (0.8, 1.2),
        "shift_to_zipf_s": (0.0, 0.3), "churn_per_s": (0.0, 0.02),
    },
}  # fmt: skip

#: The generator's chances (:func:`generated_scenario`'s ``chances`` overrides any of them):
#: that a tenant after the first arrives late (``late``: at 10-50% of the episode), that a
#: tenant leaves early (``stop``: at 60-95%), changes its intensity once (``phase``:
#: compute_ns x 0.5-2, at 30-80%), has a cgroup memory.low (``memory_low``: 25-100% of its
#: working set), a memory.high (``memory_high``: 50-100%), or a memory policy other than
#: local (``mempolicy``: bind, preferred or interleave over nodes that hold it); and the
#: kernel options a scenario fixes: memcg limits that also act on each tier
#: (``tier_aware``: the tiering-fairness RFC's, ``tiering-fairness-low-high``) where a
#: tenant has limits, and the fallback lists of kernels before the 2021 fix (``pre_2021``:
#: the ``-prefix`` scenarios) where a machine has more than two DRAM nodes (where they
#: differ); and that a machine's DRAM nodes have their channel count drawn within
#: :data:`CHANNELS` instead of their part's (``channels``: their bandwidths scaled; 0 by
#: default, so every family's machines are the fitted parts); and that the ``bandwidth``
#: situation's stream asks 0.5-1.0x its local DRAM's peak instead of 1.2x or more
#: (``near_peak``: a stream near, not past, the peak, where its own socket's DRAM is the
#: place; 0 by default). Every family's splits draw these; a training run may draw its
#: families with others (``generator_chances``), evaluation always draws these.
CHANCES: Mapping[str, float] = MappingProxyType(
    {
        "late": 0.5,
        "stop": 0.15,
        "phase": 0.3,
        "memory_low": 0.15,
        "memory_high": 0.1,
        "mempolicy": 0.1,
        "tier_aware": 0.3,
        "pre_2021": 0.15,
        "channels": 0.0,
        "near_peak": 0.0,
    }
)


def check_chances(chances: Mapping[str, Any] | None) -> dict[str, float]:
    """:data:`CHANCES` with the entries of ``chances`` in their place.

    Raises:
        ValueError: an unknown name, or a value that is not a number in [0, 1].
    """
    out = dict(CHANCES)
    for name, value in (chances or {}).items():
        if name not in CHANCES:
            raise ValueError(
                f"generator_chances: unknown chance {name!r}, expected names of {list(CHANCES)}"
            )
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not 0.0 <= float(value) <= 1.0
        ):
            raise ValueError(
                f"generator_chances.{name}: got {value!r}, expected a number in [0, 1]"
            )
        out[name] = float(value)
    return out


#: The held-out cells ``(shape, kind)``: never drawn by ``gen-*``; each is an
#: ``unseen-<shape>-<kind>`` family. Every shape and every kind stays in training elsewhere.
HELD_OUT: tuple[tuple[str, str], ...] = (
    ("1s-1cxl", "web"),
    ("1s-2cxl", "shift"),
    ("1s-4cxl", "hpc"),
    ("2s-1cxl", "llm"),
    ("2s-2cxl", "scan"),
    ("2s-snc-2cxl", "kv"),
)


def held_out_kinds(shape: str) -> list[str]:
    """The kinds a ``gen-<shape>`` family never draws."""
    return [k for s, k in HELD_OUT if s == shape]


def _draw(rng: np.random.Generator, spec: Any) -> Any:
    if isinstance(spec, list):
        return spec[int(rng.integers(len(spec)))]
    lo, hi = spec
    if isinstance(lo, int):
        return int(rng.integers(lo, hi + 1))
    return float(rng.uniform(lo, hi))


def _tenant(
    kind: str,
    rng: np.random.Generator,
    name: str,
    episode_s: float,
    first: bool,
    chances: Mapping[str, float],
) -> dict[str, Any]:
    r = KINDS[kind]
    d: dict[str, Any] = {"name": name}
    for key in ("threads", "mlp", "compute_ns", "read_fraction", "churn_per_s", "grow_gib_per_s"):
        if key in r:
            d[key] = _draw(rng, r[key])
    d["working_set_gib"] = round(_draw(rng, r["working_set_gib"]), 2)
    if "hot_fraction" in r:
        d["hotness"] = {
            "hot_fraction": _draw(rng, r["hot_fraction"]),
            "hot_access_fraction": _draw(rng, r["hot_access_fraction"]),
        }
    else:
        d["hotness"] = {"zipf_s": _draw(rng, r["zipf_s"])}
    if "access" in r:
        d["access"] = _draw(rng, r["access"])
    phases: list[dict[str, Any]] = []
    if kind == "llm":  # the serving threads ramp twice
        phases = [
            {"at_s": round(episode_s * f, 1), "threads": int(d["threads"] * m)}
            for f, m in ((0.35, 2), (0.7, 3))
        ]
    elif kind == "shift":  # the hot set dissolves, or forms
        flat = {"zipf_s": _draw(rng, r["shift_to_zipf_s"])}
        if rng.random() < 0.5:
            d["hotness"], flat = flat, d["hotness"]
        phases = [{"at_s": round(float(rng.uniform(0.3, 0.7)) * episode_s, 1), "hotness": flat}]
    if kind != "llm" and rng.random() < chances["phase"]:
        at = round(float(rng.uniform(0.3, 0.8)) * episode_s, 1)
        if all(abs(p["at_s"] - at) >= 1.0 for p in phases):
            phases.append({"at_s": at, "compute_ns": d["compute_ns"] * float(rng.uniform(0.5, 2))})
    phases.sort(key=lambda p: p["at_s"])
    if not first and rng.random() < chances["late"]:
        d["start_s"] = round(float(rng.uniform(0.1, 0.5)) * episode_s, 1)
        for p in phases:
            p["at_s"] = max(p["at_s"], d["start_s"] + 1.0)
    if rng.random() < chances["stop"]:
        d["stop_s"] = round(float(rng.uniform(0.6, 0.95)) * episode_s, 1)
        phases = [p for p in phases if p["at_s"] < d["stop_s"]]
    ats = [p["at_s"] for p in phases]
    if len(set(ats)) < len(ats):  # a late start moved two changes onto one time
        phases = phases[:1]
    if phases:
        d["phases"] = phases
    ws = d["working_set_gib"]
    if rng.random() < chances["memory_low"]:
        d["memory_low_gib"] = round(ws * float(rng.uniform(0.25, 1.0)), 2)
    if rng.random() < chances["memory_high"]:
        high = round(ws * float(rng.uniform(0.5, 1.0)), 2)
        if high >= d.get("memory_low_gib", 0.0):
            d["memory_high_gib"] = high
    return d


def _place(
    t: dict[str, Any],
    shape: Shape,
    hw: Mapping[str, Any],
    rng: np.random.Generator,
    chances: Mapping[str, float],
) -> None:
    """Socket, CPU node and memory policy of tenant ``t`` on the machine."""
    nodes = hw["nodes"]
    if shape.sockets > 1:
        t["socket"] = int(rng.integers(shape.sockets))
    local = [i for i in shape.dram_nodes if nodes[i]["socket"] == t.get("socket", 0)]
    if len(local) > 1:
        t["cpu_node"] = nodes[local[int(rng.integers(len(local)))]]["name"]
    if rng.random() >= chances["mempolicy"]:
        return
    mode = ("bind", "preferred", "interleave")[int(rng.integers(3))]
    if mode == "preferred":
        t["mempolicy"] = {"mode": mode, "nodes": [nodes[local[0]]["name"]]}
        return
    # bind: the DRAM of a socket and every expander; interleave: every node
    sock = int(rng.integers(shape.sockets))
    chosen = [
        n["name"]
        for i, n in enumerate(nodes)
        if mode == "interleave" or i not in shape.dram_nodes or n["socket"] == sock
    ]
    held = sum(n["capacity_gib"] for n in nodes if n["name"] in chosen)
    grown = t["working_set_gib"] + 200.0 * t.get("grow_gib_per_s", 0.0)
    if held >= grown:
        t["mempolicy"] = {"mode": mode, "nodes": chosen}


#: Share of the machine's capacity the tenants' peak working sets may fill: the rest is
#: the watermarks' and headroom (the model does not swap).
FILL = 0.9


def _fit(tenants: list[dict[str, Any]], hw: Mapping[str, Any], episode_s: float) -> None:
    """Scale every tenant's sizes by one factor so that their peaks fit the machine."""
    peak = sum(
        t["working_set_gib"]
        + t.get("grow_gib_per_s", 0.0) * (t.get("stop_s", episode_s) - t.get("start_s", 0.0))
        for t in tenants
    )
    room = FILL * sum(n["capacity_gib"] for n in hw["nodes"])
    if peak <= room:
        return
    f = room / peak
    for t in tenants:
        for key in ("working_set_gib", "memory_low_gib", "memory_high_gib"):
            if key in t:
                t[key] = round(t[key] * f, 2)
        if "grow_gib_per_s" in t:
            t["grow_gib_per_s"] *= f


#: Each split's word in the generator's seed sequence: ``train`` 0 and ``test`` 1 as before
#: ``val`` existed, ``val`` 2, so no two splits share a seed.
SPLIT_CODES: Mapping[str, int] = MappingProxyType({"train": 0, "test": 1, "val": 2})


def _split_code(split: str) -> int:
    if split not in SPLIT_CODES:
        raise ValueError(f"split: got {split!r}, expected one of {tuple(SPLIT_CODES)}")
    return SPLIT_CODES[split]


def generated_scenario(
    shape: str,
    split: str,
    index: int,
    cell: str | None = None,
    episode_steps: int = EPISODE_STEPS,
    chances: Mapping[str, Any] | None = None,
) -> Scenario:
    """Scenario ``index`` of a split of ``gen-<shape>`` or, with ``cell`` (a kind held out
    on ``shape``), of ``unseen-<shape>-<cell>``; ``chances`` replaces entries of
    :data:`CHANCES`."""
    ch = check_chances(chances)
    if shape not in SHAPES:
        raise ValueError(f"shape: got {shape!r}, expected one of {sorted(SHAPES)}")
    held = held_out_kinds(shape)
    if cell is not None and cell not in held:
        raise ValueError(f"cell: {cell!r} is not held out on {shape!r} (held out: {held})")
    sh = SHAPES[shape]
    stream = [0x6E4E, list(SHAPES).index(shape), 0 if cell is None else 1 + held.index(cell)]
    entropy = [*stream, _split_code(split), index]
    rng = np.random.default_rng(entropy)
    hw = _hardware(sh, rng, entropy, ch["channels"])
    intervals, p = zip(*INTERVALS, strict=True)
    interval = float(rng.choice(intervals, p=p))
    episode_s = interval * episode_steps
    allowed = [k for k in KINDS if k not in held]
    n = int(rng.integers(1, MAX_TENANTS + 1))
    kinds = [cell] if cell is not None else []
    pool = list(KINDS) if cell is not None else allowed
    kinds += [pool[int(i)] for i in rng.integers(len(pool), size=n - len(kinds))]
    tenants = [
        _tenant(kind, rng, f"{kind}{i}", episode_s, i == 0, ch) for i, kind in enumerate(kinds)
    ]
    _fit(tenants, hw, episode_s)
    for t in tenants:
        _place(t, sh, hw, rng, ch)
    family = family_name(shape, cell)
    kernel: dict[str, str] = {}
    limited = any("memory_low_gib" in t or "memory_high_gib" in t for t in tenants)
    if limited and rng.random() < ch["tier_aware"]:
        kernel["memcg_limits"] = "tier_aware"
    if len(sh.dram_nodes) > 2 and rng.random() < ch["pre_2021"]:
        kernel["fallback_lists"] = "pre-2021"
    return load_scenario(
        {
            **({"kernel": kernel} if kernel else {}),
            "name": f"{family}-{split}-{index}",
            "description": f"generated: {sh.what}; envs.generator",
            "interval_s": interval,
            "episode_steps": episode_steps,
            "hardware": hw,
            "tenants": tenants,
        }
    )


# --------------------------------------------------------------------------- broad: the shipped situations

#: The situations a ``broad-<shape>`` scenario is built around (one per scenario, drawn
#: uniformly among those its shape has), each what a shipped scenario shows, drawn with
#: its sizes, intensities and placements random, so no shipped scenario is one of them:
#:
#: - ``spill``: bandwidth-heavy tenants, one per CPU node (cxl-spill): their working sets
#:   1.1-1.6x the machine's DRAM, so DRAM fills and the rest follows the fallback lists;
#: - ``bandwidth``: a stream whose demand is 1.2x its local DRAM's peak up to the most its
#:   kind asks (every thread at its most misses in flight; at least 3x), its working set
#:   fitting DRAM, changing its read/write mix once (mlc-bandwidth);
#: - ``fairness``: a bandwidth-heavy tenant (half the time a stream) filling its socket's
#:   DRAM (0.9-1.3x), then a
#:   latency-bound latecomer, with cgroup limits (memory.low on the latecomer, memory.high
#:   and memory.low on the first) at the chances of :data:`FAIRNESS_LIMITS`, tier-aware
#:   limits at :data:`FAIRNESS_TIER_AWARE` (tiering-fairness, colocation);
#: - ``bind``: streams on one socket whose memory is bound to the other socket's DRAM
#:   (``numactl -m``; fallback-hotspot), two-socket shapes only;
#: - ``any``: a ``gen-<shape>`` draw (every kind trained on the shape, every chance).
#:
#: Other tenants of any trained kind may join a situation (0 to 2, within
#: :data:`MAX_TENANTS`). A ``broad-<shape>`` family never draws a kind held out on its shape,
#: so the ``unseen-*`` cells stay unseen for a policy trained on it.
MOTIFS = ("spill", "bandwidth", "fairness", "bind", "any")
#: The shapes of the ``broad-*`` families: every generator shape, and one that only they draw
#: (so the ``generator`` group and the default recipe's families stay as they were): a whole
#: socket of DDR5-4800 (SNC off, 8 channels) and one A1000, the common single-expander server
#: and the shape of the tiering-fairness box (issue #49's ``spr-a1000-box``).
BROAD_SHAPES: dict[str, Shape] = {
    **SHAPES,
    "1s-socket-1cxl": Shape(
        "a whole socket of DDR5-4800 (8 channels, SNC off) and the A1000",
        (("socket-4800", 0), ("a1000", 0)),
    ),
}
#: Chances of each cgroup limit in the ``fairness`` situation: memory.low on the latecomer
#: (50-100% of its working set), memory.high on the first tenant (50-90% of its working
#: set) and memory.low on it (25-50%).
FAIRNESS_LIMITS: Mapping[str, float] = MappingProxyType(
    {"latecomer_low": 0.7, "first_high": 0.5, "first_low": 0.3}
)
#: Chance that the ``fairness`` situation's limits also act on each tier (tiering-fairness-low-high).
FAIRNESS_TIER_AWARE = 0.5
#: Kinds a situation's main tenants are drawn from, those of them trained on the shape:
#: streams (``spill``, ``bind``; ``bandwidth`` is a ``hog``, the kind of MLC), bandwidth-heavy
#: first tenants and latency-bound latecomers (``fairness``).
STREAM_KINDS = ("hog", "hpc")
BANDWIDTH_KINDS = ("hog", "hpc", "scan")
LATENCY_KINDS = ("kv", "latency", "web")
#: Read fractions of the ``bandwidth`` situation's mix change (MLC's W2, W3, W5, all reads).
MIXES = (1.0, 0.75, 0.6667, 0.5)


def motifs(shape: str) -> tuple[str, ...]:
    """The situations a ``broad-<shape>`` family draws (``bind`` needs two sockets)."""
    return tuple(m for m in MOTIFS if m != "bind" or BROAD_SHAPES[shape].sockets > 1)


def _local_dram(shape: Shape, socket: int) -> list[int]:
    return [i for i in shape.dram_nodes if shape.nodes[i][1] == socket]


def _resize_dram(hw: dict[str, Any], shape: Shape, nodes: list[int], target_gib: float) -> None:
    """Scale every DRAM node by one factor so that ``nodes`` hold ``target_gib`` together
    (each kept inside :data:`DRAM_GIB` of its part)."""
    held = sum(hw["nodes"][i]["capacity_gib"] for i in nodes)
    f = target_gib / held
    for i in shape.dram_nodes:
        lo, hi = DRAM_GIB[shape.nodes[i][0]]
        cap = hw["nodes"][i]["capacity_gib"] * f
        hw["nodes"][i]["capacity_gib"] = round(min(max(cap, lo), hi), 1)


def _peak_gbps(hw: Mapping[str, Any], nodes: list[int]) -> float:
    return float(sum(max(hw["nodes"][i]["read_gbps"], hw["nodes"][i]["mixed_gbps"]) for i in nodes))


def _streaming(t: dict[str, Any], rng: np.random.Generator) -> None:
    """Make tenant ``t`` (of a :data:`STREAM_KINDS` kind) a stream: no skew, no think time
    to speak of, 8 or more misses in flight (MLC, STREAM; within both kinds' ranges)."""
    t["hotness"] = {"zipf_s": 0.0}
    t["compute_ns"] = float(rng.uniform(0.0, 10.0))
    t["mlp"] = max(float(t["mlp"]), float(rng.uniform(8.0, 16.0)))


def _kind_ranges(kind: str) -> tuple[int, int, float, float]:
    """``kind``'s thread range and misses-in-flight range, each ``(lo, hi)``."""
    r = KINDS[kind]
    mlp = r["mlp"] if isinstance(r["mlp"], tuple) else (min(r["mlp"]), max(r["mlp"]))
    return int(r["threads"][0]), int(r["threads"][1]), float(mlp[0]), float(mlp[1])


def _kind_top(kind: str) -> tuple[int, float]:
    """The top of ``kind``'s thread and misses-in-flight ranges."""
    _, threads_hi, _, mlp_hi = _kind_ranges(kind)
    return threads_hi, mlp_hi


def _misses_for(t: Mapping[str, Any], peak_gbps: float, latency_ns: float, factor: float) -> float:
    """Threads x misses in flight at which ``t``'s closed-loop demand
    (``threads x mlp x 64 B / (compute + latency)``) is ``factor`` x ``peak_gbps``."""
    return factor * peak_gbps * (t["compute_ns"] + latency_ns) / 64.0


def _saturate(
    t: dict[str, Any], kind: str, peak_gbps: float, latency_ns: float, factor: float
) -> None:
    """Raise ``t``'s threads, then its misses in flight, within its kind's ranges, until its
    closed-loop demand is ``factor`` x ``peak_gbps`` (:func:`_misses_for`)."""
    threads_hi, mlp_hi = _kind_top(kind)
    need = _misses_for(t, peak_gbps, latency_ns, factor)
    t["threads"] = int(min(max(t["threads"], math.ceil(need / t["mlp"])), threads_hi))
    t["mlp"] = float(min(max(t["mlp"], need / t["threads"]), mlp_hi))


def _demand(
    t: dict[str, Any], kind: str, peak_gbps: float, latency_ns: float, factor: float
) -> None:
    """Set ``t``'s threads, then its misses in flight, within its kind's ranges, so that its
    closed-loop demand is ``factor`` x ``peak_gbps`` (up or down, unlike :func:`_saturate`)."""
    threads_lo, threads_hi, mlp_lo, mlp_hi = _kind_ranges(kind)
    need = _misses_for(t, peak_gbps, latency_ns, factor)
    t["threads"] = int(min(max(round(need / t["mlp"]), threads_lo), threads_hi))
    t["mlp"] = float(min(max(need / t["threads"], mlp_lo), mlp_hi))


def _most_demand_gbps(kind: str, compute_ns: float, latency_ns: float) -> float:
    """The largest closed-loop demand (GB/s) a tenant of ``kind`` can ask at ``compute_ns``
    and ``latency_ns``: every thread of its range at its most misses in flight."""
    threads_hi, mlp_hi = _kind_top(kind)
    return threads_hi * mlp_hi * 64.0 / (compute_ns + latency_ns)


def _shrink(t: dict[str, Any], most_gib: float) -> None:
    """Cut ``t``'s working set to at most ``most_gib``, its cgroup limits in proportion."""
    ws = t["working_set_gib"]
    if ws <= most_gib:
        return
    f = most_gib / ws
    for key in ("working_set_gib", "memory_low_gib", "memory_high_gib"):
        if key in t:
            t[key] = round(t[key] * f, 2)


def _pin(t: dict[str, Any], hw: Mapping[str, Any], node: int) -> None:
    t["cpu_node"] = hw["nodes"][node]["name"]
    t["socket"] = int(hw["nodes"][node]["socket"])


def _motif_tenants(
    motif: str,
    shape: Shape,
    hw: dict[str, Any],
    kinds: list[str],
    rng: np.random.Generator,
    episode_s: float,
    chances: Mapping[str, float],
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The situation's own tenants (placed) and the kernel options it fixes."""
    pick = lambda pool: pool[int(rng.integers(len(pool)))]  # noqa: E731
    streams = [k for k in STREAM_KINDS if k in kinds]
    bw = [k for k in BANDWIDTH_KINDS if k in kinds]
    lat = [k for k in LATENCY_KINDS if k in kinds]
    kernel: dict[str, str] = {}
    out: list[dict[str, Any]] = []
    if motif == "spill":
        cpus = list(shape.dram_nodes)
        n = min(MAX_TENANTS, max(len(cpus), int(rng.integers(1, 4))))
        for i in range(n):
            kind = pick(streams)
            t = _tenant(kind, rng, f"{kind}{i}", episode_s, i == 0, {**chances, "late": 0.0})
            _streaming(t, rng)
            _pin(t, hw, cpus[i % len(cpus)])
            out.append(t)
        total = sum(t["working_set_gib"] for t in out)
        if any(p == "a1000" or p == "cz120" for p, _ in shape.nodes):
            _resize_dram(hw, shape, shape.dram_nodes, total / float(rng.uniform(1.1, 1.6)))
        else:  # no expander: the tenants' socket's DRAM fills, the other socket takes the rest
            _resize_dram(hw, shape, _local_dram(shape, 0), total / float(rng.uniform(1.1, 1.6)))
    elif motif == "bandwidth":
        kind = "hog"  # never held out: MLC's kind
        t = _tenant(kind, rng, f"{kind}0", episode_s, True, {**chances, "phase": 0.0})
        _streaming(t, rng)
        sock = int(rng.integers(shape.sockets))
        local = _local_dram(shape, sock)
        node = local[int(rng.integers(len(local)))]
        _pin(t, hw, node)
        latency = float(hw["nodes"][node]["idle_latency_ns"])
        peak = _peak_gbps(hw, [node])
        if chances["near_peak"] > 0.0 and rng.random() < chances["near_peak"]:
            # near the peak, not past it: 0.5x to 1x (MLC on fewer cores)
            _demand(t, kind, peak, latency, float(rng.uniform(0.5, 1.0)))
        else:
            # from 1.2x the node's peak up to the most the kind can ask (MLC on every core
            # of a socket), and at least to 3x
            most = _most_demand_gbps(kind, t["compute_ns"], latency) / peak
            factor = float(rng.uniform(1.2, max(3.0, most)))
            _saturate(t, kind, peak, latency, factor)
        room = sum(hw["nodes"][i]["capacity_gib"] for i in local)
        _shrink(t, room * float(rng.uniform(0.3, 0.9)))
        first, second = rng.choice(len(MIXES), size=2, replace=False)
        t["read_fraction"] = MIXES[int(first)]
        at = round(float(rng.uniform(0.3, 0.7)) * episode_s, 1)
        t["phases"] = [{"at_s": at, "read_fraction": MIXES[int(second)]}]
        t.pop("stop_s", None)
        out.append(t)
    elif motif == "fairness":
        kind = pick(bw)
        first = _tenant(kind, rng, f"{kind}0", episode_s, True, {**chances, "stop": 0.0})
        if kind in STREAM_KINDS and rng.random() < 0.5:  # a streamer (tiering-fairness)
            _streaming(first, rng)
        sock = int(rng.integers(shape.sockets))
        local = _local_dram(shape, sock)
        _pin(first, hw, local[int(rng.integers(len(local)))])
        kind2 = pick(lat)
        late = _tenant(kind2, rng, f"{kind2}1", episode_s, False, {**chances, "late": 1.0})
        _pin(late, hw, local[int(rng.integers(len(local)))])
        _resize_dram(hw, shape, local, first["working_set_gib"] / float(rng.uniform(0.9, 1.3)))
        for t in (first, late):
            t.pop("memory_low_gib", None)
            t.pop("memory_high_gib", None)
        if rng.random() < FAIRNESS_LIMITS["latecomer_low"]:
            late["memory_low_gib"] = round(
                late["working_set_gib"] * float(rng.uniform(0.5, 1.0)), 2
            )
        if rng.random() < FAIRNESS_LIMITS["first_low"]:
            first["memory_low_gib"] = round(
                first["working_set_gib"] * float(rng.uniform(0.25, 0.5)), 2
            )
        if rng.random() < FAIRNESS_LIMITS["first_high"]:
            first["memory_high_gib"] = round(
                first["working_set_gib"] * float(rng.uniform(0.5, 0.9)), 2
            )
        limited = any(k in t for t in (first, late) for k in ("memory_low_gib", "memory_high_gib"))
        if limited and rng.random() < FAIRNESS_TIER_AWARE:
            kernel["memcg_limits"] = "tier_aware"
        out += [first, late]
    elif motif == "bind":
        sock = int(rng.integers(shape.sockets))
        other = _local_dram(shape, 1 - sock)
        local = _local_dram(shape, sock)
        bound = [hw["nodes"][i]["name"] for i in other]
        room = sum(hw["nodes"][i]["capacity_gib"] for i in other)
        n = int(rng.integers(1, 3))
        for i in range(n):
            kind = pick(streams)
            t = _tenant(kind, rng, f"{kind}{i}", episode_s, i == 0, {**chances, "late": 0.0})
            _streaming(t, rng)
            _pin(t, hw, local[i % len(local)])
            _shrink(t, room * float(rng.uniform(0.1, 0.45)))
            t.pop("grow_gib_per_s", None)
            t["mempolicy"] = {"mode": "bind", "nodes": bound}
            out.append(t)
    return out, kernel


def broad_scenario(
    shape: str,
    split: str,
    index: int,
    episode_steps: int = EPISODE_STEPS,
    chances: Mapping[str, Any] | None = None,
) -> Scenario:
    """Scenario ``index`` of a split of ``broad-<shape>``: one of the situations of
    :data:`MOTIFS` on the shape, never a kind held out on it, never a shipped scenario
    (a draw that is one is drawn again from the next stream)."""
    ch = check_chances(chances)
    if shape not in BROAD_SHAPES:
        raise ValueError(f"shape: got {shape!r}, expected one of {sorted(BROAD_SHAPES)}")
    code = _split_code(split)
    for attempt in range(16):
        sc = _broad_draw(
            shape,
            [0x6E4E, list(BROAD_SHAPES).index(shape), BROAD_STREAM, code, index, attempt],
            split,
            index,
            episode_steps,
            ch,
        )
        if content_key(sc) not in _shipped_keys():
            return sc
    raise RuntimeError(f"broad-{shape}-{split}-{index}: 16 draws were shipped scenarios")


#: The generator's seed word of the ``broad-*`` families (the ``gen-*`` and ``unseen-*`` ones
#: use 0 and the held-out cell's number there, all below it).
BROAD_STREAM = 0xB0AD


def _broad_draw(
    shape: str,
    entropy: list[int],
    split: str,
    index: int,
    episode_steps: int,
    ch: Mapping[str, float],
) -> Scenario:
    sh = BROAD_SHAPES[shape]
    rng = np.random.default_rng(entropy)
    hw = _hardware(sh, rng, entropy, ch["channels"])
    intervals, p = zip(*INTERVALS, strict=True)
    interval = float(rng.choice(intervals, p=p))
    episode_s = interval * episode_steps
    allowed = [k for k in KINDS if k not in held_out_kinds(shape)]
    options = motifs(shape)
    motif = options[int(rng.integers(len(options)))]
    tenants, kernel = _motif_tenants(motif, sh, hw, allowed, rng, episode_s, ch)
    room = MAX_TENANTS - len(tenants)
    extra = (
        int(rng.integers(1, MAX_TENANTS + 1))
        if motif == "any"
        else int(rng.integers(0, min(2, room) + 1))
    )
    for i in range(len(tenants), len(tenants) + extra):
        kind = allowed[int(rng.integers(len(allowed)))]
        t = _tenant(kind, rng, f"{kind}{i}", episode_s, i == 0, ch)
        tenants.append(t)
    _fit(tenants, hw, episode_s)
    for t in tenants:
        if "cpu_node" not in t:
            _place(t, sh, hw, rng, ch)
    limited = any("memory_low_gib" in t or "memory_high_gib" in t for t in tenants)
    if "memcg_limits" not in kernel and limited and rng.random() < ch["tier_aware"]:
        kernel["memcg_limits"] = "tier_aware"
    if len(sh.dram_nodes) > 2 and rng.random() < ch["pre_2021"]:
        kernel["fallback_lists"] = "pre-2021"
    return load_scenario(
        {
            **({"kernel": kernel} if kernel else {}),
            "name": f"{broad_family_name(shape)}-{split}-{index}",
            "description": f"generated ({motif}): {sh.what}; envs.generator",
            "interval_s": interval,
            "episode_steps": episode_steps,
            "hardware": hw,
            "tenants": tenants,
        }
    )


def content_key(sc: Scenario) -> str:
    """What a scenario is, without its names and words: machine (nodes, distances, socket
    link), tenants (every key but the name), interval and kernel options. Two scenarios with
    the same key are the same problem whatever they are called or however long they run."""
    d = sc.model_dump(mode="json", exclude={"name", "description", "episode_steps"})
    d["hardware"].pop("name", None)
    d["hardware"].pop("description", None)
    for t in d["tenants"]:
        t.pop("name", None)
    return json.dumps(d, sort_keys=True)


@cache
def _shipped_keys() -> frozenset[str]:
    """:func:`content_key` of every shipped scenario (envs/data/scenarios)."""
    return frozenset(content_key(load_scenario(n)) for n in scenario_names())


def broad_family_name(shape: str) -> str:
    """``broad-<shape>``."""
    return f"broad-{shape}"


def broad_family_names() -> list[str]:
    return [broad_family_name(s) for s in BROAD_SHAPES]


def parse_broad_name(name: str) -> str | None:
    """The shape of a ``broad-<shape>`` family name, or None for another name."""
    for s in BROAD_SHAPES:
        if name == broad_family_name(s):
            return s
    return None


def family_name(shape: str, cell: str | None = None) -> str:
    """``gen-<shape>``, or with ``cell`` (a kind held out on ``shape``) ``unseen-<shape>-<cell>``."""
    return f"gen-{shape}" if cell is None else f"unseen-{shape}-{cell}"


def generator_family_names() -> list[str]:
    return [family_name(s) for s in SHAPES]


def unseen_family_names() -> list[str]:
    return [family_name(s, k) for s, k in HELD_OUT]


#: Group names and the families they stand for.
GROUPS: dict[str, list[str]] = {
    "generator": generator_family_names(),
    "unseen": unseen_family_names(),
    "broad": broad_family_names(),
}


def parse_family_name(name: str) -> tuple[str, str | None] | None:
    """``(shape, cell)`` of a generator family name, or None for another name."""
    for s in SHAPES:
        if name == family_name(s):
            return s, None
    for s, k in HELD_OUT:
        if name == family_name(s, k):
            return s, k
    return None


def expand_family_names(names: Iterable[str]) -> list[str]:
    """``names`` with each group name replaced by its families, in order, without repeats."""
    out: list[str] = []
    for n in names:
        for f in GROUPS.get(n, [n]):
            if f not in out:
                out.append(f)
    return out


# --------------------------------------------------------------------------- coverage

#: What a scenario shows, as :func:`features` names it: the machine (``two-sockets``,
#: ``both-sockets``: tenants run on both; ``snc``: a socket with several DRAM nodes;
#: ``near-cxl``/``far-cxl``: a tenant on a socket with/without an expander;
#: ``several-cxl``), the tenants (``stream``: flat and asking more than its local DRAM's
#: peak bandwidth; ``thread-ramp``, ``rw-phase``: a phase changes its threads, its
#: read/write mix; ``bind-remote``: memory bound away from its socket's DRAM), the pressure
#: (``spill``: the tenants of a socket need more than its DRAM; ``spill-multi-dram``: so on
#: a machine of several DRAM nodes; ``latecomer``: a tenant arrives on a socket whose DRAM
#: the first tenants fill (90% or more); ``latecomer-limits``: so with a cgroup limit) and
#: the kernel (``tier-aware`` limits, ``pre-2021`` fallback lists).
FEATURES = (
    "two-sockets",
    "both-sockets",
    "snc",
    "near-cxl",
    "far-cxl",
    "several-cxl",
    "stream",
    "thread-ramp",
    "rw-phase",
    "bind-remote",
    "spill",
    "spill-multi-dram",
    "latecomer",
    "latecomer-limits",
    "tier-aware",
    "pre-2021",
)


def _tenant_socket(sc: Scenario, t: Any) -> int:
    if t.cpu_node is not None:
        return int(next(n.socket for n in sc.hardware.nodes if n.name == t.cpu_node))
    return int(t.socket)


def _is_stream(sc: Scenario, t: Any) -> bool:
    """Flat (``zipf_s`` <= 0.1) and asking more than the peak of the DRAM it allocates on
    first (its CPU node's, else its socket's): threads x mlp x 64 B / (compute + latency)."""
    hot = t.hotness.model_dump()
    if hot.get("zipf_s", 1.0) > 0.1:
        return False
    nodes = sc.hardware.nodes
    if t.cpu_node is not None:
        local = [n for n in nodes if n.name == t.cpu_node]
    else:
        local = [n for n in nodes if n.kind == "dram" and n.socket == t.socket]
    if not local:
        return False
    demand = t.threads * t.mlp * 64.0 / (t.compute_ns + min(n.idle_latency_ns for n in local))
    return bool(demand >= sum(max(n.read_gbps, n.mixed_gbps) for n in local))


def features(sc: Scenario) -> set[str]:
    """The :data:`FEATURES` scenario ``sc`` shows (from its starting parameters and phases)."""
    nodes = sc.hardware.nodes
    cxl_sockets = {n.socket for n in nodes if n.kind == "cxl"}
    dram_at: dict[int, float] = {}
    dram_nodes: dict[int, int] = {}
    for n in nodes:
        if n.kind == "dram":
            dram_at[n.socket] = dram_at.get(n.socket, 0.0) + n.capacity_gib
            dram_nodes[n.socket] = dram_nodes.get(n.socket, 0) + 1
    where = [_tenant_socket(sc, t) for t in sc.tenants]
    f: set[str] = set()
    if len({n.socket for n in nodes}) > 1:
        f.add("two-sockets")
        if len(set(where)) > 1:
            f.add("both-sockets")
    if max(dram_nodes.values()) > 1:
        f.add("snc")
    if any(s in cxl_sockets for s in where):
        f.add("near-cxl")
    if cxl_sockets and any(s not in cxl_sockets for s in where):
        f.add("far-cxl")
    if len([n for n in nodes if n.kind == "cxl"]) > 1:
        f.add("several-cxl")
    for s in set(where):
        ws = sum(t.working_set_gib for t, w in zip(sc.tenants, where, strict=True) if w == s)
        if ws > dram_at.get(s, 0.0):
            f.add("spill")
            if sum(dram_nodes.values()) > 1:
                f.add("spill-multi-dram")
    first = min(t.start_s for t in sc.tenants)
    for s in set(where):
        here = [t for t, w in zip(sc.tenants, where, strict=True) if w == s]
        early = sum(t.working_set_gib for t in here if t.start_s == first)
        if early >= 0.9 * dram_at.get(s, 0.0) and any(t.start_s > first for t in here):
            f.add("latecomer")
            if any(t.memory_low_gib > 0 or t.memory_high_gib is not None for t in here):
                f.add("latecomer-limits")
    for t, s in zip(sc.tenants, where, strict=True):
        if _is_stream(sc, t):
            f.add("stream")
        if any(p.threads is not None for p in t.phases):
            f.add("thread-ramp")
        if any(p.read_fraction is not None for p in t.phases):
            f.add("rw-phase")
        local = {n.name for n in nodes if n.kind == "dram" and n.socket == s}
        if t.mempolicy.mode == "bind" and not local & set(t.mempolicy.nodes):
            f.add("bind-remote")
    if sc.kernel is not None and sc.kernel.memcg_limits == "tier_aware":
        f.add("tier-aware")
    if sc.kernel is not None and sc.kernel.fallback_lists == "pre-2021":
        f.add("pre-2021")
    return f


def coverage(family: str, n: int, split: str = "train") -> dict[str, float]:
    """Share of the first ``n`` scenarios of a split of a generator family (``gen-*``,
    ``unseen-*``, ``broad-*``) showing each of :data:`FEATURES`."""
    broad = parse_broad_name(family)
    parsed = parse_family_name(family)
    if broad is None and parsed is None:
        raise ValueError(f"family: got {family!r}, expected a gen-*, unseen-* or broad-* name")
    counts = dict.fromkeys(FEATURES, 0)
    for i in range(n):
        if broad is not None:
            sc = broad_scenario(broad, split, i)
        else:
            shape, cell = parsed  # type: ignore[misc]
            sc = generated_scenario(shape, split, i, cell=cell)
        for k in features(sc):
            counts[k] += 1
    return {k: v / n for k, v in counts.items()}
