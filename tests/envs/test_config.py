"""The environment's settings are declared once (envs.config.EnvConfig): make_params, the
Gymnasium keywords, the environment's docstring and docs/env.md's table derive from it."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import gymnasium as gym
import pytest

import envs
from envs import core
from envs.config import EnvConfig, arguments_table, field_names

ROOT = Path(__file__).resolve().parents[2]


def test_make_params_takes_exactly_the_config_fields() -> None:
    params = inspect.signature(core.make_params).parameters
    assert list(params) == field_names()
    for f in dataclasses.fields(EnvConfig):
        assert params[f.name].default == f.default


def test_docs_table_and_docstring_are_the_config() -> None:
    assert arguments_table() in (ROOT / "docs" / "env.md").read_text()
    doc = envs.TieredMemoryEnv.__doc__ or ""
    for name in field_names():
        assert f"``{name}`` (default " in doc


def test_unknown_argument_is_named_everywhere() -> None:
    with pytest.raises(ValueError, match=r"unknown environment argument 'jiter'.*'jitter'"):
        core.make_params("kv-store", jiter=0.1)
    with pytest.raises(ValueError, match="unknown environment argument 'jiter'"):
        gym.make(envs.ENV_ID, scenario="kv-store", jiter=0.1)
    with pytest.raises(ValueError, match="unknown environment argument 'jiter'"):
        gym.make_vec(envs.ENV_ID, num_envs=2, vectorization_mode="vector_entry_point", jiter=0.1)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"split": "validation"}, "split: got 'validation'"),
        ({"reward": "speed"}, "reward: got 'speed'"),
        ({"observation": "all"}, "observation: got 'all'"),
        ({"max_tenants": 0}, "max_tenants: got 0"),
        ({"tiering_modes": "tpp"}, "tiering_modes: got 'tpp'"),
        ({"tiering_modes": ["tpp", "fast"]}, "tiering_modes"),
    ],
)
def test_bad_values_fail_before_anything_is_built(kw: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        EnvConfig.of(**kw)


def test_a_config_and_its_variants() -> None:
    cfg = EnvConfig.of("kv-store", jitter=0.1)
    assert cfg.given() == {"scenario": "kv-store", "jitter": 0.1}
    test = EnvConfig.of(cfg, split="test")
    assert test.split == "test" and test.jitter == 0.1 and cfg.split == "train"
    with pytest.raises(ValueError, match="given twice"):
        EnvConfig.of("kv-store", scenario="mixed")
    a = core.make_params(cfg)
    b = core.make_params("kv-store", jitter=0.1)
    assert a.env_kwargs() == b.env_kwargs()
