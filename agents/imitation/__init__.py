"""Warm start of a policy over several bases: imitate the best base, or plan, per episode.

With ``base_policy`` listing several heuristics (:mod:`agents.view`), the
agent's mixing entries decide which heuristic's decision it follows. Which one
is best depends on the machine and the tenant mix (``best-heuristic-per-episode``
shows how much that choice is worth); :func:`warm_start` gives the choice a
supervised start, as its own trainer (:mod:`~agents.imitation.dagger` says how).

The parts:

- :mod:`~agents.config.imitation`: :class:`ImitationSettings`, every value the
  warm start reads (from the training recipe);
- :mod:`~agents.imitation.objective`: the episode score of the run's reward that
  ranks the experts and that the planner maximises;
- :mod:`~agents.imitation.experts`: each base at its corner and the planner's
  plans (or, ``teacher: mpc``, the causal mpc's actions), run through the agent's interface;
- :mod:`~agents.imitation.dataset`: the labels, targets and recorded observations;
- :mod:`~agents.imitation.bc`: the behaviour-cloning fit;
- :mod:`~agents.imitation.dagger`: :func:`warm_start`, the first fit and the
  DAgger rounds;
- :mod:`~agents.imitation.checkpoint`: what a warm start saves to resume from.
"""

from __future__ import annotations

from agents.config.imitation import ImitationSettings, PlanSearch

# each module's ``__all__`` is its public names, re-exported here as they are
from . import bc, checkpoint, dagger, dataset, experts, objective
from .bc import *  # noqa: F403
from .checkpoint import *  # noqa: F403
from .dagger import *  # noqa: F403
from .dataset import *  # noqa: F403
from .experts import *  # noqa: F403
from .objective import *  # noqa: F403

__all__ = [
    "ImitationSettings",
    "PlanSearch",
    *bc.__all__,
    *checkpoint.__all__,
    *dagger.__all__,
    *dataset.__all__,
    *experts.__all__,
    *objective.__all__,
]
