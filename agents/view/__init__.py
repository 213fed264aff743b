"""The agent's view of the environment, by concern.

- :mod:`agents.config.view`: the view's env settings (``base_policy``, ``residual_scale``,
  ``mixing``, ``residual_bases``, ``residual_codec``, ``pad_nodes``) as one frozen,
  checked :class:`ViewConfig`;
- :mod:`agents.view.padding`: the padded layout of one machine (``pad_nodes``), its
  parts by name, and the observation and action padding;
- :mod:`agents.view.mixing`: several bases, soft or hard, and the residual's gate;
- :mod:`agents.view.codec`: the residual codecs ``box`` and ``share``;
- :mod:`agents.view.interface`: :class:`AgentInterface`, which composes them between an
  environment and a trained network, for training and evaluation alike;
- :mod:`agents.view.vec_env`: the training environments (:func:`make_training_vec_env`);
- :mod:`agents.view.policy`: :class:`LearnedPolicy`, a trained model behind the rollout
  protocol (what evaluation and the imitation phase run).

The DRAM share and its weights (``SHARE_TOP``, :func:`dram_share`) come from
:mod:`baselines.placement`.
"""

# each module's ``__all__`` is its public names, re-exported here as they are
from agents.config import view as _settings
from agents.config.view import *  # noqa: F403
from agents.view import interface, padding, policy, vec_env
from agents.view.interface import *  # noqa: F403
from agents.view.padding import *  # noqa: F403
from agents.view.policy import *  # noqa: F403
from agents.view.vec_env import *  # noqa: F403
from baselines.placement import SHARE_TOP, dram_share

__all__ = [
    "SHARE_TOP",
    "dram_share",
    *_settings.__all__,
    *interface.__all__,
    *padding.__all__,
    *policy.__all__,
    *vec_env.__all__,
]
