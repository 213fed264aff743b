"""Progress bars of the warm start's phases (tqdm, on stderr): what runs and the time left."""

from __future__ import annotations

from typing import Any

__all__ = ["phase_bar"]


def phase_bar(enabled: bool, total: int | None, desc: str, unit: str) -> Any:
    """A tqdm bar of ``total`` (None: not known ahead) ``unit`` for one phase (``desc``); prints nothing unless
    ``enabled``. Use it as a context manager and call ``update()`` per unit done."""
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, disable=not enabled, dynamic_ncols=True)
