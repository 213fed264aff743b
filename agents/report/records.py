"""The episode record contract: its metric names, its validation, and records written as CSV.

A record is a dict as :func:`agents.rollout.rollout` and
:func:`agents.evaluation.compare` make them (the layout is in the docstring of
:func:`agents.rollout.rollout`). :func:`validate_records` checks that contract and
refuses two records of one episode; :func:`metric_names` orders the metric
columns the records have; :func:`write_csv` flattens the records, one row each.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agents.config.fields import METRICS

__all__ = [
    "LOWER_IS_BETTER",
    "METRICS",
    "metric_by_seed",
    "metric_names",
    "validate_records",
    "write_csv",
]

#: Metrics for which a smaller value is better (used to order the leaderboard).
LOWER_IS_BETTER: frozenset[str] = frozenset({"mean_latency_ns"})

_REQUIRED_KEYS = ("scenario", "policy", "seed", "episode", "metrics")


def metric_by_seed(
    records: Iterable[Mapping[str, Any]], metric: str
) -> dict[tuple[str, str], dict[int, float]]:
    """``metric`` of every record that has it, by (scenario, policy) then seed: the pairing
    of two policies' runs of the same episodes."""
    by: dict[tuple[str, str], dict[int, float]] = {}
    for r in records:
        v = r["metrics"].get(metric)
        if v is not None:
            by.setdefault((str(r["scenario"]), str(r["policy"])), {})[int(r["seed"])] = float(v)
    return by


def validate_records(records: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Check the record contract; reject two records of one (scenario, policy, seed).

    The seed is the episode's own seed, so it fixes the episode (and, in a family, the
    scenario instance): a second record of it would be a copy, not another sample.
    Returns the records as a list.

    Raises:
        ValueError: no records, a record that is not a dict, lacks a required key or
            has a metric that is not a number, or a second record of one episode.
    """
    out = list(records)
    if not out:
        raise ValueError("no evaluation records given")
    seen: set[tuple[str, str, int]] = set()
    for i, rec in enumerate(out):
        if not isinstance(rec, Mapping):
            raise ValueError(f"record {i} is a {type(rec).__name__}, expected a dict")
        missing = [k for k in _REQUIRED_KEYS if k not in rec]
        if missing:
            raise ValueError(f"record {i} lacks required key(s) {missing}")
        if not isinstance(rec["metrics"], Mapping):
            raise ValueError(f"record {i}: 'metrics' must be a dict of floats")
        for name, value in rec["metrics"].items():
            if isinstance(value, bool) or not isinstance(value, int | float | np.number):
                raise ValueError(
                    f"record {i}: metric {name!r} must be a number, got {type(value).__name__}"
                )
        key = (str(rec["scenario"]), str(rec["policy"]), int(rec["seed"]))
        if key in seen:
            raise ValueError(
                f"duplicate record for scenario={key[0]!r} policy={key[1]!r} seed={key[2]} "
                f"(record {i}, episode {rec['episode']}): each seed is one episode"
            )
        seen.add(key)
    return out


def metric_names(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """Metric columns present in the records: contract order first, extras sorted."""
    present: set[str] = set()
    for rec in records:
        present.update(rec["metrics"])
    return [m for m in METRICS if m in present] + sorted(present - set(METRICS))


def write_csv(records: Iterable[Mapping[str, Any]], path: str | Path) -> Path:
    """Write one CSV row per record: ``scenario,instance,policy,seed,episode,<metric...>``.

    ``instance`` is the scenario instance the episode ran (blank for a record without
    one); ``seed`` the episode's own seed.  Metric columns follow :data:`METRICS` order,
    then any extra metrics sorted by name; a metric a record lacks is left blank.  Floats
    are written with full precision.  Returns the path written.
    """
    recs = validate_records(records)
    cols = metric_names(recs)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["scenario", "instance", "policy", "seed", "episode", *cols])
        for r in recs:
            keys = [
                r["scenario"],
                r.get("instance", ""),
                r["policy"],
                int(r["seed"]),
                int(r["episode"]),
            ]
            writer.writerow(
                keys + [repr(float(r["metrics"][m])) if m in r["metrics"] else "" for m in cols]
            )
    return out
