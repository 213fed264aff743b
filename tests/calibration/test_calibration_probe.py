"""``python -m calibration probe`` on fixture trees (never the real /sys).

The trees (tests/calibration/host_fixtures.py): one socket with one expander (CDAT on the CXL
region), two sockets with expanders on socket 0 and HMAT data, and a published
two-socket CXL server without HMAT.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from host_fixtures import (
    PUBLISHED_DISTANCE,
    PUBLISHED_MB,
    FixtureNode,
    build_host,
    one_socket_one_expander,
    published_two_socket,
    two_socket_hmat,
)

from calibration.cli import main
from calibration.probe import ProbeError, parse_cpulist, probe
from envs import ScenarioError, compile_params, hardware_presets, load_scenario


def _machine(root: Path, tmp: Path, *extra: str) -> dict:
    out = tmp / "machine.yaml"
    assert main(["probe", "--root", str(root), "-o", str(out), *extra]) == 0
    return yaml.safe_load(out.read_text())


def _node(hw: dict, name: str) -> dict:
    return next(n for n in hw["nodes"] if n["name"] == name)


def _loads_in_a_scenario(hw: dict) -> None:
    sc = load_scenario(
        {
            "name": "probed",
            "episode_steps": 2,
            "hardware": hw,
            "tenants": [
                {
                    "name": "kv",
                    "threads": 4,
                    "mlp": 8,
                    "compute_ns": 50,
                    "read_fraction": 0.8,
                    "working_set_gib": 8,
                }
            ],
        }
    )
    p = compile_params(sc)
    assert p.n_nodes == len(hw["nodes"])


def test_cpulist() -> None:
    assert parse_cpulist("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]
    assert parse_cpulist("") == []
    with pytest.raises(ProbeError, match="expected a cpulist"):
        parse_cpulist("0-x")


def test_one_socket_one_expander(tmp_path: Path) -> None:
    root = one_socket_one_expander(tmp_path / "host")
    hw = _machine(root, tmp_path)
    assert [n["name"] for n in hw["nodes"]] == ["node0", "node1"]
    d, c = _node(hw, "node0"), _node(hw, "node1")
    assert (d["kind"], d["socket"], d["capacity_gib"]) == ("dram", 0, 64.0)
    assert (c["kind"], c["socket"], c["capacity_gib"]) == ("cxl", 0, 128.0)
    # CDAT on the region: 30 GB/s read, 28 write, 280 ns
    assert (c["link_read_gbps"], c["link_write_gbps"], c["idle_latency_ns"]) == (30.0, 28.0, 280.0)
    # nearest preset by link bandwidth: spr-4cxl's x8 expander (24 GB/s) rather than the
    # x16 A1000 (48 GB/s); the expander's memory keeps that preset's device/link ratio
    x8 = next(n for n in hardware_presets()["spr-4cxl"]["nodes"] if n["name"] == "cxl0")
    assert c["read_gbps"] == pytest.approx(x8["read_gbps"] * 30.0 / x8["link_read_gbps"], 0.01)
    assert c["knee_exp"] == x8["knee_exp"]
    # no HMAT on node 0: every performance value is the preset's
    dram0 = next(n for n in hardware_presets()["spr-a1000"]["nodes"] if n["name"] == "dram0")
    assert d["read_gbps"] == dram0["read_gbps"] and d["knee_exp"] == dram0["knee_exp"]
    assert hw["distance"] == [[10, 14], [14, 10]]
    _loads_in_a_scenario(hw)


def test_every_value_says_where_it_came_from(tmp_path: Path) -> None:
    root = one_socket_one_expander(tmp_path / "host")
    text, _ = probe(root)
    in_nodes = False
    for line in text.splitlines():
        if line.startswith("nodes:"):
            in_nodes = True
            continue
        if in_nodes and line.startswith("    ") and ":" in line:
            assert "# read:" in line or "# assumed:" in line, line
        if line.startswith("distance:"):
            break
    assert "read: node1/meminfo MemTotal 134217728 kB" in text
    assert "cxl/devices/region0/access0/read_latency" in text


def test_two_sockets_with_hmat(tmp_path: Path) -> None:
    hw = _machine(two_socket_hmat(tmp_path / "host"), tmp_path)
    kinds = {n["name"]: (n["kind"], n["socket"]) for n in hw["nodes"]}
    assert kinds == {
        "node0": ("dram", 0),
        "node1": ("dram", 1),
        "node2": ("cxl", 0),
        "node3": ("cxl", 0),
    }
    d = _node(hw, "node1")
    assert (d["read_gbps"], d["write_gbps"], d["idle_latency_ns"]) == (120.0, 100.0, 110.0)
    assert d["mixed_gbps"] <= 1 / (0.5 / 120 + 0.5 / 100)
    c = _node(hw, "node3")
    assert (c["link_read_gbps"], c["link_write_gbps"], c["idle_latency_ns"]) == (45.0, 40.0, 270.0)
    # HMAT bandwidth picks the nearest preset: 120 GB/s is nearer spr-4cxl's 8-channel
    # DRAM (314) than the 2-channel SNC node (67) on a log scale
    spr4 = next(n for n in hardware_presets()["spr-4cxl"]["nodes"] if n["name"] == "dram0")
    assert d["queue_slope_ns"] == spr4["queue_slope_ns"]
    assert hw["distance"][1] == [21, 10, 24, 24]
    _loads_in_a_scenario(hw)


def test_published_two_socket_server(tmp_path: Path) -> None:
    """The published layout: right nodes, kinds, sockets, capacities and distances."""
    hw = _machine(published_two_socket(tmp_path / "host"), tmp_path)
    got = {n["name"]: (n["kind"], n["socket"]) for n in hw["nodes"]}
    assert got == {
        "node0": ("dram", 0),
        "node1": ("dram", 1),
        "node2": ("cxl", 0),
        "node3": ("cxl", 1),
    }
    for i, mb in PUBLISHED_MB.items():
        assert _node(hw, f"node{i}")["capacity_gib"] == pytest.approx(mb / 1024, abs=1e-3)
    assert hw["distance"] == PUBLISHED_DISTANCE
    _loads_in_a_scenario(hw)


def test_slow_cpuless_memory_of_unknown_kind(tmp_path: Path) -> None:
    """A CPU-less node in a slower tier, onlined by an hmem dax device (no CXL region):
    slow memory of unknown kind, modelled as a cxl node; a CPU-less node in DRAM's tier
    is a CPU-less DRAM node."""
    g = 1024 * 1024
    nodes = [
        FixtureNode(0, cpus=range(8), socket=0, mem_kib=32 * g),
        FixtureNode(1, mem_kib=64 * g, hmem_dax="dax0.0"),
        FixtureNode(2, mem_kib=16 * g),
    ]
    dist = [[10, 17, 12], [17, 10, 19], [12, 19, 10]]
    root = build_host(tmp_path / "host", nodes, dist, tiers={4: [0, 2], 12: [1]})
    text, host = probe(root)
    hw = yaml.safe_load(text)
    assert [n.kind for n in host.nodes] == ["dram", "slow", "dram"]
    assert _node(hw, "node1")["kind"] == "cxl"
    assert "unknown kind" in text
    assert _node(hw, "node2")["cpus"] is False
    _loads_in_a_scenario(hw)


def test_snapshot_copies_only_what_was_read_and_probes_the_same(tmp_path: Path) -> None:
    root = two_socket_hmat(tmp_path / "host")
    snap = tmp_path / "snap"
    first = _machine(root, tmp_path, "--snapshot", str(snap))
    assert not (snap / "proc/1").exists() and not (snap / "home").exists()
    assert (snap / "sys/bus/dax/devices/dax0.0").is_symlink()
    files = sorted(p.relative_to(snap).as_posix() for p in snap.rglob("*") if p.is_file())
    assert files and all(f.startswith(("sys/", "proc/sys/kernel/osrelease")) for f in files)
    (tmp_path / "b").mkdir()
    again = _machine(snap, tmp_path / "b")
    assert again["nodes"] == first["nodes"] and again["distance"] == first["distance"]


def test_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["probe", "--root", str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "sys/devices/system/node/online: not found" in err
    root = one_socket_one_expander(tmp_path / "host")
    (root / "sys/devices/system/node/node1/meminfo").write_text("garbage\n")
    assert main(["probe", "--root", str(root)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "node1/meminfo: no 'Node 1 MemTotal" in err
    snap = tmp_path / "full"
    snap.mkdir()
    (snap / "x").write_text("")
    assert main(["probe", "--root", str(root), "--snapshot", str(snap)]) == 2


def test_probe_never_writes_under_the_root(tmp_path: Path) -> None:
    root = one_socket_one_expander(tmp_path / "host")
    before = {p: p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}
    probe(root)
    after = {p: p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}
    assert before == after


def test_a_scenario_file_names_the_probed_machine_file(tmp_path: Path) -> None:
    """``hardware: machine.yaml`` in a scenario file reads the file probe wrote, beside it."""
    root = one_socket_one_expander(tmp_path / "host")
    hw = _machine(root, tmp_path)
    tenant = {"name": "kv", "threads": 4, "mlp": 8, "compute_ns": 50, "read_fraction": 0.8}
    scenario = {"name": "mine", "episode_steps": 2, "hardware": "machine.yaml"}
    (tmp_path / "mine.yaml").write_text(
        yaml.safe_dump({**scenario, "tenants": [{**tenant, "working_set_gib": 8}]})
    )
    sc = load_scenario(tmp_path / "mine.yaml")
    assert [n.name for n in sc.hardware.nodes] == [n["name"] for n in hw["nodes"]]
    assert [n.capacity_gib for n in sc.hardware.nodes] == [64.0, 128.0]
    (tmp_path / "other.yaml").write_text(
        yaml.safe_dump(
            {**scenario, "hardware": "gone.yaml", "tenants": [{**tenant, "working_set_gib": 8}]}
        )
    )
    with pytest.raises(ScenarioError, match=r"hardware file .*gone\.yaml' does not exist"):
        load_scenario(tmp_path / "other.yaml")
