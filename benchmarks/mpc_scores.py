"""The causal ``mpc`` beside every heuristic and the clairvoyant ``planner``, per scenario.

    python benchmarks/mpc_scores.py                               # the 15 scenarios, 4 episodes
    python benchmarks/mpc_scores.py --scenarios mlc-bandwidth,kv-store --episodes 8
    python benchmarks/mpc_scores.py --mpc every=5,horizon=10      # mpc's arguments
    python benchmarks/mpc_scores.py --scenarios mixed --split train --episodes 16 \
        --mpc "every=5,horizon=10;every=5,horizon=20"             # variants, one row each

Every policy runs the same episodes (:func:`agents.rollout.rollout`, seeds ``--seed`` to
``--seed + episodes - 1`` of each scenario's ``--split``, ``test`` by default; the shipped
scenarios are the default plus ``mixed``). ``--mpc`` holds one or more variants of
``mpc``'s keyword arguments separated by ``;`` (the heuristics and the planner run once). Prints one Markdown row per scenario: the best heuristic
(the catalogue's ``heuristic`` entries) by mean ``geomean_perf`` and its mean, ``mpc``'s
and ``planner``'s means, ``mpc`` over the best heuristic and over the planner (means of
per-episode ratios), the share of the headroom ``(mpc - dram-first) / (planner -
dram-first)`` (ratio of the means; "-" where the planner gains under 0.5% over
``dram-first``), and the seconds ``mpc`` and the planner took; then the geometric mean of
``mpc`` over the best heuristic across the scenarios. ``mpc`` is built from
:class:`baselines.mpc.MPC` directly (it works whether or not the catalogue lists it).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import numpy as np

from agents.rollout import rollout
from baselines import catalogue
from baselines.mpc import MPC
from baselines.planner import Planner
from envs.scenario import scenario_names


def _geomean(recs: list[dict[str, Any]]) -> np.ndarray:
    return np.array([float(r["metrics"]["geomean_perf"]) for r in recs])


def _kwargs(spec: str) -> dict[str, Any]:
    """``a=1,b=2.5`` -> ``{"a": 1, "b": 2.5}`` (integers and floats; anything else a string)."""
    out: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        if "=" not in part:
            raise ValueError(f"--mpc {spec!r}: expected name=value pairs separated by commas")
        k, v = part.split("=", 1)
        val: Any = v
        for cast in (int, float):
            try:
                val = cast(v)
                break
            except ValueError:
                continue
        out[k.strip()] = val
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--scenarios", default=",".join(["mixed", *scenario_names()]))
    ap.add_argument("--episodes", type=int, default=4)
    ap.add_argument("--seed", type=int, default=20000)
    ap.add_argument("--split", default="test")
    ap.add_argument(
        "--mpc", default="", help="mpc's keyword arguments, e.g. every=5,horizon=10; variants ;"
    )
    args = ap.parse_args(argv)
    try:
        variants = [_kwargs(v) for v in args.mpc.split(";")] if args.mpc.strip() else [{}]
        for kw in variants:
            MPC(**kw)  # its arguments checked before any work
        if args.episodes < 1:
            raise ValueError(f"--episodes: got {args.episodes}, expected at least 1")
    except (TypeError, ValueError) as exc:
        print(f"mpc_scores.py: {exc}", file=sys.stderr)
        return 2
    heuristics = catalogue.names(kind="heuristic")
    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    print(f"{args.split} split, {args.episodes} episodes from seed {args.seed}\n")
    print(
        "| scenario | mpc | best heuristic | its geomean | mpc | planner | mpc / best | "
        "mpc / planner | headroom share | mpc s | planner s |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    ep = {"seed": args.seed, "split": args.split}
    ratios: dict[str, list[float]] = {}
    for scen in scenarios:
        h = {n: _geomean(rollout(n, scen, args.episodes, **ep)) for n in heuristics}
        best = max(heuristics, key=lambda n: float(h[n].mean()))
        t0 = time.perf_counter()
        p = _geomean(rollout(Planner(), scen, args.episodes, **ep))
        t_plan = time.perf_counter() - t0
        base = h["dram-first"].mean()
        gain = p.mean() - base
        for kw in variants:
            t0 = time.perf_counter()
            m = _geomean(rollout(MPC(**kw), scen, args.episodes, **ep))
            t_mpc = time.perf_counter() - t0
            share = f"{(m.mean() - base) / gain:.2f}" if gain > 0.005 * base else "-"
            r = float((m / h[best]).mean())
            ratios.setdefault(str(kw or "defaults"), []).append(r)
            print(
                f"| {scen} | {kw or 'defaults'} | {best} | {h[best].mean():.4f} | "
                f"{m.mean():.4f} | {p.mean():.4f} | {r:.3f} | {(m / p).mean():.3f} | {share} | "
                f"{t_mpc:.0f} | {t_plan:.0f} |",
                flush=True,
            )
    for label, rs in ratios.items():
        print(
            f"\nmpc {label} over the best heuristic, geometric mean over {len(rs)} scenarios: "
            f"{float(np.exp(np.mean(np.log(rs)))):.3f}; worst {min(rs):.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
