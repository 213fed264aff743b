"""The benchmark scripts' own arithmetic: the profile's shares add up, the CartPole column
is the rate over CartPole's, and the two scripts step the same spr-a1000 scenario."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import pytest

import envs.model
import envs.solver


@pytest.fixture(scope="module")
def env_speed(script: Callable[[str], ModuleType]) -> ModuleType:
    return script("benchmarks/env_speed.py")


@pytest.fixture(scope="module")
def profile(script: Callable[[str], ModuleType]) -> ModuleType:
    return script("benchmarks/profile_step.py")


def test_the_profile_steps_env_speeds_scenario(env_speed: ModuleType, profile: ModuleType) -> None:
    assert profile.SCENARIO == env_speed.SCENARIO


def test_x_cartpole_is_the_rate_over_cartpoles(env_speed: ModuleType) -> None:
    cp = env_speed.cartpole_rate(n=64, steps=5, repeats=1)
    assert cp > 0
    assert env_speed.vs_cartpole(cp, cp) == "100%"
    assert env_speed.vs_cartpole(cp / 8, cp) == "12.5%"
    assert env_speed.vs_cartpole(291_316, 20_000_000) == "1.46%"
    assert float(env_speed.vs_cartpole(687, 20_000_000).rstrip("%")) == pytest.approx(
        100 * 687 / 20_000_000, rel=5e-3
    )


def test_profile_phases_sum_to_the_step_and_wrappers_are_removed(profile: ModuleType) -> None:
    originals = {n: getattr(envs.model, n) for n in profile.PHASES}
    lsum = envs.solver.lsum
    case = profile.model_case(profile.SCENARIO, batch=8, steps=3)
    rows = profile.phase_rows(case)
    assert [n for n, _ in rows] == [*profile.PHASES, profile.REST]
    total = sum(s for _, s in rows)
    assert total == pytest.approx(case["phased"], rel=1e-9)
    assert all(s > 0 for n, s in rows if n != "validate_action")
    assert sum(s / case["phased"] for _, s in rows) == pytest.approx(1.0)
    # one step, one fixed point: one call of the compiled kernel (more only where _retry
    # solves unconverged elements again), whose Newton iterations the step reports
    calls = case["calls"]
    assert calls["solve_fixed_point (the step's call)"] == 1.0
    kernel = calls["_solve_batch (the compiled kernel)"]
    retries = calls["solve_fixed_point again (_retry: unconverged elements)"]
    assert kernel == calls["_pack (the kernel's inputs packed)"] == 1.0 + retries
    assert case["iter_max"] >= 1
    # measurement only: every patched attribute is the original again
    assert {n: getattr(envs.model, n) for n in profile.PHASES} == originals
    assert envs.solver.lsum is lsum and envs.model.lsum is lsum


def test_profile_single_instance_layers_add_up(profile: ModuleType) -> None:
    case = profile.env_case(steps=120)  # past an episode's end (a reset)
    parts = (
        sum(case["phases"].values())
        + case["rest"]
        + case["core_rest"]
        + case["env_rest"]
        + case["wrappers"]
    )
    assert parts == pytest.approx(case["total"], rel=1e-9)
    assert case["calls"]["solve_fixed_point (the step's call)"] == 1.0
