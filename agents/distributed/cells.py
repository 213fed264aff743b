"""The cells of an evaluation grid and their execution as Ray tasks.

A cell (:class:`Cell`) is ``n`` episodes of one policy on one scenario, run by
:func:`_cell_task` in one Ray worker process as one batched environment: Ray
distributes whole rollouts, never single environment steps. :func:`plan_cells`
cuts the grid into cells in the single-process order (scenario, then policy,
then seed block) and :func:`run_cells` runs them, at most ``max_in_flight`` at
once, and gathers the records in that order.

Seed blocks: a run of ``n`` episodes from seed ``s`` is cut into blocks
``[s, s+k), [s+k, s+2k), ...`` only for policies whose action for an instance
depends on that instance alone: the deterministic heuristics (:func:`splittable`).
The environment core is deterministic per instance seed and its batch
composition does not change an instance's numbers, but ``random`` draws one
batch of actions from one generator, ``static-best`` searches its grid on the
first instance's machine, and a trained network's batched matrix products
round differently for some batch sizes; those policies run each (scenario,
policy) as one cell. Blocks are only made when there are fewer runs than twice
the workers (a block of fewer than :data:`MIN_BLOCK` episodes costs more in
per-step overhead than it gains), or when ``block_episodes`` asks for them.

Cell files: with a ``cells_dir``, each finished cell is written there
(``cell-NNNNN.json``, each file whole or absent), keyed by its inputs (policy,
scenario, seeds, the code of ``envs``, ``baselines`` and ``agents``), and a
rerun reuses every cell whose key is unchanged.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

import agents
import baselines
import envs
from agents.evaluation import mean_score
from agents.persist import atomic_write_text
from agents.rollout import rollout
from agents.static_best import StaticBest
from agents.view import LearnedPolicy
from baselines.policies import HeuristicPolicy, RandomPolicy

__all__ = ["MIN_BLOCK", "Cell", "plan_cells", "run_cells", "splittable"]

#: Fewest episodes in a seed block made automatically (see the module docstring).
MIN_BLOCK = 64

#: A cell's records, as :func:`agents.evaluation.compare` makes them.
_Records = list[dict[str, Any]]


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


# --------------------------------------------------------------------------- planning


def splittable(policy: Any) -> bool:
    """Whether ``policy``'s episodes may be cut into seed blocks without changing a number.

    True for the deterministic heuristics (an instance's action depends on
    that instance alone); False for ``random`` (one generator draws the whole
    batch), ``static-best`` (its grid is read off the first instance's
    machine), trained networks (batched float products round differently for
    some batch sizes) and anything unknown.
    """
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


# --------------------------------------------------------------------------- the task


def _cell_task(
    blob: bytes,
    name: str,
    scenario: str,
    start: int,
    n: int,
    seed: int,
    split: str,
    record_series: bool,
) -> tuple[_Records, list[tuple[str, str]], float]:
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


def _task_result(ref: Any) -> tuple[_Records, list[tuple[str, str]], float]:
    """A finished task's ``(records, warnings, seconds)``; a cell's ValueError raised as it is."""
    import ray

    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, ValueError):
            raise cause from None
        raise


def _reissue(warns: Sequence[tuple[str, str]], issued: set[tuple[str, str]]) -> None:
    """Issue the warnings a cell caught again, each once per run, at :func:`run_cells`' caller."""
    for category, message in warns:
        if (category, message) not in issued:
            issued.add((category, message))
            cat = RuntimeWarning if category == "RuntimeWarning" else UserWarning
            warnings.warn(message, cat, stacklevel=3)


def _progress_line(
    cell: Cell, recs: _Records, secs: float, seed: int, metric: str, done: int, total: int
) -> str:
    """The line printed for a finished cell: its seeds, its mean ``metric``, its time."""
    score = mean_score(recs, metric) if recs and metric in recs[0]["metrics"] else math.nan
    return (
        f"[{done}/{total}] {cell.scenario} / {cell.name} "
        f"seeds {seed + cell.start}-{seed + cell.start + cell.n - 1}: "
        f"{metric} {score:.4f} ({secs:.1f} s)"
    )


# --------------------------------------------------------------------------- cell files


def _source_fingerprint() -> str:
    """Hash of the code and data that make the numbers (envs, baselines, agents)."""
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
        if isinstance(policy, LearnedPolicy):
            for k, v in policy.model.policy.state_dict().items():
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
    """The digest of everything a cell's records depend on; None for a policy of unknown identity.

    ``series``: the run records series (only a run's first cell keeps them).
    """
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


def _cell_path(out: Path, cell: Cell) -> Path:
    return out / f"cell-{cell.index:05d}.json"


def _finished_cells(
    cells: Sequence[Cell], keys: dict[int, str | None], out: Path
) -> dict[int, _Records]:
    """The records of the cells already written in ``out`` with their current key, by cell index.

    A file that does not parse, or was written for other inputs, is left to be run again.
    """
    results: dict[int, _Records] = {}
    for c in cells:
        path = _cell_path(out, c)
        if keys[c.index] is not None and path.is_file():
            try:
                saved = json.loads(path.read_text())
            except ValueError:
                continue
            if saved.get("key") == keys[c.index]:
                results[c.index] = saved["records"]
    return results


# --------------------------------------------------------------------------- running


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

    Ray must be initialised (:func:`agents.distributed.ray_session`). ``loaded`` are
    ``(policy, env_kwargs)`` pairs as :func:`agents.evaluation.load_policy`
    returns them, named ``names``. At most ``max_in_flight`` cells run at once.
    With ``cells_dir`` each finished cell is written there at once, and cells
    already there with the same inputs are reused instead of run. With
    ``show_progress``: one line per finished cell and a progress bar.

    Raises:
        ValueError: (:class:`agents.evaluation.PolicyError` among them) what a cell raised, e.g.
            a model whose spaces do not fit a scenario.
    """
    import ray
    import ray.cloudpickle as cloudpickle

    can_split = [splittable(p) for p, _ in loaded]
    cells = plan_cells(names, can_split, scenarios, episodes, max_in_flight, block_episodes)
    results: dict[int, _Records] = {}
    keys: dict[int, str | None] = {}
    out = Path(cells_dir) if cells_dir is not None else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        code, ids = _source_fingerprint(), [_policy_identity(item) for item in loaded]
        keys = {
            c.index: _cell_key(c, ids[c.policy], seed, split, record_series, code) for c in cells
        }
        results = _finished_cells(cells, keys, out)
    bar = tqdm(total=len(cells), desc="cells", disable=not show_progress)
    if results and show_progress:
        tqdm.write(f"reusing {len(results)} finished cell(s) from {out}", file=sys.stderr)
        bar.update(len(results))
    refs = [ray.put(cloudpickle.dumps(item)) for item in loaded]  # sent once, not per cell
    task = ray.remote(num_cpus=1)(_cell_task)
    pending: dict[Any, Cell] = {}
    queue = [c for c in cells if c.index not in results]
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
                recs, warns, secs = _task_result(ref)
                _reissue(warns, issued)
                results[c.index] = recs
                if out is not None:  # whole or not at all: its key, the cell, its records
                    saved = {"key": keys.get(c.index), "cell": c.__dict__, "records": recs}
                    atomic_write_text(_cell_path(out, c), json.dumps(saved))
                if show_progress:
                    line = _progress_line(c, recs, secs, seed, metric, len(results), len(cells))
                    tqdm.write(line, file=sys.stderr)
                bar.update(1)
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)
        bar.close()
    return [r for c in cells for r in results[c.index]]
