"""Drive a Linux host's memory-tiering knobs from a TierGym policy: a dry run unless --apply.

Each interval it reads the host's counters (``envs.host.HostReader``: per-node capacity
and use, promotion and demotion rates, hint faults, memory pressure, per-cgroup usage per
node, resctrl bandwidth where exposed), lets the policy decide, and prints one line: what
it read and, per file, ``path: old -> new`` that it would write. Nothing is written
without ``--apply``. docs/deploy.md is the user's guide.

Examples::

    python deploy.py --policy weighted-interleave --steps 3            # dry run, read only
    python deploy.py --policy numa-tiering --cgroups tenants/a,tenants/b --interval 5
    python deploy.py --policy numa-tiering --apply                     # writes; Ctrl-C restores
    python deploy.py --restore tiergym-deploy-journal.json             # after a kill -9
    python deploy.py --policy dram-first --record recorded/ --steps 60 # dry run, recording
    python deploy.py --policy numa-tiering --replay recorded/          # over the recording

With ``--apply`` the original value of every file is journalled (``--journal``, JSON,
fsynced before the file's first write) and written back when the run ends: after
``--steps``, on Ctrl-C and on SIGTERM; ``--restore JOURNAL`` does it after a run was
killed. Only the knobs of ``envs.host.KNOBS`` are ever written (never DAMON's tree).

A policy is a heuristic that can run on a host (the catalogue says which, what
each reads and writes, and why the others cannot) or a trained run folder whose policy
was trained on the host view (``observation="host"``, global weights; :class:`HostRun`),
possibly as a residual over heuristics a host can run (run here on the host's counters). It refuses, with
one line naming what is missing and exit code 2: a host without the knobs or counters the
policy needs, a run trained on another layout or node count, ``--apply`` without
permission to write, and any bad flag. Exit code 1: the kernel refused some write (each
refusal is printed with its file and value); 128+N after signal N (the originals restored).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, cast

import numpy as np

from agents.evaluation import load_policy
from baselines import catalogue, make_policy
from baselines.catalogue import HostRole
from baselines.policies import HeuristicPolicy
from envs.core import EnvParams, Hardware, kernel_config
from envs.errors import one_line, report_error
from envs.host import (
    INPUTS,
    NUMA_BALANCING,
    HostAction,
    HostError,
    HostMachine,
    HostReader,
    HostSnapshot,
    HostWriter,
    Journal,
    KnobRefusal,
    KnobWrite,
    host_view,
    knob_kind,
    restore,
)
from envs.kernel import gcd_reduce
from envs.spaces import ActionCodec, ObservationEncoder

__all__ = ["main"]

RATE_MAX = 2**31 - 1


class DeployError(ValueError):
    """Bad input or a host or policy that cannot be deployed: one line, exit code 2."""


# =============================================================================== the policy


@dataclass(frozen=True)
class _HostPool:
    """What a heuristic reads of an environment's pool: tenant slots and nodes."""

    n_tenants: int
    n_nodes: int
    node_names: tuple[str, ...]


def host_params(
    kernel: Any,
    machine: HostMachine,
    tenants: int = 1,
    codec: ActionCodec | None = None,
    encoder: ObservationEncoder | None = None,
) -> EnvParams:
    """Environment parameters a heuristic binds to on a host: global box weights over the
    host's nodes and ``tenants`` slots. A heuristic reads only the codec, the node count
    and names and the tenant slots of its parameters, so no scenario pool is built.

    ``codec`` and ``encoder`` (a trained run's, :class:`HostRun`) replace the plain global
    codec and the missing encoder: what the agent's view checks its spaces against."""
    n = machine.n_nodes
    return EnvParams(
        family=cast(Any, None),
        split="host",
        pool=cast(Any, _HostPool(tenants, n, machine.node_names)),
        kernel=kernel,
        codec=codec if codec is not None else ActionCodec(tenants, n, "global", "box"),
        encoder=cast(Any, encoder),
        reward="log-geomean",
        jitter=0.0,
    )


def host_hardware(machine: HostMachine) -> Hardware:
    """The :class:`~envs.core.Hardware` view of a host (batch of one): slow CPU-less nodes
    are CXL, bandwidth and latency from HMAT (NaN where firmware gives none), socket 0."""
    one = lambda a: np.asarray(a)[None]  # noqa: E731
    return Hardware(
        node_names=machine.node_names,
        is_cxl=one(machine.is_slow),
        socket=one(np.zeros(machine.n_nodes, dtype=np.int64)),
        capacity_gib=one(machine.capacity_gib),
        read_gbps=one(machine.read_gbps),
        write_gbps=one(machine.write_gbps),
        firmware_gbps=one(machine.firmware_gbps),
        idle_latency_ns=one(machine.read_latency_ns),
    )


def host_info(snap: HostSnapshot) -> dict[str, Any]:
    """The step metrics a heuristic reads, from a host snapshot (batch of one, one tenant
    slot: the machine). Only what a host shows: capacities and use per node, promotion and
    demotion rates, and the machine's bandwidth (resctrl MBM) as ``tenant_demand_gbps``
    (measured traffic, not the demand at idle latency the simulator reports)."""
    bw = snap.bandwidth_gbps if snap.bandwidth_gbps is not None else math.nan
    return {
        "tenant_active": np.ones((1, 1), dtype=bool),
        "tenant_demand_gbps": np.array([[bw]]),
        "node_capacity_used_gib": snap.node_used_gib[None],
        "node_capacity_gib": snap.node_capacity_gib[None],
        "promotion_mbps": np.array([snap.promotion_mbps]),
        "demotion_mbps": np.array([snap.demotion_mbps]),
        "promotion_candidates_mbps": np.array([snap.promotion_candidates_mbps]),
    }


@dataclass(frozen=True)
class Decision:
    """A policy's choice for the next interval: weights per node (0: local-first), MB/s,
    demotion on/off, and whether the weights are the kernel's auto weights."""

    weights: np.ndarray
    rate_mbps: float
    demotion: bool
    auto: bool = False


class HostHeuristic:
    """A heuristic of :mod:`baselines` running on a host's counters (:func:`host_info`)."""

    def __init__(self, spec: str, role: HostRole, machine: HostMachine) -> None:
        self.name = spec
        self.role = role
        self.policy: HeuristicPolicy = make_policy(spec)
        self.auto = "auto" in role.knobs
        self.policy.bind(host_params(self.policy.kernel, machine), 1)
        self.hw = host_hardware(machine)
        self.policy.observe(None, self.hw)
        self.codec = ActionCodec(1, machine.n_nodes, "global", "box")

    def decide(self, snap: HostSnapshot, first: bool) -> Decision:
        """Observe the interval (not at the first read: nothing measured yet) and decide."""
        if not first:
            self.policy.observe(host_info(snap), self.hw)
        demotion = bool(self.policy.kernel.demotion)
        if self.auto:
            return Decision(np.zeros(self.codec.n_nodes, dtype=np.int64), 0.0, demotion, True)
        act, _ = self.policy.predict(np.zeros((1, 1), dtype=np.float32))
        model, w = self.codec.decode(np.asarray(act).reshape(1, -1))
        return Decision(w[0, 0].astype(np.int64), float(model.promote_mbps[0]), demotion)


#: Tiering modes a trained run may pick on a host (the others switch kernel mechanisms that
#: are not mainline knobs: TPP's watermark, the memcg-fair throttle, DAMON's quotas).
HOST_MODES = ("default", "no-demotion")


class HostRun:
    """A trained run (``--policy RUN``) on a host: only one trained on the host view.

    The host view (``observation="host"``, :func:`envs.host.host_features`) is the layout
    of what a host shows; a run trained on the simulator's other layouts reads what a
    host does not expose (tenant performance, per-node latency, tenant descriptors). The
    run must also use global weights (no mainline interface sets a process's weights),
    tiering modes among :data:`HOST_MODES`, no node padding, and the host's node count.
    ``--cgroups`` fill its tenant slots in order.

    A run trained as a residual over base heuristics (``base_policy``,
    :mod:`agents.view`) runs its bases here on the host's counters (:func:`host_info`,
    as ``--policy HEURISTIC`` does) and adds its residual with the view's own code
    (:class:`agents.view.LearnedPolicy`, what evaluation runs): each base must be a
    heuristic a host can run, and its inputs are checked like a heuristic's
    (:attr:`inputs`).

    Raises:
        DeployError: any of these does not hold (one line naming it).
    """

    def __init__(self, path: str, machine: HostMachine, n_cgroups: int) -> None:
        try:
            policy, env = load_policy(path)
        except ValueError as exc:
            raise DeployError(f"--policy {path!r}: {one_line(exc)}") from None
        where = f"--policy {path!r}"
        layout = env.get("observation", "full")
        if layout != "host":
            raise DeployError(
                f"{where}: trained on observation {layout!r}, which a host does not "
                "show; deploy runs policies trained on the host view (observation='host')"
            )
        if env.get("weights", "per-tenant") != "global":
            raise DeployError(
                f"{where}: trained with per-tenant weights, which a host cannot set; "
                "deploy runs policies trained with weights='global'"
            )
        modes = tuple(env.get("tiering_modes") or ())
        bad = [m for m in modes if m not in HOST_MODES]
        if bad:
            raise DeployError(
                f"{where}: picks tiering modes {bad}, which are not mainline knobs "
                f"(a host offers {list(HOST_MODES)})"
            )
        agent = policy.agent
        if agent.pad_nodes is not None:
            raise DeployError(
                f"{where}: a padded node view (pad_nodes={agent.pad_nodes}); deploy runs "
                "policies on the host's own nodes"
            )
        #: what the bases read (names of envs.host.INPUTS), beside the host view
        self.inputs: tuple[str, ...] = ()
        for base in agent.names:
            role = catalogue.host_role(base)
            if role.refused is not None:
                raise DeployError(
                    f"{where}: base policy {base} cannot run on a host: {role.refused}"
                )
            if "auto" in role.knobs and role.fallback is not None:
                role = role.fallback  # the residual adjusts the weights: written per node
            self.inputs += tuple(i for i in role.inputs if i not in self.inputs)
        model = policy.model
        T = int(env.get("max_tenants") or 0)
        n_obs = int(model.observation_space.shape[0])
        kernel = kernel_config(env.get("kernel"))
        kind = str(env.get("action_type", "box"))
        top = float(env.get("max_promote_mbps", 65536.0))

        def params(nodes: int) -> EnvParams:
            """The run's spaces on a host of ``nodes`` nodes: its host view of ``T`` slots;
            its global weights (the same layout for any slots) bound, like a heuristic's,
            with the machine as one tenant (:func:`host_info`)."""
            codec = ActionCodec(1, nodes, "global", kind, top, modes)
            return host_params(
                kernel, _resized(machine, nodes), 1, codec, ObservationEncoder(T, nodes, "host")
            )

        def fits(nodes: int) -> bool:
            try:
                return agent.spaces(params(nodes))[0].shape == (n_obs,)
            except ValueError:
                return False

        if not (T >= 1 and machine.n_nodes <= _MAX_NODES and fits(machine.n_nodes)):
            # the trained node count is sought only to say what it was
            trained = next((n for n in range(1, _MAX_NODES + 1) if T >= 1 and fits(n)), None)
            if trained is None:
                raise DeployError(f"{where}: an observation of {n_obs} entries is not a host view")
            raise DeployError(
                f"{where}: trained on machines of {trained} nodes; this host has "
                f"{machine.n_nodes} {list(machine.node_names)}"
            )
        if n_cgroups > T:
            raise DeployError(f"--cgroups: {n_cgroups} cgroups for a policy of {T} tenant slots")
        self.policy, self.model, self.T, self.machine = policy, model, T, machine
        self.params = params(machine.n_nodes)
        self.codec = self.params.codec
        self.hw = host_hardware(machine)
        if agent.active:
            try:  # the model's spaces on this host, then the bases bound to it
                policy.bind(self.params, 1)
            except ValueError as exc:
                raise DeployError(f"{where}: {one_line(exc)}") from None
            policy.observe(None, self.hw)
        self.demotion = bool(kernel.demotion)
        self.name = path

    def action(self, snap: HostSnapshot, first: bool) -> np.ndarray:
        """The environment action (1, size) the run takes on ``snap``: the model's on the
        host view, or with bases the residual over them, exactly as in the simulator
        (:meth:`agents.view.LearnedPolicy.predict`; the bases observe the interval's
        counters, not at the first read)."""
        obs = host_view(snap, self.machine.is_slow, self.T)[None]
        if self.policy.agent.active:
            if not first:
                self.policy.observe(host_info(snap), self.hw)
            act, _ = self.policy.predict(obs, episode_start=np.array([first]), deterministic=True)
        else:
            act, _ = self.model.predict(obs, deterministic=True)
        return np.asarray(act).reshape(1, -1)

    def decide(self, snap: HostSnapshot, first: bool) -> Decision:
        """The run's :meth:`action` on ``snap`` as knob values."""
        a = self.action(snap, first)
        model, w = self.codec.decode(a)
        mode = self.codec.modes[int(self.codec.decode_mode(a)[0])] if self.codec.modes else None
        demotion = False if mode == "no-demotion" else self.demotion
        return Decision(w[0, 0].astype(np.int64), float(model.promote_mbps[0]), demotion)


#: The most nodes a run's layout is matched against (:class:`HostRun`).
_MAX_NODES = 64


def _resized(machine: HostMachine, nodes: int) -> HostMachine:
    """``machine`` if it has ``nodes`` nodes, else a stand-in of that many (only the node
    count and names are read while a run's trained node count is sought)."""
    if nodes == machine.n_nodes:
        return machine
    return cast(Any, _HostPool(1, nodes, tuple(str(i) for i in range(nodes))))


def role_of(spec: str) -> HostRole:
    """The :class:`HostRole` of a heuristic name (``static:...`` included).

    Raises:
        DeployError: an unknown name or a policy that cannot run on a host.
    """
    try:
        role = catalogue.host_role(spec)
    except ValueError:
        runnable = [*catalogue.names(host=True), "static:W1:W2[@RATE]"]
        raise DeployError(
            f"--policy {spec!r}: not a heuristic nor a run folder; heuristics a host can run: "
            f"{', '.join(runnable)}"
        ) from None
    if role.refused is not None:
        raise DeployError(f"--policy {spec}: cannot run on a host: {role.refused}")
    return role


def check_host(
    spec: str, role: HostRole, reader: HostReader, writer: HostWriter, knobs: bool = True
) -> tuple[HostRole, list[str]]:
    """The role a host can run (the fallback where a knob is missing), and its knobs' files.

    ``knobs=False``: only the counters are checked (a replay writes nothing).

    Raises:
        DeployError: a counter or a knob the policy needs is missing (one line naming it).
    """
    nodes = reader.machine().nodes
    missing = writer.missing(role.knobs, nodes) if knobs else []
    if missing and role.fallback is not None:
        fb = role.fallback
        if not writer.missing(fb.knobs, nodes) and set(fb.inputs) <= reader.available():
            role = fb
            missing = []
    if missing:
        raise DeployError(f"{spec} needs knobs this host lacks: {', '.join(missing)}")
    lacking = [i for i in role.inputs if i not in reader.available()]
    if lacking:
        raise DeployError(
            f"{spec} needs what this host does not expose: "
            + "; ".join(f"{i} ({INPUTS[i]})" for i in lacking)
        )
    return role, (_knob_files(role, writer, nodes) if knobs else [])


def _knob_files(role: HostRole, writer: HostWriter, nodes: Sequence[int]) -> list[str]:
    files: list[str] = []
    cur = writer.current()
    for k in role.knobs:
        if k == "weights":
            files += [writer.weight_paths()[n] for n in nodes]
            if writer.auto_path():
                files.append(cast(str, writer.auto_path()))
        elif k == "auto":
            files.append(cast(str, writer.auto_path()))
        else:
            files += [p for p in cur if _kind_matches(p, k)]
    return list(dict.fromkeys(files))


def _kind_matches(path: str, kind: str) -> bool:
    try:
        return knob_kind(path) == kind
    except HostError:
        return False


def host_action(d: Decision, knobs: dict[str, str], nodes: Sequence[int]) -> HostAction:
    """The knob values of a :class:`Decision` on a host whose knobs read ``knobs``."""
    weights: dict[int, int] | None = None
    if not d.auto and np.any(d.weights > 0):
        w = np.asarray(d.weights, dtype=np.int64)
        if np.any(w == 0):  # left out: the kernel's minimum 1, the others scaled up to 255
            w = np.where(w > 0, w * max(255 // int(w.max()), 1), 1)
        w = gcd_reduce(np.clip(w, 1, 255)[None, None])[0, 0]
        weights = {int(n): int(x) for n, x in zip(nodes, w, strict=True)}
    mode_text = knobs.get(NUMA_BALANCING, "0")
    mode = int(mode_text) if mode_text.isdigit() else 0
    rate = None
    if d.rate_mbps > 0:
        mode |= 2
        rate = int(min(max(round(d.rate_mbps), 1), RATE_MAX))
    else:
        mode &= ~2
    return HostAction(
        weights=weights,
        auto=True if d.auto else None,
        numa_balancing=mode,
        promote_rate_mbps=rate,
        demotion=d.demotion,
    )


# =============================================================================== printing


def _label(path: str) -> str:
    """A short name of a knob file for the interval's line (the plan prints full paths)."""
    kind = knob_kind(path)
    name = path.rsplit("/", 1)[-1]
    if kind in ("weights", "auto"):
        return name
    if kind.startswith("memory."):
        return path.removeprefix("sys/fs/cgroup/")
    return {"numa_balancing": "numa_balancing", "promote_rate": "promote_rate_MBps"}.get(kind, kind)


def describe(snap: HostSnapshot) -> str:
    """What a snapshot shows, on one line."""
    nodes = " ".join(
        f"{n}:{u:.1f}/{c:.1f}GiB"
        for n, u, c in zip(snap.node_ids, snap.node_used_gib, snap.node_capacity_gib, strict=True)
    )
    parts = [
        f"nodes {nodes}",
        f"promote {snap.promotion_mbps:.1f} demote {snap.demotion_mbps:.1f} MB/s",
        f"hint faults {snap.hint_faults_per_s:.0f}/s",
        f"psi some {100 * snap.pressure_some:.1f}%",
    ]
    if snap.bandwidth_gbps is not None:
        parts.append(f"bw {snap.bandwidth_gbps:.1f} GB/s")
    for c in snap.cgroups:
        per = "+".join(f"{x:.2f}" for x in c.node_resident_gib)
        parts.append(f"{c.name} {c.current_gib:.2f}GiB ({per}) high {c.high_events:.0f}")
    knobs = " ".join(f"{_label(p)}={v}" for p, v in snap.knobs.items())
    return "; ".join(parts) + f" | knobs {knobs or 'none'}"


def _writes(verb: str, plan: Sequence[KnobWrite]) -> str:
    return f"{verb}: " + "; ".join(str(w) for w in plan) if plan else "nothing to write"


# =============================================================================== running


class _Stop(BaseException):
    """SIGINT or SIGTERM: stop the loop (the originals are restored in ``finally``)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_stop(signum: int, frame: Any) -> NoReturn:
    raise _Stop(signum)


def _restore_now(
    journal: Journal, out: Callable[[str], None], root: Path | None = None
) -> list[KnobRefusal]:
    """Write the journalled originals back with SIGINT/SIGTERM blocked (a second Ctrl-C
    must not cut a restore in half)."""
    sigs = {signal.SIGINT, signal.SIGTERM}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
    try:
        done, refused = restore(journal, root)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
    out(f"restored {len(done)} file(s) from {journal.path}" + (": " if done else ""))
    for w in done:
        out(f"  {w}")
    for r in refused:
        out(f"  {r}")
    return refused


def build_parser() -> argparse.ArgumentParser:
    class Parser(argparse.ArgumentParser):
        def error(self, message: str) -> NoReturn:
            self.exit(2, f"deploy.py: error: {message} (see --help)\n")

    p = Parser(
        prog="deploy.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--policy", help="a heuristic a host can run, or a trained run folder")
    p.add_argument("--root", default="/", help="root of the host's files (default /)")
    p.add_argument("--cgroups", default="", help="cgroup v2 paths under sys/fs/cgroup, a,b,...")
    p.add_argument("--interval", default="5", help="seconds between reads (default 5)")
    p.add_argument("--steps", default=None, help="intervals to run (default: until Ctrl-C)")
    p.add_argument("--apply", action="store_true", help="write the knobs (default: dry run)")
    p.add_argument(
        "--journal",
        default="tiergym-deploy-journal.json",
        help="with --apply: the file of original values (default ./tiergym-deploy-journal.json)",
    )
    p.add_argument("--restore", metavar="JOURNAL", help="write a journal's originals back, exit")
    p.add_argument("--replay", metavar="DIR", help="run over recorded snapshots (one folder each)")
    p.add_argument(
        "--record",
        metavar="DIR",
        help="copy the files read each interval to DIR/0001, DIR/0002, ... (for --replay)",
    )
    return p


@dataclass(frozen=True)
class Options:
    policy: str | None
    root: Path
    cgroups: tuple[str, ...]
    interval: float
    steps: int | None
    apply: bool
    journal: Path
    restore: Path | None
    replay: Path | None
    record: Path | None = None


def parse(argv: Sequence[str]) -> Options:
    """The checked options (a bad value: :class:`DeployError` naming the flag)."""
    a = build_parser().parse_args(list(argv))
    try:
        interval = float(a.interval)
    except ValueError:
        raise DeployError(f"--interval {a.interval!r}: expected seconds > 0") from None
    if not (math.isfinite(interval) and interval > 0):
        raise DeployError(f"--interval {a.interval!r}: expected seconds > 0")
    steps = None
    if a.steps is not None:
        if not re.fullmatch(r"\d+", a.steps) or int(a.steps) < 1:
            raise DeployError(f"--steps {a.steps!r}: expected an integer >= 1")
        steps = int(a.steps)
    if a.restore is None and a.policy is None:
        raise DeployError("--policy: required (a heuristic or a run folder), or --restore JOURNAL")
    if a.restore is not None and (a.policy or a.apply or a.replay):
        raise DeployError("--restore JOURNAL: runs alone (no --policy, --apply or --replay)")
    if a.replay is not None and a.apply:
        raise DeployError("--replay: a replay writes nothing; drop --apply")
    root = Path(a.root)
    if not root.is_dir():
        raise DeployError(f"--root {a.root!r}: not a directory")
    if a.replay is not None and not Path(a.replay).is_dir():
        raise DeployError(f"--replay {a.replay!r}: not a directory")
    if a.record is not None:
        rec = Path(a.record)
        if a.replay is not None or a.restore is not None:
            raise DeployError("--record: records a live run (not with --replay or --restore)")
        if rec.exists() and (not rec.is_dir() or any(rec.iterdir())):
            raise DeployError(f"--record {a.record!r}: exists and is not an empty folder")
    return Options(
        policy=a.policy,
        root=root,
        cgroups=tuple(c.strip() for c in a.cgroups.split(",") if c.strip()),
        interval=interval,
        steps=steps,
        apply=bool(a.apply),
        journal=Path(a.journal),
        restore=Path(a.restore) if a.restore else None,
        replay=Path(a.replay) if a.replay else None,
        record=Path(a.record) if a.record else None,
    )


#: The role of a trained run: what the host view reads and the knobs of its actions.
RUN_ROLE = HostRole(
    ("node-meminfo", "promotion", "demotion"),
    ("weights", "numa_balancing", "promote_rate", "demotion"),
    "its global weights (0 -> the kernel's minimum), its rate and its tiering mode",
)


def make_host_policy(
    spec: str, reader: HostReader, writer: HostWriter, knobs: bool = True
) -> tuple[HostHeuristic | HostRun, list[str]]:
    """The policy of ``--policy`` on this host and the knob files it may write.

    ``knobs=False`` (a replay, which writes nothing) checks only the counters it reads.
    """
    machine = reader.machine()
    if Path(spec).exists() and not spec.startswith("static:"):
        run = HostRun(spec, machine, len(reader.cgroups))
        cgroup = ("cgroup-usage",) if reader.cgroups else ()
        inputs = (*RUN_ROLE.inputs, *cgroup, *run.inputs)
        run_role = dataclasses.replace(RUN_ROLE, inputs=tuple(dict.fromkeys(inputs)))
        return run, check_host(spec, run_role, reader, writer, knobs)[1]
    role = role_of(spec)
    role, files = check_host(spec, role, reader, writer, knobs)
    try:
        return HostHeuristic(spec, role, machine), files
    except ValueError as exc:
        raise DeployError(f"--policy {spec}: {one_line(exc)}") from None


def run_live(opts: Options, out: Callable[[str], None]) -> int:
    """The dry run or, with ``--apply``, the run that writes (restoring at the end)."""
    assert opts.policy is not None
    reader = HostReader(opts.root, opts.cgroups)
    writer = HostWriter(opts.root, opts.cgroups)
    for c in opts.cgroups:  # each named cgroup exists (one line naming a missing one)
        reader.cgroup_dir(c)
    policy, files = make_host_policy(opts.policy, reader, writer)
    journal = None
    if opts.apply:
        denied = writer.not_writable([KnobWrite(f, "", "") for f in files])
        if denied:
            raise DeployError(
                f"--apply: no permission to write {', '.join(denied)} (run as root, or without --apply)"
            )
        if opts.journal.exists():
            try:
                prev = Journal.load(opts.journal)
            except HostError:
                raise DeployError(
                    f"--journal {str(opts.journal)!r}: exists and is not a journal; give another path"
                ) from None
            if prev.restored is None and prev.entries:
                raise DeployError(
                    f"--journal {str(opts.journal)!r}: holds originals not restored yet; run "
                    f"python deploy.py --restore {opts.journal} first"
                )
        journal = Journal(opts.journal, opts.root)
        journal.record([])  # the file exists (empty) before any write
    mode = "apply" if opts.apply else "dry run"
    out(f"deploy {opts.policy} on {opts.root} ({mode}, every {opts.interval:g} s)")
    refused_any = False
    previous = {s: signal.signal(s, _raise_stop) for s in (signal.SIGINT, signal.SIGTERM)}
    code = 0
    try:
        i = 0
        while opts.steps is None or i < opts.steps:
            if i:
                time.sleep(opts.interval)
            snap = reader.read()
            if opts.record is not None:
                reader.snapshot(opts.record / f"{i + 1:04d}")
            d = policy.decide(snap, first=i == 0)
            plan = writer.plan(host_action(d, snap.knobs, snap.node_ids), snap.knobs)
            if opts.apply:
                refused = writer.apply(plan, journal)
                refused_any |= bool(refused)
                tail = _writes("wrote", plan) + "".join(f"; {r}" for r in refused)
            else:
                tail = _writes("would write", plan)
            out(f"[{i + 1}] read: {describe(snap)} | {tail}")
            i += 1
    except _Stop as stop:
        code = 128 + stop.signum
        out(f"stopped by {signal.Signals(stop.signum).name}")
    finally:
        try:
            if journal is not None:
                refused_any |= bool(_restore_now(journal, out))
        finally:
            for s, h in previous.items():
                signal.signal(s, h)
    return code or (1 if refused_any else 0)


def _uptime_clock(holder: dict[str, Path], interval: float, counter: list[int]) -> float:
    text = None
    try:
        text = (holder["root"] / "proc/uptime").read_text().split()[0]
        return float(text)
    except (OSError, IndexError, ValueError):
        return counter[0] * interval


def run_replay(opts: Options, out: Callable[[str], None]) -> int:
    """What the policy would have done at each recorded snapshot, beside the counters."""
    assert opts.policy is not None and opts.replay is not None
    snaps = sorted(
        (p for p in opts.replay.iterdir() if p.is_dir()),
        key=lambda p: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", p.name)],
    )
    if not snaps:
        raise DeployError(f"--replay {str(opts.replay)!r}: no snapshot folders in it")
    holder = {"root": snaps[0]}
    counter = [0]
    reader = HostReader(
        snaps[0], opts.cgroups, clock=lambda: _uptime_clock(holder, opts.interval, counter)
    )
    policy, _ = make_host_policy(
        opts.policy, reader, HostWriter(snaps[0], opts.cgroups), knobs=False
    )
    out(f"replay {opts.policy} over {len(snaps)} snapshot(s) in {opts.replay}")
    for i, snap_dir in enumerate(snaps):
        if opts.steps is not None and i >= opts.steps:
            break
        holder["root"] = snap_dir
        counter[0] = i
        reader.root = snap_dir
        try:
            snap = reader.read()
        except HostError as exc:
            raise DeployError(f"--replay snapshot {snap_dir.name}: {one_line(exc)}") from None
        d = policy.decide(snap, first=i == 0)
        plan = HostWriter(snap_dir, opts.cgroups).plan(
            host_action(d, snap.knobs, snap.node_ids), snap.knobs, unknown="?"
        )
        out(f"[{snap_dir.name}] kernel: {describe(snap)} | {_writes('policy would write', plan)}")
    return 0


def main(argv: Sequence[str] | None = None, out: Callable[[str], None] | None = None) -> int:
    """Parse, check, run; the exit code (2: bad input or a refused deployment)."""
    argv = sys.argv[1:] if argv is None else argv
    say = out or (lambda s: print(s, flush=True))
    try:
        opts = parse(argv)
        if opts.restore is not None:
            journal = Journal.load(opts.restore)
            root = opts.root if opts.root != Path("/") else None  # default: the journal's
            return 1 if _restore_now(journal, say, root) else 0
        if opts.replay is not None:
            return run_replay(opts, say)
        return run_live(opts, say)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    except (DeployError, HostError) as exc:
        return report_error(exc, "deploy.py")


if __name__ == "__main__":
    sys.exit(main())
