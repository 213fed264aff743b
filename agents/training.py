"""Training pieces used by ``train.py``: the option schema, hyperparameters, run folders, checkpoints.

A run folder (``runs/{scenario}__{algo}__{seed}__{time}`` by default) holds:

- ``config.yml``: the resolved configuration (algorithm, env settings,
  hyperparameters, seed, budget, and every command-line option the run was
  started with, so ``--resume`` keeps them) and ``command.txt``: the exact
  commands (the start and every resume);
- ``checkpoints/step_<N>/``: ``model.zip``, ``vecnormalize.npz`` (reward
  statistics), ``replay_buffer.npz`` (off-policy), ``rng.json`` (python,
  numpy, torch and action-space generator states) and ``progress.json``;
- ``model.zip`` and ``tiergym.json`` (the env settings the model was trained
  for) at the end, ``tensorboard/`` events, ``results/`` of the final comparison.

Every file is written and read as data (:mod:`agents.persist` has the formats;
README "Trust model"): stable-baselines3's pickle files (its own ``model.zip``,
``*.pkl``) are only opened with ``trust_pickle=True`` (``--trust-pickle``).

The schema (:data:`HYPERPARAMS`, :data:`SPECIAL`, :data:`ENV_SETTINGS`,
:data:`RUN_OPTIONS`) is the one place where every value a run takes is typed
and bounded: the hyperparameter files, ``--set``, the command-line flags that
stand for a schema key (``--timesteps`` is ``total_timesteps``, ``--num-envs``
``n_envs``, ``--max-tenants`` ``env.max_tenants``...), ``config.yml`` and a
saved model's description are all checked against it.
"""

from __future__ import annotations

import inspect
import json
import math
import os
import pickle
import random
import re
import shlex
import shutil
import sys
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from agents import persist
from agents.residual import MIXINGS, RESIDUAL_CODECS, RESIDUAL_KEYS
from envs.spaces import OBSERVATIONS, TIERING_MODES

__all__ = [
    "ALGOS",
    "ENV_KEYS",
    "ENV_SETTINGS",
    "HYPERPARAMS",
    "RUN_OPTIONS",
    "SPECIAL",
    "RunConfig",
    "TrainingError",
    "build_model",
    "check_value",
    "latest_checkpoint",
    "load_hyperparams",
    "load_trained",
    "new_run_dir",
    "save_checkpoint",
]

# keyword arguments of the environments that a run records (and evaluation must reuse)
ENV_KEYS = (
    "scenario",
    "split",
    "max_tenants",
    "reward",
    "weights",
    "action_type",
    "max_promote_mbps",
    "kernel",
    "jitter",
    "pool_size",
    "tiering_modes",
    "observation",
    *RESIDUAL_KEYS,  # the agent's interface (agents.residual)
)
SPECIAL_KEYS = (
    "n_envs",
    "total_timesteps",
    "normalize_reward",
    "imitation_episodes",
    "imitation_scenarios",
    "imitation_scenario_episodes",
    "imitation_rounds",
    "imitation_plans",
    "policy",
    "env",
)
DEFAULT_N_ENVS = 16  # when a hyperparameter file has no n_envs


class TrainingError(ValueError):
    """Bad training input (algorithm, hyperparameters, run folder): the message says what to fix."""


def _algo_classes() -> dict[str, Any]:
    from sb3_contrib import RecurrentPPO
    from stable_baselines3 import A2C, PPO, SAC, TD3

    return {"ppo": PPO, "a2c": A2C, "sac": SAC, "td3": TD3, "recurrent-ppo": RecurrentPPO}


ALGOS = ("ppo", "a2c", "sac", "td3", "recurrent-ppo")
ON_POLICY = {"ppo", "a2c", "recurrent-ppo"}


def algo_class(name: str) -> Any:
    classes = _algo_classes()
    if name not in classes:
        raise TrainingError(f"unknown algorithm {name!r}, expected one of {list(ALGOS)}")
    return classes[name]


# ===================================================================================== schema


class _Reject(Exception):
    """A value that does not fit a rule (the rule's ``expected`` says what would)."""


class Rule:
    """A type and range: ``rule(value)`` returns the value (normalised) or raises ``_Reject``."""

    def __init__(self, expected: str, convert: Callable[[Any], Any]) -> None:
        self.expected = expected
        self._convert = convert

    def __call__(self, value: Any) -> Any:
        return self._convert(value)

    def __repr__(self) -> str:
        return f"Rule({self.expected})"


_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def _number(v: Any) -> int | float:
    """An int or float from a number or a numeric string (YAML reads ``1e-4`` as a string)."""
    if isinstance(v, bool):
        raise _Reject
    if isinstance(v, int | float):
        return v
    if isinstance(v, str) and _NUMBER.fullmatch(v.strip()):
        text = v.strip()
        return int(text) if re.fullmatch(r"[+-]?\d+", text) else float(text)
    raise _Reject


def _fmt(x: float) -> str:
    return str(x) if isinstance(x, int) else f"{x:g}"


def _bound_text(lo: float | None, hi: float | None, lo_open: bool, hi_open: bool) -> str:
    if lo is not None and hi is not None:
        return f"in {'(' if lo_open else '['}{_fmt(lo)}, {_fmt(hi)}{')' if hi_open else ']'}"
    if lo is not None:
        return f"{'>' if lo_open else '>='} {_fmt(lo)}"
    if hi is not None:
        return f"{'<' if hi_open else '<='} {_fmt(hi)}"
    return ""


def INT(lo: int | None = None, hi: int | None = None) -> Rule:
    """An integer in [lo, hi] (a whole number written as 1e6 counts)."""

    def convert(v: Any) -> int:
        x = _number(v)
        if isinstance(x, float):
            if not (math.isfinite(x) and x.is_integer() and abs(x) < 2**53):
                raise _Reject
            x = int(x)
        if (lo is not None and x < lo) or (hi is not None and x > hi):
            raise _Reject
        return x

    return Rule(f"an integer {_bound_text(lo, hi, False, False)}".strip(), convert)


def FLOAT(
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    hi_open: bool = False,
) -> Rule:
    """A finite number in the given (open or closed) interval."""

    def convert(v: Any) -> float:
        x = float(_number(v))
        if not math.isfinite(x):
            raise _Reject
        if lo is not None and (x < lo or (lo_open and x == lo)):
            raise _Reject
        if hi is not None and (x > hi or (hi_open and x == hi)):
            raise _Reject
        return x

    return Rule(f"a number {_bound_text(lo, hi, lo_open, hi_open)}".strip(), convert)


def _bool(v: Any) -> bool:
    if not isinstance(v, bool):
        raise _Reject
    return v


BOOL = Rule("true or false", _bool)


def CHOICE(values: Any) -> Rule:
    values = tuple(values)

    def convert(v: Any) -> Any:
        if not isinstance(v, str) or v not in values:
            raise _Reject
        return v

    return Rule(f"one of {list(values)}", convert)


def OPTIONAL(rule: Rule) -> Rule:
    return Rule(f"null or {rule.expected}", lambda v: None if v is None else rule(v))


def ANY(*rules: Rule) -> Rule:
    def convert(v: Any) -> Any:
        for r in rules:
            try:
                return r(v)
            except _Reject:
                continue
        raise _Reject

    return Rule(" or ".join(r.expected for r in rules), convert)


def _text(v: Any) -> str:
    if not isinstance(v, str) or not v or len(v) > 4096 or "\x00" in v:
        raise _Reject
    return v


TEXT = Rule("a non-empty string", _text)

_LAYER = INT(1, 1 << 16)


def _layers(v: Any) -> list[int]:
    if not isinstance(v, list) or len(v) > 32:
        raise _Reject
    return [_LAYER(x) for x in v]


def _net_arch(v: Any) -> Any:
    if isinstance(v, list):
        return _layers(v)
    if isinstance(v, dict) and v and set(v) <= {"pi", "vf", "qf"}:
        return {k: _layers(x) for k, x in v.items()}
    raise _Reject


NET_ARCH = Rule(
    "a list of layer sizes (integers 1..65536) or a mapping of pi/vf/qf to such lists", _net_arch
)


def _plain(v: Any, depth: int = 0) -> Any:
    if depth > 4:
        raise _Reject
    if v is None or isinstance(v, bool | str):
        return v
    if isinstance(v, int | float):
        if not math.isfinite(float(v)):
            raise _Reject
        return v
    if isinstance(v, list) and len(v) <= 64:
        return [_plain(x, depth + 1) for x in v]
    if isinstance(v, dict) and len(v) <= 64 and all(isinstance(k, str) for k in v):
        return {k: _plain(x, depth + 1) for k, x in v.items()}
    raise _Reject


def _kwargs(v: Any) -> Any:
    if v is None:
        return None
    if not isinstance(v, dict):
        raise _Reject
    return _plain(v)


KWARGS = Rule("null or a mapping of names to numbers, booleans, strings or lists", _kwargs)


def _train_freq(v: Any) -> Any:
    if isinstance(v, list | tuple) and len(v) == 2:
        return [INT(1)(v[0]), CHOICE(["step", "episode"])(v[1])]
    return INT(1)(v)


TRAIN_FREQ = Rule("an integer >= 1 or [integer >= 1, 'step' or 'episode']", _train_freq)


def _auto(v: Any) -> str:
    if isinstance(v, str) and (v == "auto" or re.fullmatch(r"auto_\d*\.?\d+([eE][+-]?\d+)?", v)):
        if v != "auto" and not float(v[5:]) > 0:
            raise _Reject
        return v
    raise _Reject


AUTO = Rule("'auto' or 'auto_<initial value>'", _auto)

#: Constructor arguments of the algorithms that a hyperparameter file or ``--set`` may give.
#: Which of them an algorithm takes is read from its constructor's signature.
HYPERPARAMS: dict[str, Rule] = {
    "learning_rate": FLOAT(0, lo_open=True),
    "n_steps": INT(1, 1 << 20),
    "batch_size": INT(1, 1 << 24),
    "n_epochs": INT(1, 10_000),
    "gamma": FLOAT(0, 1, lo_open=True),
    "gae_lambda": FLOAT(0, 1),
    "clip_range": FLOAT(0, lo_open=True),
    "clip_range_vf": OPTIONAL(FLOAT(0, lo_open=True)),
    "normalize_advantage": BOOL,
    "ent_coef": FLOAT(0),  # SAC: also 'auto' (ALGO_RULES)
    "vf_coef": FLOAT(0),
    "max_grad_norm": FLOAT(0, lo_open=True),
    "use_sde": BOOL,
    "sde_sample_freq": INT(-1),
    "target_kl": OPTIONAL(FLOAT(0, lo_open=True)),
    "stats_window_size": INT(1, 1 << 20),
    "policy_kwargs": KWARGS,  # checked key by key against the policy class (POLICY_KWARGS)
    "rms_prop_eps": FLOAT(0, lo_open=True),
    "use_rms_prop": BOOL,
    "buffer_size": INT(1, 1 << 30),
    "learning_starts": INT(0),
    "tau": FLOAT(0, 1, lo_open=True),
    "train_freq": TRAIN_FREQ,
    "gradient_steps": INT(-1, 1 << 20),
    "optimize_memory_usage": BOOL,
    "target_update_interval": INT(1),
    "target_entropy": ANY(CHOICE(["auto"]), FLOAT()),
    "use_sde_at_warmup": BOOL,
    "policy_delay": INT(1),
    "target_policy_noise": FLOAT(0),
    "target_noise_clip": FLOAT(0),
}
ALGO_RULES: dict[str, dict[str, Rule]] = {"sac": {"ent_coef": ANY(FLOAT(0), AUTO)}}

#: Keys of a hyperparameter file that are not constructor arguments.
SPECIAL: dict[str, Rule] = {
    "n_envs": INT(1, 1 << 16),  # --num-envs
    "total_timesteps": INT(0),  # --timesteps; 0: the warm start alone (needs imitation_episodes)
    "normalize_reward": BOOL,
    # warm start over several bases (agents.imitation): episodes per training family, 0: off
    "imitation_episodes": INT(0, 1 << 16),
    # and episodes of each of these scenarios (names; their training split)
    "imitation_scenarios": Rule("a list of scenario names", lambda v: _scenario_names(v)),
    "imitation_scenario_episodes": INT(0, 1 << 16),
    # DAgger rounds after the first fit: the fitted policy's own states, labelled, added
    "imitation_rounds": INT(0, 16),
    # with imitation_episodes: the planner's plan of each training family episode as one more
    # label, the residual over env.residual_bases' first base (agents.imitation)
    "imitation_plans": BOOL,
    # "policy": one of the algorithm's Mlp policies; "env": ENV_SETTINGS
}


def _layout(v: Any) -> Any:
    from agents.networks import check_layout

    try:
        return check_layout(v)
    except ValueError:
        raise _Reject from None


ACTIVATIONS = ("tanh", "relu", "elu", "leaky_relu", "gelu", "silu")

#: ``policy_kwargs`` keys; which ones a policy takes is read from its class's signature.
POLICY_KWARGS: dict[str, Rule] = {
    "net_arch": NET_ARCH,
    "activation_fn": CHOICE(ACTIVATIONS),
    "ortho_init": BOOL,
    "log_std_init": FLOAT(-20, 20),
    "full_std": BOOL,
    "use_expln": BOOL,
    "squash_output": BOOL,
    "share_features_extractor": BOOL,
    "normalize_images": BOOL,
    "clip_mean": FLOAT(0, lo_open=True),
    "n_critics": INT(1, 64),
    "lstm_hidden_size": INT(1, 1 << 16),
    "n_lstm_layers": INT(1, 64),
    "shared_lstm": BOOL,
    "enable_critic_lstm": BOOL,
    "optimizer_kwargs": KWARGS,
    "features_extractor_kwargs": KWARGS,
    # TenantPolicy (agents.networks): the layout train.py fills in
    "layout": Rule("a mapping of the agent's layout sizes (agents.networks.LAYOUT_KEYS)", _layout),
    "lstm_kwargs": KWARGS,
}


def _kernel(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, dict) and all(isinstance(k, str) for k in v):
        return _plain(v)
    raise _Reject


def _tiering_modes(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, list | tuple) and all(m in TIERING_MODES for m in v) and len(set(v)) == len(v):
        return list(v)
    raise _Reject


def _pad_nodes(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 64:
        return v
    raise _Reject


def _names(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, list | tuple) and all(isinstance(x, str) and x for x in v):
        return list(v)
    raise _Reject


def _scenario_names(v: Any) -> Any:
    from envs.scenario import scenario_names

    names = _names(v)
    if names is None or not set(names) <= set(scenario_names()):
        raise _Reject
    return names


def _base_policy(v: Any) -> Any:
    if v is None:
        return None
    if not isinstance(v, str | list | tuple):
        raise _Reject
    from agents.residual import base_names
    from baselines import policy_names

    names = base_names(v)  # a ValueError for an empty list or a repeated name
    known = policy_names()[:-1]
    if not all(isinstance(x, str) and (x in known or x.startswith("static:")) for x in names):
        raise _Reject
    return v if isinstance(v, str) else names


#: Environment settings (``env:`` of a hyperparameter file, ``config.yml``, ``tiergym.json``).
ENV_SETTINGS: dict[str, Rule] = {
    "scenario": TEXT,  # --scenario
    "split": CHOICE(["train", "test"]),  # --split
    "max_tenants": INT(1, 1024),  # --max-tenants
    "reward": CHOICE(["log-geomean", "throughput", "weighted-speedup", "harmonic"]),  # --reward
    "weights": CHOICE(["per-tenant", "global"]),  # --weights
    "action_type": CHOICE(["box", "discrete"]),  # --action-type
    "max_promote_mbps": FLOAT(0, 1e7, lo_open=True),
    "kernel": Rule("null or a mapping of kernel options", _kernel),
    "jitter": FLOAT(0, 1, hi_open=True),
    "pool_size": INT(1, 1 << 16),
    "tiering_modes": Rule(
        f"null or a list of tiering modes of {list(TIERING_MODES)}", _tiering_modes
    ),
    "observation": CHOICE(list(OBSERVATIONS)),
    "base_policy": Rule(
        "null, a heuristic name (residual actions over it) or a list of distinct ones "
        "(the agent mixes them)",
        _base_policy,
    ),
    "residual_scale": FLOAT(0, 2, lo_open=True),
    "mixing": CHOICE(list(MIXINGS)),
    "residual_bases": Rule("null or a list of base_policy's names", _names),
    "residual_codec": CHOICE(list(RESIDUAL_CODECS)),
    "pad_nodes": Rule("null or a number of nodes 1..64", _pad_nodes),
    "train_families": Rule("null or a list of scenario or family names", _names),
}
#: Env settings that are command-line flags only (``--scenario``, ``--reward``, ...).
FLAG_ONLY_ENV_KEYS = ("scenario", "split", "reward", "weights", "action_type")
#: Env settings a hyperparameter file may give: every other one.
FILE_ENV_KEYS = tuple(k for k in ENV_KEYS if k not in FLAG_ONLY_ENV_KEYS)

#: Run options that are command-line flags only.
RUN_OPTIONS: dict[str, Rule] = {
    "seed": INT(0, 2**31 - 1),
    "eval_interval": INT(0),
    "eval_episodes": INT(1, 1 << 16),
    "checkpoint_interval": INT(0),
    "compare_episodes": INT(0, 1 << 16),
}


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    text = " ".join(str(text).split())
    return text if len(text) <= 80 else text[:77] + "..."


def check_value(rule: Rule, value: Any, where: str) -> Any:
    """``rule(value)``, or :class:`TrainingError` ``"{where}: expected {rule.expected}"``."""
    try:
        return rule(value)
    except (_Reject, TypeError, ValueError, OverflowError):
        raise TrainingError(f"{where}: expected {rule.expected}") from None


def hyperparam_rules(algo: str) -> dict[str, Rule]:
    """The constructor arguments ``algo`` takes (by its signature) that the schema types."""
    cls = algo_class(algo)
    taken = set(inspect.signature(cls.__init__).parameters)
    rules = {k: r for k, r in HYPERPARAMS.items() if k in taken}
    rules.update({k: r for k, r in ALGO_RULES.get(algo, {}).items() if k in taken})
    return rules


#: Policies of the project for the agent's padded view (agents.networks), by algorithm.
PROJECT_POLICIES = {"TenantPolicy": ("ppo", "a2c")}


def policy_names(algo: str) -> list[str]:
    """The algorithm's policies for flat observations (its ``Mlp*`` aliases, and
    ``TenantPolicy`` for ppo and a2c)."""
    own = [n for n, algos in PROJECT_POLICIES.items() if algo in algos]
    return sorted([n for n in algo_class(algo).policy_aliases if n.startswith("Mlp")] + own)


def policy_class(algo: str, policy: str) -> Any:
    """The class of ``policy`` (a name of :func:`policy_names`)."""
    if policy == "TenantPolicy":
        from agents.networks import TenantPolicy

        return TenantPolicy
    return algo_class(algo).policy_aliases[policy]


def _policy_kwargs_rules(algo: str, policy: str) -> dict[str, Rule]:
    pcls = policy_class(algo, policy)
    taken = set(inspect.signature(pcls.__init__).parameters) - {"use_sde"}
    return {k: r for k, r in POLICY_KWARGS.items() if k in taken}


def valid_keys(algo: str, special: bool = True) -> list[str]:
    keys = set(hyperparam_rules(algo)) | ({*SPECIAL, "policy", "env"} if special else {"policy"})
    return sorted(keys)


def check_hyperparams(
    algo: str,
    hp: Mapping[str, Any],
    where: Callable[[str, Any], str],
    special: bool = True,
) -> dict[str, Any]:
    """Every key of ``hp`` checked against the schema; returns the normalised values.

    ``where(key, value)`` names the place of a value in a message (the file and
    section, or the ``--set`` item). ``special``: the file-only keys
    (``n_envs``, ``total_timesteps``, ``normalize_reward``, ``env``) are allowed.
    """
    rules = hyperparam_rules(algo)
    out: dict[str, Any] = {}
    for key, value in hp.items():
        if not isinstance(key, str):
            raise TrainingError(f"{where(str(key), value)}: keys must be names")
        if key == "policy":
            out[key] = check_value(CHOICE(policy_names(algo)), value, where(key, value))
        elif key in rules:
            out[key] = check_value(rules[key], value, where(key, value))
        elif special and key in SPECIAL:
            out[key] = check_value(SPECIAL[key], value, where(key, value))
        elif special and key == "env":
            out[key] = check_env(value, _under(where, "env"), FILE_ENV_KEYS)
        else:
            raise TrainingError(
                f"{where(key, value)}: unknown hyperparameter {key!r} for {algo}; "
                f"expected one of {valid_keys(algo, special)}"
            )
    if out.get("policy_kwargs"):
        policy = out.get("policy", "MlpLstmPolicy" if algo == "recurrent-ppo" else "MlpPolicy")
        prules = _policy_kwargs_rules(algo, policy)
        pk = {}
        for k, v in out["policy_kwargs"].items():
            w = where(f"policy_kwargs.{k}", v)
            if k not in prules:
                raise TrainingError(
                    f"{w}: unknown policy_kwargs key {k!r} for {algo}'s {policy}; "
                    f"expected one of {sorted(prules)}"
                )
            pk[k] = check_value(prules[k], v, w)
        out["policy_kwargs"] = pk
    return out


def _under(where: Callable[[str, Any], str], prefix: str) -> Callable[[str | None, Any], str]:
    """``where`` for the keys of a nested mapping (``None``: the mapping itself)."""
    return lambda k, v: where(prefix if k is None else f"{prefix}.{k}", v)


def check_env(
    env: Any, where: Callable[[str | None, Any], str], allowed: tuple[str, ...] = ENV_KEYS
) -> dict[str, Any]:
    """Env settings checked against :data:`ENV_SETTINGS` (keys limited to ``allowed``).

    ``where(key, value)`` names a setting in messages (``key`` ``None``: the whole mapping).
    """
    if env is None:
        return {}
    if not isinstance(env, dict):
        raise TrainingError(f"{where(None, env)}: expected a mapping of env settings")
    out = {}
    for key, value in env.items():
        if key not in allowed:
            others = sorted(set(ENV_KEYS) - set(allowed))
            hint = f" ({', '.join(others)} are command-line flags)" if others else ""
            raise TrainingError(
                f"{where(str(key), value)}: unknown env setting {key!r}; expected one of {list(allowed)}{hint}"
            )
        out[key] = check_value(ENV_SETTINGS[key], value, where(key, value))
    return out


def check_combination(
    algo: str, hp: Mapping[str, Any], n_envs: int, env: Mapping[str, Any], source: str
) -> None:
    """Checks across keys that stable-baselines3 would otherwise fail on mid-run."""
    if algo in ("ppo", "recurrent-ppo"):
        n_steps = int(hp.get("n_steps", 2048 if algo == "ppo" else 128))
        if n_steps * n_envs < 2:
            raise TrainingError(
                f"{source}: n_steps={n_steps} with n_envs={n_envs} gives rollouts of "
                f"{n_steps * n_envs} step; expected n_steps x n_envs >= 2"
            )
        if hp.get("normalize_advantage", True) and int(hp.get("batch_size", 64)) < 2:
            raise TrainingError(
                f"{source}: batch_size={hp.get('batch_size')}: expected an integer >= 2 "
                "(advantages are normalised per batch; or set normalize_advantage: false)"
            )
    if algo in ("sac", "td3") and env.get("action_type", "box") != "box":
        raise TrainingError(
            f"--algo {algo} needs a continuous (box) action space: got --action-type "
            f"{env.get('action_type')}, expected --action-type box"
        )
    if hp.get("use_sde") and env.get("action_type", "box") != "box":
        raise TrainingError(f"{source}: use_sde=true needs --action-type box")
    if hp.get("optimize_memory_usage"):
        raise TrainingError(
            f"{source}: optimize_memory_usage=true: expected false (stable-baselines3 does not "
            "combine it with the time-limit handling this environment needs)"
        )
    from agents.residual import make_interface

    try:  # the agent interface's own checks (residual_bases, residual_codec, ...)
        make_interface(env)
    except ValueError as exc:
        raise TrainingError(f"{source}: env.{exc}") from None
    if int(hp.get("imitation_episodes", 0)) > 0:
        from agents.residual import base_names

        if len(base_names(env.get("base_policy"))) < 2:
            raise TrainingError(
                f"{source}: imitation_episodes={hp['imitation_episodes']} needs env.base_policy "
                f"with at least two heuristics to choose between (got {env.get('base_policy')!r})"
            )
        if algo not in ("ppo", "a2c"):
            raise TrainingError(
                f"{source}: imitation_episodes: the warm start fits a Gaussian policy's mean "
                f"(ppo, a2c), not {algo}'s"
            )
        if hp.get("imitation_plans") and env.get("residual_bases") is None:
            raise TrainingError(
                f"{source}: imitation_plans=true needs env.residual_bases (the plans are fitted "
                "as the residual over its first base)"
            )
    if algo == "recurrent-ppo":
        pk = hp.get("policy_kwargs") or {}
        if pk.get("shared_lstm") and pk.get("enable_critic_lstm", True):
            raise TrainingError(
                f"{source}: policy_kwargs shared_lstm=true needs enable_critic_lstm=false"
            )


def sb3_kwargs(hp: Mapping[str, Any]) -> dict[str, Any]:
    """Constructor arguments for stable-baselines3 from checked hyperparameters."""
    import torch.nn as nn

    out = {k: v for k, v in hp.items() if k not in SPECIAL_KEYS}
    pk = dict(out.get("policy_kwargs") or {})
    if "activation_fn" in pk:
        pk["activation_fn"] = {
            "tanh": nn.Tanh,
            "relu": nn.ReLU,
            "elu": nn.ELU,
            "leaky_relu": nn.LeakyReLU,
            "gelu": nn.GELU,
            "silu": nn.SiLU,
        }[pk["activation_fn"]]
    if "train_freq" in out and isinstance(out["train_freq"], list):
        out["train_freq"] = tuple(out["train_freq"])
    if pk:
        out["policy_kwargs"] = pk
    else:
        out.pop("policy_kwargs", None)
    return out


def _parse_value(text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def _read_text(path: Path, what: str, limit: int = 1 << 20) -> str:
    try:
        if not path.is_file():
            raise TrainingError(f"{what} {str(path)!r} does not exist (or is not a file)")
        if path.stat().st_size > limit:
            raise TrainingError(f"{what} {str(path)!r} is over {limit} bytes")
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TrainingError(f"{what} {str(path)!r} could not be read: {exc}") from None


def load_hyperparams(
    algo: str, scenario_key: str, path: Path | None, overrides: list[str]
) -> tuple[dict[str, Any], str]:
    """Hyperparameters for ``algo`` on ``scenario_key``: file ``default`` + scenario section + overrides.

    Every key of every section and every ``--set`` is checked against the
    schema (the algorithm's constructor signature, types and ranges): an
    unknown key or a bad value raises :class:`TrainingError` naming the file
    and section (or the ``--set`` item), the value and what was expected.
    """
    algo_class(algo)
    if path is None:
        source = f"agents/hyperparams/{algo}.yml"
        text = (resources.files("agents") / "hyperparams" / f"{algo}.yml").read_text()
    else:
        source = str(path)
        text = _read_text(Path(path), "hyperparameter file")
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        msg = " ".join(str(exc).split())
        raise TrainingError(f"hyperparameter file {source!r} is not valid YAML: {msg}") from None
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, dict | None) for k, v in data.items()
    ):
        raise TrainingError(
            f"hyperparameter file {source!r}: expected sections (default:, <scenario>:) of key: value"
        )

    def in_section(sec: str) -> Callable[[str, Any], str]:
        return lambda k, v: f"hyperparameter file {source!r}, section {sec!r}: {k}={_short(v)}"

    sections = {
        sec: check_hyperparams(algo, body or {}, in_section(sec)) for sec, body in data.items()
    }
    hp: dict[str, Any] = dict(sections.get("default", {}))
    for k, v in sections.get(scenario_key, {}).items():
        if k == "env":
            hp["env"] = {**(hp.get("env") or {}), **v}
        else:
            hp[k] = v
    for item in overrides:
        if "=" not in item:
            raise TrainingError(f"--set {item!r}: expected KEY=VALUE")
        k, v = item.split("=", 1)
        k = k.strip()
        head, dot, sub = k.partition(".")
        if dot and head in ("env", "policy_kwargs"):  # one entry of a mapping: merged into it
            checked = check_hyperparams(
                algo, {head: {sub: _parse_value(v)}}, lambda *_, item=item: f"--set {item}"
            )
            hp[head] = {**(hp.get(head) or {}), **checked[head]}
            continue
        checked = check_hyperparams(
            algo, {k: _parse_value(v)}, lambda *_, item=item: f"--set {item}"
        )
        hp.update(checked)
    return hp, source


# ===================================================================================== runs


@dataclass
class RunConfig:
    """Everything a run needs to be repeated or resumed (saved as ``config.yml``).

    ``options`` are the command-line options the run was started with
    (``--resume`` keeps them unless the resume command gives a flag again).
    """

    algo: str
    seed: int
    total_timesteps: int
    n_envs: int
    env: dict[str, Any]
    hyperparams: dict[str, Any]
    hyperparams_source: str
    eval_interval: int
    eval_episodes: int
    checkpoint_interval: int
    references: list[str] = field(default_factory=list)
    created: str = ""
    options: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunConfig:
        return cls(**d)


def _first_file_ancestor(path: Path) -> Path | None:
    for p in [path, *path.parents]:
        if p.exists() and not p.is_dir():
            return p
    return None


def check_new_dir(path: Path, flag: str, must_be_empty: bool = True) -> None:
    """A folder that can be created (or is empty): no file in the way, a writable parent."""
    blocker = _first_file_ancestor(path)
    if blocker is not None:
        what = "is an existing file" if blocker == path else f"is inside {str(blocker)!r}, a file"
        raise TrainingError(f"{flag} {str(path)!r}: {what}; expected a folder")
    if path.is_dir():
        if must_be_empty and any(path.iterdir()):
            raise TrainingError(
                f"run folder {str(path)!r} already exists and is not empty; use --resume {path} or another --run-dir"
            )
        if not os.access(path, os.W_OK):
            raise TrainingError(f"{flag} {str(path)!r}: the folder is not writable")
        return
    parent = next(p for p in path.parents if p.exists())
    if not os.access(parent, os.W_OK | os.X_OK):
        raise TrainingError(
            f"{flag} {str(path)!r}: cannot create it, {str(parent)!r} is not writable"
        )


def run_dir_path(root: Path, scenario: str, algo: str, seed: int, run_dir: Path | None) -> Path:
    """The run folder a new run would use, checked but not created."""
    if run_dir is None:
        check_new_dir(root, "--runs-root", must_be_empty=False)
        stem = re.sub(
            r"[^A-Za-z0-9_.-]+",
            "-",
            Path(scenario).stem if scenario.endswith((".yaml", ".yml")) else scenario,
        )
        run_dir = root / f"{stem}__{algo}__{seed}__{time.strftime('%Y%m%d-%H%M%S')}"
    check_new_dir(run_dir, "--run-dir")
    return run_dir


def new_run_dir(root: Path, scenario: str, algo: str, seed: int, run_dir: Path | None) -> Path:
    """A fresh run folder; an existing one is never reused (nothing is overwritten)."""
    path = run_dir_path(root, scenario, algo, seed, run_dir)
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_config(run_dir: Path, cfg: RunConfig, argv: list[str], append: bool = False) -> None:
    """``config.yml`` and ``command.txt`` (a resume appends its command line)."""
    text = yaml.safe_dump(cfg.to_dict(), sort_keys=False)
    tmp = run_dir / ".config.yml.tmp"
    tmp.write_text(text)
    tmp.replace(run_dir / "config.yml")
    line = shlex.join([sys.executable, *argv]) + "\n"
    with open(run_dir / "command.txt", "a" if append else "w") as f:
        f.write(line)


def _raise() -> Any:
    raise _Reject


_CONFIG_RULES: dict[str, Rule] = {
    "algo": CHOICE(ALGOS),
    "seed": RUN_OPTIONS["seed"],
    "total_timesteps": SPECIAL["total_timesteps"],
    "n_envs": SPECIAL["n_envs"],
    "hyperparams_source": Rule("a string", lambda v: v if isinstance(v, str) else _raise()),
    "eval_interval": RUN_OPTIONS["eval_interval"],
    "eval_episodes": RUN_OPTIONS["eval_episodes"],
    "checkpoint_interval": RUN_OPTIONS["checkpoint_interval"],
    "created": Rule("a string", lambda v: v if isinstance(v, str) else _raise()),
}


def read_config(run_dir: Path) -> RunConfig:
    """The run's ``config.yml``, every value checked against the schema."""
    path = run_dir / "config.yml"
    if not path.is_file():
        raise TrainingError(f"{str(run_dir)!r} is not a run folder (no config.yml)")
    text = _read_text(path, "run configuration", 4 << 20)
    try:
        d = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        msg = " ".join(str(exc).split())
        raise TrainingError(f"run configuration {str(path)!r} is not valid YAML: {msg}") from None
    names = {f for f in RunConfig.__dataclass_fields__}
    required = names - {"references", "created", "options"}
    if not isinstance(d, dict) or not required <= set(d) or not set(d) <= names:
        got = sorted(d) if isinstance(d, dict) else type(d).__name__
        raise TrainingError(
            f"{str(path)!r} is not a complete run configuration: has {got}, expected {sorted(required)}"
        )
    where = lambda k, v: f"run configuration {str(path)!r}: {k}={_short(v)}"  # noqa: E731
    for key, rule in _CONFIG_RULES.items():
        if key in d:
            d[key] = check_value(rule, d[key], where(key, d[key]))
    d["env"] = check_env(d["env"], _under(where, "env"))
    for k in ("scenario", "split"):
        if k not in d["env"]:
            raise TrainingError(f"run configuration {str(path)!r}: env.{k} is missing")
    if not isinstance(d["hyperparams"], dict):
        raise TrainingError(f"run configuration {str(path)!r}: hyperparams: expected a mapping")
    d["hyperparams"] = check_hyperparams(
        d["algo"], d["hyperparams"], lambda k, v: where(f"hyperparams.{k}", v)
    )
    refs = d.get("references", [])
    if not isinstance(refs, list) or not all(isinstance(r, str) for r in refs):
        raise TrainingError(
            f"run configuration {str(path)!r}: references: expected a list of names"
        )
    if not isinstance(d.get("options", {}) or {}, dict):
        raise TrainingError(f"run configuration {str(path)!r}: options: expected a mapping")
    d["options"] = d.get("options") or {}
    return RunConfig.from_dict(d)


# =================================================================================== models


def build_model(
    algo: str,
    hyperparams: Mapping[str, Any],
    env: Any,
    seed: int | None,
) -> Any:
    """A fresh stable-baselines3 model of ``algo`` on ``env`` from checked hyperparameters."""
    cls = algo_class(algo)
    hp = dict(hyperparams)
    policy = hp.pop("policy", "MlpLstmPolicy" if algo == "recurrent-ppo" else "MlpPolicy")
    pcls = policy_class(algo, policy) if policy in PROJECT_POLICIES else policy
    return cls(pcls, env, seed=seed, device="cpu", verbose=0, **sb3_kwargs(hp))


def with_policy_layout(hp: Mapping[str, Any], env: Mapping[str, Any]) -> dict[str, Any]:
    """``hp`` with ``policy_kwargs.layout`` filled from the environment for ``TenantPolicy``
    (:func:`agents.residual.agent_layout`); other policies' unchanged.

    Raises:
        TrainingError: the env settings do not give the padded view it reads.
    """
    out = dict(hp)
    if out.get("policy") != "TenantPolicy":
        return out
    from agents.residual import agent_layout, core_kwargs, make_interface
    from envs.core import make_params

    try:
        params = make_params(**core_kwargs({**env, "pool_size": 8}))
        layout = agent_layout(params, make_interface(env))
    except ValueError as exc:
        raise TrainingError(f"env settings: {exc}") from None
    out["policy_kwargs"] = {**(out.get("policy_kwargs") or {}), "layout": layout}
    return out


def dry_build(cfg: RunConfig) -> None:
    """Build the model once on a stand-in env with the run's spaces: SB3's own checks, before any work."""
    from agents.residual import core_kwargs, make_interface
    from envs.core import make_params

    try:
        agent = make_interface(cfg.env)
        found: list[Any] = []
        for fam in [cfg.env["scenario"], *(cfg.env.get("train_families") or [])]:
            params = make_params(**core_kwargs({**cfg.env, "scenario": fam, "pool_size": 8}))
            agent.bind(params, 1)  # the base's kernel must be a tiering mode; the padding fit
            spaces = agent.spaces(params)
            if found and spaces != tuple(found):
                raise ValueError(f"train_families: {fam!r} gives other agent spaces; set pad_nodes")
            found = list(spaces)
        obs_space, act_space = found
    except ValueError as exc:
        raise TrainingError(f"env settings: {exc}") from None
    env = persist.SpacesOnlyEnv(cfg.n_envs, obs_space, act_space)
    try:
        build_model(cfg.algo, cfg.hyperparams, env, seed=cfg.seed)
    except (AssertionError, ValueError, TypeError) as exc:
        msg = " ".join(str(exc).split()) or type(exc).__name__
        raise TrainingError(
            f"hyperparameters for {cfg.algo} ({cfg.hyperparams_source} and --set): stable-baselines3 refuses them: {msg}"
        ) from None


def _model_meta(cfg: RunConfig) -> dict[str, Any]:
    hp = dict(cfg.hyperparams)
    policy = hp.pop("policy", "MlpLstmPolicy" if cfg.algo == "recurrent-ppo" else "MlpPolicy")
    normalize_reward = bool(hp.pop("normalize_reward", False))
    return {
        "algo": cfg.algo,
        "policy": policy,
        "hyperparams": {k: v for k, v in hp.items() if k not in SPECIAL_KEYS},
        "normalize_reward": normalize_reward,
        "env": cfg.env,
        "seed": cfg.seed,
    }


def save_model(path: Path, model: Any, cfg: RunConfig, timesteps: int | None = None) -> None:
    """``model`` as a safe ``model.zip`` (:mod:`agents.persist`)."""
    persist.write_model(
        path, model, _model_meta(cfg), model.num_timesteps if timesteps is None else timesteps
    )


def _check_meta(meta: dict[str, Any], path: Path) -> tuple[str, str, dict[str, Any]]:
    """``(algo, policy, hyperparams)`` of a model description, checked against the schema."""
    where = lambda k, v: f"model file {str(path)!r}: {k}={_short(v)}"  # noqa: E731
    algo = check_value(CHOICE(ALGOS), meta.get("algo"), where("algo", meta.get("algo")))
    policy = check_value(
        CHOICE(policy_names(algo)), meta.get("policy"), where("policy", meta.get("policy"))
    )
    hp = meta.get("hyperparams")
    if not isinstance(hp, dict):
        raise TrainingError(f"model file {str(path)!r}: hyperparams: expected a mapping")
    hp = check_hyperparams(algo, {**hp, "policy": policy}, where, special=False)
    return algo, policy, hp


def _safe_model(path: Path, cfg_algo: str | None, env: Any | None, predict_only: bool) -> Any:
    """Build the model a safe ``model.zip`` describes and load its weights.

    ``env``: the environment to train on (resume); ``None``: a stand-in with
    the saved spaces, enough to predict (``predict_only`` keeps its buffers small).
    """
    meta, tensors = persist.read_model(path)
    algo, _, hp = _check_meta(meta, path)
    if cfg_algo is not None and algo != cfg_algo:
        raise TrainingError(f"model file {str(path)!r} holds a {algo} model, expected {cfg_algo}")
    where = lambda k, v: f"model file {str(path)!r}: {k}={_short(v)}"  # noqa: E731
    seed = meta.get("seed")
    seed = None if seed is None else check_value(RUN_OPTIONS["seed"], seed, where("seed", seed))
    obs = persist.space_from_json(
        meta.get("observation_space"), f"model file {str(path)!r}: observation_space"
    )
    act = persist.space_from_json(
        meta.get("action_space"), f"model file {str(path)!r}: action_space"
    )
    n_envs = check_value(SPECIAL["n_envs"], meta.get("n_envs"), where("n_envs", meta.get("n_envs")))
    if env is None:
        if predict_only:
            n_envs = 1
            if "buffer_size" in hyperparam_rules(algo):
                hp["buffer_size"] = 1
        env = persist.SpacesOnlyEnv(n_envs, obs, act)
    elif env.observation_space != obs or env.action_space != act:
        raise TrainingError(
            f"model file {str(path)!r} was saved for observations {obs} and actions {act}, "
            f"this run's env has {env.observation_space} and {env.action_space}"
        )
    try:
        with warnings.catch_warnings():
            if predict_only:  # batch-size advice for a model that will not train
                warnings.simplefilter("ignore", UserWarning)
            model = build_model(algo, hp, env, seed=seed)
    except (AssertionError, ValueError, TypeError) as exc:
        msg = " ".join(str(exc).split())
        raise TrainingError(
            f"model file {str(path)!r}: its description does not build a model: {msg}"
        ) from None
    persist.restore_model_state(model, meta, tensors, path)
    model._model_meta = meta  # the description, for callers that want the env settings
    return model


# ============================================================================== checkpoints


def save_checkpoint(
    run_dir: Path, model: Any, timesteps: int, venv_norm: Any | None, cfg: RunConfig | None = None
) -> Path:
    """Model, normalisation statistics, replay buffer and random state at ``timesteps``.

    Everything in the safe formats of :mod:`agents.persist`; the folder
    appears whole or not at all. ``cfg`` defaults to the run's ``config.yml``.
    """
    if cfg is None:
        cfg = read_config(run_dir)
    ck = run_dir / "checkpoints" / f"step_{timesteps:012d}"
    tmp = ck.with_name(ck.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    save_model(tmp / "model.zip", model, cfg, timesteps)
    if venv_norm is not None:
        persist.save_vecnormalize(tmp / "vecnormalize.npz", venv_norm)
    if getattr(model, "replay_buffer", None) is not None:
        persist.save_replay_buffer(tmp / "replay_buffer.npz", model.replay_buffer)
    persist.save_rng(tmp / "rng.json", model)
    (tmp / "progress.json").write_text(json.dumps({"timesteps": timesteps, "time": time.time()}))
    if ck.exists():
        shutil.rmtree(ck)
    tmp.rename(ck)  # a checkpoint appears whole or not at all
    return ck


def checkpoints(run_dir: Path) -> list[Path]:
    """The run's complete checkpoints, oldest first."""
    folder = run_dir / "checkpoints"
    if not folder.is_dir():
        return []
    return sorted(
        p
        for p in folder.glob("step_*")
        if p.is_dir() and re.fullmatch(r"step_\d{12}", p.name) and (p / "model.zip").is_file()
    )


def latest_checkpoint(run_dir: Path) -> Path:
    cks = checkpoints(run_dir)
    if not cks:
        raise TrainingError(
            f"run folder {str(run_dir)!r} has no checkpoint to resume from (looked in {run_dir / 'checkpoints'})"
        )
    return cks[-1]


def checkpoint_steps(ck: Path) -> int:
    return int(ck.name.split("_")[1])


LEGACY_FILES = ("vecnormalize.pkl", "replay_buffer.pkl", "rng.pkl")


def checkpoint_is_legacy(ck: Path) -> bool:
    """Whether the checkpoint was written by the pickle-based code (before the safe formats)."""
    try:
        kind = persist.archive_kind(ck / "model.zip")
    except persist.ModelFileError as exc:
        raise TrainingError(str(exc)) from None
    return kind == "sb3" or any((ck / f).is_file() for f in LEGACY_FILES)


def legacy_refusal(ck: Path) -> TrainingError:
    return TrainingError(
        f"checkpoint {str(ck)!r} is in stable-baselines3's pickle format (model.zip, *.pkl), and "
        "loading it can run arbitrary code; pass --trust-pickle to resume it only if you made it yourself"
    )


def resume_model(
    ck: Path, cfg: RunConfig, venv: Any, norm: Any | None, trust_pickle: bool = False
) -> tuple[Any, Any | None]:
    """The model of checkpoint ``ck`` ready to train on: weights, optimizer, counters, buffers, RNG.

    Returns ``(model, norm)``; ``norm`` is the VecNormalize wrapper in use.
    A pickle-format checkpoint needs ``trust_pickle``.
    """
    if checkpoint_is_legacy(ck):
        if not trust_pickle:
            raise legacy_refusal(ck)
        return _resume_legacy(ck, cfg, venv, norm)
    train_env = norm if norm is not None else venv
    try:
        model = _safe_model(ck / "model.zip", cfg.algo, train_env, predict_only=False)
        if norm is not None:
            path = ck / "vecnormalize.npz"
            if not path.is_file():
                raise TrainingError(
                    f"checkpoint {str(ck)!r} has no vecnormalize.npz (reward normalisation is on)"
                )
            persist.load_vecnormalize(path, norm)
        if getattr(model, "replay_buffer", None) is not None:
            path = ck / "replay_buffer.npz"
            if not path.is_file():
                raise TrainingError(
                    f"checkpoint {str(ck)!r} has no replay_buffer.npz ({cfg.algo} is off-policy)"
                )
            persist.load_replay_buffer(path, model.replay_buffer)
        persist.load_rng(ck / "rng.json", model)
    except persist.ModelFileError as exc:
        raise TrainingError(str(exc)) from None
    model._last_obs = None  # the env resets at the start of learn (seeded by the caller)
    return model, norm


def _resume_legacy(ck: Path, cfg: RunConfig, venv: Any, norm: Any | None) -> tuple[Any, Any | None]:
    """The pre-safe-format path (``--trust-pickle``): SB3's load, VecNormalize.load, pickled RNG."""
    cls = algo_class(cfg.algo)
    if norm is not None and (ck / "vecnormalize.pkl").is_file():
        from stable_baselines3.common.vec_env import VecNormalize

        norm = VecNormalize.load(str(ck / "vecnormalize.pkl"), venv)
    train_env = norm if norm is not None else venv
    model = cls.load(ck / "model.zip", env=train_env, device="cpu")
    if (ck / "replay_buffer.pkl").is_file():
        model.load_replay_buffer(ck / "replay_buffer.pkl")
    if (ck / "rng.pkl").is_file():
        with open(ck / "rng.pkl", "rb") as f:
            rng = pickle.load(f)  # the user passed --trust-pickle
        random.setstate(rng["python"])
        np.random.set_state(rng["numpy"])  # noqa: NPY002 - SB3 draws from the legacy global generator
        torch.set_rng_state(rng["torch"])
        if rng.get("action_space") is not None:
            model.action_space.np_random.bit_generator.state = rng["action_space"]
    return model, norm


def save_final(run_dir: Path, model: Any, cfg: RunConfig) -> Path:
    path = run_dir / "model.zip"
    save_model(path, model, cfg)
    (run_dir / "tiergym.json").write_text(
        json.dumps({"algo": cfg.algo, "env": cfg.env, "seed": cfg.seed}, indent=2)
    )
    return path


def _read_tiergym_json(meta: Path) -> tuple[str, dict[str, Any]]:
    text = _read_text(meta, "run description", 1 << 20)
    try:
        info = json.loads(text)
    except ValueError as exc:
        raise TrainingError(f"run description {str(meta)!r} is not valid JSON: {exc}") from None
    if not isinstance(info, dict) or "algo" not in info or "env" not in info:
        raise TrainingError(
            f"run description {str(meta)!r}: expected an object with algo and env (and seed)"
        )
    where = lambda k, v: f"run description {str(meta)!r}: {k}={_short(v)}"  # noqa: E731
    algo = check_value(CHOICE(ALGOS), info["algo"], where("algo", info["algo"]))
    env = check_env(info["env"], _under(where, "env"))
    if "scenario" not in env:
        raise TrainingError(f"run description {str(meta)!r}: env.scenario is missing")
    return algo, env


def _with_layout(model: Any, env: dict[str, Any]) -> dict[str, Any]:
    """``env`` with its observation layout; a run that records none (written before the
    tenant descriptors, or by hand) gets the layout whose size the model's observations have."""
    if "observation" in env:
        return env
    from agents.residual import agent_spaces, core_kwargs
    from envs.core import make_params

    want = getattr(model.observation_space, "shape", None)
    for layout in OBSERVATIONS:  # their sizes differ: at most one matches
        try:
            params = make_params(**core_kwargs({**env, "observation": layout, "pool_size": 8}))
            got = agent_spaces(params, env.get("base_policy"), env.get("pad_nodes"))[0].shape
        except ValueError:
            continue
        if got == want:
            return {**env, "observation": layout}
    return {**env, "observation": "basic"}


def load_trained(path: str | Path, trust_pickle: bool = False) -> tuple[Any, dict[str, Any], str]:
    """A trained model and the env settings it was trained for.

    ``path`` is a run folder (its ``model.zip``, else its latest checkpoint) or
    a model file whose folder holds ``tiergym.json`` or ``config.yml`` (a safe
    ``model.zip`` also carries its env settings). Returns ``(model, env_kwargs, algo)``.
    The model is rebuilt to predict (small buffers, no environment).

    A ``model.zip`` written by stable-baselines3 (pickle) is refused unless
    ``trust_pickle``: loading it can run code.
    """
    p = Path(path)
    if p.is_dir():
        run_dir = p
        model_file = p / "model.zip"
        if not model_file.is_file():
            model_file = latest_checkpoint(p) / "model.zip"
    else:
        if not p.exists():
            raise TrainingError(f"model file {str(p)!r} does not exist")
        model_file = p
        run_dir = (
            p.parent
            if (p.parent / "tiergym.json").is_file() or (p.parent / "config.yml").is_file()
            else p.parent.parent.parent
        )
    algo: str | None = None
    env: dict[str, Any] | None = None
    meta = run_dir / "tiergym.json"
    if meta.is_file():
        algo, env = _read_tiergym_json(meta)
    elif (run_dir / "config.yml").is_file():
        cfg = read_config(run_dir)
        algo, env = cfg.algo, cfg.env
    try:
        kind = persist.archive_kind(model_file)
    except persist.ModelFileError as exc:
        raise TrainingError(str(exc)) from None
    if kind == "sb3":
        if not trust_pickle:
            raise TrainingError(
                f"model file {str(model_file)!r} is a stable-baselines3 pickle archive, and loading it "
                "can run arbitrary code; refused (pass --trust-pickle only for a file you made yourself "
                "or fully trust)"
            )
        if algo is None or env is None:
            raise TrainingError(
                f"{str(model_file)!r}: no tiergym.json or config.yml beside it, so its env settings are unknown"
            )
        try:
            model = algo_class(algo).load(model_file, device="cpu")
        except Exception as exc:  # a truncated or foreign zip
            msg = " ".join(str(exc).split())[:300]
            raise TrainingError(
                f"model file {str(model_file)!r} could not be loaded as a {algo} model: {msg}"
            ) from None
        return model, _with_layout(model, env), algo
    try:
        model = _safe_model(model_file, algo, None, predict_only=True)
    except persist.ModelFileError as exc:
        raise TrainingError(str(exc)) from None
    saved = model._model_meta
    if env is None:
        env = check_env(
            saved.get("env"),
            _under(lambda k, v: f"model file {str(model_file)!r}: {k}={_short(v)}", "env"),
        )
    return model, _with_layout(model, env), saved["algo"]
