"""A sweep on Ray Tune, end to end: everything checked, the trials run (or resumed), the
summary written. Ray is imported when a sweep runs, not with this module."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from agents.distributed import EVAL_MODULES, RayError, ray_address, ray_session
from agents.sweep.plan import param_space, validate_trials
from agents.sweep.spec import SweepError, SweepSpec, load_sweep
from agents.sweep.summary import summarize_sweep

__all__ = ["run_sweep"]


def make_scheduler(spec: SweepSpec) -> Any:
    """The Tune scheduler of ``scheduler:`` (its defaults where the file gives none)."""
    from ray.tune.schedulers import (
        AsyncHyperBandScheduler,
        FIFOScheduler,
        HyperBandScheduler,
        MedianStoppingRule,
    )

    s = spec.scheduler
    if s is None or s.name == "fifo":
        return FIFOScheduler()
    if s.name == "asha":
        return AsyncHyperBandScheduler(
            time_attr="training_iteration",
            max_t=spec.reports,
            grace_period=int(s.grace_period if s.grace_period is not None else 1),
            reduction_factor=float(s.reduction_factor or 2),
            brackets=int(s.brackets or 1),
        )
    if s.name == "hyperband":
        return HyperBandScheduler(
            time_attr="training_iteration",
            max_t=spec.reports,
            reduction_factor=float(s.reduction_factor or 3),
        )
    return MedianStoppingRule(
        time_attr="training_iteration",
        grace_period=float(s.grace_period if s.grace_period is not None else 1),
        min_samples_required=int(s.min_samples_required or 3),
        hard_stop=bool(s.hard_stop if s.hard_stop is not None else True),
    )


def make_searcher(spec: SweepSpec) -> Any:
    """The Tune searcher of ``search:`` (random: grids crossed, the rest sampled)."""
    from ray.tune.search import BasicVariantGenerator, ConcurrencyLimiter, create_searcher

    search = spec.search
    if search.algorithm == "random":
        return BasicVariantGenerator(
            random_state=search.seed, max_concurrent=search.max_concurrent or 0
        )
    where = f"sweep file {spec.source!r}: search.algorithm"
    try:
        searcher = create_searcher(search.algorithm, **search.options)
    except ValueError as exc:
        raise SweepError(f"{where}: {exc}") from None
    except Exception as exc:  # ImportError / AssertionError: the library is not installed
        msg = " ".join(str(exc).split()) or type(exc).__name__
        raise SweepError(
            f"{where}: {search.algorithm!r} cannot be set up: {msg} "
            f"(install its package beside ray, or use algorithm: random)"
        ) from None
    if search.max_concurrent:
        searcher = ConcurrencyLimiter(searcher, max_concurrent=search.max_concurrent)
    return searcher


def prepare_output(spec: SweepSpec, output: str | Path | None) -> tuple[Path, bool]:
    """The sweep folder and whether it holds this sweep already (to resume)."""
    out = Path(output) if output is not None else Path("runs") / "sweeps" / spec.name
    out = out.resolve()
    stored = out / "sweep.yml"
    if stored.is_file():
        try:
            before = yaml.safe_load(stored.read_text())
        except yaml.YAMLError:
            before = None
        if before != spec.raw:
            raise SweepError(
                f"sweep folder {str(out)!r} holds a different sweep (its sweep.yml differs from "
                f"{spec.source!r}); use --output for a new folder, or the same file to resume it"
            )
        return out, True
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise SweepError(
            f"sweep folder {str(out)!r} exists and is not a sweep folder; use --output"
        )
    return out, False


def _tuner(spec: SweepSpec, out: Path, trainable: Any, scheduler: Any, searcher: Any) -> Any:
    """A new Tune experiment in ``out/tune``, or the interrupted one restored from there."""
    from ray import tune

    from agents.sweep.progress import SweepProgress

    tune_dir = out / "tune"
    if tune.Tuner.can_restore(str(tune_dir)):
        return tune.Tuner.restore(
            str(tune_dir), trainable=trainable, resume_unfinished=True, resume_errored=True
        )
    return tune.Tuner(
        trainable,
        param_space=param_space(spec),
        tune_config=tune.TuneConfig(
            metric="objective",
            mode=spec.mode,
            scheduler=scheduler,
            search_alg=searcher,
            num_samples=spec.search.num_samples,
            reuse_actors=False,
        ),
        run_config=tune.RunConfig(
            name="tune",
            storage_path=str(out),
            stop={"training_iteration": spec.reports},
            checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=1, num_to_keep=1),
            failure_config=tune.FailureConfig(max_failures=0),
            callbacks=[SweepProgress()],
            verbose=0,
        ),
    )


def _errors(grid: Any) -> dict[int, str]:
    """The failed trials of a finished experiment, by trial number: their error's end."""
    errors = {}
    for i in range(len(grid)):
        r = grid[i]
        if r.error is not None:
            m = re.search(r"_(\d{5})(?:_|$)", Path(str(r.path)).name)
            errors[int(m.group(1)) if m else -1] = " ".join(str(r.error).split())[-300:]
    return errors


def run_sweep(
    path: str | Path,
    *,
    output: str | Path | None = None,
    workers: int | None = None,
    address: str | None = None,
    show_progress: bool = True,
    modules: Sequence[str] = EVAL_MODULES,
) -> dict[str, Any]:
    """Run (or resume) the sweep in ``path``; returns :func:`summarize_sweep`'s result.

    Everything is checked before a trial starts: the sweep file, every recipe x scenario x
    hyperparameter value (:func:`agents.sweep.plan.validate_trials`), the searcher and
    scheduler, the sweep folder, the Ray cluster and that each node imports ``modules``
    (the project's packages: a trial runs :func:`agents.trainer.run` in its worker).
    ``workers``: local Ray CPUs (default all cores; with an address, unused).

    Raises:
        ValueError: (:class:`SweepError`, :class:`agents.distributed.RayError`)
            one line saying what to fix, before any trial starts.
    """
    spec = load_sweep(path)
    validate_trials(spec)
    scheduler = make_scheduler(spec)
    searcher = make_searcher(spec)
    out, existing = prepare_output(spec, output)
    n = spec.n_trials()
    with ray_session(workers, address, modules) as cpus:
        cpus_per_trial = spec.resources.cpus_per_trial
        if cpus_per_trial > cpus:
            raise RayError(
                f"resources.cpus_per_trial {cpus_per_trial:g} is more than the {cpus} CPU(s) Ray has"
            )
        from ray import tune

        from agents.sweep.progress import PROGRESS
        from agents.sweep.trial import SweepTrial, TrialContext

        # TensorBoard logs are the run folders'; Tune's own would be a second copy
        os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
        os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
        out.mkdir(parents=True, exist_ok=True)
        if not existing:
            (out / "sweep.yml").write_text(Path(path).read_text())
        (out / "trials").mkdir(exist_ok=True)
        ctx = TrialContext(out=str(out), spec=spec)
        trainable = tune.with_resources(
            tune.with_parameters(SweepTrial, ctx=ctx), {"cpu": cpus_per_trial}
        )
        PROGRESS.update(show=show_progress, total=n, spec=spec)
        if show_progress:
            addr = ray_address(address)
            where = f"the Ray cluster at {addr}" if addr else f"{cpus} local CPU(s)"
            verb = "resuming" if tune.Tuner.can_restore(str(out / "tune")) else "running"
            print(
                f"{verb} sweep {spec.name}: {n} trial(s) on {where}; runs in {out / 'trials'}",
                file=sys.stderr,
            )
        grid = _tuner(spec, out, trainable, scheduler, searcher).fit()
        errors = _errors(grid)
    return summarize_sweep(out, spec, errors=errors)
