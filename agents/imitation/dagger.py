"""The warm start: label, fit, then DAgger rounds on the fitted policy's own states.

:func:`warm_start` gives the choice among bases (and, with plans, the placement
over the residual's base) a supervised start before reinforcement learning,
which from the heuristic-at-zero start rarely tries another base long enough to
learn it:

1. each job (a training family, then each scenario of the settings) is labelled
   (:func:`agents.imitation.dataset.label_episodes`: every expert runs every
   episode, the best under the run's objective is its label, the label's run is
   recorded);
2. the policy's action mean is fitted to the targets
   (:func:`agents.imitation.bc.fit_targets`), each job weighing the same;
3. DAgger (Ross et al., 2011): ``rounds`` times, the fitted policy itself runs
   the same episodes, the observations it reaches are added with their
   episode's targets, and the fit continues on the aggregate. The label's run
   only shows the policy the states a correct choice leads to; a choice the fit
   gets wrong at the first step leads to states it has never seen (the classic
   covariate shift of behaviour cloning), and these rounds label exactly those.

Reinforcement learning then starts from a policy that already picks a base per
machine and mix, and refines it with the residual. With a checkpoint folder each
job's labels and each fit's weights are saved, and a warm start called again
continues where it stopped (:mod:`agents.imitation.checkpoint`).
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import numpy as np

from agents.config.imitation import ImitationSettings
from agents.imitation.bc import fit_targets
from agents.imitation.checkpoint import Checkpoint, checkpoint_key
from agents.imitation.dataset import (
    Chunk,
    EpisodeTargets,
    Labelled,
    label_episodes,
    policy_observations,
)
from agents.imitation.objective import check_objective
from agents.imitation.progress import phase_bar
from agents.view import base_names
from envs.warm import compile_kernel, compile_rest

__all__ = ["warm_start"]

#: Seeds of job ``n``'s episodes start this far above job ``n - 1``'s.
JOB_SEED_STEP = 100_000


def _jobs(
    env: Mapping[str, Any], settings: ImitationSettings
) -> tuple[list[str], list[tuple[str, int]]]:
    """``(families, jobs)``: the run's training families, then ``(name, episodes)`` per job."""
    families = [
        env["scenario"],
        *[f for f in (env.get("train_families") or []) if f != env["scenario"]],
    ]
    jobs = [(f, settings.episodes) for f in families]
    if settings.scenario_episodes > 0:
        jobs += [
            (sc, settings.scenario_episodes) for sc in settings.scenarios if sc not in families
        ]
    return families, jobs


def _label_job(
    env: Mapping[str, Any],
    family: str,
    episodes: int,
    seed: int,
    settings: ImitationSettings,
    objective: str,
    plans: bool,
    progress: bool,
) -> tuple[Labelled, float]:
    """One job's labels and the seconds they took (a worker process runs this)."""
    t0 = time.time()
    got = label_episodes(
        env, family, episodes, seed, settings,
        objective=objective, plans=plans, hold_listed=settings.plans, progress=progress,
    )  # fmt: skip
    return got, time.time() - t0


class _Run:
    """One warm start's state: the data set so far, the fits' record and the timings."""

    def __init__(
        self,
        model: Any,
        env: Mapping[str, Any],
        settings: ImitationSettings,
        seed: int,
        objective: str,
        ckpt: Checkpoint,
        progress: bool,
        workers: int,
    ) -> None:
        self.model, self.env, self.settings = model, env, settings
        self.workers = workers
        self.seed = settings.seed + seed  # the first labelling seed; fit r shuffles with +r
        self.objective, self.ckpt, self.progress = objective, ckpt, progress
        self.names = base_names(env.get("base_policy"))
        self.families, self.jobs = _jobs(env, settings)
        self.columns = len(self.names) + int(settings.plans)
        # per job, its (obs, targets, fit_residual) chunks: the labels' run, then one per round
        self.parts: list[list[Chunk]] = []
        self.per_episode: list[EpisodeTargets] = []
        self.counts = np.zeros(self.columns)
        self.per: dict[str, list[float]] = {}
        self.seconds = {"label": 0.0, "plan": 0.0, "fit": 0.0, "dagger": 0.0}
        self.samples: list[int] = []
        self.losses: list[float] = []
        self.resumed = {"jobs": 0, "fits": 0}

    def job_seed(self, n: int) -> int:
        return self.seed + JOB_SEED_STEP * n

    def label(self) -> None:
        """Label every job (or read it back from the checkpoint), the jobs left over
        :attr:`workers` processes; the data set is assembled in job order."""
        done: dict[int, tuple[Labelled, dict[str, Any]]] = {}
        for n in range(len(self.jobs)):
            saved = self.ckpt.load_job(n, self._job_info(n))
            if saved is not None:
                done[n] = saved
                self.resumed["jobs"] += 1
        todo = [n for n in range(len(self.jobs)) if n not in done]
        for n, got, seconds in self._label_jobs(todo):
            info = {**self._job_info(n), "label_seconds": seconds}
            self.ckpt.save_job(n, got, info)
            done[n] = got, info
        for n, (fam, _) in enumerate(self.jobs):
            got, info = done[n]
            self.seconds["label"] += float(info["label_seconds"])
            self.parts.append([(got.obs, got.targets, got.fit_residual)])
            self.per_episode.append(got.episodes)
            self.seconds["plan"] += got.plan_seconds
            share = np.bincount(got.labels, minlength=self.columns)
            self.counts += share
            self.per[fam] = (share / share.sum()).round(3).tolist()

    def _job_info(self, n: int) -> dict[str, Any]:
        fam, count = self.jobs[n]
        return {"family": str(fam), "episodes": count, "seed": self.job_seed(n)}

    def _job_args(self, n: int, progress: bool) -> tuple[Any, ...]:
        s = self.settings
        fam, count = self.jobs[n]
        plans = s.plans and n < len(self.families)
        return (self.env, fam, count, self.job_seed(n), s, self.objective, plans, progress)

    def _label_jobs(self, todo: list[int]) -> Iterator[tuple[int, Labelled, float]]:
        """``(job, labels, seconds)`` of the jobs ``todo`` as they finish: in this process
        with one worker, else in ``workers`` processes (each job runs exactly as here: the
        episodes are numpy alone, independent of the process)."""
        workers = min(self.workers, len(todo))
        if workers <= 1:
            for n in todo:
                yield (n, *_label_job(*self._job_args(n, self.progress)))
            return
        ctx = multiprocessing.get_context("spawn")
        with (
            phase_bar(self.progress, len(todo), f"labelling ({workers} processes)", "job") as bar,
            ProcessPoolExecutor(workers, mp_context=ctx, initializer=compile_rest) as pool,
        ):
            futures = {pool.submit(_label_job, *self._job_args(n, False)): n for n in todo}
            # in a fresh clone, this process (which only waits here) compiles the solver's
            # kernel while the workers compile the rest of the model (envs.warm): each loads
            # what another compiled instead of both compiling all of it in turn
            compile_kernel()
            for future in as_completed(futures):
                yield (futures[future], *future.result())
                bar.update()

    def fit(self, r: int) -> None:
        """Fit ``r`` (0: the first; then DAgger round ``r``: the policy's own states first)."""
        s = self.settings
        rows: list[Chunk] | None = None
        if r:
            t0 = time.time()
            rows = []
            desc = f"DAgger round {r}/{s.rounds}"
            with phase_bar(self.progress, len(self.jobs), desc, "rollout") as bar:
                for n, (fam, count) in enumerate(self.jobs):
                    obs = policy_observations(
                        self.model, self.env, fam, count, self.job_seed(n), s.stride
                    )
                    rows.append(self.per_episode[n].chunk(obs))
                    bar.update()
            for n, chunk in enumerate(rows):
                self.parts[n].append(chunk)
            self.seconds["dagger"] += time.time() - t0
        t0 = time.time()
        # the aggregate is r + 1 times the first data set: as many gradient steps as the first fit
        passes = max(1, round(s.epochs / (r + 1)))
        desc = "fit" if not r else f"DAgger round {r}/{s.rounds} fit"
        with phase_bar(self.progress, passes, desc, "epoch") as bar:
            loss = fit_targets(
                self.model.policy,
                self.parts,
                len(self.names) - 1,
                passes,
                s.batch_size,
                s.learning_rate,
                self.seed + r,
                on_epoch=bar.update,
            )
        self.losses.append(round(loss, 5))
        self.seconds["fit"] += time.time() - t0
        self.samples.append(int(sum(len(o) for job in self.parts for o, _, _ in job)))
        record = {"summary": self.summary(), "seconds": dict(self.seconds)}
        self.ckpt.save_fit(r, self.model.policy, record, rows)

    def resume_fit(self, r: int) -> dict[str, Any] | None:
        """Fit ``r`` read back from the checkpoint (None: not done): its round's rows join
        the data set and its record the summary; returns the weights (not yet loaded)."""
        saved = self.ckpt.load_fit(r, len(self.jobs))
        if saved is None:
            return None
        state, record, rows = saved
        for n, chunk in enumerate(rows or []):
            self.parts[n].append(chunk)
        summary = record["summary"]
        self.samples, self.losses = list(summary["samples"]), list(summary["loss"])
        for k in ("fit", "dagger"):
            self.seconds[k] = float(record["seconds"][k])
        self.resumed["fits"] += 1
        return state

    def summary(self) -> dict[str, Any]:
        """The summary so far (see :func:`warm_start`)."""
        s, families, jobs = self.settings, self.families, self.jobs
        return {
            "bases": self.names + ([s.teacher] if s.plans else []),
            "episodes_per_family": s.episodes,
            "families": families,
            "planned_families": families if s.plans else [],
            "scenario_episodes": s.scenario_episodes if len(jobs) > len(families) else 0,
            "scenarios": [j[0] for j in jobs[len(families) :]],
            "dagger_rounds": s.rounds,
            "samples": list(self.samples),
            "label_share": (self.counts / self.counts.sum()).round(3).tolist(),
            "label_share_per_scenario": dict(self.per),
            "loss": list(self.losses),
            "seconds": {k: round(v, 1) for k, v in self.seconds.items()},
            "objective": self.objective,
            "resumed": dict(self.resumed),
        }


def warm_start(
    model: Any,
    env: Mapping[str, Any],
    settings: ImitationSettings,
    *,
    seed: int,
    objective: str,
    checkpoint_dir: Path | str | None = None,
    progress: bool = False,
    workers: int = 1,
) -> dict[str, Any]:
    """Fit ``model``'s action mean to the best expert of each training episode (see the module).

    The episodes are ``settings.episodes`` of each training family (``env``'s ``scenario``
    and ``train_families``; planned too with ``settings.plans``) and
    ``settings.scenario_episodes`` of each of ``settings.scenarios`` (training split, seeds
    from ``settings.seed + seed``: other seeds than any evaluation's), labelled under
    ``objective`` (the run's reward name, :mod:`agents.imitation.objective`).
    ``settings.rounds`` DAgger rounds follow the first fit of ``settings.epochs`` epochs,
    each over the aggregate with as many gradient steps as the first
    (``epochs / (round + 1)`` epochs).

    ``checkpoint_dir``: save each job's labels and each fit's weights there, and resume
    from what it holds (:mod:`agents.imitation.checkpoint`; the result is bit-identical to
    an uninterrupted run). ``progress``: a bar per phase on stderr (nothing otherwise).
    ``workers``: processes that label the jobs (the result does not depend on it).

    Returns a summary: the experts (``bases``: the bases, then ``plan``), the episodes,
    families and scenarios, the share of each label overall and per job, the samples and
    final loss of each fit, the seconds spent labelling (the plans' search included),
    searching plans, fitting and running the policy (``seconds``; read back ones included),
    the ``objective``, and what was read back from the checkpoint (``resumed``: jobs, fits).

    Raises:
        ValueError: ``objective`` is no reward name; fewer than two bases.
        agents.imitation.checkpoint.CheckpointError: ``checkpoint_dir`` holds the
            checkpoint of another warm start (other arguments).
    """
    check_objective(objective)
    if len(base_names(env.get("base_policy"))) < 2:
        raise ValueError("imitation: needs base_policy with at least two heuristics")
    key = checkpoint_key(settings, env, seed, objective, model.policy)
    ckpt = Checkpoint(checkpoint_dir, key)
    run = _Run(model, env, settings, seed, objective, ckpt, progress, workers)
    run.label()
    pending: dict[str, Any] | None = None  # weights read back, loaded before the next fit
    for r in range(settings.rounds + 1):
        saved = run.resume_fit(r) if pending is not None or r == 0 else None
        if saved is not None:
            pending = saved
            continue
        if pending is not None:
            run.ckpt.restore(model.policy, pending)
            pending = None
        run.fit(r)
    if pending is not None:
        run.ckpt.restore(model.policy, pending)
    return run.summary()
