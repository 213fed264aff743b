"""Evaluation on Ray (agents.distributed, evaluate.py --workers): a real local Ray with two CPUs.

The distributed run must equal the single-process one bit for bit, seed
blocks included; cells are written as they finish and reused by a rerun;
a wrong address or a node without the package is one line before any work.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from agents.distributed import (  # noqa: E402
    RayError,
    RayRunner,
    check_nodes,
    plan_cells,
    run_cells,
    splittable,
)
from agents.evaluation import load_policy, run_comparison  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RESULT_FILES = ("results.json", "results.csv", "table.md", "leaderboard.md")


@pytest.fixture(scope="module")
def local_ray():
    """One in-process Ray with two CPUs for the module (ray_session uses it as it is)."""
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        logging_level="ERROR",
    )
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A PPO run folder trained for a few rollouts (a learned policy to ship to the workers)."""
    run = tmp_path_factory.mktemp("model") / "ppo"
    args = [
        "--recipe", "ppo", "--scenario", "kv-store", "--max-tenants", "4", "--num-envs", "8", "--set", "n_steps=16", "--set",
        "batch_size=64", "--set", "n_epochs=1", "--timesteps", "128", "--eval-interval", "0",
        "--compare-episodes", "0", "--run-dir", str(run), "--quiet", "--no-progress",
    ]  # fmt: skip
    done = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return run


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_plan_cells_splits_only_batch_independent_policies(tiny_model: Path) -> None:
    loaded = [load_policy(p) for p in ("dram-first", "random", "static-best", str(tiny_model))]
    assert [splittable(p) for p, _ in loaded] == [True, False, False, False]
    names = ["a", "b", "c", "d"]
    cells = plan_cells(names, [True, False, False, False], ["x", "y"], 10, 2, block_episodes=4)
    # single-process order: scenario, policy, block; blocks cover 0..9 exactly once
    assert [(c.scenario, c.name, c.start, c.n) for c in cells[:6]] == [
        ("x", "a", 0, 4), ("x", "a", 4, 4), ("x", "a", 8, 2),
        ("x", "b", 0, 10), ("x", "c", 0, 10), ("x", "d", 0, 10),
    ]  # fmt: skip
    assert len(cells) == 12 and [c.index for c in cells] == list(range(12))
    # automatic: many runs -> whole runs; one run of many episodes -> blocks of >= 64
    assert all(c.n == 16 for c in plan_cells(names, [True] * 4, ["x"] * 7, 16, 2))
    auto = plan_cells(["a"], [True], ["x"], 1024, 8)
    assert len(auto) == 16 and {c.n for c in auto} == {64}


@pytest.mark.slow
def test_distributed_evaluation_equals_single_process_bit_for_bit(
    local_ray: None, tiny_model: Path, tmp_path: Path
) -> None:
    policies = ["dram-first", "tpp", "colloid", "random", "static-best", f"ppo={tiny_model}"]
    scenarios = ["kv-store", "mixed"]
    kw = {"seed": 3, "reference": "dram-first", "plots": True}
    single = run_comparison(policies, scenarios, 9, tmp_path / "single", **kw)
    # blocks of 4 episodes (seeds 3-6, 7-10, 11) for the heuristics that allow them
    ray = RayRunner(workers=2, block_episodes=4)
    dist = run_comparison(policies, scenarios, 9, tmp_path / "ray", runner=ray, **kw)
    assert dist == single
    for name in RESULT_FILES:
        assert (tmp_path / "ray" / name).read_bytes() == (tmp_path / "single" / name).read_bytes()
    pngs = sorted(p.name for p in (tmp_path / "single").glob("*.png"))
    assert pngs and sorted(p.name for p in (tmp_path / "ray").glob("*.png")) == pngs
    assert not (tmp_path / "ray" / "cells").exists()  # removed once the results are written
    records = json.loads((tmp_path / "ray" / "results.json").read_text())["records"]
    assert [r["seed"] for r in records[:9]] == list(range(3, 12))


@pytest.mark.slow
def test_cells_are_written_as_they_finish_and_a_rerun_reuses_them(
    local_ray: None, tmp_path: Path
) -> None:
    loaded = [load_policy(p) for p in ("dram-first", "numa-tiering")]
    names = ["dram-first", "numa-tiering"]
    cells = tmp_path / "cells"
    first = run_cells(loaded, names, ["kv-store"], 6, seed=1, block_episodes=3, cells_dir=cells)
    files = sorted(cells.glob("cell-*.json"))
    assert len(files) == 4  # 2 policies x 2 blocks, each written when it finished
    saved = json.loads(files[0].read_text())
    assert saved["cell"]["start"] == 0 and len(saved["records"]) == 3
    # a run that stopped after three cells: the rerun computes only the missing one
    files[-1].unlink()
    before = {f.name: f.stat().st_mtime_ns for f in files[:-1]}
    again = run_cells(loaded, names, ["kv-store"], 6, seed=1, block_episodes=3, cells_dir=cells)
    assert again == first
    assert {f.name: f.stat().st_mtime_ns for f in files[:-1]} == before
    assert files[-1].is_file()
    # other inputs (another seed) never reuse a cell
    other = run_cells(loaded, names, ["kv-store"], 6, seed=2, block_episodes=3, cells_dir=cells)
    assert [r["seed"] for r in other[:3]] == [2, 3, 4]


@pytest.mark.slow
def test_node_without_the_package_is_one_clear_error(local_ray: None) -> None:
    check_nodes(["envs", "agents", "baselines"])
    with pytest.raises(
        RayError, match=r"without the tiergym package: .* lacks \['tiergym_missing'\]"
    ):
        check_nodes(["agents", "tiergym_missing"])


def run_eval(
    args: list[str], env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        [sys.executable, str(ROOT / "evaluate.py"), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.slow
def test_evaluate_workers_flag_gives_the_single_process_results(tmp_path: Path) -> None:
    common = ["--scenarios", "kv-store,colocation", "--policies", "dram-first,tpp,random",
              "--episodes", "3", "--seed", "7", "--no-plots"]  # fmt: skip
    a = run_eval([*common, "--no-progress", "--output", str(tmp_path / "a")])
    b = run_eval([*common, "--workers", "2", "--output", str(tmp_path / "b")])
    assert a.returncode == 0, a.stderr
    assert b.returncode == 0, b.stderr
    assert b.stdout == a.stdout  # the same tables; progress went to stderr
    # one line per finished cell (6 runs, whole: 3 episodes are too few to cut into blocks)
    assert (
        len(re.findall(r"\[\d/6\] (?:kv-store|colocation) / \S+ seeds 7-9: geomean_perf", b.stderr))
        == 6
    )
    ja = json.loads((tmp_path / "a" / "results.json").read_text())
    jb = json.loads((tmp_path / "b" / "results.json").read_text())
    assert jb.pop("command")[-3:] == ["--workers", "2", "--output", str(tmp_path / "b")][-3:]
    ja.pop("command")
    assert ja == jb


@pytest.mark.slow  # Ray: evaluate.py in a process of its own, twice (about 9 s each)
@pytest.mark.parametrize("how", ["flag", "env"])
def test_unreachable_ray_address_is_one_line_before_any_work(how: str, tmp_path: Path) -> None:
    addr = f"127.0.0.1:{free_port()}"
    args = ["--scenarios", "kv-store", "--policies", "dram-first", "--episodes", "2",
            "--output", str(tmp_path / "out")]  # fmt: skip
    if how == "flag":
        done = run_eval([*args, "--ray-address", addr])
    else:
        done = run_eval(args, env={"RAY_ADDRESS": addr})
    assert done.returncode == 2
    err = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(err) == 1 and err[0].startswith("error: cannot reach the Ray cluster at")
    assert addr in err[0]
    assert not (tmp_path / "out" / "results.json").exists()


@pytest.mark.slow  # Ray's flags: evaluate.py in a process of its own (about 8 s)
def test_bad_worker_count_is_refused() -> None:
    done = run_eval(["--workers", "0", "--episodes", "1"])
    assert done.returncode == 2
    assert "--workers 0: expected a value >= 1" in done.stderr
