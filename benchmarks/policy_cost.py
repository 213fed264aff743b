"""What a decision costs: the causal ``mpc``, the clairvoyant ``planner`` and a cheap heuristic.

    python benchmarks/policy_cost.py                      # B = 1, 64, 256 on colocation, 20 steps
    python benchmarks/policy_cost.py --batches 1,16 --steps 10 --heuristic weighted-interleave
    python benchmarks/policy_cost.py --scenario kv-store --steps 20 --repeats 3

In one run and one process, side by side for each batch size ``B`` (``B`` episodes of
``--scenario``, seeds 20000.., cut to ``--steps`` intervals, stepped as
:func:`agents.rollout.run_episodes` steps them), the wall time each policy spends
deciding, the environment's own step excluded:

- ``mpc`` (:class:`baselines.mpc.MPC`, its defaults): a decision is one search round over
  the ``B`` instances (every ``every`` intervals, and where a tenant arrives or leaves: its
  decisions over ``B``; its ``predict`` also steps its copy of the environment, which is
  part of its cost and counted);
- ``planner`` (:class:`baselines.planner.Planner`, its defaults): a decision is the plan of
  the ``B`` whole episodes (``plan_episodes``, before the first step) plus its per-step
  lookups;
- the heuristic (``--heuristic``, ``caption`` by default): a decision is one ``predict``
  (and ``observe``) per interval.

Columns: decisions per episode, ms per decision (the whole batch), ms per decision and
instance, and ms per interval and instance (all of a policy's time over the episode's
intervals and the instances: the figure that compares the three). A last row per ``B``
times the environment's step itself (``env step``) for scale. With ``--repeats`` each
policy runs that many times per ``B`` and the fastest run is kept (the machine is shared
and noisy).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from typing import Any

import numpy as np

from agents.rollout import make_params
from baselines import make_policy
from baselines.mpc import MPC
from baselines.planner import Planner
from envs import core
from envs.policy import Clairvoyant, as_policy
from envs.scenario import load_scenario


def _timed_episodes(policy: Any, scenario: Any, B: int) -> tuple[float, float, float, int]:
    """Run ``B`` episodes under ``policy``: its planning seconds, its stepping seconds (predict
    and observe), the environment's step seconds, and the intervals run."""
    policy = as_policy(policy)
    params = make_params(policy, scenario)
    seeds = np.arange(20000, 20000 + B, dtype=np.uint64)
    policy.bind(params, B)
    t0 = time.perf_counter()
    if isinstance(policy, Clairvoyant):
        policy.plan_episodes(seeds)
    plan_s = time.perf_counter() - t0
    state, obs = core.reset(params, seeds)
    policy.observe(None, core.hardware(state))
    steps = int(state.instance.episode_steps.max())
    act_s = env_s = 0.0
    start = np.ones(B, dtype=bool)
    for _ in range(steps):
        t0 = time.perf_counter()
        action, _ = policy.predict(obs, episode_start=start)
        t1 = time.perf_counter()
        state, obs, _, term, trunc, m, _ = core.step_autoreset(params, state, np.asarray(action))
        t2 = time.perf_counter()
        policy.observe(m, core.hardware(state))
        t3 = time.perf_counter()
        act_s += (t1 - t0) + (t3 - t2)
        env_s += t2 - t1
        start = term | trunc
    return plan_s, act_s, env_s, steps


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--scenario", default="colocation")
    ap.add_argument("--steps", type=int, default=20, help="intervals per episode (the cut)")
    ap.add_argument("--batches", default="1,64,256", help="batch sizes B, comma-separated")
    ap.add_argument("--heuristic", default="caption")
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args(argv)
    try:
        batches = [int(b) for b in args.batches.split(",") if b.strip()]
        if not batches or min(batches) < 1:
            raise ValueError(f"--batches {args.batches!r}: expected positive integers")
        if args.steps < 1 or args.repeats < 1:
            raise ValueError("--steps and --repeats: expected integers >= 1")
        scenario = load_scenario(args.scenario, episode_steps=args.steps)
        make_policy(args.heuristic)
    except Exception as exc:  # a one-line error for any bad input
        print(f"policy_cost.py: {exc}", file=sys.stderr)
        return 2
    mpc_every = MPC().every
    print(
        f"{args.scenario}, {args.steps} intervals per episode; mpc every {mpc_every} "
        f"intervals, horizon {MPC().horizon}; best of {args.repeats}\n"
    )
    print(
        "| policy | B | decisions per episode | ms per decision | ms per decision and "
        "instance | ms per interval and instance |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    # compile and warm every path once (numba's cache, the kernel configurations)
    for warm in (MPC(), Planner(population=4, iterations=1), make_policy(args.heuristic)):
        _timed_episodes(warm, load_scenario(args.scenario, episode_steps=2), 1)
    for B in batches:
        env_best = math.inf
        rows = []
        for label in ("mpc", "planner", args.heuristic):
            best = None
            for _ in range(args.repeats):
                pol: Any = (
                    MPC()
                    if label == "mpc"
                    else Planner()
                    if label == "planner"
                    else make_policy(args.heuristic)
                )
                plan_s, act_s, env_s, steps = _timed_episodes(pol, scenario, B)
                env_best = min(env_best, env_s)
                total = plan_s + act_s
                if best is None or total < best[0]:
                    best = (total, steps, getattr(pol, "decisions", 0))
            assert best is not None
            total, steps = best[0], best[1]
            if label == "mpc":  # its decision rounds: the schedule's, and arrivals' (on_change)
                n_dec = max(1, round(best[2] / B))
            else:
                n_dec = 1 if label == "planner" else steps
            per = total / n_dec
            rows.append(
                f"| {label} | {B} | {n_dec} | {per * 1e3:.1f} | {per / B * 1e3:.3f} | "
                f"{total / (steps * B) * 1e3:.3f} |"
            )
        rows.append(
            f"| env step | {B} | {args.steps} | {env_best / args.steps * 1e3:.2f} | "
            f"{env_best / args.steps / B * 1e3:.4f} | {env_best / (args.steps * B) * 1e3:.4f} |"
        )
        print("\n".join(rows), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
