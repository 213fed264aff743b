"""The schema's building blocks: value types with bounds, the strict base model, one error format."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from envs import config as env_config

__all__ = [
    "ALGOS",
    "FORMAT_VERSION",
    "ON_POLICY",
    "TrainingError",
    "check",
    "check_flags",
    "describe",
]

FORMAT_VERSION = 2
ALGOS = ("ppo", "a2c", "sac", "td3", "recurrent-ppo")
ON_POLICY = frozenset({"ppo", "a2c", "recurrent-ppo"})
#: ``policy_kwargs.activation_fn`` names and their ``torch.nn`` classes.
ACTIVATIONS = {
    "tanh": "Tanh", "relu": "ReLU", "elu": "ELU", "leaky_relu": "LeakyReLU", "gelu": "GELU", "silu": "SiLU",
}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class ProjectPolicy:
    """A policy class of the project (not one of stable-baselines3's aliases)."""

    factory: str  # "module:attribute", imported when a model is built (agents.models)
    algos: tuple[str, ...]  # the algorithms it serves
    keywords: tuple[str, ...]  # its constructor's keyword arguments (a test checks them)


#: Policies of the project for the agent's padded view (agents.networks), by name.
PROJECT_POLICIES = {
    "TenantPolicy": ProjectPolicy(
        "agents.networks:TenantPolicy",
        ("ppo", "a2c"),
        (
            "layout",
            "net_arch",
            "log_std_init",
            "ortho_init",
            "optimizer_class",
            "optimizer_kwargs",
            "use_sde",
        ),
    )
}
#: Episode-level metrics of the record contract (agents.report.records), in report order;
#: any can be a comparison's primary one.
METRICS: tuple[str, ...] = (
    "reward",
    "geomean_perf",
    "throughput_gbps",
    "worst_perf",
    "mean_latency_ns",
    "promotion_mbps",
    "demotion_mbps",
    "unconverged_steps",
)


class TrainingError(ValueError):
    """Bad training input (a recipe, a flag, a run folder): the message says what to fix."""


# ============================================================================ value types


def _reject_bool(v: Any) -> Any:
    if isinstance(v, bool):
        raise ValueError("expected a number, not true or false")
    return v


def _whole(v: Any) -> Any:
    """A whole number written as a float (``1e6``, ``2.0``, YAML's ``1.0e+6``) as an int."""
    v = _reject_bool(v)
    if isinstance(v, str) and re.fullmatch(r"\s*[+-]?\d+(\.0*)?([eE]\+?\d+)?\s*", v):
        v = float(v)
    if isinstance(v, float) and math.isfinite(v) and v.is_integer() and abs(v) < 2**53:
        return int(v)
    return v


def _finite(v: Any) -> Any:
    v = _reject_bool(v)
    if isinstance(v, int | float | str):
        try:
            x = float(v)
        except ValueError:
            return v
        if not math.isfinite(x):
            raise ValueError("expected a finite number")
    return v


def env_field(name: str, note: str = "", given: bool = False) -> Any:
    """A recipe's or a command line's field for the environment's argument ``name``, described
    as :class:`envs.config.EnvConfig` describes it (and ``note``): unset (``None``, the
    environment's default), or with ``given`` set to the environment's default. Its value is
    checked by ``EnvConfig`` (the one place a check is written)."""
    value = env_config.default(name) if given else None
    text = env_config.meaning(name).replace("`", "") + note
    return Field(value, description=text)


def Int(ge: int | None = None, le: int | None = None) -> Any:
    """An integer in ``[ge, le]`` (a whole number written as ``1e6`` counts)."""
    return Annotated[int, BeforeValidator(_whole), Field(ge=ge, le=le, strict=False)]


def Num(
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    lt: float | None = None,
) -> Any:
    """A finite number in the given (open or closed) interval."""
    return Annotated[float, BeforeValidator(_finite), Field(ge=ge, gt=gt, le=le, lt=lt)]


Layer = Int(1, 1 << 16)
Name = Annotated[str, Field(min_length=1, max_length=4096, pattern=r"^[^\x00]*$")]
NameList = Annotated[list[Name], BeforeValidator(lambda v: list(v) if isinstance(v, tuple) else v)]


def _plain(v: Any, depth: int = 0) -> Any:
    """``v`` if it is plain data (bounded depth and size, finite numbers), else ValueError."""
    if depth > 4:
        raise ValueError("nested too deep")
    if v is None or isinstance(v, bool | str):
        return v
    if isinstance(v, int | float):
        if not math.isfinite(float(v)):
            raise ValueError("not a finite number")
        return v
    if isinstance(v, list | tuple) and len(v) <= 64:
        return [_plain(x, depth + 1) for x in v]
    if isinstance(v, dict) and len(v) <= 64 and all(isinstance(k, str) for k in v):
        return {k: _plain(x, depth + 1) for k, x in v.items()}
    raise ValueError("expected plain data (numbers, booleans, strings, lists, mappings)")


PlainMap = Annotated[dict[str, Any], BeforeValidator(_plain)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    def given(self) -> dict[str, Any]:
        """The fields that were set (not ``None``), as plain data."""
        return self.model_dump(mode="json", exclude_none=True)


# ============================================================================ errors


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    text = " ".join(str(text).split())
    return text if len(text) <= 80 else text[:77] + "..."


def _bounds(ctx: Mapping[str, Any]) -> str:
    return " and ".join(
        f"{op} {ctx[k]}"
        for k, op in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"))
        if k in ctx
    )


def _expected(err: Mapping[str, Any]) -> str:
    """What a pydantic error says was expected, in the project's words."""
    kind, ctx, msg = err["type"], err.get("ctx") or {}, str(err["msg"])
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        key = {"greater_than": "gt", "greater_than_equal": "ge", "less_than": "lt"}.get(kind, "le")
        return f"a value {_bounds({key: ctx[key]})}"
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return "an integer"
    if kind in ("float_parsing", "float_type"):
        return "a number"
    if kind in ("bool_parsing", "bool_type"):
        return "true or false"
    if kind == "literal_error":
        return str(ctx.get("expected", ""))
    if kind == "missing":
        return "a value (the key is missing)"
    if kind == "extra_forbidden":
        return "no such key"
    if kind == "value_error":
        return msg.removeprefix("Value error, ")
    return msg[0].lower() + msg[1:] if msg else kind


def _field_path(loc: tuple[Any, ...]) -> str:
    # a union's branch names (int, list[...], function-after[...]) are not fields
    parts = [
        str(p) for p in loc if not re.search(r"[\[\]()]|^(int|float|str|bool|tuple|list)$", str(p))
    ]
    return ".".join(parts)


def describe(exc: ValidationError) -> str:
    """A validation error as ``{field.path}: expected ... (got ...)``, the most specific first."""
    errors = exc.errors()
    # a union reports each branch: the last branch's error speaks of the general case
    err = min(errors, key=lambda e: e["type"] in ("int_type", "float_type", "string_type"))
    path = _field_path(tuple(err["loc"]))
    expected = _expected(err)
    if err["type"] == "value_error" and re.match(r"^[\w.]+: ", expected):
        return expected  # a rule between fields names its own field
    if err["type"] == "extra_forbidden":
        return f"{path}: unknown key {path.rsplit('.', 1)[-1]!r}"
    got = "" if err["type"] == "missing" else f" (got {_short(err.get('input'))})"
    said = expected if err["type"] == "value_error" else f"expected {expected}"
    return f"{path}: {said}{got}" if path else f"{said}{got}"


def check(model: type[BaseModel], data: Any, where: str) -> Any:
    """``model`` validated from ``data``, or one :class:`TrainingError` ``"{where}: ..."``."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise TrainingError(f"{where}: {describe(exc)}") from None
    except ValueError as exc:  # a rule's own error outside pydantic's wrapping
        raise TrainingError(f"{where}: {exc}") from None


def check_flags(model: type[BaseModel], given: Mapping[str, Any]) -> Any:
    """Command-line options validated by ``model`` (a field per flag, ``--num-envs`` is
    ``num_envs``); an error names the flag and its value as typed: ``--seed -1: expected ...``."""
    try:
        return model.model_validate(dict(given))
    except ValidationError as exc:
        text = describe(exc)
        field, _, rest = text.partition(": ")
        if field in given:
            raise TrainingError(f"--{field.replace('_', '-')} {given[field]}: {rest}") from None
        raise TrainingError(f"the command line: {text}") from None
    except ValueError as exc:
        raise TrainingError(f"the command line: {exc}") from None
