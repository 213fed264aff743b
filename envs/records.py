"""The step's records (frozen dataclasses) built from a dict of their fields.

A dataclass's generated ``__init__`` matches every keyword against its
parameters and, when frozen, sets each field through ``object.__setattr__``:
about 5 us for the 35 fields of :class:`envs.core.Metrics` given as keywords
and 10-14 us given as ``**mapping``, against 0.3 us for filling the new
object's ``__dict__`` at once. A step builds seven records (``Tenants``,
``Candidates``, ``Solution``, ``Outputs``, ``State``, ``EnvState``, ``Metrics``),
about a tenth of one instance's step through ``__init__``, so it builds them here.
They define no ``__post_init__`` and no ``__slots__``; :func:`record` checks the
names and their order.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

__all__ = ["record"]

R = TypeVar("R")


_NAMES: dict[type, tuple[str, ...]] = {}  # each record class's field names, in order


def _names(cls: type) -> tuple[str, ...]:
    names = _NAMES.get(cls)
    if names is None:
        if not dataclasses.is_dataclass(cls) or hasattr(cls, "__post_init__"):
            raise TypeError(f"record: {cls.__name__} is not a dataclass without __post_init__")
        names = _NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


def record(cls: type[R], fields: dict[str, Any]) -> R:
    """An instance of dataclass ``cls`` holding ``fields``: every field, in declared order.

    The same object as ``cls(**fields)`` (the fields in the instance's
    ``__dict__`` in their declared order, as ``__init__`` leaves them), built
    without ``__init__``.

    Raises:
        TypeError: ``fields`` does not name exactly ``cls``'s fields in their order.
    """
    names = _names(cls)
    if tuple(fields) != names:
        missing = [n for n in names if n not in fields]
        extra = [n for n in fields if n not in names]
        raise TypeError(
            f"record: {cls.__name__} needs its fields in declared order"
            f" (missing {missing}, unknown {extra})"
        )
    obj = object.__new__(cls)
    obj.__dict__.update(fields)
    return obj
