"""Kernel-style heuristic baselines for TierGym, behind the stable-baselines3 ``predict`` protocol.

- :mod:`baselines.catalogue`: every named policy declared once with what it is (heuristic
  with its source, lower or upper bound, deployable, compared by default); every list of
  policies is a query of it. ``static-best`` (a search over the static family) and
  ``best-heuristic-per-episode`` (an oracle over the heuristics' records) are in it and live
  with evaluation (:mod:`agents.static_best`, :mod:`agents.oracles`);
- :func:`make_policy` builds a baseline of this package by name (:func:`policy_names`: the
  heuristics, ``random``, the clairvoyant ``planner`` and ``static:W1:W2[:...][@RATE]``);
- :mod:`baselines.policies`: the policies (what each does, its source, its mapping onto
  the environment; the table is in ``baselines/README.md``);
- :mod:`baselines.algorithms`: each system's decision logic, independent of the environment;
- :mod:`baselines.placement`: a weight row's DRAM share and the weights that give it (the
  planner's range, ``SHARE_TOP``), shared by the policies, the planner and the agent's view;
- ``python evaluate.py``: every baseline's score on every shipped scenario.

Layers import one way: ``envs`` <- ``baselines`` <- ``agents``. Evaluate with
:func:`agents.rollout.rollout`.
"""

from baselines import catalogue
from baselines.planner import Planner
from baselines.policies import (
    STATIC_KERNEL,
    TPP,
    TPP_KERNEL,
    BandwidthAwareInterleave,
    CaptionPolicy,
    ColloidPolicy,
    DamonTiering,
    HeuristicPolicy,
    Interleave,
    LocalFirst,
    MemcgFair,
    NumaTiering,
    RandomPolicy,
    StaticWeights,
    WeightedInterleave,
    make_policy,
    policy_names,
)

__all__ = [
    "STATIC_KERNEL",
    "TPP",
    "TPP_KERNEL",
    "BandwidthAwareInterleave",
    "CaptionPolicy",
    "ColloidPolicy",
    "DamonTiering",
    "HeuristicPolicy",
    "Interleave",
    "LocalFirst",
    "MemcgFair",
    "NumaTiering",
    "Planner",
    "RandomPolicy",
    "StaticWeights",
    "WeightedInterleave",
    "catalogue",
    "make_policy",
    "policy_names",
]
