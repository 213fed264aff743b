"""stable-baselines3 callbacks: environment metrics, evaluation against heuristics, checkpoints.

Each callback is small and does one thing; ``train.py`` composes them. Tag
names, units and descriptions live in :mod:`agents.tensorboard`.

Schedules are grids: an evaluation or a checkpoint is due at every multiple of
its interval and happens at the first rollout boundary at or past it (the
policy then has trained on every step before). A resumed run continues on the
same grid from its checkpoint's step: the next multiple, not one per missed
interval. Evaluations also run once at step 0 and at the end of training.
"""

from __future__ import annotations

import json
import signal
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from numpy.typing import ArrayLike, NDArray
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.logger import TensorBoardOutputFormat

from agents import tensorboard as tb
from agents.evaluation import LearnedPolicy, evaluation_env_kwargs, load_policy
from agents.rollout import make_params, rollout, run_episodes
from agents.stats import ratio_to_reference
from envs.families import SELECT_SPLIT

__all__ = [
    "CheckpointAtRollout",
    "EnvMetricsCallback",
    "EvalAgainstReferences",
    "HeldOutEvaluation",
    "LogUpdateAtItsStep",
    "StopOnSignal",
    "TensorBoardRunCard",
]


T = TypeVar("T")


def _next_on_grid(step: int, interval: int) -> int:
    """The first multiple of ``interval`` strictly after ``step``."""
    return (step // interval + 1) * interval


def _output_format(logger: Any, kind: type[T]) -> T | None:
    """The logger's output format of class ``kind`` (None without)."""
    return next((f for f in logger.output_formats if isinstance(f, kind)), None)


#: The per-node metrics (batch, nodes) by quantity (:data:`agents.tensorboard.NODE_QUANTITIES`;
#: ``capacity_used_frac`` is computed).
_NODE_FIELDS = {
    "bandwidth_GBps": "node_bandwidth_gbps",
    "latency_ns": "node_latency_ns",
    "utilization_frac": "node_utilization",
    "capacity_used_GiB": "node_capacity_used_gib",
}
#: The per-tenant-slot metrics (batch, slots) by quantity (:data:`agents.tensorboard.SLOT_QUANTITIES`).
_SLOT_FIELDS = {
    "norm_perf_vs_alone": "tenant_norm_perf",
    "dram_access_frac": "tenant_dram_access_share",
    "latency_ns": "tenant_latency_ns",
    "dram_resident_GiB": "tenant_dram_resident_gib",
}
#: The per-instance metrics (batch,) logged as one mean each, and their tags.
_SCALAR_FIELDS = {
    "promote_rate_mbps": tb.ACTION_PROMOTE,
    "promotion_mbps": tb.PROMOTION,
    "demotion_mbps": tb.DEMOTION,
    "total_throughput_gbps": tb.THROUGHPUT,
    "solver_residual": tb.SOLVER_MEAN,
}


class EnvMetricsCallback(BaseCallback):
    """Aggregates the environment's batched info into the ``env/`` namespace, once per rollout.

    Reads the step's batched :class:`~envs.core.Metrics` (``infos[i]["metrics"]``
    of :class:`~envs.sb3.TierGymVecEnv`, one object for the whole batch) after
    every step and keeps running sums (arrays over nodes and tenant slots), so
    nothing per instance is stored. Logged at the end of each rollout as means
    over its steps and instances (tag names: :mod:`agents.tensorboard`):

    - per node: bandwidth (GB/s), loaded latency (ns), utilisation (0..1),
      capacity used (GiB and fraction);
    - per tenant slot, over the steps the slot is active (a slot never active
      in the rollout logs nothing): normalised performance, DRAM access share,
      latency (ns), DRAM-resident GiB; and the normalised performance of all
      active tenants;
    - the actions in force: per slot and node the share of new pages the
      interleave weights place there (over interleaving steps), per slot the
      fraction of local-first steps, and the promotion rate limit (MB/s);
    - promotion and demotion (MB/s), system throughput (GB/s), every reward
      term (``reward``, the trained one, is marked), the solver's residual
      (mean and max), and ``time/env_sps``: environment steps per second of
      wall time spent inside the environment.
    """

    def __init__(self, node_names: Sequence[str], reward: str | None = None) -> None:
        super().__init__()
        self.node_names = list(node_names)
        #: the batch-wide metrics logged as one mean each, by their tag
        self._scalar_tags = {
            **_SCALAR_FIELDS,
            **{f"reward_{t}": tb.reward_tag(t, reward) for t in tb.REWARD_TERMS},
        }
        self._sums: dict[str, NDArray[np.float64]] = {}
        self._counts: dict[str, NDArray[np.float64]] = {}
        self._residual_max = -np.inf
        self._env_time = 0.0
        self._env_steps = 0

    def _add(self, key: str, total: ArrayLike, count: ArrayLike) -> None:
        t, c = np.asarray(total, dtype=float), np.asarray(count, dtype=float)
        if key in self._sums:
            self._sums[key] = self._sums[key] + t
            self._counts[key] = self._counts[key] + c
        else:
            self._sums[key], self._counts[key] = t, np.broadcast_to(c, t.shape).copy()

    def _on_step(self) -> bool:
        infos = self.locals.get("infos") or [{}]
        m = infos[0].get("metrics")
        if m is None:
            return True
        n = m["total_throughput_gbps"].shape[0]
        for q, field in _NODE_FIELDS.items():
            self._add(f"node/{q}", m[field].sum(0), n)
        used = m["node_capacity_used_gib"] / np.maximum(m["node_capacity_gib"], 1e-12)
        self._add("node/capacity_used_frac", used.sum(0), n)
        act = m["tenant_active"]
        n_act = act.sum(0)
        for q, field in _SLOT_FIELDS.items():
            self._add(f"slot/{q}", np.where(act, m[field], 0.0).sum(0), n_act)
        self._add("all_perf", np.where(act, m["tenant_norm_perf"], 0.0).sum(), act.sum())
        w = m["interleave_weights"]  # (B, T, N) integers; all 0 = local-first
        wsum = w.sum(axis=2)
        inter = act & (wsum > 0)
        frac = w / np.maximum(wsum, 1)[..., None]
        self._add("page_frac", np.where(inter[..., None], frac, 0.0).sum(0), inter.sum(0)[:, None])
        self._add("local_first", (act & (wsum == 0)).sum(0), n_act)
        for field in self._scalar_tags:
            self._add(field, m[field].sum(), n)
        self._residual_max = max(self._residual_max, float(m["solver_residual"].max()))
        # TierGymVecEnv's documented timers (VecEnvWrapper forwards attribute reads)
        timer = getattr(self.training_env, "env_seconds", None)
        if timer is not None:
            self._env_time = timer
            self._env_steps = getattr(self.training_env, "env_steps", 0)
        return True

    def _mean(self, key: str) -> NDArray[np.float64]:
        c = self._counts[key]
        return np.where(c > 0, self._sums[key] / np.maximum(c, 1.0), np.nan)

    def _log(self, tag: str, value: float) -> None:
        if np.isfinite(value):
            self.logger.record(tag, float(value))

    def _on_rollout_end(self) -> None:
        if self._sums:
            for q in tb.NODE_QUANTITIES:
                for node, v in zip(self.node_names, self._mean(f"node/{q}"), strict=True):
                    self._log(tb.node_tag(node, q), v)
            for q in tb.SLOT_QUANTITIES:
                for t, v in enumerate(self._mean(f"slot/{q}")):
                    self._log(tb.slot_tag(t, q), v)
            self._log(tb.slot_tag("s", "norm_perf_vs_alone"), float(self._mean("all_perf")))
            page = self._mean("page_frac")
            for t in range(page.shape[0]):
                for j, node in enumerate(self.node_names):
                    self._log(tb.action_page_tag(t, node), page[t, j])
            for t, v in enumerate(self._mean("local_first")):
                self._log(tb.action_local_first_tag(t), v)
            for field, tag in self._scalar_tags.items():
                self._log(tag, float(self._mean(field)))
            self._log(tb.SOLVER_MAX, self._residual_max)
        self._sums.clear()
        self._counts.clear()
        self._residual_max = -np.inf
        if self._env_time > 0:
            self.logger.record(tb.ENV_SPS, self._env_steps / self._env_time)


class HeldOutEvaluation:
    """The learned policy and the references on the same held-out episodes, one value per episode.

    Episode ``i`` has seed ``seed + i`` on the validation split for every policy (the code
    path of ``evaluate.py``: :func:`agents.rollout.run_episodes`), so values pair by index;
    the metric is :data:`agents.tensorboard.METRIC`. The split is
    :data:`envs.families.SELECT_SPLIT`: what these evaluations show is what a user picks
    a checkpoint or a setting by, so it is never the split results are reported on.
    Calling it with a model rolls the model out (the environment's parameters are built
    once); :meth:`references` scores heuristics by name.
    """

    def __init__(
        self, scenario: str, env_kwargs: Mapping[str, Any], algo: str, episodes: int, seed: int
    ) -> None:
        self.scenario = scenario
        self.env_kwargs = evaluation_env_kwargs(env_kwargs)
        self.algo = algo
        self.episodes = episodes
        self.seed = seed
        self._params: Any = None

    def __call__(self, model: Any) -> NDArray[np.float64]:
        import torch

        policy = LearnedPolicy(model, self.env_kwargs, self.algo, "training")
        if self._params is None:
            self._params = make_params(policy, self.scenario, SELECT_SPLIT, self.env_kwargs)
        # one thread: the batches are a few dozen observations, and on a busy machine
        # torch's worker threads made an evaluation 3-10x slower (0.44 s against 1.5-5 s)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            stats = run_episodes(policy, self._params, range(self.seed, self.seed + self.episodes))
        finally:
            torch.set_num_threads(threads)
        return np.asarray(stats.metrics()[tb.METRIC], dtype=float)

    def references(self, names: Sequence[str]) -> dict[str, NDArray[np.float64]]:
        """Every reference's per-episode values (in seed order), scored once."""

        out: dict[str, NDArray[np.float64]] = {}
        for name in names:
            policy, kw = load_policy(name)
            recs = rollout(
                policy,
                self.scenario,
                self.episodes,
                seed=self.seed,
                split=SELECT_SPLIT,
                env_kwargs=kw,
            )
            recs.sort(key=lambda r: r["seed"])
            # a metric that could not be computed (None) becomes NaN
            out[name] = np.array([r["metrics"][tb.METRIC] for r in recs], dtype=float)
        return out


class _AtRolloutBoundaries(BaseCallback):
    """Calls :meth:`_at_boundary` at every rollout start and at the end of training, where the
    policy has trained on every step before ``num_timesteps`` (not when training stopped
    mid-rollout: that rollout is not trained on)."""

    def __init__(self) -> None:
        super().__init__()
        self._in_rollout = False

    def _at_boundary(self) -> None:
        raise NotImplementedError

    def _on_rollout_start(self) -> None:
        self._in_rollout = True
        self._at_boundary()

    def _on_rollout_end(self) -> None:
        self._in_rollout = False

    def _on_training_end(self) -> None:
        if not self._in_rollout:
            self._at_boundary()

    def _on_step(self) -> bool:
        return True


class EvalAgainstReferences(_AtRolloutBoundaries):
    """Scores the current policy on held-out seeds at step 0 and on a grid of ``interval`` steps.

    ``evaluate(model)`` returns the learned policy's score, or one value per
    evaluation episode (:class:`HeldOutEvaluation`); ``references`` maps each
    heuristic to its score or to its per-episode values on the same episodes
    (paired by index), computed once. Each evaluation logs ``eval/geomean_perf``
    (:data:`~agents.tensorboard.EVAL`, the mean) and ``time/eval_s``; each reference's
    mean goes under the same tag into a run of its own, the sub-folder
    :func:`~agents.tensorboard.reference_run` of the logger's TensorBoard folder
    (:meth:`~agents.tensorboard.DescribedTensorBoardFormat.write_run`; a logger without
    that output writes no reference), so one chart of the tag shows every policy in its
    own colour and under its own name (flat lines for the references; best first, see
    ``_ref_means``). When per-episode values are given, the ratio lines
    ``eval_ratio/<name>_vs_best_ref`` and ``eval_ratio/<name>_vs_dram-first`` with
    ``_low``/``_high`` bounds: the mean of the paired per-episode ratios and its
    percentile bootstrap interval (:func:`agents.stats.ratio_to_reference`).
    The best reference is the one with the highest mean. The evaluation at step 0 is kept
    as ``start`` (the policy RL starts from: the imitation policy of a fine-tuning recipe),
    in ``start_file`` when one is given, so a resumed run reads it back; later evaluations
    log ``eval_ratio/<name>_vs_start`` against it, the learning curve.

    Evaluations run on the grid of the module docstring, at step 0 too, and at the end of
    training (:class:`_AtRolloutBoundaries`). ``history`` keeps ``(step, mean)``.
    """

    def __init__(
        self,
        evaluate: Callable[[Any], float | ArrayLike],
        references: Mapping[str, float | ArrayLike],
        interval: int,
        name: str,
        *,
        start_file: Path | None = None,
    ) -> None:
        super().__init__()
        self.evaluate = evaluate
        self.references = {
            k: np.atleast_1d(np.asarray(v, dtype=float)) for k, v in references.items()
        }
        self.interval = interval
        self.name = name
        self._next = interval
        self.history: list[tuple[int, float]] = []
        means = {
            k: float(np.nanmean(v)) if np.isfinite(v).any() else float("nan")
            for k, v in self.references.items()
        }
        self.best_reference = max(means, key=lambda k: means[k]) if means else None
        # best first: TensorBoard colours runs in the order they start, from a palette of
        # seven (the learned policy's run is the first), so the six best references get
        # colours of their own and only weaker ones share one when there are more
        self._ref_means = dict(
            sorted(means.items(), key=lambda kv: -kv[1] if np.isfinite(kv[1]) else np.inf)
        )
        self.start_file = start_file
        self.start: NDArray[np.float64] | None = None
        if start_file is not None and start_file.is_file():
            self.start = np.asarray(json.loads(start_file.read_text())["values"], dtype=float)

    def _on_training_start(self) -> None:
        if self.interval > 0:
            s = self.num_timesteps
            self._next = 0 if s == 0 else _next_on_grid(s, self.interval)

    def _ratio(self, values: NDArray[np.float64], ref: str) -> tuple[float, float, float] | None:
        rv = self.start if ref == tb.START else self.references.get(ref)
        if rv is None or rv.shape != values.shape or values.size < 2:
            return None
        ok = np.isfinite(values) & np.isfinite(rv) & (rv > 0)
        if ok.sum() < 2:
            return None
        r = ratio_to_reference(values[ok], rv[ok], seed=0)
        return r["mean"], r["ci"][0], r["ci"][1]

    def _record(self) -> None:
        # dump only this evaluation's values: what else is pending (an off-policy run's
        # env/ means, say) stays for stable-baselines3's own dump, so no tag gets two
        # points at one step
        log = self.logger
        held: tuple[dict[str, Any], ...] = (
            log.name_to_value,
            log.name_to_count,
            log.name_to_excluded,
        )
        pending = [dict(d) for d in held]
        for d in held:
            d.clear()
        try:
            self._evaluate_and_dump()
        finally:
            for d, saved in zip(held, pending, strict=True):
                d.update(saved)

    def _evaluate_and_dump(self) -> None:
        t0 = time.perf_counter()
        values = np.atleast_1d(np.asarray(self.evaluate(self.model), dtype=float))
        score = float(np.nanmean(values)) if np.isfinite(values).any() else float("nan")
        self.history.append((self.num_timesteps, score))
        if self.num_timesteps == 0 and self.start is None:
            self.start = values
            if self.start_file is not None:
                self.start_file.write_text(json.dumps({"values": values.tolist()}))
        self.logger.record(tb.EVAL, score)
        pairs = (
            ("best_ref", self.best_reference),
            ("dram-first", "dram-first"),
            (tb.START, tb.START),
        )
        for label, ref in pairs:
            r = self._ratio(values, ref) if ref is not None else None
            if r is not None:
                for tag, x in zip(tb.ratio_tags(self.name, label), r, strict=True):
                    self.logger.record(tag, x)
        self.logger.record(tb.EVAL_SECONDS, time.perf_counter() - t0)
        self.logger.dump(self.num_timesteps)
        fmt = _output_format(self.logger, tb.DescribedTensorBoardFormat)
        if fmt is not None:  # each reference in its own run (folder): its own colour
            for k, mean in self._ref_means.items():
                fmt.write_run(tb.reference_run(k), {tb.EVAL: mean}, self.num_timesteps)

    def _at_boundary(self) -> None:
        if self.interval > 0 and self.num_timesteps >= self._next:
            self._next = _next_on_grid(self.num_timesteps, self.interval)
            self._record()


class LogUpdateAtItsStep(_AtRolloutBoundaries):
    """Writes what an on-policy update logged (``train/``) at the step it trained on.

    stable-baselines3 dumps its logs after a rollout and before the update, so
    an update's ``train/`` values would appear with the next rollout's step,
    and a resumed run's first rollout would have none. This dumps them at the
    next rollout start (and at the end of training), at ``num_timesteps``.
    Put it before the callbacks that save checkpoints: everything at a
    checkpoint's step is then written before the checkpoint is.
    """

    def _at_boundary(self) -> None:
        if self.logger.name_to_value:
            with warnings.catch_warnings():
                # the update's values may all be TensorBoard-only (excluded from stdout):
                # then SB3's stdout table has nothing to print and warns; nothing is lost
                warnings.filterwarnings("ignore", "Tried to write empty key-value dict")
                self.logger.dump(self.num_timesteps)


class TensorBoardRunCard(BaseCallback):
    """Writes a new run's Custom Scalars layout and its text cards once, at step 0.

    ``layout`` is :func:`agents.tensorboard.layout`'s; ``texts`` maps text tags
    (``guide``, ``hyperparameters``, ``warm_start``) to Markdown. A resumed run (training starts
    past step 0) writes nothing: its first event file has them.
    """

    def __init__(self, layout: Any, texts: Mapping[str, str]) -> None:
        super().__init__()
        self.layout = layout
        self.texts = dict(texts)

    def _on_training_start(self) -> None:
        if self.num_timesteps > 0:
            return
        fmt = _output_format(self.logger, TensorBoardOutputFormat)
        if fmt is None:
            return
        writer = fmt.writer
        tb.write_custom_scalars(writer, self.layout)
        for tag, text in self.texts.items():
            writer.add_text(tag, text, 0)
        writer.flush()

    def _on_step(self) -> bool:
        return True


class StopOnSignal(BaseCallback):
    """Stops training cleanly on SIGINT or SIGTERM; the caller then saves a checkpoint.

    For on-policy algorithms the rollout being collected when the signal came
    is dropped (it was never trained on), so ``resume_timesteps`` is where
    training really stands and a resumed run ends exactly at its total.
    """

    def __init__(self, on_policy: bool) -> None:
        super().__init__()
        self.on_policy = on_policy
        self.stopped = False
        self._rollout_start = 0
        self._previous: dict[int, Any] = {}

    def _handler(self, signum: int, frame: Any) -> None:
        self.stopped = True

    def _on_training_start(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handler)

    def _on_training_end(self) -> None:
        for sig, prev in self._previous.items():
            signal.signal(sig, prev)

    def _on_rollout_start(self) -> None:
        self._rollout_start = self.num_timesteps

    def _on_step(self) -> bool:
        return not self.stopped

    @property
    def resume_timesteps(self) -> int:
        return self._rollout_start if (self.stopped and self.on_policy) else self.num_timesteps


class CheckpointAtRollout(BaseCallback):
    """Saves a checkpoint (``save(model, steps)``) on the grid of ``interval`` timesteps of the
    module docstring, at rollout starts."""

    def __init__(self, save: Callable[[Any, int], Path], interval: int) -> None:
        super().__init__()
        self.save = save
        self.interval = interval
        self._next = interval

    def _on_training_start(self) -> None:
        if self.interval > 0:
            self._next = _next_on_grid(self.num_timesteps, self.interval)

    def _on_step(self) -> bool:
        return True

    def _on_rollout_start(self) -> None:
        # at a rollout boundary everything collected so far has been trained on
        if self.interval > 0 and self.num_timesteps >= self._next:
            self._next = _next_on_grid(self.num_timesteps, self.interval)
            self.save(self.model, self.num_timesteps)
