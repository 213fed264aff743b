"""Scenario loading and validation: every bad input gets one clear error naming the field."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from envs import ScenarioError, hardware_presets, load_hardware, load_scenario, scenario_names

BASE: dict[str, Any] = {
    "name": "t",
    "interval_s": 1.0,
    "episode_steps": 10,
    "hardware": "spr-a1000",
    "tenants": [
        {
            "name": "a",
            "threads": 8,
            "mlp": 4,
            "compute_ns": 50,
            "read_fraction": 0.7,
            "working_set_gib": 8,
            "hotness": {"zipf_s": 0.9},
        }
    ],
}


def with_change(path: str, value: Any) -> dict[str, Any]:
    """BASE with one key changed, by a dotted path (ints index lists)."""
    d = copy.deepcopy(BASE)
    parts = path.split(".")
    cur: Any = d
    for p in parts[:-1]:
        cur = cur[int(p)] if p.isdigit() else cur[p]
    last = parts[-1]
    if isinstance(cur, list):
        cur[int(last)] = value
    else:
        cur[last] = value
    return d


def error_of(spec: Any) -> str:
    with pytest.raises(ScenarioError) as exc:
        load_scenario(spec)
    return str(exc.value)


def test_base_loads_with_defaults() -> None:
    sc = load_scenario(BASE)
    t = sc.tenants[0]
    assert (t.start_s, t.stop_s, t.memory_low_gib, t.memory_high_gib, t.socket) == (
        0.0,
        None,
        0.0,
        None,
        0,
    )
    assert sc.hardware.node_names == ["dram0", "cxl0"]


@pytest.mark.parametrize("name", scenario_names())
def test_shipped_scenarios_load(name: str) -> None:
    sc = load_scenario(name)
    assert sc.name == name
    assert sc.tenants


def test_presets_validate() -> None:
    assert {"spr-a1000"} <= set(hardware_presets())
    for name in hardware_presets():
        hw = load_hardware(name)
        assert hw.nodes and all(n.capacity_gib > 0 for n in hw.nodes)


@pytest.mark.parametrize(
    ("spec", "needles"),
    [
        (with_change("tenants.0.colour", "red"), ["tenants[0].colour", "unknown key"]),
        (with_change("tenants.0.threads", "many"), ["tenants[0].threads", "'many'", "integer"]),
        (
            with_change("tenants.0.read_fraction", 1.5),
            ["tenants[0].read_fraction", "1.5", "less than or equal to 1"],
        ),
        (
            with_change("tenants.0.read_fraction", -0.1),
            ["tenants[0].read_fraction", "-0.1", "greater than or equal to 0"],
        ),
        (with_change("episode_steps", 0), ["episode_steps", "0", "greater than or equal to 1"]),
        (
            with_change("tenants.0.working_set_gib", float("nan")),
            ["tenants[0].working_set_gib", "finite"],
        ),
        (
            with_change(
                "hardware", {"preset": "spr-a1000", "nodes": {"dram0": {"capacity_gib": -4}}}
            ),
            ["hardware.nodes[0].capacity_gib", "-4", "greater than 0"],
        ),
        (
            with_change("tenants.0.weights", [1, 2, 3]),
            ["tenants[0].weights", "3 weights", "one per node", "dram0"],
        ),
        (with_change("tenants.0.weights", {"dram9": 1}), ["tenants[0].weights", "dram9", "cxl0"]),
        (with_change("tenants.0.weights", [0, 0]), ["tenants[0].weights", "all zero"]),
        (with_change("tenants.0.weights", [300, 1]), ["tenants[0].weights", "300", "255"]),
        (with_change("tenants.0.socket", 3), ["tenants[0].socket", "3", "sockets [0]"]),
        (with_change("hardware", "spr-9000"), ["hardware", "spr-9000", "spr-a1000"]),
        (
            with_change(
                "hardware", {"preset": "spr-a1000", "nodes": {"dram7": {"capacity_gib": 4}}}
            ),
            ["hardware.nodes.dram7", "unknown node", "dram0"],
        ),
        (with_change("tenants.0.working_set_gib", 5000), ["tenants", "5000", "usable capacity"]),
        (with_change("tenants.0.hotness", {"zipf": 1.0}), ["tenants[0].hotness", "zipf"]),
    ],
)
def test_bad_field_names_path_value_and_expectation(
    spec: dict[str, Any], needles: list[str]
) -> None:
    msg = error_of(spec)
    for needle in needles:
        assert needle in msg, f"{needle!r} not in: {msg}"


def test_phase_before_start_is_rejected() -> None:
    spec = with_change("tenants.0.start_s", 10.0)
    spec["tenants"][0]["phases"] = [{"at_s": 5.0, "threads": 4}]
    msg = error_of(spec)
    assert "tenants[0]" in msg and "phases[0].at_s=5.0" in msg and "start_s=10.0" in msg


def test_phase_with_unknown_key_is_rejected() -> None:
    spec = copy.deepcopy(BASE)
    spec["tenants"][0]["phases"] = [{"at_s": 5.0, "thread": 4}]
    assert "tenants[0].phases[0].thread" in error_of(spec)


def test_low_above_high_is_rejected() -> None:
    spec = with_change("tenants.0.memory_low_gib", 8.0)
    spec["tenants"][0]["memory_high_gib"] = 4.0
    assert "memory_low_gib=8.0 exceeds memory_high_gib=4.0" in error_of(spec)


def test_duplicate_tenant_names() -> None:
    spec = copy.deepcopy(BASE)
    spec["tenants"].append(copy.deepcopy(spec["tenants"][0]))
    assert "repeated: ['a']" in error_of(spec)


def test_unknown_scenario_name_lists_the_valid_ones() -> None:
    msg = error_of("no-such-scenario")
    assert "no-such-scenario" in msg
    for name in scenario_names():
        assert name in msg


def test_missing_and_broken_files(tmp_path: Path) -> None:
    assert "does not exist" in error_of(str(tmp_path / "nope.yaml"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    assert "not valid YAML" in error_of(str(bad))
    top = tmp_path / "list.yaml"
    top.write_text("- 1\n- 2\n")
    assert "expected a mapping" in error_of(str(top))


def test_yaml_file_round_trip(tmp_path: Path) -> None:
    import yaml

    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump(BASE))
    assert load_scenario(str(f)) == load_scenario(BASE)
    assert "tenants[0].read_fraction" in error_of(
        {**BASE, "tenants": [{**BASE["tenants"][0], "read_fraction": 2}]}
    )
