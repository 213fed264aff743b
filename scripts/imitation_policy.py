"""A run's imitation policy as a model of its own: what the imitation phase handed to PPO.

Writes ``OUT`` as a run folder that ``evaluate.py`` loads like any other: the run's
``config.yml``, ``tiergym.json`` and ``command.txt``, and a ``model.zip``: the run's model with
the policy's weights of the imitation phase's last fit (``RUN/imitation/fit-RR.npz``, or fit
``--fit R``), saved as ``train.py`` saves a model, at step 0. Scoring it
beside the run says what the RL phase added, on the split the choice is made on:

    python scripts/imitation_policy.py runs/mixed__ppo-finetune__0__20261207-114412 /tmp/im-s0
    python evaluate.py --scenarios mixed,unseen --split val --episodes 64 --seed 30000 \\
        --policies ppo=runs/mixed__ppo-finetune__0__20261207-114412,imitation=/tmp/im-s0,dram-first

The run needs its model (``model.zip``, or a checkpoint's), which gives the architecture;
the fit's tensors must be the policy's, name for name and shape for shape. Exit code 2 on
bad input (no run folder, no model, no fit, tensors that do not fit, ``OUT`` not empty), with
one line naming it.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents.config import TrainingError
from agents.imitation import CheckpointError, fit_weights, restore_policy
from agents.models import save_model
from agents.runs import load_trained, read_config
from envs.errors import fail

#: the run's files copied beside the model (those present)
RUN_FILES = ("config.yml", "tiergym.json", "command.txt")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run", type=Path, help="a finished run folder (with model.zip and imitation/)")
    ap.add_argument("out", type=Path, help="the folder to write (new or empty)")
    ap.add_argument("--fit", type=int, default=None, help="the fit to take (default: the last)")
    args = ap.parse_args(argv)
    run, out = args.run, args.out
    if not run.is_dir():
        fail(f"{run}: not a run folder")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        fail(f"{out}: exists and is not an empty folder (nothing is overwritten)")
    try:
        r, fit_file, state = fit_weights(run / "imitation", args.fit)
        cfg = read_config(run)
        model = load_trained(run)[0]
        restore_policy(model.policy, state, fit_file)
    except (CheckpointError, TrainingError) as exc:
        fail(str(exc))
    out.mkdir(parents=True, exist_ok=True)
    for name in RUN_FILES:
        if (run / name).is_file():
            shutil.copyfile(run / name, out / name)
    save_model(out / "model.zip", model, cfg, timesteps=0)
    print(f"{out}: the policy of {run}'s imitation fit {r} ({len(state)} tensors)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
