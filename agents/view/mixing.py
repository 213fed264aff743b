"""Several bases: which heuristic's decision the agent starts from, and the residual's gate.

With ``K`` bases (``base_policy: [colloid, tpp, weighted-interleave, dram-first, ...]``)
the agent observes every base's action and its action ends with one mixing entry
``m_j`` per base after the first. ``mixing: soft`` runs
``base_0 + sum_j clip(m_j, 0, 1) * (base_j - base_0)`` (the clipped entries scaled to
sum to at most 1): the zero action is the first heuristic, an entry of 1 (the others
at or under 0) is heuristic ``j`` exactly, and anything between moves the decision
part of the way, so a small change of an entry changes the outcome a little and the
gradient can find which heuristic to lean on for which machine and mix (the best
heuristic differs by scenario: ``best-heuristic-per-episode``). ``mixing: hard``
follows one base whole instead: the one with the largest entry above 0, else the
first; a blend of two good bases can be worse than either (interleave weights and
tiering modes do not average), and a policy fitted to pick one
(:mod:`agents.imitation`) is read the way it was fitted. The entries reach the view
clipped to the action space's [-1, 1] (stable-baselines3 clips before the environment), so
entries past 1 tie and the first of them in the list is followed; reading their order
instead was tried and lost on val (docs/experiments/2026-12-07-hard-choice-ties-at-the-clip.md).
Each base sees every step's counters, so each keeps its own controller state while another
is followed.

``residual_bases`` (default: every base) names the bases the residual adjusts; the
residual is scaled by their share of the decision (the gate), so with ``mixing: hard``
a base outside the list runs exactly as that heuristic does whatever the residual
entries hold, and a listed one is the start of the agent's own decision. The plan
labels of the imitation phase (``imitation.plans``, :mod:`agents.imitation`) list
``dram-first`` (local-first, promotion off: a static action) with a scale that spans
the whole box (2.0): following it, the residual IS the agent's per-tenant placement
and rate, fitted to a planner's plans.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = ["Mixed", "hard_choice", "mix_bases"]


@dataclass(frozen=True)
class Mixed:
    """The decision the residual starts from, for a batch of agent actions."""

    #: (B, size) the mixed base action (None without a base)
    base: NDArray | None
    #: (B, n) the agent's actions without the mixing entries, clipped to [-1, 1]
    residual: NDArray
    #: (B, K) each base's share of the decision (None without a base)
    share: NDArray | None
    #: (B, 1) the share of the decision from the bases the residual adjusts, or 1.0
    gate: NDArray | float


def hard_choice(m: NDArray) -> NDArray:
    """``mixing: hard``: the clipped mixing entries (B, K - 1) -> one base whole: 1 at the
    largest entry above 0, else all 0 (the first base)."""
    top = np.argmax(m, axis=1)
    pick = (np.arange(m.shape[1]) == top[:, None]) & (m.max(axis=1) > 0)[:, None]
    return np.where(pick, 1.0, 0.0)


def mix_bases(
    base: NDArray | None, action: NDArray, mixing: str, residual_mask: NDArray[np.bool_]
) -> Mixed:
    """Split the agent's ``action`` (B, ...) into the residual and the mixing entries and mix
    the base actions: ``base`` (B, size) with one base, (B, K, size) with ``K``, or None.

    ``mixing``: ``soft`` or ``hard`` (the module docstring); ``residual_mask`` (K,): the
    bases the residual adjusts (the gate is their share; 1.0 when it adjusts all of them).
    """
    a = np.clip(np.asarray(action, dtype=np.float32).reshape(len(action), -1), -1.0, 1.0)
    if base is None:
        return Mixed(None, a, None, 1.0)
    if base.ndim != 3:
        return Mixed(base, a, np.ones((len(a), 1), dtype=np.float32), 1.0)
    extra = base.shape[1] - 1
    m = np.clip(a[:, a.shape[1] - extra :], 0.0, 1.0)
    if mixing == "hard":
        m = hard_choice(m)
    m /= np.maximum(m.sum(axis=1, keepdims=True), 1.0)
    share = np.concatenate([1.0 - m.sum(axis=1, keepdims=True), m], axis=1)
    mixed = base[:, 0] + np.einsum("bj,bjs->bs", m, base[:, 1:] - base[:, :1])
    gate: NDArray | float = 1.0
    if not residual_mask.all():
        gate = share[:, residual_mask].sum(axis=1, keepdims=True)
    return Mixed(mixed, a[:, : a.shape[1] - extra], share, gate)
