"""Scenario loading and validation: every bad input gets one clear error naming the field."""

from __future__ import annotations

import copy
import math
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

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
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump(BASE))
    assert load_scenario(str(f)) == load_scenario(BASE)
    assert "tenants[0].read_fraction" in error_of(
        {**BASE, "tenants": [{**BASE["tenants"][0], "read_fraction": 2}]}
    )


# --------------------------------------------------------------------------- input limits
# Scenario files come from users and scripts: anything a file or dict can say must end
# in a short ScenarioError naming the file and the field, never in a crash, a hang or
# numbers that overflow later (docs/scenarios.md, "Input limits").


def node_change(key: str, value: Any) -> dict[str, Any]:
    """BASE with one key of the preset's dram0 node changed."""
    return with_change("hardware", {"preset": "spr-a1000", "nodes": {"dram0": {key: value}}})


@pytest.mark.parametrize(
    ("spec", "needles"),
    [
        (with_change("tenants.0.threads", True), ["tenants[0].threads", "True", "integer"]),
        (with_change("tenants.0.mlp", True), ["tenants[0].mlp", "True", "expected a number"]),
        (with_change("tenants.0.compute_ns", False), ["tenants[0].compute_ns", "a number"]),
        (with_change("episode_steps", True), ["episode_steps", "integer"]),
        (with_change("interval_s", True), ["interval_s", "expected a number"]),
        (node_change("capacity_gib", True), ["hardware.nodes[0].capacity_gib", "a number"]),
        (node_change("socket", False), ["hardware.nodes[0].socket", "integer"]),
        (with_change("tenants.0.weights", [True, 1]), ["tenants[0].weights[0]", "integer"]),
        (with_change("tenants.0.hotness", {"zipf_s": True}), ["tenants[0].hotness.zipf_s"]),
    ],
)
def test_booleans_are_not_numbers(spec: dict[str, Any], needles: list[str]) -> None:
    msg = error_of(spec)
    for needle in needles:
        assert needle in msg, f"{needle!r} not in: {msg}"
    assert "boolean" in msg


@pytest.mark.parametrize(
    ("spec", "needles"),
    [
        # 10**25 steps passed before and overflowed later; 1e25 (a float) too big to be exact
        (with_change("episode_steps", 10**25), ["episode_steps", "less than or equal to 10000000"]),
        (with_change("episode_steps", 1e25), ["episode_steps", "1e+25", "integer"]),
        (with_change("episode_steps", 10_000_001), ["episode_steps", "10000000"]),
        (with_change("episode_steps", 2.5), ["episode_steps", "fractional"]),
        (with_change("interval_s", 1e308), ["interval_s", "1e+308", "86400"]),
        (node_change("capacity_gib", 1e308), ["hardware.nodes[0].capacity_gib", "1048576"]),
        (node_change("read_gbps", 2e4), ["hardware.nodes[0].read_gbps", "10000"]),
        (node_change("idle_latency_ns", 2e6), ["hardware.nodes[0].idle_latency_ns", "1000000"]),
        (node_change("knee_exp", 1e3), ["hardware.nodes[0].knee_exp", "100"]),
        (node_change("socket", 10**30), ["hardware.nodes[0].socket", "1023"]),
        (with_change("tenants.0.threads", 5000), ["tenants[0].threads", "4096"]),
        (with_change("tenants.0.mlp", 2000), ["tenants[0].mlp", "1024"]),
        (with_change("tenants.0.compute_ns", 2e9), ["tenants[0].compute_ns", "1000000000"]),
        (
            with_change("tenants.0.working_set_gib", 1e300),
            ["tenants[0].working_set_gib", "1048576"],
        ),
        (with_change("tenants.0.hotness", {"zipf_s": 11}), ["tenants[0].hotness.zipf_s", "10"]),
        (with_change("tenants.0.churn_per_s", 1e4), ["tenants[0].churn_per_s", "1000"]),
        (with_change("tenants.0.grow_gib_per_s", -1e300), ["tenants[0].grow_gib_per_s"]),
        (with_change("tenants.0.memory_high_gib", 1e300), ["tenants[0].memory_high_gib"]),
        (with_change("tenants.0.start_s", 1e10), ["tenants[0].start_s", "1000000000"]),
        (with_change("tenants.0.name", "n" * 1000), ["tenants[0].name", "at most 128"]),
    ],
)
def test_magnitudes_are_bounded(spec: dict[str, Any], needles: list[str]) -> None:
    msg = error_of(spec)
    for needle in needles:
        assert needle in msg, f"{needle!r} not in: {msg}"


@pytest.mark.parametrize(
    "path",
    [
        "interval_s",
        "tenants.0.threads",
        "tenants.0.mlp",
        "tenants.0.compute_ns",
        "tenants.0.working_set_gib",
        "tenants.0.start_s",
        "tenants.0.stop_s",
        "tenants.0.memory_low_gib",
        "tenants.0.memory_high_gib",
        "tenants.0.churn_per_s",
        "tenants.0.grow_gib_per_s",
    ],
)
@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_non_finite_numbers_are_refused(path: str, value: float) -> None:
    field = "tenants[0]." + path.split(".")[-1] if path.startswith("tenants") else path
    assert field in error_of(with_change(path, value))


def test_values_at_the_limits_load() -> None:
    """The bounds are inclusive where the docs say so (no off-by-one at the edge)."""
    spec = with_change("episode_steps", 10_000_000)
    t = spec["tenants"][0]
    t.update(threads=4096, mlp=1024, compute_ns=1e9, churn_per_s=1e3)
    t["hotness"] = {"zipf_s": 10}
    spec["interval_s"] = 86_400.0
    spec["hardware"] = {"preset": "spr-a1000", "nodes": {"cxl0": {"capacity_gib": 2**20}}}
    sc = load_scenario(spec)
    assert sc.episode_steps == 10_000_000 and sc.hardware.nodes[1].capacity_gib == 2**20
    assert load_scenario(with_change("episode_steps", 1e3)).episode_steps == 1000  # integral float


def test_mixed_family_machines_load() -> None:
    """The generator's machines (built through load_scenario) stay inside the limits."""
    from envs.families import mixed_scenario

    for split in ("train", "test"):
        for index in range(40):
            assert mixed_scenario(split, index).tenants


def test_error_lines_are_capped_and_values_cut() -> None:
    spec = copy.deepcopy(BASE)
    spec["tenants"] = [{**BASE["tenants"][0], "name": f"t{i}", "threads": 0} for i in range(100)]
    msg = error_of(spec)
    lines = msg.splitlines()
    assert len(lines) == 1 + 20 + 1, msg
    assert lines[-1].strip() == "... and 80 more"
    huge = error_of(with_change("name", ["x" * 10_000] * 10_000))
    assert "name: got [" in huge and len(huge) < 300


def yaml_text(data: Any) -> str:
    """``data`` as YAML text."""
    return yaml.safe_dump(data)


def write(path: Path, data: str | bytes) -> str:
    """Write a scenario file (text as UTF-8) and return its path as a string."""
    if isinstance(data, str):
        data = data.encode()
    path.write_bytes(data)
    return str(path)


def test_binary_and_utf16_files_name_the_file(tmp_path: Path) -> None:
    binary = write(tmp_path / "binary.yaml", bytes(range(256)) * 4)
    msg = error_of(binary)
    assert binary in msg and "not UTF-8 text" in msg
    utf16 = write(tmp_path / "utf16.yaml", yaml_text(BASE).encode("utf-16"))
    msg = error_of(utf16)
    assert utf16 in msg and "not UTF-8 text" in msg and "UTF-16" in msg
    latin1 = write(tmp_path / "latin1.yaml", "name: caf\xe9\n".encode("latin-1"))
    assert "not UTF-8 text" in error_of(latin1)
    nul = write(tmp_path / "nul.yaml", b"name: t\x00\n")
    assert "not UTF-8 text" in error_of(nul)


def test_utf8_with_bom_loads(tmp_path: Path) -> None:
    f = write(tmp_path / "bom.yaml", b"\xef\xbb\xbf" + yaml_text(BASE).encode())
    assert load_scenario(f) == load_scenario(BASE)


def test_oversize_file_is_refused_before_reading(tmp_path: Path) -> None:
    f = write(tmp_path / "big.yaml", yaml_text(BASE) + "#" + "x" * (1 << 20) + "\n")
    msg = error_of(f)
    assert f in msg and "1 MiB" in msg


def test_missing_directory_and_unreadable_paths_name_the_path(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.yaml")
    assert missing in error_of(missing) and "does not exist" in error_of(missing)
    folder = tmp_path / "folder.yaml"
    folder.mkdir()
    assert str(folder) in error_of(str(folder))
    assert "is a directory, expected a YAML file" in error_of(str(folder))
    inside_a_file = str(Path(write(tmp_path / "s.yaml", yaml_text(BASE))) / "x.yaml")
    msg = error_of(inside_a_file)  # ENOTDIR: the OS refuses the path
    assert inside_a_file in msg and "cannot be read" in msg
    assert "cannot be read" in error_of(str(tmp_path / "a\0b.yaml"))


def test_alias_bomb_is_refused_quickly_with_a_short_message(tmp_path: Path) -> None:
    # "billion laughs": each level repeats the one before 9 times (6 levels: 531441 values;
    # one level more per factor 9). Before the fix the error quoted the expanded value.
    lines = ["a: &a [" + ",".join(["lol"] * 9) + "]"]
    for prev, cur in zip("abcde", "bcdef", strict=True):
        lines.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    lines.append("name: *f")
    f = write(tmp_path / "bomb.yaml", "\n".join(lines) + "\n")
    start = time.perf_counter()
    msg = error_of(f)
    assert time.perf_counter() - start < 2.0
    assert len(msg) < 2000, msg[:200]
    assert f in msg and "line 1:" in msg and "YAML anchors (&a) are not allowed" in msg


def test_anchors_and_aliases_are_refused_naming_the_line(tmp_path: Path) -> None:
    body = yaml_text({k: v for k, v in BASE.items() if k != "name"})
    line = body.count("\n") + 1
    # loaded before the fix (name = description = "t"): scenario files do without them
    f = write(tmp_path / "anchor.yaml", body + "description: &n t\nname: *n\n")
    msg = error_of(f)
    assert f in msg and f"line {line}:" in msg and "YAML anchors (&n)" in msg
    f = write(tmp_path / "alias.yaml", body + "name: *nowhere\n")
    msg = error_of(f)
    assert f in msg and f"line {line}:" in msg and "YAML aliases (*nowhere)" in msg


@pytest.mark.parametrize(
    "text",
    [
        "a: " + "[" * 2000 + "]" * 2000 + "\n",
        "a: " + "{b: " * 2000 + "1" + "}" * 2000 + "\n",
        "".join(" " * i + f"k{i}:\n" for i in range(200)) + " " * 200 + "v\n",
    ],
)
def test_deep_nesting_is_refused_without_recursion_error(tmp_path: Path, text: str) -> None:
    f = write(tmp_path / "deep.yaml", text)
    msg = error_of(f)  # before the fix: RecursionError
    assert f in msg and "nested deeper than 32" in msg and "line " in msg


def test_too_many_yaml_values_are_refused(tmp_path: Path) -> None:
    f = write(tmp_path / "wide.yaml", "a: [" + "1," * 120_000 + "1]\n")
    msg = error_of(f)
    assert f in msg and "more than 100000 YAML values" in msg


def test_integer_too_long_to_read_names_the_line(tmp_path: Path) -> None:
    f = write(tmp_path / "int.yaml", "name: t\nepisode_steps: " + "9" * 5000 + "\n")
    msg = error_of(f)
    assert f in msg and "line 2" in msg and len(msg) < 2000
