"""train.py: TensorBoard tags, checkpoints, SIGTERM and resume, determinism, wrong input, --set."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def tiny_args(scenario: Path, run_dir: Path, *extra: str) -> list[str]:
    return [
        "--recipe", "ppo", "--scenario", str(scenario), "--num-envs", "8", "--set", "n_steps=16", "--set", "batch_size=64",
        "--set", "n_epochs=1", "--eval-episodes", "2", "--compare-episodes", "0", "--run-dir", str(run_dir),
        "--no-progress", "--quiet", *extra,
    ]  # fmt: skip


def run_train(args: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "train.py"), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        **kw,
    )  # type: ignore[call-overload]


def event_tags(run_dir: Path) -> set[str]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tags: set[str] = set()
    for ev in (run_dir / "tensorboard").glob("events.out.tfevents.*"):
        acc = EventAccumulator(str(ev), size_guidance={"scalars": 0, "tensors": 0})
        acc.Reload()
        tags |= set(acc.Tags()["scalars"]) | set(acc.Tags()["tensors"])
    return tags


@pytest.mark.slow
def test_tiny_run_logs_env_and_eval_tags_and_saves_the_run(
    tmp_path: Path, short_scenario: Path
) -> None:
    run_dir = tmp_path / "run"
    res = run_train(
        tiny_args(
            short_scenario,
            run_dir,
            "--timesteps",
            "256",
            "--eval-interval",
            "128",
            "--checkpoint-interval",
            "128",
        )
    )
    assert res.returncode == 0, res.stderr
    tags = event_tags(run_dir)
    assert {
        "env/tenants/norm_perf_vs_alone",
        "env/node/dram0/bandwidth_GBps",
        "env/node/cxl0/latency_ns",
        "env/migration/promotion_MBps",
        "env/reward/log_geomean (trained)",
        "time/env_sps",
    } <= tags
    assert "eval/geomean_perf" in tags  # the learned policy's, in the run's own folder
    assert "eval/dram-first" not in tags
    for ref in ("dram-first", "numa-tiering"):  # each reference a run (folder) of its own
        assert any((run_dir / "tensorboard" / ref).glob("events.out.tfevents.*")), ref
    assert any(t.startswith("hyperparameters") for t in tags)  # the hyperparameter table
    cfg = yaml.safe_load((run_dir / "config.yml").read_text())
    assert cfg["format"] == 2 and cfg["recipe"]["name"] == "ppo" and cfg["recipe"]["algo"] == "ppo"
    assert cfg["recipe"]["rl"]["total_timesteps"] == 256 and cfg["task"]["reward"] == "log-geomean"
    assert "train.py" in (run_dir / "command.txt").read_text()
    assert (run_dir / "model.zip").is_file() and json.loads((run_dir / "tiergym.json").read_text())[
        "env"
    ]["scenario"] == str(short_scenario)
    assert json.loads((run_dir / "training.json").read_text())["timesteps"] == 256
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == [
        "step_000000000128",
        "step_000000000256",
    ]


@pytest.mark.slow  # ~10 s: a run long enough to be interrupted, then resumed
def test_sigterm_saves_a_checkpoint_and_resume_reaches_the_total(
    tmp_path: Path, short_scenario: Path
) -> None:
    run_dir = tmp_path / "run"
    total = 128 * 60
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "train.py"), *tiny_args(short_scenario, run_dir, "--timesteps", str(total), "--eval-interval", "0", "--checkpoint-interval", "1024")],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.time() + 300
    while time.time() < deadline and not (run_dir / "checkpoints" / "step_000000001024").exists():
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert "interrupted" in out and "--resume" in out
    stopped = max(int(p.name.split("_")[1]) for p in (run_dir / "checkpoints").iterdir())
    assert 1024 <= stopped < total and stopped % 128 == 0  # a rollout boundary
    assert not (run_dir / "model.zip").exists()
    res = run_train(
        ["--resume", str(run_dir), "--compare-episodes", "0", "--no-progress", "--quiet"]
    )
    assert res.returncode == 0, res.stderr
    assert json.loads((run_dir / "training.json").read_text())["timesteps"] == total
    from agents.runs import load_trained

    assert load_trained(run_dir)[0].num_timesteps == total


def first_actions(run_dir: Path) -> np.ndarray:
    from agents.runs import load_trained

    model = load_trained(run_dir)[0]
    obs = (
        np.random.default_rng(0)
        .uniform(0, 1, (16, *model.observation_space.shape))
        .astype(np.float32)
    )
    return model.predict(obs, deterministic=True)[0]


@pytest.mark.slow
def test_one_seed_gives_the_same_policy(tmp_path: Path, short_scenario: Path) -> None:
    import train

    for name in ("a", "b", "c"):
        seed = "3" if name != "c" else "4"
        assert (
            train.main(
                tiny_args(
                    short_scenario,
                    tmp_path / name,
                    "--timesteps",
                    "256",
                    "--eval-interval",
                    "0",
                    "--seed",
                    seed,
                )
            )
            == 0
        )
    a, b, c = (first_actions(tmp_path / n) for n in "abc")
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


def test_wrong_input_gets_one_clear_error(
    tmp_path: Path, short_scenario: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import train

    def error(args: list[str]) -> str:
        assert train.main(args) == 2
        return capsys.readouterr().err

    msg = error([*tiny_args(short_scenario, tmp_path / "r1"), "--recipe", "dqn"])
    assert "unknown recipe 'dqn'" in msg and "recurrent-ppo" in msg
    msg = error(["--scenario", "no-such-scenario", "--run-dir", str(tmp_path / "r2"), "--quiet"])
    assert "no-such-scenario" in msg and "kv-store" in msg and "mixed" in msg
    recipe = yaml.safe_load((ROOT / "agents" / "recipes" / "ppo.yml").read_text())
    recipe["rl"]["hyperparams"]["learning_rat"] = 0.1
    hp = tmp_path / "hp.yml"
    hp.write_text(yaml.safe_dump(recipe))
    msg = error([*tiny_args(short_scenario, tmp_path / "r3"), "--recipe", str(hp)])
    assert "rl.hyperparams.learning_rat: unknown key" in msg and str(hp) in msg
    msg = error(tiny_args(short_scenario, tmp_path / "r4", "--set", "clip_rang=0.1"))
    assert "clip_rang" in msg and "clip_range" in msg
    empty = tmp_path / "empty-run"
    empty.mkdir()
    (empty / "config.yml").write_text(yaml.safe_dump({"algo": "ppo"}))
    msg = error(["--resume", str(empty), "--quiet"])
    assert "no checkpoint" in msg and "run format 1" in msg  # a run of before the recipes
    # an existing run folder is never overwritten
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("keep me")
    msg = error(tiny_args(short_scenario, busy, "--timesteps", "128"))
    assert "already exists" in msg
    assert (busy / "notes.txt").read_text() == "keep me" and sorted(os.listdir(busy)) == [
        "notes.txt"
    ]
    for folder in ("r1", "r2", "r3", "r4"):
        assert not (tmp_path / folder).exists()  # a rejected command leaves nothing behind


def test_resume_restores_the_reward_normalisation(
    tmp_path: Path, short_scenario: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A resumed run trains on with the VecNormalize statistics of its checkpoint."""
    import shutil

    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import VecNormalize

    import train

    def stats(step: int) -> dict[str, np.ndarray]:
        path = run_dir / "checkpoints" / f"step_{step:012d}" / "vecnormalize.npz"
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}

    run_dir = tmp_path / "run"
    args = tiny_args(short_scenario, run_dir, "--timesteps", "256", "--eval-interval", "0")
    assert train.main([*args, "--checkpoint-interval", "128"]) == 0
    saved = stats(128)
    # make the first checkpoint the latest: the run resumes from 128 steps
    shutil.rmtree(run_dir / "checkpoints" / "step_000000000256")
    (run_dir / "model.zip").unlink()
    assert bool(saved["norm_reward"]) and not bool(saved["norm_obs"])
    assert saved["ret_count"] > 100 and not np.allclose(saved["ret_var"], 1.0)

    seen: dict[str, object] = {}
    learn = PPO.learn

    def spy(self: PPO, *a: object, **kw: object) -> object:
        env = self.get_env()
        seen["env"] = env
        seen["mean"] = np.array(env.ret_rms.mean, copy=True)
        seen["var"] = np.array(env.ret_rms.var, copy=True)
        seen["count"] = env.ret_rms.count
        seen["timesteps"] = self.num_timesteps
        return learn(self, *a, **kw)

    monkeypatch.setattr(PPO, "learn", spy)
    resumed = ["--resume", str(run_dir), "--compare-episodes", "0", "--no-progress", "--quiet"]
    assert train.main(resumed) == 0
    assert seen["timesteps"] == 128
    assert isinstance(seen["env"], VecNormalize) and seen["env"].training
    np.testing.assert_array_equal(seen["mean"], saved["ret_mean"])
    np.testing.assert_array_equal(seen["var"], saved["ret_var"])
    assert seen["count"] == saved["ret_count"]
    assert seen["env"].clip_reward == saved["clip_reward"] and seen["env"].gamma == saved["gamma"]
    # and kept updating them: the final checkpoint's statistics went on from the saved ones
    assert stats(256)["ret_count"] == saved["ret_count"] + 128


def test_set_one_entry_of_a_recipe() -> None:
    """--set env.KEY=V / policy_kwargs.KEY=V / imitation.KEY=V changes that entry only (the
    rest of the recipe stays); a bad entry is an error naming it. A sweep searches them so."""
    from agents.config import TrainingError
    from agents.config.load import load_recipe

    base, _ = load_recipe("imitation")
    sets = [
        "env.base_policy=[tpp, dram-first]",
        "policy_kwargs.log_std_init=-0.5",
        "imitation.rounds=1",
    ]
    got, _ = load_recipe("imitation", sets)
    assert got.env.given() == {**base.env.given(), "base_policy": ["tpp", "dram-first"]}
    assert got.policy_kwargs.given() == {**base.policy_kwargs.given(), "log_std_init": -0.5}
    assert got.imitation is not None and got.imitation.rounds == 1
    assert got.imitation.model_dump() == {**base.imitation.model_dump(), "rounds": 1}  # type: ignore[union-attr]
    with pytest.raises(TrainingError, match=r"--set env\.bogus=1: env\.bogus: unknown key 'bogus'"):
        load_recipe("imitation", ["env.bogus=1"])
    with pytest.raises(TrainingError, match="no-such-heuristic"):
        load_recipe("ppo", ["env.base_policy=no-such-heuristic"])
    for bad in ("[tpp, tpp]", "[]", "[tpp, no-such-heuristic]"):
        with pytest.raises(TrainingError, match="base_policy"):
            load_recipe("ppo", [f"env.base_policy={bad}"])
    with pytest.raises(TrainingError, match=r"imitation\.scenarios"):
        load_recipe("imitation", ["imitation.scenarios=[no-such-scenario]"])
    # the imitation phase chooses between bases: one base is an error naming the rule
    with pytest.raises(TrainingError, match=r"imitation: needs env\.base_policy with at least two"):
        load_recipe("imitation", ["env.base_policy=tpp", "env.residual_bases=null"])
    with pytest.raises(TrainingError, match=r"env\.residual_bases: got \['numa-tiering'\]"):
        load_recipe("imitation", ["env.residual_bases=[numa-tiering]"])
    with pytest.raises(TrainingError, match=r"imitation\.plans: true needs env\.residual_bases"):
        load_recipe("imitation", ["env.residual_bases=null"])
    # a bare algorithm argument is rl.hyperparams'; a recipe without RL then lacks its budget
    assert load_recipe("ppo", ["n_epochs=2"])[0].hyperparams.n_epochs == 2
    with pytest.raises(TrainingError, match=r"rl\.total_timesteps"):
        load_recipe("imitation", ["n_epochs=2"])


def test_generator_chances_reach_training_and_not_evaluation(tmp_path: Path) -> None:
    """env.generator_chances: the training families are drawn with them (the imitation
    phase's labels, the RL phase's pools); evaluation draws the documented chances; a bad
    entry is an error naming it."""
    from agents.config import RunOptions, TrainingError
    from agents.config.load import load_recipe, resolve
    from agents.evaluation import evaluation_env_kwargs
    from agents.rollout import make_params
    from baselines import make_policy
    from envs.generator import generated_scenario

    opts = RunOptions(
        recipe="imitation", set=["env.generator_chances={memory_high: 0.5}"], runs_root=tmp_path
    )
    cfg = resolve(opts)
    assert cfg.env["generator_chances"] == {"memory_high": 0.5}
    env = {k: v for k, v in cfg.env.items() if k not in ("scenario", "split")}
    policy = make_policy("colloid")
    trained = make_params(policy, "gen-1s-2cxl", "train", env).family
    scored = make_params(policy, "gen-1s-2cxl", "test", evaluation_env_kwargs(env)).family
    assert trained is not scored and trained.name == scored.name == "gen-1s-2cxl"
    for i in range(4):
        assert trained.scenario("train", i) == generated_scenario(
            "1s-2cxl", "train", i, chances={"memory_high": 0.5}
        )
        assert scored.scenario("test", i) == generated_scenario("1s-2cxl", "test", i)
    with pytest.raises(TrainingError, match=r"env\.generator_chances.*unknown chance 'highs'"):
        load_recipe("imitation", ["env.generator_chances={highs: 0.5}"])
    with pytest.raises(TrainingError, match=r"env\.generator_chances\.late"):
        load_recipe("imitation", ["env.generator_chances={late: 2}"])


def test_rl_train_families_pick_what_the_rl_phase_draws(tmp_path: Path) -> None:
    """rl.train_families: RL's environment on the scenario and the named families only (the
    imitation phase keeps env.train_families), rl.scenario_share of the instances on the
    scenario; a family outside them is refused by name, a share with no family to share with
    or outside (0, 1) too."""
    from agents.config import RunOptions
    from agents.config.load import load_recipe, resolve
    from agents.trainer import _training_env

    def nodes_drawn(families: str, *more: str) -> list[int]:
        opts = RunOptions(
            # a minibatch no larger than 4 instances' rollout (PPO warns otherwise)
            set=[f"rl.train_families={families}", "rl.hyperparams.batch_size=128", *more],
            num_envs=4,
            runs_root=tmp_path,
        )
        cfg = resolve(opts)
        assert cfg.trained_on[1:] == cfg.env["train_families"]  # what imitation trained on
        venv, _ = _training_env(cfg)
        venv.reset()
        _, _, _, infos = venv.step(np.zeros((4, venv.action_space.shape[0]), np.float32))
        venv.close()
        return sorted(info["metrics"].node_bandwidth_gbps.shape[1] for info in infos)

    assert nodes_drawn("[]") == [2, 2, 2, 2]  # mixed alone: 1 DRAM + 1 CXL node
    assert nodes_drawn("[gen-1s-4cxl]") == [2, 2, 5, 5]  # half the instances each
    assert nodes_drawn("[gen-1s-4cxl]", "rl.scenario_share=0.75") == [2, 2, 2, 5]
    assert nodes_drawn("[gen-1s-4cxl]", "rl.scenario_share=0.1") == [2, 5, 5, 5]  # one at least
    with pytest.raises(ValueError, match=r"rl.scenario_share: 0.5: RL draws the scenario alone"):
        load_recipe("ppo-finetune", ["rl.train_families=[]", "rl.scenario_share=0.5"])
    for bad in ("0", "1", "nan"):
        with pytest.raises(ValueError, match=r"rl.scenario_share"):
            load_recipe("ppo-finetune", [f"rl.scenario_share={bad}"])
    with pytest.raises(ValueError, match=r"rl.train_families: 'mixed-2s' is not in env"):
        load_recipe("ppo-finetune", ["rl.train_families=[mixed-2s]"])
    # the default's anchor is taken on the families RL does not draw: there must be one
    for sets in (["rl.train_families=null"], ["rl.train_families=[generator, broad]"]):
        with pytest.raises(ValueError, match=r"rl.finetune.anchor_states: 'imitation' needs"):
            load_recipe("ppo-finetune", sets)


@pytest.mark.slow
def test_the_default_recipe_fine_tunes_on_the_scenario_anchored_elsewhere(
    tmp_path: Path, short_scenario: Path
) -> None:
    """The default recipe end to end, cut to seconds: the imitation phase labels every
    family, PPO runs on the scenario and the nine broad-* families (one instance each), and
    the anchor is taken on the other families' labelled states (it logs its distance after
    the update)."""
    run_dir = tmp_path / "ft"
    args = [
        "--scenario", str(short_scenario), "--run-dir", str(run_dir), "--timesteps", "160",
        "--num-envs", "10", "--set", "n_steps=16", "--set", "batch_size=80",
        "--set", "imitation.plans=false", "--set", "imitation.rounds=1",
        "--set", "imitation.epochs=2", "--set", "rl.finetune.critic_warmup=0",
        "--eval-episodes", "2", "--compare-episodes", "0", "--no-progress", "--quiet",
    ]  # fmt: skip
    res = run_train(args)
    assert res.returncode == 0, res.stderr
    assert json.loads((run_dir / "training.json").read_text())["timesteps"] == 160
    assert {"train/anchor_mse", "train/anchor_coef"} <= event_tags(run_dir)
    jobs = [json.loads(p.read_text())["family"] for p in (run_dir / "imitation").glob("job-*.json")]
    assert len(jobs) == 18 and str(short_scenario) in jobs  # the scenario, 8 gen-*, 9 broad-*
