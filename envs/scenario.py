"""Scenarios: hardware + tenants + episode settings, validated into typed objects.

A scenario is a YAML file, a dict, or the name of a scenario shipped in
``envs/data/scenarios``. The keys of section 4 of the design brief are a
contract (scripts outside the package write them); this module adds keys but
never renames those. Every error names the field path, the bad value and what
was expected, for example::

    scenario 'kv.yaml': tenants[0].read_fraction: got 1.5, expected a number <= 1

Input is bounded to what is physical and safe to compute with (the ``MAX_*``
constants below; docs/scenarios.md, "Input limits"): files are at most 1 MiB of
UTF-8 YAML without anchors or aliases, numbers are finite and within physical
ranges, booleans are not numbers, and error messages stay short.

Hardware is a preset name (``envs/data/hardware/*.yaml``), a preset with
per-node changes (``{preset: spr-a1000, nodes: {dram0: {capacity_gib: 16}}}``)
or a whole machine inline (``{nodes: [...]}``).
"""

from __future__ import annotations

import codecs
import itertools
import math
import reprlib
import stat
from collections.abc import Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    model_validator,
)
from pydantic_core import ErrorDetails, PydanticCustomError

from envs.kernel import zone_watermarks

__all__ = [
    "CdfHotness",
    "HardwareSpec",
    "HotColdHotness",
    "MempolicySpec",
    "NodeSpec",
    "PhaseSpec",
    "Scenario",
    "ScenarioError",
    "ScenarioKernel",
    "SocketLinkSpec",
    "TenantSpec",
    "ZipfHotness",
    "hardware_presets",
    "load_hardware",
    "load_scenario",
    "scenario_names",
    "tenant_cpu_node",
]

_DATA = resources.files("envs") / "data"


class ScenarioError(ValueError):
    """A scenario (or hardware description) that does not validate.

    The message names the source, the field path, the bad value and what was
    expected, one problem per line.
    """


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=False)


# --------------------------------------------------------------------------- input limits
# Bounds on what a scenario may ask for: generous for any real machine, tight enough that
# no product or sum the model forms overflows or turns into NaN (docs/scenarios.md,
# "Input limits"). Every shipped scenario, preset and `mixed` machine is far inside them.

#: Largest scenario or preset file read (a scenario is a few KiB of YAML).
MAX_FILE_BYTES = 1 << 20
#: Deepest YAML nesting accepted (a scenario needs 7 levels: tenants.0.phases.0.hotness).
MAX_YAML_DEPTH = 32
#: Most YAML nodes (scalars, lists, mappings) in one file (a 1024-node machine needs ~25k).
MAX_YAML_NODES = 100_000
#: Longest repr of a bad value quoted in an error, and most problems listed in one error.
MAX_VALUE_REPR = 80
MAX_ERROR_LINES = 20
#: Longest quoted file or scenario name in an error.
MAX_SOURCE_REPR = 256
#: Longest line of an error message (a line quoting a long list of names is cut).
MAX_ERROR_LINE = 400

#: 1 PiB: a memory node, working set or cgroup limit beyond this is no machine built.
MAX_GIB = float(1 << 20)
#: 10 TB/s: above any memory node or link (HBM3e stacks give ~1.2 TB/s each).
MAX_GBPS = 1e4
#: 1 ms: a memory access (idle, queueing or added latency) this slow is a fault, not memory.
MAX_LATENCY_NS = 1e6
#: Exponent of the latency knee: the fits use 0.3..12; u**100 is already a step at u = 1.
MAX_KNEE_EXP = 100.0
#: Threads of one tenant: 4096, several times the hardware threads of the largest servers.
MAX_THREADS = 4096
#: Misses in flight per thread: a core's fill buffers hold tens; calibration uses 64.
MAX_MLP = 1024.0
#: CPU time between two misses of one thread: 1 s (a thread that misses less is idle).
MAX_COMPUTE_NS = 1e9
#: One environment step: at most a day of simulated time.
MAX_INTERVAL_S = 86_400.0
#: Steps per episode: 10 million (over 100 days at 1 s steps); int64 and float-exact.
MAX_EPISODE_STEPS = 10_000_000
#: A tenant's start, stop and phase times: 1e9 s (~32 years) of simulated time.
MAX_TIME_S = 1e9
#: Working-set growth (or shrinkage, negative): 1 PiB per second, i.e. any real rate.
MAX_GROW_GIB_PER_S = MAX_GIB
#: Share of a tenant's pages freed and allocated again per second (1000 = each page per ms).
MAX_CHURN_PER_S = 1e3
#: Zipf exponent: at 10 the hottest page already gets 99.9% of the accesses.
MAX_ZIPF_S = 10.0
#: Memory nodes of a machine (Linux MAX_NUMNODES at its largest NODES_SHIFT, 10) and the
#: highest socket number (every socket needs a DRAM node of its own).
MAX_NODES = 1024
MAX_SOCKET = MAX_NODES - 1
#: Names and descriptions are labels in logs and reports.
MAX_NAME_CHARS = 128
MAX_DESCRIPTION_CHARS = 4096


def _number_input(value: Any) -> Any:
    """Refuse booleans where a number is expected (pydantic's lax mode reads True as 1)."""
    if isinstance(value, bool):
        raise PydanticCustomError("bool_not_number", "Input should be a number, not a boolean")
    return value


#: Largest integer a float holds exactly; every integer bound here is far below it.
_EXACT_INT = 2**53


def _integer_input(value: Any) -> Any:
    """Refuse booleans where an integer is expected; read integral floats (1000.0) as ints.

    An integral float beyond 2**53 is refused here: it is no exact integer, and pydantic
    would report one above 2**63 as "unable to parse input string".
    """
    if isinstance(value, bool):
        raise PydanticCustomError("bool_not_integer", "Input should be an integer, not a boolean")
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        if abs(value) > _EXACT_INT:
            raise PydanticCustomError(
                "integer_too_large",
                "Input should be a much smaller integer (this one is over 2**53)",
            )
        return int(value)
    return value


_NUMBER = BeforeValidator(_number_input)
_INTEGER = BeforeValidator(_integer_input)

# Finite numbers (inf and NaN are refused everywhere: "none" is spelled null where allowed).
Pos = Annotated[float, Field(gt=0, allow_inf_nan=False), _NUMBER]
NonNeg = Annotated[float, Field(ge=0, allow_inf_nan=False), _NUMBER]
Frac = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False), _NUMBER]
GiB = Annotated[float, Field(gt=0, le=MAX_GIB, allow_inf_nan=False), _NUMBER]
GiBLimit = Annotated[float, Field(ge=0, le=MAX_GIB, allow_inf_nan=False), _NUMBER]
GiBRate = Annotated[
    float, Field(ge=-MAX_GROW_GIB_PER_S, le=MAX_GROW_GIB_PER_S, allow_inf_nan=False), _NUMBER
]
Gbps = Annotated[float, Field(gt=0, le=MAX_GBPS, allow_inf_nan=False), _NUMBER]
LatencyNs = Annotated[float, Field(gt=0, le=MAX_LATENCY_NS, allow_inf_nan=False), _NUMBER]
AddedNs = Annotated[float, Field(ge=0, le=MAX_LATENCY_NS, allow_inf_nan=False), _NUMBER]
KneeExp = Annotated[float, Field(gt=0, le=MAX_KNEE_EXP, allow_inf_nan=False), _NUMBER]
Mlp = Annotated[float, Field(gt=0, le=MAX_MLP, allow_inf_nan=False), _NUMBER]
ComputeNs = Annotated[float, Field(ge=0, le=MAX_COMPUTE_NS, allow_inf_nan=False), _NUMBER]
TimeS = Annotated[float, Field(ge=0, le=MAX_TIME_S, allow_inf_nan=False), _NUMBER]
IntervalS = Annotated[float, Field(gt=0, le=MAX_INTERVAL_S, allow_inf_nan=False), _NUMBER]
ChurnPerS = Annotated[float, Field(ge=0, le=MAX_CHURN_PER_S, allow_inf_nan=False), _NUMBER]
ZipfS = Annotated[float, Field(ge=0, le=MAX_ZIPF_S, allow_inf_nan=False), _NUMBER]
#: lines of one 4 KiB page (64 of 64 bytes) that one touch of the page reads
LinesPerOp = Annotated[float, Field(ge=1, le=64, allow_inf_nan=False), _NUMBER]
Threads = Annotated[int, Field(ge=1, le=MAX_THREADS), _INTEGER]
Socket = Annotated[int, Field(ge=0, le=MAX_SOCKET), _INTEGER]
Steps = Annotated[int, Field(ge=1, le=MAX_EPISODE_STEPS), _INTEGER]
Weight = Annotated[int, Field(ge=0, le=255), _INTEGER]
Name = Annotated[str, Field(min_length=1, max_length=MAX_NAME_CHARS)]
Description = Annotated[str, Field(max_length=MAX_DESCRIPTION_CHARS)]


class NodeSpec(_Strict):
    """One memory node (a NUMA node with memory and no CPUs, or a socket's DRAM).

    Bandwidth and latency parameters follow ``docs/model.md``: the node's own
    memory (DRAM controller, or the expander's DRAM behind its controller)
    peaks at ``read_gbps`` for reads only, ``write_gbps`` for writes only and
    ``mixed_gbps`` at a 1:1 mix; a CXL node adds a two-direction link
    (``link_read_gbps`` device-to-host, ``link_write_gbps`` host-to-device).
    Loaded latency is ``idle_latency_ns + queue_slope_ns*u + knee_ns*u**knee_exp/(1-u)``
    at the bottleneck utilisation ``u``. Access from another socket adds
    ``remote_latency_ns`` and goes through a remote path with its own peaks
    and curve.
    """

    name: Name
    kind: Literal["dram", "cxl"]
    socket: Socket
    capacity_gib: GiB
    idle_latency_ns: LatencyNs
    read_gbps: Gbps
    write_gbps: Gbps
    mixed_gbps: Gbps
    link_read_gbps: Gbps | None = None
    link_write_gbps: Gbps | None = None
    queue_slope_ns: AddedNs = 0.0
    knee_ns: LatencyNs = 10.0
    knee_exp: KneeExp = 1.0
    remote_latency_ns: AddedNs = 60.0
    remote_read_gbps: Gbps = 1e3
    remote_write_gbps: Gbps = 1e3
    remote_mixed_gbps: Gbps = 1e3
    remote_queue_slope_ns: AddedNs = 0.0
    remote_knee_ns: LatencyNs = 10.0
    remote_knee_exp: KneeExp = 1.0
    #: Whether the node has CPUs (added key): None is the usual case, a DRAM node
    #: has CPUs and a CXL node is CPU-less. Tenants run on nodes with CPUs
    #: (``cpu_node``), and the kernel's fallback lists prefer CPU-less nodes at
    #: equal distance (``find_next_best_node``).
    cpus: bool | None = None
    #: Peaks of the node's memory under random access (added keys; default: the
    #: sequential ``read_gbps`` / ``write_gbps``): a tenant with ``access: random`` uses
    #: the memory at these peaks (more row-buffer misses); the link and the remote path
    #: are unaffected. Fitted to the MLC random-access series (docs/validation.md).
    random_read_gbps: Gbps | None = None
    random_write_gbps: Gbps | None = None

    @property
    def has_cpus(self) -> bool:
        return self.kind == "dram" if self.cpus is None else self.cpus

    @model_validator(mode="after")
    def _check(self) -> NodeSpec:
        if self.kind == "cxl" and (self.link_read_gbps is None or self.link_write_gbps is None):
            raise ValueError(
                "a cxl node needs link_read_gbps and link_write_gbps (its two link directions)"
            )
        for prefix in ("", "remote_"):
            r, w, m = (getattr(self, f"{prefix}{k}_gbps") for k in ("read", "write", "mixed"))
            # The 1:1 peak cannot beat the harmonic mean by more than the turnaround
            # model allows (a negative turnaround penalty would be unphysical).
            harmonic = 1.0 / (0.5 / r + 0.5 / w)
            if m > harmonic * (1 + 1e-9):
                raise ValueError(
                    f"{prefix}mixed_gbps={m} exceeds the harmonic mean of {prefix}read_gbps and "
                    f"{prefix}write_gbps ({harmonic:.2f}); a 1:1 mix cannot be faster than that"
                )
        return self


Distance = Annotated[int, Field(ge=10, le=254), _INTEGER]


class SocketLinkSpec(_Strict):
    """The link between two sockets (UPI, xGMI), shared by every remote access.

    ``gbps`` is its bandwidth in each direction between each pair of sockets;
    a remote read's data crosses it towards the CPU's socket, a remote write's
    away from it. Loaded, it adds ``queue_slope_ns*u + knee_ns*u**knee_exp/(1-u)``
    at utilisation ``u`` of the direction the data takes (docs/model.md,
    "Topology"). The default curve is an assumption (no data isolates the link).
    """

    gbps: Gbps
    queue_slope_ns: AddedNs = 0.0
    knee_ns: LatencyNs = 10.0
    knee_exp: KneeExp = 1.0


class HardwareSpec(_Strict):
    """A machine: its memory nodes and a free-text description with sources.

    Added keys: ``distance``, the NUMA distance matrix (ACPI SLIT, as
    ``numactl -H`` prints it; default derived from socket and kind, see
    :meth:`distance_matrix`), and ``socket_link`` (default: no limit but each
    node's remote path).
    """

    name: Name = "custom"
    description: Description = ""
    nodes: list[NodeSpec] = Field(min_length=1, max_length=MAX_NODES)
    distance: list[list[Distance]] | None = None
    socket_link: SocketLinkSpec | None = None

    @model_validator(mode="after")
    def _check(self) -> HardwareSpec:
        names = [n.name for n in self.nodes]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"node names must be unique, repeated: {dup}")
        sockets = sorted({n.socket for n in self.nodes})
        for s in sockets:
            if not any(n.socket == s and n.kind == "dram" for n in self.nodes):
                raise ValueError(f"socket {s} has no dram node (each socket needs its local DRAM)")
        if self.distance is not None:
            _check_distance(self.distance, len(self.nodes))
        return self

    def distance_matrix(self) -> list[list[int]]:
        """The NUMA distances: ``distance`` when given, else derived from socket and kind.

        Derived: 10 to itself (``LOCAL_DISTANCE``); another DRAM node of the same
        socket (a sub-NUMA node, SNC/NPS) 12, as SPR SNC and EPYC NPS firmware
        report (the matrix of the 2021 fallback-list fix); a DRAM node of another
        socket 20 (``REMOTE_DISTANCE``, include/linux/topology.h); a CXL node 4
        more than a DRAM node at the same place (14 local, 24 remote: an
        assumption that keeps a socket's CXL after its DRAM and before remote
        DRAM, the fallback order the model used before distances existed).
        """
        if self.distance is not None:
            return [list(r) for r in self.distance]
        out = []
        for a in self.nodes:
            row = []
            for b in self.nodes:
                if a is b:
                    row.append(10)
                    continue
                d = 10 if a.socket == b.socket else 20
                if "cxl" in (a.kind, b.kind):
                    d += 4
                elif a.socket == b.socket:
                    d += 2
                row.append(d)
            out.append(row)
        return out

    @property
    def sockets(self) -> list[int]:
        return sorted({n.socket for n in self.nodes})

    @property
    def node_names(self) -> list[str]:
        return [n.name for n in self.nodes]


def _check_distance(dist: list[list[int]], n: int) -> None:
    """A SLIT the kernel accepts (drivers/acpi/numa/srat.c ``slit_valid``): N x N, 10 on
    the diagonal and above 10 elsewhere; symmetric, as the fallback lists and the
    model read one row per node and treat the matrix as one distance per pair."""
    if len(dist) != n:
        raise ValueError(f"distance: got {len(dist)} rows, expected one per node ({n})")
    for i, row in enumerate(dist):
        if len(row) != n:
            raise ValueError(
                f"distance[{i}]: got {len(row)} entries, expected a square matrix ({n} per row)"
            )
    for i in range(n):
        if dist[i][i] != 10:
            raise ValueError(
                f"distance[{i}][{i}]: got {dist[i][i]}, expected 10 (LOCAL_DISTANCE) on the diagonal"
            )
        for j in range(n):
            if i != j and dist[i][j] <= 10:
                raise ValueError(
                    f"distance[{i}][{j}]: got {dist[i][j]}, expected more than 10 off the diagonal"
                )
            if dist[i][j] != dist[j][i]:
                raise ValueError(
                    f"distance[{i}][{j}]: got {dist[i][j]} but distance[{j}][{i}] is {dist[j][i]}, "
                    "expected a symmetric matrix"
                )


class ZipfHotness(_Strict):
    """Page popularity ~ rank**-zipf_s (0 is uniform)."""

    zipf_s: ZipfS


class HotColdHotness(_Strict):
    """A hot set of ``hot_fraction`` of the pages gets ``hot_access_fraction`` of the accesses."""

    hot_fraction: Annotated[float, Field(gt=0, lt=1, allow_inf_nan=False), _NUMBER]
    hot_access_fraction: Frac


#: Most points of a measured access distribution (``CdfHotness``).
MAX_CDF_POINTS = 10_000


class CdfHotness(_Strict):
    """Measured page popularity: an empirical distribution of accesses over pages.

    ``cdf[i]`` is the share of the tenant's accesses that go to the hottest ``pages[i]``
    of its working set (both fractions; ``pages`` defaults to evenly spaced 0..1): it
    starts at 0, ends at 1 and is concave (pages sorted hottest first). The model reads
    it between points linearly, as it reads a Zipf exponent: for the access shares,
    promotion and reclaim (``envs.model.bucket_access_shares``).
    ``python -m calibration damon`` writes it from a DAMON record. ``cdf`` may instead
    name a YAML file (relative to the scenario file's folder) that holds ``cdf:`` and,
    optionally, ``pages:``.
    """

    cdf: list[Frac] = Field(min_length=2, max_length=MAX_CDF_POINTS)
    pages: list[Frac] | None = Field(default=None, min_length=2, max_length=MAX_CDF_POINTS)

    @model_validator(mode="before")
    @classmethod
    def _from_file(cls, data: Any, info: ValidationInfo) -> Any:
        """``cdf: FILE``: the distribution from a YAML file beside the scenario."""
        if not isinstance(data, Mapping) or not isinstance(data.get("cdf"), str):
            return data
        ctx = info.context if isinstance(info.context, Mapping) else {}
        base = Path(ctx.get("base_dir", "."))
        path = base / data["cdf"]
        try:
            loaded = _read_yaml(path)
        except ScenarioError as exc:
            raise ValueError(str(exc)) from None
        if isinstance(loaded, list):
            loaded = {"cdf": loaded}
        if not isinstance(loaded, Mapping) or set(loaded) - {"cdf", "pages"}:
            raise ValueError(
                f"cdf file {_file_name(path)}: expected a list, or a mapping with cdf: and pages:"
            )
        if "pages" in data and "pages" in loaded:
            raise ValueError("pages: given both here and in the cdf file, expected one")
        return {**loaded, **{k: v for k, v in data.items() if k != "cdf"}}

    @model_validator(mode="after")
    def _check(self) -> CdfHotness:
        c = self.cdf
        x = self.page_grid
        if len(x) != len(c):
            raise ValueError(f"pages: got {len(x)} points, expected one per cdf point ({len(c)})")
        if x[0] != 0.0 or abs(x[-1] - 1.0) > 1e-9:
            raise ValueError("pages: expected to start at 0 and end at 1 (fractions of the pages)")
        if any(b <= a for a, b in itertools.pairwise(x)):
            raise ValueError("pages: expected strictly increasing fractions")
        if c[0] != 0.0 or abs(c[-1] - 1.0) > 1e-6:
            raise ValueError(
                f"cdf: got {_short(c[0])} .. {_short(c[-1])}, expected to start at 0 and end at 1"
            )
        slope = [(c[i + 1] - c[i]) / (x[i + 1] - x[i]) for i in range(len(c) - 1)]
        for i, d in enumerate(slope):
            if c[i + 1] < c[i]:
                raise ValueError(f"cdf[{i + 1}]: got {c[i + 1]}, below cdf[{i}]; expected a cdf")
            # a rise in accesses per page beyond rounding (1e-9 of the accesses)
            if i and (d - slope[i - 1]) * (x[i + 1] - x[i]) > 1e-9 + 1e-6 * (c[i + 1] - c[i]):
                raise ValueError(
                    f"cdf[{i + 1}]: the accesses per page rise after point {i}; expected pages "
                    "sorted hottest first (a concave cdf)"
                )
        return self

    @property
    def page_grid(self) -> list[float]:
        """The page fractions of the points (``pages``, or evenly spaced 0..1)."""
        if self.pages is not None:
            return list(self.pages)
        n = len(self.cdf) - 1
        return [i / n for i in range(n + 1)]


Hotness = ZipfHotness | HotColdHotness | CdfHotness
Weights = list[Weight] | dict[str, Weight]

#: set_mempolicy(2) modes a tenant may have (mm/mempolicy.c): ``default`` (local
#: allocation, the fallback list of its CPU node), ``bind`` (MPOL_BIND: the nodes of the
#: mask nearest first, never another), ``preferred`` (MPOL_PREFERRED: one node, then that
#: node's fallback list), ``interleave`` (MPOL_INTERLEAVE: round robin over the mask) and
#: ``weighted_interleave`` (MPOL_WEIGHTED_INTERLEAVE: by the tenant's ``weights``).
MempolicyMode = Literal["default", "bind", "preferred", "interleave", "weighted_interleave"]


class MempolicySpec(_Strict):
    """A tenant's memory policy: ``{mode, nodes}`` (docs/scenarios.md, "Topology")."""

    mode: MempolicyMode = "default"
    nodes: list[Name] = Field(default_factory=list, max_length=MAX_NODES)

    @model_validator(mode="after")
    def _check(self) -> MempolicySpec:
        if self.mode == "default" and self.nodes:
            raise ValueError("nodes: the default policy takes no nodes (local allocation)")
        if self.mode == "preferred" and len(self.nodes) != 1:
            raise ValueError(f"nodes: got {len(self.nodes)} nodes, expected one for preferred")
        if self.mode not in ("default", "preferred") and not self.nodes:
            raise ValueError(f"nodes: empty, expected at least one node for {self.mode}")
        dup = sorted({n for n in self.nodes if self.nodes.count(n) > 1})
        if dup:
            raise ValueError(f"nodes: repeated {dup}, expected each node once")
        return self


#: How a tenant walks its pages: ``sequential`` (streams, the MLC default) or ``random``
#: (the node's memory then delivers its ``random_*_gbps`` peaks).
Access = Literal["sequential", "random"]


class _TenantKeys(_Strict):
    """The tenant keys a phase may change (all optional here)."""

    threads: Threads | None = None
    socket: Socket | None = None
    mlp: Mlp | None = None
    compute_ns: ComputeNs | None = None
    read_fraction: Frac | None = None
    working_set_gib: GiB | None = None
    hotness: Hotness | None = None
    memory_low_gib: GiBLimit | None = None
    memory_high_gib: GiBLimit | None = None
    churn_per_s: ChurnPerS | None = None
    grow_gib_per_s: GiBRate | None = None
    access: Access | None = None
    lines_per_op: LinesPerOp | None = None


class PhaseSpec(_TenantKeys):
    """From ``at_s`` on, the given tenant keys take these values."""

    at_s: TimeS


class TenantSpec(_Strict):
    """A tenant (a cgroup running one workload). Keys of section 4 of the brief, plus:

    - ``churn_per_s``: fraction of its pages freed and allocated again per second
      (new pages follow the interleave weights in force), default 0;
    - ``grow_gib_per_s``: working-set growth while the phase lasts (a KV cache), default 0;
    - ``weights``: the interleave weights in force before the first action
      (a list in node order or a map by node name, integers 0..255; default
      local DRAM only, i.e. local-first allocation);
    - ``cpu_node``: the node whose CPUs run its threads (default: the first node
      with CPUs on ``socket``); its socket is the tenant's socket;
    - ``mempolicy``: ``{mode, nodes}``, see :data:`MempolicyMode` (default local);
    - ``access``: ``sequential`` (default) or ``random``, see :data:`Access`;
    - ``lines_per_op``: how many of a page's 64 lines one touch of the page reads
      (1..64), which turns its line accesses into page references for reclaim's
      reference check and the hint faults (docs/validation.md, "Page references per pass").
      Default (null): 64 for a tenant that makes passes (sequential access over
      uniform hotness: a pass reads every line of a page at once), else 1 (every line
      access its own reference, the model before the key existed). A workload's
      lines per operation is rarely published: give it as a range
      (``scripts/tiering_fairness.py --lines``).
    """

    name: Name
    threads: Threads
    socket: Socket = 0
    mlp: Mlp
    compute_ns: ComputeNs
    read_fraction: Frac
    working_set_gib: GiB
    hotness: Hotness = ZipfHotness(zipf_s=0.0)
    start_s: TimeS = 0.0
    stop_s: TimeS | None = None
    memory_low_gib: GiBLimit = 0.0
    memory_high_gib: GiBLimit | None = None
    churn_per_s: ChurnPerS = 0.0
    grow_gib_per_s: GiBRate = 0.0
    access: Access = "sequential"
    lines_per_op: LinesPerOp | None = None
    weights: Weights | None = None
    phases: list[PhaseSpec] = Field(default_factory=list)
    cpu_node: Name | None = None
    mempolicy: MempolicySpec = MempolicySpec()

    @model_validator(mode="after")
    def _check(self) -> TenantSpec:
        if self.stop_s is not None and self.stop_s <= self.start_s:
            raise ValueError(f"stop_s={self.stop_s} must be after start_s={self.start_s}")
        last = -math.inf
        for i, ph in enumerate(self.phases):
            if ph.at_s < self.start_s:
                raise ValueError(
                    f"phases[{i}].at_s={ph.at_s} is before the tenant's start_s={self.start_s}"
                )
            if self.stop_s is not None and ph.at_s >= self.stop_s:
                raise ValueError(
                    f"phases[{i}].at_s={ph.at_s} is at or after the tenant's stop_s={self.stop_s}"
                )
            if ph.at_s <= last:
                raise ValueError(
                    f"phases[{i}].at_s={ph.at_s} must be later than the phase before it ({last})"
                )
            last = ph.at_s
        for i, st in enumerate(self.states()):
            hi = st["memory_high_gib"]
            if hi is not None and st["memory_low_gib"] > hi:
                where = "" if i == 0 else f" (in phases[{i - 1}])"
                raise ValueError(
                    f"memory_low_gib={st['memory_low_gib']} exceeds memory_high_gib={hi}{where}"
                )
        return self

    def states(self) -> list[dict[str, Any]]:
        """The tenant's parameters in force in each phase, the start first."""
        keys = list(_TenantKeys.model_fields)
        base = {k: getattr(self, k) for k in keys}
        base["at_s"] = self.start_s
        out = [base]
        for ph in self.phases:
            cur = dict(out[-1])
            for k in keys:
                v = getattr(ph, k)
                if v is not None:
                    cur[k] = v
            cur["at_s"] = ph.at_s
            out.append(cur)
        return out


class ScenarioKernel(_Strict):
    """Kernel options a scenario fixes, whatever the policy's kernel configuration
    (added key ``kernel``): ``fallback_lists`` ("pre-2021" or "current", see
    :func:`envs.kernel.build_fallback_lists`); ``memcg_limits`` (what
    ``memory_low_gib`` / ``memory_high_gib`` act on: "total" (Linux), "tier_aware"
    (the tier-aware memcg RFC), "dram" (TierGym before: DRAM usage only), see
    :class:`envs.model.KernelConfig`)."""

    fallback_lists: Literal["pre-2021", "current"] | None = None
    memcg_limits: Literal["total", "tier_aware", "dram"] | None = None


class Scenario(_Strict):
    """A complete scenario: hardware, tenants and episode settings."""

    name: Name
    description: Description = ""
    interval_s: IntervalS = 1.0
    episode_steps: Steps
    hardware: HardwareSpec
    tenants: list[TenantSpec] = Field(min_length=1)
    kernel: ScenarioKernel | None = None

    @model_validator(mode="before")
    @classmethod
    def _cpu_node_socket(cls, data: Any) -> Any:
        """A tenant with a ``cpu_node`` and no ``socket`` is on its CPU node's socket
        (so a dumped scenario loads again with the same values)."""
        if not isinstance(data, Mapping):
            return data
        hw, tenants = data.get("hardware"), data.get("tenants")
        nodes = hw.get("nodes") if isinstance(hw, Mapping) else getattr(hw, "nodes", None)
        if not isinstance(nodes, list) or not isinstance(tenants, list):
            return data
        where: dict[Any, Any] = {}
        for n in nodes:
            name = n.get("name") if isinstance(n, Mapping) else getattr(n, "name", None)
            sock = n.get("socket") if isinstance(n, Mapping) else getattr(n, "socket", None)
            if isinstance(name, str):
                where.setdefault(name, sock)
        out = []
        for t in tenants:
            if isinstance(t, Mapping) and "socket" not in t:
                cpu = t.get("cpu_node")
                if isinstance(cpu, str) and isinstance(where.get(cpu), int):
                    t = {**t, "socket": where[cpu]}
            out.append(t)
        return {**data, "tenants": out}

    @model_validator(mode="after")
    def _check(self) -> Scenario:
        names = [t.name for t in self.tenants]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"tenant names must be unique, repeated: {dup}")
        nodes = self.hardware.node_names
        sockets = self.hardware.sockets
        for i, t in enumerate(self.tenants):
            for j, st in enumerate(t.states()):
                if st["socket"] not in sockets:
                    where = (
                        f"tenants[{i}].socket" if j == 0 else f"tenants[{i}].phases[{j - 1}].socket"
                    )
                    raise ValueError(
                        f"{where}: got {st['socket']}, expected one of the hardware's sockets {sockets}"
                    )
            w = t.weights
            if isinstance(w, list):
                if len(w) != len(nodes):
                    raise ValueError(
                        f"tenants[{i}].weights: got {len(w)} weights, expected one per node ({len(nodes)}: {nodes})"
                    )
                if sum(w) == 0:
                    raise ValueError(
                        f"tenants[{i}].weights: all zero, expected at least one positive weight"
                    )
            elif isinstance(w, dict):
                bad = sorted(set(w) - set(nodes))
                if bad:
                    raise ValueError(
                        f"tenants[{i}].weights: unknown node(s) {bad}, expected names from {nodes}"
                    )
                if sum(w.values()) == 0:
                    raise ValueError(
                        f"tenants[{i}].weights: all zero, expected at least one positive weight"
                    )
        for i, t in enumerate(self.tenants):
            _check_topology(self, i, t)
        episode_s = self.interval_s * self.episode_steps
        need = sum(peak_working_set_gib(t, episode_s) for t in self.tenants)
        # Each node keeps its min watermark free (see kernel.zone_watermarks).

        total = sum(n.capacity_gib for n in self.hardware.nodes)
        have = sum(
            n.capacity_gib - float(zone_watermarks(n.capacity_gib, total)[0])
            for n in self.hardware.nodes
        )
        if need > have:
            raise ValueError(
                f"tenants: peak working sets add up to {need:.1f} GiB, expected at most the machine's "
                f"usable capacity {have:.1f} GiB (the model does not swap)"
            )
        return self

    @property
    def episode_s(self) -> float:
        return self.interval_s * self.episode_steps


def tenant_cpu_node(hw: HardwareSpec, t: TenantSpec, socket: int) -> int:
    """Index of the node whose CPUs run tenant ``t`` while it is on ``socket``."""
    if t.cpu_node is not None:
        return hw.node_names.index(t.cpu_node)
    for i, n in enumerate(hw.nodes):
        if n.socket == socket and n.has_cpus:
            return i
    raise ValueError(f"socket {socket} has no node with CPUs")


def _check_topology(sc: Scenario, i: int, t: TenantSpec) -> None:
    """``cpu_node`` and ``mempolicy`` of tenant ``i`` against the machine."""
    hw = sc.hardware
    names = hw.node_names
    if t.cpu_node is not None:
        if t.cpu_node not in names:
            raise ValueError(
                f"tenants[{i}].cpu_node: unknown node {_short(t.cpu_node)}, expected one of {names}"
            )
        node = hw.nodes[names.index(t.cpu_node)]
        if not node.has_cpus:
            raise ValueError(
                f"tenants[{i}].cpu_node: node {t.cpu_node!r} has no CPUs (a {node.kind} node; "
                "set cpus: true on it or name a node with CPUs)"
            )
        if "socket" in t.model_fields_set and t.socket != node.socket:
            raise ValueError(
                f"tenants[{i}].socket: got {t.socket}, but cpu_node {t.cpu_node!r} is on socket "
                f"{node.socket}; give one of them"
            )
        for j, ph in enumerate(t.phases):
            if ph.socket is not None and ph.socket != node.socket:
                raise ValueError(
                    f"tenants[{i}].phases[{j}].socket: got {ph.socket}, expected none: the "
                    f"tenant's threads are on cpu_node {t.cpu_node!r}"
                )
    else:
        for j, st in enumerate(t.states()):
            if not any(n.socket == st["socket"] and n.has_cpus for n in hw.nodes):
                where = f"tenants[{i}].socket" if j == 0 else f"tenants[{i}].phases[{j - 1}].socket"
                raise ValueError(f"{where}: socket {st['socket']} has no node with CPUs")
    pol = t.mempolicy
    bad = sorted(set(pol.nodes) - set(names))
    if bad:
        raise ValueError(
            f"tenants[{i}].mempolicy.nodes: unknown node(s) {_short(bad)}, expected names from {names}"
        )
    if pol.mode in ("bind", "interleave", "weighted_interleave") and t.weights is not None:
        w = t.weights if isinstance(t.weights, dict) else dict(zip(names, t.weights, strict=True))
        out = sorted(k for k, v in w.items() if v > 0 and k not in pol.nodes)
        if out:
            raise ValueError(
                f"tenants[{i}].weights: positive weight on {out}, outside the {pol.mode} "
                f"nodes {pol.nodes}"
            )
    if pol.mode == "bind":
        have = sum(n.capacity_gib for n in hw.nodes if n.name in pol.nodes)
        need = peak_working_set_gib(t, sc.episode_s)
        if need > have:
            raise ValueError(
                f"tenants[{i}].mempolicy.nodes: {pol.nodes} hold {have:.1f} GiB, less than the "
                f"tenant's peak working set {need:.1f} GiB (the model does not swap)"
            )


def peak_working_set_gib(t: TenantSpec, episode_s: float) -> float:
    """The largest working set a tenant reaches in an episode (growth included)."""
    states = t.states()
    peak = 0.0
    stop = episode_s if t.stop_s is None else min(t.stop_s, episode_s)
    for i, st in enumerate(states):
        end = states[i + 1]["at_s"] if i + 1 < len(states) else stop
        dur = max(0.0, min(end, stop) - st["at_s"])
        ws = st["working_set_gib"]
        peak = max(peak, ws, ws + st["grow_gib_per_s"] * dur)
    return peak


# --------------------------------------------------------------------------- loading

# Tags pydantic puts in an error's location for the member of a union it tried.
_UNION_TAGS = ("ZipfHotness", "HotColdHotness", "CdfHotness")


def _clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, the cut marked by ``...``."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _short(value: Any, limit: int = MAX_VALUE_REPR) -> str:
    """``repr(value)`` in at most ``limit`` characters, however large or deep ``value`` is.

    Error messages quote bad values with this, so a huge value (a 1 MiB string, an
    expanded alias bomb, an int of 10**5 digits) cannot make a huge message.
    """
    short = reprlib.Repr()  # cuts long strings and containers in the middle, deep ones at level 3
    short.maxlevel = 3
    short.maxstring = short.maxother = short.maxlong = limit
    try:
        text = short.repr(value)
    except Exception:  # e.g. repr of an int over 4300 digits: the error must still be told
        text = f"<{type(value).__name__}, too large to show>"
    return _clip(text, limit)


def _field_path(loc: tuple[int | str, ...]) -> str:
    """``tenants[0].hotness.zipf_s`` from a pydantic error location (union tags dropped)."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part in _UNION_TAGS or part.startswith(("list[", "dict[", "function-")):
            continue
        else:
            path += ("." if path else "") + _clip(part, MAX_VALUE_REPR)
    return path


def _error_line(e: ErrorDetails) -> str:
    """One problem of a pydantic error as ``path: got VALUE, expected ...``."""
    path = _field_path(e["loc"])
    msg = e["msg"]
    if e["type"] == "extra_forbidden":
        return f"{path}: unknown key (check the spelling; see docs/scenarios.md for the keys)"
    if e["type"] == "missing":
        return f"{path}: missing, expected a value"
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
        return f"{path}: {msg}" if path else msg
    expected = msg.replace("Input should be", "expected").replace("input should be", "expected")
    for kind in ("String", "List", "Dictionary"):  # "String should have at most 128 characters"
        expected = expected.replace(f"{kind} should have", f"expected a {kind.lower()} with")
    return f"{path}: got {_short(e.get('input'))}, {expected}"


def _format_errors(err: ValidationError, source: str) -> str:
    """A pydantic error as one line per problem, at most MAX_ERROR_LINES of them."""
    # pydantic reports one line per union member for hotness; keep them but drop exact duplicates
    lines = list(dict.fromkeys(_clip(_error_line(e), MAX_ERROR_LINE) for e in err.errors()))
    if len(lines) > MAX_ERROR_LINES:
        lines = [*lines[:MAX_ERROR_LINES], f"... and {len(lines) - MAX_ERROR_LINES} more"]
    return f"scenario {source}: " + (
        "\n  ".join(lines) if len(lines) == 1 else "\n  " + "\n  ".join(lines)
    )


def _file_name(path: Path) -> str:
    """How errors name a file: its path, quoted and cut to a readable length."""
    return _short(str(path), MAX_SOURCE_REPR)


def _exists(path: Path) -> bool:
    """``path.exists()``, False for names the OS refuses (a NUL byte, too long)."""
    try:
        return path.exists()
    except (OSError, ValueError):
        return False


def _read_text(path: Path) -> str:
    """The text of a scenario or preset file: at most MAX_FILE_BYTES, strict UTF-8.

    A UTF-8 byte-order mark is dropped. Every failure (missing, a directory,
    unreadable, too large, not UTF-8 text) is a :class:`ScenarioError` naming the file.
    """
    name = _file_name(path)
    too_large = (
        f"scenario file {name} is larger than {MAX_FILE_BYTES} bytes (1 MiB), the limit for "
        "scenario files (a scenario is a few KiB of YAML)"
    )
    try:
        info = path.stat()
    except FileNotFoundError:
        raise ScenarioError(f"scenario file {name} does not exist") from None
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ScenarioError(f"scenario file {name} cannot be read: {reason}") from None
    if stat.S_ISDIR(info.st_mode):
        raise ScenarioError(f"scenario file {name} is a directory, expected a YAML file")
    if info.st_size > MAX_FILE_BYTES:
        raise ScenarioError(too_large)
    try:
        with path.open("rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)  # a pipe or device has no size to check first
    except OSError as exc:
        raise ScenarioError(f"scenario file {name} cannot be read: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise ScenarioError(too_large)
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise ScenarioError(
            f"scenario file {name} is not UTF-8 text (it is UTF-16); save it as UTF-8"
        )
    try:
        text = data.removeprefix(codecs.BOM_UTF8).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScenarioError(
            f"scenario file {name} is not UTF-8 text (invalid byte at offset {exc.start}); "
            "save it as UTF-8"
        ) from None
    if "\x00" in text:
        raise ScenarioError(f"scenario file {name} is not UTF-8 text (it has NUL bytes: binary?)")
    return text


class _YamlLimitError(yaml.YAMLError):
    """A YAML construct that scenario files may not use, at a line of the file."""

    def __init__(self, problem: str, mark: Any) -> None:
        super().__init__(problem)
        self.problem = problem
        self.line = mark.line + 1


class _ScenarioLoader(yaml.SafeLoader):
    """PyYAML's safe loader with the limits scenario files need.

    Checked while composing, before any Python object is built: anchors and aliases
    are refused (a few hundred bytes of nested aliases expand to billions of values,
    "billion laughs"; scenarios have no use for them), and so are nesting deeper than
    MAX_YAML_DEPTH (the composer recurses once per level) and more than
    MAX_YAML_NODES nodes.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._nodes = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            raise _YamlLimitError(
                f"YAML aliases (*{_clip(str(event.anchor), MAX_VALUE_REPR)}) are not allowed in "
                "scenario files; write the value out",
                event.start_mark,
            )
        if getattr(event, "anchor", None) is not None:
            raise _YamlLimitError(
                f"YAML anchors (&{_clip(str(event.anchor), MAX_VALUE_REPR)}) are not allowed in "
                "scenario files; write the value out",
                event.start_mark,
            )
        self._nodes += 1
        if self._nodes > MAX_YAML_NODES:
            raise _YamlLimitError(
                f"more than {MAX_YAML_NODES} YAML values, the limit for scenario files",
                event.start_mark,
            )
        if self._depth >= MAX_YAML_DEPTH:
            raise _YamlLimitError(
                f"nested deeper than {MAX_YAML_DEPTH} levels, the limit for scenario files",
                event.start_mark,
            )
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_yaml_int(self, node: Any) -> Any:
        """An int, or an error at its line (Python refuses ints of over 4300 digits)."""
        try:
            return super().construct_yaml_int(node)
        except ValueError as exc:
            raise _YamlLimitError(f"integer not readable: {exc}", node.start_mark) from None


_ScenarioLoader.add_constructor("tag:yaml.org,2002:int", _ScenarioLoader.construct_yaml_int)


def _read_yaml(path: Path) -> Any:
    """The data of a scenario or preset YAML file, read within the input limits."""
    name = _file_name(path)
    loader = _ScenarioLoader(_read_text(path))
    loader.name = path.name  # PyYAML's own messages say 'in "<name>", line N'
    try:
        return loader.get_single_data()
    except _YamlLimitError as exc:
        raise ScenarioError(f"scenario file {name}, line {exc.line}: {exc.problem}") from None
    except yaml.YAMLError as exc:
        detail = _clip(str(exc), MAX_ERROR_LINE * 2)
        raise ScenarioError(f"scenario file {name} is not valid YAML: {detail}") from None
    finally:
        loader.dispose()


@cache
def hardware_presets() -> dict[str, dict[str, Any]]:
    """The hardware presets shipped with the package, by name (raw mappings)."""
    out = {}
    for f in sorted((_DATA / "hardware").iterdir(), key=lambda p: p.name):
        if f.name.endswith(".yaml"):
            data = _read_yaml(Path(str(f)))
            out[data["name"]] = data
    return out


def scenario_names() -> list[str]:
    """Names of the scenarios shipped with the package."""
    return sorted(p.name[:-5] for p in (_DATA / "scenarios").iterdir() if p.name.endswith(".yaml"))


def _resolve_hardware(hw: Any, where: str, base_dir: Path | None = None) -> Any:
    """A scenario's ``hardware``: a preset's name, a YAML file of a machine (``python -m
    calibration probe`` writes one; read relative to ``base_dir``, the scenario's folder),
    a preset with node changes, or a machine's mapping."""
    presets = hardware_presets()
    if isinstance(hw, str) and hw not in presets and hw.endswith((".yaml", ".yml")):
        path = Path(hw) if Path(hw).is_absolute() else (base_dir or Path(".")) / hw
        if not _exists(path):
            raise ScenarioError(f"{where}: hardware file {_short(str(path))} does not exist")
        data = _read_yaml(path)
        if not isinstance(data, Mapping) or isinstance(data.get("preset"), Mapping):
            raise ScenarioError(
                f"{where}: hardware file {_short(str(path))}: expected a mapping of a machine "
                "(name, nodes, ...)"
            )
        return _resolve_hardware(data, where)
    if isinstance(hw, str):
        if hw not in presets:
            raise ScenarioError(
                f"{where}: unknown hardware preset {_short(hw)}, expected one of {sorted(presets)} "
                "or a YAML file of a machine"
            )
        return presets[hw]
    if isinstance(hw, Mapping) and "preset" in hw:
        name = hw["preset"]
        if not isinstance(name, str) or name not in presets:
            raise ScenarioError(
                f"{where}.preset: unknown hardware preset {_short(name)}, expected one of {sorted(presets)}"
            )
        extra = sorted(str(k) for k in set(hw) - {"preset", "nodes", "name", "description"})
        if extra:
            raise ScenarioError(
                f"{where}: unknown key(s) {_short(extra)}, expected preset, nodes, name, description"
            )
        base = {k: v for k, v in presets[name].items()}
        base["nodes"] = [dict(n) for n in base["nodes"]]
        changes = hw.get("nodes") or {}
        if not isinstance(changes, Mapping):
            raise ScenarioError(
                f"{where}.nodes: got {type(changes).__name__}, expected a mapping NODE_NAME -> {{key: value}}"
            )
        by_name = {n["name"]: n for n in base["nodes"]}
        for node_name, ch in changes.items():
            node = _clip(str(node_name), MAX_VALUE_REPR)
            if node_name not in by_name:
                raise ScenarioError(
                    f"{where}.nodes.{node}: unknown node of preset {name!r}, expected one of {sorted(by_name)}"
                )
            if not isinstance(ch, Mapping):
                raise ScenarioError(
                    f"{where}.nodes.{node}: got {_short(ch)}, expected a mapping of node keys"
                )
            by_name[node_name].update(ch)
        base["name"] = hw.get("name", f"{name}*" if changes else name)
        if "description" in hw:
            base["description"] = hw["description"]
        return base
    return hw


def load_hardware(spec: str | Mapping[str, Any]) -> HardwareSpec:
    """A hardware preset by name, a preset with changes, or an inline machine."""
    raw = _resolve_hardware(spec, "hardware")
    try:
        return HardwareSpec.model_validate(raw)
    except ValidationError as exc:
        raise ScenarioError(
            _format_errors(exc, "hardware").replace("scenario hardware: ", "hardware: ")
        ) from None


def load_scenario(spec: str | Path | Mapping[str, Any] | Scenario, **overrides: Any) -> Scenario:
    """Load and validate a scenario.

    ``spec`` is a :class:`Scenario`, a mapping, a path to a YAML file, or the
    name of a shipped scenario (see :func:`scenario_names`). Keyword
    ``overrides`` replace top-level keys (e.g. ``episode_steps=50``).
    """
    base_dir = Path(".")
    if isinstance(spec, Scenario):
        if not overrides:
            return spec
        data: Any = spec.model_dump()
        source = _short(spec.name, MAX_SOURCE_REPR)
    elif isinstance(spec, Mapping):
        data = dict(spec)
        name = data.get("name")
        source = _short(name if isinstance(name, str) else "<dict>", MAX_SOURCE_REPR)
    else:
        s = str(spec)
        path = Path(s)
        if s in scenario_names() and not _exists(path):
            path = Path(str(_DATA / "scenarios" / f"{s}.yaml"))
        elif not (s.endswith((".yaml", ".yml")) or _exists(path)):
            raise ScenarioError(
                f"unknown scenario {_short(s, MAX_SOURCE_REPR)}: expected a YAML file or one of "
                f"{scenario_names()}"
            )
        data = _read_yaml(path)
        base_dir = path.parent
        source = _short(s, MAX_SOURCE_REPR)
    if not isinstance(data, Mapping):
        raise ScenarioError(
            f"scenario {source}: expected a mapping of keys at the top level, got {type(data).__name__}"
        )
    data = {**data, **overrides}
    if "hardware" in data:
        try:
            data["hardware"] = _resolve_hardware(data["hardware"], "hardware", base_dir)
        except ScenarioError as exc:
            raise ScenarioError(f"scenario {source}: {exc}") from None
    try:
        # a file a scenario names (a hotness cdf) is read relative to the scenario's folder
        return Scenario.model_validate(data, context={"base_dir": str(base_dir)})
    except ValidationError as exc:
        raise ScenarioError(_format_errors(exc, source)) from None
