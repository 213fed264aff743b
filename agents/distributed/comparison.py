"""A comparison on Ray: :func:`agents.evaluation.run_comparison` with its cells as Ray tasks.

:func:`run_comparison_ray` checks everything the single-process run checks,
reaches and checks Ray (:func:`agents.distributed.ray_session`), runs the
grid's cells (:func:`agents.distributed.run_cells`), writing each as it
finishes under ``OUTPUT/cells/``, then summarises the records, gathered in
the single-process order, with the single-process writer: ``results.json``
(but for its ``command``), ``results.csv``, ``table.md``, ``leaderboard.md``
and the plots are those of the single-process run with the same seeds, bit
for bit. The cell files are removed once the results are written.
:func:`ray_runner` binds it to ``evaluate.py``'s flags.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agents.distributed.cells import run_cells
from agents.distributed.session import RayError, ray_address, ray_session
from agents.evaluation import (
    RECORD_METRICS,
    PolicyError,
    check_output_dir,
    check_runs,
    load_policy,
    trained_on_of,
    write_results,
)

__all__ = ["ray_runner", "run_comparison_ray"]


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
        trained_on=trained_on_of(loaded),
    )
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
