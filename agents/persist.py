"""Files that load without running code: models, reward statistics, replay buffers, random state.

stable-baselines3's ``save``/``load`` pickle: its ``model.zip`` holds
cloudpickled objects, and ``VecNormalize.save``, ``save_replay_buffer`` and a
pickled random state do the same, so loading one of those files runs
whatever its author put in it. Everything here is written and read as data
only (README "Trust model"):

- **model** (``model.zip``, a ZIP archive of exactly two members):
  ``tiergym-model.json`` (format and version, algorithm, policy name,
  constructor hyperparameters with ``policy_kwargs``, observation and action
  spaces, ``n_envs``, the training counters ``num_timesteps``, ``n_updates``,
  ``episode_num`` and the episode-statistics window, the env settings and
  seed) and ``weights.pt``, written by :func:`torch.save` and read by
  ``torch.load(weights_only=True)`` (tensors and plain containers only): the
  state dicts of the policy and of every optimizer, and SB3's extra tensors
  (SAC's ``log_ent_coef``). The model is rebuilt from the JSON (class,
  policy, ``policy_kwargs``, spaces) and the state dicts are loaded into it.
- **reward normalisation** (``vecnormalize.npz``, ``np.load(allow_pickle=False)``):
  ``ret_mean``, ``ret_var``, ``ret_count``, ``returns`` (the running
  discounted return of every instance), ``obs_mean``/``obs_var``/``obs_count``
  when observations are normalised, ``clip_obs``, ``clip_reward``, ``gamma``,
  ``epsilon``, ``norm_obs``, ``norm_reward``.
- **replay buffer** (``replay_buffer.npz``, off-policy algorithms): the filled
  rows of ``observations``, ``next_observations``, ``actions``, ``rewards``,
  ``dones``, ``timeouts``, and ``pos``, ``full``, ``buffer_size``, ``n_envs``.
- **random state** (``rng.json``): Python's ``random``, NumPy's legacy global
  generator (which SB3 draws from), torch's CPU generator and the action
  space's generator.

Every reader checks sizes, names, shapes and types and raises
:class:`ModelFileError` (a ``ValueError``) naming the file; an archive
written by stable-baselines3 raises :class:`UntrustedFileError` instead of
being opened. This module imports nothing of the project.
"""

from __future__ import annotations

import io
import json
import math
import os
import random
import zipfile
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.vec_env import VecEnv

__all__ = [
    "FORMAT",
    "ModelFileError",
    "SpacesOnlyEnv",
    "UntrustedFileError",
    "archive_kind",
    "load_replay_buffer",
    "load_rng",
    "load_vecnormalize",
    "read_model",
    "restore_model_state",
    "save_replay_buffer",
    "save_rng",
    "save_vecnormalize",
    "space_from_json",
    "space_to_json",
    "write_model",
]

FORMAT = "tiergym-model"
VERSION = 1
META_NAME = "tiergym-model.json"
WEIGHTS_NAME = "weights.pt"
MAX_META_BYTES = 4 << 20
MAX_WEIGHTS_BYTES = 4 << 30
MAX_JSON_BYTES = 16 << 20
MAX_EP_INFO = 100_000
# members of an archive written by stable-baselines3's save (``data`` holds cloudpickled objects)
SB3_MEMBERS = {"data", "policy.pth", "pytorch_variables.pth", "_stable_baselines3_version"}


class ModelFileError(ValueError):
    """A model or checkpoint file that cannot be used: the message names the file and the problem."""


class UntrustedFileError(ModelFileError):
    """A file whose loading would unpickle (run) code; refused unless the user opts in."""


def _q(path: Path | str) -> str:
    return repr(str(path))


# ------------------------------------------------------------------------------------ spaces


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


def _int_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in v)


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


def _atomic_write(path: Path, write: Any) -> None:
    """Write through a temporary file in the same folder, then rename (whole or not at all)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


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
        "variables": {n: _getattr_path(model, n).detach().cpu() for n in variables},
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

    def write(tmp: Path) -> None:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            zf.writestr(META_NAME, text)
            zf.writestr(WEIGHTS_NAME, buf.getvalue())

    _atomic_write(Path(path), write)


def _getattr_path(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def archive_kind(path: Path) -> str:
    """``"tiergym"`` (safe), ``"sb3"`` (stable-baselines3's pickle archive); else raises.

    Reads only the ZIP directory; nothing is extracted or run.
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
        return "tiergym"
    if "data" in names and names & (SB3_MEMBERS - {"data"}):
        return "sb3"
    raise ModelFileError(
        f"model file {_q(p)} could not be loaded: a ZIP archive with members {sorted(names)[:8]}, "
        f"expected {META_NAME} and {WEIGHTS_NAME}"
    )


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


def read_model(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(meta, tensors)`` of a safe ``model.zip``; the JSON is checked for form, not meaning.

    Raises:
        UntrustedFileError: the file is stable-baselines3's pickle archive.
        ModelFileError: anything else wrong with the file.
    """
    p = Path(path)
    kind = archive_kind(p)
    if kind == "sb3":
        raise UntrustedFileError(
            f"model file {_q(p)} is a stable-baselines3 pickle archive (written by "
            "stable-baselines3 itself, or by TierGym before its safe model format); loading it "
            "could run arbitrary code, so it is never read: train the policy again"
        )
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
            target = _getattr_path(model, name)
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


# ------------------------------------------------------------------------- numpy archives


def _load_npz(path: Path, what: str) -> dict[str, np.ndarray]:
    p = Path(path)
    try:
        with np.load(p, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise ModelFileError(f"{what} file {_q(p)} could not be loaded: {exc}") from None


def save_vecnormalize(path: Path, norm: Any) -> None:
    """VecNormalize's statistics and settings as ``vecnormalize.npz``."""
    arrays: dict[str, np.ndarray] = {
        "ret_mean": np.asarray(norm.ret_rms.mean, dtype=np.float64),
        "ret_var": np.asarray(norm.ret_rms.var, dtype=np.float64),
        "ret_count": np.asarray(norm.ret_rms.count, dtype=np.float64),
        "returns": np.asarray(norm.returns, dtype=np.float64),
        "clip_obs": np.asarray(norm.clip_obs, dtype=np.float64),
        "clip_reward": np.asarray(norm.clip_reward, dtype=np.float64),
        "gamma": np.asarray(norm.gamma, dtype=np.float64),
        "epsilon": np.asarray(norm.epsilon, dtype=np.float64),
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

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)  # type: ignore[arg-type]

    _atomic_write(Path(path), write)


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
    norm.clip_obs = _scalar(z, "clip_obs", p, what)
    norm.clip_reward = _scalar(z, "clip_reward", p, what)
    norm.gamma = _scalar(z, "gamma", p, what)
    norm.epsilon = _scalar(z, "epsilon", p, what)
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

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)  # type: ignore[arg-type]

    _atomic_write(Path(path), write)


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
    _atomic_write(Path(path), lambda tmp: Path(tmp).write_text(json.dumps(doc)))


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
