"""The causal ``mpc`` beside every heuristic and the clairvoyant ``planner``, per scenario.

    python benchmarks/mpc_scores.py                               # the 15 scenarios, 4 episodes
    python benchmarks/mpc_scores.py --scenarios mlc-bandwidth,kv-store --episodes 8
    python benchmarks/mpc_scores.py --mpc every=5,horizon=10      # mpc's arguments

Every policy runs the same episodes (:func:`agents.rollout.rollout`, seeds ``--seed`` to
``--seed + episodes - 1`` of each scenario's ``test`` split; the shipped scenarios are
the default plus ``mixed``). Prints one Markdown row per scenario: the best heuristic
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
    ap.add_argument("--mpc", default="", help="mpc's keyword arguments, e.g. every=5,horizon=10")
    args = ap.parse_args(argv)
    try:
        mpc_kw = _kwargs(args.mpc)
        MPC(**mpc_kw)  # its arguments checked before any work
        if args.episodes < 1:
            raise ValueError(f"--episodes: got {args.episodes}, expected at least 1")
    except (TypeError, ValueError) as exc:
        print(f"mpc_scores.py: {exc}", file=sys.stderr)
        return 2
    heuristics = catalogue.names(kind="heuristic")
    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    print(f"episodes {args.episodes} from seed {args.seed}; mpc {mpc_kw or 'defaults'}\n")
    print(
        "| scenario | best heuristic | its geomean | mpc | planner | mpc / best | "
        "mpc / planner | headroom share | mpc s | planner s |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    ratios = []
    for scen in scenarios:
        h = {
            name: _geomean(rollout(name, scen, args.episodes, seed=args.seed))
            for name in heuristics
        }
        best = max(heuristics, key=lambda n: float(h[n].mean()))
        t0 = time.perf_counter()
        m = _geomean(rollout(MPC(**mpc_kw), scen, args.episodes, seed=args.seed))
        t_mpc = time.perf_counter() - t0
        t0 = time.perf_counter()
        p = _geomean(rollout(Planner(), scen, args.episodes, seed=args.seed))
        t_plan = time.perf_counter() - t0
        base = h["dram-first"].mean()
        gain = p.mean() - base
        share = f"{(m.mean() - base) / gain:.2f}" if gain > 0.005 * base else "-"
        r = float((m / h[best]).mean())
        ratios.append(r)
        print(
            f"| {scen} | {best} | {h[best].mean():.4f} | {m.mean():.4f} | {p.mean():.4f} | "
            f"{r:.3f} | {(m / p).mean():.3f} | {share} | {t_mpc:.0f} | {t_plan:.0f} |",
            flush=True,
        )
    print(
        f"\nmpc over the best heuristic, geometric mean over {len(ratios)} scenarios: "
        f"{float(np.exp(np.mean(np.log(ratios)))):.3f}; worst {min(ratios):.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
