"""What a training run writes to TensorBoard: tag names, their descriptions, the layout.

Every tag says its unit in its name (``GBps`` = GB/s, ``MBps`` = MB/s, ``GiB``,
``ns``, ``_frac`` = a fraction in 0..1) and keeps one of the namespaces

- ``env/``: means over one rollout of the training environment (every instance
  and step of the rollout), per node (``env/node/<node>/...``), per tenant slot
  (``env/tenant_slot<k>/...``), migration, the policy's actions
  (``env/action/...``), the reward terms (``env/reward/...``, the trained one
  marked ``(trained)``) and the model's solver;
- ``eval/``: the mean ``geomean_perf`` of the learned policy and of every
  reference heuristic on the same held-out episodes;
- ``eval_ratio/``: the learned policy over the best reference and over
  ``dram-first``, with the bounds of a bootstrap interval as their own tags;
- ``time/``, ``train/``, ``rollout/``: stable-baselines3's own, plus
  ``time/env_sps`` and ``time/eval_s``.

:func:`describe` gives each tag its description (written once per tag in the
``SummaryMetadata``, so TensorBoard shows it with the card); :func:`layout`
builds the Custom Scalars layout (the learned policy and the references on one
axis, the ratio with its interval, one chart per quantity with every node or
tenant slot); :func:`guide_markdown` and :func:`hyperparameter_markdown` are the
text cards; :func:`make_logger` is the stable-baselines3 logger that writes all
of it, purging events past the checkpoint a resumed run starts from.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from stable_baselines3.common.logger import HParam, Logger, TensorBoardOutputFormat
from tensorboard.compat.proto.summary_pb2 import DataClass, Summary, SummaryMetadata
from tensorboard.compat.proto.tensor_pb2 import TensorProto
from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
from tensorboard.plugins.custom_scalar import layout_pb2

__all__ = [
    "COMPARISON_CHART",
    "MARGIN_CHART",
    "DescribedTensorBoardFormat",
    "describe",
    "eval_tag",
    "guide_markdown",
    "hparam_values",
    "hyperparameter_markdown",
    "layout",
    "make_logger",
    "node_tag",
    "ratio_tags",
    "reward_tag",
    "slot_tag",
    "write_custom_scalars",
]

METRIC = "geomean_perf"

# ---------------------------------------------------------------------------- tag names

NODE_QUANTITIES = {
    "bandwidth_GBps": "Bandwidth (reads + writes, migrations included) of node {x}, GB/s.",
    "latency_ns": "Loaded latency of a local access to node {x}, ns.",
    "utilization_frac": (
        "Utilisation of node {x}'s bottleneck resource (memory or CXL link), "
        "0..1: bandwidth over the peak at this interval's read:write mix."
    ),
    "capacity_used_GiB": "Memory in use on node {x}, GiB.",
    "capacity_used_frac": "Memory in use on node {x} over its capacity, 0..1.",
}
SLOT_QUANTITIES = {
    "norm_perf_vs_alone": (
        "Normalised performance of the tenant in slot {x}: its throughput over the same "
        "tenant's throughput alone in local DRAM (1 = no slowdown). Mean over the steps "
        "the slot is active; in a family (mixed) the slot holds different tenants in "
        "different episodes."
    ),
    "dram_access_frac": (
        "Share of the accesses of the tenant in slot {x} served by DRAM nodes, 0..1 "
        "(mean over active steps)."
    ),
    "latency_ns": "Mean memory latency seen by the tenant in slot {x}, ns (active steps).",
    "dram_resident_GiB": "Pages of the tenant in slot {x} resident in DRAM, GiB (active steps).",
}


def node_tag(node: str, quantity: str) -> str:
    """``env/node/<node>/<quantity>`` (a key of :data:`NODE_QUANTITIES`)."""
    return f"env/node/{node}/{quantity}"


def slot_tag(slot: int | str, quantity: str) -> str:
    """``env/tenant_slot<k>/<quantity>``; ``slot="s"`` gives ``env/tenants/...`` (all slots)."""
    return f"env/tenant_slot{slot}/{quantity}" if slot != "s" else f"env/tenants/{quantity}"


def action_page_tag(slot: int, node: str) -> str:
    return f"env/action/tenant_slot{slot}/page_frac_{node}"


def action_local_first_tag(slot: int) -> str:
    return f"env/action/tenant_slot{slot}/local_first_frac"


ACTION_PROMOTE = "env/action/promote_limit_MBps"
PROMOTION = "env/migration/promotion_MBps"
DEMOTION = "env/migration/demotion_MBps"
THROUGHPUT = "env/system/throughput_GBps"
SOLVER_MEAN = "env/solver/residual_mean"
SOLVER_MAX = "env/solver/residual_max"
ENV_SPS = "time/env_sps"
EVAL_SECONDS = "time/eval_s"
REWARD_TERMS = ("log_geomean", "throughput", "weighted_speedup", "harmonic")


def reward_tag(term: str, trained: str | None) -> str:
    """``env/reward/<term>``, with `` (trained)`` for the term the run trains on.

    ``term`` is a reward-term name (``log_geomean``) and ``trained`` the run's
    ``--reward`` (``log-geomean``) or ``None``.
    """
    mark = trained is not None and trained.replace("-", "_") == term
    return f"env/reward/{term}" + (" (trained)" if mark else "")


def eval_tag(policy: str) -> str:
    return f"eval/{policy}"


def ratio_tags(algo: str, versus: str) -> tuple[str, str, str]:
    """``(value, lower, upper)`` tags of the learned policy's ratio to ``versus``.

    ``versus`` is ``"best_ref"`` (the best reference of the run) or a reference name.
    """
    base = f"eval_ratio/{algo}_vs_{versus}"
    return base, base + "_low", base + "_high"


# ---------------------------------------------------------------------------- descriptions

_SB3 = {
    "time/fps": "Training steps per second of wall time since this process started learning.",
    "time/iterations": "Rollouts collected so far by this process.",
    "time/time_elapsed": "Seconds since this process started learning.",
    "time/total_timesteps": "Environment steps so far (instances x steps).",
    ENV_SPS: "Environment steps per second of wall time spent inside the environment.",
    EVAL_SECONDS: "Wall time of this evaluation (rollout of the learned policy, ratios), s.",
    "rollout/ep_rew_mean": "Mean return of the episodes finished recently (VecMonitor).",
    "rollout/ep_len_mean": "Mean length, in steps, of the episodes finished recently.",
    "train/learning_rate": "Learning rate of this update.",
    "train/n_updates": "Gradient steps so far.",
    "train/loss": "Total loss of the last minibatch of this update.",
    "train/value_loss": "Value-function loss, mean over this update.",
    "train/policy_gradient_loss": "Policy-gradient (clipped surrogate) loss, mean over this update.",
    "train/entropy_loss": "Negative entropy of the policy, mean over this update.",
    "train/approx_kl": "Approximate KL divergence between the old and the new policy.",
    "train/clip_fraction": "Fraction of samples whose probability ratio was clipped.",
    "train/clip_range": "PPO's clip range.",
    "train/explained_variance": "Explained variance of the value function on this rollout.",
    "train/std": "Standard deviation of the Gaussian policy (mean over action entries).",
}


def describe(tag: str) -> str | None:
    """The description of a tag this project writes (``None`` for one it does not know)."""
    if tag in _SB3:
        return _SB3[tag]
    m = re.fullmatch(r"env/node/([^/]+)/(\w+)", tag)
    if m and m.group(2) in NODE_QUANTITIES:
        return NODE_QUANTITIES[m.group(2)].format(x=m.group(1)) + " Mean over the rollout."
    m = re.fullmatch(r"env/tenant_slot(\d+)/(\w+)", tag)
    if m and m.group(2) in SLOT_QUANTITIES:
        return SLOT_QUANTITIES[m.group(2)].format(x=m.group(1))
    if tag == slot_tag("s", "norm_perf_vs_alone"):
        return "Normalised performance (throughput over alone in local DRAM) of every active tenant, mean."
    m = re.fullmatch(r"env/action/tenant_slot(\d+)/page_frac_(.+)", tag)
    if m:
        return (
            f"Policy action: share of slot {m.group(1)}'s new pages its interleave weights place "
            f"on node {m.group(2)} (weight over the sum of its weights), 0..1; mean over the "
            "active steps that interleave (local-first steps are in local_first_frac)."
        )
    m = re.fullmatch(r"env/action/tenant_slot(\d+)/local_first_frac", tag)
    if m:
        return (
            f"Policy action: fraction of slot {m.group(1)}'s active steps with every weight 0, "
            "i.e. local-first allocation (no interleave)."
        )
    if tag == ACTION_PROMOTE:
        return "Policy action: the promotion rate limit set (numa_balancing_promote_rate_limit_MBps), MB/s."
    if tag == PROMOTION:
        return "Pages promoted from CXL to DRAM, MB/s."
    if tag == DEMOTION:
        return "Pages demoted from DRAM to CXL (kswapd, memory.high), MB/s."
    if tag == THROUGHPUT:
        return "Memory throughput of all tenants together, GB/s."
    if tag == SOLVER_MEAN:
        return "Residual of the model's fixed point (rates and loaded latencies), mean over steps."
    if tag == SOLVER_MAX:
        return "Largest residual of the model's fixed point in the rollout (solver health)."
    m = re.fullmatch(r"env/reward/(\w+)( \(trained\))?", tag)
    if m:
        what = {
            "log_geomean": "log of the geometric mean of active tenants' normalised performance",
            "throughput": "total throughput over the machine's read peak",
            "weighted_speedup": "mean normalised performance of active tenants",
            "harmonic": "harmonic mean of active tenants' normalised performance",
        }.get(m.group(1), m.group(1))
        trained = " This is the term the policy is trained on." if m.group(2) else ""
        return f"Reward term: {what}, mean per step.{trained}"
    m = re.fullmatch(r"eval_ratio/(.+)_vs_(.+?)(_low|_high)?", tag)
    if m:
        ref = "the best reference" if m.group(2) == "best_ref" else m.group(2)
        bound = {"_low": "Lower bound of ", "_high": "Upper bound of ", None: ""}[m.group(3)]
        return (
            f"{bound}{m.group(1)} over {ref}: mean over the evaluation episodes of the paired "
            f"ratio of {METRIC} (same seed), 95% percentile bootstrap over the episodes."
        )
    m = re.fullmatch(r"eval/(.+)", tag)
    if m:
        return (
            f"{m.group(1)}: mean {METRIC} (geometric mean of tenants' normalised performance "
            "per episode) over the held-out test-split evaluation episodes."
        )
    return None


# ---------------------------------------------------------------------------- layout

COMPARISON_CHART = "learned policy and references: mean geomean_perf on held-out episodes"
MARGIN_CHART = "beats the heuristics? ratio to the best reference and to dram-first (95% CI)"


def _exact(tags: Sequence[str]) -> list[str]:
    """Custom Scalars take regular expressions: match exactly these tags."""
    return [f"^{re.escape(t)}$" for t in tags]


def _multiline(title: str, tags: Sequence[str]) -> layout_pb2.Chart:
    return layout_pb2.Chart(title=title, multiline=layout_pb2.MultilineChartContent(tag=tags))


def layout(
    algo: str,
    references: Sequence[str],
    node_names: Sequence[str],
    n_tenants: int,
    reward: str | None = None,
    versus: str = "dram-first",
) -> layout_pb2.Layout:
    """The Custom Scalars layout of a run (its categories and charts, in reading order)."""
    policies = [algo, *references]
    margin = layout_pb2.MarginChartContent(
        series=[
            layout_pb2.MarginChartContent.Series(value=v, lower=lo, upper=hi)
            for v, lo, hi in (ratio_tags(algo, "best_ref"), ratio_tags(algo, versus))
        ]
    )
    slots = range(n_tenants)
    node_charts = [
        _multiline(f"{q} (every node)", _exact([node_tag(n, q) for n in node_names]))
        for q in NODE_QUANTITIES
    ]
    slot_charts = [
        _multiline(
            f"{q} (every tenant slot)",
            _exact(
                [slot_tag(t, q) for t in slots]
                + ([slot_tag("s", q)] if q == "norm_perf_vs_alone" else [])
            ),
        )
        for q in SLOT_QUANTITIES
    ]
    action_charts = [
        _multiline(
            f"new-page share on {n} set by the weights (every tenant slot)",
            _exact([action_page_tag(t, n) for t in slots]),
        )
        for n in node_names
    ]
    action_charts += [
        _multiline(
            "local-first fraction (every tenant slot)",
            _exact([action_local_first_tag(t) for t in slots]),
        ),
        _multiline("promotion rate limit set, MBps", _exact([ACTION_PROMOTE])),
    ]
    cats = [
        layout_pb2.Category(
            title="1. learned policy vs references (held-out evaluation)",
            chart=[
                _multiline(COMPARISON_CHART, _exact([eval_tag(p) for p in policies])),
                layout_pb2.Chart(title=MARGIN_CHART, margin=margin),
            ],
        ),
        layout_pb2.Category(title="2. nodes (training rollouts)", chart=node_charts),
        layout_pb2.Category(title="3. tenant slots (training rollouts)", chart=slot_charts),
        layout_pb2.Category(
            title="4. migration and the policy's actions",
            chart=[
                _multiline("promotion and demotion, MBps", _exact([PROMOTION, DEMOTION])),
                *action_charts,
            ],
        ),
        layout_pb2.Category(
            title="5. reward terms, throughput, solver",
            chart=[
                _multiline(
                    "reward terms, mean per step",
                    _exact([reward_tag(t, reward) for t in REWARD_TERMS]),
                ),
                _multiline("system throughput, GBps", _exact([THROUGHPUT])),
                _multiline("solver residual", _exact([SOLVER_MEAN, SOLVER_MAX])),
            ],
        ),
        layout_pb2.Category(
            title="6. training",
            chart=[
                _multiline("losses", [r"^train/.*loss$"]),
                _multiline("approx_kl, clip_fraction", [r"^train/(approx_kl|clip_fraction)$"]),
                _multiline("steps per second", _exact(["time/fps", ENV_SPS])),
                _multiline("evaluation time, s", _exact([EVAL_SECONDS])),
            ],
            closed=True,
        ),
    ]
    return layout_pb2.Layout(category=cats)


def write_custom_scalars(writer: Any, lay: layout_pb2.Layout) -> None:
    """Write the layout once to a (torch) ``SummaryWriter``'s event file, at step 0."""
    tensor = TensorProto(
        dtype="DT_STRING", string_val=[lay.SerializeToString()], tensor_shape=TensorShapeProto()
    )
    meta = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="custom_scalars"))
    summary = Summary(
        value=[Summary.Value(tag="custom_scalars__config__", tensor=tensor, metadata=meta)]
    )
    writer.file_writer.add_summary(summary, 0)


# ---------------------------------------------------------------------------- text cards


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
        "hyperparams_source": cfg.hyperparams_source,
    }
    flat.update({f"env.{k}": value(v) for k, v in cfg.env.items()})
    flat.update({k: value(v) for k, v in cfg.hyperparams.items()})
    return {k: v for k, v in flat.items() if v is not None}


def hyperparameter_markdown(
    cfg: Any,
    command: Sequence[str] | str | None,
    eval_seed: int | None,
    references: Mapping[str, float] | None = None,
) -> str:
    """The hyperparameter text card: every setting, the evaluation, the references, the command."""
    flat = hparam_values(cfg)
    rows = [f"| {k} | {_cell(v)} |" for k, v in flat.items()]
    if eval_seed is not None:
        rows.append(
            f"| evaluation | every {cfg.eval_interval:,} steps and at step 0 (0 = off): "
            f"{cfg.eval_episodes} episodes of the test split, seeds {eval_seed}.."
            f"{eval_seed + cfg.eval_episodes - 1}, deterministic actions, metric {METRIC} |"
        )
    if references:
        scores = ", ".join(f"{k} {v:.4f}" for k, v in references.items())
        rows.append(f"| reference scores (same episodes) | {scores} |")
    if cfg.created:
        rows.append(f"| created | {cfg.created} |")
    if command is not None:
        cmd = command if isinstance(command, str) else shlex.join(command)
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
    versus: str = "dram-first",
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
        f"**Start at Custom Scalars**, chart *{COMPARISON_CHART}*: `eval/{algo}` (the policy "
        f"being trained) and every reference heuristic on one axis, then *{MARGIN_CHART}*. "
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
        f"| `eval/` | mean `{METRIC}` of `{algo}` and of each reference on the same held-out "
        f"episodes | {evaluation} |",
        f"| `eval_ratio/` | `{algo}` over the best reference ({best or 'none'}) and over "
        f"`{versus}`, with `_low`/`_high` bounds | with `eval/` |",
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
        f"episodes of the **test** split, seeds {eval_seed}..{last_seed} (episode i has seed "
        f"{eval_seed} + i; in a family the seed also draws the machine and tenants). "
        f"`{METRIC}` of an episode is the exp of its mean per-step log geometric mean of the "
        "active tenants' normalised performance; `eval/<policy>` is the mean over the "
        "episodes. The references are scored once on the same seeds (flat lines).",
        "",
        f"**Ratios**: mean over the {eval_episodes} episodes of `{algo}`'s `{METRIC}` over the "
        "reference's on the same seed (paired), with a 95% percentile bootstrap interval "
        "(2,000 resamples of the episodes). Above 1 with `_low` above 1: the learned policy "
        "beats that reference on these episodes.",
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------------------- the logger


def _hparams_summaries(
    hparams: Mapping[str, Any], metrics: Sequence[str]
) -> tuple[Summary, Summary, Summary]:
    """The hparams plugin's experiment, session start and end, values with their real types.

    (torch's ``hparams`` writes booleans as numbers: ``bool`` is an ``int``.)
    """
    from tensorboard.plugins.hparams import api_pb2, plugin_data_pb2

    def summary(tag: str, content: Any) -> Summary:
        meta = SummaryMetadata(
            plugin_data=SummaryMetadata.PluginData(
                plugin_name="hparams", content=content.SerializeToString()
            )
        )
        return Summary(value=[Summary.Value(tag=tag, metadata=meta)])

    infos = []
    start = plugin_data_pb2.SessionStartInfo()
    for k, v in hparams.items():
        if isinstance(v, bool):
            start.hparams[k].bool_value = v
            kind = "DATA_TYPE_BOOL"
        elif isinstance(v, int | float):
            start.hparams[k].number_value = float(v)
            kind = "DATA_TYPE_FLOAT64"
        elif isinstance(v, str):
            start.hparams[k].string_value = v
            kind = "DATA_TYPE_STRING"
        else:
            raise ValueError(f"hparam {k!r}: {type(v).__name__} is not a bool, number or string")
        infos.append(api_pb2.HParamInfo(name=k, type=api_pb2.DataType.Value(kind)))
    exp = api_pb2.Experiment(
        hparam_infos=infos,
        metric_infos=[
            api_pb2.MetricInfo(name=api_pb2.MetricName(tag=t), description=describe(t) or "")
            for t in metrics
        ],
    )
    end = plugin_data_pb2.SessionEndInfo(status=api_pb2.Status.Value("STATUS_SUCCESS"))
    return (
        summary(
            "_hparams_/experiment", plugin_data_pb2.HParamsPluginData(experiment=exp, version=0)
        ),
        summary(
            "_hparams_/session_start_info",
            plugin_data_pb2.HParamsPluginData(session_start_info=start, version=0),
        ),
        summary(
            "_hparams_/session_end_info",
            plugin_data_pb2.HParamsPluginData(session_end_info=end, version=0),
        ),
    )


class DescribedTensorBoardFormat(TensorBoardOutputFormat):
    """stable-baselines3's TensorBoard output with tag descriptions, typed hparams and purging.

    - The first value of every scalar tag carries its :func:`describe` text in
      its ``SummaryMetadata`` (``summary_description``), which TensorBoard keeps
      for the tag.
    - :class:`~stable_baselines3.common.logger.HParam` values are written with
      booleans as booleans.
    - A scalar is written at most once per step and never at a step before
      its last one (stable-baselines3's off-policy loop dumps twice at one step
      when several instances finish episodes together): the first value stays.
    - ``purge_step``: a resumed run passes the step of its checkpoint plus one;
      the writer opens its event file with a ``SessionLog.START`` at that step,
      and TensorBoard drops every event at or past it from the earlier files
      (what the killed process wrote after the checkpoint), so curves continue
      without duplicated or backwards steps.
    """

    def __init__(self, folder: str, purge_step: int | None = None) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=folder, purge_step=purge_step)
        self._is_closed = False
        self._described: set[str] = set()
        self._last_step: dict[str, int] = {}

    def _file_writer(self) -> Any:
        assert not self._is_closed, "the SummaryWriter was closed"
        return self.writer._get_file_writer()

    def write(
        self, key_values: dict[str, Any], key_excluded: dict[str, Any], step: int = 0
    ) -> None:
        rest_v: dict[str, Any] = {}
        rest_x: dict[str, Any] = {}
        summary = Summary()
        for key, value in key_values.items():
            excluded = key_excluded.get(key)
            if excluded is not None and "tensorboard" in excluded:
                continue
            if isinstance(value, HParam):
                for s in _hparams_summaries(value.hparam_dict, list(value.metric_dict)):
                    self._file_writer().add_summary(s, step)
            elif isinstance(value, int | float | np.integer | np.floating) and not isinstance(
                value, bool
            ):
                if step <= self._last_step.get(key, -1):
                    continue  # a second dump at one step (SB3's off-policy loop does that)
                self._last_step[key] = step
                v = summary.value.add(tag=key, simple_value=float(value))
                if key not in self._described:
                    self._described.add(key)
                    # plugin and data class set: TensorBoard's fast loader (Rust) then
                    # keeps the metadata of an old-style value, description included
                    v.metadata.plugin_data.plugin_name = "scalars"
                    v.metadata.data_class = DataClass.DATA_CLASS_SCALAR
                    v.metadata.summary_description = describe(key) or ""
            else:
                rest_v[key], rest_x[key] = value, excluded
        if summary.value:
            self._file_writer().add_summary(summary, step)
        if rest_v:
            super().write(rest_v, rest_x, step)
        self.writer.flush()


def make_logger(folder: str, stdout: bool = True, purge_step: int | None = None) -> Logger:
    """The run's logger: :class:`DescribedTensorBoardFormat` into ``folder`` (+ stdout)."""
    from stable_baselines3.common.logger import HumanOutputFormat

    formats: list[Any] = [DescribedTensorBoardFormat(folder, purge_step)]
    if stdout:
        # the unit-bearing tags are longer than SB3's 36-character default: truncated,
        # two tags could collide and the table would refuse them
        formats.append(HumanOutputFormat(sys.stdout, max_length=80))
    return Logger(folder=folder, output_formats=formats)
