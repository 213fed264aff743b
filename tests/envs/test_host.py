"""envs.host: reading a host's counters and writing its tiering knobs, on fixture trees only."""

from __future__ import annotations

import errno
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from envs.host import (
    DEMOTION,
    NUMA_BALANCING,
    PROMOTE_RATE,
    WI_DIR,
    HostAction,
    HostError,
    HostReader,
    HostWriter,
    Journal,
    KnobWrite,
    check_plan,
    knob_kind,
    parse_cpulist,
    parse_size,
    restore,
    write_host_tree,
)

PAGE = 4096
GIB_KIB = 1 << 20


def two_nodes(root: Path, **kw: object) -> Path:
    """A DRAM node (32 GiB, 8 free) and a CXL node (64 GiB, 60 free), with HMAT."""
    args: dict = dict(
        mem_kib=[(32 * GIB_KIB, 8 * GIB_KIB), (64 * GIB_KIB, 60 * GIB_KIB)],
        slow=[False, True],
        hmat=[(300000, 250000, 110), (64000, 60000, 250)],
        vmstat={"pgpromote_success": 0, "pgpromote_candidate": 0, "pgdemote_kswapd": 0},
    )
    args.update(kw)
    return write_host_tree(root, **args)


def snapshot_bytes(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


# ----------------------------------------------------------------------------- parsing


def test_parsers() -> None:
    assert parse_cpulist("0-3,8\n") == [0, 1, 2, 3, 8]
    assert parse_cpulist("") == []
    with pytest.raises(HostError, match="cpulist"):
        parse_cpulist("0-x")
    assert parse_size("2G") == 2 * 2**30
    assert parse_size("max") == math.inf
    assert parse_size("123\n") == 123
    with pytest.raises(HostError, match=r"memory\.low"):
        parse_size("lots", "memory.low")


# ----------------------------------------------------------------------------- reader


def test_machine_from_tree(tmp_path: Path) -> None:
    m = HostReader(two_nodes(tmp_path)).machine()
    assert m.nodes == (0, 1)
    np.testing.assert_allclose(m.capacity_gib, [32.0, 64.0])
    assert m.is_slow.tolist() == [False, True] and m.is_cxl.tolist() == [False, True]
    assert m.has_cpu.tolist() == [True, False]
    np.testing.assert_allclose(m.firmware_gbps, [250.0, 60.0])
    np.testing.assert_allclose(m.read_latency_ns, [110.0, 250.0])


def test_slow_node_from_tier_without_dax(tmp_path: Path) -> None:
    """A CPU-less node in a lower tier is slow (CXL, PMEM or HBM: unknown) even without a dax link."""
    two_nodes(tmp_path)
    for p in (tmp_path / "sys/bus/dax/devices").rglob("target_node"):
        p.unlink()
    m = HostReader(tmp_path).machine()
    assert m.is_slow.tolist() == [False, True] and m.is_cxl.tolist() == [False, False]


def test_no_hmat_means_nan_bandwidth(tmp_path: Path) -> None:
    r = HostReader(two_nodes(tmp_path, hmat=None))
    assert np.isnan(r.machine().firmware_gbps).all()
    assert "hmat-bandwidth" not in r.available()


def test_rates_are_differences_over_the_interval(tmp_path: Path) -> None:
    clock = Clock()
    root = two_nodes(
        tmp_path,
        node_vmstat=[{"pgdemote_kswapd": 0}, {"pgpromote_success": 0}],
        psi_us=(1000, 0),
        mbm_bytes=[0, 0],
    )
    r = HostReader(root, page_size=PAGE, clock=clock)
    first = r.read()
    assert first.interval_s == 0.0 and first.promotion_mbps == 0.0
    np.testing.assert_allclose(first.node_used_gib, [24.0, 4.0])
    np.testing.assert_allclose(first.node_used_share, [0.75, 4 / 64])
    clock.t = 2.0
    two_nodes(
        root,
        vmstat={
            "pgpromote_success": 1000,
            "pgpromote_candidate": 3000,
            "pgdemote_kswapd": 500,
            "pgdemote_direct": 100,
            "numa_hint_faults": 400,
            "numa_hint_faults_local": 100,
        },
        node_vmstat=[{"pgdemote_kswapd": 600}, {"pgpromote_success": 1000}],
        psi_us=(1000 + 500_000, 100_000),
        mbm_bytes=[3 * 10**9, 1 * 10**9],
    )
    s = r.read()
    assert s.interval_s == 2.0
    assert s.promotion_mbps == pytest.approx(1000 * PAGE / 2 / 1e6)
    assert s.promotion_candidates_mbps == pytest.approx(3000 * PAGE / 2 / 1e6)
    assert s.demotion_mbps == pytest.approx(600 * PAGE / 2 / 1e6)
    np.testing.assert_allclose(s.node_promotion_mbps, [0.0, 1000 * PAGE / 2 / 1e6])
    np.testing.assert_allclose(s.node_demotion_mbps, [600 * PAGE / 2 / 1e6, 0.0])
    assert s.hint_faults_per_s == pytest.approx(200.0)
    assert s.hint_faults_local_share == pytest.approx(0.25)
    assert s.pressure_some == pytest.approx(0.25) and s.pressure_full == pytest.approx(0.05)
    assert s.bandwidth_gbps == pytest.approx(2.0)


def test_cgroups_v2_and_v1(tmp_path: Path) -> None:
    cg = {
        "tenants/a": {
            "memory.current": str(6 << 30),
            "memory.numa_stat": f"anon N0={4 << 30} N1={1 << 30}\nfile N0={1 << 30} N1=0\n",
            "memory.events": "low 0\nhigh 3\nmax 0\noom 0\n",
            "memory.pressure": "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
            "memory.low": str(2 << 30),
            "memory.high": "max",
        }
    }
    root = two_nodes(tmp_path, cgroups=cg)
    v1 = root / "sys/fs/cgroup/memory/old"
    v1.mkdir(parents=True)
    (v1 / "memory.usage_in_bytes").write_text(str(1 << 30) + "\n")
    (v1 / "memory.numa_stat").write_text(
        "total=262144 N0=262144 N1=0\nanon=131072 N0=131072 N1=0\n"
    )
    clock = Clock()
    r = HostReader(root, cgroups=["tenants/a", "old"], page_size=PAGE, clock=clock)
    assert "cgroup-usage" in r.available()
    a, old = r.read().cgroups
    assert (a.version, old.version) == (2, 1)
    np.testing.assert_allclose(a.node_resident_gib, [5.0, 1.0])
    assert a.current_gib == 6.0 and a.memory_low_gib == 2.0 and a.memory_high_gib == math.inf
    np.testing.assert_allclose(old.node_resident_gib, [131072 * PAGE / 2**30, 0.0])
    clock.t = 1.0
    (root / "sys/fs/cgroup/tenants/a/memory.events").write_text("high 7\n")
    (root / "sys/fs/cgroup/tenants/a/memory.pressure").write_text(
        "some avg10=0 avg60=0 avg300=0 total=300000\n"
    )
    a2 = r.read().cgroups[0]
    assert a2.high_events == 4.0 and a2.pressure_some == pytest.approx(0.3)


def test_missing_cgroup_is_one_line(tmp_path: Path) -> None:
    r = HostReader(two_nodes(tmp_path), cgroups=["nope"])
    with pytest.raises(HostError, match="--cgroups 'nope'") as e:
        r.read()
    assert "\n" not in str(e.value)
    with pytest.raises(HostError, match=r"no '\.\.'"):
        HostReader(tmp_path, cgroups=["../etc"])


def test_mbm_unavailable(tmp_path: Path) -> None:
    r = HostReader(two_nodes(tmp_path, mbm_bytes=["Unavailable", 5]))
    assert "mbm" not in r.available() and r.read().bandwidth_gbps is None


def test_reader_writes_nothing(tmp_path: Path) -> None:
    root = two_nodes(tmp_path)
    before = snapshot_bytes(root)
    r = HostReader(root)
    r.read()
    r.read()
    r.available()
    assert snapshot_bytes(root) == before


# ----------------------------------------------------------------------------- writer


def test_plan_only_changes_and_auto_off_before_weights(tmp_path: Path) -> None:
    root = two_nodes(tmp_path, weights=[1], auto="true")
    w = HostWriter(root)
    plan = w.plan(HostAction(weights={0: 3, 1: 1}, numa_balancing=2, promote_rate_mbps=65536))
    assert [str(p) for p in plan] == [
        f"{WI_DIR}/auto: true -> N",
        f"{WI_DIR}/node0: 1 -> 3",
        f"{NUMA_BALANCING}: 0 -> 2",
    ]
    # booleans compare by meaning: Y on a file reading "true" changes nothing
    assert w.plan(HostAction(auto=True, demotion=False)) == []


def test_auto_type_name(tmp_path: Path) -> None:
    root = two_nodes(tmp_path, auto="false", auto_name="__auto_type")
    w = HostWriter(root)
    assert w.auto_path() == f"{WI_DIR}/__auto_type"
    plan = w.plan(HostAction(auto=True))
    assert [str(p) for p in plan] == [f"{WI_DIR}/__auto_type: false -> Y"]
    assert w.apply(plan, None) == []
    assert (root / WI_DIR / "__auto_type").read_text() == "Y\n"


def test_missing_knobs_are_named(tmp_path: Path) -> None:
    root = two_nodes(tmp_path, auto=None, knobs={"promote_rate": ""})
    w = HostWriter(root)
    assert w.missing(["auto", "promote_rate", "weights", "demotion"], [0, 1, 2]) == [
        f"{WI_DIR}/auto (or __auto_type; Linux 6.16+)",
        PROMOTE_RATE,
        f"{WI_DIR}/node2",
    ]
    with pytest.raises(HostError, match="auto: missing"):
        w.plan(HostAction(auto=True))
    with pytest.raises(HostError, match=f"{PROMOTE_RATE}: missing"):
        w.plan(HostAction(promote_rate_mbps=100))


@pytest.mark.parametrize(
    ("action", "match"),
    [
        (HostAction(weights={0: 0}), "weight '0' out of range"),
        (HostAction(weights={0: 256}), "weight '256' out of range"),
        (HostAction(numa_balancing=4), "mode '4' out of range"),
        (HostAction(promote_rate_mbps=2**31), "out of range, expected MB/s"),
    ],
)
def test_ranges_checked_before_any_write(tmp_path: Path, action: HostAction, match: str) -> None:
    root = two_nodes(tmp_path)
    before = snapshot_bytes(root)
    with pytest.raises(HostError, match=match):
        HostWriter(root).plan(action)
    with pytest.raises(HostError, match=match):
        check_plan([KnobWrite(DEMOTION, "false", "true"), *_raw_plan(action)])
    assert snapshot_bytes(root) == before


def _raw_plan(a: HostAction) -> list[KnobWrite]:
    if a.weights:
        return [KnobWrite(f"{WI_DIR}/node{n}", "1", str(v)) for n, v in a.weights.items()]
    if a.numa_balancing is not None:
        return [KnobWrite(NUMA_BALANCING, "0", str(a.numa_balancing))]
    return [KnobWrite(PROMOTE_RATE, "0", str(a.promote_rate_mbps))]


def test_knob_kind_refuses_other_files() -> None:
    assert knob_kind(f"{WI_DIR}/node12") == "weights"
    assert knob_kind("sys/fs/cgroup/a/b/memory.high") == "memory.high"
    for bad in (
        "sys/kernel/mm/damon/admin/kdamonds/0/state",
        "etc/passwd",
        "sys/fs/cgroup/../../etc/memory.high",
        "sys/fs/cgroup/memory/a/memory.low",  # v1 has no memory.low
    ):
        with pytest.raises(HostError, match="not a knob"):
            knob_kind(bad)


def test_apply_writes_each_value_once_and_journals_first(tmp_path: Path) -> None:
    root = two_nodes(tmp_path / "t", weights=[1], auto="true")
    cg = root / "sys/fs/cgroup/a"
    cg.mkdir(parents=True)
    for f, t in (
        ("memory.current", "0"),
        ("memory.low", "0"),
        ("memory.high", "max"),
        ("memory.reclaim", ""),
    ):
        (cg / f).write_text(t + "\n")
    w = HostWriter(root, cgroups=["a"])
    plan = w.plan(
        HostAction(
            weights={0: 5, 1: 2},
            demotion=True,
            memory_low={"a": 1 << 30},
            memory_high={"a": 4 << 30},
            memory_reclaim={"a": 1 << 20},
        )
    )
    j = Journal(tmp_path / "journal.json", root)
    assert w.apply(plan, j) == []
    assert (root / WI_DIR / "node0").read_text() == "5\n"
    assert (root / WI_DIR / "node1").read_text() == "2\n"
    assert (root / WI_DIR / "auto").read_text() == "N\n"
    assert (root / DEMOTION).read_text() == "true\n"
    assert (cg / "memory.low").read_text() == f"{1 << 30}\n"
    assert (cg / "memory.high").read_text() == f"{4 << 30}\n"
    assert (cg / "memory.reclaim").read_text() == f"{1 << 20}\n"
    doc = json.loads((tmp_path / "journal.json").read_text())
    assert {e["path"]: e["old"] for e in doc["entries"]} == {
        f"{WI_DIR}/auto": "true",
        f"{WI_DIR}/node0": "1",
        f"{WI_DIR}/node1": "1",
        DEMOTION: "false",
        "sys/fs/cgroup/a/memory.low": "0",
        "sys/fs/cgroup/a/memory.high": "max",
    }
    # a second plan never overwrites an original
    assert w.apply(w.plan(HostAction(weights={0: 7, 1: 2})), j) == []
    assert json.loads((tmp_path / "journal.json").read_text())["entries"][1]["old"] == "1"
    # restore: every original back, weights before auto (auto stays on at the end)
    done, refused = restore(Journal.load(tmp_path / "journal.json"))
    assert refused == []
    assert [d.path for d in done][-1] == f"{WI_DIR}/auto"
    assert (root / WI_DIR / "node0").read_text() == "1\n"
    assert (root / WI_DIR / "auto").read_text() == "true\n"
    assert (root / DEMOTION).read_text() == "false\n"
    assert (cg / "memory.high").read_text() == "max\n"
    assert "restored" in json.loads((tmp_path / "journal.json").read_text())


def test_refusals_are_reported_by_file_and_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = two_nodes(tmp_path)
    w = HostWriter(root)
    plan = w.plan(HostAction(numa_balancing=2, demotion=True))
    real_open, real_write = os.open, os.write
    opened: dict[int, str] = {}  # the writer's file descriptors and the files they write

    def track(path: Any, flags: int, *args: Any) -> int:
        fd = real_open(path, flags, *args)
        opened[fd] = str(path)
        return fd

    def refuse(fd: int, data: bytes) -> int:
        if opened.get(fd, "").endswith("numa_balancing"):
            raise OSError(errno.EBUSY, os.strerror(errno.EBUSY))
        return real_write(fd, data)

    monkeypatch.setattr("envs.host.os.open", track)
    monkeypatch.setattr("envs.host.os.write", refuse)
    refused = w.apply(plan, None)
    assert [str(r) for r in refused] == [
        f"{NUMA_BALANCING}: writing '2' refused: EBUSY (Device or resource busy)"
    ]
    assert (root / DEMOTION).read_text() == "true\n"  # the other write was made
    (root / PROMOTE_RATE).unlink()  # an older kernel: the file is not there
    r = w.write(PROMOTE_RATE, "100")
    assert r is not None and r.error == "ENOENT" and not (root / PROMOTE_RATE).exists()


def test_journal_load_refuses_foreign_paths(tmp_path: Path) -> None:
    bad = tmp_path / "j.json"
    doc = {
        "format": "tiergym-deploy-journal",
        "version": 1,
        "root": str(tmp_path),
        "entries": [{"path": "sys/kernel/mm/damon/admin/kdamonds/0/state", "old": "on"}],
    }
    bad.write_text(json.dumps(doc))
    with pytest.raises(HostError, match="not a knob"):
        Journal.load(bad)
    doc["entries"] = [{"path": f"{WI_DIR}/node0", "old": "999"}]
    bad.write_text(json.dumps(doc))
    with pytest.raises(HostError, match="out of range"):
        Journal.load(bad)
    bad.write_text("{not json")
    with pytest.raises(HostError, match="not a JSON journal"):
        Journal.load(bad)
    with pytest.raises(HostError, match="no such file"):
        Journal.load(tmp_path / "absent.json")


def test_write_host_tree_refuses_root() -> None:
    with pytest.raises(HostError, match="refusing"):
        write_host_tree("/", [(1, 1)])


# ----------------------------------------------------------------------------- the host view


def test_host_view_constants_are_the_simulator_scales() -> None:
    from envs.host import HOST_GIB_SCALE, HOST_MBPS_SCALE
    from envs.spaces import GIB_SCALE, MBPS_SCALE

    assert (HOST_GIB_SCALE, HOST_MBPS_SCALE) == (GIB_SCALE, MBPS_SCALE)


def _tree_of_state(root: Path, m: Any, st: Any, b: int, counters: dict[str, int]) -> Path:
    """A host tree of instance ``b`` after a step: meminfo from the nodes' capacity and use,
    one cgroup ``tN`` per tenant slot with its pages per node (the model's placement), and
    the cumulative vmstat ``counters``."""
    cap = st.instance.capacity_gib.T[b]
    used = m.node_capacity_used_gib[b]
    total = [round(c * GIB_KIB) for c in cap]
    mem = [(tk, tk - round(u * GIB_KIB)) for tk, u in zip(total, used, strict=True)]
    per_node = st.model.place[:, :, :, b].sum(axis=1)  # (T, N) GiB
    cgroups = {}
    for t in range(per_node.shape[0]):
        by = [round(g * 2**30) for g in per_node[t]]
        cgroups[f"t{t}"] = {
            "memory.current": str(sum(by)),
            "memory.numa_stat": "anon " + " ".join(f"N{n}={x}" for n, x in enumerate(by)) + "\n",
        }
    return write_host_tree(
        root,
        mem,
        slow=list(core_hw(st).is_cxl[b]),
        vmstat=counters,
        cgroups=cgroups,
    )


def core_hw(st: Any) -> Any:
    from envs import core

    return core.hardware(st)


def test_simulated_host_view_matches_the_reader_on_a_tree_of_the_state(tmp_path: Path) -> None:
    """observation='host' computed in the simulator and host_view() of HostReader's snapshot
    of a tree written from the same simulated state agree field by field (the rates up to
    one page per interval, the counters being whole pages)."""
    from envs import core
    from envs.host import host_view, host_view_names

    p = core.make_params("colocation", pool_size=8, observation="host", weights="global")
    st, obs = core.reset(p, np.arange(3))
    T, N = p.n_tenants, p.n_nodes
    assert p.encoder.names(p.node_names) == host_view_names(p.node_names, T)
    assert obs.shape == (3, 2 * N + 3 * T + 3)
    # numa-tiering's action: local-first, promotion at 65536 MB/s
    act = np.concatenate([np.full((3, N), -1.0), np.ones((3, 1))], axis=1).astype(np.float32)
    clocks = [Clock() for _ in range(3)]
    readers: list[HostReader | None] = [None] * 3
    counts = [
        dict.fromkeys(("pgpromote_success", "pgpromote_candidate", "pgdemote_kswapd"), 0)
        for _ in range(3)
    ]
    names = host_view_names(p.node_names, T)
    rate_fields = [
        i for i, n in enumerate(names) if n in ("promotion", "promotion_candidates", "demotion")
    ]
    checked_rates = 0.0
    for step in range(6):
        st, obs, _, _, _, m = core.step(p, st, act)
        for b in range(3):
            dt = float(st.instance.interval_s[b])
            for key, mbps in (
                ("pgpromote_success", m.promotion_mbps[b]),
                ("pgpromote_candidate", m.promotion_candidates_mbps[b]),
                ("pgdemote_kswapd", m.demotion_mbps[b]),
            ):
                counts[b][key] += round(mbps * 1e6 * dt / PAGE)
            root = _tree_of_state(tmp_path / f"i{b}", m, st, b, counts[b])
            if readers[b] is None:  # the reader's first read primes the counters
                readers[b] = HostReader(
                    root, [f"t{t}" for t in range(T)], page_size=PAGE, clock=clocks[b]
                )
                r0 = readers[b]
                assert r0 is not None
                r0.read()
                continue
            clocks[b].t += dt
            r = readers[b]
            assert r is not None
            got = host_view(r.read(), r.machine().is_slow, T)
            want = obs[b]
            for i, name in enumerate(names):
                tol = PAGE / dt / 1e6 / math.log1p(65536.0) if i in rate_fields else 1e-6
                assert abs(float(got[i]) - float(want[i])) <= tol + 1e-7, (
                    step,
                    b,
                    name,
                    got[i],
                    want[i],
                )
            checked_rates += float(want[rate_fields].sum())
    assert checked_rates > 0  # promotions and demotions happened, so the rates were compared
    assert obs[:, [names.index(f"tenant[{t}].present") for t in range(T)]].sum() > 1
