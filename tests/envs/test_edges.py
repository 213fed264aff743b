"""Physics at the edges: migration shares a node's bandwidth; unconverged solves are flagged."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from agents.rollout import rollout
from envs import KernelConfig, Simulator, load_scenario

# A slow DRAM node (6/5 GB/s) under tenants much larger than it: kswapd and promotion
# move GiB per second, far more than the node can copy.
SLOW_DRAM: dict[str, Any] = {
    "name": "slow-dram",
    "interval_s": 1.0,
    "episode_steps": 40,
    "hardware": {
        "preset": "spr-a1000",
        "nodes": {
            "dram0": {"capacity_gib": 16, "read_gbps": 6.0, "write_gbps": 5.0, "mixed_gbps": 5.3}
        },
    },
    "tenants": [
        {
            "name": "a",
            "threads": 8,
            "mlp": 2,
            "compute_ns": 200,
            "read_fraction": 0.9,
            "working_set_gib": 40,
            "hotness": {"zipf_s": 1.1},
        },
        {
            "name": "b",
            "threads": 4,
            "mlp": 1,
            "compute_ns": 300,
            "read_fraction": 0.8,
            "working_set_gib": 10,
            "hotness": {"zipf_s": 1.0},
            "start_s": 5,
        },
    ],
}
AGGRESSIVE = KernelConfig(kswapd_gibps=1000.0, demote_watermark_frac=0.5)


def _run(kernel: KernelConfig) -> tuple[list[Any], Simulator]:
    sim = Simulator(load_scenario(SLOW_DRAM), batch_size=3, seeds=[1, 2, 3], kernel=kernel)
    outs = [sim.step([1, 0] if t < 20 else [0, 1], 65536.0) for t in range(40)]
    return outs, sim


def test_migration_never_drives_a_node_past_its_peak() -> None:
    outs, _ = _run(AGGRESSIVE)
    moved = sum(float(o.promotion_mbps.sum() + o.demotion_mbps.sum()) for o in outs)
    assert moved > 1e4  # the migrations are there, and large
    for o in outs:
        assert (o.node_utilization <= 1.0 + 1e-9).all()
        assert (o.node_bandwidth_gbps <= o.node_peak_gbps * (1 + 1e-9)).all()
        assert np.isfinite(o.node_latency_ns).all() and (o.node_latency_ns < 1e6).all()
        assert o.solver_converged.all()


def test_migration_share_is_the_configured_bound() -> None:
    """Halving the share migration may use halves, at most, what it moves per interval."""
    full, _ = _run(AGGRESSIVE)
    half, _ = _run(
        KernelConfig(kswapd_gibps=1000.0, demote_watermark_frac=0.5, migrate_max_util=0.2)
    )
    dem_full = max(float(o.demotion_mbps.max()) for o in full)
    dem_half = max(float(o.demotion_mbps.max()) for o in half)
    # demotion reads the DRAM node: at most 20% of its 6 GB/s read peak
    assert dem_half <= 0.2 * 6.0e3 * (1 + 1e-9)  # MB/s
    assert dem_half < dem_full


def test_migrate_max_util_is_validated() -> None:
    with pytest.raises(ValueError, match="migrate_max_util"):
        KernelConfig(migrate_max_util=0.0)
    with pytest.raises(ValueError, match="migrate_max_util"):
        KernelConfig(migrate_max_util=1.5)


def test_unconverged_steps_are_counted_and_warned(monkeypatch: pytest.MonkeyPatch) -> None:
    ok = rollout("tpp", load_scenario("kv-store", episode_steps=5), 2)
    assert all(r["metrics"]["unconverged_steps"] == 0 for r in ok)
    # a tolerance no solve meets: every step is flagged, counted, and evaluation warns
    monkeypatch.setattr("envs.model.SOLVER_TOL", -1.0)
    with pytest.warns(RuntimeWarning, match="missed its tolerance in 10 of 10 steps"):
        bad = rollout("tpp", load_scenario("kv-store", episode_steps=5), 2)
    assert [r["metrics"]["unconverged_steps"] for r in bad] == [5, 5]
