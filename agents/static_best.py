"""``static-best``: the best fixed weights and promotion rate for a scenario, by grid search.

An evaluation tool, not a deployable policy: it replays the scenario's
episodes under every configuration of a grid (through the shared rollout
loop, :func:`agents.rollout.run_episodes`) and keeps the best. It lives with
evaluation because it runs rollouts and keeps a disk cache; the policy
registry in :mod:`baselines` holds only policies that decide from what they
observe.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from agents.persist import atomic_write_text
from agents.rollout import run_episodes
from baselines.policies import STATIC_KERNEL, STATIC_RATIOS, HeuristicPolicy
from envs.core import EnvParams, Hardware, make_params
from envs.kernel import auto_interleave_weights, gcd_reduce
from envs.policy import as_policy

__all__ = [
    "DEFAULT_RATES_MBPS",
    "StaticBest",
    "default_cache_dir",
    "static_weight_grid",
]

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]


#: Promotion rate limits searched by ``static-best`` (0 = off; 65536 = kernel default).
DEFAULT_RATES_MBPS: tuple[float, ...] = (0.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 65536.0)


def static_weight_grid(is_cxl: NDArray[np.bool_], bandwidth_gbps: F64) -> I64:
    """Weight vectors (K, N) searched by ``static-best`` for one machine.

    Local-first (all 0), every DRAM node ``a`` and every CXL node ``b`` for
    each ratio ``(a, b)`` of the static family (DRAM only, CXL only, and 1:4 to 32:1),
    and the kernel's auto weights; each reduced by its gcd, duplicates removed (first kept).
    """
    cxl = np.asarray(is_cxl, dtype=bool)
    rows: list[NDArray[np.int64]] = [np.zeros(cxl.size, dtype=np.int64)]
    for a, b in STATIC_RATIOS:
        w = np.where(cxl, b, a).astype(np.int64)
        if w.any():
            rows.append(w)
    rows.append(auto_interleave_weights(np.asarray(bandwidth_gbps, dtype=float)))
    grid = np.stack([gcd_reduce(w) for w in rows])
    _, first = np.unique(grid, axis=0, return_index=True)
    return grid[np.sort(first)]


def default_cache_dir() -> Path:
    """``$TIERGYM_CACHE``, else ``$XDG_CACHE_HOME/tiergym``, else ``~/.cache/tiergym``."""
    if os.environ.get("TIERGYM_CACHE"):
        return Path(os.environ["TIERGYM_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tiergym"


def _model_fingerprint() -> str:
    """Hash of the model's source: a cached search is stale when the model changes."""
    h = hashlib.sha256()
    pkg = resources.files("envs")
    for name in ("model.py", "solver.py", "kernel.py", "spaces.py", "families.py", "core.py"):
        h.update((pkg / name).read_bytes())
    return h.hexdigest()[:16]


class _FixedActions:
    """A policy that plays one fixed action per instance (the static-best grid); what else a
    policy has is :func:`envs.policy.as_policy`'s default (the grid's parameters are built
    with static-best's kernel)."""

    name = "static-grid"

    def __init__(self, actions: NDArray[np.float32]) -> None:
        self.actions = actions

    def predict(self, observation: NDArray, state: Any = None, **_: Any) -> tuple[NDArray, Any]:
        return self.actions, state


class StaticBest(HeuristicPolicy):
    """``static-best``: the best fixed weights and rate for the scenario (grid search).

    An upper bound for any static policy, and an in-sample oracle, not a
    deployable policy: at ``bind`` it evaluates every configuration of the
    grid (:func:`static_weight_grid` x ``rates``: local-first, DRAM only, CXL
    only, DRAM:CXL ratios 1:4..32:1 and the auto weights, times promotion rate
    limits 0..65536 MB/s) on the bound environment's scenario and split, with
    ``n_episodes`` episodes of seeds ``0, 1, ...`` (what
    :func:`agents.rollout.rollout` uses by default), all in ONE batched
    environment of ``configs x n_episodes`` instances, and keeps the
    configuration with the best mean ``geomean_perf``. The search runs when the
    policy first sees the machine (``observe(None, hardware)`` after the reset). Since the grid holds the
    static heuristics' configurations (``dram-first`` = local-first at rate 0,
    ``interleave`` = 1:1, ``weighted-interleave`` = auto, ``numa-tiering`` =
    local-first at 65536) under the same kernel (:data:`STATIC_KERNEL`), it is
    at least as good as each of them on those episodes.

    The result is cached as JSON under ``cache_dir`` (default
    :func:`default_cache_dir`), keyed by a hash of the scenarios' content
    (every scenario of the split's pool), the environment settings, the grid,
    the episodes, the metric and the model's source. Reads no info.

    Args:
        n_episodes: episodes per configuration (8).
        rates_mbps: promotion rate limits of the grid (:data:`DEFAULT_RATES_MBPS`).
        cache_dir: where results are cached (``None``: the default; ``False``: no cache).
    """

    name = "static-best"
    kernel = STATIC_KERNEL
    seed = 0  # the first episode's seed
    metric = "geomean_perf"  # what the search maximises

    def __init__(
        self,
        n_episodes: int = 8,
        rates_mbps: Sequence[float] = DEFAULT_RATES_MBPS,
        cache_dir: str | Path | bool | None = None,
    ) -> None:
        super().__init__()
        if n_episodes < 1:
            raise ValueError(f"static-best n_episodes: got {n_episodes}, expected at least 1")
        self.n_episodes = int(n_episodes)
        self.rates_mbps = tuple(float(r) for r in rates_mbps)
        self.cache_dir = cache_dir
        self.result: dict[str, Any] | None = None
        self.weights = np.zeros(0, dtype=np.int64)
        self.rate_mbps = 0.0
        self.searched = False  # whether the last bind ran the search (False: from the cache)

    def _cache_path(self, key: str) -> Path | None:
        if self.cache_dir is False:
            return None
        d = default_cache_dir() if self.cache_dir in (None, True) else Path(str(self.cache_dir))
        return d / f"static-best-{key}.json"

    def _bound(self) -> None:
        self.result = None  # searched at the first hardware view (the episodes' machine)

    def observe(self, metrics: Any, hardware: Hardware) -> None:
        super().observe(metrics, hardware)
        if self.result is None:
            self._choose(hardware)

    def _choose(self, hw: Hardware) -> None:
        params = self._p()
        fam = params.family
        grid_w = static_weight_grid(hw.is_cxl[0], hw.firmware_gbps[0])
        settings = params.env_kwargs()
        settings.pop("kernel")
        settings.pop("action_type")
        content = hashlib.sha256()
        for i in range(fam.pool_size):
            content.update(fam.scenario(params.split, i).model_dump_json().encode())
        desc = {
            "version": 2,
            "model": _model_fingerprint(),
            "content": content.hexdigest(),
            "settings": settings,
            "kernel": dataclasses.asdict(self.kernel),
            "grid_weights": grid_w.tolist(),
            "grid_rates": list(self.rates_mbps),
            "n_episodes": self.n_episodes,
            "seed": self.seed,
            "metric": self.metric,
        }
        key = hashlib.sha256(json.dumps(desc, sort_keys=True).encode()).hexdigest()[:24]
        path = self._cache_path(key)
        result = None
        if path is not None and path.exists():
            try:
                result = json.loads(path.read_text())
            except (OSError, ValueError):
                result = None
        self.searched = result is None
        if result is None:
            result = self._search(params, grid_w)
            result["key"] = desc
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
                atomic_write_text(path, json.dumps(result, indent=1))
        self.result = result
        self.weights = np.asarray(result["weights"], dtype=np.int64)
        self.rate_mbps = float(result["rate_mbps"])

    def _search(self, params: EnvParams, grid_w: I64) -> dict[str, Any]:
        rates = np.asarray(self.rates_mbps, dtype=float)
        K, R, E = grid_w.shape[0], rates.size, self.n_episodes
        G = K * R
        cfg_w = np.repeat(grid_w, R, axis=0)  # (G, N): weights-major
        cfg_r = np.tile(rates, K)  # (G,)
        kw = params.env_kwargs()
        kw.update(scenario=params.family, action_type="box", kernel=self.kernel)
        grid_params = make_params(**kw)
        codec = grid_params.codec
        rows = codec.n_weight_rows
        w_inst = np.repeat(cfg_w, E, axis=0)[:, None, :].repeat(rows, axis=1)
        actions = codec.encode_box(w_inst, np.repeat(cfg_r, E))
        seeds = np.tile(self.seed + np.arange(E), G)
        stats = run_episodes(as_policy(_FixedActions(actions)), grid_params, seeds)
        score = np.nanmean(stats.metrics()[self.metric].reshape(G, E), axis=1)
        best = int(np.nanargmax(np.where(np.isnan(score), -np.inf, score)))
        return {
            "weights": cfg_w[best].tolist(),
            "rate_mbps": float(cfg_r[best]),
            "score": float(score[best]),
            "metric": self.metric,
            "grid": [
                {
                    "weights": cfg_w[g].tolist(),
                    "rate_mbps": float(cfg_r[g]),
                    "score": float(score[g]),
                }
                for g in range(G)
            ],
        }

    def _decide(self, obs: NDArray) -> tuple[I64, F64]:
        return self._rows(self.weights), np.full(self._B, self.rate_mbps)
