"""Every baseline's score on every shipped scenario, as a Markdown table.

``python -m baselines [--episodes 8] [--seed 0] [--scenarios ...] [--policies ...]``

The score is ``geomean_perf`` (geometric mean of normalised performance over
active tenant-steps) averaged over the episodes, from :func:`agents.rollout.rollout`
on the ``test`` split (seeds ``seed .. seed+episodes-1``, the same for every
policy). Scenarios: :func:`envs.scenario_names` plus the ``mixed`` family.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from agents.rollout import rollout
from baselines.policies import STATIC_PATTERN, make_policy, policy_names
from envs.scenario import scenario_names


def score_table(
    policies: Sequence[str],
    scenarios: Sequence[str],
    episodes: int = 8,
    seed: int = 0,
    cache_dir: str | None = None,
) -> dict[str, dict[str, float]]:
    """``{policy: {scenario: mean geomean_perf}}`` over ``episodes`` test episodes."""
    out: dict[str, dict[str, float]] = {p: {} for p in policies}
    for sc in scenarios:
        for name in policies:
            kw: dict[str, Any] = (
                {"n_episodes": episodes, "seed": seed} if name == "static-best" else {}
            )
            if name == "static-best" and cache_dir is not None:
                kw["cache_dir"] = cache_dir
            recs = rollout(make_policy(name, **kw), sc, episodes, seed=seed, split="test")
            vals = [r["metrics"]["geomean_perf"] for r in recs]
            out[name][sc] = float(np.mean([v for v in vals if v is not None]))
    return out


def markdown(table: dict[str, dict[str, float]], scenarios: Sequence[str]) -> str:
    """The table with one row per policy, one column per scenario; the best of a column in bold."""
    best = {sc: max(row[sc] for row in table.values()) for sc in scenarios}
    lines = [
        "| policy | " + " | ".join(scenarios) + " |",
        "|---|" + "---:|" * len(scenarios),
    ]
    for name, row in table.items():
        cells = [
            f"**{row[sc]:.3f}**" if row[sc] >= best[sc] - 5e-4 else f"{row[sc]:.3f}"
            for sc in scenarios
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m baselines", description=__doc__.split("\n")[0])
    ap.add_argument("--episodes", type=int, default=8, help="episodes per scenario (8)")
    ap.add_argument("--seed", type=int, default=0, help="first episode seed (0)")
    ap.add_argument(
        "--scenarios", nargs="+", default=None, help="scenarios (default: shipped + mixed)"
    )
    ap.add_argument(
        "--policies",
        nargs="+",
        default=None,
        help=f"baselines (default: all but {STATIC_PATTERN}); also static:W1:W2[@RATE]",
    )
    ap.add_argument(
        "--cache-dir", default=None, help="static-best cache (default ~/.cache/tiergym)"
    )
    args = ap.parse_args(argv)
    scenarios = args.scenarios or [*scenario_names(), "mixed"]
    policies = args.policies or [p for p in policy_names() if p != STATIC_PATTERN]
    t0 = time.perf_counter()
    table = score_table(policies, scenarios, args.episodes, args.seed, args.cache_dir)
    print(
        f"geomean_perf, mean of {args.episodes} test episodes (seeds {args.seed}.."
        f"{args.seed + args.episodes - 1}); best of each column in bold\n"
    )
    print(markdown(table, scenarios))
    print(f"\n({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
