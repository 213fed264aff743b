"""A run's imitation policy as a model of its own: what the imitation phase handed to PPO.

Writes ``OUT`` as a run folder that ``evaluate.py`` loads like any other: the run's
``config.yml``, ``tiergym.json`` and ``command.txt``, and a ``model.zip`` that is the run's
own with the policy's weights replaced by those of the imitation phase's last fit
(``RUN/imitation/fit-RR.npz``, or fit ``--fit R``) and its counters at zero. Scoring it
beside the run says what the RL phase added, on the split the choice is made on:

    python scripts/imitation_policy.py runs/mixed__ppo-finetune__0__20261207-114412 /tmp/im-s0
    python evaluate.py --scenarios mixed,unseen --split val --episodes 64 --seed 30000 \\
        --policies ppo=runs/mixed__ppo-finetune__0__20261207-114412,imitation=/tmp/im-s0,dram-first

The run must have finished (its ``model.zip`` gives the architecture the weights fit).
Every tensor of the fit must have the name and shape of one of the model's policy tensors,
and every policy tensor must be in the fit. Exit code 2 on bad input (no run folder, no
model, no fit, tensors that do not match, ``OUT`` not empty), with one line naming it.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import NoReturn

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents.imitation import CheckpointError
from agents.persist import ModelFileError, read_model, write_model_files

#: the run's files copied beside the model (those present)
RUN_FILES = ("config.yml", "tiergym.json", "command.txt")


def _fail(message: str) -> NoReturn:
    """One line on stderr, exit code 2."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def last_fit(folder: Path) -> int:
    """The number of the imitation phase's last fit saved in ``folder``."""
    fits = sorted(int(p.stem[4:]) for p in folder.glob("fit-*.npz") if p.stem[4:].isdigit())
    if not fits:
        raise CheckpointError(f"{folder}: no fit-RR.npz (the imitation phase saved no fit)")
    return fits[-1]


def read_fit(path: Path) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{path}: unreadable fit ({exc})") from None


def with_fit(policy: dict[str, torch.Tensor], fit: dict[str, np.ndarray], where: Path) -> dict:
    """``policy``'s state dict with every tensor taken from ``fit`` (same names, shapes)."""
    missing = sorted(set(policy) - set(fit))
    extra = sorted(set(fit) - set(policy))
    if missing or extra:
        raise CheckpointError(
            f"{where}: its tensors are not the model's policy's "
            f"(missing {missing[:3]}, unknown {extra[:3]})"
        )
    out = {}
    for k, v in policy.items():
        if tuple(fit[k].shape) != tuple(v.shape):
            raise CheckpointError(
                f"{where}: {k} has shape {tuple(fit[k].shape)}, the model's {tuple(v.shape)}"
            )
        out[k] = torch.as_tensor(fit[k]).to(v.dtype)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run", type=Path, help="a finished run folder (with model.zip and imitation/)")
    ap.add_argument("out", type=Path, help="the folder to write (new or empty)")
    ap.add_argument("--fit", type=int, default=None, help="the fit to take (default: the last)")
    args = ap.parse_args(argv)
    run, out = args.run, args.out
    if not run.is_dir():
        _fail(f"{run}: not a run folder")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        _fail(f"{out}: exists and is not an empty folder (nothing is overwritten)")
    try:
        r = last_fit(run / "imitation") if args.fit is None else args.fit
        fit = read_fit(run / "imitation" / f"fit-{r:02d}.npz")
        meta, tensors = read_model(run / "model.zip")
        if "policy" not in tensors["params"]:
            raise ModelFileError(f"{run / 'model.zip'}: no policy state dict")
        params = dict(tensors["params"])
        params["policy"] = with_fit(params["policy"], fit, run / "imitation" / f"fit-{r:02d}.npz")
    except (CheckpointError, ModelFileError) as exc:
        _fail(str(exc))
    meta = {**meta, "num_timesteps": 0, "n_updates": 0, "episode_num": 0, "ep_info_buffer": []}
    meta["imitation_fit"] = {"run": str(run), "fit": r}
    out.mkdir(parents=True, exist_ok=True)
    for name in RUN_FILES:
        if (run / name).is_file():
            shutil.copyfile(run / name, out / name)
    write_model_files(out / "model.zip", meta, {**tensors, "params": params})
    print(f"{out}: the policy of {run}'s imitation fit {r} (its tensors: {len(fit)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
