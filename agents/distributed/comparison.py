"""A comparison on Ray: :class:`RayRunner`, the runner of
:func:`agents.evaluation.run_comparison` that runs the grid's cells as Ray tasks.

``run_comparison`` checks everything first; the runner reaches and checks Ray
(:func:`agents.distributed.ray_session`) and runs the cells
(:func:`agents.distributed.run_cells`), writing each as it finishes under
``OUTPUT/cells/``; the records come back in the single-process order and go through the
single-process writer, so ``results.json`` (but for its ``command``), ``results.csv``,
``table.md``, ``leaderboard.md`` and the plots are those of the single-process run with
the same seeds, bit for bit. :func:`ray_runner` binds it to ``evaluate.py``'s flags.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agents.distributed.cells import run_cells
from agents.distributed.session import ray_address, ray_session

__all__ = ["RayRunner", "ray_runner"]


class RayRunner:
    """Runs a comparison's grid as Ray tasks (a :data:`agents.evaluation.Runner`):
    ``run_comparison(..., runner=RayRunner(workers, address))`` gives the outputs of the
    single-process run, bit for bit.

    ``workers``: local Ray CPUs (default all cores), or on a cluster the most cells in
    flight (default its CPUs); ``address``: a Ray cluster (default ``$RAY_ADDRESS``; none:
    Ray in-process on the local cores); ``block_episodes``: episodes per cell (default:
    :func:`agents.distributed.plan_cells`'s). Ray is reached and checked when the grid
    starts, after :func:`agents.evaluation.run_comparison` checked everything else. Policies
    travel to the workers (a trained model with its weights, so nodes need no copy of the
    run folder); each finished cell is written under ``OUTPUT/cells/`` and the folder is
    removed once the records are in.

    Raises:
        ValueError: (:class:`RayError` among them) a bad worker count, an unreachable cluster
            or a node without the package, before any cell runs; or what a cell raised.
    """

    def __init__(
        self,
        workers: int | None = None,
        address: str | None = None,
        block_episodes: int | None = None,
    ) -> None:
        self.workers = workers
        self.address = address
        self.block_episodes = block_episodes

    def __call__(
        self,
        loaded: Sequence[tuple[Any, dict[str, Any]]],
        names: Sequence[str],
        scenarios: Sequence[str],
        episodes: int,
        *,
        cells_dir: Path,
        **options: Any,
    ) -> list[dict[str, Any]]:
        """The records of :func:`agents.distributed.run_cells` (``options``: the runner's
        ``seed``, ``split``, ``record_series``, ``metric`` and ``show_progress``)."""
        with ray_session(self.workers, self.address) as cpus:
            records = run_cells(
                loaded,
                names,
                list(scenarios),
                episodes,
                max_in_flight=self.workers or cpus,
                block_episodes=self.block_episodes,
                cells_dir=cells_dir,
                **options,
            )
        shutil.rmtree(cells_dir, ignore_errors=True)  # the records hold every cell now
        return records


def ray_runner(workers: int | None, address: str | None) -> RayRunner | None:
    """For ``evaluate.py``: a :class:`RayRunner` bound to the flags, or None without Ray.

    Ray is used with ``--workers N`` (N > 1), ``--ray-address`` or ``$RAY_ADDRESS``;
    ``--workers 1`` alone is the single-process run.
    """
    if (workers is None or workers == 1) and ray_address(address) is None:
        return None
    return RayRunner(workers, address)
