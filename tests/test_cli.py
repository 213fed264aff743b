"""Command lines: every bad value is a one-line error (exit 2) before any work; resume keeps options;
scripts/fit_holdout.py rebuilds a run's first fit from its saved labels."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import torch
import yaml

ROOT = Path(__file__).resolve().parents[1]


def tiny(scenario: Path, run_dir: Path, *extra: str) -> list[str]:
    return [
        "--recipe", "ppo", "--scenario", str(scenario), "--num-envs", "8", "--timesteps", "512", "--set", "n_steps=16",
        "--set", "batch_size=64", "--set", "n_epochs=1", "--eval-interval", "0",
        "--compare-episodes", "0", "--run-dir", str(run_dir), "--no-progress", "--quiet", *extra,
    ]  # fmt: skip


def one_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip() and "Warning" not in line]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize(
    ("extra", "needles"),
    [
        (["--timesteps", "0"], ["--timesteps 0", ">= 1"]),
        (["--timesteps", "-5"], ["--timesteps -5", ">= 1"]),
        (["--timesteps", "abc"], ["--timesteps abc", "an integer"]),
        (["--num-envs", "0"], ["--num-envs 0", ">= 1"]),
        (["--max-tenants", "0"], ["--max-tenants 0", ">= 1"]),
        (["--seed", "-1"], ["--seed -1", ">= 0"]),
        (["--eval-episodes", "0"], ["--eval-episodes 0"]),
        (["--compare-episodes", "-1"], ["--compare-episodes -1"]),
        (["--checkpoint-interval", "-2"], ["--checkpoint-interval -2"]),
        (["--reward", "fast"], ["--reward fast", "log-geomean"]),
        (["--set", "learning_rate=abc"], ["--set learning_rate=abc", "a number"]),
        (["--set", "n_steps=0"], ["--set n_steps=0", "rl.hyperparams.n_steps", ">= 1"]),
        (["--set", "gamma=1.5"], ["--set gamma=1.5", "<= 1"]),
        (["--set", "nonsense=1"], ["nonsense", "learning_rate", "n_epochs"]),
        (["--set", "policy_kwargs={net_arch: [0]}"], ["policy_kwargs.net_arch", ">= 1"]),
        (["--set", "batch_size=1"], ["batch_size", ">= 2"]),
        (["--recipe", "dqn"], ["--recipe dqn", "recurrent-ppo"]),
        (["--recipe", "sac", "--action-type", "discrete"], ["n_steps", "sac takes no"]),
        (["--scenario", "no-such-scenario"], ["--scenario no-such-scenario", "kv-store"]),
    ],
)
def test_train_refuses_a_bad_value_before_any_work(
    tmp_path: Path,
    short_scenario: Path,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    needles: list[str],
) -> None:
    import train

    run = tmp_path / "runs" / "r"
    assert train.main(tiny(short_scenario, run, *extra)) == 2
    msg = one_error(capsys)
    for needle in needles:
        assert needle in msg, msg
    assert not (tmp_path / "runs").exists()  # no run folder, nothing written


def test_sac_needs_box_actions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import train

    runs = tmp_path / "runs"
    args = ["--recipe", "sac", "--action-type", "discrete", "--runs-root", str(runs), "--quiet"]
    assert train.main(args) == 2
    msg = one_error(capsys)
    assert "action_type: sac needs a continuous (box) action space" in msg and "'discrete'" in msg
    assert not runs.exists()


def test_train_refuses_files_in_the_way(
    tmp_path: Path, short_scenario: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import train

    afile = tmp_path / "afile"
    afile.write_text("keep")
    for extra in (["--run-dir", str(afile)], ["--run-dir", str(afile / "sub")]):
        assert train.main(tiny(short_scenario, tmp_path / "unused", *extra)) == 2
        msg = one_error(capsys)
        assert "--run-dir" in msg and str(afile) in msg and "folder" in msg
    args = tiny(short_scenario, tmp_path / "x")
    args = [a for a in args if a not in ("--run-dir", str(tmp_path / "x"))]
    assert train.main([*args, "--runs-root", str(afile)]) == 2
    assert "--runs-root" in one_error(capsys)
    bad_hp = tmp_path / "hp.yml"
    bad_hp.write_text("name: mine\nrl:\n  n_steps: [1\n")
    assert train.main(tiny(short_scenario, tmp_path / "y", "--recipe", str(bad_hp))) == 2
    assert str(bad_hp) in one_error(capsys)
    recipe = yaml.safe_load((ROOT / "agents" / "recipes" / "ppo.yml").read_text())
    recipe["rl"]["hyperparams"]["n_steps"] = 0
    bad_hp.write_text(yaml.safe_dump(recipe))
    assert train.main(tiny(short_scenario, tmp_path / "y", "--recipe", str(bad_hp))) == 2
    msg = one_error(capsys)
    assert str(bad_hp) in msg and "rl.hyperparams.n_steps: expected a value >= 1 (got 0)" in msg
    assert afile.read_text() == "keep"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "hp.yml"]


@pytest.mark.slow
def test_the_scripts_exit_2_with_one_line(tmp_path: Path) -> None:
    for script, args in (
        ("train.py", ["--timesteps", "-5", "--runs-root", str(tmp_path / "runs")]),
        ("evaluate.py", ["--seed", "-1", "--output", str(tmp_path / "out")]),
    ):
        res = subprocess.run(
            [sys.executable, str(ROOT / script), *args],
            cwd=ROOT, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
        assert args[0] in res.stderr and args[1] in res.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_a_bad_thread_count_is_one_line_before_any_work(tmp_path: Path) -> None:
    """A bad ``TIERGYM_THREADS`` does not fail ``import envs``; each script names it in
    one line, exit code 2, before it writes anything."""
    env = {**os.environ, "TIERGYM_THREADS": "many"}
    for script, args in (
        ("train.py", ["--runs-root", str(tmp_path / "runs")]),
        ("evaluate.py", ["--output", str(tmp_path / "out")]),
        ("sweep.py", [str(tmp_path / "missing.yml"), "--output", str(tmp_path / "sweep")]),
    ):
        res = subprocess.run(
            [sys.executable, str(ROOT / script), *args],
            cwd=ROOT, capture_output=True, text=True, timeout=120, env=env,
        )  # fmt: skip
        assert res.returncode == 2 and res.stderr.count("\n") == 1, (script, res.stderr)
        assert "TIERGYM_THREADS='many'" in res.stderr, res.stderr
    assert list(tmp_path.iterdir()) == []


def test_the_budget_lives_in_the_recipe(tmp_path: Path) -> None:
    """The recipe holds the budget; --timesteps sets the RL steps (whole rollouts) and shrinks
    an imitation phase that would take more environment steps; --set never changes it."""
    from agents.config import RunOptions
    from agents.config.load import imitation_steps, load_recipe, resolve

    root = {"runs_root": tmp_path}
    default = resolve(RunOptions(**root))
    assert default.recipe.name == "ppo-finetune"
    assert default.recipe.trainers == ["imitation", "ppo"] and default.total_timesteps == 786_432
    assert resolve(RunOptions(recipe="imitation", **root)).recipe.rl is None
    written = load_recipe("ppo-finetune")[0].imitation
    assert default.recipe.imitation == written  # the recipe's phase, whole
    ppo = resolve(RunOptions(recipe="ppo", **root))
    epochs = resolve(RunOptions(recipe="ppo", set=["n_epochs=2"], **root))
    assert ppo.total_timesteps == epochs.total_timesteps == 2_490_368
    assert epochs.recipe.hyperparams.n_epochs == 2 and ppo.recipe.hyperparams.n_epochs == 8
    assert resolve(RunOptions(recipe="ppo", timesteps=10_000, **root)).total_timesteps == 16_384
    # a small budget gives a short run: the imitation phase shrunk to fit it
    small = resolve(RunOptions(timesteps=512, **root)).recipe
    assert small.imitation is not None and written is not None
    assert small.imitation.episodes == 1 and small.imitation.scenario_episodes == 0
    assert small.imitation.rounds == written.rounds
    assert small.total_timesteps == 8192  # one rollout of 256 x 32 steps
    from envs.generator import broad_family_names, generator_family_names

    families = 18  # mixed, the generator's eight gen-* families and its nine broad-* families
    assert default.recipe.env.train_families == generator_family_names() + broad_family_names()
    half = resolve(RunOptions(timesteps=imitation_steps(default.recipe, families) // 2, **root))
    assert half.recipe.imitation is not None and half.recipe.imitation.episodes == 64
    assert list(tmp_path.iterdir()) == []  # resolving writes nothing


def test_default_trains_on_the_generator_alone(tmp_path: Path) -> None:
    """The default recipe's training set: the task's family and every gen-* and broad-*
    family; no shipped scenario, no held-out family."""
    from agents.config import RunOptions
    from agents.config.load import resolve
    from envs.generator import broad_family_names, generator_family_names, unseen_family_names
    from envs.scenario import scenario_names

    cfg = resolve(RunOptions(runs_root=str(tmp_path / "runs")))
    assert cfg.trained_on == ["mixed", *generator_family_names(), *broad_family_names()]
    assert not set(cfg.trained_on) & {*scenario_names(), *unseen_family_names()}


def test_evaluate_refuses_bad_values_before_any_episode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import evaluate
    from agents import evaluation

    def no_episode(*_: Any, **__: Any) -> Any:
        raise AssertionError("an episode ran before the checks")

    monkeypatch.setattr(evaluation, "rollout", no_episode)
    out = tmp_path / "out"
    common = ["--no-progress", "--no-plots", "--episodes", "2"]
    assert evaluate.main(["--seed", "-1", "--output", str(out), *common]) == 2
    msg = one_error(capsys)
    assert "--seed -1" in msg and ">= 0" in msg
    existing = tmp_path / "results.txt"
    existing.write_text("old results")
    assert evaluate.main(["--scenarios", "kv-store", "--output", str(existing), *common]) == 2
    msg = one_error(capsys)
    assert "--output" in msg and str(existing) in msg and "folder" in msg
    assert existing.read_text() == "old results"
    # a static policy with two weights, fine on 2-node kv-store, not on the 5-node machine
    args = ["--scenarios", "kv-store,colocation,mlc-bandwidth", "--policies",
            "dram-first,static:3:1,tpp", "--output", str(out), *common]  # fmt: skip
    assert evaluate.main(args) == 2
    msg = one_error(capsys)
    assert "static:3:1" in msg and "mlc-bandwidth" in msg and "5 nodes" in msg
    assert evaluate.main(["--scenarios", "kv-store,nope", "--output", str(out), *common]) == 2
    assert "nope" in one_error(capsys)
    assert evaluate.main(["--metric", "speed", "--output", str(out), *common]) == 2
    assert "--metric speed" in one_error(capsys)
    assert evaluate.main(["--episodes", "0", "--output", str(out)]) == 2
    assert "--episodes 0" in one_error(capsys)
    assert not out.exists()


def test_a_corrupt_run_description_names_its_file(
    tmp_path: Path, short_scenario: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import evaluate
    import train

    run = tmp_path / "run"
    assert train.main(tiny(short_scenario, run, "--timesteps", "128")) == 0
    meta = run / "tiergym.json"
    out = tmp_path / "out"
    for text in ("{not json", json.dumps({"algo": "ppo"}), json.dumps({"algo": "dqn", "env": {}})):
        meta.write_text(text)
        rc = evaluate.main(["--scenarios", str(short_scenario), "--policies", f"dram-first,{run}",
                            "--output", str(out), "--no-progress"])  # fmt: skip
        assert rc == 2
        assert str(meta) in one_error(capsys)
    assert not out.exists()


def test_resume_keeps_the_options_of_the_start(
    tmp_path: Path, short_scenario: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import train

    run = tmp_path / "run"
    start = tiny(short_scenario, run, "--timesteps", "256", "--checkpoint-interval", "128")
    assert train.main(start) == 0
    cfg = yaml.safe_load((run / "config.yml").read_text())
    assert cfg["options"]["compare_episodes"] == 0 and cfg["options"]["quiet"] is True
    shutil.rmtree(run / "checkpoints" / "step_000000000256")
    (run / "model.zip").unlink()
    capsys.readouterr()
    # a training setting cannot change; nothing is written when it is refused
    command = (run / "command.txt").read_text()
    assert train.main(["--resume", str(run), "--num-envs", "4"]) == 2
    msg = one_error(capsys)
    assert "--num-envs 4" in msg and "8" in msg
    assert train.main(["--resume", str(run), "--set", "n_epochs=3"]) == 2
    assert "--set" in one_error(capsys)
    assert (run / "command.txt").read_text() == command
    # the same value is fine; --eval-episodes overrides; the rest (quiet, no comparison) is kept
    assert train.main(["--resume", str(run), "--num-envs", "8", "--eval-episodes", "3"]) == 0
    out = capsys.readouterr().out
    assert out == ""  # --quiet as recorded
    assert not (run / "results").exists()  # --compare-episodes 0 as recorded
    cfg = yaml.safe_load((run / "config.yml").read_text())
    assert cfg["eval_episodes"] == 3 and cfg["options"]["eval_episodes"] == 3
    assert cfg["options"]["compare_episodes"] == 0
    assert json.loads((run / "training.json").read_text())["timesteps"] == 256
    assert (run / "command.txt").read_text().count("\n") == 2
    # a longer budget given on the resume command; not one below where the run stands
    assert train.main(["--resume", str(run), "--timesteps", "128"]) == 2
    msg = one_error(capsys)
    assert "--timesteps 128" in msg and "256" in msg
    assert train.main(["--resume", str(run), "--timesteps", "384"]) == 0
    assert json.loads((run / "training.json").read_text())["timesteps"] == 384


def test_resume_of_a_folder_without_checkpoint_starts_from_step_0(
    tmp_path: Path, short_scenario: Path
) -> None:
    import train

    run = tmp_path / "run"
    assert train.main(tiny(short_scenario, run, "--timesteps", "128")) == 0
    shutil.rmtree(run / "checkpoints")
    for name in ("model.zip", "tiergym.json", "training.json"):
        (run / name).unlink()
    shutil.rmtree(run / "tensorboard")
    assert train.main(["--resume", str(run)]) == 0
    assert json.loads((run / "training.json").read_text())["timesteps"] == 128
    assert (run / "checkpoints" / "step_000000000128").is_dir()


@pytest.mark.slow
@pytest.mark.parametrize("when", ["config.yml", "tensorboard"])
def test_sigterm_before_the_first_checkpoint_leaves_a_resumable_run(
    tmp_path: Path, short_scenario: Path, when: str
) -> None:
    """Interrupted as it sets up: as soon as the run folder exists (the model is not built yet),
    or once the model logs (it then scores the references): resumable, and resumed to the end."""
    run = tmp_path / "run"
    args = tiny(short_scenario, run, "--timesteps", "1024", "--eval-interval", "512",
                "--eval-episodes", "4", "--checkpoint-interval", "4096")  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "train.py"), *args],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.time() + 120
    while not (run / when).exists():
        assert proc.poll() is None and time.time() < deadline, proc.communicate()
        time.sleep(0.005)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "interrupted" in out and "--resume" in out
    assert not (run / "model.zip").exists()
    if when == "tensorboard":  # the model existed: a checkpoint where it stopped
        (ck,) = os.listdir(run / "checkpoints")
        assert int(ck.split("_")[1]) < 1024
    res = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), "--resume", str(run)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert json.loads((run / "training.json").read_text())["timesteps"] == 1024


def imitation_args(scenario: Path, run: Path) -> list[str]:
    """The imitation recipe cut to seconds: two bases, four episodes, one DAgger round."""
    return [
        "--recipe", "imitation", "--scenario", str(scenario), "--run-dir", str(run),
        "--set", "env.base_policy=[colloid, dram-first]", "--set", "env.train_families=null",
        "--set", "imitation.episodes=4", "--set", "imitation.rounds=1",
        "--set", "imitation.scenarios=[]", "--set", "imitation.scenario_episodes=0",
        "--set", "imitation.epochs=4", "--eval-episodes", "2", "--compare-episodes", "0",
        "--no-progress", "--quiet",
    ]  # fmt: skip


def test_train_with_the_imitation_recipe(tmp_path: Path, short_scenario: Path) -> None:
    """The imitation recipe: the warm start (with its DAgger round) and no RL step; the model
    it saves runs, follows a base whole, and is named by its recipe in TensorBoard."""
    import train
    from agents.evaluation import load_policy
    from agents.rollout import rollout

    run = tmp_path / "r"
    assert train.main(imitation_args(short_scenario, run)) == 0
    assert run.name == "r" and (run / "imitation").is_dir()
    summary = json.loads((run / "warm_start.json").read_text())
    assert summary["dagger_rounds"] == 1 and summary["samples"][1] == 2 * summary["samples"][0]
    assert summary["objective"] == "log-geomean"
    assert json.loads((run / "training.json").read_text())["timesteps"] == 0
    cfg = yaml.safe_load((run / "config.yml").read_text())
    assert cfg["recipe"]["name"] == "imitation" and cfg["recipe"]["rl"] is None
    policy, kw = load_policy(str(run))
    assert kw["mixing"] == "hard"
    recs = rollout(policy, str(short_scenario), 2, 20_000, "test", kw)
    assert len(recs) == 2 and all(r["metrics"]["geomean_perf"] > 0 for r in recs)
    shares = policy.agent.mix
    assert set(np.unique(shares).tolist()) <= {0.0, 1.0}  # one base whole, never a blend
    # TensorBoard: the evaluation at step 0 in the run's own folder, the warm start's card
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run / "tensorboard"), size_guidance={"tensors": 0, "scalars": 0})
    acc.Reload()
    assert [e.step for e in acc.Scalars("eval/geomean_perf")] == [0]  # the learned policy's
    card = acc.Tensors("warm_start/text_summary")[0].tensor_proto.string_val[0].decode()
    assert f"| {short_scenario} |" in card and "| colloid | dram-first |" in card
    assert f"| 1 | {summary['samples'][1]:,} |" in card


def test_an_interrupted_imitation_phase_resumes_from_its_parts(
    tmp_path: Path, short_scenario: Path
) -> None:
    """--resume of a run stopped in its imitation phase reads the finished parts back
    (nothing labelled or fitted again) and saves the same policy as an uninterrupted run."""
    import train
    from agents.runs import load_trained

    run = tmp_path / "r"
    assert train.main(imitation_args(short_scenario, run)) == 0
    whole = load_trained(run)[0]
    # as if stopped after the labels and fits were saved: no checkpoint, model or logs yet
    shutil.rmtree(run / "checkpoints")
    shutil.rmtree(run / "tensorboard")
    for name in ("model.zip", "tiergym.json", "training.json", "warm_start.json"):
        (run / name).unlink()
    assert train.main(["--resume", str(run)]) == 0
    resumed = json.loads((run / "warm_start.json").read_text())["resumed"]
    assert resumed["jobs"] == 1 and resumed["fits"] == 2
    again = load_trained(run)[0]
    assert train.main(["--resume", str(run)]) == 2  # complete: nothing left to resume
    for (k, a), (_, b) in zip(
        whole.policy.state_dict().items(), again.policy.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), k


# ---------------------------------------------------------------- scripts/fit_holdout.py


@pytest.fixture(scope="module")
def fit_holdout(script: Callable[[str], ModuleType]) -> ModuleType:
    return script("scripts/fit_holdout.py")


@pytest.fixture(scope="module")
def imitation_run(tmp_path_factory: pytest.TempPathFactory, short_scenario: Path) -> Path:
    """A finished run of the imitation recipe cut to seconds (:func:`imitation_args`); the
    tests below read it and write nothing into it."""
    import train

    run = tmp_path_factory.mktemp("imitation") / "r"
    assert train.main(imitation_args(short_scenario, run)) == 0
    return run


def _table(out: str) -> list[list[float]]:
    rows = [line for line in out.splitlines() if line.startswith("| ") and line[2].isdigit()]
    return [[float(c) for c in line.strip("| \n").split(" | ")] for line in rows]


def test_the_fit_of_a_run_is_rebuilt_and_episodes_held_out_whole(
    fit_holdout: ModuleType, imitation_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With nothing held out and the recipe's epochs and rate, the last pass's loss is the run's
    first fit's (the same rows, initial weights and shuffling); with half held out, the
    held-out rows are the last episodes of each job, whole, and nothing else."""
    from agents.imitation import labelled_jobs

    run = imitation_run
    first = json.loads((run / "warm_start.json").read_text())["loss"][0]
    capsys.readouterr()
    assert fit_holdout.main([str(run), "--holdout", "0"]) == 0
    (row,) = _table(capsys.readouterr().out)
    rate = yaml.safe_load((run / "config.yml").read_text())["recipe"]["imitation"]["learning_rate"]
    assert row[:2] == [4, rate]  # imitation_args' epochs, the recipe's rate
    assert row[2] == pytest.approx(first, abs=2e-5)
    assert row[3] == pytest.approx(row[4] + row[5], abs=2e-4) and np.isnan(row[6:]).all()

    ((_, got),) = labelled_jobs(run / "imitation")
    n = len(got.labels)
    fitted, held = fit_holdout.split_episodes(got, 0.5)
    episode = np.arange(len(got.obs)) % n
    assert len(fitted[0]) + len(held[0]) == len(got.obs)
    assert np.array_equal(held[0], got.obs[episode >= n - n // 2])
    assert np.array_equal(fitted[1], got.targets[episode < n - n // 2])
    assert fit_holdout.main([str(run), "--fits", "1:0.001,2:0.002", "--holdout", "0.5"]) == 0
    rows = _table(capsys.readouterr().out)
    assert [r[:2] for r in rows] == [[1, 0.001], [2, 0.002]]
    assert all(np.isfinite(r).all() for r in rows)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--fits", "40"], "EPOCHS:LR"),
        (["--fits", "0:0.001"], "EPOCHS >= 1"),
        (["--holdout", "1"], "0 <= share < 1"),
    ],
)
def test_fit_holdout_bad_input_is_one_line(
    fit_holdout: ModuleType,
    tmp_path: Path,
    args: list[str],
    words: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exc:
        fit_holdout.main([str(tmp_path), *args])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and words in err


def test_fit_holdout_names_a_folder_without_labels(
    fit_holdout: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        fit_holdout.main([str(tmp_path)])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.startswith(f"error: {tmp_path}: ") and err.count("\n") == 1


# ---------------------------------------------------------------- scripts/imitation_policy.py


@pytest.fixture(scope="module")
def imitation_policy(script: Callable[[str], ModuleType]) -> ModuleType:
    return script("scripts/imitation_policy.py")


def test_the_imitation_policy_of_an_imitation_run_is_the_run_itself(
    imitation_policy: ModuleType, imitation_run: Path, tmp_path: Path
) -> None:
    """The imitation recipe's model is its last fit: the policy written from that fit has the
    run's tensors, to the bit, and acts as the run does; an earlier fit gives other weights;
    the run's folder is left as it was."""
    from agents.runs import load_trained

    before = {p.name: p.read_bytes() for p in imitation_run.iterdir() if p.is_file()}
    out = tmp_path / "im"
    assert imitation_policy.main([str(imitation_run), str(out)]) == 0
    run_model, env, _ = load_trained(imitation_run)
    got, got_env, _ = load_trained(out)
    assert got_env == env and got.num_timesteps == 0
    a, b = run_model.policy.state_dict(), got.policy.state_dict()
    assert list(a) == list(b) and all(torch.equal(a[k], b[k]) for k in a)
    obs = np.stack([got.observation_space.sample() for _ in range(8)])
    assert np.array_equal(
        run_model.predict(obs, deterministic=True)[0], got.predict(obs, deterministic=True)[0]
    )
    first = tmp_path / "first"
    assert imitation_policy.main([str(imitation_run), str(first), "--fit", "0"]) == 0
    c = load_trained(first)[0].policy.state_dict()
    assert any(not torch.equal(a[k], c[k]) for k in a)
    assert before == {p.name: p.read_bytes() for p in imitation_run.iterdir() if p.is_file()}


def test_imitation_policy_bad_input_is_one_line(
    imitation_policy: ModuleType,
    imitation_run: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """No run folder, a fit that does not exist, a folder without fits, a run without its
    model, an output that is not empty: exit code 2, one line naming the path; nothing is
    written."""
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("mine")
    empty = tmp_path / "empty"
    (empty / "imitation").mkdir(parents=True)
    unfinished = tmp_path / "unfinished"  # fits and config, no model yet
    shutil.copytree(imitation_run / "imitation", unfinished / "imitation")
    shutil.copyfile(imitation_run / "config.yml", unfinished / "config.yml")
    cases = [
        ([str(tmp_path / "none"), str(tmp_path / "o1")], f"{tmp_path / 'none'}: not a run folder"),
        ([str(imitation_run), str(tmp_path / "o2"), "--fit", "9"], "fit-09.npz"),
        ([str(empty), str(tmp_path / "o3")], "no fit-RR.npz"),
        ([str(unfinished), str(tmp_path / "o4")], "has no checkpoint"),
        ([str(imitation_run), str(full)], "not an empty folder"),
    ]
    for args, words in cases:
        with pytest.raises(SystemExit) as exc:
            imitation_policy.main(args)
        err = capsys.readouterr().err
        assert exc.value.code == 2 and err.count("\n") == 1 and words in err, err
    assert not any((tmp_path / f"o{i}").exists() for i in (1, 2, 3, 4))
    assert [p.name for p in full.iterdir()] == ["keep.txt"]
