"""What a training run writes to TensorBoard: tag names, their descriptions, the layout, the cards.

The package's modules, each re-exported here:

- :mod:`agents.tensorboard.tags`: the tag names (every one with its unit, in the
  ``env/``, ``eval/``, ``eval_ratio/``, ``time/``, ``train/`` and ``rollout/``
  namespaces) and :func:`describe`, each tag's description;
- :mod:`agents.tensorboard.custom_scalars`: :func:`layout`, the Custom Scalars
  view (the learned policy and the references on one axis, each in its own colour as a
  run of its own, the ratio with its interval, one chart per quantity with every node or tenant slot) and
  :func:`write_custom_scalars`;
- :mod:`agents.tensorboard.cards`: the text cards, :func:`guide_markdown`,
  :func:`hyperparameter_markdown` (with :func:`hparam_values`, the settings for the
  hparams plugin) and :func:`warm_start_markdown`;
- :mod:`agents.tensorboard.logger`: :func:`make_logger`, the stable-baselines3 logger
  that writes all of it (:class:`DescribedTensorBoardFormat`), purging events past
  the checkpoint a resumed run starts from.
"""

# Relative imports: a package's own re-exports are not import edges in
# tests/test_layers.py; the modules below carry the edges with absolute imports.
from .cards import guide_markdown, hparam_values, hyperparameter_markdown, warm_start_markdown
from .custom_scalars import (
    COMPARISON_CHART,
    LEARNING_CHART,
    MARGIN_CHART,
    layout,
    write_custom_scalars,
)
from .logger import DescribedTensorBoardFormat, make_logger
from .tags import (
    ACTION_PROMOTE,
    DEMOTION,
    ENV_SPS,
    EPISODE_RETURN,
    EVAL,
    EVAL_SECONDS,
    EXPLAINED_VARIANCE,
    METRIC,
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
    describe,
    eval_tag,
    node_tag,
    ratio_tags,
    reference_run,
    reward_tag,
    slot_tag,
)

__all__ = [
    "ACTION_PROMOTE",
    "COMPARISON_CHART",
    "DEMOTION",
    "ENV_SPS",
    "EPISODE_RETURN",
    "EVAL",
    "EVAL_SECONDS",
    "EXPLAINED_VARIANCE",
    "LEARNING_CHART",
    "MARGIN_CHART",
    "METRIC",
    "NODE_QUANTITIES",
    "PROMOTION",
    "REWARD_TERMS",
    "SLOT_QUANTITIES",
    "SOLVER_MAX",
    "SOLVER_MEAN",
    "START",
    "THROUGHPUT",
    "DescribedTensorBoardFormat",
    "action_local_first_tag",
    "action_page_tag",
    "describe",
    "eval_tag",
    "guide_markdown",
    "hparam_values",
    "hyperparameter_markdown",
    "layout",
    "make_logger",
    "node_tag",
    "ratio_tags",
    "reference_run",
    "reward_tag",
    "slot_tag",
    "warm_start_markdown",
    "write_custom_scalars",
]
