"""The shared evaluation loop: any policy, many episodes, one batched environment.

Heuristic baselines (:mod:`baselines`) and trained agents go through the same
code. A policy answers stable-baselines3's ``predict``::

    policy.predict(observation, state=None, episode_start=None, deterministic=True)
        -> (action, state)

on a batch (``observation`` (B, obs_dim) -> ``action`` (B, act_dim)). Optional
parts of the protocol, used when present:

- ``policy.kernel``: the :class:`~envs.model.KernelConfig` its system sets; the
  environment is built with it;
- ``policy.bind(env)``: called with the evaluation environment before the first
  step (a heuristic reads the node layout, codec and tenant slots there);
- ``policy.observe(info)``: called after every step with the step's batched
  ``info`` (arrays, batch first, every instance, including one that just
  finished: :func:`step_info`), as a kernel policy reads its counters;
- ``policy.name``: the name written in the records.

:func:`rollout` runs ``n_episodes`` episodes as ``n_episodes`` instances of one
:class:`~envs.gym_env.TieredMemoryVecEnv` (instance ``i`` gets seed ``seed + i``:
every policy sees the same scenarios and seeds) and steps every instance
through exactly its first episode. :func:`run_episodes` is the loop itself, on
an environment and seeds given by the caller (``static-best`` evaluates its
whole grid in one call).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from envs.gym_env import ScenarioSpec, TieredMemoryVecEnv
from envs.model import KernelConfig

__all__ = ["EpisodeStats", "make_env", "records", "rollout", "run_episodes", "step_info"]

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
    series: dict[str, Any] | None = field(default=None)

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


def make_env(
    policy: Any,
    scenario: ScenarioSpec,
    num_envs: int,
    split: str = "test",
    env_kwargs: Mapping[str, Any] | None = None,
) -> TieredMemoryVecEnv:
    """The evaluation environment for ``policy``: built with ``policy.kernel`` if it has one.

    Raises:
        ValueError: ``env_kwargs`` names a ``kernel`` that differs from the policy's.
    """
    kw = dict(env_kwargs or {})
    pk: KernelConfig | None = getattr(policy, "kernel", None)
    if pk is not None:
        asked = kw.get("kernel")
        if isinstance(asked, Mapping):
            asked = KernelConfig(**asked)
        if asked is not None and asked != pk:
            raise ValueError(
                f"env_kwargs['kernel'] = {kw['kernel']!r} differs from the policy's kernel {pk!r}; "
                "a heuristic sets its own kernel configuration (drop env_kwargs['kernel'])"
            )
        kw["kernel"] = pk
    return TieredMemoryVecEnv(num_envs=num_envs, scenario=scenario, split=split, **kw)


def run_episodes(
    policy: Any,
    env: TieredMemoryVecEnv,
    seeds: Sequence[int] | NDArray[np.integer],
    record_series: bool = False,
    deterministic: bool = True,
) -> EpisodeStats:
    """Step every instance of ``env`` through its first episode under ``policy``.

    ``seeds`` (one per instance) go to ``env.reset``. The policy is bound to
    ``env`` if it has ``bind`` and observes every step's info if it has
    ``observe``; the loop runs until the longest first episode ends (finished
    instances autoreset and keep stepping, outside the sums). With
    ``record_series`` the first instance's per-step series is kept
    (:func:`rollout` documents its format).
    """
    if hasattr(policy, "bind"):
        policy.bind(env)
    obs, _ = env.reset(seed=[int(s) for s in seeds])
    e = env.engine
    B, T = env.num_envs, e.T
    node_names = list(e.node_names)
    tenant_names = [list(n) for n in e.params.tenant_names]
    scenario_names = list(e.params.scenario_names)
    steps = e.params.episode_steps.astype(np.int64).copy()
    observe = getattr(policy, "observe", None)
    z = np.zeros(B)
    zt = np.zeros((B, T))
    st = EpisodeStats(
        scenario_names=scenario_names,
        tenant_names=tenant_names,
        steps=steps,
        reward=z.copy(),
        log_geomean=z.copy(),
        tenant_steps=np.zeros(B, dtype=np.int64),
        throughput=z.copy(),
        latency_x=z.copy(),
        promotion=z.copy(),
        demotion=z.copy(),
        t_active=np.zeros((B, T), dtype=np.int64),
        t_perf=zt.copy(),
        t_throughput=zt.copy(),
        t_latency=zt.copy(),
        t_share=zt.copy(),
    )
    series: dict[str, Any] | None = None
    if record_series:
        series = _new_series(tenant_names[0], node_names, e.codec.weights == "global")
    live = np.ones(B, dtype=bool)
    start = np.ones(B, dtype=bool)
    state: Any = None
    k = 0
    while live.any():
        action, state = policy.predict(
            obs, state=state, episode_start=start, deterministic=deterministic
        )
        obs, reward, term, trunc, _ = env.step(np.asarray(action))
        info = env.engine.last_info  # every instance, finished ones included
        if observe is not None:
            observe(info)
        m = live.astype(float)
        act = info["tenant_active"] & live[:, None]
        actf = act.astype(float)
        x = info["tenant_throughput_gbps"]
        st.reward += m * reward
        has = live & info["tenant_active"].any(axis=1)
        st.log_geomean += np.where(has, info["reward_log_geomean"], 0.0)
        st.tenant_steps += has
        st.throughput += m * info["total_throughput_gbps"]
        st.latency_x += (actf * x * info["tenant_latency_ns"]).sum(axis=1)
        st.promotion += m * info["promotion_mbps"]
        st.demotion += m * info["demotion_mbps"]
        st.t_active += act
        st.t_perf += actf * info["tenant_norm_perf"]
        st.t_throughput += actf * x
        st.t_latency += actf * info["tenant_latency_ns"]
        st.t_share += actf * info["tenant_dram_access_share"]
        if series is not None and live[0]:
            _append_series(series, k, info, tenant_names[0], node_names)
        done = term | trunc
        start = done
        live &= ~done
        k += 1
    st.series = series
    return st


def step_info(infos: Mapping[str, Any]) -> dict[str, Any]:
    """The step's metrics for every instance, batch-first, from a vector env's ``infos``.

    In ``SAME_STEP`` autoreset an instance that finished holds its step's
    metrics in ``infos["final_info"]`` (its top-level entries are its reset
    info); this merges them back so every key of the environment's info table
    is one array over all instances. Mask entries (``_key``) and reset entries
    are dropped.
    """
    final = infos.get("final_info")
    out: dict[str, Any] = {}
    if final is None:
        for k, v in infos.items():
            if not k.startswith("_") and k not in ("final_obs", "scenario", "tenant_names"):
                out[k] = v
        return out
    mask = np.asarray(infos["_final_info"], dtype=bool)
    for k, v in final.items():
        if k.startswith("_"):
            continue
        top = infos.get(k)
        if top is None:
            out[k] = v
        else:
            out[k] = np.where(mask.reshape((-1,) + (1,) * (np.ndim(v) - 1)), v, top)
    return out


def _new_series(tenants: list[str], nodes: list[str], global_weights: bool) -> dict[str, Any]:
    labels = nodes if global_weights else [f"{t}/{n}" for t in tenants if t for n in nodes]
    return {
        "t": [],
        "tenants": {t: {"norm_perf": [], "dram_access_share": []} for t in tenants if t},
        "weights": {lab: [] for lab in labels},
        "promotion_rate_mbps": [],
    }


def _append_series(
    series: dict[str, Any], k: int, info: Mapping[str, Any], tenants: list[str], nodes: list[str]
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
    policy: Any,
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
    docstring) or a baseline name (``baselines.make_policy``). One
    :class:`~envs.gym_env.TieredMemoryVecEnv` with ``num_envs=n_episodes`` is
    built with the policy's ``kernel`` (if any) and ``env_kwargs`` (reward,
    weights mode, max_tenants, ... as a trained model dictates), reset with
    ``seed`` so instance ``i`` gets seed ``seed + i``, and every instance runs
    exactly its first episode (``params.episode_steps`` long).

    Returns one record per episode::

        {"scenario": str,          # the scenario/family asked for ("mixed", "kv-store", ...)
         "instance": str,          # the scenario the instance ran (e.g. "mixed-test-17")
         "policy": str, "seed": int, "episode": int,
         "metrics": {"reward", "geomean_perf", "throughput_gbps", "worst_perf",
                     "mean_latency_ns", "promotion_mbps", "demotion_mbps"},
         "tenants": {name: {"norm_perf", "throughput_gbps", "mean_latency_ns",
                            "dram_access_share"}},
         "series": {...}}          # first record only, with record_series=True

    Metrics: ``reward`` the sum of rewards; ``geomean_perf`` the exp of the mean,
    over steps with an active tenant, of the per-step log-geomean term
    (``info["reward_log_geomean"]``); ``throughput_gbps``, ``promotion_mbps``,
    ``demotion_mbps`` means over the episode's steps; ``worst_perf`` the worst
    tenant's mean normalised performance over its active steps;
    ``mean_latency_ns`` the throughput-weighted mean tenant latency. Tenants'
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
    if isinstance(policy, str):
        from baselines import make_policy  # the registry lives with the heuristics

        policy = make_policy(policy)
    env = make_env(policy, scenario, n_episodes, split, env_kwargs)
    seeds = [seed + i for i in range(n_episodes)]
    stats = run_episodes(policy, env, seeds, record_series=record_series)
    name = policy_name or getattr(policy, "name", None) or type(policy).__name__
    scen = scenario if isinstance(scenario, str) else env.engine.family.name
    return records(stats, scen, name, seeds)
