"""What TierGym runs as a policy: one typed protocol instead of probing for attributes.

Every policy that evaluation, the paired reward's twins or the agent's view steps (the
heuristics, a trained model, the clairvoyant planner) is a :class:`Policy`: it names
itself, says which kernel configuration and tiering modes its environment is built with,
is bound to an environment, observes every step's metrics and decides a batch's actions
as stable-baselines3's ``predict`` does. Two capabilities a few have are protocols of
their own, checked with ``isinstance``: :class:`Clairvoyant` (it plans each episode from
its seed before it runs: the ``planner``) and :class:`RecordsPolicy` (its records are
other policies': the ``best-heuristic-per-episode`` oracle).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from numpy.typing import NDArray

from envs.model import KernelConfig

__all__ = ["Clairvoyant", "Policy", "RecordsPolicy", "as_policy", "members"]


@runtime_checkable
class Policy(Protocol):
    """A policy TierGym steps (``baselines.HeuristicPolicy``, ``agents.view.LearnedPolicy``)."""

    #: its name in records and tables
    name: str

    @property
    def kernel(self) -> KernelConfig | None:
        """The kernel configuration its environment is built with (None: the environment's)."""

    @property
    def tiering_modes(self) -> Sequence[str] | None:
        """The tiering modes its actions pick (None: none; the environment's if it names some)."""

    def bind(self, env: Any, num_envs: int) -> Any:
        """Attach it to an environment's parameters for ``num_envs`` instances."""

    def observe(self, metrics: Any, hardware: Any) -> None:
        """After a reset (``metrics`` None) and after every step (the step's
        :class:`~envs.core.Metrics`), with the running episodes' :class:`~envs.core.Hardware`."""

    def predict(
        self,
        observation: NDArray,
        state: Any = None,
        episode_start: NDArray | None = None,
        deterministic: bool = True,
    ) -> tuple[NDArray, Any]:
        """The batch's actions (stable-baselines3's signature)."""


@runtime_checkable
class Clairvoyant(Protocol):
    """A policy that plans each episode from its seed before it runs (an upper bound, never
    a reward baseline: it knows what no kernel can)."""

    def plan_episodes(self, seeds: NDArray[Any]) -> None:
        """Plan the episodes of ``seeds`` (one per bound instance)."""


@runtime_checkable
class RecordsPolicy(Protocol):
    """A policy whose records are chosen among other policies' (an oracle): evaluation asks
    it for its records instead of stepping it."""

    name: str

    def rollout_records(
        self,
        scenario: Any,
        n_episodes: int,
        seed: int,
        split: str,
        env_kwargs: Mapping[str, Any] | None,
        record_series: bool,
        policy_name: str | None,
    ) -> list[dict[str, Any]]:
        """The records of ``n_episodes`` episodes from ``seed``, as ``agents.rollout.rollout``'s."""


def members(protocol: type) -> list[str]:
    """The attributes and methods a protocol asks for (for an error that names the missing)."""
    methods = {
        n
        for n, v in vars(protocol).items()
        if (callable(v) or isinstance(v, property)) and not n.startswith("_")
    }
    return sorted(methods | set(getattr(protocol, "__annotations__", {})))


class _Adapted:
    """An object with ``predict`` and some of the rest as a :class:`Policy`: what it lacks is
    the default of a policy that sets nothing (no kernel or tiering modes of its own, nothing
    to bind or observe, named after its class). The one place that reads a foreign object's
    optional parts."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = str(getattr(inner, "name", None) or type(inner).__name__)
        self.kernel = getattr(inner, "kernel", None)
        self.tiering_modes = getattr(inner, "tiering_modes", None)
        self._bind = getattr(inner, "bind", None)
        self._observe = getattr(inner, "observe", None)

    def bind(self, env: Any, num_envs: int) -> None:
        if self._bind is not None:
            self._bind(env, num_envs)

    def observe(self, metrics: Any, hardware: Any) -> None:
        if self._observe is not None:
            self._observe(metrics, hardware)

    def predict(
        self,
        observation: NDArray,
        state: Any = None,
        episode_start: NDArray | None = None,
        deterministic: bool = True,
    ) -> tuple[NDArray, Any]:
        out: tuple[NDArray, Any] = self.inner.predict(
            observation, state=state, episode_start=episode_start, deterministic=deterministic
        )
        return out


def as_policy(obj: Any) -> Policy:
    """``obj`` as a :class:`Policy`: itself if it is one; an object with stable-baselines3's
    ``predict`` (a model of the user's) with the defaults of a policy that sets nothing for
    what it lacks.

    Raises:
        TypeError: ``obj`` has no ``predict``.
    """
    if isinstance(obj, Policy):
        return obj
    if callable(getattr(obj, "predict", None)):
        return _Adapted(obj)
    raise TypeError(
        f"policy {obj!r}: expected an envs.policy.Policy or an object with predict(observation, "
        "state=None, episode_start=None, deterministic=True)"
    )
