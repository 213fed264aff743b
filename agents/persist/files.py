"""What every safe file shares: its errors, the size limits, atomic writes, npz reading."""

from __future__ import annotations

import os
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

__all__ = [
    "FORMAT",
    "META_NAME",
    "VERSION",
    "WEIGHTS_NAME",
    "ModelFileError",
    "UntrustedFileError",
    "atomic_write",
    "atomic_write_text",
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


def _int_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in v)


class ModelFileError(ValueError):
    """A model or checkpoint file that cannot be used: the message names the file and the problem."""


class UntrustedFileError(ModelFileError):
    """A file whose loading would unpickle (run) code; refused unless the user opts in."""


def _q(path: Path | str) -> str:
    return repr(str(path))


def atomic_write(path: Path | str, write: Callable[[BinaryIO], object]) -> None:
    """Write ``path`` whole or not at all: ``write(f)`` fills a temporary file in the same
    folder, which is flushed to disk and renamed into place."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def atomic_write_text(path: Path | str, text: str) -> None:
    """:func:`atomic_write` of a text (UTF-8)."""
    atomic_write(path, lambda f: f.write(text.encode()))


def _load_npz(path: Path, what: str) -> dict[str, np.ndarray]:
    p = Path(path)
    try:
        with np.load(p, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise ModelFileError(f"{what} file {_q(p)} could not be loaded: {exc}") from None
