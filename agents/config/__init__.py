"""One schema for everything a training run takes: recipes, command-line flags, run folders.

A **recipe** (:class:`Recipe`, a YAML file in ``agents/recipes/``) holds every setting that
shapes how a policy is trained: the algorithm, its constructor arguments, the policy
network, the agent's view of the environment (``env``) and the imitation phase
(``imitation``). A **run** (:class:`RunConfig`, the run folder's ``config.yml``) is a recipe
resolved against the command line: the task (scenario, split, reward, weights, action
type), the seed, the budget and the evaluation settings (:class:`RunOptions`, the flags).
Sweep files give the same objects (:mod:`agents.sweep`).

Every value is checked by pydantic models here; the rules between options (an algorithm's
constructor arguments, a policy's keyword arguments, the imitation phase's needs) are
model validators of :class:`Recipe` and :class:`RunConfig`, in this file only. A bad value is
one :class:`TrainingError` in one format, ``{source}: {field.path}: expected ... (got ...)``.
"""

# each module's ``__all__`` is its public names, re-exported here as they are
from . import fields, recipe, run
from .fields import *  # noqa: F403
from .recipe import *  # noqa: F403
from .run import *  # noqa: F403

__all__ = [*fields.__all__, *recipe.__all__, *run.__all__]
