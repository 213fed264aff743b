"""Fair comparison of policies: one code path for heuristics and trained agents.

:func:`compare` runs every policy on the same scenarios with the same seeds
(common random numbers), vectorized over episodes
(:func:`agents.rollout.rollout`); :func:`run_comparison` does that, summarises
the records with :mod:`agents.report` and writes the results folder.
``evaluate.py`` and the end of ``train.py`` both call :func:`run_comparison`.

Nothing runs before everything is known to work: every policy is loaded
(trained models from their safe files; stable-baselines3 pickle archives are
refused) and bound to every scenario's
:class:`~envs.core.EnvParams` (spaces, tenant slots, number of weights), and
the output folder is checked, before the first episode.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agents import report
from agents.config import TrainingError
from agents.report import METRICS
from agents.rollout import make_params, rollout
from agents.runs import check_folder, load_trained, trained_on
from agents.view import LearnedPolicy, PolicyError, environment_config, view_settings
from baselines import catalogue, make_policy
from envs.config import default
from envs.families import make_family
from envs.generator import check_chances
from envs.policy import RecordsPolicy, as_policy

__all__ = [
    "LearnedPolicy",
    "PolicyError",
    "check_output_dir",
    "check_runs",
    "compare",
    "evaluation_env_kwargs",
    "load_policy",
    "loaded_policies",
    "local_runner",
    "run_comparison",
]


def make_reference(name: str) -> Any:
    """A policy of the catalogue by name (:mod:`baselines.catalogue`: the heuristics, the
    bounds, ``static-best`` and ``best-heuristic-per-episode`` among them) or
    ``static:W1:W2[@RATE]``."""
    if name.startswith("static:"):
        return make_policy(name)
    return catalogue.factory(name)()


def load_policy(spec: str, label: str | None = None) -> tuple[Any, dict[str, Any]]:
    """A policy from a baseline name (``dram-first``, ``static:3:1@256``...) or a trained run/model path.

    ``LABEL=SPEC`` gives the policy the name ``LABEL`` in records and tables.
    A trained model loads from its safe files; a stable-baselines3 pickle
    archive is refused (loading it could run code).

    Returns ``(policy, env_kwargs)``; ``env_kwargs`` is empty for heuristics
    (they set their kernel configuration themselves).
    """
    names = catalogue.names()
    if "=" in spec and label is None:  # LABEL=SPEC names a policy in the tables
        label, spec = spec.split("=", 1)
    if spec in names or spec.startswith("static:"):
        try:
            policy = make_reference(spec)
        except ValueError as exc:
            raise PolicyError(str(exc)) from None
        policy.name = label or spec
        return policy, {}
    path = Path(spec)
    if not path.exists():
        raise PolicyError(
            f"unknown policy {spec!r}: expected a baseline name {names}, 'static:W1:W2[@RATE]', or a trained run folder or model file"
        )
    try:
        model, env, algo = load_trained(path)
    except TrainingError as exc:
        raise PolicyError(str(exc)) from None
    name = label or (path.name if path.is_dir() else path.parent.name or algo)
    env_kwargs = evaluation_env_kwargs(env)
    policy = LearnedPolicy(model, env_kwargs, name, str(path))
    policy.trained_on = trained_on(path, env)
    return policy, env_kwargs


def evaluation_env_kwargs(env: Mapping[str, Any]) -> dict[str, Any]:
    """A run's env settings as evaluation uses them: the environment's and the view's, with
    the task's scenario and split, the training pool's size and the chances the training drew
    the generator's families with back at the environment's defaults (evaluation draws the
    scenario it is asked for, the test split's own pool, the one the references are scored
    on, and the generator's families as documented)."""
    config = environment_config(
        env,
        scenario=default("scenario"),
        split=default("split"),
        pool_size=default("pool_size"),
        generator_chances=default("generator_chances"),
    )
    return {**config.given(), **view_settings(env)}


def check_runs(
    loaded: Sequence[tuple[Any, dict[str, Any]]],
    names: Sequence[str],
    scenarios: Sequence[str],
    split: str = "test",
) -> None:
    """Every policy against every scenario's :class:`~envs.core.EnvParams`, before any episode.

    Builds each scenario's parameters with each policy's env settings and
    kernel (the way :func:`agents.rollout.rollout` will) and binds the policy
    to them, which checks a trained model's spaces and a static policy's
    number of weights. Raises :class:`PolicyError` naming the policy and the
    scenario (a scenario that does not load raises its own error).
    """

    if not scenarios:
        raise ValueError("no scenario to evaluate on")
    for sc in scenarios:
        make_family(sc, pool_size=8)  # an unknown name or a bad file: the scenario's own error
    for sc in scenarios:
        for (policy, env_kwargs), name in zip(loaded, names, strict=True):
            try:
                if isinstance(policy, RecordsPolicy):  # its records are its heuristics'
                    make_params(None, sc, split, env_kwargs)
                else:
                    as_policy(policy).bind(make_params(policy, sc, split, env_kwargs), 1)
            except (ValueError, TypeError) as exc:
                raise PolicyError(f"policy {name!r} on scenario {sc!r}: {exc}") from None


def compare(
    policies: Sequence[str | tuple[Any, dict[str, Any]]],
    scenarios: Sequence[str],
    episodes: int,
    seed: int = 0,
    split: str = "test",
) -> list[dict[str, Any]]:
    """Every policy on every scenario with the same seeds; one record per episode.

    A policy is a spec for :func:`load_policy` or an already loaded
    ``(policy, env_kwargs)`` pair. Every policy is checked against every scenario
    (:func:`check_runs`) before the first episode.

    Records are :func:`agents.rollout.rollout`'s: ``seed`` is the episode's own
    seed (``seed + episode``; in a family it also picks the scenario instance,
    ``instance``) and ``episode`` its index, so every policy has exactly one
    record per (scenario, seed) and records pair on that key. Added here:
    ``scenario`` (as asked) and ``run_seed`` (the ``seed`` argument).
    """
    loaded, names = loaded_policies(policies, scenarios, episodes, split)
    return local_runner(loaded, names, scenarios, episodes, seed=seed, split=split)


def loaded_policies(
    policies: Sequence[str | tuple[Any, dict[str, Any]]],
    scenarios: Sequence[str],
    episodes: int,
    split: str,
) -> tuple[list[tuple[Any, dict[str, Any]]], list[str]]:
    """The policies loaded, with their distinct names, each checked against every scenario
    (:func:`check_runs`), before any episode runs."""
    if episodes < 1:
        raise ValueError(f"episodes: got {episodes}, expected at least 1")
    loaded = [load_policy(p) if isinstance(p, str) else p for p in policies]
    names = [(p if isinstance(p, RecordsPolicy) else as_policy(p)).name for p, _ in loaded]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise PolicyError(f"two policies share the name(s) {dup}; give each a distinct label")
    check_runs(loaded, names, scenarios, split)
    return loaded, names


def local_runner(
    loaded: Sequence[tuple[Any, dict[str, Any]]],
    names: Sequence[str],
    scenarios: Sequence[str],
    episodes: int,
    *,
    seed: int,
    split: str,
    record_series: bool = False,
    show_progress: bool = False,
    **_: Any,
) -> list[dict[str, Any]]:
    """The grid in this process, scenario by scenario, policy by policy (a :data:`Runner`;
    ``show_progress``: a progress bar)."""
    from tqdm import tqdm

    out: list[dict[str, Any]] = []
    bar = tqdm(total=len(scenarios) * len(loaded), desc="runs", disable=not show_progress)
    try:
        for sc in scenarios:
            for (policy, env_kwargs), name in zip(loaded, names, strict=True):
                recs = rollout(
                    policy,
                    sc,
                    episodes,
                    seed=seed,
                    split=split,
                    env_kwargs=env_kwargs,
                    record_series=record_series,
                    policy_name=name,
                )
                for r in recs:
                    r["scenario"] = sc
                    r["run_seed"] = seed
                out.extend(recs)
                bar.set_postfix_str(f"{sc} / {name}")
                bar.update(1)
    finally:
        bar.close()
    return out


def mean_score(records: Sequence[Mapping[str, Any]], metric: str = "geomean_perf") -> float:
    """Mean of a metric over records (None values skipped)."""
    vals = [r["metrics"][metric] for r in records if r["metrics"].get(metric) is not None]
    return float(np.mean(vals)) if vals else float("nan")


def check_output_dir(output: str | Path, what: str = "output folder") -> Path:
    """A folder results can be written to (existing, or creatable); nothing is created."""
    out = check_folder(Path(output), what)
    for name in RESULT_FILES:
        if (out / name).exists() and not (out / name).is_file():
            raise ValueError(f"{what} {str(out)!r}: {name} exists and is not a file")
    return out


RESULT_FILES = ("results.json", "results.csv", "table.md", "leaderboard.md", "ratio.png")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")


#: How a comparison's grid runs: ``runner(loaded, names, scenarios, episodes, *, seed, split,
#: record_series, metric, cells_dir, show_progress)`` returns the records in
#: :func:`local_runner`'s order (:func:`local_runner`;
#: :class:`agents.distributed.RayRunner` runs the cells as Ray tasks).
Runner = Callable[..., list[dict[str, Any]]]


def run_comparison(
    policies: Sequence[str | tuple[Any, dict[str, Any]]],
    scenarios: Sequence[str],
    episodes: int,
    output: str | Path,
    *,
    seed: int = 0,
    split: str = "test",
    reference: str = "dram-first",
    metric: str = "geomean_perf",
    plots: bool = True,
    show_progress: bool = False,
    command: Sequence[str] | None = None,
    n_boot: int = 2000,
    runner: Runner | None = None,
    generator_chances: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """Compare policies and write the results folder; returns the summary.

    ``generator_chances`` (entries of :data:`envs.generator.CHANCES`) draws the generator's
    families with other chances for every policy alike (e.g. ``{"channels": 1.0}``: machines
    with other DRAM channel counts); other scenarios ignore it. Without it every family is
    drawn as documented (a learned policy's training chances never carry over).

    Runs every policy on every scenario with the same seeds (episode ``i`` of every run has
    seed ``seed + i``) through ``runner`` (default :func:`local_runner`, this process;
    :class:`agents.distributed.RayRunner`: Ray tasks, the same records), summarises the
    records with :func:`agents.report.summarize_records` (ratios to ``reference`` on
    ``metric``; the bootstrap is drawn from ``seed``) and writes into ``output``:
    ``results.json`` (``command``, the records and the summary), ``results.csv``,
    ``table.md`` (``metric`` per scenario and policy), ``leaderboard.md`` and, with
    ``plots``, ``ratio.png`` and ``timeseries-<scenario>-<policy>.png`` (each run's first
    episode). Printing is left to the caller (the tables are in the summary's renderings,
    :func:`agents.report.markdown_table` and :func:`agents.report.leaderboard_markdown`).

    Raises:
        ValueError: (:class:`PolicyError` among them) an unknown or unusable
            policy, scenario, ``reference``, ``metric`` or ``output``, all
            before any episode runs; or bad records; or what the runner raised.
    """
    if metric not in METRICS:  # a record's episode metrics: any can be the primary one
        raise ValueError(f"metric {metric!r}: expected one of {list(METRICS)}")
    out = check_output_dir(output)
    loaded, names = loaded_policies(policies, scenarios, episodes, split)
    if generator_chances:
        chances = check_chances(generator_chances)
        drawn = {k: chances[k] for k in generator_chances}
        loaded = [(p, {**kw, "generator_chances": drawn}) for p, kw in loaded]
    if reference not in names:
        raise ValueError(f"reference {reference!r} is not among the policies {names}")
    trained_on = {  # what each learned policy trained on
        p.name: list(p.trained_on)
        for p, _ in loaded
        if isinstance(p, LearnedPolicy) and p.trained_on is not None
    }
    records = (runner or local_runner)(
        loaded,
        names,
        list(scenarios),
        episodes,
        seed=seed,
        split=split,
        record_series=plots,
        metric=metric,
        cells_dir=out / "cells",
        show_progress=show_progress,
    )
    return write_results(
        out,
        records,
        reference=reference,
        metric=metric,
        seed=seed,
        command=command,
        plots=plots,
        trained_on=trained_on,
        n_boot=n_boot,
    )


def leaderboard_text(summary: Mapping[str, Any]) -> str:
    """The leaderboard and, with learned policies, what they trained on and where they stand
    against the best heuristic (the text of ``leaderboard.md``; the commands print it)."""
    text = report.leaderboard_markdown(summary)
    gen = summary.get("generalisation")
    if gen:
        text += "\n" + report.generalisation_markdown(gen, summary["reference"])
    return text + "\n"


def write_results(
    out: Path,
    records: list[dict[str, Any]],
    *,
    reference: str,
    metric: str,
    seed: int,
    command: Sequence[str] | None,
    plots: bool,
    trained_on: Mapping[str, Sequence[str]] | None = None,
    n_boot: int = 2000,
) -> dict[str, Any]:
    """Summarise ``records`` and write every result file into ``out``; returns the summary.

    With ``trained_on`` (what each learned policy trained on) the summary also has
    ``"generalisation"`` (:func:`agents.report.generalisation_summary`: trained,
    held-out and other scenarios apart, each against the best single heuristic), which
    ``leaderboard.md`` renders below the ranking.

    The one writer of a comparison's files, whichever way the records were made
    (:func:`run_comparison` with either runner).
    Records that carry a ``series`` (``plots``) lose it here: it goes to the plots only.
    """

    series = [(r["scenario"], r["policy"], r.pop("series")) for r in records if "series" in r]
    # the single heuristics a learned policy is measured against
    heuristics = catalogue.names(kind="heuristic", deployable=True)
    summary = report.summarize_records(
        records,
        reference=reference,
        metric=metric,
        seed=seed,
        n_boot=n_boot,
        heuristics=heuristics,
    )
    if trained_on:
        summary["generalisation"] = report.generalisation_summary(
            summary,
            trained_on,
            heuristics,
            records=records,
            n_boot=n_boot,
            seed=seed,
        )
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(
        json.dumps(
            {
                "command": None if command is None else list(command),
                "records": records,
                "summary": summary,
            },
            indent=1,
        )
    )
    report.write_csv(records, out / "results.csv")
    (out / "table.md").write_text(report.markdown_table(summary, metric=metric) + "\n")
    (out / "leaderboard.md").write_text(leaderboard_text(summary))
    if plots:
        report.plot_ratio_bars(summary, out / "ratio.png")
        for scenario, policy, s in series:
            report.plot_timeseries(
                s,
                out / f"timeseries-{_slug(scenario)}-{_slug(policy)}.png",
                f"{scenario} / {policy}",
            )
    return summary
