"""Two checkouts of TierGym timed side by side, alternating, in one run: before / after.

    python benchmarks/ab_speed.py --before ../wt-before            # this checkout is "after"
    python benchmarks/ab_speed.py --before ../wt-before --rounds 5 --quick

Each round starts one fresh Python process per checkout (``PYTHONPATH`` set to
it, so its ``envs`` is the one imported), "before" and "after" in turn, and each
process measures, in this order:

- the yardstick: Gymnasium's ``CartPoleVectorEnv`` at N = 4096 (random actions,
  best of 4 timings of 200 steps), so that every rate is also a share of
  CartPole's in the same process;
- the model core (``envs.model.step``) at B = 4096 with random actions on the
  4-tenant ``spr-a1000`` scenario (``benchmarks/bench-4-tenants.yaml``, the one
  ``env_speed.py`` steps) and on the 6-node ``cxl-spill``;
- the fixed point alone on each of the two: the ``envs.model.solve_fixed_point``
  calls of some of the same steps recorded, then replayed (best of three passes),
  in steps/s of the batch, for changes of the solver that the whole step's spread
  would hide;
- one ``gym.make("tiergym/TieredMemory-v0", scenario="mixed")`` instance stepped
  with random actions (reset when an episode ends), without and with
  ``reward_baseline="colloid"`` (the paired twins), and the native vector env
  (``gym.make_vec``, ``vector_entry_point``) at N = 256 the same two ways;
- the default recipe's RL environment as ``train.py`` builds it and PPO steps it
  (``python train.py``'s 256 instances over ``mixed`` and the ``broad-*`` families, in
  the agent's view: its base heuristics, the share codec, the tiering modes, the
  paired twins), random actions in the agent's action space.

The table gives each checkout's median over the rounds, in steps/s and as a share
of CartPole's rate, and after / before of the medians of the CartPole shares (the
figure that compares on a noisy, shared machine). The model and environment cases use
only the public API and ``envs.model``'s own name of the solver; the training case
builds the environment as ``agents.trainer`` does, so both checkouts need the typed run
configuration (``agents.config``, Dec 6 on).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import yaml
from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv

import envs
import envs.model
from agents.config import RunOptions
from agents.config.load import resolve
from agents.trainer import _training_env
from envs import Action, compile_params, init_state, load_scenario
from envs.model import step

# (the worker runs with PYTHONPATH set to its checkout: these imports are that checkout's)

HERE = Path(__file__).resolve().parent
CASES = (
    "cartpole",
    "spr-a1000 B=4096",
    "cxl-spill B=4096",
    "fixed point alone, spr-a1000 B=4096",
    "fixed point alone, cxl-spill B=4096",
    "gym.make mixed",
    "gym.make paired",
    "vector env mixed N=256",
    "vector env paired N=256",
    "train.py's RL environment N=256",
)


def _worker(quick: bool, model_only: bool = False) -> dict[str, float]:
    out: dict[str, float] = {}
    env = CartPoleVectorEnv(num_envs=4096)
    env.reset(seed=0)
    env.action_space.seed(0)
    acts = [env.action_space.sample() for _ in range(200)]
    best = 0.0
    for _ in range(4):
        t0 = time.perf_counter()
        for a in acts:
            env.step(a)
        best = max(best, 4096 * len(acts) / (time.perf_counter() - t0))
    out["cartpole"] = best

    def model(spec: Any, steps: int) -> tuple[float, float]:
        """The model core's steps/s, and its fixed point's alone: the solver's calls of
        some of the same steps recorded, then replayed (best of three passes)."""
        rng = np.random.default_rng(0)
        b = 4096
        p = compile_params(load_scenario(spec), batch_size=b)
        s = init_state(p, np.arange(b))
        shape = (b, p.n_tenants, p.n_nodes)
        acts = [
            Action(rng.integers(0, 8, shape).astype(float), rng.uniform(0, 2000, b))
            for _ in range(steps + 5)
        ]
        for a in acts[:5]:
            s, _ = step(p, s, a)
        t0 = time.perf_counter()
        for a in acts[5:]:
            s, _ = step(p, s, a)
        rate = b * steps / (time.perf_counter() - t0)
        solve = envs.model.solve_fixed_point
        calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

        def record(*args: Any, **kw: Any) -> Any:
            calls.append((args, kw))
            return solve(*args, **kw)

        envs.model.solve_fixed_point = record
        try:
            for a in acts[5 : 5 + max(steps // 2, 2)]:
                s, _ = step(p, s, a)
        finally:
            envs.model.solve_fixed_point = solve
        best = np.inf
        for _ in range(3):
            t0 = time.perf_counter()
            for args, kw in calls:
                solve(*args, **kw)
            best = min(best, time.perf_counter() - t0)
        return rate, b * len(calls) / best

    spec = yaml.safe_load((HERE / "bench-4-tenants.yaml").read_text())
    out["spr-a1000 B=4096"], out["fixed point alone, spr-a1000 B=4096"] = model(
        spec, 10 if quick else 40
    )
    out["cxl-spill B=4096"], out["fixed point alone, cxl-spill B=4096"] = model(
        "cxl-spill", 4 if quick else 15
    )

    def single(steps: int, **kw: Any) -> float:
        e = gym.make("tiergym/TieredMemory-v0", scenario="mixed", **kw)
        e.reset(seed=0)
        e.action_space.seed(0)
        acts = [e.action_space.sample() for _ in range(steps + 20)]
        for a in acts[:20]:
            e.step(a)
        t0 = time.perf_counter()
        for a in acts[20:]:
            _, _, term, trunc, _ = e.step(a)
            if term or trunc:
                e.reset()
        return steps / (time.perf_counter() - t0)

    def vector(n: int, steps: int, **kw: Any) -> float:
        e = gym.make_vec(
            "tiergym/TieredMemory-v0",
            num_envs=n,
            vectorization_mode="vector_entry_point",
            scenario="mixed",
            **kw,
        )
        e.reset(seed=0)
        e.action_space.seed(0)
        acts = [e.action_space.sample() for _ in range(steps + 3)]
        for a in acts[:3]:
            e.step(a)
        t0 = time.perf_counter()
        for a in acts[3:]:
            e.step(a)
        return n * steps / (time.perf_counter() - t0)

    def training(steps: int) -> float:
        venv, _ = _training_env(resolve(RunOptions()))
        venv.reset()
        rng = np.random.default_rng(0)
        shape = (venv.num_envs, *venv.action_space.shape)
        acts = [rng.uniform(-1, 1, shape).astype(np.float32) for _ in range(steps + 3)]
        for a in acts[:3]:
            venv.step(a)
        t0 = time.perf_counter()
        for a in acts[3:]:
            venv.step(a)
        return venv.num_envs * steps / (time.perf_counter() - t0)

    if not model_only:
        out["gym.make mixed"] = single(100 if quick else 600)
        out["gym.make paired"] = single(60 if quick else 300, reward_baseline="colloid")
        out["vector env mixed N=256"] = vector(256, 10 if quick else 60)
        out["vector env paired N=256"] = vector(256, 10 if quick else 60, reward_baseline="colloid")
        out["train.py's RL environment N=256"] = training(10 if quick else 60)
    out["envs"] = envs.__file__  # type: ignore[assignment]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--before", required=True, help="the other checkout (its root)")
    ap.add_argument("--after", default=str(HERE.parent), help="default: this checkout")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="short timings: a smoke run")
    ap.add_argument("--model-only", action="store_true", help="only the model-core cases")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(_worker(args.quick, args.model_only)))
        return
    trees = {"before": Path(args.before).resolve(), "after": Path(args.after).resolve()}
    res: dict[str, list[dict[str, float]]] = {k: [] for k in trees}
    for r in range(args.rounds):
        for name, root in trees.items() if r % 2 == 0 else reversed(trees.items()):
            cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--before", "-"]
            cmd += ["--quick"] * args.quick + ["--model-only"] * args.model_only
            env = {**os.environ, "PYTHONPATH": str(root)}
            done = subprocess.run(cmd, env=env, cwd=root, capture_output=True, text=True)
            if done.returncode:
                sys.exit(f"{name} ({root}) failed:\n{done.stderr}")
            row = json.loads(done.stdout.strip().splitlines()[-1])
            if not str(row.pop("envs")).startswith(str(root)):
                sys.exit(f"{name}: imported envs from outside {root}")
            res[name].append(row)
            print(f"round {r + 1} {name}: " + ", ".join(f"{k} {v:,.0f}" for k, v in row.items()))
    print(f"\n{args.rounds} rounds, median of each; before = {trees['before']}\n")
    print("| case | before steps/s | x CartPole | after steps/s | x CartPole | after / before |")
    print("|---|---:|---:|---:|---:|---:|")
    for case in CASES:
        if case not in res["before"][0]:
            continue
        med = {}
        share = {}
        for name in trees:
            med[name] = statistics.median(r[case] for r in res[name])
            share[name] = statistics.median(r[case] / r["cartpole"] for r in res[name])
        print(
            f"| {case} | {med['before']:,.0f} | {100 * share['before']:.3g}% | "
            f"{med['after']:,.0f} | {100 * share['after']:.3g}% | "
            f"{(med if case == 'cartpole' else share)['after'] / (med if case == 'cartpole' else share)['before']:.2f}x |"
        )


if __name__ == "__main__":
    main()
