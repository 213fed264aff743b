"""Device formulas shared by the model, the calibration and the baselines (written once).

A memory node has a read peak ``R``, a write peak ``W`` (GB/s) and a
read/write turnaround penalty ``c`` (1/(GB/s)): moving ``rd`` GB/s of reads
and ``wr`` GB/s of writes uses ``rd/R + wr/W + c*rd*wr/(rd+wr)`` of it
(:func:`envs.solver.mix_utilisation`). A CXL node's link adds two
directions: device-to-host carries reads, host-to-device writes.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from envs.jit import array_form, inline

__all__ = ["firmware_bandwidth", "mix_peak", "turnaround_penalty"]

F64 = NDArray[np.float64]


def turnaround_penalty(read_gbps: ArrayLike, write_gbps: ArrayLike, mixed_gbps: ArrayLike) -> F64:
    """The penalty ``c`` that makes the 1:1 peak equal ``mixed_gbps``.

    At a 1:1 mix the utilisation per GB/s is ``0.5/R + 0.5/W + c/4``; solving
    ``1/M`` for ``c`` gives ``4 (1/M - 0.5/R - 0.5/W)``, floored at 0 (a mixed
    peak above the harmonic mean of R and W needs no turnaround).
    """
    r = np.asarray(read_gbps, dtype=float)
    w = np.asarray(write_gbps, dtype=float)
    m = np.asarray(mixed_gbps, dtype=float)
    return np.maximum(0.0, 4.0 * (1.0 / m - 0.5 / r - 0.5 / w))


@inline
def peak_at_mix(read_gbps, write_gbps, turn, read_share):  # pragma: no cover (compiled)
    """Peak bandwidth (GB/s) of a memory at a read share of its bytes (scalars)."""
    x = read_share
    return 1.0 / (x / read_gbps + (1.0 - x) / write_gbps + turn * x * (1.0 - x))


_mix_peak = array_form("float64(float64, float64, float64, float64)", peak_at_mix)


def mix_peak(
    read_gbps: ArrayLike, write_gbps: ArrayLike, turn: ArrayLike, read_share: ArrayLike
) -> F64:
    """Peak bandwidth (GB/s) of a memory at a read share ``read_share`` of its bytes:
    ``1 / (x/R + (1-x)/W + c x (1-x))`` (compiled code inlines :func:`peak_at_mix`)."""
    return np.asarray(_mix_peak(read_gbps, write_gbps, turn, read_share), dtype=float)


def firmware_bandwidth(
    mem_read: ArrayLike,
    mem_write: ArrayLike,
    link_read: ArrayLike | None = None,
    link_write: ArrayLike | None = None,
) -> F64:
    """A node's bandwidth as firmware reports it and the kernel's auto weights read it.

    ``mm/mempolicy.c`` (``mempolicy_set_node_perf``) takes ``min(read, write)``
    of the HMAT/CDAT access coordinates; a CXL node's read (write) peak is the
    smaller of its memory's and its link's. ``None`` or ``inf`` means no link.
    """
    rd = np.asarray(mem_read, dtype=float)
    wr = np.asarray(mem_write, dtype=float)
    if link_read is not None:
        rd = np.minimum(rd, np.asarray(link_read, dtype=float))
    if link_write is not None:
        wr = np.minimum(wr, np.asarray(link_write, dtype=float))
    return np.minimum(rd, wr)
