"""What a run's env settings say about the agent's view: one frozen spec, checked once.

The view's settings (:data:`RESIDUAL_KEYS`, recorded in a run folder's env settings):

- ``base_policy``: ``None``, a heuristic name of :func:`baselines.policy_names` (the
  agent's action is a residual over its decision) or a list of distinct names (the
  agent also mixes them; the first is the zero action's);
- ``residual_scale``: how far a residual entry of 1 moves the decision
  (:data:`DEFAULT_RESIDUAL_SCALE`: half an entry's range);
- ``mixing``: how several bases combine (:data:`MIXINGS`, :mod:`agents.view.mixing`);
- ``residual_bases``: the bases the residual adjusts (default: all of them);
- ``residual_codec``: how the residual adjusts the weights (:data:`RESIDUAL_CODECS`,
  :mod:`agents.view.codec`);
- ``pad_nodes``: the nodes of the agent's view (:mod:`agents.view.padding`; ``None``:
  the machine's own);
- ``train_families``: the machine families trained on at once
  (:func:`agents.view.vec_env.make_training_vec_env`; not part of the spec).

:class:`ViewConfig` checks the rules between them when it is built; an error names the
setting it is about (``residual_codec: 'share' needs base_policy ...``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from envs.config import EnvConfig

__all__ = [
    "DEFAULT_RESIDUAL_SCALE",
    "MIXINGS",
    "RESIDUAL_CODECS",
    "RESIDUAL_KEYS",
    "ViewConfig",
    "base_names",
    "environment_config",
    "residual_base_mask",
    "view_settings",
]

DEFAULT_RESIDUAL_SCALE = 1.0
#: How the mixing entries combine several bases (the first is the default): ``soft`` moves
#: the decision part of the way towards each base; ``hard`` follows one base whole (the
#: largest entry above 0, else the first base).
MIXINGS = ("soft", "hard")
#: How the residual adjusts the weights (``residual_codec``; the first is the default): ``box``
#: entry by entry on the codec's log scale, ``share`` one DRAM share per weight row.
RESIDUAL_CODECS = ("box", "share")


def environment_config(settings: Mapping[str, Any], **changes: Any) -> EnvConfig:
    """The environment's arguments among a run's env settings, typed (the other settings are
    the view's, :data:`RESIDUAL_KEYS`), with ``changes`` in place of some of them.

    Raises:
        ValueError: a setting that is neither the environment's nor the view's, or a bad value.
    """
    own = EnvConfig.of(**{k: v for k, v in settings.items() if k not in RESIDUAL_KEYS})
    return dataclasses.replace(own, **changes) if changes else own


def view_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The view's settings among a run's env settings (:data:`RESIDUAL_KEYS`)."""
    return {k: v for k, v in settings.items() if k in RESIDUAL_KEYS}


def base_names(base_policy: str | Sequence[str] | None) -> list[str]:
    """``base_policy`` as a list of heuristic names (empty: no base).

    Raises:
        ValueError: an empty list, or a name given twice.
    """
    if base_policy is None:
        return []
    if isinstance(base_policy, str):
        return [base_policy]
    names = list(base_policy)
    if not names or len(set(names)) != len(names):
        raise ValueError(f"base_policy: got {names!r}, expected distinct heuristic names")
    return names


def residual_base_mask(
    base_policy: str | Sequence[str] | None, residual_bases: Sequence[str] | None
) -> NDArray[np.bool_]:
    """(K,) which of the bases the residual adjusts (``residual_bases``; ``None``: all of them).

    Raises:
        ValueError: ``residual_bases`` names a heuristic that is not a base, or none.
    """
    names = base_names(base_policy)
    if residual_bases is None:
        return np.ones(len(names), dtype=bool)
    picked = list(residual_bases)
    bad = [n for n in picked if n not in names]
    if not picked or bad or len(set(picked)) != len(picked):
        raise ValueError(
            f"residual_bases: got {picked!r}, expected distinct names of base_policy {names}"
        )
    return np.array([n in picked for n in names], dtype=bool)


@dataclass(frozen=True)
class ViewConfig:
    """The agent's view as a run's env settings give it (the module docstring), checked.

    Fields are the settings of the same names; lists are kept as tuples.

    Raises:
        ValueError: a setting out of its range, or settings that do not go together;
            the message starts with the setting's name.
    """

    base_policy: str | tuple[str, ...] | None = None
    residual_scale: float = DEFAULT_RESIDUAL_SCALE
    pad_nodes: int | None = None
    mixing: str = MIXINGS[0]
    residual_bases: tuple[str, ...] | None = None
    residual_codec: str = RESIDUAL_CODECS[0]
    #: the observation ends with what the episode still holds (:func:`envs.core.coming_tenants`),
    #: for the critic of an asymmetric actor-critic; zeros where it is not known (evaluation)
    privileged_critic: bool = False

    def __post_init__(self) -> None:
        if self.base_policy is not None and not isinstance(self.base_policy, str):
            object.__setattr__(self, "base_policy", tuple(self.base_policy))
        if self.residual_bases is not None:
            object.__setattr__(self, "residual_bases", tuple(self.residual_bases))
        scale = self.residual_scale
        if not (math.isfinite(scale) and scale > 0):
            raise ValueError(f"residual_scale: got {scale}, expected a number > 0")
        object.__setattr__(self, "residual_scale", float(scale))
        if self.mixing not in MIXINGS:
            raise ValueError(f"mixing: got {self.mixing!r}, expected one of {list(MIXINGS)}")
        if self.residual_codec not in RESIDUAL_CODECS:
            raise ValueError(
                f"residual_codec: got {self.residual_codec!r}, expected one of "
                f"{list(RESIDUAL_CODECS)}"
            )
        if self.residual_codec == "share" and self.base_policy is None:
            raise ValueError(
                "residual_codec: 'share' needs base_policy (a residual over a heuristic)"
            )
        if self.pad_nodes is not None and self.pad_nodes < 1:
            raise ValueError(f"pad_nodes: got {self.pad_nodes}, expected at least 1")
        residual_base_mask(self.base_policy, self.residual_bases)  # checks both

    @classmethod
    def from_env(cls, env_kwargs: Mapping[str, Any]) -> ViewConfig:
        """The spec that a run's env settings give (unset or null settings: the defaults)."""
        scale = env_kwargs.get("residual_scale")
        return cls(
            env_kwargs.get("base_policy"),
            DEFAULT_RESIDUAL_SCALE if scale is None else float(scale),
            env_kwargs.get("pad_nodes"),
            env_kwargs.get("mixing") or MIXINGS[0],
            env_kwargs.get("residual_bases"),
            env_kwargs.get("residual_codec") or RESIDUAL_CODECS[0],
            bool(env_kwargs.get("privileged_critic") or False),
        )

    @property
    def names(self) -> list[str]:
        """The bases' heuristic names, in order (empty: no base)."""
        return base_names(self.base_policy)

    @property
    def residual_mask(self) -> NDArray[np.bool_]:
        """(K,) whether the residual adjusts each base (:func:`residual_base_mask`)."""
        return residual_base_mask(self.base_policy, self.residual_bases)

    @property
    def active(self) -> bool:
        """Whether the view differs from the environment's own (a base or node padding)."""
        return self.base_policy is not None or self.pad_nodes is not None or self.privileged_critic


#: Env settings of the agent's view (the rest go to :func:`envs.core.make_params`): the
#: fields of :class:`ViewConfig`, and the families trained at once.
RESIDUAL_KEYS = (*(f.name for f in dataclasses.fields(ViewConfig)), "train_families")
