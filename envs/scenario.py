"""Scenarios: hardware + tenants + episode settings, validated into typed objects.

A scenario is a YAML file, a dict, or the name of a scenario shipped in
``envs/data/scenarios``. The keys of section 4 of the design brief are a
contract (scripts outside the package write them); this module adds keys but
never renames those. Every error names the field path, the bad value and what
was expected, for example::

    scenario 'kv.yaml': tenants[0].read_fraction: got 1.5, expected a number <= 1

Hardware is a preset name (``envs/data/hardware/*.yaml``), a preset with
per-node changes (``{preset: spr-a1000, nodes: {dram0: {capacity_gib: 16}}}``)
or a whole machine inline (``{nodes: [...]}``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

__all__ = [
    "HardwareSpec",
    "HotColdHotness",
    "NodeSpec",
    "PhaseSpec",
    "Scenario",
    "ScenarioError",
    "TenantSpec",
    "ZipfHotness",
    "hardware_presets",
    "load_hardware",
    "load_scenario",
    "scenario_names",
]

_DATA = resources.files("envs") / "data"


class ScenarioError(ValueError):
    """A scenario (or hardware description) that does not validate.

    The message names the source, the field path, the bad value and what was
    expected, one problem per line.
    """


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=False)


Pos = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNeg = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Frac = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]


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

    name: str = Field(min_length=1)
    kind: Literal["dram", "cxl"]
    socket: int = Field(ge=0)
    capacity_gib: Pos
    idle_latency_ns: Pos
    read_gbps: Pos
    write_gbps: Pos
    mixed_gbps: Pos
    link_read_gbps: Pos | None = None
    link_write_gbps: Pos | None = None
    queue_slope_ns: NonNeg = 0.0
    knee_ns: Pos = 10.0
    knee_exp: Pos = 1.0
    remote_latency_ns: NonNeg = 60.0
    remote_read_gbps: Pos = 1e3
    remote_write_gbps: Pos = 1e3
    remote_mixed_gbps: Pos = 1e3
    remote_queue_slope_ns: NonNeg = 0.0
    remote_knee_ns: Pos = 10.0
    remote_knee_exp: Pos = 1.0

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


class HardwareSpec(_Strict):
    """A machine: its memory nodes and a free-text description with sources."""

    name: str = "custom"
    description: str = ""
    nodes: list[NodeSpec] = Field(min_length=1)

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
        return self

    @property
    def sockets(self) -> list[int]:
        return sorted({n.socket for n in self.nodes})

    @property
    def node_names(self) -> list[str]:
        return [n.name for n in self.nodes]


class ZipfHotness(_Strict):
    """Page popularity ~ rank**-zipf_s (0 is uniform)."""

    zipf_s: NonNeg


class HotColdHotness(_Strict):
    """A hot set of ``hot_fraction`` of the pages gets ``hot_access_fraction`` of the accesses."""

    hot_fraction: Annotated[float, Field(gt=0, lt=1)]
    hot_access_fraction: Frac


Hotness = ZipfHotness | HotColdHotness
Weights = list[Annotated[int, Field(ge=0, le=255)]] | dict[str, Annotated[int, Field(ge=0, le=255)]]


class _TenantKeys(_Strict):
    """The tenant keys a phase may change (all optional here)."""

    threads: int | None = Field(default=None, ge=1)
    socket: int | None = Field(default=None, ge=0)
    mlp: Pos | None = None
    compute_ns: NonNeg | None = None
    read_fraction: Frac | None = None
    working_set_gib: Pos | None = None
    hotness: Hotness | None = None
    memory_low_gib: NonNeg | None = None
    memory_high_gib: NonNeg | None = None
    churn_per_s: NonNeg | None = None
    grow_gib_per_s: float | None = Field(default=None, allow_inf_nan=False)


class PhaseSpec(_TenantKeys):
    """From ``at_s`` on, the given tenant keys take these values."""

    at_s: NonNeg


class TenantSpec(_Strict):
    """A tenant (a cgroup running one workload). Keys of section 4 of the brief, plus:

    - ``churn_per_s``: fraction of its pages freed and allocated again per second
      (new pages follow the interleave weights in force), default 0;
    - ``grow_gib_per_s``: working-set growth while the phase lasts (a KV cache), default 0;
    - ``weights``: the interleave weights in force before the first action
      (a list in node order or a map by node name, integers 0..255; default
      local DRAM only, i.e. local-first allocation).
    """

    name: str = Field(min_length=1)
    threads: int = Field(ge=1)
    socket: int = Field(default=0, ge=0)
    mlp: Pos
    compute_ns: NonNeg
    read_fraction: Frac
    working_set_gib: Pos
    hotness: Hotness = ZipfHotness(zipf_s=0.0)
    start_s: NonNeg = 0.0
    stop_s: NonNeg | None = None
    memory_low_gib: NonNeg = 0.0
    memory_high_gib: NonNeg | None = None
    churn_per_s: NonNeg = 0.0
    grow_gib_per_s: float = Field(default=0.0, allow_inf_nan=False)
    weights: Weights | None = None
    phases: list[PhaseSpec] = Field(default_factory=list)

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


class Scenario(_Strict):
    """A complete scenario: hardware, tenants and episode settings."""

    name: str = Field(min_length=1)
    description: str = ""
    interval_s: Pos = 1.0
    episode_steps: int = Field(ge=1)
    hardware: HardwareSpec
    tenants: list[TenantSpec] = Field(min_length=1)

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
        episode_s = self.interval_s * self.episode_steps
        need = sum(peak_working_set_gib(t, episode_s) for t in self.tenants)
        # Each node keeps its min watermark free (see kernel.zone_watermarks).
        from envs.kernel import zone_watermarks

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


def _format_errors(err: ValidationError, source: str) -> str:
    lines = []
    for e in err.errors():
        path = ""
        for part in e["loc"]:
            if isinstance(part, int):
                path += f"[{part}]"
            elif part in ("ZipfHotness", "HotColdHotness", "list[...]", "dict[str,...]"):
                continue
            else:
                path += ("." if path else "") + str(part)
        msg = e["msg"]
        if e["type"] == "extra_forbidden":
            expected = "unknown key (check the spelling; see docs/scenarios.md for the keys)"
            lines.append(f"{path}: {expected}")
            continue
        if e["type"] == "missing":
            lines.append(f"{path}: missing, expected a value")
            continue
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
            lines.append(f"{path}: {msg}" if path else msg)
            continue
        expected = msg.replace("Input should be", "expected").replace("input should be", "expected")
        lines.append(f"{path}: got {e.get('input')!r}, {expected}")
    # pydantic reports one line per union member for hotness; keep them but drop exact duplicates
    seen: list[str] = []
    for ln in lines:
        if ln not in seen:
            seen.append(ln)
    return f"scenario {source}: " + (
        "\n  ".join(seen) if len(seen) == 1 else "\n  " + "\n  ".join(seen)
    )


def _read_yaml(path: Path) -> Any:
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ScenarioError(f"scenario file {str(path)!r} does not exist") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ScenarioError(f"scenario file {str(path)!r} is not valid YAML: {exc}") from None


@cache
def hardware_presets() -> dict[str, dict[str, Any]]:
    """The hardware presets shipped with the package, by name (raw mappings)."""
    out = {}
    for f in sorted((_DATA / "hardware").iterdir(), key=lambda p: p.name):
        if f.name.endswith(".yaml"):
            data = yaml.safe_load(f.read_text())
            out[data["name"]] = data
    return out


def scenario_names() -> list[str]:
    """Names of the scenarios shipped with the package."""
    return sorted(p.name[:-5] for p in (_DATA / "scenarios").iterdir() if p.name.endswith(".yaml"))


def _resolve_hardware(hw: Any, where: str) -> Any:
    presets = hardware_presets()
    if isinstance(hw, str):
        if hw not in presets:
            raise ScenarioError(
                f"{where}: unknown hardware preset {hw!r}, expected one of {sorted(presets)}"
            )
        return presets[hw]
    if isinstance(hw, Mapping) and "preset" in hw:
        name = hw["preset"]
        if name not in presets:
            raise ScenarioError(
                f"{where}.preset: unknown hardware preset {name!r}, expected one of {sorted(presets)}"
            )
        extra = sorted(set(hw) - {"preset", "nodes", "name", "description"})
        if extra:
            raise ScenarioError(
                f"{where}: unknown key(s) {extra}, expected preset, nodes, name, description"
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
            if node_name not in by_name:
                raise ScenarioError(
                    f"{where}.nodes.{node_name}: unknown node of preset {name!r}, expected one of {sorted(by_name)}"
                )
            if not isinstance(ch, Mapping):
                raise ScenarioError(
                    f"{where}.nodes.{node_name}: got {ch!r}, expected a mapping of node keys"
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
    if isinstance(spec, Scenario):
        if not overrides:
            return spec
        data: Any = spec.model_dump()
        source = repr(spec.name)
    elif isinstance(spec, Mapping):
        data = dict(spec)
        source = repr(data.get("name", "<dict>"))
    else:
        s = str(spec)
        path = Path(s)
        if s in scenario_names() and not path.exists():
            path = Path(str(_DATA / "scenarios" / f"{s}.yaml"))
        elif not (s.endswith((".yaml", ".yml")) or path.exists()):
            raise ScenarioError(
                f"unknown scenario {s!r}: expected a YAML file or one of {scenario_names()}"
            )
        data = _read_yaml(path)
        source = repr(str(spec))
    if not isinstance(data, Mapping):
        raise ScenarioError(
            f"scenario {source}: expected a mapping of keys at the top level, got {type(data).__name__}"
        )
    data = {**data, **overrides}
    if "hardware" in data:
        try:
            data["hardware"] = _resolve_hardware(data["hardware"], "hardware")
        except ScenarioError as exc:
            raise ScenarioError(f"scenario {source}: {exc}") from None
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(_format_errors(exc, source)) from None
