"""The catalogue of policies: every named policy declared once, with what it is.

Every list of policies the project uses is a query of :data:`CATALOGUE`
(:func:`names`): the heuristics a learned policy is measured against, the candidates of
the best-heuristic oracle, ``evaluate.py``'s default set, the upper bounds of
``train.py``'s closing table, the heuristics that may drive the paired reward's twins.
Order only decides how tables list them; nothing depends on it.

An entry names its factory as ``"module:attribute"`` (as Gymnasium's registry names
entry points) and the factory is imported when the policy is built
(:func:`factory`), so the table can hold evaluation's references (``static-best``,
``best-heuristic-per-episode``, implemented in :mod:`agents` because they run rollouts)
without the layers importing upwards. Learned policies are run folders, not names; their
kind is ``"learned"``.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from typing import Any, Literal

__all__ = [
    "CATALOGUE",
    "KINDS",
    "PolicyEntry",
    "entry",
    "factory",
    "names",
    "register",
]

#: What a policy is: a kernel-style ``heuristic`` (deployable, with its published source),
#: a ``lower-bound`` (random actions), an ``upper-bound`` (it knows what no kernel can:
#: the episode's future, or every policy's result in hindsight), or ``learned`` (a trained
#: run folder; never a catalogue name).
Kind = Literal["heuristic", "lower-bound", "upper-bound", "learned"]
KINDS: tuple[str, ...] = ("heuristic", "lower-bound", "upper-bound", "learned")


@dataclasses.dataclass(frozen=True)
class PolicyEntry:
    """One policy of the catalogue."""

    name: str
    kind: Kind
    factory: str  # "module:attribute", a callable taking the policy's keyword arguments
    source: str  # where its algorithm comes from (a paper, a kernel interface)
    #: decides from what a running host can observe (nothing from the future, no hindsight)
    deployable: bool
    #: in ``evaluate.py``'s default set of policies
    compared: bool = True
    #: an upper bound in ``train.py``'s closing table (cheap enough to run after training)
    closing: bool = False
    #: how an upper bound knows more than a kernel: ``clairvoyant`` (it replays the episode
    #: from its seed) or ``hindsight`` (it picks among finished episodes' results)
    bound: Literal["clairvoyant", "hindsight"] | None = None

    @property
    def module(self) -> str:
        return self.factory.split(":", 1)[0]

    @property
    def reward_baseline(self) -> bool:
        """Whether it can drive the paired reward's twins: it decides step by step from what
        it observes, beside the agent (every deployable policy of :mod:`baselines`)."""
        return self.deployable and self.module.startswith("baselines.")


def _heuristic(
    name: str, attr: str, source: str, module: str = "baselines.policies"
) -> PolicyEntry:
    return PolicyEntry(name, "heuristic", f"{module}:{attr}", source, deployable=True)


#: Every named policy, in the order tables list them.
CATALOGUE: list[PolicyEntry] = [
    _heuristic(
        "dram-first",
        "LocalFirst",
        "Linux default (MPOL_LOCAL): the local node, then its fallback list",
    ),
    _heuristic("interleave", "Interleave", "Linux MPOL_INTERLEAVE: round robin over the nodes"),
    _heuristic(
        "weighted-interleave",
        "WeightedInterleave",
        "Linux MPOL_WEIGHTED_INTERLEAVE (6.9+) with its auto weights from HMAT/CDAT bandwidth",
    ),
    _heuristic(
        "numa-tiering",
        "NumaTiering",
        "Linux NUMA balancing, memory-tiering mode (numa_balancing=2)",
    ),
    _heuristic("tpp", "TPP", "TPP (ASPLOS'23): proactive demotion, active-only promotion"),
    _heuristic(
        "memcg-fair",
        "MemcgFair",
        "per-cgroup tiering fairness RFC (2024): memory.low protects DRAM",
    ),
    _heuristic(
        "colloid", "ColloidPolicy", "Colloid (SOSP'24): balance the tiers' loaded latencies"
    ),
    _heuristic(
        "caption", "CaptionPolicy", "Caption (MICRO'23): hill-climb the DRAM:CXL interleave ratio"
    ),
    _heuristic(
        "damon-tiering", "DamonTiering", "DAMON auto-tuned tiering (Linux 6.16): DAMOS quota goals"
    ),
    _heuristic(
        "bw-aware-interleave",
        "BandwidthAwareInterleave",
        "bandwidth-aware interleave: CXL share for the demand above DRAM's bandwidth",
    ),
    PolicyEntry(
        "static-best",
        "upper-bound",
        "agents.static_best:StaticBest",
        "the best fixed weights and rate, searched on the evaluated episodes",
        deployable=False,
        bound="hindsight",
    ),
    PolicyEntry(
        "best-heuristic-per-episode",
        "upper-bound",
        "agents.oracles:BestHeuristicPerEpisode",
        "per episode, the best heuristic's record (an oracle over the heuristics)",
        deployable=False,
        closing=True,
        bound="hindsight",
    ),
    PolicyEntry(
        "random",
        "lower-bound",
        "baselines.policies:RandomPolicy",
        "uniform random actions",
        deployable=True,
    ),
    PolicyEntry(
        "planner",
        "upper-bound",
        "baselines.planner:Planner",
        "CEM search of each episode's actions on the model, replaying it from its seed",
        deployable=False,
        closing=True,
        bound="clairvoyant",
    ),
]


def names(
    kind: str | None = None,
    *,
    deployable: bool | None = None,
    compared: bool | None = None,
    closing: bool | None = None,
    reward_baseline: bool | None = None,
    module: str | None = None,
) -> list[str]:
    """The names of the entries that match every condition given (``None``: any)."""
    if kind is not None and kind not in KINDS:
        raise ValueError(f"policy kind: got {kind!r}, expected one of {list(KINDS)}")
    out = []
    for e in CATALOGUE:
        if kind is not None and e.kind != kind:
            continue
        if deployable is not None and e.deployable != deployable:
            continue
        if compared is not None and e.compared != compared:
            continue
        if closing is not None and e.closing != closing:
            continue
        if reward_baseline is not None and e.reward_baseline != reward_baseline:
            continue
        if module is not None and not e.module.startswith(module):
            continue
        out.append(e.name)
    return out


def entry(name: str) -> PolicyEntry:
    """The entry named ``name``, or a ValueError listing the names."""
    for e in CATALOGUE:
        if e.name == name:
            return e
    raise ValueError(f"unknown policy {name!r}: expected one of {names()}")


def factory(name: str) -> Callable[..., Any]:
    """The callable that builds policy ``name`` (its module imported now)."""
    module, attr = entry(name).factory.split(":", 1)
    built: Callable[..., Any] = getattr(importlib.import_module(module), attr)
    return built


def register(e: PolicyEntry) -> None:
    """Add a policy of another package to the catalogue (a plugin's heuristics).

    Raises:
        ValueError: the name is taken, or the factory is not ``module:attribute``.
    """
    if any(x.name == e.name for x in CATALOGUE) or e.name.startswith("static:"):
        raise ValueError(f"policy name {e.name!r} is already registered")
    if e.factory.count(":") != 1 or e.kind not in KINDS:
        raise ValueError(
            f"policy {e.name!r}: expected factory 'module:attribute' and a kind of {list(KINDS)}"
        )
    CATALOGUE.append(e)
