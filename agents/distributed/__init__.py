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
# tests/test_layers.py; the modules below carry the edges with absolute imports. Each
# module's ``__all__`` is its public names, re-exported here as they are.
from . import cells, comparison, session
from .cells import *  # noqa: F403
from .comparison import *  # noqa: F403
from .session import *  # noqa: F403

__all__ = [*cells.__all__, *comparison.__all__, *session.__all__]
