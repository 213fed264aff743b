"""The safe ``model.zip``: spaces as JSON, the description and the tensors, and a model rebuilt from them."""

from __future__ import annotations

import io
import json
import operator
import zipfile
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.vec_env import VecEnv

from agents.persist.files import (
    FORMAT,
    MAX_EP_INFO,
    MAX_META_BYTES,
    MAX_WEIGHTS_BYTES,
    META_NAME,
    SB3_MEMBERS,
    VERSION,
    WEIGHTS_NAME,
    ModelFileError,
    UntrustedFileError,
    _int_list,
    _q,
    atomic_write,
)

__all__ = [
    "SpacesOnlyEnv",
    "read_model",
    "require_safe",
    "restore_model_state",
    "space_from_json",
    "space_to_json",
    "write_model",
]


def space_to_json(space: spaces.Space) -> dict[str, Any]:
    """A Box, Discrete or MultiDiscrete space as JSON data."""
    if isinstance(space, spaces.Box):
        return {
            "type": "Box",
            "shape": list(space.shape),
            "dtype": str(space.dtype),
            "low": np.asarray(space.low).tolist(),
            "high": np.asarray(space.high).tolist(),
        }
    if isinstance(space, spaces.MultiDiscrete):
        return {
            "type": "MultiDiscrete",
            "nvec": np.asarray(space.nvec).tolist(),
            "start": np.asarray(space.start).tolist(),
            "dtype": str(space.dtype),
        }
    if isinstance(space, spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    raise ModelFileError(f"space {space!r}: only Box, Discrete and MultiDiscrete are saved")


_DTYPES = {"float32", "float64", "int32", "int64", "uint8"}


def _nested_numbers(v: Any) -> bool:
    if isinstance(v, list):
        return all(_nested_numbers(x) for x in v)
    return isinstance(v, int | float) and not isinstance(v, bool)


def space_from_json(d: Any, where: str) -> spaces.Space:
    """The space :func:`space_to_json` wrote; anything else raises :class:`ModelFileError`."""
    if not isinstance(d, dict) or d.get("type") not in ("Box", "Discrete", "MultiDiscrete"):
        raise ModelFileError(f"{where}: expected a Box, Discrete or MultiDiscrete space")
    try:
        if d["type"] == "Box":
            if (
                set(d) != {"type", "shape", "dtype", "low", "high"}
                or not _int_list(d["shape"])
                or d["dtype"] not in _DTYPES
                or not _nested_numbers(d["low"])
                or not _nested_numbers(d["high"])
                or len(d["shape"]) > 8
                or any(n < 1 or n > 1 << 20 for n in d["shape"])
            ):
                raise ModelFileError(f"{where}: malformed Box space")
            dt = np.dtype(d["dtype"])
            low = np.asarray(d["low"], dtype=dt)
            high = np.asarray(d["high"], dtype=dt)
            if low.shape != tuple(d["shape"]) or high.shape != tuple(d["shape"]):
                raise ModelFileError(f"{where}: Box bounds do not have its shape {d['shape']}")
            return spaces.Box(low=low, high=high, shape=tuple(d["shape"]), dtype=dt)
        if d["type"] == "MultiDiscrete":
            if (
                set(d) != {"type", "nvec", "start", "dtype"}
                or not _int_list(d["nvec"])
                or not _int_list(d["start"])
                or d["dtype"] not in _DTYPES
                or not 0 < len(d["nvec"]) <= 1 << 16
                or len(d["start"]) != len(d["nvec"])
                or any(n < 1 for n in d["nvec"])
            ):
                raise ModelFileError(f"{where}: malformed MultiDiscrete space")
            dt = np.dtype(d["dtype"])
            return spaces.MultiDiscrete(
                np.asarray(d["nvec"], dtype=dt), dtype=dt, start=np.asarray(d["start"], dtype=dt)
            )
        if set(d) != {"type", "n", "start"} or not _int_list([d["n"], d["start"]]) or d["n"] < 1:
            raise ModelFileError(f"{where}: malformed Discrete space")
        return spaces.Discrete(int(d["n"]), start=int(d["start"]))
    except (TypeError, ValueError, OverflowError) as exc:
        if isinstance(exc, ModelFileError):
            raise
        raise ModelFileError(f"{where}: malformed {d['type']} space ({exc})") from None


class SpacesOnlyEnv(VecEnv):
    """A stand-in environment that only has spaces: a loaded model can predict, not train."""

    def __init__(self, num_envs: int, observation_space: spaces.Space, action_space: spaces.Space):
        self.render_mode = None
        super().__init__(num_envs, observation_space, action_space)

    def _no(self, *_: Any, **__: Any) -> Any:
        raise RuntimeError("this model was loaded for prediction; it has no environment")

    reset = step_async = step_wait = set_attr = env_method = _no

    def close(self) -> None:
        pass

    def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
        if attr_name == "render_mode":
            return [None for _ in self._get_indices(indices)]
        raise AttributeError(attr_name)

    def env_is_wrapped(self, wrapper_class: Any, indices: Any = None) -> list[bool]:
        return [False for _ in self._get_indices(indices)]

    def seed(self, seed: int | None = None) -> list[int | None]:
        return [None for _ in range(self.num_envs)]


# ------------------------------------------------------------------------------------ models


def _ep_info(model: Any) -> list[dict[str, float]]:
    buf = getattr(model, "ep_info_buffer", None) or []
    out = []
    for e in buf:
        try:
            out.append({k: float(e[k]) for k in ("r", "l", "t") if k in e})
        except (TypeError, ValueError):
            continue
    return out


def write_model(path: Path, model: Any, meta: Mapping[str, Any], num_timesteps: int) -> None:
    """Write ``model`` (an SB3 algorithm) as a safe ``model.zip``.

    ``meta`` carries what the caller knows of the run (``algo``, ``policy``,
    ``hyperparams`` with ``policy_kwargs``, ``env``, ``seed``); spaces,
    ``n_envs``, counters and the state dicts come from the model.
    """
    names, variables = model._get_torch_save_params()
    tensors = {
        "params": model.get_parameters(),
        "variables": {n: operator.attrgetter(n)(model).detach().cpu() for n in variables},
    }
    doc = {
        "format": FORMAT,
        "version": VERSION,
        **dict(meta),
        "observation_space": space_to_json(model.observation_space),
        "action_space": space_to_json(model.action_space),
        "n_envs": int(model.n_envs),
        "num_timesteps": int(num_timesteps),
        "n_updates": int(getattr(model, "_n_updates", 0)),
        "episode_num": int(getattr(model, "_episode_num", 0)),
        "ep_info_buffer": _ep_info(model),
        "state_dicts": list(names),
        "variables": list(variables),
    }
    text = json.dumps(doc, indent=1, allow_nan=True)
    buf = io.BytesIO()
    torch.save(tensors, buf)

    def write(f: BinaryIO) -> None:
        with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            zf.writestr(META_NAME, text)
            zf.writestr(WEIGHTS_NAME, buf.getvalue())

    atomic_write(path, write)


def _read_member(zf: zipfile.ZipFile, name: str, limit: int, path: Path) -> bytes:
    info = zf.getinfo(name)
    if info.file_size > limit:
        raise ModelFileError(
            f"model file {_q(path)}: {name} is {info.file_size} bytes, over {limit}"
        )
    with zf.open(info) as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ModelFileError(f"model file {_q(path)}: {name} is over {limit} bytes")
    return data


def require_safe(path: Path) -> None:
    """Nothing, if ``path`` is a safe ``model.zip`` by its ZIP directory (nothing is read
    from its members, nothing is extracted or run).

    Raises:
        UntrustedFileError: the file is stable-baselines3's pickle archive.
        ModelFileError: it is no ZIP archive, or one of other members.
    """
    p = Path(path)
    if not p.is_file():
        raise ModelFileError(f"model file {_q(p)} does not exist")
    try:
        with zipfile.ZipFile(p) as zf:
            names = set(zf.namelist())
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise ModelFileError(
            f"model file {_q(p)} could not be loaded: not a ZIP archive ({exc})"
        ) from None
    if names == {META_NAME, WEIGHTS_NAME}:
        return
    if "data" in names and names & (SB3_MEMBERS - {"data"}):
        raise UntrustedFileError(
            f"model file {_q(path)} is a stable-baselines3 pickle archive (written by "
            "stable-baselines3 itself, or by TierGym before its safe model format); loading it "
            "could run arbitrary code, so it is never read: train the policy again"
        )
    raise ModelFileError(
        f"model file {_q(p)} could not be loaded: a ZIP archive with members {sorted(names)[:8]}, "
        f"expected {META_NAME} and {WEIGHTS_NAME}"
    )


def read_model(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(meta, tensors)`` of a safe ``model.zip``; the JSON is checked for form, not meaning.

    Raises:
        UntrustedFileError: the file is stable-baselines3's pickle archive.
        ModelFileError: anything else wrong with the file.
    """
    p = Path(path)
    require_safe(p)
    try:
        with zipfile.ZipFile(p) as zf:
            raw_meta = _read_member(zf, META_NAME, MAX_META_BYTES, p)
            raw_weights = _read_member(zf, WEIGHTS_NAME, MAX_WEIGHTS_BYTES, p)
    except (zipfile.BadZipFile, OSError, RuntimeError) as exc:  # RuntimeError: bad CRC / encryption
        raise ModelFileError(f"model file {_q(p)} could not be loaded: {exc}") from None
    try:
        meta = json.loads(raw_meta.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ModelFileError(
            f"model file {_q(p)} could not be loaded: {META_NAME} is not valid JSON ({exc})"
        ) from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ModelFileError(
            f"model file {_q(p)} could not be loaded: {META_NAME} is not a {FORMAT} description"
        )
    if meta.get("version") != VERSION:
        raise ModelFileError(
            f"model file {_q(p)}: format version {meta.get('version')!r}, this code reads {VERSION}"
        )
    try:
        tensors = torch.load(io.BytesIO(raw_weights), map_location="cpu", weights_only=True)
    except Exception as exc:  # weights_only refuses anything but tensors and plain containers
        msg = " ".join(str(exc).split())[:300]
        raise ModelFileError(
            f"model file {_q(p)} could not be loaded: {WEIGHTS_NAME} is not a tensors-only file ({msg})"
        ) from None
    if (
        not isinstance(tensors, dict)
        or set(tensors) != {"params", "variables"}
        or not isinstance(tensors["params"], dict)
        or not isinstance(tensors["variables"], dict)
        or not all(isinstance(v, dict) for v in tensors["params"].values())
        or not all(isinstance(v, torch.Tensor) for v in tensors["variables"].values())
    ):
        raise ModelFileError(
            f"model file {_q(p)} could not be loaded: {WEIGHTS_NAME} does not hold state dicts"
        )
    return meta, tensors


def _counter(meta: Mapping[str, Any], key: str, path: Path) -> int:
    v = meta.get(key, 0)
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise ModelFileError(f"model file {_q(path)}: {key}={v!r}, expected an integer >= 0")
    return v


def restore_model_state(
    model: Any, meta: Mapping[str, Any], tensors: Mapping[str, Any], path: Path
) -> None:
    """Load the state dicts, extra tensors and counters of :func:`read_model` into ``model``.

    ``model`` was built with the same class, policy, ``policy_kwargs`` and
    spaces; a missing, extra or misshapen tensor raises :class:`ModelFileError`.
    """
    p = Path(path)
    want_names, want_vars = model._get_torch_save_params()
    params, variables = dict(tensors["params"]), dict(tensors["variables"])
    if set(params) != set(want_names) or set(variables) != set(want_vars):
        raise ModelFileError(
            f"model file {_q(p)}: holds state dicts {sorted(params)} and tensors {sorted(variables)}, "
            f"this {type(model).__name__} has {sorted(want_names)} and {sorted(want_vars)}"
        )
    try:
        model.set_parameters(params, exact_match=True, device="cpu")
        for name, value in variables.items():
            target = operator.attrgetter(name)(model)
            if target.shape != value.shape:
                raise ValueError(
                    f"{name}: shape {tuple(value.shape)}, expected {tuple(target.shape)}"
                )
            target.data = value.data.to(target.dtype)
    except (RuntimeError, ValueError, KeyError, TypeError) as exc:
        msg = " ".join(str(exc).split())[:400]
        raise ModelFileError(
            f"model file {_q(p)}: its weights do not fit the model its description builds ({msg})"
        ) from None
    model.num_timesteps = _counter(meta, "num_timesteps", p)
    model._n_updates = _counter(meta, "n_updates", p)
    model._episode_num = _counter(meta, "episode_num", p)
    eps = meta.get("ep_info_buffer", [])
    if (
        not isinstance(eps, list)
        or len(eps) > MAX_EP_INFO
        or not all(
            isinstance(e, dict)
            and set(e) <= {"r", "l", "t"}
            and all(isinstance(x, int | float) and not isinstance(x, bool) for x in e.values())
            for e in eps
        )
    ):
        raise ModelFileError(f"model file {_q(p)}: malformed ep_info_buffer")
    window = int(getattr(model, "_stats_window_size", 100))
    model.ep_info_buffer = deque(eps, maxlen=window)
    model.ep_success_buffer = deque(maxlen=window)
