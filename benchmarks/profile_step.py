"""Where a step of the model core spends its time: per phase, and inside the solver.

    python benchmarks/profile_step.py            # spr-a1000 and cxl-spill at B = 4096, one env
    python benchmarks/profile_step.py --quick    # small sizes: a smoke run, not a measurement
    python benchmarks/profile_step.py --precision fast   # the fast path (docs/model.md)

Cases: the 4-tenant ``spr-a1000`` scenario that ``benchmarks/env_speed.py`` steps
too (``benchmarks/bench-4-tenants.yaml``, read by both) and the 6-node ``cxl-spill`` scenario, both through
``envs.model.step`` at B = 4096 with random actions every step (as env_speed's
model tables), and one instance of ``gym.make("tiergym/TieredMemory-v0",
scenario="mixed")`` stepped through ``env.step`` with random actions (reset,
untimed, when an episode ends).

Method: wall-clock timers (``time.perf_counter``) around wrappers of functions,
installed by replacing module attributes for the duration of one measurement and
restored after it; no file of ``envs/`` changes. ``envs.model.step`` looks its
phase functions up in its module's globals at every call, so replacing
``envs.model.tenant_phase`` and so on times each phase as the step calls it. A
phase called inside another (none is today) counts once, in the outer one. Every
case runs the same warmed-up state and the same pre-drawn actions in separate
passes, so that one pass's instruments do not distort another's figures:

1. plain: no wrapper; the step's time without instruments (s per step);
2. phases: timers around the step's phase functions (``validate_action``, the
   seven numbered phases of docs/architecture.md and ``adapt_threshold``,
   ``numa_scan_update``, ``high_throttle``; ``solve_fixed_point`` is phase 7).
   "rest of step" is the step's time less its phases': the inline code of
   ``envs.model.step`` (pages to charge, the fixed point's inputs: access shares
   per node, bytes in flight, the socket links; the outputs and the new state).
   The shares of a table sum to 100%. For the single instance the layers above the
   model are timed too (``envs.core.step``, ``TieredMemoryEnv.step``, the
   ``gym.make`` wrappers), each as its time less the layer below it;
3. counts: counters (no timers) around the solver's functions and helpers:
   ``solve_fixed_point`` (the step's call, through ``envs.model``'s name, and the
   calls ``_retry`` makes when elements are left unconverged), ``_pack`` (its
   inputs packed into the compiled kernel's arrays) and ``_solve_batch`` (the
   compiled kernel: every element's Newton iterations inside one call, so they
   are counted by the step's ``Outputs.solver_iterations``, mean over the batch),
   ``lsum`` (the fixed-order sum over a leading axis; the calls through
   ``envs.model``'s name and through ``envs.solver``'s apart: a call over a tuple
   of axes from the model counts once under envs.model and once per axis under
   envs.solver, where ``lsum`` recurses and ``link_weights`` calls it);
4. helper time: timers around the same functions (inclusive time: a
   ``solve_fixed_point`` includes its ``_solve_batch``; a call inside another of the
   same function, ``lsum``'s recursion included, is timed once, in the outer one), as
   seconds per step and as a share of that pass's step time (the timers add
   about a microsecond per call, which the "timer overhead" line shows).

One process, one thread (numpy is single-threaded for these operations).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import platform
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import yaml

import envs.core
import envs.model
import envs.solver
from envs import Action, compile_params, init_state, load_scenario
from envs.gym_env import TieredMemoryEnv

#: the 4-tenant spr-a1000 scenario of benchmarks/env_speed.py (tests/test_benchmarks.py
#: checks that the two are equal)
#: The 4-tenant spr-a1000 scenario both speed benchmarks step (one file, read by each).
SCENARIO: dict[str, Any] = yaml.safe_load(
    (Path(__file__).resolve().parent / "bench-4-tenants.yaml").read_text()
)

#: the functions envs.model.step calls, in its order (names of envs.model); the docs'
#: numbered phases and the helpers between them
PHASES = (
    "validate_action",
    "tenant_phase",
    "allocate_pages",
    "promotion_candidates",
    "reclaim_and_demote",
    "promote",
    "adapt_threshold",
    "numa_scan_update",
    "migration_cost",
    "high_throttle",
    "solve_fixed_point",
)
REST = "rest of step (inline code of envs.model.step)"

#: solver functions and helpers counted and timed: (label, owner, attribute)
HELPERS: tuple[tuple[str, Any, str], ...] = (
    ("solve_fixed_point (the step's call)", envs.model, "solve_fixed_point"),
    ("solve_fixed_point again (_retry: unconverged elements)", envs.solver, "solve_fixed_point"),
    ("_pack (the kernel's inputs packed)", envs.solver, "_pack"),
    ("_solve_batch (the compiled kernel)", envs.solver, "_solve_batch"),
    ("lsum from envs.solver", envs.solver, "lsum"),
    ("lsum from envs.model", envs.model, "lsum"),
)


class Meter:
    """Seconds and calls per label; a label's nested calls are timed once, at the outermost."""

    def __init__(self, timed: bool) -> None:
        self.timed = timed
        self.seconds: defaultdict[str, float] = defaultdict(float)
        self.calls: defaultdict[str, int] = defaultdict(int)
        self.depth: defaultdict[str, int] = defaultdict(int)
        self.group_depth = 0  # for phases: a phase inside another counts in the outer one

    def wrap(
        self, label: str, fn: Callable[..., Any], group: bool = False, key: str | None = None
    ) -> Callable[..., Any]:
        """``fn`` counted (and timed) under ``label``; calls nested in one of the same
        ``key`` (default: the label) are counted but not timed again."""
        key = key or label
        if not self.timed:

            @functools.wraps(fn)
            def counted(*args: Any, **kwargs: Any) -> Any:
                self.calls[label] += 1
                return fn(*args, **kwargs)

            return counted

        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            self.calls[label] += 1
            outer = self.depth[key] == 0 and not (group and self.group_depth)
            self.depth[key] += 1
            self.group_depth += group
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                if outer:
                    self.seconds[label] += time.perf_counter() - t0
                self.depth[key] -= 1
                self.group_depth -= group

        return timed


@contextlib.contextmanager
def patched(targets: list[tuple[Any, str, Callable[..., Any]]]) -> Iterator[None]:
    """Set ``owner.attr = value`` for each target; restore the originals on exit."""
    saved = [(owner, attr, getattr(owner, attr)) for owner, attr, _ in targets]
    try:
        for owner, attr, value in targets:
            setattr(owner, attr, value)
        yield
    finally:
        for owner, attr, value in reversed(saved):
            setattr(owner, attr, value)


def phase_targets(meter: Meter) -> list[tuple[Any, str, Callable[..., Any]]]:
    return [(envs.model, n, meter.wrap(n, getattr(envs.model, n), group=True)) for n in PHASES]


def helper_targets(meter: Meter) -> list[tuple[Any, str, Callable[..., Any]]]:
    return [
        (owner, attr, meter.wrap(label, getattr(owner, attr), key=attr))
        for label, owner, attr in HELPERS
    ]


def model_case(
    spec: Any, batch: int, steps: int, seed: int = 0, precision: str = "reference"
) -> dict[str, Any]:
    """The four passes of the docstring on the model core: per step seconds and counts."""
    rng = np.random.default_rng(seed)
    p = compile_params(load_scenario(spec), batch_size=batch)
    s0 = init_state(p, np.arange(batch))
    shape = (batch, p.n_tenants, p.n_nodes)
    acts = [
        Action(rng.integers(0, 8, shape).astype(float), rng.uniform(0, 2000, batch))
        for _ in range(steps + 5)
    ]
    for a in acts[:5]:  # warm up: allocation, first fixed points (as env_speed)
        s0, _ = envs.model.step(p, s0, a, precision=precision)
    acts = acts[5:]

    def run() -> tuple[float, list[Any]]:
        s, outs = s0, []
        t0 = time.perf_counter()
        for a in acts:
            s, out = envs.model.step(p, s, a, precision=precision)
            outs.append(out.solver_iterations)
        return (time.perf_counter() - t0) / steps, outs

    plain, iters = run()
    phases = Meter(timed=True)
    with patched(phase_targets(phases)):
        phased, _ = run()
    counts = Meter(timed=False)
    with patched(helper_targets(counts)):
        run()
    helpers = Meter(timed=True)
    with patched(helper_targets(helpers)):
        helper_step, _ = run()
    return {
        "batch": batch,
        "steps": steps,
        "plain": plain,
        "phased": phased,
        "phases": {k: phases.seconds[k] / steps for k in PHASES},
        "calls": {k: counts.calls[k] / steps for k, _, _ in HELPERS},
        "helper_s": {k: helpers.seconds[k] / steps for k, _, _ in HELPERS},
        "helper_step": helper_step,
        "iter_mean": float(np.mean([i.mean() for i in iters])),
        "iter_max": int(max(i.max() for i in iters)),
    }


def env_case(steps: int, seed: int = 0, precision: str = "reference") -> dict[str, Any]:
    """One ``gym.make`` instance of ``mixed``: per-call seconds of each layer and phase."""
    env = gym.make("tiergym/TieredMemory-v0", scenario="mixed", precision=precision)
    env.action_space.seed(seed)
    acts = [env.action_space.sample() for _ in range(steps)]
    inner = env.unwrapped
    assert isinstance(inner, TieredMemoryEnv)

    def run(*meters: Meter) -> float:
        env.reset(seed=seed)
        for a in acts[:5]:  # warm up (the env checker's first-step checks), not counted
            env.step(a)
        env.reset(seed=seed)
        for meter in meters:  # what the warm-up and the resets call is not counted
            meter.seconds.clear()
            meter.calls.clear()
        spent = 0.0
        for a in acts:
            t0 = time.perf_counter()
            _, _, term, trunc, _ = env.step(a)
            spent += time.perf_counter() - t0
            if term or trunc:
                saved = [(dict(mt.seconds), dict(mt.calls)) for mt in meters]
                env.reset()
                for mt, (sec, calls) in zip(meters, saved, strict=True):
                    mt.seconds.clear()
                    mt.seconds.update(sec)
                    mt.calls.clear()
                    mt.calls.update(calls)
        return spent / steps

    plain = run()
    m = Meter(timed=True)
    layers = [
        (envs.core, "model_step", m.wrap("model.step", envs.core.model_step)),
        (envs.core, "step", m.wrap("core.step", envs.core.step)),
        (inner, "step", m.wrap("TieredMemoryEnv.step", inner.step)),
    ]
    with patched([*phase_targets(m), *layers]):
        total = run(m)
    counts = Meter(timed=False)
    with patched(helper_targets(counts)):
        run(counts)
    env.close()
    per = {k: m.seconds[k] / steps for k in PHASES}
    model = m.seconds["model.step"] / steps
    core_s = m.seconds["core.step"] / steps
    tme = m.seconds["TieredMemoryEnv.step"] / steps
    wrappers = []
    e: Any = env
    while e is not inner:
        wrappers.append(type(e).__name__)
        e = e.env
    return {
        "steps": steps,
        "plain": plain,
        "total": total,
        "phases": per,
        "rest": model - sum(per.values()),
        "core_rest": core_s - model,
        "env_rest": tme - core_s,
        "wrappers": total - tme,
        "wrapper_names": wrappers,
        "calls": {k: counts.calls[k] / steps for k, _, _ in HELPERS},
    }


def phase_rows(case: dict[str, Any]) -> list[tuple[str, float]]:
    """(label, seconds per step) of the model core's phases and the rest; they sum to the step."""
    rows = [(k, v) for k, v in case["phases"].items()]
    rows.append((REST, case["phased"] - sum(case["phases"].values())))
    return rows


def print_model_case(label: str, case: dict[str, Any]) -> None:
    b, n = case["batch"], case["steps"]
    print(f"## {label}: model core, B = {b}, {n} steps, random actions\n")
    print(
        f"Step without instruments: {case['plain'] * 1e3:.2f} ms "
        f"({b / case['plain']:,.0f} steps/s); with the phase timers: "
        f"{case['phased'] * 1e3:.2f} ms (timer overhead "
        f"{case['phased'] / case['plain'] - 1:+.1%}).\n"
    )
    print("| phase | ms per step | share |")
    print("|---|---:|---:|")
    total = case["phased"]
    for name, sec in phase_rows(case):
        print(f"| {name} | {sec * 1e3:.3f} | {sec / total:.1%} |")
    print(f"| total | {total * 1e3:.3f} | 100.0% |\n")
    print(
        f"Newton iterations per element (Outputs.solver_iterations): mean "
        f"{case['iter_mean']:.2f}, max {case['iter_max']}.\n"
    )
    print("| solver function or helper | calls per step | ms per step (inclusive) | share |")
    print("|---|---:|---:|---:|")
    for name, _, _ in HELPERS:
        sec = case["helper_s"][name]
        print(
            f"| {name} | {case['calls'][name]:.1f} | {sec * 1e3:.3f} "
            f"| {sec / case['helper_step']:.1%} |"
        )
    print(
        f"\n(Helper pass: {case['helper_step'] * 1e3:.2f} ms per step, timer overhead "
        f"{case['helper_step'] / case['plain'] - 1:+.1%} over the plain step; shares of it.)\n"
    )


def print_env_case(case: dict[str, Any]) -> None:
    n = case["steps"]
    print(
        f'## One instance: gym.make("tiergym/TieredMemory-v0", scenario="mixed"), '
        f"{n} steps, random actions\n"
    )
    total = case["total"]
    print(
        f"env.step without instruments: {case['plain'] * 1e6:.0f} us per call "
        f"({1 / case['plain']:,.0f} steps/s); with the timers: {total * 1e6:.0f} us "
        f"(timer overhead {total / case['plain'] - 1:+.1%}).\n"
    )
    print("| layer or phase | us per call | share |")
    print("|---|---:|---:|")
    rows = [
        *case["phases"].items(),
        (REST, case["rest"]),
        (
            "envs.core.step less model.step (decode, reward, observation, metrics)",
            case["core_rest"],
        ),
        ("TieredMemoryEnv.step less core.step (checks, info dict)", case["env_rest"]),
        (f"gym.make wrappers ({', '.join(case['wrapper_names'])})", case["wrappers"]),
    ]
    for name, sec in rows:
        print(f"| {name} | {sec * 1e6:.1f} | {sec / total:.1%} |")
    print(f"| total (env.step) | {total * 1e6:.1f} | 100.0% |\n")
    print("| solver function or helper | calls per step |")
    print("|---|---:|")
    for name, _, _ in HELPERS:
        print(f"| {name} | {case['calls'][name]:.1f} |")
    print()


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--quick", action="store_true", help="small sizes (a smoke run, not a measurement)"
    )
    ap.add_argument("--steps", type=int, default=None, help="steps per pass (default 100)")
    ap.add_argument("--no-cxl", action="store_true", help="skip the cxl-spill case")
    ap.add_argument("--no-env", action="store_true", help="skip the single gym.make instance")
    ap.add_argument(
        "--precision",
        choices=envs.model.PRECISIONS,
        default="reference",
        help='the model core\'s precision (docs/model.md, "Precision"); default reference',
    )
    args = ap.parse_args()
    batch = 256 if args.quick else 4096
    steps = args.steps or (5 if args.quick else 100)
    print(
        f"# TierGym step profile ({platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores, numpy {np.__version__})\n"
    )
    prec = args.precision
    print(f"Precision: {prec}.\n")
    print_model_case("spr-a1000, 4 tenants", model_case(SCENARIO, batch, steps, precision=prec))
    if not args.no_cxl:
        print_model_case("cxl-spill", model_case("cxl-spill", batch, steps, precision=prec))
    if not args.no_env:
        print_env_case(env_case(200 if args.quick else 2000, precision=prec))


if __name__ == "__main__":
    main()
