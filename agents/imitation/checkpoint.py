"""The warm start's checkpoints: each job's labels and each fit's weights, to resume from.

A warm start labels many jobs and fits several times; with a checkpoint folder
(:func:`agents.imitation.warm_start`'s ``checkpoint_dir``) every finished piece is
written there, and a warm start called again with the same arguments reads the
pieces back instead of recomputing them, so an interrupted run continues where it
stopped and ends with the weights an uninterrupted run ends with (every step is
deterministic given what the folder holds: the labels, the recorded rows, the
weights after each fit).

Files, all data only (``np.load(allow_pickle=False)``, JSON; the ``.npz`` deflated),
each written to a temporary file and renamed (whole or not at all), the JSON last
(it marks the piece done):

- ``imitation.json``: the format and the key, a hash of the settings, the env
  settings, the run's seed, the objective and the policy's parameter shapes; a
  folder whose key differs is refused (:class:`CheckpointError`), never reused;
- ``job-NNN.npz`` / ``.json``: job ``NNN``'s :class:`~agents.imitation.dataset.Labelled`
  (recorded rows, labels, scores, per-episode targets and plans) and its timings;
- ``fit-RR.npz`` / ``.json``: the policy's state dict after fit ``RR`` (0: the first,
  then one per DAgger round) and the summary so far; ``round-RR.npz`` the rows that
  round ``RR`` recorded on the policy's own states, per job.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray

from agents.config.imitation import ImitationSettings
from agents.imitation.dataset import Chunk, EpisodeTargets, Labelled
from agents.imitation.experts import Plans, ShareTargets
from agents.persist import atomic_write, atomic_write_text

__all__ = [
    "Checkpoint",
    "CheckpointError",
    "checkpoint_key",
    "fit_weights",
    "labelled_jobs",
    "labelled_states",
    "restore_policy",
]

FORMAT = "tiergym-imitation-checkpoint"
VERSION = 1
MANIFEST = "imitation.json"
#: The arrays of a :data:`~agents.imitation.dataset.Chunk`, as a round's file names them.
CHUNK = ("obs", "targets", "fit_residual")


class CheckpointError(ValueError):
    """A checkpoint folder that is not this warm start's, or a file in it that is unreadable."""


def checkpoint_key(
    settings: ImitationSettings, env: Mapping[str, Any], seed: int, objective: str, policy: Any
) -> str:
    """The hash (sha256, hex) of what a warm start's result depends on: its settings, the env
    settings, the run's seed, the objective and the policy's parameter names and shapes."""
    shapes = {k: [list(v.shape), str(v.dtype)] for k, v in policy.state_dict().items()}
    # the default teacher (the plan) left out: a warm start of the plans keeps the key it had
    # before teachers could be chosen
    own = {
        k: v for k, v in settings.model_dump(mode="json").items() if (k, v) != ("teacher", "plan")
    }
    what = {
        "format": FORMAT,
        "version": VERSION,
        "settings": own,
        "env": dict(env),
        "seed": int(seed),
        "objective": objective,
        "policy": shapes,
    }
    text = json.dumps(what, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _read_json(path: Path) -> dict[str, Any]:
    """A checkpoint's JSON object (a CheckpointError naming the file if it is unreadable)."""
    try:
        got = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{path}: unreadable checkpoint file ({exc})") from None
    if not isinstance(got, dict):
        raise CheckpointError(f"{path}: expected a JSON object")
    return got


def _read_npz(path: Path, keys: Sequence[str] | None = None) -> dict[str, NDArray]:
    """A checkpoint's arrays (``keys`` of them, or all; a CheckpointError naming the file if
    it is unreadable or lacks one)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in (z.files if keys is None else keys)}
    except (OSError, ValueError, KeyError) as exc:
        raise CheckpointError(f"{path}: unreadable checkpoint file ({exc})") from None


def _job_infos(folder: Path) -> list[tuple[Path, dict[str, Any]]]:
    """Each finished job's ``job-NNN.json`` path and contents in ``folder``, in job order.

    Raises:
        CheckpointError: a job file that is unreadable or names no family.
    """
    out = []
    for info_path in sorted(folder.glob("job-*.json")):
        info = _read_json(info_path)
        if info.get("family") is None:
            raise CheckpointError(f"{info_path}: a job without its family")
        out.append((info_path, info))
    return out


def labelled_states(folder: Path | str, exclude: Sequence[str] = ()) -> NDArray[np.float32]:
    """The recorded states (the policy's observations, stacked) of every finished job of the
    checkpoint ``folder`` whose family is not in ``exclude``.

    Raises:
        CheckpointError: no such job, or a job file that is unreadable.
    """
    folder = Path(folder)
    out = []
    for info_path, info in _job_infos(folder):
        if info["family"] not in exclude:
            obs = _read_npz(info_path.with_suffix(".npz"), ["obs"])["obs"]
            out.append(np.asarray(obs, dtype=np.float32))
    if not out:
        raise CheckpointError(
            f"{folder}: no labelled job of a family outside {list(exclude)} (the imitation "
            "phase's checkpoint holds the states the anchor is taken on)"
        )
    return np.concatenate(out)


def labelled_jobs(folder: Path | str) -> list[tuple[str, Labelled]]:
    """Every finished job of the checkpoint ``folder``, in job order: its family (or
    scenario) and its labels, as the first fit reads them.

    Raises:
        CheckpointError: no job, or a job file that is unreadable.
    """
    folder = Path(folder)
    out = []
    for info_path, info in _job_infos(folder):
        if "plan_seconds" not in info:
            raise CheckpointError(f"{info_path}: a job without its plan_seconds")
        z = _read_npz(info_path.with_suffix(".npz"))
        out.append((str(info["family"]), _labelled_from(z, float(info["plan_seconds"]))))
    if not out:
        raise CheckpointError(f"{folder}: no labelled job (an imitation phase's checkpoint)")
    return out


def _arrays(obj: Any, prefix: str, skip: Sequence[str] = ()) -> dict[str, NDArray]:
    """The dataclass ``obj``'s fields but ``skip``, as arrays named ``prefix`` + field."""
    return {
        prefix + f.name: np.asarray(getattr(obj, f.name)) for f in fields(obj) if f.name not in skip
    }


def _labelled_arrays(got: Labelled) -> dict[str, NDArray]:
    """What a job file holds: the labels (``obs``, ...), the per-episode targets (``ep_``),
    their plans (``plan_``) and share targets (``share_``)."""
    out = _arrays(got, "", ("episodes", "plan_seconds")) | _arrays(got.episodes, "ep_", ["plans"])
    p = got.episodes.plans
    if p is not None:
        out |= _arrays(p, "plan_", ["shares"])
        if p.shares is not None:
            out |= _arrays(p.shares, "share_")
    return out


def _read_fields(cls: Any, z: Mapping[str, NDArray], prefix: str, **more: Any) -> Any:
    """A ``cls`` from the arrays :func:`_arrays` named (one-value ones as numbers) and
    ``more``; a field that a file written before it lacks keeps its default."""
    got = {f.name: z[prefix + f.name] for f in fields(cls) if prefix + f.name in z}
    return cls(**{k: v.item() if v.ndim == 0 else v for k, v in got.items()}, **more)


def _labelled_from(z: Mapping[str, NDArray], plan_seconds: float) -> Labelled:
    plans = None
    if "plan_box" in z:
        shares = _read_fields(ShareTargets, z, "share_") if "share_share" in z else None
        plans = _read_fields(Plans, z, "plan_", shares=shares)
    ep = _read_fields(EpisodeTargets, z, "ep_", plans=plans)
    return _read_fields(Labelled, z, "", episodes=ep, plan_seconds=plan_seconds)


class Checkpoint:
    """The checkpoint folder of one warm start (``folder`` None: nothing is written or read).

    Raises:
        CheckpointError: the folder holds another warm start's checkpoint (its key differs).
    """

    def __init__(self, folder: Path | str | None, key: str) -> None:
        self.folder = None if folder is None else Path(folder)
        self.key = key
        if self.folder is None:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        manifest = self.folder / MANIFEST
        if manifest.exists():
            got = _read_json(manifest)
            if got.get("format") != FORMAT or got.get("key") != key:
                raise CheckpointError(
                    f"{self.folder}: a checkpoint of another warm start (other settings, env "
                    "settings, seed, objective or policy); remove it or pass another "
                    "checkpoint_dir"
                )
        elif any(self.folder.glob("job-*.json")) or any(self.folder.glob("fit-*.json")):
            raise CheckpointError(f"{self.folder}: checkpoint files without {MANIFEST}")
        else:
            body = {"format": FORMAT, "version": VERSION, "key": key}
            self._write_json(manifest, body)

    # ------------------------------------------------------------------ files
    def _write_json(self, path: Path, body: Mapping[str, Any]) -> None:
        atomic_write_text(path, json.dumps(body, indent=1))

    def _write_npz(self, path: Path, arrays: Mapping[str, NDArray]) -> None:
        # deflated: the recorded observations shrink about 8x, for about a second a round
        atomic_write(path, lambda f: np.savez_compressed(f, **cast(dict[str, Any], arrays)))

    def _done(self, name: str) -> dict[str, Any] | None:
        """The JSON of a finished piece ``name`` (None: not written yet)."""
        if self.folder is None or not (self.folder / f"{name}.json").exists():
            return None
        info = _read_json(self.folder / f"{name}.json")
        if info.get("key") != self.key:
            raise CheckpointError(f"{self.folder / name}.json: from another warm start (key)")
        return info

    # ------------------------------------------------------------------ jobs
    def save_job(self, n: int, got: Labelled, info: Mapping[str, Any]) -> None:
        """Job ``n``'s labels and ``info`` (its family, episodes, seed and timings)."""
        if self.folder is None:
            return
        self._write_npz(self.folder / f"job-{n:03d}.npz", _labelled_arrays(got))
        body = {**info, "key": self.key, "plan_seconds": got.plan_seconds}
        self._write_json(self.folder / f"job-{n:03d}.json", body)

    def load_job(self, n: int, want: Mapping[str, Any]) -> tuple[Labelled, dict[str, Any]] | None:
        """Job ``n``'s labels and info as saved (None: not labelled yet); ``want``: the info's
        job identity (family, episodes, seed), checked."""
        info = self._done(f"job-{n:03d}")
        if info is None:
            return None
        assert self.folder is not None
        if any(info.get(k) != v for k, v in want.items()):
            raise CheckpointError(f"{self.folder}/job-{n:03d}.json: another job than {dict(want)}")
        z = _read_npz(self.folder / f"job-{n:03d}.npz")
        return _labelled_from(z, float(info["plan_seconds"])), info

    # ------------------------------------------------------------------ fits
    def save_fit(
        self, r: int, policy: Any, record: Mapping[str, Any], rows: Sequence[Chunk] | None
    ) -> None:
        """The policy's weights after fit ``r``, its ``record`` (the summary so far, as JSON)
        and (``r`` >= 1) the rows the round recorded per job."""
        if self.folder is None:
            return
        if rows is not None:
            arrays = {
                f"{what}_{n}": a
                for n, c in enumerate(rows)
                for what, a in zip(CHUNK, c, strict=True)
            }
            self._write_npz(self.folder / f"round-{r:02d}.npz", arrays)
        state = {k: v.detach().cpu().numpy() for k, v in policy.state_dict().items()}
        self._write_npz(self.folder / f"{_fit_name(r)}.npz", state)
        self._write_json(self.folder / f"{_fit_name(r)}.json", {**record, "key": self.key})

    def load_fit(
        self, r: int, jobs: int
    ) -> tuple[dict[str, NDArray], dict[str, Any], list[Chunk] | None] | None:
        """``(state dict arrays, record, the round's rows per job)`` of fit ``r`` (None: not
        done yet)."""
        info = self._done(_fit_name(r))
        if info is None:
            return None
        assert self.folder is not None
        state = _read_npz(self.folder / f"{_fit_name(r)}.npz")
        rows = None
        if r:
            z = _read_npz(self.folder / f"round-{r:02d}.npz")
            try:
                rows = [
                    (z[f"obs_{n}"], z[f"targets_{n}"], z[f"fit_residual_{n}"]) for n in range(jobs)
                ]
            except KeyError as exc:
                raise CheckpointError(f"{self.folder}/round-{r:02d}.npz: no {exc}") from None
        return state, info, rows

    def restore(self, policy: Any, state: Mapping[str, NDArray]) -> None:
        """Load saved weights ``state`` into ``policy`` (:func:`restore_policy`)."""
        restore_policy(policy, state, self.folder)


def restore_policy(policy: Any, state: Mapping[str, NDArray], where: Path | str | None) -> None:
    """Load saved weights ``state`` into ``policy`` (names and shapes checked: a
    CheckpointError naming ``where`` if they do not fit) and leave it in evaluation mode."""
    import torch

    own = policy.state_dict()
    if set(own) != set(state) or any(tuple(own[k].shape) != state[k].shape for k in own):
        raise CheckpointError(f"{where}: saved weights do not fit this policy")
    policy.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in state.items()})
    policy.set_training_mode(False)


def _fit_name(r: int) -> str:
    """The stem of fit ``r``'s files in a checkpoint folder (``fit-RR.npz``, ``fit-RR.json``)."""
    return f"fit-{r:02d}"


def fit_weights(folder: Path | str, r: int | None = None) -> tuple[int, Path, dict[str, NDArray]]:
    """``(r, its file, the policy's weights after fit r)`` as an imitation phase saved them in
    ``folder`` (``fit-RR.npz``; ``r`` None: its last fit)."""
    folder = Path(folder)
    if r is None:
        done = [p.stem[4:] for p in folder.glob("fit-*.npz")]
        fits = sorted(int(d) for d in done if d.isdigit())
        if not fits:
            raise CheckpointError(f"{folder}: no fit-RR.npz (the imitation phase saved no fit)")
        r = fits[-1]
    path = folder / f"{_fit_name(r)}.npz"
    if not path.is_file():
        raise CheckpointError(f"{path}: no such fit")
    return r, path, _read_npz(path)
