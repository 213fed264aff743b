"""Scenario families: where each environment instance draws its scenario from.

A family hands out scenarios by ``(split, index)``; all of them share one node
layout, so a batch of instances can mix them. Each episode an instance picks
an index in the split's pool from its episode seed, and the pool's scenarios
are compiled once (so an autoreset copies rows instead of compiling).

- A fixed scenario is a family of one.
- ``mixed`` generates random multi-tenant machines on ``spr-a1000``: 1 to
  ``max_tenants`` tenants drawn from the library's tenant types (LLM
  inference, key-value store, analytics scan, bandwidth hog, latency-sensitive
  service), with random sizes, intensities, arrivals, departures and phases,
  and a random DRAM size (a cgroup's or a smaller box's share of the node).
  The ``train`` split uses even generator seeds and ``test`` odd ones, so the
  two never share a machine; ``val`` draws from a stream of its own (the same
  seeds under a ``spawn_key``: :data:`VAL_SPAWN_KEY`), disjoint from both.
  ``mixed-2s`` and ``mixed-4cxl`` are its tenants on two other presets.
- ``gen-<shape>`` and ``unseen-<shape>-<kind>`` come from the scenario generator
  (:mod:`envs.generator`): eight machine shapes, eight tenant kinds, and six held-out
  (shape, kind) cells that the ``gen-*`` families never draw. ``broad-<shape>`` draws the
  situations the shipped scenarios show (spill over several CPU nodes, a saturating
  stream changing its mix, a latecomer under cgroup limits, memory bound to the other
  socket) on each shape, without the held-out cells and never a shipped scenario.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from envs import generator
from envs.model import KernelConfig, Params, compile_params
from envs.scenario import Scenario, ScenarioError, load_scenario, scenario_names

__all__ = [
    "FAMILY_NAMES",
    "REPORT_SPLIT",
    "SELECT_SPLIT",
    "SPLITS",
    "ScenarioFamily",
    "make_family",
    "mixed_scenario",
]

#: A family's splits: ``train`` for learning, ``val`` for every choice made while training
#: (checkpoints, recipe settings, ablations, sweeps), ``test`` for reports only
#: (docs/training.md, "Splits: train, val, test"). Their scenarios are drawn from disjoint
#: random streams; ``train`` and ``test`` are what they were before ``val`` existed.
SPLITS = ("train", "val", "test")
#: The ``spawn_key`` of the ``val`` split's seed sequences (``mixed*`` and the generator):
#: a child stream of each seed, which no ``train`` or ``test`` seed (no spawn key) yields.
VAL_SPAWN_KEY = (0x7A1,)
#: The split a training run's choices read (its periodic evaluations, a sweep's objective).
SELECT_SPLIT = "val"
#: The split results are reported on (evaluate.py, train.py's closing comparison).
REPORT_SPLIT = "test"


class ScenarioFamily:
    """Scenarios by split and index, compiled into pools on first use."""

    def __init__(
        self,
        name: str,
        generate: Callable[[str, int], Scenario],
        pool_size: int,
        max_tenants: int,
        max_phases: int,
    ) -> None:
        self.name = name
        self._generate = generate
        self.pool_size = pool_size
        self.max_tenants = max_tenants
        self.max_phases = max_phases
        self._pools: dict[tuple[str, int, KernelConfig, float], Params] = {}

    def scenario(self, split: str, index: int) -> Scenario:
        if split not in SPLITS:
            raise ValueError(f"split: got {split!r}, expected one of {SPLITS}")
        return self._generate(split, index)

    @cached_property
    def node_names(self) -> list[str]:
        return self.scenario("train", 0).hardware.node_names

    def pool(self, split: str, n_tenants: int, kernel: KernelConfig, jitter: float) -> Params:
        """The split's scenarios compiled with ``n_tenants`` slots (cached)."""
        key = (split, n_tenants, kernel, jitter)
        if key not in self._pools:
            scs = [self.scenario(split, i) for i in range(self.pool_size)]
            self._pools[key] = compile_params(
                scs, n_tenants=n_tenants, n_phases=self.max_phases, kernel=kernel, jitter=jitter
            )
        return self._pools[key]


def _fixed(sc: Scenario) -> ScenarioFamily:
    return ScenarioFamily(
        name=sc.name,
        generate=lambda split, index: sc,
        pool_size=1,
        max_tenants=len(sc.tenants),
        max_phases=max(1 + len(t.phases) for t in sc.tenants),
    )


# --------------------------------------------------------------------------- the mixed generator

MIXED_MAX_TENANTS = 4
MIXED_MAX_PHASES = 3


def _tenant(kind: str, rng: np.random.Generator, name: str, episode_s: float) -> dict[str, Any]:
    """One tenant of a type from the scenario library, with randomised size and intensity."""
    u = rng.uniform
    if kind == "llm":  # CPU LLM inference: streams weights, KV cache grows, threads ramp
        t0 = int(rng.integers(8, 24))
        d: dict[str, Any] = {
            "threads": t0,
            "mlp": 4.0,
            "compute_ns": u(70, 130),
            "read_fraction": 0.95,
            "working_set_gib": u(3, 14),
            "hotness": {"zipf_s": 0.0},
            "grow_gib_per_s": u(0.0, 0.05),
            "phases": [
                {"at_s": round(episode_s * f, 1), "threads": int(t0 * m)}
                for f, m in ((0.35, 2), (0.7, 3))
            ],
        }
    elif kind == "kv":  # YCSB-like key-value store: Zipfian keys, latency-bound
        d = {
            "threads": int(rng.integers(4, 24)),
            "mlp": u(1.0, 3.0),
            "compute_ns": u(80, 300),
            "read_fraction": u(0.5, 0.95),
            "working_set_gib": u(8, 48),
            "hotness": {"zipf_s": u(0.8, 1.2)},
            "churn_per_s": u(0.0, 0.02),
        }
    elif kind == "scan":  # analytics scan: poor locality, bandwidth-heavy
        d = {
            "threads": int(rng.integers(8, 32)),
            "mlp": u(4, 10),
            "compute_ns": u(40, 120),
            "read_fraction": u(0.8, 0.98),
            "working_set_gib": u(16, 64),
            "hotness": {"zipf_s": u(0.0, 0.3)},
            "churn_per_s": u(0.0, 0.05),
        }
    elif kind == "hog":  # bandwidth hog (MLC / STREAM-like)
        d = {
            "threads": int(rng.integers(8, 48)),
            "mlp": u(6, 12),
            "compute_ns": u(5, 40),
            "read_fraction": float(rng.choice([0.5, 0.67, 0.75, 1.0])),
            "working_set_gib": u(4, 32),
            "hotness": {"zipf_s": 0.0},
        }
    else:  # latency-sensitive service: small, hot, few misses in flight
        d = {
            "threads": int(rng.integers(2, 12)),
            "mlp": u(1.0, 1.5),
            "compute_ns": u(30, 200),
            "read_fraction": u(0.7, 0.95),
            "working_set_gib": u(1, 8),
            "hotness": {"hot_fraction": u(0.05, 0.3), "hot_access_fraction": u(0.8, 0.95)},
        }
    d["name"] = name
    d["working_set_gib"] = round(float(d["working_set_gib"]), 2)
    if kind != "llm" and rng.random() < 0.3:  # a phase change of intensity
        d["phases"] = [
            {
                "at_s": round(float(u(0.3, 0.8)) * episode_s, 1),
                "compute_ns": float(d["compute_ns"]) * float(u(0.5, 2.0)),
            }
        ]
    return d


#: The machine-shape variants of ``mixed``: family name -> hardware preset. ``mixed`` itself
#: is unchanged; the others draw the DRAM from 8 to 96 GiB (kv-store's 8 GiB included),
#: the interval from 1 or 2 s (kv-store's 2 s), and on two sockets each tenant's socket.
MIXED_SHAPES = {"mixed": "spr-a1000", "mixed-2s": "spr-a1000-2s", "mixed-4cxl": "spr-4cxl"}


def mixed_scenario(
    split: str,
    index: int,
    max_tenants: int = MIXED_MAX_TENANTS,
    episode_steps: int = 100,
    family: str = "mixed",
) -> Scenario:
    """Random machine number ``index`` of a split (train: even seeds, test: odd seeds, val:
    seed ``index`` under :data:`VAL_SPAWN_KEY`)."""
    if split not in SPLITS:
        raise ValueError(f"split: got {split!r}, expected one of {SPLITS}")
    seed = index if split == "val" else 2 * index + (0 if split == "train" else 1)
    if family != "mixed":  # a variant draws its own machines
        seed += 1_000_003 * (1 + list(MIXED_SHAPES).index(family))
    if split == "val":
        rng = np.random.default_rng(np.random.SeedSequence([0x7E1E, seed], spawn_key=VAL_SPAWN_KEY))
    else:
        rng = np.random.default_rng([0x7E1E, seed])
    n = int(rng.integers(1, max_tenants + 1))
    kinds = rng.choice(["llm", "kv", "scan", "hog", "latency"], size=n)
    interval = 1.0 if family == "mixed" else float(rng.choice([1.0, 2.0]))
    episode_s = float(episode_steps) * interval
    tenants = []
    for i, k in enumerate(kinds):
        t = _tenant(str(k), rng, f"{k}{i}", episode_s)
        if i > 0 and rng.random() < 0.5:  # a late arrival
            start = round(float(rng.uniform(0.1, 0.5)) * episode_s, 1)
            t["start_s"] = start
            for ph in t.get("phases", []):
                ph["at_s"] = max(ph["at_s"], start + 1.0)
        if rng.random() < 0.15:  # an early departure
            t["stop_s"] = round(float(rng.uniform(0.6, 0.95)) * episode_s, 1)
            t["phases"] = [ph for ph in t.get("phases", []) if ph["at_s"] < t["stop_s"]]
        tenants.append(t)
    if family == "mixed":
        dram = round(float(rng.uniform(16, 96)), 1)
    else:
        dram = round(float(rng.uniform(8, 96)), 1)
    nodes: dict[str, Any] = {"dram0": {"capacity_gib": dram}}
    if family == "mixed-2s":
        nodes["dram1"] = {"capacity_gib": dram}
        for t in tenants:
            t["socket"] = int(rng.integers(0, 2))
    return load_scenario(
        {
            "name": f"{family}-{split}-{index}",
            "description": "random multi-tenant machine from envs.families.mixed_scenario",
            "interval_s": interval,
            "episode_steps": episode_steps,
            "hardware": {"preset": MIXED_SHAPES[family], "nodes": nodes},
            "tenants": tenants,
        }
    )


FAMILY_NAMES = (
    *MIXED_SHAPES,
    *generator.generator_family_names(),
    *generator.unseen_family_names(),
    *generator.broad_family_names(),
)


@lru_cache(maxsize=32)
def _named_family(
    name: str, pool_size: int, chances: tuple[tuple[str, float], ...] = ()
) -> ScenarioFamily:
    """One object per (family, pool size, chances), so every env shares its compiled pools."""
    broad = generator.parse_broad_name(name)
    if broad is not None:
        drawn_broad = dict(chances)
        return ScenarioFamily(
            name,
            lambda split, index: generator.broad_scenario(broad, split, index, chances=drawn_broad),
            pool_size,
            generator.MAX_TENANTS,
            generator.MAX_PHASES,
        )
    parsed = generator.parse_family_name(name)
    if parsed is not None:
        shape, cell = parsed
        drawn = dict(chances)
        return ScenarioFamily(
            name,
            lambda split, index: generator.generated_scenario(
                shape, split, index, cell=cell, chances=drawn
            ),
            pool_size,
            generator.MAX_TENANTS,
            generator.MAX_PHASES,
        )
    return ScenarioFamily(
        name,
        lambda split, index: mixed_scenario(split, index, family=name),
        pool_size,
        MIXED_MAX_TENANTS,
        MIXED_MAX_PHASES,
    )


def _draws_chances(name: str) -> bool:
    """Whether family ``name`` is the generator's (``gen-*``, ``unseen-*``, ``broad-*``)."""
    return (
        generator.parse_family_name(name) is not None
        or generator.parse_broad_name(name) is not None
    )


def make_family(
    spec: str | Path | Mapping[str, Any] | Scenario | ScenarioFamily,
    pool_size: int = 512,
    generator_chances: Mapping[str, Any] | None = None,
) -> ScenarioFamily:
    """A family from a family name, a scenario (name, file, dict) or a family.

    ``generator_chances`` (entries of :data:`envs.generator.CHANCES`) draws a generator
    family (``gen-*``, ``unseen-*``, ``broad-*``) with other chances; other families and scenarios
    do not draw them and ignore it (a ValueError for a bad entry all the same).
    """
    chances = generator.check_chances(generator_chances)
    if isinstance(spec, ScenarioFamily):
        return spec
    if isinstance(spec, str) and spec in FAMILY_NAMES:
        changed = tuple((k, v) for k, v in chances.items() if v != generator.CHANCES[k])
        drawn = changed if _draws_chances(spec) else ()
        return _named_family(spec, pool_size, drawn)
    try:
        sc = load_scenario(spec)
    except ScenarioError as exc:
        if (
            isinstance(spec, str)
            and not spec.endswith((".yaml", ".yml"))
            and not Path(spec).exists()
        ):
            raise ScenarioError(
                f"unknown scenario {spec!r}: expected a YAML file, a scenario {scenario_names()} "
                f"or a family {list(FAMILY_NAMES)}"
                + (
                    f" (group {spec!r}: list it where families are listed, not as one scenario)"
                    if spec in generator.GROUPS
                    else ""
                )
            ) from None
        raise exc
    return _fixed(sc)
