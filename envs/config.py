"""The environment's settings, declared once: :class:`EnvConfig`.

Every argument of the environment (``gymnasium.make`` / ``make_vec`` keywords, the
vector env's and the SB3 adapter's, :func:`envs.core.make_params`'s) is a field here,
with its default, what it means and its check. Everything else derives from it:
``make_params`` takes exactly these arguments (its signature is this class's), the
environment's docstring lists them (:func:`arguments_text`), ``docs/env.md``'s table is
:func:`arguments_table` (a test checks the two equal), and a variant of a configuration is
``dataclasses.replace(config, field=...)``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from envs.families import SPLITS
from envs.model import KernelConfig
from envs.spaces import OBSERVATIONS, REWARDS, TIERING_MODES

__all__ = ["EnvConfig", "arguments_table", "arguments_text", "field_names"]


def _arg(default: Any, shown: str, meaning: str) -> Any:
    """A field with its default, the default as the docs show it, and what it means."""
    return dataclasses.field(default=default, metadata={"shown": shown, "meaning": meaning})


@dataclass(frozen=True)
class EnvConfig:
    """Every argument of the environment, with its default (see each field's meaning in
    :func:`arguments_table`). Built by :meth:`of` from keyword arguments; an unknown key
    or a bad value is a ``ValueError`` naming the argument and what was expected."""

    scenario: Any = _arg(  # noqa: RUF009 (a field with metadata, not a shared default)
        "mixed",
        '`"mixed"`',
        "a shipped scenario name (`envs.scenario_names()`), a YAML path, a dict, an "
        '`envs.Scenario`, or a family (`"mixed"`, `"mixed-2s"`, `"mixed-4cxl"`, or an '
        "`envs.families.ScenarioFamily`)",
    )
    split: str = _arg(
        "train", '`"train"`', '`"train"` or `"test"`: a family\'s two disjoint pools of machines'
    )
    max_tenants: int | None = _arg(
        None,
        "the family's maximum",
        "tenant slots `T`; fewer than the scenario has is an error",
    )
    reward: str = _arg(
        "log-geomean",
        '`"log-geomean"`',
        '`"log-geomean"`, `"throughput"`, `"weighted-speedup"` or `"harmonic"` (Rewards)',
    )
    weights: str = _arg(
        "per-tenant",
        '`"per-tenant"`',
        '`"per-tenant"`, or `"global"`: one weight vector for every tenant (like '
        "`/sys/kernel/mm/mempolicy/weighted_interleave/nodeN`)",
    )
    action_type: str = _arg("box", '`"box"`', '`"box"` or `"discrete"`')
    max_promote_mbps: float = _arg(
        65536.0, "65536.0", "top of the promotion-rate scale, MB/s (> 1)"
    )
    kernel: KernelConfig | Mapping[str, Any] | None = _arg(  # noqa: RUF009
        None,
        "`KernelConfig()`",
        "an `envs.KernelConfig` or a dict of its fields (demotion, watermarks, promotion "
        "filters, `memcg_limits`, `numa_scan`, `fallback_lists`, ...; [model.md](model.md), "
        '"Kernel configuration"); unknown fields are errors',
    )
    jitter: float = _arg(
        0.05,
        "0.05",
        "per-episode randomisation of each tenant's `mlp`, compute time and working set, "
        "factors `1 +- jitter`",
    )
    pool_size: int = _arg(
        512, "512", "scenarios compiled per split of a family (a fixed scenario: 1)"
    )
    tiering_modes: Sequence[str] | None = _arg(
        None,
        "none",
        "names of `envs.spaces.TIERING_MODES`; adds the mode entry to the action",
    )
    observation: str = _arg(
        "full",
        '`"full"`',
        '`"full"`, `"cgroup"`, `"basic"` or `"host"` (only what a Linux host exposes, '
        "[deploy.md](deploy.md)) (Observation space)",
    )
    reward_baseline: str | None = _arg(
        None,
        "none",
        "a heuristic's name (`baselines.catalogue.names(reward_baseline=True)`, e.g. "
        '`"colloid"`): the paired-seed reward (Rewards)',
    )
    generator_chances: Mapping[str, Any] | None = _arg(
        None,
        "none",
        'a mapping of some of `envs.generator.CHANCES` (e.g. `{"memory_high": 0.3}`): the '
        "generator's families (`gen-*`, `unseen-*`) drawn with these chances "
        "([scenarios.md](scenarios.md#the-generator-gen--and-unseen--families)); other "
        "scenarios ignore it",
    )

    def __post_init__(self) -> None:
        if self.split not in SPLITS:
            raise ValueError(f"split: got {self.split!r}, expected one of {SPLITS}")
        if self.reward not in REWARDS:
            raise ValueError(f"reward: got {self.reward!r}, expected one of {list(REWARDS)}")
        if self.observation not in OBSERVATIONS:
            raise ValueError(
                f"observation: got {self.observation!r}, expected one of {list(OBSERVATIONS)}"
            )
        if self.max_tenants is not None and (
            isinstance(self.max_tenants, bool)
            or not isinstance(self.max_tenants, int)
            or self.max_tenants < 1
        ):
            raise ValueError(f"max_tenants: got {self.max_tenants!r}, expected an integer >= 1")
        if self.tiering_modes is not None:
            modes = self.tiering_modes
            if isinstance(modes, str) or any(m not in TIERING_MODES for m in modes):
                raise ValueError(
                    f"tiering_modes: got {modes!r}, expected a list of names of "
                    f"{list(TIERING_MODES)}"
                )

    @classmethod
    def of(cls, *args: Any, **kwargs: Any) -> EnvConfig:
        """A configuration from ``make_params``' arguments: keywords (and the scenario, the
        split, ... in field order), or a configuration and keywords that replace its fields.

        Raises:
            ValueError: an unknown keyword (naming it and the known ones) or a bad value.
        """
        unknown = sorted(set(kwargs) - set(field_names()))
        if unknown:
            raise ValueError(
                f"unknown environment argument {unknown[0]!r}; expected one of {field_names()}"
            )
        if args and isinstance(args[0], EnvConfig):
            if len(args) > 1:
                raise ValueError("expected one EnvConfig, then keyword arguments")
            return dataclasses.replace(args[0], **kwargs)
        if len(args) > len(field_names()):
            raise ValueError(f"expected at most {len(field_names())} positional arguments")
        taken = [n for n in field_names()[: len(args)] if n in kwargs]
        if taken:
            raise ValueError(f"{taken[0]}: given twice (by position and by keyword)")
        return cls(*args, **kwargs)

    def given(self) -> dict[str, Any]:
        """The fields that differ from their defaults, as keywords."""
        return {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if getattr(self, f.name) != f.default
        }


def field_names() -> list[str]:
    """The environment's arguments, in their order."""
    return [f.name for f in dataclasses.fields(EnvConfig)]


def arguments_table() -> str:
    """The Markdown table of the arguments (``docs/env.md``, "Constructor arguments")."""
    rows = ["| argument | default | meaning |", "|---|---|---|"]
    for f in dataclasses.fields(EnvConfig):
        rows.append(f"| `{f.name}` | {f.metadata['shown']} | {f.metadata['meaning']} |")
    return "\n".join(rows)


def arguments_text(indent: str = "    ") -> str:
    """The arguments as a bulleted list (the environment's docstring, ``help(envs.TieredMemoryEnv)``)."""
    lines = []
    for f in dataclasses.fields(EnvConfig):
        lines.append(
            f"{indent}- ``{f.name}`` (default {f.metadata['shown']}): {f.metadata['meaning']};"
        )
    return "\n".join(lines)
