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
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from envs.families import SPLITS
from envs.generator import check_chances
from envs.model import PRECISIONS, KernelConfig
from envs.spaces import ACTION_TYPES, OBSERVATIONS, REWARDS, TIERING_MODES, WEIGHTS

__all__ = [
    "MAX_POOL",
    "MAX_PROMOTE_MBPS",
    "MAX_TENANTS",
    "EnvConfig",
    "arguments_table",
    "arguments_text",
    "default",
    "field_names",
    "meaning",
]

#: The most tenant slots, instances per pool and MB/s of the promotion scale an
#: environment takes (the compiled model's arrays are sized by the first two).
MAX_TENANTS = 1024
MAX_POOL = 1 << 16
MAX_PROMOTE_MBPS = 1e7


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
        "train",
        '`"train"`',
        'a name of `envs.families.SPLITS`: a family\'s disjoint pools of machines (`"train"` '
        'to train on, `"test"` to report)',
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
        '`"full"`, `"cgroup"`, `"demand"`, `"topology"`, `"basic"` or `"host"` (only what a '
        "Linux host exposes, [deploy.md](deploy.md)) (Observation space)",
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
        "generator's families (`gen-*`, `unseen-*`, `broad-*`) drawn with these chances "
        "([scenarios.md](scenarios.md#the-generator-gen--and-unseen--families)); other "
        "scenarios ignore it",
    )
    precision: str = _arg(
        "reference",
        '`"reference"`',
        '`"reference"` or `"fast"`: the model core\'s fixed point solved to 1e-8 (the '
        "reference numbers, kept bit for bit) or to 1e-6 (fewer Newton iterations): a "
        "step's metrics within 1e-4 relative (1e-6 absolute near 0) of the reference's "
        "from the same state, a run's means within 1e-3 ([model.md](model.md#precision))",
    )

    def __post_init__(self) -> None:
        """Each field's check (the one place it is written): a ``ValueError`` naming it."""
        for name, choices in (
            ("split", SPLITS),
            ("reward", REWARDS),
            ("weights", WEIGHTS),
            ("action_type", ACTION_TYPES),
            ("observation", OBSERVATIONS),
            ("precision", PRECISIONS),
        ):
            if getattr(self, name) not in choices:
                raise ValueError(
                    f"{name}: got {getattr(self, name)!r}, expected one of {list(choices)}"
                )
        if self.max_tenants is not None:
            _integer("max_tenants", self.max_tenants, MAX_TENANTS)
        _integer("pool_size", self.pool_size, MAX_POOL)
        if not (_number(self.jitter) and 0.0 <= self.jitter < 1.0):
            raise ValueError(f"jitter: got {self.jitter!r}, expected a number 0 <= jitter < 1")
        if not (_number(self.max_promote_mbps) and 1.0 < self.max_promote_mbps <= MAX_PROMOTE_MBPS):
            raise ValueError(
                f"max_promote_mbps: got {self.max_promote_mbps!r}, expected a number > 1 and "
                f"<= {MAX_PROMOTE_MBPS:g} MB/s"
            )
        if self.tiering_modes is not None:
            modes = self.tiering_modes
            if (
                isinstance(modes, str)
                or any(m not in TIERING_MODES for m in modes)
                or len(set(modes)) != len(modes)
            ):
                raise ValueError(
                    f"tiering_modes: got {modes!r}, expected a list of distinct names of "
                    f"{list(TIERING_MODES)}"
                )
        if self.generator_chances is not None:
            check_chances(self.generator_chances)

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


def _number(v: Any) -> bool:
    return not isinstance(v, bool) and isinstance(v, int | float) and math.isfinite(v)


def _integer(name: str, v: Any, top: int) -> None:
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= top:
        raise ValueError(f"{name}: got {v!r}, expected an integer >= 1 and <= {top}")


def default(name: str) -> Any:
    """The default of the environment's argument ``name``."""
    return _FIELDS[name].default


def meaning(name: str) -> str:
    """What the environment's argument ``name`` means (Markdown, as ``docs/env.md`` shows it)."""
    return str(_FIELDS[name].metadata["meaning"])


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


_FIELDS = {f.name: f for f in dataclasses.fields(EnvConfig)}
