"""Files that load without running code: models, reward statistics, replay buffers, random state.

stable-baselines3's ``save``/``load`` pickle: its ``model.zip`` holds
cloudpickled objects, and ``VecNormalize.save``, ``save_replay_buffer`` and a
pickled random state do the same, so loading one of those files runs
whatever its author put in it. Everything here is written and read as data
only (README "Trust model"):

- **model** (``model.zip``, a ZIP archive of exactly two members):
  ``tiergym-model.json`` (format and version, algorithm, policy name,
  constructor hyperparameters with ``policy_kwargs``, observation and action
  spaces, ``n_envs``, the training counters ``num_timesteps``, ``n_updates``,
  ``episode_num`` and the episode-statistics window, the env settings and
  seed) and ``weights.pt``, written by :func:`torch.save` and read by
  ``torch.load(weights_only=True)`` (tensors and plain containers only): the
  state dicts of the policy and of every optimizer, and SB3's extra tensors
  (SAC's ``log_ent_coef``). The model is rebuilt from the JSON (class,
  policy, ``policy_kwargs``, spaces) and the state dicts are loaded into it.
- **reward normalisation** (``vecnormalize.npz``, ``np.load(allow_pickle=False)``):
  ``ret_mean``, ``ret_var``, ``ret_count``, ``returns`` (the running
  discounted return of every instance), ``obs_mean``/``obs_var``/``obs_count``
  when observations are normalised, ``clip_obs``, ``clip_reward``, ``gamma``,
  ``epsilon``, ``norm_obs``, ``norm_reward``.
- **replay buffer** (``replay_buffer.npz``, off-policy algorithms): the filled
  rows of ``observations``, ``next_observations``, ``actions``, ``rewards``,
  ``dones``, ``timeouts``, and ``pos``, ``full``, ``buffer_size``, ``n_envs``.
- **random state** (``rng.json``): Python's ``random``, NumPy's legacy global
  generator (which SB3 draws from), torch's CPU generator and the action
  space's generator.

Every reader checks sizes, names, shapes and types and raises
:class:`ModelFileError` (a ``ValueError``) naming the file; an archive
written by stable-baselines3 raises :class:`UntrustedFileError` instead of
being opened. This module imports nothing of the project.
"""

# relative imports: the package re-exports its modules' ``__all__`` (tests/test_layers.py
# follows the modules)
from . import files, model, state
from .files import *  # noqa: F403
from .model import *  # noqa: F403
from .state import *  # noqa: F403

__all__ = [*files.__all__, *model.__all__, *state.__all__]
