"""Policies by name for the environment's paired-seed reward baseline (``reward_baseline``).

The layers import one way (``envs`` <- ``baselines``), so the environment finds the
heuristics the way Python finds plugins: through the ``tiergym.policies`` entry-point
group, where a provider is a callable ``factory(name) -> policy`` that raises
``ValueError`` for a name it does not know. The project's ``baselines`` package registers
:func:`baselines.make_policy` there (``pyproject.toml``); another package can add its own
heuristics to the same group.
"""

from __future__ import annotations

from importlib.metadata import entry_points

from envs.policy import Clairvoyant, Policy, members

__all__ = ["GROUP", "make_baseline_policy"]

GROUP = "tiergym.policies"


def make_baseline_policy(name: str) -> Policy:
    """A fresh, unbound policy named ``name`` from the ``tiergym.policies`` providers.

    The policy must follow the heuristics' protocol (``bind``, ``observe``, ``predict``
    and a ``kernel``) and be causal: a clairvoyant policy (one that plans an episode
    from its seed, ``plan_episodes``) cannot be a baseline that runs beside the agent.

    Raises:
        ValueError: no provider knows ``name`` (the providers' messages list their
            names), or the policy does not fit the protocol.
        RuntimeError: no provider is installed (the project is not installed).
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"reward_baseline: expected a policy name, got {name!r}")
    providers = entry_points(group=GROUP)
    if not providers:
        raise RuntimeError(
            f"reward_baseline={name!r}: no policy provider in the {GROUP!r} entry-point group; "
            "install the project (pip install -e .) so that its baselines register there"
        )
    errors = []
    for ep in sorted(providers, key=lambda e: e.name):
        try:
            policy = ep.load()(name)
        except ValueError as e:
            errors.append(f"{ep.name}: {e}")
            continue
        if not isinstance(policy, Policy):
            missing = [a for a in members(Policy) if not hasattr(policy, a)]
            raise ValueError(
                f"reward_baseline={name!r}: the policy has no {', '.join(sorted(missing))}; "
                "a baseline follows envs.policy.Policy (baselines.HeuristicPolicy does)"
            )
        if isinstance(policy, Clairvoyant):
            raise ValueError(
                f"reward_baseline={name!r}: the policy plans each episode from its seed "
                "(clairvoyant); a baseline must decide from what it observes"
            )
        return policy
    raise ValueError(f"reward_baseline={name!r}: " + "; ".join(errors))
