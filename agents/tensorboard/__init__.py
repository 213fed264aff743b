"""What a training run writes to TensorBoard: tag names, their descriptions, the layout, the cards.

The package's modules, each re-exported here:

- :mod:`agents.tensorboard.tags`: the tag names (every one with its unit, in the
  ``env/``, ``eval/``, ``eval_ratio/``, ``time/``, ``train/`` and ``rollout/``
  namespaces) and :func:`describe`, each tag's description;
- :mod:`agents.tensorboard.custom_scalars`: :func:`layout`, the Custom Scalars view, and
  :func:`write_custom_scalars`;
- :mod:`agents.tensorboard.cards`: the text cards, :func:`guide_markdown`,
  :func:`hyperparameter_markdown` (with :func:`hparam_values`, the settings for the
  hparams plugin) and :func:`warm_start_markdown`;
- :mod:`agents.tensorboard.logger`: :func:`make_logger`, the stable-baselines3 logger
  that writes all of it (:class:`DescribedTensorBoardFormat`), purging events past
  the checkpoint a resumed run starts from.
"""

# Relative imports: a package's own re-exports are not import edges in
# tests/test_layers.py; the modules below carry the edges with absolute imports. Each
# module's ``__all__`` is its public names, re-exported here as they are.
from . import cards, custom_scalars, logger, tags
from .cards import *  # noqa: F403
from .custom_scalars import *  # noqa: F403
from .logger import *  # noqa: F403
from .tags import *  # noqa: F403

__all__ = [*cards.__all__, *custom_scalars.__all__, *logger.__all__, *tags.__all__]
