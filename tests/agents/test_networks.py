"""TenantPolicy (agents.networks): shared weights per tenant slot, saved and loaded as data."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from agents import persist
from agents.config import Recipe, TrainingError
from agents.models import build_model, read_model_file
from agents.networks import TenantPolicy
from agents.plan import with_policy_layout
from agents.view import agent_layout, make_training_vec_env
from envs import core
from envs.spaces import TIERING_MODES

ENV = {
    "scenario": "mixed",
    "split": "train",
    "tiering_modes": list(TIERING_MODES),
    "base_policy": ["colloid", "tpp", "dram-first"],
    "residual_bases": ["dram-first"],
    "residual_scale": 2.0,
    "residual_codec": "share",
    "mixing": "hard",
    "max_tenants": 4,
    "observation": "cgroup",
    "pad_nodes": 6,
}
TASK = ("scenario", "split", "max_tenants")


def _recipe(env: dict[str, Any] = ENV, net_arch: list[int] | None = None, **pk: Any) -> Recipe:
    view = {k: v for k, v in env.items() if k not in TASK}
    return Recipe(
        name="t", summary="a test", algo="ppo", policy="TenantPolicy", env=view,
        policy_kwargs={"net_arch": net_arch or [32, 32], **pk},
        rl={"total_timesteps": 64, "n_envs": 4, "normalize_reward": False,
            "hyperparams": {"n_steps": 8, "batch_size": 16}},
    )  # fmt: skip


def _model(env: dict[str, Any] = ENV) -> Any:
    recipe = with_policy_layout(_recipe(env), env)
    return build_model(recipe, make_training_vec_env(4, env), seed=0), recipe


def _mean(model: Any, obs: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        dist = model.policy.get_distribution(torch.as_tensor(obs))
        return dist.distribution.mean.numpy()


def test_tenant_slots_share_weights() -> None:
    """Swapping two tenant slots (their entries and their rows of every base action) swaps
    their share entries and leaves every other action entry as it was."""
    model, recipe = _model()
    lay = recipe.policy_kwargs.given()["layout"]
    with torch.no_grad():  # away from the near-zero initial head, so the check has teeth
        for p in model.policy.action_net.parameters():
            p.add_(0.3 * torch.randn_like(p))
    obs = model.env.reset()
    obs[:, :] = np.random.default_rng(0).random(obs.shape, dtype=np.float32)
    M, F, T, P = lay["nodes"], lay["node_features"], lay["tenants"], lay["tenant_features"]
    K, A = lay["bases"], lay["base_action"]
    swapped = obs.copy()
    at = M * F
    slots = swapped[:, at : at + T * P].reshape(-1, T, P)
    slots[:, [0, 2]] = slots[:, [2, 0]]
    bases = swapped[:, swapped.shape[1] - K * A :].reshape(-1, K, A)
    rows = bases[:, :, : T * M].reshape(-1, K, T, M)
    rows[:, :, [0, 2]] = rows[:, :, [2, 0]]
    bases[:, :, : T * M] = rows.reshape(-1, K, T * M)
    swapped[:, swapped.shape[1] - K * A :] = bases.reshape(len(obs), -1)
    a, b = _mean(model, obs), _mean(model, swapped)
    assert not np.allclose(a[:, 0], a[:, 2], atol=1e-3)
    assert np.allclose(b[:, [2, 1, 0, 3]], a[:, :4], atol=1e-5)
    assert np.allclose(b[:, 4:], a[:, 4:], atol=1e-5)


def test_saved_and_loaded_as_data(tmp_path: Path) -> None:
    """The safe model file rebuilds a TenantPolicy from its JSON (layout included) and
    its weights: the loaded model acts as the saved one."""
    model, recipe = _model()
    meta = {
        "algo": "ppo",
        "policy": "TenantPolicy",
        "hyperparams": {
            **recipe.hyperparams.given(),
            "policy_kwargs": recipe.policy_kwargs.given(),
        },
        "normalize_reward": False,
        "env": ENV,
        "seed": 0,
    }
    path = tmp_path / "model.zip"
    persist.write_model(path, model, meta, 0)
    loaded = read_model_file(path, None)
    obs = model.env.reset()
    assert np.allclose(_mean(loaded, obs), _mean(model, obs), atol=1e-6)


def test_errors_name_the_setting() -> None:
    with pytest.raises(ValueError, match=r"TenantPolicy needs env\.pad_nodes"):
        _recipe({**ENV, "pad_nodes": None})
    with pytest.raises(TrainingError, match="per-tenant"):
        with_policy_layout(_recipe(), {**ENV, "weights": "global"})
    with pytest.raises(ValueError, match="net_arch"):
        _model_arch([64, 32])
    _, recipe = _model()
    lay = {**recipe.policy_kwargs.given()["layout"], "tenants": 5}
    with pytest.raises(ValueError, match="layout"):
        build_model(_recipe(layout=lay), make_training_vec_env(4, ENV), seed=0)


def _model_arch(arch: list[int]) -> Any:
    recipe = with_policy_layout(_recipe(net_arch=arch), ENV)
    return build_model(recipe, make_training_vec_env(4, ENV), seed=0)


def test_privileged_critic_entries_reach_the_critic_and_never_the_actor() -> None:
    env = {
        "scenario": "mixed",
        "base_policy": ["colloid", "dram-first"],
        "mixing": "hard",
        "residual_bases": ["dram-first"],
        "residual_codec": "share",
        "pad_nodes": 6,
        "tiering_modes": ["default", "tpp", "memcg-fair", "damon", "no-demotion"],
        "privileged_critic": True,
    }
    venv = make_training_vec_env(4, env)
    obs = venv.reset()
    inner = venv.venv  # the agent's view over the SB3 adapter
    coming = core.coming_tenants(inner.venv.params, inner.venv.state)
    width = coming[0].size
    np.testing.assert_array_equal(obs[:, -width:], coming.reshape(4, -1))
    lay = agent_layout(inner.venv.params, inner.agent)
    assert lay["critic_tenant_features"] == core.COMING_FEATURES
    policy = TenantPolicy(
        venv.observation_space, venv.action_space, lambda _: 1e-3, layout=lay, net_arch=[16, 16]
    )
    o = torch.as_tensor(obs)
    other = o.clone()
    other[:, -width:] = torch.rand(4, width)
    with torch.no_grad():
        assert torch.equal(policy.get_distribution(o).distribution.mean,
                        policy.get_distribution(other).distribution.mean)  # fmt: skip
        assert not torch.allclose(policy.predict_values(o), policy.predict_values(other))


def test_tenant_policy_keywords_are_declared_as_the_class_takes_them() -> None:
    """agents.config declares TenantPolicy's keywords as data (it imports no agents module);
    they must be the constructor's own."""
    import importlib
    import inspect

    from agents.config.fields import PROJECT_POLICIES

    for name, p in PROJECT_POLICIES.items():
        module, attr = p.factory.split(":")
        cls = getattr(importlib.import_module(module), attr)
        assert cls.__name__ == name
        taken = set(inspect.signature(cls.__init__).parameters)
        taken -= {"self", "observation_space", "action_space", "lr_schedule"}
        assert taken == set(p.keywords)
