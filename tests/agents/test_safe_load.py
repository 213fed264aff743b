"""Safe files: nothing is ever unpickled; saved runs round-trip and resume."""

from __future__ import annotations

import base64
import json
import pickle
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]


class WritesMarker:
    """A pickle payload: unpickling it creates the file ``path`` (it runs ``open(path, "w")``)."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (self.path, "w"))


def tiny_args(scenario: Path, run_dir: Path, *extra: str) -> list[str]:
    return [
        "--recipe", "ppo", "--scenario", str(scenario), "--num-envs", "8", "--set", "n_steps=16", "--set", "batch_size=64",
        "--set", "n_epochs=1", "--eval-interval", "0", "--compare-episodes", "0",
        "--run-dir", str(run_dir), "--no-progress", "--quiet", *extra,
    ]  # fmt: skip


def crafted_sb3_zip(path: Path, marker: Path) -> None:
    """A model.zip laid out like stable-baselines3's, whose ``data`` carries a pickle payload."""
    payload = base64.b64encode(pickle.dumps(WritesMarker(marker))).decode()
    data = {
        "policy_class": {":type:": "<class 'abc.ABCMeta'>", ":serialized:": payload},
        "observation_space": {
            ":type:": "<class 'gymnasium.spaces.box.Box'>",
            ":serialized:": payload,
        },
        "action_space": {":type:": "<class 'gymnasium.spaces.box.Box'>", ":serialized:": payload},
    }
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("data", json.dumps(data))
        zf.writestr("policy.pth", b"")
        zf.writestr("pytorch_variables.pth", b"")
        zf.writestr("_stable_baselines3_version", "2.9.2")


def test_the_payload_is_live(tmp_path: Path) -> None:
    """The payload the tests below feed in really runs code when unpickled (so refusing it matters)."""
    marker = tmp_path / "marker"
    pickle.loads(pickle.dumps(WritesMarker(marker)))  # the point of the test
    assert marker.exists()


def test_crafted_pickle_model_is_refused_and_never_unpickled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import evaluate
    from agents.config import TrainingError
    from agents.runs import load_trained

    marker = tmp_path / "marker"
    evil = tmp_path / "evil"
    evil.mkdir()
    crafted_sb3_zip(evil / "model.zip", marker)
    (evil / "tiergym.json").write_text(
        json.dumps({"algo": "ppo", "env": {"scenario": "kv-store"}, "seed": 0})
    )
    out = tmp_path / "out"
    rc = evaluate.main(
        ["--scenarios", "kv-store", "--policies", f"dram-first,{evil}", "--episodes", "1",
         "--output", str(out), "--no-progress", "--no-plots"]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1 and str(evil / "model.zip") in err and "pickle archive" in err
    assert not marker.exists() and not out.exists()
    with pytest.raises(TrainingError, match="never read"):
        load_trained(evil / "model.zip")
    assert not marker.exists()


def test_pickle_inside_the_safe_containers_is_refused(tmp_path: Path) -> None:
    """A payload in weights.pt (torch) or in an .npz (object array) is refused, not run."""
    from agents import persist

    marker = tmp_path / "marker"
    buf = tmp_path / "weights.pt"
    torch.save({"params": WritesMarker(marker), "variables": {}}, buf)
    bad = tmp_path / "model.zip"
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr(persist.META_NAME, json.dumps({"format": persist.FORMAT, "version": 1}))
        zf.writestr(persist.WEIGHTS_NAME, buf.read_bytes())
    with pytest.raises(persist.ModelFileError, match="tensors-only"):
        persist.read_model(bad)
    npz = tmp_path / "vecnormalize.npz"
    np.savez(npz, ret_mean=np.array([WritesMarker(marker)], dtype=object))
    with pytest.raises(persist.ModelFileError, match=r"vecnormalize\.npz"):
        persist.load_vecnormalize(npz, object())
    assert not marker.exists()


def test_a_real_sb3_pickle_model_is_refused(
    tmp_path: Path, short_scenario: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from stable_baselines3 import PPO

    import evaluate
    from envs.sb3 import make_vec_env

    run = tmp_path / "foreign"
    run.mkdir()
    env = {"scenario": str(short_scenario), "split": "train", "max_tenants": 1}
    PPO("MlpPolicy", make_vec_env(2, **env), n_steps=8, batch_size=16, device="cpu").save(
        run / "model.zip"
    )  # stable-baselines3's own (pickle) format
    (run / "tiergym.json").write_text(json.dumps({"algo": "ppo", "env": env, "seed": 0}))
    common = ["--scenarios", str(short_scenario), "--policies", f"dram-first,sb3={run}",
              "--episodes", "2", "--no-progress", "--no-plots"]  # fmt: skip
    assert evaluate.main([*common, "--output", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    assert "pickle archive" in err and str(run / "model.zip") in err
    assert not (tmp_path / "a").exists()


def _cfg(algo: str, scenario: Path, hp: dict[str, Any]) -> Any:
    from agents.config import RunConfig, Task

    hp = dict(hp)
    recipe = {
        "name": algo, "summary": "a test", "algo": algo,
        "policy": "MlpLstmPolicy" if algo == "recurrent-ppo" else "MlpPolicy",
        "policy_kwargs": hp.pop("policy_kwargs"), "env": {"max_tenants": 1},
        "rl": {"total_timesteps": 64, "n_envs": 4, "normalize_reward": False, "hyperparams": hp},
    }  # fmt: skip
    task = Task(scenario=str(scenario), split="train", reward="log-geomean",
                weights="per-tenant", action_type="box")  # fmt: skip
    return RunConfig(recipe=recipe, recipe_source="test", task=task, seed=3, eval_interval=0,
                     eval_episodes=1, checkpoint_interval=0)  # fmt: skip


@pytest.mark.parametrize(
    ("algo", "hp"),
    [
        ("ppo", {"n_steps": 8, "batch_size": 16, "policy_kwargs": {"net_arch": [16], "activation_fn": "relu"}}),
        ("a2c", {"n_steps": 4, "policy_kwargs": {"net_arch": [16]}}),
        ("sac", {"buffer_size": 200, "learning_starts": 8, "batch_size": 16, "policy_kwargs": {"net_arch": [16]}}),
        ("td3", {"buffer_size": 200, "learning_starts": 8, "batch_size": 16, "policy_kwargs": {"net_arch": [16]}}),
        ("recurrent-ppo", {"n_steps": 8, "batch_size": 16, "policy_kwargs": {"net_arch": [16], "lstm_hidden_size": 8}}),
    ],
)  # fmt: skip
def test_a_saved_model_round_trips(
    tmp_path: Path, short_scenario: Path, algo: str, hp: dict[str, Any]
) -> None:
    """Same actions from predict after load; the file is a two-member ZIP of JSON and tensors."""
    from agents import persist
    from agents.models import build_model, save_model
    from agents.runs import load_trained
    from agents.view import environment_config
    from envs.sb3 import make_vec_env

    cfg = _cfg(algo, short_scenario, hp)
    model = build_model(cfg.recipe, make_vec_env(4, **environment_config(cfg.env).given()), seed=3)
    model.learn(32)
    path = tmp_path / "model.zip"
    save_model(path, model, cfg)
    with zipfile.ZipFile(path) as zf:
        assert sorted(zf.namelist()) == sorted([persist.META_NAME, persist.WEIGHTS_NAME])
        meta = json.loads(zf.read(persist.META_NAME))
    assert meta["algo"] == algo and meta["num_timesteps"] == model.num_timesteps
    loaded, env, name = load_trained(path)
    assert name == algo and env["scenario"] == str(short_scenario)
    assert type(loaded) is type(model) and loaded.num_timesteps == model.num_timesteps
    obs = np.random.default_rng(0).uniform(0, 1, (16, *model.observation_space.shape))
    obs = obs.astype(np.float32)
    starts = np.ones(16, dtype=bool)
    a, _ = model.predict(obs, episode_start=starts, deterministic=True)
    b, _ = loaded.predict(obs, episode_start=starts, deterministic=True)
    np.testing.assert_array_equal(a, b)


def _optimizer_state(model: Any) -> list[torch.Tensor]:
    return [
        t.detach().clone()  # state_dict() hands out the live tensors
        for name in model._get_torch_save_params()[0]
        if name.endswith("optimizer")
        for s in model.get_parameters()[name]["state"].values()
        for t in s.values()
        if isinstance(t, torch.Tensor)
    ]


def test_resume_from_the_safe_files_continues_training(
    tmp_path: Path, short_scenario: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PPO: counters, weights, optimizer, reward statistics and random state come back; deterministic."""
    from stable_baselines3 import PPO

    import train
    from agents.runs import load_trained

    run = tmp_path / "run"
    args = tiny_args(short_scenario, run, "--timesteps", "256", "--checkpoint-interval", "128")
    assert train.main(args) == 0
    ck = run / "checkpoints" / "step_000000000128"
    assert sorted(p.name for p in ck.iterdir()) == [
        "model.zip", "progress.json", "rng.json", "vecnormalize.npz",
    ]  # fmt: skip
    shutil.rmtree(run / "checkpoints" / "step_000000000256")
    (run / "model.zip").unlink()
    with np.load(ck / "vecnormalize.npz", allow_pickle=False) as z:
        saved = {k: z[k] for k in z.files}
    assert saved["ret_count"] > 100 and saved["returns"].shape == (8,)
    rng = json.loads((ck / "rng.json").read_text())
    with zipfile.ZipFile(ck / "model.zip") as zf:
        meta = json.loads(zf.read("tiergym-model.json"))
    saved_model, _, _ = load_trained(ck / "model.zip")
    saved_opt = _optimizer_state(saved_model)

    seen: dict[str, Any] = {}
    learn = PPO.learn

    def spy(self: PPO, *a: Any, **kw: Any) -> Any:
        env = self.get_env()
        seen.update(
            timesteps=self.num_timesteps,
            n_updates=self._n_updates,
            ret_var=np.array(env.ret_rms.var),
            ret_count=env.ret_rms.count,
            returns=np.array(env.returns),
            torch_rng=torch.get_rng_state().tolist(),
            opt=_optimizer_state(self),
        )
        return learn(self, *a, **kw)

    monkeypatch.setattr(PPO, "learn", spy)
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    assert train.main(["--resume", str(run)]) == 0
    assert seen["timesteps"] == 128 and seen["n_updates"] == meta["n_updates"] > 0
    np.testing.assert_array_equal(seen["ret_var"], saved["ret_var"])
    np.testing.assert_array_equal(seen["returns"], saved["returns"])
    assert seen["ret_count"] == saved["ret_count"]
    assert seen["torch_rng"] == rng["torch"]
    assert len(seen["opt"]) == len(saved_opt) > 0
    for x, y in zip(seen["opt"], saved_opt, strict=True):
        torch.testing.assert_close(x, y, rtol=0, atol=0)
    assert json.loads((run / "training.json").read_text())["timesteps"] == 256
    with np.load(run / "checkpoints" / "step_000000000256" / "vecnormalize.npz") as z:
        assert float(z["ret_count"]) == float(saved["ret_count"]) + 128
    # the same checkpoint resumed again gives the same policy
    assert train.main(["--resume", str(copy)]) == 0
    a, _, _ = load_trained(run)
    b, _, _ = load_trained(copy)
    obs = np.random.default_rng(1).uniform(0, 1, (8, *a.observation_space.shape)).astype(np.float32)
    np.testing.assert_array_equal(
        a.predict(obs, deterministic=True)[0], b.predict(obs, deterministic=True)[0]
    )
    assert a.num_timesteps == b.num_timesteps == 256


def test_resume_restores_the_replay_buffer(
    tmp_path: Path, short_scenario: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stable_baselines3 import SAC

    import train

    run = tmp_path / "sac"
    args = [
        "--recipe", "sac", "--scenario", str(short_scenario), "--num-envs", "8", "--timesteps", "128",
        "--set", "buffer_size=400", "--set", "learning_starts=32", "--set", "batch_size=16",
        "--set", "policy_kwargs={net_arch: [16]}", "--eval-interval", "0", "--compare-episodes", "0",
        "--checkpoint-interval", "64", "--run-dir", str(run), "--no-progress", "--quiet",
    ]  # fmt: skip
    assert train.main(args) == 0
    cks = sorted((run / "checkpoints").iterdir())
    ck = cks[0]
    assert (ck / "replay_buffer.npz").is_file() and not (ck / "vecnormalize.npz").exists()
    for later in cks[1:]:
        shutil.rmtree(later)
    (run / "model.zip").unlink()
    with np.load(ck / "replay_buffer.npz", allow_pickle=False) as z:
        saved = {k: z[k] for k in z.files}
    seen: dict[str, Any] = {}
    learn = SAC.learn

    def spy(self: SAC, *a: Any, **kw: Any) -> Any:
        rb = self.replay_buffer
        seen.update(pos=rb.pos, full=rb.full, obs=rb.observations[: rb.pos].copy(),
                    rewards=rb.rewards[: rb.pos].copy(), timesteps=self.num_timesteps)  # fmt: skip
        return learn(self, *a, **kw)

    monkeypatch.setattr(SAC, "learn", spy)
    assert train.main(["--resume", str(run)]) == 0
    assert seen["timesteps"] == int(ck.name.split("_")[1]) and seen["pos"] == int(saved["pos"]) > 0
    np.testing.assert_array_equal(seen["obs"], saved["observations"])
    np.testing.assert_array_equal(seen["rewards"], saved["rewards"])
    assert json.loads((run / "training.json").read_text())["timesteps"] == 128


def test_an_old_pickle_checkpoint_is_refused(tmp_path: Path, short_scenario: Path) -> None:
    """A checkpoint in stable-baselines3's pickle format (the code before the safe formats):
    refused before any work, with the file and why; nothing is run or written."""
    import train
    from agents.models import build_model
    from agents.runs import read_config
    from agents.view.vec_env import make_training_vec_env

    run = tmp_path / "old"
    args = tiny_args(short_scenario, run, "--timesteps", "256", "--checkpoint-interval", "128")
    assert train.main(args) == 0
    shutil.rmtree(run / "checkpoints" / "step_000000000256")
    (run / "model.zip").unlink()
    ck = run / "checkpoints" / "step_000000000128"
    shutil.rmtree(ck)
    ck.mkdir()
    cfg = read_config(run)
    model = build_model(cfg.recipe, make_training_vec_env(8, cfg.env), cfg.seed)
    model.save(ck / "model.zip")  # the old layout: SB3's zip
    marker = tmp_path / "marker"
    with open(ck / "rng.pkl", "wb") as f:
        pickle.dump(WritesMarker(marker), f)
    command = (run / "command.txt").read_text()
    res = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), "--resume", str(run)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and str(ck / "model.zip") in res.stderr
    assert "pickle archive" in res.stderr and not marker.exists()
    assert (run / "command.txt").read_text() == command  # nothing was done


@pytest.mark.slow
def test_corrupt_safe_files_name_the_file(tmp_path: Path, short_scenario: Path) -> None:
    import train
    from agents.config import TrainingError
    from agents.runs import load_trained

    run = tmp_path / "run"
    args = tiny_args(short_scenario, run, "--timesteps", "128", "--checkpoint-interval", "128")
    assert train.main(args) == 0
    ck = run / "checkpoints" / "step_000000000128"
    (ck / "rng.json").write_text("{")
    (run / "model.zip").unlink()
    res = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), "--resume", str(run), "--timesteps", "256"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert res.returncode == 2 and str(ck / "rng.json") in res.stderr
    assert res.stderr.count("\n") == 1
    with zipfile.ZipFile(ck / "model.zip", "a") as zf:
        zf.writestr("extra", b"x")
    with pytest.raises(TrainingError, match="could not be loaded"):
        load_trained(ck / "model.zip")
