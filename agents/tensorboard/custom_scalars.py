"""The Custom Scalars view of a run: its layout, and the layout written to an event file.

:func:`layout` builds the Custom Scalars layout, in reading order: the learned
policy and the references on one axis (:data:`COMPARISON_CHART`: the tag
:data:`~agents.tensorboard.tags.EVAL` in every run, the learned policy's in the run's
own folder and each reference's in its sub-folder, so TensorBoard, which colours a
chart's lines by run, gives each its colour and names it ``eval/geomean_perf (<run>)``), the ratio
with its interval (:data:`MARGIN_CHART`), whether it is learning (:data:`LEARNING_CHART`:
the paired return, the value function's explained variance, the ratio to itself at step 0
and to the best heuristic), then one chart per quantity with
every node or tenant slot, the migration and the policy's actions, the reward
terms and the solver, and the training statistics.
:func:`write_custom_scalars` writes a layout into a ``SummaryWriter``'s events.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
from tensorboard.compat.proto.tensor_pb2 import TensorProto
from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
from tensorboard.plugins.custom_scalar import layout_pb2

from agents.tensorboard.tags import (
    ACTION_PROMOTE,
    DEMOTION,
    ENV_SPS,
    EPISODE_RETURN,
    EVAL,
    EVAL_SECONDS,
    EXPLAINED_VARIANCE,
    NODE_QUANTITIES,
    PROMOTION,
    REWARD_TERMS,
    SLOT_QUANTITIES,
    SOLVER_MAX,
    SOLVER_MEAN,
    START,
    THROUGHPUT,
    action_local_first_tag,
    action_page_tag,
    node_tag,
    ratio_tags,
    reward_tag,
    slot_tag,
)

__all__ = ["COMPARISON_CHART", "LEARNING_CHART", "MARGIN_CHART", "layout", "write_custom_scalars"]

COMPARISON_CHART = (
    "learned policy (the run) and references (a run each): mean geomean_perf on held-out episodes"
)
MARGIN_CHART = "beats the heuristics? ratio to the best reference and to dram-first (95% CI)"
LEARNING_CHART = (
    "is it learning? paired return, value explained variance, ratio to itself at step 0 "
    "and to the best heuristic"
)


def _exact(tags: Sequence[str]) -> list[str]:
    """Custom Scalars take regular expressions: match exactly these tags."""
    return [f"^{re.escape(t)}$" for t in tags]


def _multiline(title: str, tags: Sequence[str]) -> layout_pb2.Chart:
    return layout_pb2.Chart(title=title, multiline=layout_pb2.MultilineChartContent(tag=tags))


def _comparison_charts(algo: str) -> list[layout_pb2.Chart]:
    """The learned policy and the references on one axis (one tag, a run each); its ratios
    with their intervals; whether it is learning."""
    margin = layout_pb2.MarginChartContent(
        series=[
            layout_pb2.MarginChartContent.Series(value=v, lower=lo, upper=hi)
            for v, lo, hi in (ratio_tags(algo, "best_ref"), ratio_tags(algo, "dram-first"))
        ]
    )
    learning = [
        EPISODE_RETURN,
        EXPLAINED_VARIANCE,
        ratio_tags(algo, START)[0],
        ratio_tags(algo, "best_ref")[0],
    ]
    return [
        _multiline(COMPARISON_CHART, _exact([EVAL])),
        layout_pb2.Chart(title=MARGIN_CHART, margin=margin),
        _multiline(LEARNING_CHART, _exact(learning)),
    ]


def _node_charts(node_names: Sequence[str]) -> list[layout_pb2.Chart]:
    """One chart per node quantity, every node on it."""
    return [
        _multiline(f"{q} (every node)", _exact([node_tag(n, q) for n in node_names]))
        for q in NODE_QUANTITIES
    ]


def _slot_charts(n_tenants: int) -> list[layout_pb2.Chart]:
    """One chart per tenant-slot quantity, every slot on it (and the mean of all for norm_perf)."""
    return [
        _multiline(
            f"{q} (every tenant slot)",
            _exact(
                [slot_tag(t, q) for t in range(n_tenants)]
                + ([slot_tag("s", q)] if q == "norm_perf_vs_alone" else [])
            ),
        )
        for q in SLOT_QUANTITIES
    ]


def _migration_charts(node_names: Sequence[str], n_tenants: int) -> list[layout_pb2.Chart]:
    """Promotion and demotion, then the actions: page shares per node, local-first, rate limit."""
    slots = range(n_tenants)
    return [
        _multiline("promotion and demotion, MBps", _exact([PROMOTION, DEMOTION])),
        *(
            _multiline(
                f"new-page share on {n} set by the weights (every tenant slot)",
                _exact([action_page_tag(t, n) for t in slots]),
            )
            for n in node_names
        ),
        _multiline(
            "local-first fraction (every tenant slot)",
            _exact([action_local_first_tag(t) for t in slots]),
        ),
        _multiline("promotion rate limit set, MBps", _exact([ACTION_PROMOTE])),
    ]


def _system_charts(reward: str | None) -> list[layout_pb2.Chart]:
    """The reward terms (the trained one marked), the system throughput, the solver residual."""
    return [
        _multiline(
            "reward terms, mean per step",
            _exact([reward_tag(t, reward) for t in REWARD_TERMS]),
        ),
        _multiline("system throughput, GBps", _exact([THROUGHPUT])),
        _multiline("solver residual", _exact([SOLVER_MEAN, SOLVER_MAX])),
    ]


def _training_charts() -> list[layout_pb2.Chart]:
    """stable-baselines3's losses and statistics, the speed, the evaluation time."""
    return [
        _multiline("losses", [r"^train/.*loss$"]),
        _multiline("approx_kl, clip_fraction", [r"^train/(approx_kl|clip_fraction)$"]),
        _multiline("steps per second", _exact(["time/fps", ENV_SPS])),
        _multiline("evaluation time, s", _exact([EVAL_SECONDS])),
    ]


def layout(
    algo: str, node_names: Sequence[str], n_tenants: int, reward: str | None = None
) -> layout_pb2.Layout:
    """The Custom Scalars layout of a run (its categories and charts, in reading order).

    The references need no entry of their own: the first chart matches the tag they share
    with the learned policy, in their runs (:func:`~agents.tensorboard.tags.reference_run`)
    as in the run's own folder.
    """
    cats = [
        layout_pb2.Category(
            title="1. learned policy vs references (held-out evaluation)",
            chart=_comparison_charts(algo),
        ),
        layout_pb2.Category(title="2. nodes (training rollouts)", chart=_node_charts(node_names)),
        layout_pb2.Category(
            title="3. tenant slots (training rollouts)", chart=_slot_charts(n_tenants)
        ),
        layout_pb2.Category(
            title="4. migration and the policy's actions",
            chart=_migration_charts(node_names, n_tenants),
        ),
        layout_pb2.Category(
            title="5. reward terms, throughput, solver", chart=_system_charts(reward)
        ),
        layout_pb2.Category(title="6. training", chart=_training_charts(), closed=True),
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
