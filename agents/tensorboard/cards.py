"""The text cards of a run: the reading guide, the hyperparameters, the warm start.

:func:`guide_markdown` says where to look, the units, what a tenant slot is,
the evaluation seeds and the ratios; :func:`hyperparameter_markdown` lists
every setting of the run configuration (:func:`hparam_values` flattens them,
with their real types, for the hparams plugin too), the evaluation, the
reference scores and the command; :func:`warm_start_markdown` renders the
imitation warm start's summary. Each card is Markdown text for a text tag.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from agents.tensorboard.custom_scalars import COMPARISON_CHART, MARGIN_CHART
from agents.tensorboard.tags import EVAL, METRIC, reference_run

__all__ = ["guide_markdown", "hparam_values", "hyperparameter_markdown", "warm_start_markdown"]


def _cell(v: Any) -> str:
    return str(v).replace("|", "\\|").replace("\n", " ")


def hparam_values(cfg: Any) -> dict[str, bool | int | float | str]:
    """A run's settings flattened for the hparams plugin, with their real types.

    Numbers stay numbers, booleans booleans; lists and mappings become JSON
    text; ``None`` values are left out (the plugin has no null).
    """

    def value(v: Any) -> bool | int | float | str | None:
        if v is None or isinstance(v, bool | int | float | str):
            return v
        if isinstance(v, np.generic):
            return v.item()
        try:
            return json.dumps(v, sort_keys=True, default=str)
        except TypeError:
            return str(v)

    flat: dict[str, Any] = {
        "algo": cfg.algo,
        "seed": cfg.seed,
        "n_envs": cfg.n_envs,
        "total_timesteps": cfg.total_timesteps,
        "eval_interval": cfg.eval_interval,
        "eval_episodes": cfg.eval_episodes,
        "checkpoint_interval": cfg.checkpoint_interval,
        "references": ",".join(cfg.references),
        "hyperparams_source": cfg.recipe_source,
    }
    flat.update({f"env.{k}": value(v) for k, v in cfg.env.items()})
    flat.update({k: value(v) for k, v in cfg.hyperparams.items()})
    return {k: v for k, v in flat.items() if v is not None}


def hyperparameter_markdown(
    cfg: Any, command: Sequence[str], eval_seed: int, references: Mapping[str, float]
) -> str:
    """The hyperparameter text card: every setting, the evaluation, the references, the command."""
    rows = [f"| {k} | {_cell(v)} |" for k, v in hparam_values(cfg).items()]
    rows.append(
        f"| evaluation | every {cfg.eval_interval:,} steps and at step 0 (0 = off): "
        f"{cfg.eval_episodes} episodes of the validation split, seeds {eval_seed}.."
        f"{eval_seed + cfg.eval_episodes - 1}, deterministic actions, metric {METRIC} |"
    )
    if references:
        scores = ", ".join(f"{k} {v:.4f}" for k, v in references.items())
        rows.append(f"| reference scores (same episodes) | {scores} |")
    if cfg.created:
        rows.append(f"| created | {cfg.created} |")
    cmd = shlex.join(command)
    cmd = f"python {cmd}" if cmd.startswith("train.py") else cmd
    rows.append(f"| command | `{_cell(cmd)}` |")
    return "| setting | value |\n|---|---|\n" + "\n".join(rows)


def warm_start_markdown(warm: Mapping[str, Any]) -> str:
    """The warm start's text card (:func:`agents.imitation.warm_start`'s summary): each
    base's (and the plan's, with plans) share of the labels per family and scenario, then
    each fit's samples and loss (fit 0 on the labels' own runs, then one per DAgger round)
    and where the time went."""
    bases = list(warm["bases"])
    lines = [
        "| labels: best base (or plan) per episode | " + " | ".join(bases) + " |",
        "|---|" + "---|" * len(bases),
    ]
    for name, share in warm["label_share_per_scenario"].items():
        lines.append(f"| {name} | " + " | ".join(f"{v:.1%}" for v in share) + " |")
    lines += [
        "",
        "| fit (0: the labels' runs; then DAgger rounds) | samples | loss |",
        "|---|---|---|",
    ]
    for r, (n, loss) in enumerate(zip(warm["samples"], warm["loss"], strict=True)):
        lines.append(f"| {r} | {n:,} | {loss:.4g} |")
    secs = ", ".join(f"{k} {v:.0f} s" for k, v in warm.get("seconds", {}).items())
    if secs:
        lines += ["", f"Time: {secs}."]
    return "\n".join(lines)


def guide_markdown(
    algo: str,
    references: Mapping[str, float],
    node_names: Sequence[str],
    n_tenants: int,
    reward: str,
    eval_interval: int,
    eval_episodes: int,
    eval_seed: int,
    scenario: str,
    family: bool = True,
) -> str:
    """The ``guide`` text card: where to look, units, tenant slots, evaluation seeds, ratios.

    ``family``: the scenario is a family (episodes draw different scenarios, as
    ``mixed``), so a tenant slot holds different tenants across episodes.
    """
    best = max(references, key=lambda k: references[k]) if references else None
    evaluation = (
        f"every {eval_interval:,} training steps and once at step 0"
        if eval_interval > 0
        else "off for this run (--eval-interval 0)"
    )
    last_seed = eval_seed + eval_episodes - 1
    lines = [
        "## How to read this run",
        "",
        f"**Start at Custom Scalars**, chart *{COMPARISON_CHART}*: `{EVAL}` of `{algo}` (the "
        "policy being trained) and of every reference heuristic on one axis, each line in its "
        f"own colour, then *{MARGIN_CHART}*. TensorBoard colours and names a line by its run "
        f"(event-file folder): `{EVAL} (<run>/tensorboard)` is `{algo}`, "
        f"`{EVAL} (<run>/tensorboard/<reference>)` a reference "
        + (
            f"({', '.join(f'`{reference_run(r)}`' for r in references)}), "
            if references
            else "(none in this run), "
        )
        + "and the Runs list on the left shows or hides each. TensorBoard has seven run "
        "colours, given in the order runs start: the references' runs start best first, so "
        "with more than six the weakest share colours (the chart's Matches list names each "
        "line). "
        "The evaluation curves have about 20 points: set the smoothing slider to 0 for them.",
        "",
        "**Units** are in the tag names: `GBps` = GB/s and `MBps` = MB/s (bytes, 10^9 and "
        "10^6 per second, not bits), `GiB` = 2^30 bytes, `ns` = nanoseconds, `_frac` = a "
        "fraction in 0..1, `norm_perf_vs_alone` = a tenant's throughput over its throughput "
        "alone in local DRAM (1 = no slowdown), `utilization_frac` = bandwidth over the "
        "node's peak at the current read:write mix. Each card's description says more.",
        "",
        "| namespace | what | written |",
        "|---|---|---|",
        "| `env/` | means over one rollout of the training environment (every instance and "
        "step) | after every rollout |",
        f"| `eval/` | `{EVAL}`: mean `{METRIC}` on the held-out episodes, of `{algo}` in the "
        "run's own folder and of each reference on the same episodes in the sub-folder named "
        f"after it | {evaluation} |",
        f"| `eval_ratio/` | `{algo}` over the best reference ({best or 'none'}) and over "
        "`dram-first`, with `_low`/`_high` bounds | with `eval/` |",
        "| `train/` | the update's losses and statistics, at the step it trained on | after "
        "every update |",
        "| `time/`, `rollout/` | speed, evaluation time, episode returns | after every rollout |",
        "",
        f"**Nodes**: {', '.join(node_names)} (per node: `env/node/<node>/...`).",
        "",
        f"**Tenant slots**: `env/tenant_slot<k>/` (k = 0..{n_tenants - 1}) are the "
        "environment's slots, not tenants; values are means over the steps a slot is active "
        "(a slot with no tenant in a rollout logs nothing). "
        + (
            f"`{scenario}` is a family: every episode draws its own machine and tenants, so a "
            "slot holds different tenants in different episodes and its curve mixes them; "
            "`env/tenants/norm_perf_vs_alone` is the mean over all active tenants."
            if family
            else f"`{scenario}` is one scenario: slot k is its k-th tenant in every episode."
        ),
        "",
        f"**Reward**: all four terms are logged under `env/reward/`; the one trained on "
        f"(`{reward}`) is marked `(trained)`.",
        "",
        f"**Evaluation** ({evaluation}): the deterministic policy runs {eval_episodes} "
        f"episodes of the **val** (validation) split, seeds {eval_seed}..{last_seed} (episode i has seed "
        f"{eval_seed} + i; in a family the seed also draws the machine and tenants). "
        f"`{METRIC}` of an episode is the exp of its mean per-step log geometric mean of the "
        f"active tenants' normalised performance; `{EVAL}` is the mean over the "
        "episodes. The references are scored once on the same seeds (flat lines).",
        "",
        f"**Ratios**: mean over the {eval_episodes} episodes of `{algo}`'s `{METRIC}` over the "
        "reference's on the same seed (paired), with a 95% percentile bootstrap interval "
        "(2,000 resamples of the episodes). Above 1 with `_low` above 1: the learned policy "
        "beats that reference on these episodes.",
    ]
    return "\n".join(lines)
