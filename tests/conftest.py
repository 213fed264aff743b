"""Shared test helpers."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "calibration"


@pytest.fixture(scope="session")
def calibration_dir() -> Path:
    if not SHARED.is_dir():
        pytest.skip(
            f"calibration data not found at {SHARED} (../shared/calibration beside the project)"
        )
    return SHARED


@pytest.fixture(scope="session")
def script() -> Callable[[str], ModuleType]:
    """A loader of the project's stand-alone scripts (``scripts/*.py``, ``benchmarks/*.py``):
    ``script("scripts/seed_table.py")`` imports the file as a module of its own name
    (``_seed_table``), once per call."""

    def load(relpath: str) -> ModuleType:
        path = ROOT / relpath
        spec = importlib.util.spec_from_file_location(f"_{path.stem}", path)
        assert spec and spec.loader, path
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
        return mod

    return load


@pytest.fixture(scope="session")
def short_scenario(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """kv-store cut to 8-step episodes on an 8 GiB DRAM node: training runs cross
    episode ends within a few rollouts (the command-line and run-folder tests)."""
    import yaml

    from envs import load_scenario

    sc = load_scenario("kv-store", episode_steps=8).model_dump(mode="json")
    sc["hardware"] = {"preset": "spr-a1000", "nodes": {"dram0": {"capacity_gib": 8}}}
    path = tmp_path_factory.mktemp("sc") / "short.yaml"
    path.write_text(yaml.safe_dump(sc))
    return path


@pytest.fixture(scope="session", autouse=True)
def _sb3_log_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A model that learns without a logger set makes stable-baselines3 create a
    folder `SB3-<time>` in the system's temp dir, one per call; point it into
    pytest's own temp dir, which pytest prunes."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SB3_LOGDIR", str(tmp_path_factory.mktemp("sb3")))
        yield


@pytest.fixture(scope="session", autouse=True)
def _compile_order() -> None:
    """Under pytest-xdist, the first two workers each compile one half of the model before
    their first test (:mod:`envs.warm`): the solver's kernel and the solver tests'
    evaluation (which shares the kernel's evaluation and Jacobian), and the rest. A worker
    that meets a function the other is compiling waits for it and loads it
    (:mod:`envs.jit`), so a fresh clone compiles on two cores at once instead of twice
    the same in turn. Nothing where the cache holds them already but a load."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) < 2 or worker not in ("gw0", "gw1"):
        return
    from envs.solver import compile_evaluation
    from envs.warm import compile_kernel, compile_rest

    if worker == "gw0":  # the kernel (about 45 s here), then the tests' evaluation (15 s)
        compile_kernel()
        compile_evaluation()
    else:  # the rest (about 60 s)
        compile_rest()
