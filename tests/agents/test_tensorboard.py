"""What a training run shows in TensorBoard, read back from its event files.

A tiny real run (train.main) is read with TensorBoard's EventAccumulator: the
Custom Scalars layout (the evaluation tag on one chart, the learned policy's in the
run's folder and each reference's in a sub-folder of its own, so each is a run with
its own colour; the ratio chart, a chart per quantity with every node or slot), tag
names with units and their
descriptions, the evaluation at step 0 and on its grid, the ratio lines, the
hparams types and the text cards. Then resuming: the schedules continue on
their grid, and after a kill -9 the curves continue without duplicated or
backwards steps.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from stable_baselines3 import PPO
from stable_baselines3.common.logger import KVWriter, Logger
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.backend.event_processing.event_multiplexer import EventMultiplexer
from tensorboard.plugins.custom_scalar import layout_pb2
from tensorboard.plugins.hparams import plugin_data_pb2

import train
from agents import tensorboard as tb
from agents.callbacks import (
    CheckpointAtRollout,
    EvalAgainstReferences,
    HeldOutEvaluation,
    LogUpdateAtItsStep,
)
from agents.config import RunOptions
from agents.stats import ratio_to_reference
from envs import load_scenario
from envs.sb3 import make_vec_env

ROOT = Path(__file__).resolve().parents[2]
ROLLOUT = 8 * 16  # --num-envs 8, n_steps 16
EVAL_EPISODES = 4
#: a run's references by default: every deployable heuristic
REFERENCES = tuple(RunOptions().reference_names())  # train.py's default references


def tiny_args(scenario: Path, run_dir: Path, *extra: str) -> list[str]:
    return [
        "--recipe", "ppo", "--scenario", str(scenario), "--num-envs", "8", "--set", "n_steps=16", "--set", "batch_size=64",
        "--set", "n_epochs=1", "--eval-episodes", str(EVAL_EPISODES), "--compare-episodes", "0",
        "--run-dir", str(run_dir), "--no-progress", "--quiet", *extra,
    ]  # fmt: skip


def load(run_dir: Path, sub: str = "") -> EventAccumulator:
    """Every event file of the run's TensorBoard folder (or of its sub-folder ``sub``, a
    reference's run), in order: what TensorBoard shows of that run, purges applied."""
    folder = run_dir / "tensorboard" / sub
    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    return acc


def runs_with(run_dir: Path, tag: str) -> set[str]:
    """The TensorBoard runs (folders under the run's TensorBoard folder; ``.`` itself) that
    hold the scalar ``tag``: each is one colour and one name on a chart."""
    mux = EventMultiplexer(size_guidance={"scalars": 0}).AddRunsFromDirectory(
        str(run_dir / "tensorboard")
    )
    mux.Reload()
    return {run for run, tags in mux.Runs().items() if tag in tags.get("scalars", [])}


def steps(acc: EventAccumulator, tag: str) -> list[int]:
    return [e.step for e in acc.Scalars(tag)]


def text(acc: EventAccumulator, tag: str) -> str:
    return str(acc.Tensors(f"{tag}/text_summary")[0].tensor_proto.string_val[0].decode())


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory, short_scenario: Path) -> Path:
    run_dir = tmp_path_factory.mktemp("tb") / "run"
    extra = ["--timesteps", str(4 * ROLLOUT), "--eval-interval", str(ROLLOUT)]
    extra += ["--checkpoint-interval", str(2 * ROLLOUT)]
    assert train.main(tiny_args(short_scenario, run_dir, *extra)) == 0
    return run_dir


@pytest.fixture(scope="module")
def acc(tiny_run: Path) -> EventAccumulator:
    return load(tiny_run)


def the_layout(acc: EventAccumulator) -> layout_pb2.Layout:
    events = acc.Tensors("custom_scalars__config__")
    assert len(events) == 1  # written once
    return layout_pb2.Layout.FromString(events[0].tensor_proto.string_val[0])


def matched(chart: layout_pb2.Chart, tags: set[str]) -> set[str]:
    """The tags a multi-line chart shows (its entries are regular expressions)."""
    return {t for t in tags if any(re.match(rx, t) for rx in chart.multiline.tag)}


# ---------------------------------------------------------------------------- the tiny run


def test_custom_scalars_overlay_every_policy_as_a_run_and_group_nodes_and_slots(
    acc: EventAccumulator, tiny_run: Path
) -> None:
    scalars = set(acc.Tags()["scalars"])
    lay = the_layout(acc)
    charts = {c.title: c for cat in lay.category for c in cat.chart}
    first = lay.category[0].chart
    assert first[0].title == tb.COMPARISON_CHART and first[1].title == tb.MARGIN_CHART
    # the learned policy's evaluation in the run's own folder, no reference's there
    assert {t for t in scalars if t.startswith("eval/")} == {tb.EVAL}
    assert matched(first[0], scalars) == {tb.EVAL}  # the one tag, nothing else
    # every reference a run (folder) of its own with the same tag: the chart, which matches
    # the tag in every run, draws one line per policy, coloured and named by its run
    assert runs_with(tiny_run, tb.EVAL) == {".", *REFERENCES}
    for ref in REFERENCES:
        ref_tags = set(load(tiny_run, tb.reference_run(ref)).Tags()["scalars"])
        assert ref_tags == {tb.EVAL} and matched(first[0], ref_tags) == {tb.EVAL}
    margin = [(s.value, s.lower, s.upper) for s in first[1].margin.series]
    assert margin == [tb.ratio_tags("ppo", "best_ref"), tb.ratio_tags("ppo", "dram-first")]
    assert {t for s in margin for t in s} <= scalars
    learning = {
        "rollout/ep_rew_mean",
        "train/explained_variance",
        tb.ratio_tags("ppo", "start")[0],
        tb.ratio_tags("ppo", "best_ref")[0],
    }
    assert first[2].title == tb.LEARNING_CHART and matched(first[2], scalars) == learning
    nodes = ["dram0", "cxl0"]
    for q in tb.NODE_QUANTITIES:
        assert matched(charts[f"{q} (every node)"], scalars) == {tb.node_tag(n, q) for n in nodes}
    perf = matched(charts["norm_perf_vs_alone (every tenant slot)"], scalars)
    assert perf == {"env/tenant_slot0/norm_perf_vs_alone", "env/tenants/norm_perf_vs_alone"}
    assert matched(charts["promotion and demotion, MBps"], scalars) == {tb.PROMOTION, tb.DEMOTION}
    assert matched(
        charts["new-page share on dram0 set by the weights (every tenant slot)"], scalars
    )
    assert len(matched(charts["reward terms, mean per step"], scalars)) == 4
    # every chart of the layout shows something this run logged
    for cat in lay.category:
        for c in cat.chart:
            if c.HasField("multiline"):
                assert matched(c, scalars), c.title


def test_tags_say_their_units_and_carry_descriptions(acc: EventAccumulator) -> None:
    scalars = set(acc.Tags()["scalars"])
    assert {
        "env/node/dram0/bandwidth_GBps",
        "env/node/cxl0/bandwidth_GBps",
        "env/node/dram0/latency_ns",
        "env/node/dram0/utilization_frac",
        "env/node/cxl0/capacity_used_GiB",
        "env/node/cxl0/capacity_used_frac",
        "env/tenant_slot0/norm_perf_vs_alone",
        "env/tenant_slot0/dram_access_frac",
        "env/tenant_slot0/latency_ns",
        "env/tenant_slot0/dram_resident_GiB",
        "env/tenants/norm_perf_vs_alone",
        "env/migration/promotion_MBps",
        "env/migration/demotion_MBps",
        "env/action/promote_limit_MBps",
        "env/action/tenant_slot0/page_frac_dram0",
        "env/action/tenant_slot0/page_frac_cxl0",
        "env/action/tenant_slot0/local_first_frac",
        "env/system/throughput_GBps",
        "env/solver/residual_mean",
        "env/solver/residual_max",
        "env/reward/log_geomean (trained)",  # the term trained on, marked
        "env/reward/throughput",
        "env/reward/weighted_speedup",
        "env/reward/harmonic",
        "time/env_sps",
        "time/eval_s",
    } <= scalars
    assert not [t for t in scalars if re.search(r"gbps|mbps", t)]  # no unit that reads as bits
    assert len([t for t in scalars if t.startswith("env/reward/")]) == 4
    for tag in scalars:
        if tag.split("/")[0] in ("env", "eval", "eval_ratio", "time", "train", "rollout"):
            assert acc.SummaryMetadata(tag).summary_description, f"{tag} has no description"
    assert (
        "trained on" in acc.SummaryMetadata("env/reward/log_geomean (trained)").summary_description
    )
    # a share is a share, the action a fraction of new pages
    page = [e.value for e in acc.Scalars("env/action/tenant_slot0/page_frac_dram0")]
    other = [e.value for e in acc.Scalars("env/action/tenant_slot0/page_frac_cxl0")]
    assert np.allclose(np.add(page, other), 1.0, atol=1e-6)
    for t in ("env/node/dram0/utilization_frac", "env/tenant_slot0/dram_access_frac"):
        assert all(0.0 <= e.value <= 1.0 for e in acc.Scalars(t))


def test_evaluation_at_step_zero_and_on_its_grid_with_the_ratio_lines(
    acc: EventAccumulator, tiny_run: Path
) -> None:
    grid = [0, ROLLOUT, 2 * ROLLOUT, 3 * ROLLOUT, 4 * ROLLOUT]
    for tag in [tb.EVAL, "time/eval_s"]:
        assert steps(acc, tag) == grid, tag
    ref_runs = {ref: load(tiny_run, tb.reference_run(ref)) for ref in REFERENCES}
    for ref, ref_acc in ref_runs.items():  # on the same grid, scored once: flat lines
        assert steps(ref_acc, tb.EVAL) == grid, ref
        assert len({e.value for e in ref_acc.Scalars(tb.EVAL)}) == 1
        assert ref_acc.SummaryMetadata(tb.EVAL).summary_description == tb.describe(tb.EVAL)
    for versus in ("best_ref", "dram-first"):
        value, low, high = (acc.Scalars(t) for t in tb.ratio_tags("ppo", versus))
        assert [e.step for e in value] == [e.step for e in low] == [e.step for e in high] == grid
        for v, lo, hi in zip(value, low, high, strict=True):
            assert lo.value <= v.value <= hi.value
    # the last point is the final model against the references on the same seeds, paired
    from agents.runs import load_trained

    model, env, _ = load_trained(tiny_run)
    cfg = yaml.safe_load((tiny_run / "config.yml").read_text())
    held = HeldOutEvaluation(env["scenario"], env, "ppo", EVAL_EPISODES, 10_000 + cfg["seed"])
    values = held(model)
    refs = held.references(REFERENCES)
    assert acc.Scalars(tb.EVAL)[-1].value == pytest.approx(values.mean(), rel=1e-6)
    for name, v in refs.items():  # each reference's run holds its own scored mean
        got = [e.value for e in ref_runs[name].Scalars(tb.EVAL)]
        assert got == pytest.approx([v.mean()] * len(grid), rel=1e-6), name
    best = max(refs, key=lambda k: refs[k].mean())
    for versus, ref in (("best_ref", best), ("dram-first", "dram-first")):
        r = ratio_to_reference(values, refs[ref], seed=0)
        got = [acc.Scalars(t)[-1].value for t in tb.ratio_tags("ppo", versus)]
        assert got == pytest.approx([r["mean"], *r["ci"]], rel=1e-6)
    assert f"best reference ({best})" in text(acc, "guide")


def test_train_points_sit_at_the_step_they_trained_on(acc: EventAccumulator) -> None:
    # one per update, the last one included; env/ once per rollout
    assert steps(acc, "train/loss") == [ROLLOUT * k for k in range(1, 5)]
    assert steps(acc, "env/system/throughput_GBps") == [ROLLOUT * k for k in range(1, 5)]


def test_hparams_keep_their_types_and_the_text_cards_are_complete(
    acc: EventAccumulator, tiny_run: Path
) -> None:
    start = None
    for content in acc.PluginTagToContent("hparams").values():
        data = plugin_data_pb2.HParamsPluginData.FromString(content)
        if data.HasField("session_start_info"):
            start = data.session_start_info.hparams
    assert start is not None
    kinds = {k: v.WhichOneof("kind") for k, v in start.items()}
    assert kinds["normalize_reward"] == "bool_value" and start["normalize_reward"].bool_value
    for k in ("n_envs", "seed", "learning_rate", "n_steps", "eval_interval", "eval_episodes"):
        assert kinds[k] == "number_value", k
    assert start["n_steps"].number_value == 16 and start["eval_episodes"].number_value == 4
    assert kinds["env.max_tenants"] == "number_value"
    assert kinds["algo"] == kinds["env.reward"] == "string_value"
    metrics = set()
    for content in acc.PluginTagToContent("hparams").values():
        data = plugin_data_pb2.HParamsPluginData.FromString(content)
        if data.HasField("experiment"):
            metrics = {m.name.tag for m in data.experiment.metric_infos}
    assert tb.EVAL in metrics and tb.ratio_tags("ppo", "best_ref")[0] in metrics
    assert tb.EVAL in acc.Tags()["scalars"]  # the metric has values in the session's run
    table = text(acc, "hyperparameters")
    for needle in (
        "| eval_interval | 128 |",
        f"seeds 10000..{10000 + EVAL_EPISODES - 1}",
        "| references | dram-first,interleave",
        "| command | `python train.py",
        "--timesteps 512",
        "| normalize_reward | True |",
    ):
        assert needle in table, needle
    guide = text(acc, "guide")
    for needle in (
        "GBps",
        "MBps",
        "GiB",
        "norm_perf_vs_alone",
        "tenant_slot",
        "seeds 10000..",
        "(trained)",
    ):
        assert needle in guide, needle
    assert len(acc.Tensors("guide/text_summary")) == 1


# ---------------------------------------------------------------------------- resume


class Capture(KVWriter):
    def __init__(self) -> None:
        self.dumps: list[tuple[int, dict[str, Any]]] = []

    def write(
        self, key_values: dict[str, Any], key_excluded: dict[str, Any], step: int = 0
    ) -> None:
        self.dumps.append((step, dict(key_values)))

    def close(self) -> None:
        pass


def tiny_ppo() -> tuple[PPO, Capture]:
    venv = make_vec_env(4, scenario=load_scenario("kv-store", episode_steps=5))
    venv.seed(0)
    model = PPO("MlpPolicy", venv, n_steps=4, batch_size=16, n_epochs=1, seed=0, device="cpu")
    cap = Capture()
    model.set_logger(Logger(folder=None, output_formats=[cap]))
    return model, cap


def test_resumed_schedules_continue_on_their_grid_and_log_the_first_update() -> None:
    """A run resumed at step 64 evaluates and saves at 96 and 128: not at 32 and 64 again."""
    model, cap = tiny_ppo()
    model.num_timesteps = 64  # as a checkpoint at step 64 restores it (rollouts of 16)
    evals: list[int] = []
    saved: list[int] = []

    def evaluate(m: Any) -> np.ndarray:
        evals.append(m.num_timesteps)
        return np.array([1.0, 1.2, 0.9, 1.1])

    def save(m: Any, step: int) -> Path:
        saved.append(step)
        return Path("x")

    refs = {"dram-first": [1.0, 1.0, 1.0, 1.0], "tpp": [1.1, 1.0, 1.0, 1.2]}
    cbs = [
        LogUpdateAtItsStep(),
        EvalAgainstReferences(evaluate, refs, interval=32, name="ppo"),
        CheckpointAtRollout(save, interval=32),
    ]
    model.learn(5 * 16, callback=cbs, reset_num_timesteps=False)  # 64 -> 144
    assert evals == [96, 128] and saved == [96, 128]
    train_steps = [s for s, d in cap.dumps if "train/loss" in d]
    assert train_steps == [80, 96, 112, 128, 144]  # the first rollout after the resume has one
    ratio = next(d for s, d in cap.dumps if s == 96 and tb.EVAL in d)
    r = ratio_to_reference([1.0, 1.2, 0.9, 1.1], refs["tpp"], seed=0)  # tpp: the best reference
    assert ratio["eval_ratio/ppo_vs_best_ref"] == pytest.approx(r["mean"])
    assert ratio["eval_ratio/ppo_vs_best_ref_low"] == pytest.approx(r["ci"][0])
    assert ratio["eval_ratio/ppo_vs_dram-first"] == pytest.approx(1.05)
    # a new run evaluates at step 0 too, then on the grid
    model2, _ = tiny_ppo()
    evals.clear()
    model2.learn(4 * 16, callback=EvalAgainstReferences(evaluate, refs, 32, "ppo"))
    assert evals == [0, 32, 64]


def test_purge_step_drops_what_a_killed_writer_logged_past_the_checkpoint(tmp_path: Path) -> None:
    """The main folder and a sub-folder run (write_run: a reference's) alike."""
    folder = str(tmp_path / "tensorboard")
    first = tb.DescribedTensorBoardFormat(folder)
    for s in range(0, 100, 10):  # killed at 90, last checkpoint at 50
        first.write({"env/x": float(s)}, {"env/x": None}, s)
        first.write_run("ref", {"eval/y": float(s)}, s)
    first.write({"env/x": -1.0}, {"env/x": None}, 90)  # a second dump at one step: dropped
    first.write_run("ref", {"eval/y": -1.0}, 90)
    time.sleep(1.1)  # event files are named by the second they open
    second = tb.DescribedTensorBoardFormat(folder, purge_step=51)
    for s in range(60, 130, 10):
        second.write({"env/x": float(s) + 0.5}, {"env/x": None}, s)
        second.write_run("ref", {"eval/y": float(s) + 0.5}, s)
    second.close()
    want = [(s, float(s)) for s in range(0, 60, 10)] + [
        (s, float(s) + 0.5) for s in range(60, 130, 10)
    ]
    for run, tag in ((folder, "env/x"), (f"{folder}/ref", "eval/y")):
        acc = EventAccumulator(run, size_guidance={"scalars": 0})
        acc.Reload()
        assert [(e.step, e.value) for e in acc.Scalars(tag)] == want, run
    for bad in ("", "..", "a/b", "."):
        with pytest.raises(ValueError, match="expected one folder name"):
            second.write_run(bad, {"eval/y": 1.0}, 200)


def run_train(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "train.py"), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )


def max_logged_step(run_dir: Path) -> int:
    acc = load(run_dir)
    return max((e.step for t in acc.Tags()["scalars"] for e in acc.Scalars(t)), default=-1)


@pytest.mark.slow  # 30-60 s: a run killed with SIGKILL past a checkpoint, then resumed
def test_kill_9_and_resume_continue_tensorboard_without_duplicated_or_backwards_steps(
    tmp_path: Path, short_scenario: Path
) -> None:
    run_dir = tmp_path / "run"
    total, every, ck = 24 * ROLLOUT, 4 * ROLLOUT, 8 * ROLLOUT
    extra = ["--timesteps", str(total), "--eval-interval", str(every)]
    extra += ["--checkpoint-interval", str(ck)]
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "train.py"), *tiny_args(short_scenario, run_dir, *extra)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.time() + 300
        while not (run_dir / "checkpoints" / f"step_{ck:012d}").is_dir():
            assert proc.poll() is None, proc.communicate()[1]
            assert time.time() < deadline
            time.sleep(0.05)
        while max_logged_step(run_dir) < ck + 3 * ROLLOUT:  # logged past the checkpoint
            assert proc.poll() is None, proc.communicate()[1]
            assert time.time() < deadline
            time.sleep(0.2)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
    checkpoints = sorted(int(p.name.split("_")[1]) for p in (run_dir / "checkpoints").iterdir())
    assert checkpoints and max_logged_step(run_dir) > checkpoints[-1]  # orphaned events exist
    res = run_train(
        ["--resume", str(run_dir), "--compare-episodes", "0", "--no-progress", "--quiet"]
    )
    assert res.returncode == 0, res.stderr
    assert len(list((run_dir / "tensorboard").glob("events.out.tfevents.*"))) == 2
    acc = load(run_dir)
    for tag in acc.Tags()["scalars"]:
        s = steps(acc, tag)
        assert all(b > a for a, b in itertools.pairwise(s)), f"{tag}: {s}"
    assert steps(acc, tb.EVAL) == list(range(0, total + 1, every))  # the grid, once each
    for ref in REFERENCES:  # the references' runs are purged too: their grid, once each
        ref_acc = load(run_dir, tb.reference_run(ref))
        assert steps(ref_acc, tb.EVAL) == list(range(0, total + 1, every)), ref
        assert len(list((run_dir / "tensorboard" / tb.reference_run(ref)).iterdir())) == 2
    assert steps(acc, "train/loss") == list(range(ROLLOUT, total + 1, ROLLOUT))  # no gap
    assert steps(acc, "env/node/dram0/bandwidth_GBps") == list(range(ROLLOUT, total + 1, ROLLOUT))
    assert len(acc.Tensors("custom_scalars__config__")) == 1  # the layout is not written again
    checkpoints = sorted(int(p.name.split("_")[1]) for p in (run_dir / "checkpoints").iterdir())
    assert checkpoints == [*range(ck, total, ck), total]


# ---------------------------------------------------------------------------- the screenshot


@pytest.mark.slow  # ~20 s: TensorBoard and headless Chromium
@pytest.mark.skipif(
    not (Path("/usr/bin/chromium").is_file() or shutil.which("chromium")),
    reason="needs Chromium (apt-get install -y chromium; .ci/run installs it as root on Debian)",
)
@pytest.mark.slow
def test_screenshot_script_saves_the_custom_scalars_page(tiny_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "shot.png"
    script = [sys.executable, str(ROOT / "scripts" / "tb_screenshot.py"), str(tiny_run)]
    res = subprocess.run(
        [*script, "--output", str(out), "--settle", "2"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    # the IHDR chunk: the page at the script's default window size (1400 x 1350)
    assert data[12:16] == b"IHDR" and struct.unpack(">II", data[16:24]) == (1400, 1350)
