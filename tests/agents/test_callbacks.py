"""The stable-baselines3 callbacks (agents/callbacks.py) inside a tiny real PPO run: the
values they log (the evaluation's read back from its event files: a run per reference),
when they save, how they stop."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.logger import KVWriter, Logger
from stable_baselines3.common.vec_env import VecEnvWrapper
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.backend.event_processing.event_multiplexer import EventMultiplexer

from agents import tensorboard as tb
from agents.callbacks import (
    CheckpointAtRollout,
    EnvMetricsCallback,
    EvalAgainstReferences,
    StopOnSignal,
)
from envs.sb3 import make_vec_env
from envs.scenario import load_scenario

N_ENVS, N_STEPS = 4, 4
ROLLOUT = N_ENVS * N_STEPS


class Capture(KVWriter):
    """Keeps every dump: (step, {key: value})."""

    def __init__(self) -> None:
        self.dumps: list[tuple[int, dict[str, Any]]] = []

    def write(
        self, key_values: dict[str, Any], key_excluded: dict[str, Any], step: int = 0
    ) -> None:
        self.dumps.append((step, dict(key_values)))

    def close(self) -> None:
        pass


class Recorder(VecEnvWrapper):
    """Copies what the adapter returns at every step (independent of any callback)."""

    def __init__(self, venv: Any) -> None:
        super().__init__(venv)
        self.steps: list[dict[str, np.ndarray]] = []

    def reset(self) -> Any:
        return self.venv.reset()

    def step_wait(self) -> Any:
        obs, reward, done, infos = self.venv.step_wait()
        m = infos[0]["metrics"]
        assert all(info["metrics"] is m for info in infos)
        self.steps.append({k: np.array(v, copy=True) for k, v in m.items()})
        return obs, reward, done, infos


def tiny_ppo(**env_kw: Any) -> tuple[PPO, Recorder, Capture]:
    venv = Recorder(
        make_vec_env(N_ENVS, scenario=load_scenario("kv-store", episode_steps=5), **env_kw)
    )
    venv.seed(0)
    model = PPO(
        "MlpPolicy", venv, n_steps=N_STEPS, batch_size=ROLLOUT, n_epochs=1, seed=0, device="cpu"
    )
    cap = Capture()
    model.set_logger(Logger(folder=None, output_formats=[cap]))
    return model, venv, cap


def test_env_metrics_callback_logs_rollout_means_of_the_adapter_metrics() -> None:
    model, venv, cap = tiny_ppo()
    params = venv.get_attr("params")[0]
    cb = EnvMetricsCallback(params.node_names)
    model.learn(3 * ROLLOUT, callback=cb)
    assert len(venv.steps) == 3 * N_STEPS
    assert len(cap.dumps) == 3  # one dump per rollout (log_interval=1)
    ends = 0
    for r, (step, logged) in enumerate(cap.dumps):
        assert step == (r + 1) * ROLLOUT
        steps = venv.steps[r * N_STEPS : (r + 1) * N_STEPS]  # this rollout's steps

        def mean(key: str, col: int | None = None, steps: list[Any] = steps) -> float:
            v = np.stack([s[key] if col is None else s[key][:, col] for s in steps])
            return float(v.mean())

        assert logged["env/system/throughput_GBps"] == pytest.approx(
            mean("total_throughput_gbps"), rel=1e-12
        )
        assert logged["env/migration/promotion_MBps"] == pytest.approx(
            mean("promotion_mbps"), rel=1e-12, abs=1e-12
        )
        assert logged["env/migration/demotion_MBps"] == pytest.approx(
            mean("demotion_mbps"), rel=1e-12, abs=1e-12
        )
        for k in (
            "reward_log_geomean",
            "reward_throughput",
            "reward_weighted_speedup",
            "reward_harmonic",
        ):
            tag = f"env/reward/{k.removeprefix('reward_')}"
            assert logged[tag] == pytest.approx(mean(k), rel=1e-12, abs=1e-15), k
        for j, n in enumerate(params.node_names):
            assert logged[f"env/node/{n}/bandwidth_GBps"] == pytest.approx(
                mean("node_bandwidth_gbps", j), rel=1e-12
            )
            assert logged[f"env/node/{n}/utilization_frac"] == pytest.approx(
                mean("node_utilization", j), rel=1e-12
            )
            assert logged[f"env/node/{n}/latency_ns"] == pytest.approx(
                mean("node_latency_ns", j), rel=1e-12
            )
        # tenants: means over active tenants only
        act = np.stack([s["tenant_active"] for s in steps])
        perf = np.stack([s["tenant_norm_perf"] for s in steps])
        share = np.stack([s["tenant_dram_access_share"] for s in steps])
        assert logged["env/tenants/norm_perf_vs_alone"] == pytest.approx(
            perf[act].mean(), rel=1e-12
        )
        assert logged["env/tenant_slot0/norm_perf_vs_alone"] == pytest.approx(
            perf[..., 0][act[..., 0]].mean(), rel=1e-12
        )
        assert logged["env/tenant_slot0/dram_access_frac"] == pytest.approx(
            share[..., 0][act[..., 0]].mean(), rel=1e-12
        )
        assert logged["time/env_sps"] > 0
        ends += sum(int((s["episode_step"] == 5).sum()) for s in steps)
    assert ends == 2 * N_ENVS  # two episode ends inside the rollouts, their steps counted
    # the logged throughput is not the last step's: a mean really was taken
    last = venv.steps[-1]["total_throughput_gbps"].mean()
    assert cap.dumps[-1][1]["env/system/throughput_GBps"] != pytest.approx(last, rel=1e-9)
    # the sums were cleared after each rollout: rollouts differ
    assert (
        cap.dumps[0][1]["env/system/throughput_GBps"]
        != cap.dumps[1][1]["env/system/throughput_GBps"]
    )


def test_env_metrics_callback_skips_tenants_never_active() -> None:
    """A tenant slot that is never active in a rollout logs nothing (no 0 dragging means)."""
    sc = load_scenario("colocation", episode_steps=5)  # the service starts at 20 s
    venv = make_vec_env(N_ENVS, scenario=sc)
    venv.seed(0)
    model = PPO(
        "MlpPolicy", venv, n_steps=N_STEPS, batch_size=ROLLOUT, n_epochs=1, seed=0, device="cpu"
    )
    cap = Capture()
    model.set_logger(Logger(folder=None, output_formats=[cap]))
    model.learn(ROLLOUT, callback=EnvMetricsCallback(["dram0", "cxl0"]))
    logged = cap.dumps[0][1]
    assert (
        "env/tenant_slot0/norm_perf_vs_alone" in logged
        and "env/tenant_slot1/norm_perf_vs_alone" not in logged
    )
    assert logged["env/tenants/norm_perf_vs_alone"] == logged["env/tenant_slot0/norm_perf_vs_alone"]


def test_checkpoint_at_rollout_saves_at_rollout_boundaries() -> None:
    saved: list[tuple[Any, int]] = []

    def save(model: Any, steps: int) -> Path:
        saved.append((model, steps))
        return Path(f"step_{steps}")

    model, _, _ = tiny_ppo()
    model.learn(5 * ROLLOUT, callback=CheckpointAtRollout(save, interval=24))
    # rollouts start at 0, 16, 32, 48, 64: saved at the first start at or past 24, then at
    # the first at or past the next multiple (48); everything before was trained on
    assert [s for _, s in saved] == [32, 48]
    assert all(m is model for m, _ in saved)
    saved.clear()
    model2, _, _ = tiny_ppo()
    model2.learn(3 * ROLLOUT, callback=CheckpointAtRollout(save, 0))  # 0: never
    assert saved == []


def read_run(folder: Path) -> EventAccumulator:
    """The events of one TensorBoard run: the event files directly in ``folder``."""
    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    acc.Reload()
    return acc


def test_eval_against_references_writes_each_reference_as_a_run_of_its_own(
    tmp_path: Path,
) -> None:
    """The learned policy's evaluation is the run's own (its TensorBoard folder); each
    reference's goes under the same tag into a sub-folder named after it, a run of its own,
    which TensorBoard colours and names apart on a chart of the tag."""
    model, _, cap = tiny_ppo()
    folder = tmp_path / "tensorboard"
    logger = tb.make_logger(str(folder), stdout=False)
    logger.output_formats.append(cap)  # what the console would show
    model.set_logger(logger)
    calls: list[int] = []

    def evaluate(m: Any) -> float:
        calls.append(m.num_timesteps)
        return 0.5 + len(calls)

    refs: dict[str, Any] = {"dram-first": 0.25, "tpp": [0.5, 1.0], "a/b": 0.125}  # or per episode
    cb = EvalAgainstReferences(evaluate, refs, interval=2 * ROLLOUT, name="ppo")
    model.learn(4 * ROLLOUT, callback=cb)
    logger.close()
    assert calls == [0, 2 * ROLLOUT, 4 * ROLLOUT]  # at the start, then on the grid
    assert cb.history == [(0, 1.5), (2 * ROLLOUT, 2.5), (4 * ROLLOUT, 3.5)]
    grid = [s for s, _ in cb.history]
    # the learned policy in the main folder, and no reference there
    main = read_run(folder)
    assert [(e.step, e.value) for e in main.Scalars(tb.EVAL)] == cb.history
    assert [t for t in main.Tags()["scalars"] if t.startswith("eval/")] == [tb.EVAL]
    assert main.SummaryMetadata(tb.EVAL).summary_description == tb.describe(tb.EVAL)
    # one folder per reference (a name that is not one folder name is made one), its mean
    runs = sorted(p.name for p in folder.iterdir() if p.is_dir())
    assert runs == sorted(tb.reference_run(r) for r in refs) == ["a_b", "dram-first", "tpp"]
    for name, want in (("dram-first", 0.25), ("tpp", 0.75), ("a/b", 0.125)):
        acc = read_run(folder / tb.reference_run(name))
        assert acc.Tags()["scalars"] == [tb.EVAL]  # the shared tag, nothing else
        assert [(e.step, e.value) for e in acc.Scalars(tb.EVAL)] == [(s, want) for s in grid]
        assert acc.SummaryMetadata(tb.EVAL).summary_description == tb.describe(tb.EVAL)
    # the references' runs start best first (TensorBoard colours runs in start order from
    # a palette of seven: the six best references then have colours of their own)
    starts = {n: read_run(folder / n).FirstEventTimestamp() for n in ("tpp", "dram-first", "a_b")}
    assert main.FirstEventTimestamp() < starts["tpp"] < starts["dram-first"] < starts["a_b"]
    # TensorBoard's view of the folder: a run per reference beside the learned policy's
    mux = EventMultiplexer().AddRunsFromDirectory(str(folder))
    mux.Reload()
    assert {r for r, t in mux.Runs().items() if tb.EVAL in t["scalars"]} == {
        ".",
        "a_b",
        "dram-first",
        "tpp",
    }
    # the console shows the learned policy's value (the references are not in its table)
    evals = [(s, d) for s, d in cap.dumps if tb.EVAL in d]
    assert [(s, d[tb.EVAL]) for s, d in evals] == cb.history
    assert not any(k.startswith("eval/") and k != tb.EVAL for _, d in evals for k in d)


def test_eval_against_references_without_a_tensorboard_output_writes_no_reference() -> None:
    model, _, cap = tiny_ppo()
    cb = EvalAgainstReferences(lambda m: 1.0, {"dram-first": 0.25}, 2 * ROLLOUT, "ppo")
    model.learn(2 * ROLLOUT, callback=cb)
    assert [d[tb.EVAL] for _, d in cap.dumps if tb.EVAL in d] == [1.0, 1.0]


def test_eval_ratio_to_the_start_is_the_learning_curve_and_survives_a_resume(
    tmp_path: Path,
) -> None:
    model, _, cap = tiny_ppo()
    calls: list[int] = []

    def evaluate(m: Any) -> np.ndarray:  # per-episode values that rise 10% per evaluation
        calls.append(m.num_timesteps)
        return np.array([1.0, 2.0, 4.0]) * 1.1 ** (len(calls) - 1)

    start = tmp_path / "eval_start.json"
    refs = {"dram-first": [0.5, 1.0, 2.0]}
    cb = EvalAgainstReferences(evaluate, refs, 2 * ROLLOUT, "ppo", start_file=start)
    model.learn(2 * ROLLOUT, callback=cb)
    ratios = [d["eval_ratio/ppo_vs_start"] for _, d in cap.dumps if tb.EVAL in d]
    assert ratios == pytest.approx([1.0, 1.1])
    assert start.is_file()
    # a resumed run reads step 0's values back (it does not evaluate step 0 again)
    resumed = EvalAgainstReferences(evaluate, refs, 2 * ROLLOUT, "ppo", start_file=start)
    model.learn(2 * ROLLOUT, callback=resumed, reset_num_timesteps=False)
    last = [d for _, d in cap.dumps if tb.EVAL in d][-1]
    assert len(calls) == 3 and last["eval_ratio/ppo_vs_start"] == pytest.approx(1.1**2)
    assert last["eval_ratio/ppo_vs_dram-first"] == pytest.approx(2 * 1.1**2)


def test_stop_on_signal_stops_at_the_next_step_and_restores_handlers() -> None:
    model, _, _ = tiny_ppo()
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    stopper = StopOnSignal(on_policy=True)
    seen: list[Any] = []

    class Probe(BaseCallback):
        def _on_step(self) -> bool:
            seen.append(signal.getsignal(signal.SIGTERM))
            if self.num_timesteps == ROLLOUT + 2 * N_ENVS:  # mid-way through rollout 2
                stopper._handler(signal.SIGTERM, None)  # what the installed handler does
            return True

    model.learn(10 * ROLLOUT, callback=[Probe(), stopper])
    assert stopper.stopped
    assert seen[0] == stopper._handler  # installed while training
    assert model.num_timesteps == ROLLOUT + 2 * N_ENVS  # stopped at that very step
    assert stopper.resume_timesteps == ROLLOUT  # the unfinished rollout is dropped
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before
    off = StopOnSignal(on_policy=False)
    off.stopped, off.num_timesteps = True, 40  # off-policy: every step counts
    assert off.resume_timesteps == 40
