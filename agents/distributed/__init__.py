"""Evaluation grids on Ray: the cells of a comparison as Ray tasks, locally or on a cluster.

:class:`RayRunner` is the runner of :func:`agents.evaluation.run_comparison` that cuts the
grid into cells (scenario x policy x seed block) that run as Ray tasks
(:func:`run_cells`), each one batched environment in one worker process; the
outputs are those of the single-process run with the same seeds, bit for bit.
Results are written as cells finish, so a stopped run loses only the cells in
flight and the same command again reuses the finished ones.

The package's modules, each re-exported here:

- :mod:`agents.distributed.session`: :func:`ray_session` (Ray in-process on the
  local cores, or a cluster at ``address`` / ``$RAY_ADDRESS`` after checking it
  answers and every node has the project: :func:`check_nodes`) and
  :class:`RayError`;
- :mod:`agents.distributed.cells`: :class:`Cell`, :func:`plan_cells` (seed blocks
  only for :func:`splittable` policies), :func:`run_cells` and the cell files a
  rerun reuses;
- :mod:`agents.distributed.comparison`: :class:`RayRunner` and :func:`ray_runner`, its
  binding to ``evaluate.py``'s flags.
"""

# Relative imports: a package's own re-exports are not import edges in
# tests/test_layers.py; the modules below carry the edges with absolute imports.
from .cells import MIN_BLOCK, Cell, plan_cells, run_cells, splittable
from .comparison import RayRunner, ray_runner
from .session import (
    CONNECT_TIMEOUT_S,
    EVAL_MODULES,
    RayError,
    check_nodes,
    ray_address,
    ray_session,
)

__all__ = [
    "CONNECT_TIMEOUT_S",
    "EVAL_MODULES",
    "MIN_BLOCK",
    "Cell",
    "RayError",
    "RayRunner",
    "check_nodes",
    "plan_cells",
    "ray_address",
    "ray_runner",
    "ray_session",
    "run_cells",
    "splittable",
]
