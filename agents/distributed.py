"""Evaluation grids on Ray: the cells of a comparison as Ray tasks, locally or on a cluster.

:func:`run_comparison_ray` is :func:`agents.evaluation.run_comparison` with the
grid cut into cells (scenario x policy x seed block) that run as Ray tasks
(:func:`run_cells`), each one batched environment in one worker process: Ray
distributes whole rollouts, never single environment steps. The records are
gathered in the single-process order (scenario, then policy, then episode) and
summarised after all cells are in, so ``results.json`` (but for its
``command``), ``results.csv``, ``table.md``, ``leaderboard.md`` and the plots
are those of the single-process run with the same seeds, bit for bit.

Seed blocks: a run of ``n`` episodes from seed ``s`` is cut into blocks
``[s, s+k), [s+k, s+2k), ...`` only for policies whose action for an instance
depends on that instance alone: the deterministic heuristics. The environment
core is deterministic per instance seed and its batch composition does not
change an instance's numbers, but ``random`` draws one batch of actions from
one generator, ``static-best`` searches its grid on the first instance's
machine, and a trained network's batched matrix products round differently
for some batch sizes; those policies run each (scenario, policy) as one cell.
Blocks are only made when there are fewer runs than twice the workers (a
block of fewer than :data:`MIN_BLOCK` episodes costs more in per-step
overhead than it gains), or when ``block_episodes`` asks for them.

Results are written as cells finish (``OUTPUT/cells/cell-NNNNN.json``, each
file whole or absent), so a stopped run loses only the cells in flight: the
same command again reuses every finished cell whose inputs (policy, scenario,
seeds, the code of ``envs``, ``baselines`` and ``agents``) are unchanged. The
folder is removed once the results are written.

Ray starts in-process on the local cores unless an address is given
(``address`` or ``$RAY_ADDRESS``): then the same call runs on that cluster,
after checking that it answers and that every node has the project installed
(:func:`ray_session`).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import socket
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.evaluation import PolicyError, load_policy, mean_score
from agents.rollout import rollout

__all__ = [
    "MIN_BLOCK",
    "Cell",
    "RayError",
    "plan_cells",
    "ray_address",
    "ray_runner",
    "ray_session",
    "run_cells",
    "run_comparison_ray",
    "splittable",
]

#: Fewest episodes in a seed block made automatically (see the module docstring).
MIN_BLOCK = 64
#: Modules every node must import to run evaluation cells.
EVAL_MODULES = ("envs", "baselines", "agents")
#: Seconds to wait for a cluster's address to accept a connection.
CONNECT_TIMEOUT_S = 5.0


class RayError(ValueError):
    """Ray cannot be used as asked: unreachable address, a node without the package, bad workers."""


# --------------------------------------------------------------------------- Ray session


def ray_address(address: str | None) -> str | None:
    """The cluster to use: ``address``, else ``$RAY_ADDRESS``, else ``None`` (local, in-process)."""
    return address or os.environ.get("RAY_ADDRESS") or None


def _check_reachable(address: str) -> None:
    """A TCP connection to ``host:port`` (or ``ray://host:port``), so a wrong address fails fast."""
    if address in ("auto", "local"):
        return  # ray.init finds (or fails to find) the machine's cluster itself
    hostport = re.sub(r"^[a-z]+://", "", address).rstrip("/")
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise RayError(
            f"Ray address {address!r}: expected HOST:PORT (the head's GCS port, 6379 by default), "
            "ray://HOST:PORT (Ray client) or auto"
        )
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as exc:
        raise RayError(
            f"cannot reach the Ray cluster at {address!r} ({exc.strerror or exc}); "
            "start it with `ray start --head` on the head node, or leave out --ray-address "
            "(and RAY_ADDRESS) to run on the local cores"
        ) from None


def check_nodes(modules: Sequence[str]) -> None:
    """Every alive node imports ``modules`` (the project is installed there), else :class:`RayError`.

    One zero-CPU task pinned to each node, so busy nodes answer too.
    """
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    def probe(names: list[str]) -> list[str]:
        import importlib

        missing = []
        for name in names:
            try:
                importlib.import_module(name)
            except Exception:  # ImportError, or a broken install
                missing.append(name)
        return missing

    remote = ray.remote(num_cpus=0, max_retries=0)(probe)
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    refs = {
        remote.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)
        ).remote(list(modules)): n
        for n in nodes
    }
    bad = []
    for ref, node in refs.items():
        missing = ray.get(ref)
        if missing:
            bad.append(f"{node.get('NodeManagerAddress', node['NodeID'])} lacks {missing}")
    if bad:
        raise RayError(
            "Ray cluster node(s) without the tiergym package: "
            + "; ".join(bad)
            + " (install the project on every node, into the Python environment Ray runs there)"
        )


@contextmanager
def ray_session(
    workers: int | None = None,
    address: str | None = None,
    modules: Sequence[str] = EVAL_MODULES,
) -> Iterator[int]:
    """Ray, initialised for the duration; yields the CPUs available to tasks.

    Without an address (``address``, ``$RAY_ADDRESS``) Ray starts in-process on
    ``workers`` local CPUs (default: all cores), nothing to run beforehand. With
    one, it connects to that cluster after checking the address answers, and
    every node is checked for ``modules``. A Ray already initialised by the
    caller (a test, a notebook) is used as it is and left running.

    Raises:
        RayError: a bad worker count, an unreachable address, a node without
            the package; one line each, before any work starts.
    """
    import logging

    import ray

    if workers is not None and workers < 1:
        raise RayError(f"--workers must be at least 1, got {workers}")
    if ray.is_initialized():
        check_nodes(modules)
        yield int(ray.cluster_resources().get("CPU", 1))
        return
    addr = ray_address(address)
    kw: dict[str, Any] = {
        "include_dashboard": False,
        "logging_level": logging.ERROR,
        "log_to_driver": False,
    }
    if addr is not None:
        _check_reachable(addr)
        try:
            ray.init(address=addr, **kw)
        except Exception as exc:  # ConnectionError, a version mismatch, ...
            msg = " ".join(str(exc).split())[:300]
            hint = ""
            if os.environ.get("RAY_AUTH_MODE", "").lower() != "token":
                hint = (
                    "; if the cluster uses token authentication (`ray start`'s default), set "
                    "RAY_AUTH_MODE=token here, with the cluster's token in ~/.ray/auth_token "
                    "or RAY_AUTH_TOKEN"
                )
            raise RayError(f"cannot connect to the Ray cluster at {addr!r}: {msg}{hint}") from None
    else:
        # "local": a new in-process Ray, even where `ray start` once ran on this machine
        # bound to the loopback address: a local run opens no port on the network
        ray.init(
            address="local",
            num_cpus=workers or os.cpu_count() or 1,
            _node_ip_address="127.0.0.1",
            **kw,
        )
    try:
        check_nodes(modules)
        yield int(ray.cluster_resources().get("CPU", 1))
    finally:
        ray.shutdown()


# --------------------------------------------------------------------------- cells


@dataclass(frozen=True)
class Cell:
    """One Ray task: ``n`` episodes of one policy on one scenario, seeds ``seed+start ...``.

    ``run`` indexes the (scenario, policy) run in single-process order;
    ``start`` is the block's first episode index within that run.
    """

    index: int
    run: int
    scenario: str
    policy: int
    name: str
    start: int
    n: int


def splittable(policy: Any) -> bool:
    """Whether ``policy``'s episodes may be cut into seed blocks without changing a number.

    True for the deterministic heuristics (an instance's action depends on
    that instance alone); False for ``random`` (one generator draws the whole
    batch), ``static-best`` (its grid is read off the first instance's
    machine), trained networks (batched float products round differently for
    some batch sizes) and anything unknown.
    """
    from agents.static_best import StaticBest
    from baselines.policies import HeuristicPolicy, RandomPolicy

    return isinstance(policy, HeuristicPolicy) and not isinstance(policy, RandomPolicy | StaticBest)


def plan_cells(
    names: Sequence[str],
    can_split: Sequence[bool],
    scenarios: Sequence[str],
    episodes: int,
    workers: int,
    block_episodes: int | None = None,
) -> list[Cell]:
    """The grid's cells in single-process order (scenario, policy, block).

    Runs of splittable policies are cut into blocks of ``block_episodes``
    (default: only when there are fewer runs than ``2 * workers``, into
    blocks of at least :data:`MIN_BLOCK` episodes); the others are one cell.
    """
    n_runs = len(scenarios) * len(names)
    if block_episodes is None:
        want = math.ceil(2 * workers / max(n_runs, 1))
        blocks = max(1, min(want, episodes // MIN_BLOCK))
        block_episodes = math.ceil(episodes / blocks)
    if block_episodes < 1:
        raise ValueError(f"block_episodes must be at least 1, got {block_episodes}")
    cells: list[Cell] = []
    run = 0
    for sc in scenarios:
        for p, name in enumerate(names):
            size = block_episodes if can_split[p] else episodes
            for start in range(0, episodes, size):
                cells.append(Cell(len(cells), run, sc, p, name, start, min(size, episodes - start)))
            run += 1
    return cells


def _cell_task(
    blob: bytes,
    name: str,
    scenario: str,
    start: int,
    n: int,
    seed: int,
    split: str,
    record_series: bool,
) -> tuple[list[dict[str, Any]], list[tuple[str, str]], float]:
    """Run one cell (in a Ray worker): its records as :func:`agents.evaluation.compare` makes them.

    ``blob`` is the pickled ``(policy, env_kwargs)``: unpickled here, the
    policy is this task's own (objects read from Ray's store would share
    read-only arrays). Returns ``(records, warnings, seconds)``; warnings are
    ``(category, message)`` for the driver to issue again.
    """
    import ray.cloudpickle as cloudpickle

    t0 = time.perf_counter()
    policy, env_kwargs = cloudpickle.loads(blob)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        recs = rollout(
            policy,
            scenario,
            n,
            seed=seed + start,
            split=split,
            env_kwargs=env_kwargs,
            record_series=record_series and start == 0,
            policy_name=name,
        )
    for r in recs:  # what compare sets, with the episode index within the whole run
        r["episode"] = start + int(r["episode"])
        r["scenario"] = scenario
        r["run_seed"] = seed
    seen = []
    for w in caught:
        item = (w.category.__name__, str(w.message))
        if issubclass(w.category, RuntimeWarning | UserWarning) and item not in seen:
            seen.append(item)
    return recs, seen, time.perf_counter() - t0


def _source_fingerprint() -> str:
    """Hash of the code and data that make the numbers (envs, baselines, agents)."""
    import agents
    import baselines
    import envs

    h = hashlib.sha256()
    for pkg in (envs, baselines, agents):
        root = Path(str(pkg.__file__)).parent
        for f in sorted(root.rglob("*")):
            if f.suffix in (".py", ".yaml", ".yml") and f.is_file():
                h.update(str(f.relative_to(root)).encode())
                h.update(f.read_bytes())
    return h.hexdigest()


def _policy_identity(loaded: tuple[Any, dict[str, Any]]) -> str | None:
    """A digest of a policy's behaviour: a trained model's weights, else its pickle; None if unknown."""
    policy, env_kwargs = loaded
    h = hashlib.sha256(json.dumps(env_kwargs, sort_keys=True, default=str).encode())
    h.update(type(policy).__qualname__.encode())
    try:
        model = getattr(policy, "model", None)
        if model is not None and hasattr(model, "policy"):
            for k, v in model.policy.state_dict().items():
                h.update(k.encode())
                h.update(v.detach().cpu().numpy().tobytes())
        else:
            import ray.cloudpickle as cloudpickle

            h.update(cloudpickle.dumps(loaded))
    except Exception:
        return None
    return h.hexdigest()


def _cell_key(
    cell: Cell, identity: str | None, seed: int, split: str, series: bool, code: str
) -> str | None:
    if identity is None:
        return None
    scen = cell.scenario
    content = (
        Path(scen).read_bytes()
        if scen.endswith((".yaml", ".yml")) and Path(scen).is_file()
        else b""
    )
    desc = [code, identity, scen, hashlib.sha256(content).hexdigest(), cell.name, seed, split,
            cell.start, cell.n, series and cell.start == 0]  # fmt: skip
    return hashlib.sha256(json.dumps(desc).encode()).hexdigest()


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def run_cells(
    loaded: Sequence[tuple[Any, dict[str, Any]]],
    names: Sequence[str],
    scenarios: Sequence[str],
    episodes: int,
    *,
    seed: int = 0,
    split: str = "test",
    record_series: bool = False,
    metric: str = "geomean_perf",
    max_in_flight: int = 2,
    block_episodes: int | None = None,
    cells_dir: str | Path | None = None,
    show_progress: bool = False,
) -> list[dict[str, Any]]:
    """Every policy on every scenario, as Ray tasks; the records in :func:`compare`'s order.

    Ray must be initialised (:func:`ray_session`). ``loaded`` are
    ``(policy, env_kwargs)`` pairs as :func:`agents.evaluation.load_policy`
    returns them, named ``names``. At most ``max_in_flight`` cells run at once.
    With ``cells_dir`` each finished cell is written there at once, and cells
    already there with the same inputs are reused instead of run. With
    ``show_progress``: one line per finished cell and a progress bar.

    Raises:
        ValueError: (:class:`PolicyError` among them) what a cell raised, e.g.
            a model whose spaces do not fit a scenario.
    """
    import ray
    import ray.cloudpickle as cloudpickle
    from tqdm import tqdm

    cells = plan_cells(
        names,
        [splittable(p) for p, _ in loaded],
        scenarios,
        episodes,
        max_in_flight,
        block_episodes,
    )
    results: dict[int, list[dict[str, Any]]] = {}
    keys: dict[int, str | None] = {}
    out = Path(cells_dir) if cells_dir is not None else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        code = _source_fingerprint()
        ids = [_policy_identity(item) for item in loaded]
        for c in cells:
            keys[c.index] = _cell_key(c, ids[c.policy], seed, split, record_series, code)
            path = out / f"cell-{c.index:05d}.json"
            if keys[c.index] is not None and path.is_file():
                try:
                    saved = json.loads(path.read_text())
                except ValueError:
                    continue
                if saved.get("key") == keys[c.index]:
                    results[c.index] = saved["records"]
    todo = [c for c in cells if c.index not in results]
    bar = tqdm(total=len(cells), desc="cells", disable=not show_progress)
    if results and show_progress:
        tqdm.write(f"reusing {len(results)} finished cell(s) from {out}", file=sys.stderr)
        bar.update(len(results))
    refs = [ray.put(cloudpickle.dumps(item)) for item in loaded]  # sent once, not per cell
    task = ray.remote(num_cpus=1)(_cell_task)
    pending: dict[Any, Cell] = {}
    queue = list(todo)
    issued: set[tuple[str, str]] = set()
    try:
        while queue or pending:
            while queue and len(pending) < max(1, max_in_flight):
                c = queue.pop(0)
                ref = task.remote(
                    refs[c.policy], c.name, c.scenario, c.start, c.n, seed, split, record_series
                )
                pending[ref] = c
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                c = pending.pop(ref)
                try:
                    recs, warns, secs = ray.get(ref)
                except ray.exceptions.RayTaskError as exc:
                    cause = getattr(exc, "cause", None)
                    if isinstance(cause, ValueError):
                        raise cause from None
                    raise
                for category, message in warns:
                    if (category, message) not in issued:
                        issued.add((category, message))
                        cat = RuntimeWarning if category == "RuntimeWarning" else UserWarning
                        warnings.warn(message, cat, stacklevel=2)
                results[c.index] = recs
                if out is not None:
                    _write_atomic(
                        out / f"cell-{c.index:05d}.json",
                        json.dumps({"key": keys.get(c.index), "cell": c.__dict__, "records": recs}),
                    )
                if show_progress:
                    score = (
                        mean_score(recs, metric)
                        if recs and metric in recs[0]["metrics"]
                        else math.nan
                    )
                    tqdm.write(
                        f"[{len(results)}/{len(cells)}] {c.scenario} / {c.name} "
                        f"seeds {seed + c.start}-{seed + c.start + c.n - 1}: "
                        f"{metric} {score:.4f} ({secs:.1f} s)",
                        file=sys.stderr,
                    )
                bar.update(1)
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)
        bar.close()
    return [r for c in cells for r in results[c.index]]


# --------------------------------------------------------------------------- comparison


def run_comparison_ray(
    policies: Sequence[str | tuple[Any, dict[str, Any]]],
    scenarios: Sequence[str],
    episodes: int,
    output: str | Path,
    *,
    seed: int = 0,
    split: str = "test",
    reference: str = "dram-first",
    metric: str = "geomean_perf",
    plots: bool = True,
    show_progress: bool = False,
    command: Sequence[str] | None = None,
    n_boot: int = 2000,
    confidence: float = 0.95,
    workers: int | None = None,
    address: str | None = None,
    block_episodes: int | None = None,
) -> dict[str, Any]:
    """:func:`agents.evaluation.run_comparison` with the cells as Ray tasks; the same outputs.

    ``workers``: local Ray CPUs (default all cores), or on a cluster the most
    cells in flight (default its CPUs); ``address``: a Ray cluster (default
    ``$RAY_ADDRESS``; none: Ray in-process on the local cores). Everything
    ``run_comparison`` checks is checked the same way, and the cluster reached
    and checked, before any cell runs. Policies are loaded here and sent to
    the workers (a trained model travels with its weights, so nodes need no
    copy of the run folder). Records are summarised after all cells are in,
    in the single-process order, so the outputs equal the single-process
    run's.

    Raises:
        ValueError: (:class:`PolicyError`, :class:`RayError` among them) an
            unusable policy, scenario, reference, metric or output, an
            unreachable cluster or a node without the package, before any cell
            runs; or what a cell raised.
    """
    from agents.evaluation import RECORD_METRICS, check_output_dir, check_runs, write_results

    if metric not in RECORD_METRICS:
        raise ValueError(f"metric {metric!r}: expected one of {list(RECORD_METRICS)}")
    if episodes < 1:
        raise ValueError(f"episodes: got {episodes}, expected at least 1")
    out = check_output_dir(output)
    loaded = [load_policy(p) if isinstance(p, str) else p for p in policies]
    names = [getattr(p, "name", str(i)) for i, (p, _) in enumerate(loaded)]
    if reference not in names:
        raise ValueError(f"reference {reference!r} is not among the policies {names}")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise PolicyError(f"two policies share the name(s) {dup}; give each a distinct label")
    check_runs(loaded, names, list(scenarios), split)
    cells_dir = out / "cells"
    with ray_session(workers, address) as cpus:
        records = run_cells(
            loaded,
            names,
            list(scenarios),
            episodes,
            seed=seed,
            split=split,
            record_series=plots,
            metric=metric,
            max_in_flight=workers or cpus,
            block_episodes=block_episodes,
            cells_dir=cells_dir,
            show_progress=show_progress,
        )
    summary = write_results(
        out,
        records,
        reference=reference,
        metric=metric,
        seed=seed,
        n_boot=n_boot,
        confidence=confidence,
        command=command,
        plots=plots,
    )
    import shutil

    shutil.rmtree(cells_dir, ignore_errors=True)  # the results hold every cell now
    return summary


def ray_runner(workers: int | None, address: str | None) -> Callable[..., dict[str, Any]] | None:
    """For ``evaluate.py``: :func:`run_comparison_ray` bound to the flags, or None without Ray.

    Ray is used with ``--workers N`` (N > 1), ``--ray-address`` or ``$RAY_ADDRESS``;
    ``--workers 1`` alone is the single-process run.
    """
    if workers is not None and workers < 1:
        raise RayError(f"--workers must be at least 1, got {workers}")
    if (workers is None or workers == 1) and ray_address(address) is None:
        return None

    def run(*args: Any, **kwargs: Any) -> dict[str, Any]:
        return run_comparison_ray(*args, workers=workers, address=address, **kwargs)

    return run
