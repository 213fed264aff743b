"""envs.records.record: the step's records built without the dataclass's __init__."""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np
import pytest

import envs.model  # registers the environment too
from envs import core
from envs.model import Outputs, State
from envs.records import record
from envs.solver import Solution, solve_fixed_point


@dataclasses.dataclass(frozen=True)
class _Pair:
    a: int
    b: np.ndarray


def test_record_equals_init() -> None:
    b = np.arange(3)
    got, want = record(_Pair, {"a": 1, "b": b}), _Pair(a=1, b=b)
    assert type(got) is _Pair
    assert got.__dict__.keys() == want.__dict__.keys()
    assert got.a == 1 and got.b is b
    with pytest.raises(dataclasses.FrozenInstanceError):
        got.a = 2  # type: ignore[misc]


@pytest.mark.parametrize(
    ("fields", "needle"),
    [
        ({"a": 1}, "missing ['b']"),
        ({"a": 1, "b": 2, "c": 3}, "unknown ['c']"),
        ({"b": 2, "a": 1}, "declared order"),
    ],
)
def test_record_refuses_wrong_fields(fields: dict, needle: str) -> None:
    with pytest.raises(TypeError, match=needle.replace("[", r"\[").replace("]", r"\]")):
        record(_Pair, fields)


def test_record_refuses_post_init() -> None:
    @dataclasses.dataclass
    class Checked:
        x: int

        def __post_init__(self) -> None:
            raise AssertionError

    with pytest.raises(TypeError, match="__post_init__"):
        record(Checked, {"x": 1})


def _fields_in_order(obj: object) -> list[str]:
    return [f.name for f in dataclasses.fields(obj)]  # type: ignore[arg-type]


@pytest.mark.parametrize("baseline", [None, "colloid"])
def test_step_records_hold_their_fields_in_order(
    baseline: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every record a step builds has exactly its fields, in order (as __init__ leaves
    them): Metrics' mapping reads them in that order."""
    solutions: list[Solution] = []

    def solve(*args: object, **kwargs: object) -> Solution:
        solutions.append(solve_fixed_point(*args, **kwargs))
        return solutions[-1]

    monkeypatch.setattr(envs.model, "solve_fixed_point", solve)
    env = gym.make("tiergym/TieredMemory-v0", scenario="mixed", reward_baseline=baseline)
    env.reset(seed=3)
    for _ in range(3):
        _, _, _, _, info = env.step(env.action_space.sample())
    state = env.unwrapped.state
    model = state.model
    assert isinstance(model, State)
    for obj in (state, model):
        assert list(obj.__dict__) == _fields_in_order(obj)
    assert list(info) == list(core.Metrics.__dataclass_fields__)
    pstate, _, _, _, _, metrics = core.step(
        env.unwrapped.params,
        state,
        env.action_space.sample()[None],
        None if baseline is None else env.unwrapped.twin.act(state),
    )
    assert list(metrics.__dict__) == _fields_in_order(metrics)
    assert list(pstate.__dict__) == _fields_in_order(pstate)
    out = Outputs(**{k: getattr(metrics, k) for k in Outputs.__dataclass_fields__})
    for half in out.split(0):
        assert list(half.__dict__) == _fields_in_order(half)
    for half in model.split(0):
        assert list(half.__dict__) == _fields_in_order(half)
    assert list(model.concat(model).__dict__) == _fields_in_order(model)
    assert list(model.copy().__dict__) == _fields_in_order(model)
    assert solutions
    for sol in solutions:
        assert list(sol.__dict__) == _fields_in_order(sol)
