"""Fair comparison of policies: one code path for heuristics and trained agents.

``evaluate.py`` and the end of ``train.py`` call :func:`compare`: every policy
runs on the same scenarios with the same seeds (common random numbers),
vectorized over episodes (:func:`agents.rollout.rollout`), and the records are
summarised by :mod:`agents.report`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agents.rollout import rollout
from agents.training import ENV_KEYS, TrainingError, load_trained

__all__ = ["LearnedPolicy", "PolicyError", "compare", "load_policy"]


class PolicyError(ValueError):
    """A policy that cannot be used: unknown name, missing or corrupt model, wrong spaces."""


def _baseline_names() -> list[str]:
    from baselines import policy_names

    return list(policy_names())


class LearnedPolicy:
    """A trained stable-baselines3 model behind the rollout protocol.

    ``env_kwargs`` are the env settings it was trained with (reward, action and
    observation layout, tenant slots, kernel); evaluation builds its
    environment with them so the spaces match, and :meth:`bind` checks they do.
    """

    def __init__(self, model: Any, env_kwargs: dict[str, Any], name: str, source: str) -> None:
        self.model = model
        self.env_kwargs = env_kwargs
        self.name = name
        self.source = source

    def bind(self, env: Any) -> None:
        want_obs, want_act = self.model.observation_space, self.model.action_space
        got_obs, got_act = env.single_observation_space, env.single_action_space
        if (
            want_obs.shape != got_obs.shape
            or type(want_act) is not type(got_act)
            or want_act.shape != got_act.shape
        ):
            raise PolicyError(
                f"model {self.source!r} was trained for observations {want_obs.shape} and actions "
                f"{type(want_act).__name__}{want_act.shape}, but this scenario gives observations "
                f"{got_obs.shape} and actions {type(got_act).__name__}{got_act.shape} "
                f"(tenant slots, nodes or action type differ)"
            )

    def predict(
        self,
        observation: Any,
        state: Any = None,
        episode_start: Any = None,
        deterministic: bool = True,
    ) -> Any:
        return self.model.predict(
            observation, state=state, episode_start=episode_start, deterministic=deterministic
        )


def load_policy(spec: str, label: str | None = None) -> tuple[Any, dict[str, Any]]:
    """A policy from a baseline name (``dram-first``, ``static:3:1@256``...) or a trained run/model path.

    ``LABEL=SPEC`` gives the policy the name ``LABEL`` in records and tables.

    Returns ``(policy, env_kwargs)``; ``env_kwargs`` is empty for heuristics
    (they set their kernel configuration themselves).
    """
    names = _baseline_names()
    if "=" in spec and label is None:  # LABEL=SPEC names a policy in the tables
        label, spec = spec.split("=", 1)
    if spec in names or spec.startswith("static:"):
        from baselines import make_policy

        try:
            policy = make_policy(spec)
        except ValueError as exc:
            raise PolicyError(str(exc)) from None
        policy.name = label or spec
        return policy, {}
    path = Path(spec)
    if not path.exists():
        raise PolicyError(
            f"unknown policy {spec!r}: expected a baseline name {names}, 'static:W1:W2[@RATE]', or a trained run folder or model file"
        )
    try:
        model, env, algo = load_trained(path)
    except TrainingError as exc:
        raise PolicyError(str(exc)) from None
    name = label or (path.name if path.is_dir() else path.parent.name or algo)
    env_kwargs = {
        k: v
        for k, v in env.items()
        if k in ENV_KEYS and k not in ("scenario", "split", "pool_size")
    }
    return LearnedPolicy(model, env_kwargs, name, str(path)), env_kwargs


def compare(
    policies: Sequence[str | tuple[Any, dict[str, Any]]],
    scenarios: Sequence[str],
    episodes: int,
    seed: int = 0,
    split: str = "test",
    record_series: bool = False,
    progress: Callable[[str, str], None] | None = None,
) -> list[dict[str, Any]]:
    """Every policy on every scenario with the same seeds; one record per episode.

    A policy is a spec for :func:`load_policy` or an already loaded
    ``(policy, env_kwargs)`` pair. ``progress(policy, scenario)`` is called
    after each run.
    """
    loaded = [load_policy(p) if isinstance(p, str) else p for p in policies]
    names = [getattr(p, "name", str(i)) for i, (p, _) in enumerate(loaded)]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise PolicyError(f"two policies share the name(s) {dup}; give each a distinct label")
    out: list[dict[str, Any]] = []
    for sc in scenarios:
        for (policy, env_kwargs), name in zip(loaded, names, strict=True):
            recs = rollout(
                policy,
                sc,
                episodes,
                seed=seed,
                split=split,
                env_kwargs=env_kwargs,
                record_series=record_series,
                policy_name=name,
            )
            for r in recs:
                # "seed" is the run's seed (the bootstrap stratum), "episode" its index;
                # the instance's own seed is seed + episode
                r["scenario"] = sc
                r["instance_seed"] = r["seed"]
                r["seed"] = seed
            out.extend(recs)
            if progress is not None:
                progress(name, sc)
    return out


def mean_score(records: Sequence[Mapping[str, Any]], metric: str = "geomean_perf") -> float:
    """Mean of a metric over records (None values skipped)."""
    vals = [r["metrics"][metric] for r in records if r["metrics"].get(metric) is not None]
    return float(np.mean(vals)) if vals else float("nan")
