"""The shared evaluation loop: any policy, many episodes, one batched environment.

Heuristic baselines (:mod:`baselines`) and trained agents go through the same
code: a policy is an :class:`envs.policy.Policy` (stable-baselines3's ``predict`` on a
batch, and what that protocol documents). The environment is built with the policy's
``kernel`` and its ``tiering_modes`` (unless ``env_kwargs`` names its own); the policy is
bound to its :class:`~envs.core.EnvParams` and batch size before the first step, and
observes the reset and every step (every instance, including one that just finished).

Two capabilities are protocols of their own: a :class:`~envs.policy.Clairvoyant`
reference (``planner``) is handed the episodes' seeds (``plan_episodes``) after
``bind`` and before the reset, and plans each episode by replaying it (an upper bound,
not a deployable policy); a :class:`~envs.policy.RecordsPolicy`
(``best-heuristic-per-episode``, an oracle over other policies' records) makes its
records itself (``rollout_records``), and :func:`rollout` returns what it returns.
:func:`run_episodes` is the loop itself, on parameters and seeds given by the caller.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from agents.view import environment_config
from baselines import make_policy  # the registry lives with the heuristics
from envs import core
from envs.core import EnvParams, Metrics, ScenarioSpec, kernel_config
from envs.model import KernelConfig
from envs.policy import Clairvoyant, Policy, RecordsPolicy, as_policy

__all__ = ["EpisodeStats", "make_params", "records", "rollout", "run_episodes"]

F64 = NDArray[np.float64]


@dataclass
class EpisodeStats:
    """Sums over the first episode of every instance (arrays batch-first).

    Everything is accumulated with array operations, masked by the instances
    still in their first episode; :meth:`metrics` turns the sums into means.
    """

    scenario_names: list[str]
    tenant_names: list[list[str]]
    steps: NDArray[np.int64]  # (B,) steps of the first episode
    reward: F64  # (B,) sum of rewards
    log_geomean: F64  # (B,) sum of the per-step log-geomean term over steps with a tenant
    tenant_steps: NDArray[np.int64]  # (B,) steps with at least one active tenant
    throughput: F64  # (B,) sum of total throughput
    latency_x: F64  # (B,) sum over steps and tenants of throughput * latency
    promotion: F64  # (B,)
    demotion: F64  # (B,)
    t_active: NDArray[np.int64]  # (B, T) active steps per tenant slot
    t_perf: F64  # (B, T) sums over active steps
    t_throughput: F64
    t_latency: F64
    t_share: F64
    unconverged: NDArray[np.int64]  # (B,) steps whose fixed point missed its tolerance
    series: dict[str, Any] | None = field(default=None)

    @classmethod
    def zeros(
        cls, scenario_names: list[str], tenant_names: list[list[str]], steps: NDArray, T: int
    ) -> EpisodeStats:
        """Empty sums for ``len(steps)`` instances (the ``t_`` ones per tenant slot, (B, T))."""
        sums: dict[str, Any] = {
            f.name: np.zeros(
                (len(steps), T) if f.name.startswith("t_") else len(steps),
                dtype=np.int64 if "int64" in str(f.type) else np.float64,
            )
            for f in dataclasses.fields(cls)
            if f.name not in ("scenario_names", "tenant_names", "steps", "series")
        }
        return cls(scenario_names, tenant_names, steps.astype(np.int64).copy(), **sums)

    def add(self, m: Metrics, reward: F64, live: NDArray[np.bool_]) -> None:
        """Add one step's metrics of the instances still in their first episode (``live``)."""
        w = live.astype(float)
        act = m.tenant_active & live[:, None]
        actf = act.astype(float)
        x = m.tenant_throughput_gbps
        self.reward += w * reward
        has = live & m.tenant_active.any(axis=1)
        self.log_geomean += np.where(has, m.reward_log_geomean, 0.0)
        self.tenant_steps += has
        self.throughput += w * m.total_throughput_gbps
        self.latency_x += (actf * x * m.tenant_latency_ns).sum(axis=1)
        self.promotion += w * m.promotion_mbps
        self.demotion += w * m.demotion_mbps
        self.t_active += act
        self.t_perf += actf * m.tenant_norm_perf
        self.t_throughput += actf * x
        self.t_latency += actf * m.tenant_latency_ns
        self.t_share += actf * m.tenant_dram_access_share
        self.unconverged += live & ~m.solver_converged

    def metrics(self) -> dict[str, F64]:
        """Per-instance episode metrics (B,) under the names of the record contract."""
        n = np.maximum(self.steps, 1)
        tact = np.maximum(self.t_active, 1)
        mean_perf = np.where(self.t_active > 0, self.t_perf / tact, np.inf)
        worst = mean_perf.min(axis=1)
        xsum = self.t_throughput.sum(axis=1)
        return {
            "reward": self.reward.copy(),
            "geomean_perf": np.where(
                self.tenant_steps > 0,
                np.exp(self.log_geomean / np.maximum(self.tenant_steps, 1)),
                np.nan,
            ),
            "throughput_gbps": self.throughput / n,
            "worst_perf": np.where(np.isfinite(worst), worst, np.nan),
            "mean_latency_ns": np.where(
                xsum > 0, self.latency_x / np.maximum(xsum, 1e-300), np.nan
            ),
            "promotion_mbps": self.promotion / n,
            "demotion_mbps": self.demotion / n,
            "unconverged_steps": self.unconverged.astype(float),
        }

    def tenant_metrics(self) -> dict[str, F64]:
        """Per-tenant-slot means over active steps (B, T); NaN for a slot never active."""
        tact = np.maximum(self.t_active, 1)
        on = self.t_active > 0
        return {
            "norm_perf": np.where(on, self.t_perf / tact, np.nan),
            "throughput_gbps": np.where(on, self.t_throughput / tact, np.nan),
            "mean_latency_ns": np.where(on, self.t_latency / tact, np.nan),
            "dram_access_share": np.where(on, self.t_share / tact, np.nan),
        }


def make_params(
    policy: Policy | None,
    scenario: ScenarioSpec,
    split: str = "test",
    env_kwargs: Mapping[str, Any] | None = None,
) -> EnvParams:
    """The evaluation environment's parameters for ``policy``: with ``policy.kernel`` if it is
    set, and ``policy.tiering_modes`` if they are set and ``env_kwargs`` names none (``policy``
    None: the environment ``env_kwargs`` describe).

    Raises:
        ValueError: ``env_kwargs`` names a ``kernel`` that differs from the policy's.
    """
    given = env_kwargs or {}
    # scores come from the policy's own metrics (no twins); a trained model's view (base
    # policy, padding) is the policy's business
    config = environment_config(
        given, scenario=scenario, split=given.get("split", split), reward_baseline=None
    )
    policy = None if policy is None else as_policy(policy)
    pk: KernelConfig | None = None if policy is None else policy.kernel
    if pk is not None:
        if config.kernel is not None and kernel_config(config.kernel) != pk:
            raise ValueError(
                f"env_kwargs['kernel'] = {config.kernel!r} differs from the policy's kernel "
                f"{pk!r}; a heuristic sets its own kernel configuration (drop env_kwargs['kernel'])"
            )
        config = dataclasses.replace(config, kernel=pk)
    modes = None if policy is None else policy.tiering_modes
    if modes is not None and "tiering_modes" not in given:
        config = dataclasses.replace(config, tiering_modes=list(modes))
    return core.make_params(config)


def run_episodes(
    policy: Policy,
    params: EnvParams,
    seeds: Sequence[int] | NDArray[np.integer],
    record_series: bool = False,
) -> EpisodeStats:
    """Step one instance per seed through its first episode under ``policy``.

    The policy is bound to ``(params, len(seeds))`` (and, if it is
    :class:`~envs.policy.Clairvoyant`, handed the seeds to plan) and observes every step's
    metrics; the loop runs until
    the longest first episode ends (finished instances restart and keep
    stepping, outside the sums). With ``record_series`` the first instance's
    per-step series is kept (:func:`rollout` documents its format).
    """
    seeds = np.asarray([int(s) for s in seeds], dtype=np.uint64)
    B, T = seeds.size, params.n_tenants
    policy = as_policy(policy)
    policy.bind(params, B)
    if isinstance(policy, Clairvoyant):  # the planner replays these episodes first
        policy.plan_episodes(seeds)
    state, obs = core.reset(params, seeds)
    policy.observe(None, core.hardware(state))
    inst = state.instance
    node_names = list(params.node_names)
    tenant_names = [list(n) for n in inst.tenant_names]
    st = EpisodeStats.zeros(list(inst.scenario_names), tenant_names, inst.episode_steps, T)
    series: dict[str, Any] | None = None
    if record_series:
        series = _new_series(tenant_names[0], node_names, params.codec.weights == "global")
    live = np.ones(B, dtype=bool)
    start = np.ones(B, dtype=bool)
    pstate: Any = None
    k = 0
    while live.any():
        action, pstate = policy.predict(obs, state=pstate, episode_start=start, deterministic=True)
        state, obs, reward, term, trunc, m, _ = core.step_autoreset(
            params, state, np.asarray(action)
        )
        policy.observe(m, core.hardware(state))
        st.add(m, reward, live)
        if series is not None and live[0]:
            _append_series(series, k, m, tenant_names[0], node_names)
        done = term | trunc
        start = done
        live &= ~done
        k += 1
    st.series = series
    return st


def _new_series(tenants: list[str], nodes: list[str], global_weights: bool) -> dict[str, Any]:
    labels = nodes if global_weights else [f"{t}/{n}" for t in tenants if t for n in nodes]
    return {
        "t": [],
        "tenants": {t: {"norm_perf": [], "dram_access_share": []} for t in tenants if t},
        "weights": {lab: [] for lab in labels},
        "promotion_rate_mbps": [],
    }


def _append_series(
    series: dict[str, Any], k: int, info: Metrics, tenants: list[str], nodes: list[str]
) -> None:
    series["t"].append(k)
    active = info["tenant_active"][0]
    w = info["interleave_weights"][0]  # (T, N) integer weights in force
    for i, name in enumerate(tenants):
        if not name:
            continue
        on = bool(active[i])
        tv = series["tenants"][name]
        tv["norm_perf"].append(float(info["tenant_norm_perf"][0, i]) if on else None)
        tv["dram_access_share"].append(
            float(info["tenant_dram_access_share"][0, i]) if on else None
        )
    for lab in series["weights"]:
        if "/" in lab:
            t, n = lab.rsplit("/", 1)
            series["weights"][lab].append(int(w[tenants.index(t), nodes.index(n)]))
        else:
            series["weights"][lab].append(int(w[0, nodes.index(lab)]))
    series["promotion_rate_mbps"].append(float(info["promote_rate_mbps"][0]))


def _finite(v: float) -> float | None:
    return float(v) if math.isfinite(v) else None


def records(
    stats: EpisodeStats, scenario: str, policy: str, seeds: Sequence[int]
) -> list[dict[str, Any]]:
    """One record per instance (the contract documented in :func:`rollout`)."""
    met = stats.metrics()
    tmet = stats.tenant_metrics()
    out: list[dict[str, Any]] = []
    for i, s in enumerate(seeds):
        tenants: dict[str, dict[str, float | None]] = {}
        for j, name in enumerate(stats.tenant_names[i]):
            if name and stats.t_active[i, j] > 0:
                tenants[name] = {k: _finite(v[i, j]) for k, v in tmet.items()}
        rec: dict[str, Any] = {
            "scenario": scenario,
            "instance": stats.scenario_names[i],
            "policy": policy,
            "seed": int(s),
            "episode": i,
            "metrics": {k: _finite(v[i]) for k, v in met.items()},
            "tenants": tenants,
        }
        if i == 0 and stats.series is not None:
            rec["series"] = stats.series
        out.append(rec)
    return out


def rollout(
    policy: Policy | RecordsPolicy | Any | str,
    scenario: ScenarioSpec,
    n_episodes: int,
    seed: int = 0,
    split: str = "test",
    env_kwargs: Mapping[str, Any] | None = None,
    record_series: bool = False,
    policy_name: str | None = None,
) -> list[dict[str, Any]]:
    """Evaluate ``policy`` on ``n_episodes`` episodes of ``scenario``, vectorized over episodes.

    ``policy`` is an object with the ``predict`` protocol (see the module
    docstring) or a baseline name (``baselines.make_policy``). One batch of
    ``n_episodes`` instances of the environment core is built with the
    policy's ``kernel`` (if any) and ``env_kwargs`` (reward,
    weights mode, max_tenants, ... as a trained model dictates), reset with
    ``seed`` so instance ``i`` gets seed ``seed + i``, and every instance runs
    exactly its first episode (``params.episode_steps`` long).

    Returns one record per episode::

        {"scenario": str,          # the scenario/family asked for ("mixed", "kv-store", ...)
         "instance": str,          # the scenario the instance ran (e.g. "mixed-test-17")
         "policy": str, "seed": int, "episode": int,
         "metrics": {"reward", "geomean_perf", "throughput_gbps", "worst_perf",
                     "mean_latency_ns", "promotion_mbps", "demotion_mbps",
                     "unconverged_steps"},
         "tenants": {name: {"norm_perf", "throughput_gbps", "mean_latency_ns",
                            "dram_access_share"}},
         "series": {...}}          # first record only, with record_series=True

    Metrics: ``reward`` the sum of rewards; ``geomean_perf`` the exp of the mean,
    over steps with an active tenant, of the per-step log-geomean term
    (``info["reward_log_geomean"]``); ``throughput_gbps``, ``promotion_mbps``,
    ``demotion_mbps`` means over the episode's steps; ``worst_perf`` the worst
    tenant's mean normalised performance over its active steps;
    ``mean_latency_ns`` the throughput-weighted mean tenant latency;
    ``unconverged_steps`` the steps whose fixed point missed the solver's
    tolerance (a warning is issued when any did). Tenants'
    values are means over their active steps (tenants never active are left
    out). A value that cannot be computed is ``None``.

    ``series`` (first episode): ``{"t": [step, ...], "tenants": {name:
    {"norm_perf": [...], "dram_access_share": [...]}}, "weights": {label:
    [...]}, "promotion_rate_mbps": [...]}`` as ``agents.report.plot_timeseries``
    takes it; tenant values are ``None`` while the tenant is not running;
    weights are the integer interleave weights in force (0 everywhere means
    local-first), labelled ``"tenant/node"`` (``"node"`` with global weights);
    ``promotion_rate_mbps`` is the rate limit set.
    """
    if n_episodes < 1:
        raise ValueError(f"n_episodes: got {n_episodes}, expected at least 1")
    if isinstance(policy, RecordsPolicy):  # an oracle over other policies' records
        return list(
            policy.rollout_records(
                scenario, n_episodes, seed, split, env_kwargs, record_series, policy_name
            )
        )
    p = make_policy(policy) if isinstance(policy, str) else as_policy(policy)
    params = make_params(p, scenario, split, env_kwargs)
    seeds = [seed + i for i in range(n_episodes)]
    stats = run_episodes(p, params, seeds, record_series=record_series)
    name = policy_name or p.name
    scen = scenario if isinstance(scenario, str) else params.family.name
    bad = int(stats.unconverged.sum())
    if bad:
        warnings.warn(
            f"{name} on {scen}: the fixed point missed its tolerance in {bad} of "
            f"{int(stats.steps.sum())} steps (records: metrics['unconverged_steps']); "
            "those steps' numbers are approximate",
            RuntimeWarning,
            stacklevel=2,
        )
    return records(stats, scen, name, seeds)
