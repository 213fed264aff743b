"""Training state as data: reward normalisation, replay buffers, random generators."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agents.persist.files import (
    MAX_JSON_BYTES,
    ModelFileError,
    _int_list,
    _load_npz,
    _q,
    atomic_write,
    atomic_write_text,
)

__all__ = [
    "load_replay_buffer",
    "load_rng",
    "load_vecnormalize",
    "save_replay_buffer",
    "save_rng",
    "save_vecnormalize",
]

#: VecNormalize's numeric settings, saved and restored as they are.
_NORM_SETTINGS = ("clip_obs", "clip_reward", "gamma", "epsilon")


def save_vecnormalize(path: Path, norm: Any) -> None:
    """VecNormalize's statistics and settings as ``vecnormalize.npz``."""
    arrays: dict[str, np.ndarray] = {
        "ret_mean": np.asarray(norm.ret_rms.mean, dtype=np.float64),
        "ret_var": np.asarray(norm.ret_rms.var, dtype=np.float64),
        "ret_count": np.asarray(norm.ret_rms.count, dtype=np.float64),
        "returns": np.asarray(norm.returns, dtype=np.float64),
        **{k: np.asarray(getattr(norm, k), dtype=np.float64) for k in _NORM_SETTINGS},
        "norm_obs": np.asarray(bool(norm.norm_obs)),
        "norm_reward": np.asarray(bool(norm.norm_reward)),
    }
    if norm.norm_obs:
        if not hasattr(norm.obs_rms, "mean"):
            raise ModelFileError("VecNormalize of a Dict observation space is not supported")
        arrays.update(
            obs_mean=np.asarray(norm.obs_rms.mean, dtype=np.float64),
            obs_var=np.asarray(norm.obs_rms.var, dtype=np.float64),
            obs_count=np.asarray(norm.obs_rms.count, dtype=np.float64),
        )
    atomic_write(path, lambda f: np.savez(f, **arrays))  # type: ignore[arg-type]


def _scalar(z: Mapping[str, np.ndarray], key: str, p: Path, what: str) -> float:
    a = z.get(key)
    if a is None or a.shape != () or a.dtype.kind not in "fiub":
        raise ModelFileError(f"{what} file {_q(p)}: {key} missing or not a scalar")
    v = float(a)
    if not math.isfinite(v):
        raise ModelFileError(f"{what} file {_q(p)}: {key}={v}, expected a finite number")
    return v


def _array(
    z: Mapping[str, np.ndarray], key: str, shape: tuple[int, ...], p: Path, what: str
) -> np.ndarray:
    a = z.get(key)
    if a is None or a.shape != shape or a.dtype.kind not in "fiu":
        got = None if a is None else f"{a.dtype}{a.shape}"
        raise ModelFileError(
            f"{what} file {_q(p)}: {key} is {got}, expected numbers of shape {shape}"
        )
    if not np.isfinite(a).all():
        raise ModelFileError(f"{what} file {_q(p)}: {key} holds NaN or inf")
    return a.astype(np.float64)


def load_vecnormalize(path: Path, norm: Any) -> None:
    """Put the statistics of ``vecnormalize.npz`` into ``norm`` (a VecNormalize of the same setup)."""
    p, what = Path(path), "reward-normalisation"
    z = _load_npz(p, what)
    for flag in ("norm_obs", "norm_reward"):
        a = z.get(flag)
        if a is None or a.shape != () or a.dtype != np.bool_:
            raise ModelFileError(f"{what} file {_q(p)}: {flag} missing or not a boolean")
        if bool(a) != bool(getattr(norm, flag)):
            raise ModelFileError(
                f"{what} file {_q(p)}: {flag}={bool(a)}, but this run has {flag}={bool(getattr(norm, flag))}"
            )
    norm.ret_rms.mean = _array(z, "ret_mean", tuple(np.shape(norm.ret_rms.mean)), p, what)
    norm.ret_rms.var = _array(z, "ret_var", tuple(np.shape(norm.ret_rms.var)), p, what)
    norm.ret_rms.count = _scalar(z, "ret_count", p, what)
    norm.returns = _array(z, "returns", (norm.num_envs,), p, what)
    if norm.norm_obs:
        shape = tuple(np.shape(norm.obs_rms.mean))
        norm.obs_rms.mean = _array(z, "obs_mean", shape, p, what)
        norm.obs_rms.var = _array(z, "obs_var", shape, p, what)
        norm.obs_rms.count = _scalar(z, "obs_count", p, what)
    for key in _NORM_SETTINGS:
        setattr(norm, key, _scalar(z, key, p, what))
    if norm.ret_rms.count < 0 or not 0 < norm.gamma <= 1 or norm.epsilon <= 0:
        raise ModelFileError(f"{what} file {_q(p)}: count, gamma or epsilon out of range")


_RB_ARRAYS = ("observations", "next_observations", "actions", "rewards", "dones", "timeouts")


def save_replay_buffer(path: Path, rb: Any) -> None:
    """The filled rows of a ReplayBuffer's arrays as ``replay_buffer.npz``."""
    n = rb.buffer_size if rb.full else rb.pos
    arrays: dict[str, np.ndarray] = {
        "pos": np.asarray(rb.pos, dtype=np.int64),
        "full": np.asarray(bool(rb.full)),
        "buffer_size": np.asarray(rb.buffer_size, dtype=np.int64),
        "n_envs": np.asarray(rb.n_envs, dtype=np.int64),
    }
    for name in _RB_ARRAYS:
        a = getattr(rb, name, None)
        if isinstance(a, np.ndarray):
            arrays[name] = a[:n]
        elif a is not None:
            raise ModelFileError(f"replay buffer {type(rb).__name__}: {name} is not an array")
    atomic_write(path, lambda f: np.savez(f, **arrays))  # type: ignore[arg-type]


def load_replay_buffer(path: Path, rb: Any) -> None:
    """Fill ``rb`` (the model's fresh buffer, same size and spaces) from ``replay_buffer.npz``."""
    p, what = Path(path), "replay-buffer"
    z = _load_npz(p, what)
    meta = {}
    for key in ("pos", "buffer_size", "n_envs"):
        a = z.get(key)
        if a is None or a.shape != () or a.dtype.kind not in "iu":
            raise ModelFileError(f"{what} file {_q(p)}: {key} missing or not an integer")
        meta[key] = int(a)
    full = z.get("full")
    if full is None or full.shape != () or full.dtype != np.bool_:
        raise ModelFileError(f"{what} file {_q(p)}: full missing or not a boolean")
    if meta["buffer_size"] != rb.buffer_size or meta["n_envs"] != rb.n_envs:
        raise ModelFileError(
            f"{what} file {_q(p)}: a buffer of {meta['buffer_size']} x {meta['n_envs']}, "
            f"this run's is {rb.buffer_size} x {rb.n_envs}"
        )
    if not 0 <= meta["pos"] < rb.buffer_size + (0 if bool(full) else 1):
        raise ModelFileError(f"{what} file {_q(p)}: pos={meta['pos']} out of range")
    n = rb.buffer_size if bool(full) else meta["pos"]
    for name in _RB_ARRAYS:
        target = getattr(rb, name, None)
        a = z.get(name)
        if not isinstance(target, np.ndarray):
            if a is not None:
                raise ModelFileError(f"{what} file {_q(p)}: {name} given, this buffer has none")
            continue
        want = (n, *target.shape[1:])
        if a is None or a.shape != want or a.dtype != target.dtype:
            got = None if a is None else f"{a.dtype}{a.shape}"
            raise ModelFileError(
                f"{what} file {_q(p)}: {name} is {got}, expected {target.dtype}{want}"
            )
        target[:n] = a
    rb.pos = meta["pos"]
    rb.full = bool(full)


# ------------------------------------------------------------------------------ random state


def save_rng(path: Path, model: Any) -> None:
    """Python, NumPy (legacy global), torch and action-space generator states as ``rng.json``."""
    version, internal, gauss = random.getstate()
    key: Any = np.random.get_state()  # noqa: NPY002 - SB3 draws from the legacy global generator
    space_rng = model.action_space._np_random
    doc = {
        "python": {"version": version, "state": list(internal), "gauss": gauss},
        "numpy": {
            "bit_generator": key[0],
            "key": np.asarray(key[1]).tolist(),
            "pos": int(key[2]),
            "has_gauss": int(key[3]),
            "cached_gaussian": float(key[4]),
        },
        "torch": torch.get_rng_state().tolist(),
        "action_space": None if space_rng is None else space_rng.bit_generator.state,
    }
    atomic_write_text(path, json.dumps(doc))


def load_rng(path: Path, model: Any) -> None:
    """Restore the states of :func:`save_rng`; a malformed file raises :class:`ModelFileError`."""
    p = Path(path)
    try:
        if p.stat().st_size > MAX_JSON_BYTES:
            raise ModelFileError(f"random-state file {_q(p)} is over {MAX_JSON_BYTES} bytes")
        doc = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        if isinstance(exc, ModelFileError):
            raise
        raise ModelFileError(f"random-state file {_q(p)} could not be loaded: {exc}") from None
    try:
        if not isinstance(doc, dict) or set(doc) != {"python", "numpy", "torch", "action_space"}:
            raise ValueError("expected keys python, numpy, torch, action_space")
        py, npy, tr = doc["python"], doc["numpy"], doc["torch"]
        if not (
            isinstance(py, dict)
            and _int_list(py.get("state"))
            and isinstance(py.get("version"), int)
        ):
            raise ValueError("python: malformed")
        if py.get("gauss") is not None and not isinstance(py["gauss"], float):
            raise ValueError("python: gauss")
        if not (
            isinstance(npy, dict)
            and npy.get("bit_generator") == "MT19937"
            and _int_list(npy.get("key"))
        ):
            raise ValueError("numpy: malformed")
        if not (_int_list(tr) and all(0 <= b <= 255 for b in tr)):
            raise ValueError("torch: expected bytes")
        key = np.asarray(npy["key"], dtype=np.int64)
        if key.shape != (624,) or (key < 0).any() or (key >= 1 << 32).any():
            raise ValueError("numpy: key must be 624 integers 0 .. 2**32-1")
        if not all(isinstance(npy.get(k), int) for k in ("pos", "has_gauss")) or not isinstance(
            npy.get("cached_gaussian"), int | float
        ):
            raise ValueError("numpy: pos, has_gauss, cached_gaussian")
        random.setstate((py["version"], tuple(py["state"]), py["gauss"]))
        np.random.set_state(  # noqa: NPY002 - see save_rng
            (
                "MT19937",
                key.astype(np.uint32),
                npy["pos"],
                npy["has_gauss"],
                float(npy["cached_gaussian"]),
            )
        )
        torch.set_rng_state(torch.tensor(tr, dtype=torch.uint8))
        if doc["action_space"] is not None:
            if not isinstance(doc["action_space"], dict):
                raise ValueError("action_space: expected a generator state")
            model.action_space.np_random.bit_generator.state = doc["action_space"]
    except (TypeError, ValueError, KeyError, RuntimeError, OverflowError) as exc:
        raise ModelFileError(f"random-state file {_q(p)} is malformed: {exc}") from None
