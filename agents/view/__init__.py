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

from agents.config.view import (
    DEFAULT_RESIDUAL_SCALE,
    MIXINGS,
    RESIDUAL_CODECS,
    RESIDUAL_KEYS,
    ViewConfig,
    base_names,
    environment_config,
    residual_base_mask,
    view_settings,
)
from agents.view.interface import (
    AgentInterface,
    agent_layout,
    agent_spaces,
    make_interface,
    privileged_width,
)
from agents.view.padding import NODE_DESCRIPTORS, PaddedLayout, padded_sizes
from agents.view.policy import LearnedPolicy, PolicyError
from agents.view.vec_env import AgentVecEnv, ConcatVecEnv, make_training_vec_env
from baselines.placement import SHARE_TOP, dram_share

__all__ = [
    "DEFAULT_RESIDUAL_SCALE",
    "MIXINGS",
    "NODE_DESCRIPTORS",
    "RESIDUAL_CODECS",
    "RESIDUAL_KEYS",
    "SHARE_TOP",
    "AgentInterface",
    "AgentVecEnv",
    "ConcatVecEnv",
    "LearnedPolicy",
    "PaddedLayout",
    "PolicyError",
    "ViewConfig",
    "agent_layout",
    "agent_spaces",
    "base_names",
    "dram_share",
    "environment_config",
    "make_interface",
    "make_training_vec_env",
    "padded_sizes",
    "privileged_width",
    "residual_base_mask",
    "view_settings",
]
