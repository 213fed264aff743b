"""Whether two checkouts of TierGym give the same numbers: a trace of every array, compared.

    python benchmarks/trace_diff.py --before ../wt-before     # this checkout is "after"
    python benchmarks/trace_diff.py --before ../wt-before --rtol 1e-9
    python benchmarks/trace_diff.py --before . --precision fast --rtol 1e-4 --atol 1e-6

The companion of ``ab_speed.py`` for speed work, whose rule is that results do not
change. Each checkout runs, in a fresh process with ``PYTHONPATH`` set to it, the
same cases and records every array they produce into an ``.npz``:

- the model core (``envs.model.step``, random actions; a third of the steps with
  all-zero weights, a fifth of the elements with promotion off, so that DRAM fills
  and kswapd runs in part of the batch) on the 4-tenant ``spr-a1000`` scenario at
  B = 1, 5, 64, under three other kernel configurations (the memcg-limits and
  scanning options before they existed; tier-aware limits with TPP's active-only
  promotion and the promotion throttle; TPP's demotion watermark), and every
  shipped scenario with more than one node layout case (``cxl-spill``,
  ``fallback-hotspot``, the tiering-fairness, colocation, kv-store, llm-inference,
  analytics-scan and mlc-bandwidth scenarios) at B = 1 and 24: every field of the
  outputs and of the state at every seventh step and the last;
- ``gym.make("tiergym/TieredMemory-v0")`` on ``mixed`` (with and without
  ``reward_baseline="colloid"``) and ``kv-store``: observations, rewards and the
  info dict every fifth step and at every episode end;
- the native vector env on ``mixed`` (N = 16; paired at N = 8; tiering modes as
  actions at N = 8, with and without the twins): observations and rewards.

The comparison is exact by default: two floats agree when they are equal (NaN equal
to NaN), and a difference in the sign of a zero is counted apart. With ``--rtol R``
they agree within a relative difference R, and the solver's residual (itself a
relative error, at most the solver's tolerance) within an absolute difference R: the
check for a change that reorders floating-point operations. It prints the number of
arrays, how many differ and the largest differences. ``--precision fast`` records the
"after" checkout on the fast path (the "before" one on the reference): its traces
part from the reference's after some steps where reclaim stops at a watermark
(docs/model.md, "Precision"), so the comparison says how many arrays do.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import yaml

import envs
from envs import Action, KernelConfig, compile_params, init_state, load_scenario
from envs.model import step

# (a recording runs with PYTHONPATH set to its checkout: these imports are that checkout's)

HERE = Path(__file__).resolve().parent
SCENARIOS = (
    "cxl-spill",
    "fallback-hotspot",
    "tiering-fairness",
    "tiering-fairness-low-high",
    "colocation-protected",
    "kv-store",
    "llm-inference",
    "analytics-scan",
    "mlc-bandwidth",
    "colocation",
)


def _arrays(prefix: str, obj: Any, out: dict[str, np.ndarray]) -> None:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            _arrays(f"{prefix}.{f.name}", getattr(obj, f.name), out)
    elif isinstance(obj, np.ndarray):
        out[prefix] = np.array(obj)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            _arrays(f"{prefix}.{k}", v, out)
    elif isinstance(obj, (float, int, np.floating, np.integer, bool)):
        out[prefix] = np.array(obj)


def record(path: str, precision: str = "reference") -> None:
    """Run every case of the docstring in this process and save its arrays to ``path``
    (the model core at ``precision``; the argument is passed only where it is not the
    default, so that a checkout from before the setting records too)."""
    out: dict[str, np.ndarray] = {}
    pk: dict[str, Any] = {} if precision == "reference" else {"precision": precision}

    def model(name: str, spec: Any, b: int, steps: int, kernel: Any = None) -> None:
        rng = np.random.default_rng(0)
        p = compile_params(load_scenario(spec), batch_size=b, kernel=kernel, jitter=0.05)
        s = init_state(p, np.arange(b) + 7)
        for i in range(steps):
            w = rng.integers(0, 8, (b, p.n_tenants, p.n_nodes)).astype(float)
            if i % 3 == 0:
                w[: b // 2] = 0.0
            a = Action(w, rng.uniform(0, 2000, b) * (rng.uniform(size=b) > 0.2))
            s, o = step(p, s, a, **pk)
            if i % 7 == 0 or i == steps - 1:
                _arrays(f"{name}/{i}/out", o, out)
                _arrays(f"{name}/{i}/state", s, out)

    def single(name: str, steps: int, **kw: Any) -> None:
        e = gym.make("tiergym/TieredMemory-v0", **kw, **pk)
        e.reset(seed=3)
        e.action_space.seed(3)
        for i in range(steps):
            obs, r, te, tr, info = e.step(e.action_space.sample())
            if i % 5 == 0 or te or tr:
                out[f"{name}/{i}/obs"], out[f"{name}/{i}/r"] = np.array(obs), np.array(r)
                _arrays(f"{name}/{i}/info", dict(info), out)
            if te or tr:
                e.reset()

    def vector(name: str, n: int, steps: int, **kw: Any) -> None:
        e = gym.make_vec(
            "tiergym/TieredMemory-v0",
            num_envs=n,
            vectorization_mode="vector_entry_point",
            **kw,
            **pk,
        )
        e.reset(seed=5)
        e.action_space.seed(5)
        for i in range(steps):
            obs, r, *_ = e.step(e.action_space.sample())
            if i % 5 == 0:
                out[f"{name}/{i}/obs"], out[f"{name}/{i}/r"] = np.array(obs), np.array(r)

    bench = yaml.safe_load((HERE / "bench-4-tenants.yaml").read_text())
    for b in (1, 5, 64):
        model(f"spr{b}", bench, b, 40)
    kernels = {
        "dram-fixed": KernelConfig(memcg_limits="dram", numa_scan="fixed"),
        "tier-active-throttle": KernelConfig(
            memcg_limits="tier_aware", promote_active_only=True, promotion_throttle=True
        ),
        "tpp-watermark": KernelConfig(demote_watermark_frac=0.02),
    }
    for name, k in kernels.items():
        model(f"spr-{name}", bench, 16, 40, k)
    for sc in SCENARIOS:
        for b in (1, 24):
            model(f"{sc}{b}", sc, b, 30)
    single("mixed", 300, scenario="mixed")
    single("mixed-paired", 150, scenario="mixed", reward_baseline="colloid")
    single("kv", 120, scenario="kv-store")
    modes = ["default", "tpp", "memcg-fair", "damon", "no-demotion"]
    vector("vec-mixed", 16, 120, scenario="mixed")
    vector("vec-paired", 8, 60, scenario="mixed", reward_baseline="colloid")
    vector("vec-modes", 8, 60, scenario="mixed", tiering_modes=modes)
    vector(
        "vec-modes-paired",
        8,
        60,
        scenario="mixed",
        reward_baseline="colloid",
        tiering_modes=modes[:4],
    )
    np.savez(path, **out)  # type: ignore[arg-type]
    print(envs.__file__)


#: arrays that hold the fixed point's own residual (the relative error of Little's law, at
#: most the solver's tolerance): compared by absolute difference under ``--rtol``
RESIDUALS = ("solver_residual",)


def compare(a_path: str, b_path: str, rtol: float = 0.0, atol: float = 0.0) -> int:
    """Print how the two traces differ; the number of arrays that do (beyond ``rtol``, or
    with ``atol`` beyond ``max(rtol * |x|, atol)``: relative differences of numbers below
    ``atol / rtol`` taken on that scale)."""
    floor = atol / rtol if (rtol and atol) else 0.0
    a, b = np.load(a_path), np.load(b_path)
    if set(a.files) != set(b.files):
        print(f"the traces hold different arrays: {sorted(set(a.files) ^ set(b.files))[:10]}")
        return max(len(a.files), 1)
    differ = signs = within = 0
    worst = worst_resid = 0.0
    for k in sorted(a.files):
        x, y = a[k], b[k]
        if x.shape != y.shape or x.dtype != y.dtype:
            print(f"differs in shape or dtype: {k}")
            differ += 1
            continue
        if x.dtype.kind != "f":
            if not np.array_equal(x, y):
                if differ < 10:
                    print(f"differs: {k}")
                differ += 1
            continue
        if not np.array_equal(x, y, equal_nan=True):
            with np.errstate(invalid="ignore", divide="ignore"):
                rel = np.abs(x - y) / np.maximum(np.maximum(np.abs(x), np.abs(y)), floor)
            rel = np.where((x == y) | (np.isnan(x) & np.isnan(y)), 0.0, rel)
            resid = any(r in k for r in RESIDUALS)
            gap = float(np.nanmax(np.abs(x - y) if resid else rel))
            if resid:
                worst_resid = max(worst_resid, gap)
            else:
                worst = max(worst, gap)
            if rtol and gap <= rtol:
                within += 1
                continue
            if differ < 10:
                print(f"differs: {k}")
            differ += 1
        elif not np.array_equal(np.signbit(x), np.signbit(y)):
            signs += 1
    tail = f", {within} more within {rtol:g}" if rtol else ""
    tail += f" (or {atol:g} absolutely)" if floor else ""
    print(
        f"{len(a.files)} arrays: {differ} differ{tail} (largest relative difference {worst:.3g}; "
        f"the solver's residuals: largest absolute difference {worst_resid:.3g}), "
        f"{signs} more differ only in the sign of a zero"
    )
    return differ


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--before", required=True, help="the other checkout (its root)")
    ap.add_argument("--after", default=str(HERE.parent), help="default: this checkout")
    ap.add_argument(
        "--rtol",
        type=float,
        default=0.0,
        help="agree within this relative difference (the solver's residual: absolute); "
        "default 0: bit for bit",
    )
    ap.add_argument(
        "--atol",
        type=float,
        default=0.0,
        help="with --rtol: agree within max(rtol * |x|, atol) (a reward or a log near 0); "
        "default 0",
    )
    ap.add_argument(
        "--precision",
        choices=("reference", "fast"),  # envs.model.PRECISIONS (not imported: "before" lacks it)
        default="reference",
        help='the model core\'s precision of the "after" checkout (docs/model.md, '
        '"Precision"; "before" records the default); default reference',
    )
    ap.add_argument("--record", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.record:
        record(args.record, args.precision)
        return
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for name in ("before", "after"):
            root = Path(getattr(args, name)).resolve()
            path = str(Path(tmp) / f"{name}.npz")
            cmd = [sys.executable, str(Path(__file__).resolve()), "--before", "-", "--record", path]
            if name == "after" and args.precision != "reference":
                cmd += ["--precision", args.precision]
            env = {**os.environ, "PYTHONPATH": str(root)}
            done = subprocess.run(cmd, env=env, cwd=root, capture_output=True, text=True)
            if done.returncode:
                sys.exit(f"{name} ({root}) failed:\n{done.stderr}")
            if not done.stdout.strip().splitlines()[-1].startswith(str(root)):
                sys.exit(f"{name}: imported envs from outside {root}")
            paths.append(path)
        sys.exit(1 if compare(paths[0], paths[1], rtol=args.rtol, atol=args.atol) else 0)


if __name__ == "__main__":
    main()
