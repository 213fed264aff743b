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
    "STATIC_HOST",
    "HostRole",
    "PolicyEntry",
    "entry",
    "factory",
    "host_role",
    "names",
    "register",
]

#: What a policy is: a kernel-style ``heuristic`` (deployable, with its published source),
#: a ``selector`` (deployable: it picks among the heuristics online from what it measures,
#: never a single heuristic itself), a ``lower-bound`` (random actions), an ``upper-bound``
#: (it knows what no kernel can: the episode's future, every policy's result in hindsight,
#: or the simulated machine's exact state), or ``learned`` (a trained run folder; never a
#: catalogue name).
Kind = Literal["heuristic", "selector", "lower-bound", "upper-bound", "learned"]
KINDS: tuple[str, ...] = ("heuristic", "selector", "lower-bound", "upper-bound", "learned")


@dataclasses.dataclass(frozen=True)
class HostRole:
    """How a policy runs on a real host (``deploy.py``): the counters it reads, the knobs it
    sets, how it maps.

    ``inputs`` are names of :data:`envs.host.INPUTS`, ``knobs`` kinds of
    :data:`envs.host.KNOBS`; ``how`` says in one sentence what it writes and what of the
    simulated policy a host cannot do; ``refused`` (not ``None``) is why it cannot run on
    a host at all. ``fallback`` is the role to use when the host lacks one of ``knobs``
    (``weighted-interleave`` without the auto switch computes the weights from HMAT).
    """

    inputs: tuple[str, ...] = ()
    knobs: tuple[str, ...] = ()
    how: str = ""
    refused: str | None = None
    fallback: HostRole | None = None


_TIERING = ("promote_rate", "numa_balancing", "demotion")
_STATIC = ("weights", "numa_balancing", "demotion")


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
    #: from its seed), ``hindsight`` (it picks among finished episodes' results) or ``model``
    #: (it searches on the calibrated model from the exact present state of the simulated
    #: machine, with the tenants running now: causal, but no host exposes that state)
    bound: Literal["clairvoyant", "hindsight", "model"] | None = None
    #: how it runs on a real host (``deploy.py``), or why it cannot
    host: HostRole = HostRole(refused="not declared for a host")

    @property
    def module(self) -> str:
        return self.factory.split(":", 1)[0]

    @property
    def reward_baseline(self) -> bool:
        """Whether it can drive the paired reward's twins: it decides step by step from what
        it observes, beside the agent (every deployable policy of :mod:`baselines`)."""
        return self.deployable and self.module.startswith("baselines.")


def _heuristic(name: str, attr: str, source: str, host: HostRole) -> PolicyEntry:
    return PolicyEntry(
        name, "heuristic", f"baselines.policies:{attr}", source, deployable=True, host=host
    )


# How a policy runs on a host, common to all: a heuristic is bound with global weights (one
# weight row; no mainline interface sets another process's interleave weights), so each
# reduces its per-tenant decision in its own global form (``bw-aware-interleave``: the CXL
# share of the machine's traffic). A weight of 0 (a node left out of the interleave) cannot
# be written: it becomes 1, the kernel's minimum, and the other weights are scaled by
# ``255 // max`` (``static:1:0`` is 255:1); all-zero weights (local-first) leave the weights
# as they are. The promotion rate maps to NUMA balancing's tiering bit (2) and
# ``numa_balancing_promote_rate_limit_MBps``: rate 0 clears the bit (the normal-balancing bit
# 1 is kept as found), a rate > 0 sets it and writes the rate. ``KernelConfig.demotion`` is
# ``demotion_enabled``. The weights act only on tasks that run under
# ``MPOL_WEIGHTED_INTERLEAVE`` (``numactl --weighted-interleave``), on new pages.

#: Every named policy, in the order tables list them.
CATALOGUE: list[PolicyEntry] = [
    _heuristic(
        "dram-first",
        "LocalFirst",
        "Linux default (MPOL_LOCAL): the local node, then its fallback list",
        HostRole(
            (),
            ("numa_balancing", "demotion"),
            "local allocation is every task's default: weights left as they are, promotion "
            "off (tiering bit cleared), demotion_enabled=true (false with demotion=False)",
        ),
    ),
    _heuristic(
        "interleave",
        "Interleave",
        "Linux MPOL_INTERLEAVE: round robin over the nodes",
        HostRole(
            (), _STATIC, "weight 1 on every node (auto off), promotion off, demotion_enabled=true"
        ),
    ),
    _heuristic(
        "weighted-interleave",
        "WeightedInterleave",
        "Linux MPOL_WEIGHTED_INTERLEAVE (6.9+) with its auto weights from HMAT/CDAT bandwidth",
        HostRole(
            (),
            ("auto", "numa_balancing", "demotion"),
            "the kernel's own auto weights (auto=Y: bandwidth from HMAT/CDAT, as modelled), "
            "promotion off, demotion_enabled=true",
            fallback=HostRole(
                ("hmat-bandwidth",),
                _STATIC,
                "no auto switch (Linux < 6.16): the auto weights computed here from the "
                "nodes' HMAT bandwidth, written per node",
            ),
        ),
    ),
    _heuristic(
        "numa-tiering",
        "NumaTiering",
        "Linux NUMA balancing, memory-tiering mode (numa_balancing=2)",
        HostRole(
            (),
            _TIERING,
            "NUMA balancing in tiering mode (bit 2) at the policy's rate limit (65536 MB/s), "
            "demotion_enabled=true",
        ),
    ),
    _heuristic(
        "tpp",
        "TPP",
        "TPP (ASPLOS'23): proactive demotion, active-only promotion",
        HostRole(
            (),
            _TIERING,
            "as numa-tiering: TPP's 2% demotion watermark (demote_scale_factor) and "
            "active-LRU-only promotion are not mainline knobs, so the kernel's own watermarks "
            "and promotion apply",
        ),
    ),
    _heuristic(
        "memcg-fair",
        "MemcgFair",
        "per-cgroup tiering fairness RFC (2024): memory.low protects DRAM",
        HostRole(
            refused="its per-cgroup promotion throttle is an RFC (linux-mm, Sept 2024), not a "
            "mainline knob; numa-tiering with the cgroups' own memory.low is what a host runs"
        ),
    ),
    _heuristic(
        "colloid",
        "ColloidPolicy",
        "Colloid (SOSP'24): balance the tiers' loaded latencies",
        HostRole(
            ("node-latency", "mbm", "hmat-bandwidth"),
            (*_STATIC, "promote_rate"),
            "balances the DRAM and CXL loaded latencies with the global weights and the rate",
        ),
    ),
    _heuristic(
        "caption",
        "CaptionPolicy",
        "Caption (MICRO'23): hill-climb the DRAM:CXL interleave ratio",
        HostRole(
            refused="it tunes on the tenants' performance (tenant_norm_perf), which the kernel "
            "does not expose"
        ),
    ),
    _heuristic(
        "damon-tiering",
        "DamonTiering",
        "DAMON auto-tuned tiering (Linux 6.16): DAMOS quota goals",
        HostRole(
            ("node-meminfo",),
            _TIERING,
            "the promotion scheme's quota, tuned each interval on the DRAM nodes' used share "
            "(meminfo), as the promotion rate limit, as the simulator models it; no DAMON "
            "kdamond is created or written, and the demotion scheme is the kernel's own",
        ),
    ),
    _heuristic(
        "bw-aware-interleave",
        "BandwidthAwareInterleave",
        "bandwidth-aware interleave: CXL share for the demand above DRAM's bandwidth",
        HostRole(
            ("mbm", "hmat-bandwidth"),
            (*_STATIC, "promote_rate"),
            "the machine's memory traffic (resctrl MBM, measured: demand at loaded, not idle, "
            "latency) against the DRAM nodes' HMAT bandwidth gives the CXL share of the global "
            "weights; promotion at 65536 MB/s while that share is 0",
        ),
    ),
    PolicyEntry(
        "adaptive",
        "selector",
        "baselines.adaptive:Adaptive",
        "online selector of the deployable heuristics (ARMS-like): each tried for an interval "
        "against the one in force, the best measured kept, re-tested on an arrival, a "
        "departure or a drift of its measured performance",
        deployable=True,
        host=HostRole(
            refused="it switches among the simulated heuristics per interval, memcg-fair and "
            "caption among them (not host-runnable), and scores them on the tenants' "
            "normalised performance (tenant_norm_perf), which the kernel does not expose"
        ),
    ),
    PolicyEntry(
        "static-best",
        "upper-bound",
        "agents.static_best:StaticBest",
        "the best fixed weights and rate, searched on the evaluated episodes",
        deployable=False,
        bound="hindsight",
        host=HostRole(refused="it is an evaluation tool (a search over simulated episodes)"),
    ),
    PolicyEntry(
        "best-heuristic-per-episode",
        "upper-bound",
        "agents.oracles:BestHeuristicPerEpisode",
        "per episode, the best heuristic's record (an oracle over the heuristics)",
        deployable=False,
        closing=True,
        bound="hindsight",
        host=HostRole(refused="it is an evaluation tool (an oracle over simulated episodes)"),
    ),
    PolicyEntry(
        "random",
        "lower-bound",
        "baselines.policies:RandomPolicy",
        "uniform random actions",
        deployable=True,
        host=HostRole(refused="it is a lower bound, not a placement policy"),
    ),
    PolicyEntry(
        "planner",
        "upper-bound",
        "baselines.planner:Planner",
        "CEM search of each episode's actions on the model, replaying it from its seed",
        deployable=False,
        closing=True,
        bound="clairvoyant",
        host=HostRole(
            refused="it is clairvoyant (it replays each simulated episode from its seed)"
        ),
    ),
    PolicyEntry(
        "mpc",
        "upper-bound",
        "baselines.mpc:MPC",
        "the planner's search over a receding horizon from the present model state, with "
        "only the tenants running now (causal model-predictive control)",
        deployable=False,
        closing=True,
        bound="model",
        host=HostRole(
            refused="it searches on the simulated machine's state (every page bucket's "
            "placement), which a host does not expose"
        ),
    ),
]
#: How the parametric ``static:W1:W2[:...][@RATE]`` family runs on a host.
STATIC_HOST = HostRole(
    (),
    (*_STATIC, "promote_rate"),
    "its weights per node (auto off) and its rate (0: promotion off), demotion_enabled=true",
)


def host_role(spec: str) -> HostRole:
    """How policy ``spec`` (a name, or ``static:...``) runs on a host; a ``static:`` spec
    without a rate leaves the rate limit alone.

    Raises:
        ValueError: an unknown name.
    """
    if spec.startswith("static:"):
        if "@" in spec:
            return STATIC_HOST
        return dataclasses.replace(STATIC_HOST, knobs=_STATIC)
    return entry(spec).host


def names(
    kind: str | None = None,
    *,
    deployable: bool | None = None,
    compared: bool | None = None,
    closing: bool | None = None,
    reward_baseline: bool | None = None,
    module: str | None = None,
    host: bool | None = None,
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
        if host is not None and (e.host.refused is None) != host:
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
