"""The MLC loaded-latency test rebuilt as a scenario and run through the model."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from calibration.data import F64, SERIES_THREADS, mix_label
from envs.model import LINE_BYTES, Params, compile_params
from envs.scenario import load_scenario
from envs.solver import Solution, solve_fixed_point

__all__ = ["SETUPS", "MLCBench", "Setup", "mlc_scenario", "model_curve", "preset_for"]

#: requests in flight per MLC thread while a measured point is placed on the curve; any
#: number that lets compute_ns >= 0 reach the point does: a single tenant's latency at a
#: given bandwidth does not depend on it
PLACE_MLP = 64.0
#: requests in flight per thread for the model peak (the unbounded-injection limit)
PEAK_MLP = 1e7
BISECTION_STEPS = 48


@dataclass(frozen=True)
class Setup:
    """Where a memory of the data lives in the presets and where MLC's threads run."""

    preset: str
    node: str
    socket: int


SETUPS = {
    "mmem": Setup("spr-a1000", "dram0", 0),
    "cxl": Setup("spr-a1000", "cxl0", 0),
    "cxl_remote": Setup("spr-a1000-2s", "cxl0", 1),
    "mmem_remote": Setup("spr-a1000-2s", "dram0", 1),
}


def preset_for(memory: str) -> str:
    """The preset whose machine ``memory`` is measured on."""
    return SETUPS[memory].preset


def mlc_scenario(
    hardware: str | Mapping[str, Any],
    memory: str,
    read_fraction: float,
    compute_ns: float = 0.0,
    mlp: float = PLACE_MLP,
) -> dict[str, Any]:
    """MLC's loaded-latency test on ``memory`` as a scenario mapping (keys of envs.scenario)."""
    st = SETUPS[memory]
    return {
        "name": f"mlc-{memory}-{mix_label(read_fraction)}",
        "description": "Intel MLC --loaded_latency: 16 traffic threads on one memory node",
        "interval_s": 1.0,
        "episode_steps": 1,
        "hardware": hardware,
        "tenants": [
            {
                "name": "mlc",
                "threads": SERIES_THREADS,
                "socket": st.socket,
                "mlp": mlp,
                "compute_ns": compute_ns,
                "read_fraction": read_fraction,
                "working_set_gib": 1.0,
                "weights": {st.node: 1},
            }
        ],
    }


class MLCBench:
    """A batch of MLC tests on one memory: element ``i`` runs read fraction ``read_fractions[i]``.

    The arrays come from :func:`envs.model.compile_params` on the scenario of
    :func:`mlc_scenario`; :meth:`solve` runs :func:`envs.solver.solve_fixed_point`
    on them, exactly as one interval of :func:`envs.model.step` does once the
    tenant's pages are on the node.
    """

    def __init__(
        self, hardware: str | Mapping[str, Any], memory: str, read_fractions: Sequence[float]
    ) -> None:
        rfs = [float(r) for r in read_fractions]
        scs = {r: load_scenario(mlc_scenario(hardware, memory, r)) for r in set(rfs)}
        p: Params = compile_params([scs[r] for r in rfs])
        self.params = p
        self.memory = memory
        self.node = p.node_names.index(SETUPS[memory].node)
        w = p.init_weights  # (T, N, B) the tenant's weights: the measured node only
        self.share = w / w.sum(1, keepdims=True)
        self.remote = (p.socket[:, 0][:, None, :] != p.node_socket[None]).astype(float)
        self.is_remote = bool(self.remote[0, self.node].all())
        self.threads = p.threads[:, 0]
        self.rfrac = p.read_fraction[:, 0]
        n, b = p.n_nodes, p.batch_size
        self.zeros = np.zeros((n, b))
        self.size = b

    def solve(self, compute_ns: F64, mlp: float = PLACE_MLP, x0: F64 | None = None) -> Solution:
        cap = LINE_BYTES * self.threads * mlp
        compute = np.broadcast_to(np.asarray(compute_ns, dtype=float), (self.size,))[None]
        return solve_fixed_point(
            cap,
            compute.copy(),
            self.rfrac,
            self.share,
            self.remote,
            self.zeros,
            self.zeros,
            self.params.curves,
            x0=x0,
        )

    def probe(self, sol: Solution) -> F64:
        """Latency (ns) of an access to the measured node: what MLC's probe thread sees."""
        if self.is_remote:
            return sol.tenant_latency_ns[0]
        return sol.node_latency_ns[self.node]

    def capacity(self) -> F64:
        """Model peak (GB/s): the closed loop with no compute and unbounded requests in flight."""
        return self.solve(np.zeros(self.size), mlp=PEAK_MLP).throughput[0]

    def place(self, bandwidth: F64) -> tuple[F64, F64, NDArray[np.bool_]]:
        """Probe latency where the closed loop carries ``bandwidth`` GB/s.

        Returns (latency ns, compute_ns, reachable). ``compute_ns`` is found by
        bisection (throughput falls as compute grows). Where even ``compute_ns = 0``
        cannot carry the bandwidth, the point is beyond the model's curve:
        ``reachable`` is False and the latency is the one at ``compute_ns = 0``.
        """
        target = np.asarray(bandwidth, dtype=float)
        c_cap = LINE_BYTES * self.threads[0] * PLACE_MLP
        s0 = self.solve(np.zeros(self.size))
        x_max = s0.throughput[0]
        reach = x_max >= target
        lo = np.zeros(self.size)
        hi = c_cap / np.maximum(target, 1e-9)  # at this compute the latency alone holds X < target
        x0 = np.minimum(target, x_max)[None]
        for _ in range(BISECTION_STEPS):
            mid = 0.5 * (lo + hi)
            x = self.solve(mid, x0=x0).throughput[0]
            above = x > target
            lo = np.where(above, mid, lo)
            hi = np.where(above, hi, mid)
        c = np.where(reach, 0.5 * (lo + hi), 0.0)
        sol = self.solve(c, x0=np.minimum(target, x_max)[None])
        return self.probe(sol), c, reach


def model_curve(
    hardware: str | Mapping[str, Any],
    memory: str,
    read_fraction: float,
    upto: float = 0.995,
    n: int = 60,
) -> tuple[F64, F64]:
    """The model's loaded-latency curve of one mix: (bandwidth GB/s, probe latency ns)."""
    cap = float(MLCBench(hardware, memory, [read_fraction]).capacity()[0])
    bw = cap * np.concatenate([np.geomspace(0.005, 0.5, n // 3), np.linspace(0.5, upto, n)[1:]])
    lat, _, _ = MLCBench(hardware, memory, [read_fraction] * bw.size).place(bw)
    return bw, lat
