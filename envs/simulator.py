"""A small stateful handle on the batched model: load, reset, step, read.

Example::

    from envs import Simulator, load_scenario

    sim = Simulator(load_scenario("kv-store"), batch_size=64, seeds=range(64))
    out = sim.step(weights=[3, 1], promote_mbps=256.0)   # same action everywhere
    out.tenant_norm_perf.shape                          # (64, tenants)

``weights`` may be a vector over the nodes (every tenant of every element),
an array (tenants, nodes), or (batch, tenants, nodes); ``promote_mbps`` a
number or a (batch,) array. The functional core (:func:`envs.model.step`) is
what this wraps; use it directly to copy, branch or replay states.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from envs.model import (
    Action,
    KernelConfig,
    Outputs,
    Params,
    State,
    compile_params,
    init_state,
    step,
)
from envs.scenario import Scenario, load_scenario

__all__ = ["Simulator"]


class Simulator:
    """A batch of ``batch_size`` machines running one scenario (or one scenario each)."""

    def __init__(
        self,
        scenario: Scenario | str | Path | dict[str, Any] | Sequence[Scenario],
        batch_size: int | None = None,
        seeds: Iterable[int] | int | None = None,
        kernel: KernelConfig | Sequence[KernelConfig] | None = None,
        jitter: float = 0.0,
        n_tenants: int | None = None,
    ) -> None:
        if isinstance(scenario, Sequence) and not isinstance(scenario, str | Path):
            scs = [load_scenario(s) for s in scenario]
            if batch_size is not None and batch_size != len(scs):
                raise ValueError(f"batch_size={batch_size} but {len(scs)} scenarios were given")
        else:
            scs = [load_scenario(scenario)] * (batch_size or 1)
        self.batch_size = len(scs)
        self.scenarios = scs
        self.seeds = self._seeds(seeds)
        self.params: Params = compile_params(
            scs,
            n_tenants=n_tenants,
            kernel=kernel or KernelConfig(),
            jitter=jitter,
            seeds=self.seeds,
        )
        self.state: State = init_state(self.params, self.seeds)
        self.last: Outputs | None = None

    def _seeds(self, seeds: Iterable[int] | int | None) -> np.ndarray:
        if seeds is None:
            return np.arange(self.batch_size, dtype=np.uint64)
        if isinstance(seeds, int | np.integer):
            return np.arange(self.batch_size, dtype=np.uint64) + np.uint64(seeds)
        arr = np.asarray(list(seeds), dtype=np.uint64)
        if arr.shape != (self.batch_size,):
            raise ValueError(
                f"seeds: got {arr.shape[0]} seeds, expected one per batch element ({self.batch_size})"
            )
        return arr

    @property
    def node_names(self) -> list[str]:
        return self.params.node_names

    @property
    def tenant_names(self) -> list[list[str]]:
        return self.params.tenant_names

    @property
    def done(self) -> np.ndarray:
        """(B,) True where the episode has run its ``episode_steps``."""
        return self.state.t >= self.params.episode_steps

    def reset(self, seeds: Iterable[int] | int | None = None) -> None:
        """Start new episodes (the same seeds unless given)."""
        if seeds is not None:
            self.seeds = self._seeds(seeds)
        self.state = init_state(self.params, self.seeds)
        self.last = None

    def action(self, weights: ArrayLike, promote_mbps: ArrayLike = 0.0) -> Action:
        """Broadcast a compact action to the batch shapes."""
        b, t, n = self.batch_size, self.params.n_tenants, self.params.n_nodes
        w = np.asarray(weights, dtype=float)
        if w.ndim == 1:
            if w.shape != (n,):
                raise ValueError(
                    f"weights: got {w.shape[0]} values, expected one per node {self.node_names}"
                )
            w = np.broadcast_to(w, (b, t, n))
        elif w.ndim == 2:
            if w.shape != (t, n):
                raise ValueError(
                    f"weights: got shape {w.shape}, expected (tenants, nodes) = {(t, n)}"
                )
            w = np.broadcast_to(w, (b, t, n))
        r = np.broadcast_to(np.asarray(promote_mbps, dtype=float), (b,))
        return Action(weights=np.array(w), promote_mbps=np.array(r))

    def step(self, weights: ArrayLike | Action, promote_mbps: ArrayLike = 0.0) -> Outputs:
        """Advance one interval and return its outputs."""
        act = weights if isinstance(weights, Action) else self.action(weights, promote_mbps)
        self.state, self.last = step(self.params, self.state, act)
        return self.last

    def run(
        self, weights: ArrayLike | Action, promote_mbps: ArrayLike = 0.0, steps: int | None = None
    ) -> list[Outputs]:
        """Step a fixed action for ``steps`` intervals (default: the episode)."""
        n = int(self.params.episode_steps.max()) if steps is None else steps
        return [self.step(weights, promote_mbps) for _ in range(n)]
