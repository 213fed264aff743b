"""sweep.py on a real local Ray (two CPUs): trials are run folders, summaries, best recipe, resume.

The sweeps train the ``ppo`` recipe with tiny settings (8-step episodes, 8 instances,
16-step rollouts, 128-256 steps per trial), so a trial is dominated by its worker's start-up.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

ray = pytest.importorskip("ray")

import sweep  # noqa: E402
from agents.config import RunOptions  # noqa: E402
from agents.config.load import resolve  # noqa: E402
from agents.plan import plan_run  # noqa: E402
from agents.runs import read_config  # noqa: E402
from agents.sweep.plan import (  # noqa: E402
    command_line,
    param_space,
    plan_trial,
    set_item,
    validate_trials,
)
from agents.sweep.run import make_scheduler, run_sweep  # noqa: E402
from agents.sweep.spec import SweepError, load_sweep  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def write_sweep(folder: Path, short: Path, name: str = "tiny", **extra: object) -> Path:
    """A sweep file: the ppo recipe on the short scenario, a tiny budget; ``extra`` replaces
    top-level keys."""
    spec: dict[str, object] = {
        "name": name,
        "recipe": "ppo",
        "scenario": str(short),
        "seeds": [0, 1],
        "train": {"num_envs": 8},
        "hyperparams": {
            "n_steps": 16,
            "batch_size": 64,
            "n_epochs": 1,
            "learning_rate": {"loguniform": [1.0e-4, 1.0e-3]},
        },
        "budget": {"timesteps": 256, "reports": 2},
        "objective": {"episodes": 2},
    }
    spec.update(extra)
    path = folder / f"{name}.yml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def local_ray():
    """One in-process Ray with two CPUs for the module (run_sweep uses it as it is)."""
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        logging_level="ERROR",
    )
    yield
    ray.shutdown()


def error_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    code = sweep.main(argv)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2, err
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ")
    return lines[0]


def event_tags(run_dir: Path) -> set[str]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tags: set[str] = set()
    for f in (run_dir / "tensorboard").glob("events.out.tfevents.*"):
        acc = EventAccumulator(str(f))
        acc.Reload()
        tags |= set(acc.Tags()["scalars"])
    return tags


@pytest.mark.slow
def test_two_trial_sweep_writes_run_folders_summary_and_best_recipe(
    local_ray: None, short_scenario: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from agents.evaluation import load_policy

    path = write_sweep(tmp_path, short_scenario)
    out = tmp_path / "out"
    assert sweep.main([str(path), "--output", str(out)]) == 0
    captured = capsys.readouterr()
    # one line per finished trial (stderr, with the bar); the table and best on stdout
    assert captured.err.count("geomean_perf") == 2 and "(2/2 reports, complete)" in captured.err
    assert "| rank | trial |" in captured.out and "best: " in captured.out
    trials = sorted(p for p in (out / "trials").iterdir())
    assert [p.name for p in trials] == ["000-ppo-short-s0", "001-ppo-short-s1"]
    for run in trials:
        # an ordinary run folder: config, checkpoints at each report, model, TensorBoard
        cfg = read_config(run)
        assert cfg.total_timesteps == 256 and cfg.n_envs == 8 and cfg.recipe.name == "ppo"
        assert cfg.recipe.hyperparams.n_steps == 16 and cfg.options["compare_episodes"] == 0
        assert (run / "model.zip").is_file() and (run / "tiergym.json").is_file()
        assert len(list((run / "checkpoints").glob("step_*"))) >= 2
        # command.txt: the train.py commands of the stages, a new run then a resume
        commands = (run / "command.txt").read_text().splitlines()
        assert (
            len(commands) == 2 and "--run-dir" in commands[0] and "--set n_steps=16" in commands[0]
        )
        assert f"--resume {run} --timesteps 256" in commands[1]
        tags = event_tags(run)
        assert "sweep/geomean_perf" in tags and any(t.startswith("train/") for t in tags)
        stages = json.loads((run / "sweep_trial.json").read_text())["stages"]
        assert [s["timesteps"] for s in stages] == [128, 256]
        policy, _ = load_policy(str(run))  # what evaluate.py does with a run folder
        assert policy.name == run.name
    rows = list(csv.DictReader((out / "summary.csv").open()))
    assert len(rows) == 2 and {r["status"] for r in rows} == {"complete"}
    assert {r["seed"] for r in rows} == {"0", "1"} and "learning_rate" in rows[0]
    assert (out / "summary.md").read_text().count("| complete |") == 2
    assert (out / "summary.png").stat().st_size > 10_000
    # the best configuration is a recipe file train.py takes, giving the best run's recipe
    best = json.loads((out / "best.json").read_text())
    assert best["trial"] == rows[0]["trial"] and best["recipe_file"] == str(out / "best.yml")
    assert f"--recipe {out / 'best.yml'}" in best["command"]
    best_run = read_config(out / "trials" / best["trial"])
    best_recipe = {"recipe": str(out / "best.yml"), "scenario": str(short_scenario)}
    cfg = plan_run(RunOptions.model_validate(best_recipe)).cfg  # what train.py records
    assert cfg.recipe.name == "tiny-best"
    same = {"name", "summary"}
    assert cfg.recipe.model_dump(exclude=same) == best_run.recipe.model_dump(exclude=same)
    assert (cfg.n_envs, cfg.total_timesteps) == (best_run.n_envs, best_run.total_timesteps)
    # the same command again: the sweep is complete, nothing is trained again
    mtimes = {p.name: (p / "model.zip").stat().st_mtime_ns for p in trials}
    assert sweep.main([str(path), "--output", str(out), "--no-progress"]) == 0
    assert {p.name: (p / "model.zip").stat().st_mtime_ns for p in trials} == mtimes


@pytest.mark.slow
def test_killed_sweep_resumes_where_it_stopped(
    local_ray: None, short_scenario: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_sweep(
        tmp_path,
        short_scenario,
        name="killed",
        seeds=[0, 1, 2],
        search={"max_concurrent": 1, "seed": 3},
    )
    out = tmp_path / "out"
    # the sweep in its own process (and its own Ray), killed with SIGKILL after one trial
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "sweep.py"), str(path), "--output", str(out), "--workers", "2"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    first = out / "trials" / "000-ppo-short-s0"
    try:
        deadline = time.time() + 300
        while time.time() < deadline and proc.poll() is None:
            state = first / "sweep_trial.json"
            if state.is_file() and len(json.loads(state.read_text())["stages"]) == 2:
                break
            time.sleep(0.2)
        assert proc.poll() is None, "the sweep ended before it could be killed"
        time.sleep(0.5)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert not (out / "summary.csv").exists()
    done_before = (first / "model.zip").stat().st_mtime_ns
    # the same command again: trial 0 is kept, the others run, the summary covers all three
    assert sweep.main([str(path), "--output", str(out)]) == 0
    err = capsys.readouterr().err
    assert "sweep killed: 3 trial(s)" in err
    assert (first / "model.zip").stat().st_mtime_ns == done_before
    rows = (out / "summary.md").read_text()
    assert rows.count("| complete |") == 3
    assert [p.name for p in sorted((out / "trials").iterdir())] == [
        "000-ppo-short-s0",
        "001-ppo-short-s1",
        "002-ppo-short-s2",
    ]


# --------------------------------------------------------------------------- a trial's stages


def test_a_trial_is_run_options_in_stages(short_scenario: Path, tmp_path: Path) -> None:
    spec = load_sweep(write_sweep(tmp_path, short_scenario, train={"num_envs": 8, "split": "test"}))
    point = {"recipe": "ppo", "scenario": str(short_scenario), "seed": 1,
             "hp": {"n_steps": 16, "batch_size": 64, "learning_rate": 3.0e-4}}  # fmt: skip
    plan = plan_trial(spec, point)
    # the whole budget as train.py --timesteps 256 resolves it; stages end at whole rollouts
    assert plan.config.total_timesteps == 256 and plan.targets == [128, 256]
    first = plan.first
    assert first["set"] == ["n_steps=16", "batch_size=64", "learning_rate=0.0003"]
    assert (first["timesteps"], first["checkpoint_interval"], first["eval_interval"]) == (
        128,
        64,
        0,
    )
    assert (first["split"], first["num_envs"], first["seed"]) == ("test", 8, 1)
    assert first["compare_episodes"] == 0 and first["quiet"] and first["no_progress"]
    opts = RunOptions(**first, run_dir=tmp_path / "run")
    argv = command_line(opts, {*first, "run_dir"})
    assert argv[:3] == ["train.py", "--recipe", "ppo"] and "--quiet" in argv
    assert argv[argv.index("--run-dir") + 1] == str(tmp_path / "run")
    # --set values read back as the sampled ones
    for value in (1.0e-5, [0.5, "tpp"], "yes", None, 3):
        assert yaml.safe_load(set_item("k", value).split("=", 1)[1]) == value


def test_a_recipe_without_rl_trains_in_one_stage(tmp_path: Path) -> None:
    path = tmp_path / "im.yml"
    path.write_text("recipe: imitation\nscenario: mixed\nbudget: {timesteps: 3000}\n")
    spec = load_sweep(path)
    plan = plan_trial(spec, {"recipe": "imitation", "scenario": "mixed", "seed": 0, "hp": {}})
    # budget.timesteps as train.py --timesteps: the imitation phase shrunk to fit, one stage
    assert plan.targets == [0] and plan.first["timesteps"] == 3000
    imitation = plan.config.recipe.imitation
    assert plan.config.recipe.rl is None and imitation is not None and imitation.episodes < 256
    path.write_text("recipe: imitation\nscenario: mixed\nbudget: {timesteps: 3000, reports: 2}\n")
    with pytest.raises(SweepError, match=r"budget.reports: recipe 'imitation' has no RL phase"):
        validate_trials(load_sweep(path))


def test_stages_keep_the_imitation_phase_of_the_whole_budget(tmp_path: Path) -> None:
    path = tmp_path / "ft.yml"
    path.write_text(
        "recipe: ppo-finetune\nscenario: mixed\ntrain: {num_envs: 8}\n"
        "budget: {timesteps: 30000, reports: 3}\n"
    )
    point = {"recipe": "ppo-finetune", "scenario": "mixed", "seed": 0, "hp": {"batch_size": 256}}
    plan = plan_trial(load_sweep(path), point)
    assert "timesteps" not in plan.first and "rl.total_timesteps=10240" in plan.first["set"]
    # the first stage is a shorter run, with the imitation phase --timesteps 30000 gives
    first = resolve(RunOptions.model_validate(plan.first))
    assert first.total_timesteps == plan.targets[0] < plan.config.total_timesteps
    assert first.recipe.imitation == plan.config.recipe.imitation


@pytest.mark.slow
def test_the_example_sweeps_are_valid() -> None:
    for path in sorted((ROOT / "examples" / "sweeps").glob("*.yml")):
        validate_trials(load_sweep(path))


def test_sweep_file_defaults_and_paths(tmp_path: Path) -> None:
    (tmp_path / "mine.yml").write_text("name: mine\n")  # a recipe file beside the sweep file
    path = tmp_path / "defaults.yml"
    path.write_text("budget: {timesteps: 100}\nsearch:\nhyperparams:\n")
    spec = load_sweep(path)
    assert (spec.name, spec.recipe, spec.scenario, spec.seeds) == ("defaults", "ppo", "mixed", 0)
    assert (spec.reports, spec.metric, spec.mode, spec.n_trials()) == (1, "geomean_perf", "max", 1)
    assert spec.objective.seed == 50_000 and spec.objective.split == "val"
    path.write_text(
        "recipe: [mine.yml, ppo]\nscheduler: median\nbudget: {timesteps: 100}\n"
        "objective: {metric: mean_latency_ns}\n"
    )
    spec = load_sweep(path)
    assert spec.recipe.args == (str(tmp_path / "mine.yml"), "ppo")
    assert (spec.reports, spec.mode, spec.scheduled) == (4, "min", "median")


# --------------------------------------------------------------------------- errors


def test_unknown_keys_are_one_line(
    short_scenario: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_sweep(tmp_path, short_scenario, seed=[0])
    line = error_line([str(path)], capsys)
    assert "tiny.yml': seed: unknown key 'seed'; expected one of" in line and "'seeds'" in line
    path = write_sweep(tmp_path, short_scenario, budget={"timestep": 256})
    line = error_line([str(path)], capsys)
    assert "budget.timestep: unknown key 'timestep'" in line and "'timesteps'" in line
    path = write_sweep(tmp_path, short_scenario, scheduler={"name": "asha", "grace": 1})
    line = error_line([str(path)], capsys)
    assert "scheduler.grace: asha takes no 'grace'" in line and "'grace_period'" in line
    path = write_sweep(tmp_path, short_scenario, train={"hyperparams": "base.yml"})
    assert "train.hyperparams: unknown key 'hyperparams'" in error_line([str(path)], capsys)
    path = write_sweep(tmp_path, short_scenario, hyperparams={"learning_rat": 1e-3})
    line = error_line([str(path)], capsys)  # the recipe's own check (--set), before Ray
    assert "--set learning_rat=0.001: unknown key 'learning_rat'" in line


@pytest.mark.parametrize(
    "extra, message",
    [
        ({"seeds": []}, "seeds: empty search space"),
        ({"hyperparams": {"n_epochs": {"choice": []}}}, "hyperparams.n_epochs: empty search space"),
        (
            {"hyperparams": {"gamma": {"uniform": [0.99, 0.9]}}},
            "hyperparams.gamma: empty search space",
        ),
        ({"hyperparams": {"n_epochs": {"randint": [3, 3]}}}, "empty search space"),
        ({"search": {"num_samples": 0}}, "search.num_samples: empty search space"),
    ],
)
def test_an_empty_search_space_is_one_line(
    extra: dict[str, Any],
    message: str,
    short_scenario: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = write_sweep(tmp_path, short_scenario, **extra)
    assert message in error_line([str(path)], capsys)


def test_other_bad_sweeps_are_one_line(
    short_scenario: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_sweep(
        tmp_path, short_scenario, scheduler="asha", budget={"timesteps": 256, "reports": 1}
    )
    assert "budget.reports: scheduler 'asha'" in (line := error_line([str(path)], capsys))
    assert "expected at least 2 (got 1)" in line
    path = write_sweep(tmp_path, short_scenario, scheduler="pbt")
    line = error_line([str(path)], capsys)
    assert "scheduler.name: expected 'fifo', 'asha', 'hyperband' or 'median' (got pbt)" in line
    path = write_sweep(tmp_path, short_scenario, objective={"metric": "speed"})
    line = error_line([str(path)], capsys)
    assert "objective.metric: expected 'reward', 'geomean_perf'" in line and "(got speed)" in line
    path = write_sweep(tmp_path, short_scenario, search={"num_samples": "many"})
    assert "search.num_samples: expected an integer (got many)" in error_line([str(path)], capsys)
    path = write_sweep(tmp_path, short_scenario, scenario="no-such-scenario")
    assert "no-such-scenario" in error_line([str(path)], capsys)
    path = write_sweep(tmp_path, short_scenario, recipe="no-such-recipe")
    assert "unknown recipe 'no-such-recipe'" in error_line([str(path)], capsys)
    path = write_sweep(tmp_path, short_scenario, search={"algorithm": "optuna"})
    assert "cannot take grids" in error_line([str(path)], capsys)
    path = write_sweep(tmp_path, short_scenario, recipe="imitation", scenario="mixed",
                       train={}, hyperparams={})  # fmt: skip
    line = error_line([str(path)], capsys)
    assert "budget.reports: recipe 'imitation' has no RL phase to report between" in line
    assert "does not exist" in error_line([str(tmp_path / "missing.yml")], capsys)


def test_a_missing_search_library_is_one_line(
    short_scenario: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        import optuna  # noqa: F401

        pytest.skip("optuna is installed here")
    except ImportError:
        pass
    path = write_sweep(tmp_path, short_scenario, seeds=0, search={"algorithm": "optuna"})
    line = error_line([str(path)], capsys)
    assert "search.algorithm: 'optuna' cannot be set up" in line and "pip install optuna" in line


def test_a_folder_of_another_sweep_is_refused(
    short_scenario: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "sweep.yml").write_text("name: other\nbudget: {timesteps: 10}\n")
    path = write_sweep(tmp_path, short_scenario)
    assert "holds a different sweep" in error_line([str(path), "--output", str(out)], capsys)


@pytest.mark.slow
def test_unreachable_ray_address_is_one_line_before_any_trial(
    short_scenario: Path, tmp_path: Path
) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    path = write_sweep(tmp_path, short_scenario)
    out = tmp_path / "out"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "sweep.py"),
            str(path),
            "--output",
            str(out),
            "--ray-address",
            f"127.0.0.1:{port}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: cannot reach the Ray cluster at")
    assert not (out / "trials").exists()


@pytest.mark.slow  # Ray started in-process (about 5 s)
def test_a_cluster_without_the_package_is_one_line_before_any_trial(
    local_ray: None, short_scenario: Path, tmp_path: Path
) -> None:
    path = write_sweep(tmp_path, short_scenario)
    with pytest.raises(ValueError, match=r"lacks \['tiergym_missing'\]") as info:
        run_sweep(path, output=tmp_path / "out", modules=("agents", "tiergym_missing"))
    assert "\n" not in str(info.value)
    assert not (tmp_path / "out" / "trials").exists()


def test_search_space_and_scheduler_follow_the_file(short_scenario: Path, tmp_path: Path) -> None:
    from ray import tune
    from ray.tune.schedulers import AsyncHyperBandScheduler

    path = write_sweep(
        tmp_path,
        short_scenario,
        recipe=["ppo", "a2c"],
        hyperparams={
            "n_epochs": {"grid": [1, 2]},
            "gamma": {"uniform": [0.9, 0.99]},
            "ent_coef": 0.01,
            "env.base_policy": {"choice": ["colloid", "tpp"]},
        },
        search={"num_samples": 3},
        scheduler={"name": "asha", "grace_period": 1, "reduction_factor": 3},
    )
    spec = load_sweep(path)
    assert spec.n_trials() == 2 * 2 * 2 * 3  # recipe x seeds x n_epochs grids x samples
    assert spec.reports == 2
    assert spec.varying() == ["recipe", "seed", "n_epochs", "gamma", "env.base_policy"]
    space = param_space(spec)
    assert space["recipe"] == {"grid_search": ["ppo", "a2c"]}
    assert space["hp"]["ent_coef"] == 0.01
    assert isinstance(space["hp"]["gamma"], tune.search.sample.Float)
    assert isinstance(space["hp"]["env.base_policy"], tune.search.sample.Categorical)
    sched = make_scheduler(spec)
    assert isinstance(sched, AsyncHyperBandScheduler)
    assert sched._max_t == 2 and sched._reduction_factor == 3
    with pytest.raises(SweepError, match=r"hyperparams: expected"):
        load_sweep(write_sweep(tmp_path, short_scenario, hyperparams=[1]))


def test_the_command_line_is_the_options_schema(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """sweep.py's parser is derived from agents.config.SweepOptions: its bounds, its help."""
    from agents.config import SweepOptions

    assert error_line([str(tmp_path / "s.yml"), "--workers", "0"], capsys) == (
        "error: --workers 0: expected a value >= 1 (got 0)"
    )
    assert sweep.main([]) == 2  # the sweep file is required (argparse's one line)
    assert "required: SWEEP" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        sweep.parse_args(["--help"])
    text = capsys.readouterr().out
    for name, field in SweepOptions.model_fields.items():
        if name != "sweep":
            assert "--" + name.replace("_", "-") in text
        assert (field.description or "")[:20] in " ".join(text.split())
