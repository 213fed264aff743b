"""deploy.py on fixture trees only (never this machine's /sys or /proc): dry run, --apply,
restore on SIGTERM and from a journal after kill -9, replay, and one-line refusals."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import deploy
from baselines import catalogue
from baselines.policies import DamonTiering
from envs.host import (
    DEMOTION,
    NUMA_BALANCING,
    PROMOTE_RATE,
    WI_DIR,
    HostReader,
    write_host_tree,
)

ROOT = Path(__file__).resolve().parents[1]
GIB_KIB = 1 << 20


def host(root: Path, **kw: Any) -> Path:
    """A DRAM node (32 GiB, 8 free) and a CXL node (64 GiB, 60 free), HMAT, auto on."""
    args: dict[str, Any] = dict(
        mem_kib=[(32 * GIB_KIB, 8 * GIB_KIB), (64 * GIB_KIB, 60 * GIB_KIB)],
        slow=[False, True],
        hmat=[(300000, 250000, 110), (64000, 60000, 250)],
        vmstat={"pgpromote_success": 0, "pgdemote_kswapd": 0},
    )
    args.update(kw)
    return write_host_tree(root, **args)


def tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str], list[str]]:
    lines: list[str] = []
    code = deploy.main(argv, out=lines.append)
    err = capsys.readouterr().err.splitlines()
    return code, lines, err


# ----------------------------------------------------------------------------- dry run


def test_dry_run_changes_no_byte(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = host(tmp_path / "h")
    before = tree(root)
    code, lines, err = run(
        ["--policy", "static:3:1@256", "--root", str(root), "--steps", "2", "--interval", "0.01"],
        capsys,
    )
    assert code == 0 and err == []
    assert tree(root) == before
    assert lines[0].startswith("deploy static:3:1@256") and "dry run" in lines[0]
    assert len(lines) == 3 and all(x.count("\n") == 0 for x in lines)
    assert lines[1].startswith("[1] read: nodes 0:24.0/32.0GiB 1:4.0/64.0GiB")
    want = (
        f"would write: {WI_DIR}/auto: true -> N; {WI_DIR}/node0: 1 -> 3; "
        f"{NUMA_BALANCING}: 0 -> 2; {PROMOTE_RATE}: 65536 -> 256; {DEMOTION}: false -> true"
    )
    assert lines[1].endswith(want) and lines[2].endswith(want)
    assert not list(tmp_path.glob("*journal*")) and not list(Path.cwd().glob("tiergym-deploy*"))


def test_weighted_interleave_writes_auto_or_hmat_weights(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = host(tmp_path / "a", auto="false", auto_name="__auto_type")
    code, lines, _ = run(
        ["--policy", "weighted-interleave", "--root", str(root), "--steps", "1"], capsys
    )
    assert code == 0 and f"{WI_DIR}/__auto_type: false -> Y" in lines[1]
    # no auto switch (Linux < 6.16): the auto weights from HMAT, per node (250:60 GB/s -> 25:6)
    root = host(tmp_path / "b", auto=None)
    code, lines, _ = run(
        ["--policy", "weighted-interleave", "--root", str(root), "--steps", "1"], capsys
    )
    assert code == 0
    assert f"{WI_DIR}/node0: 1 -> 25; {WI_DIR}/node1: 1 -> 6" in lines[1]


def test_left_out_node_gets_the_kernel_minimum(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = host(tmp_path, auto=None)
    code, lines, _ = run(["--policy", "static:1:0", "--root", str(root), "--steps", "1"], capsys)
    writes = lines[1].split("would write: ")[1]
    assert code == 0 and writes == f"{WI_DIR}/node0: 1 -> 255; {DEMOTION}: false -> true"


def test_dram_first_keeps_the_normal_balancing_bit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = host(tmp_path, knobs={"numa_balancing": "3"})
    code, lines, _ = run(["--policy", "dram-first", "--root", str(root), "--steps", "1"], capsys)
    assert code == 0
    assert lines[1].endswith(f"would write: {NUMA_BALANCING}: 3 -> 1; {DEMOTION}: false -> true")


# ----------------------------------------------------------------------------- apply


def test_apply_writes_exactly_then_restores(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = host(tmp_path / "h")
    before = tree(root)
    journal = tmp_path / "j.json"
    seen: dict[str, str] = {}

    def out(line: str) -> None:
        if line.startswith("[1]"):
            for rel in (
                f"{WI_DIR}/auto",
                f"{WI_DIR}/node0",
                f"{WI_DIR}/node1",
                NUMA_BALANCING,
                PROMOTE_RATE,
                DEMOTION,
            ):
                seen[rel] = (root / rel).read_text()
        lines.append(line)

    lines: list[str] = []
    argv = ["--policy", "static:3:1@256", "--root", str(root), "--steps", "1", "--apply"]
    assert deploy.main([*argv, "--journal", str(journal)], out=out) == 0
    assert seen == {
        f"{WI_DIR}/auto": "N\n",
        f"{WI_DIR}/node0": "3\n",
        f"{WI_DIR}/node1": "1\n",
        NUMA_BALANCING: "2\n",
        PROMOTE_RATE: "256\n",
        DEMOTION: "true\n",
    }
    assert "wrote: " in lines[1] and lines[2].startswith("restored 5 file(s)")
    assert tree(root) == before  # every original back at the end
    doc = json.loads(journal.read_text())
    assert doc["restored"] and len(doc["entries"]) == 5
    # a second --apply may reuse a restored journal
    assert deploy.main([*argv, "--journal", str(journal)], out=lambda s: None) == 0


def _wait_for(pred: Any, proc: subprocess.Popen[str], what: str, timeout: float = 120.0) -> None:
    t0 = time.monotonic()
    while not pred():
        if proc.poll() is not None:
            raise AssertionError(
                f"deploy.py exited ({proc.returncode}) before {what}: {proc.communicate()}"
            )
        if time.monotonic() - t0 > timeout:
            proc.kill()
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _start(root: Path, journal: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "deploy.py"),
            "--policy",
            "numa-tiering",
            "--root",
            str(root),
            "--interval",
            "0.2",
            "--apply",
            "--journal",
            str(journal),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow  # a signal to deploy.py in a process of its own (about 9 s)
def test_sigterm_restores_every_original(tmp_path: Path) -> None:
    root = host(tmp_path / "h")
    before = tree(root)
    proc = _start(root, tmp_path / "j.json")
    _wait_for(lambda: (root / DEMOTION).read_text() == "true\n", proc, "the first write")
    assert (root / NUMA_BALANCING).read_text() == "2\n"
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "stopped by SIGTERM" in out and "restored 2 file(s)" in out
    assert tree(root) == before


@pytest.mark.slow  # SIGKILL to deploy.py in a process of its own, then the journal (about 8 s)
def test_journal_restores_after_kill_9(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = host(tmp_path / "h")
    before = tree(root)
    journal = tmp_path / "j.json"
    proc = _start(root, journal)
    _wait_for(lambda: (root / DEMOTION).read_text() == "true\n", proc, "the first write")
    proc.kill()
    proc.communicate(timeout=60)
    assert tree(root) != before
    # the next --apply refuses to overwrite the journal of originals not restored yet
    code, _, err = run(
        ["--policy", "dram-first", "--root", str(root), "--apply", "--journal", str(journal)],
        capsys,
    )
    assert code == 2 and len(err) == 1 and "not restored yet" in err[0]
    code, lines, err = run(["--restore", str(journal)], capsys)
    assert code == 0 and err == [] and lines[0].startswith("restored 2 file(s)")
    assert f"  {DEMOTION}: true -> false" in lines
    assert tree(root) == before


def test_apply_without_permission_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = host(tmp_path / "h")
    before = tree(root)
    monkeypatch.setattr("envs.host.os.access", lambda p, m: not str(p).endswith("demotion_enabled"))
    code, lines, err = run(
        [
            "--policy",
            "numa-tiering",
            "--root",
            str(root),
            "--apply",
            "--journal",
            str(tmp_path / "j"),
        ],
        capsys,
    )
    assert code == 2 and lines == []
    assert err == [
        f"deploy.py: error: --apply: no permission to write {DEMOTION} (run as root, or without --apply)"
    ]
    assert tree(root) == before and not (tmp_path / "j").exists()


# ----------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("policy", "tree_kw", "message"),
    [
        (
            "weighted-interleave",
            {"auto": None, "hmat": None},
            f"weighted-interleave needs knobs this host lacks: {WI_DIR}/auto",
        ),
        (
            "numa-tiering",
            {"knobs": {"promote_rate": ""}},
            f"numa-tiering needs knobs this host lacks: {PROMOTE_RATE}",
        ),
        (
            "colloid",
            {"mbm_bytes": [1, 2]},
            "colloid needs what this host does not expose: node-latency",
        ),
        (
            "bw-aware-interleave",
            {},
            "bw-aware-interleave needs what this host does not expose: mbm",
        ),
        (
            "caption",
            {},
            "--policy caption: cannot run on a host: it tunes on the tenants' performance",
        ),
        (
            "memcg-fair",
            {},
            "--policy memcg-fair: cannot run on a host: its per-cgroup promotion throttle",
        ),
        ("planner", {}, "--policy planner: cannot run on a host: it is clairvoyant"),
        ("no-such", {}, "--policy 'no-such': not a heuristic nor a run folder"),
        (
            "static:1:2:3",
            {},
            "--policy static:1:2:3: static:1:2:3: 3 weights for a machine of 2 nodes",
        ),
    ],
)
def test_refusals_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], policy: str, tree_kw: dict, message: str
) -> None:
    root = host(tmp_path, **tree_kw)
    before = tree(root)
    code, lines, err = run(["--policy", policy, "--root", str(root), "--steps", "1"], capsys)
    assert code == 2 and lines == [] and len(err) == 1, err
    assert err[0].startswith(f"deploy.py: error: {message}"), err[0]
    assert tree(root) == before


def test_bw_aware_runs_where_mbm_is_exposed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = host(tmp_path, mbm_bytes=[0, 0])
    code, lines, _ = run(
        ["--policy", "bw-aware-interleave", "--root", str(root), "--steps", "1"], capsys
    )
    assert code == 0 and "bw 0.0 GB/s" in lines[1]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--policy", "tpp", "--interval", "0"], "--interval '0': expected seconds > 0"),
        (["--policy", "tpp", "--steps", "x"], "--steps 'x': expected an integer >= 1"),
        (["--policy", "tpp", "--root", "/no/such/dir"], "--root '/no/such/dir': not a directory"),
        (["--steps", "1"], "--policy: required"),
        (["--restore", "j.json", "--apply"], "--restore JOURNAL: runs alone"),
        (["--policy", "tpp", "--replay", "x", "--apply"], "--replay: a replay writes nothing"),
        (
            ["--policy", "tpp", "--cgroups", "nope"],
            "--cgroups 'nope': no sys/fs/cgroup/nope/memory.current",
        ),
        (["--policy", "tpp", "--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    root = host(tmp_path / "h")
    argv = [*argv, "--root", str(root)] if "--root" not in argv else argv
    code, _, err = run(argv, capsys)
    assert code == 2 and len(err) == 1 and message in err[0], err


def test_restore_refuses_a_journal_naming_other_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    j = tmp_path / "j.json"
    j.write_text(json.dumps({"format": "tiergym-deploy-journal", "version": 1, "root": str(tmp_path),
                             "entries": [{"path": "sys/kernel/mm/damon/admin/kdamonds/0/state", "old": "on"}]}))  # fmt: skip
    code, lines, err = run(["--restore", str(j)], capsys)
    assert (
        code == 2 and lines == [] and len(err) == 1 and "not a knob this program writes" in err[0]
    )


def make_run(tmp_path: Path, name: str, **settings: Any) -> Path:
    """A run folder of a freshly built PPO model (built, not trained: what deploy checks and
    runs is its layout and its spaces; the weights are PPO's initial ones)."""
    from stable_baselines3 import PPO

    from agents import persist
    from envs import core
    from envs.sb3 import make_vec_env

    run_dir = tmp_path / name
    run_dir.mkdir()
    env = core.make_params("colocation", pool_size=8, **settings).env_kwargs()
    venv = make_vec_env(2, **{**env, "pool_size": 8})
    model = PPO("MlpPolicy", venv, n_steps=8, batch_size=16, device="cpu", seed=0)
    meta = {"algo": "ppo", "policy": "MlpPolicy", "hyperparams": {"n_steps": 8, "batch_size": 16},
            "normalize_reward": False, "env": env, "seed": 0}  # fmt: skip
    persist.write_model(run_dir / "model.zip", model, meta, 0)
    (run_dir / "tiergym.json").write_text(json.dumps({"algo": "ppo", "env": env, "seed": 0}))
    return run_dir


def cgroup_files(nodes: int = 2) -> dict[str, dict[str, str]]:
    return {
        name: {
            "memory.current": str(3 << 30),
            "memory.numa_stat": f"anon N0={2 << 30} N1={1 << 30}\n",
            "memory.low": "0",
            "memory.high": "max",
        }
        for name in ("tenants/a", "tenants/b")
    }


@pytest.mark.parametrize(
    ("settings", "tree_kw", "message"),
    [
        ({"observation": "full"}, {}, "trained on observation 'full', which a host does not show"),
        ({"observation": "host"}, {}, "trained with per-tenant weights, which a host cannot set"),
        (
            {"observation": "host", "weights": "global", "tiering_modes": ["default", "tpp"]},
            {},
            "picks tiering modes ['tpp'], which are not mainline knobs",
        ),
        (
            {"observation": "host", "weights": "global"},
            {"mem_kib": [(GIB_KIB, 0)] * 3, "slow": [False, True, True], "hmat": None},
            "trained on machines of 2 nodes; this host has 3",
        ),
    ],
)
def test_runs_a_host_cannot_run_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], settings: dict, tree_kw: dict, message: str
) -> None:
    run_dir = make_run(tmp_path, "run", **settings)
    root = host(tmp_path / "h", **tree_kw)
    code, lines, err = run(["--policy", str(run_dir), "--root", str(root), "--steps", "1"], capsys)
    assert code == 2 and lines == [] and len(err) == 1, err
    assert message in err[0], err[0]


def test_a_host_view_run_runs_through_deploy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run on the host view (global weights, two nodes) reads the fixture host, its
    cgroups filling its tenant slots, decides, and with --apply writes and restores."""
    run_dir = make_run(tmp_path, "run", observation="host", weights="global")
    root = host(tmp_path / "h", cgroups=cgroup_files())
    before = tree(root)
    argv = ["--policy", str(run_dir), "--root", str(root), "--cgroups", "tenants/a,tenants/b"]
    code, lines, err = run([*argv, "--steps", "2", "--interval", "0.01"], capsys)
    assert code == 0 and err == [], err
    assert len(lines) == 3 and "tenants/a 3.00GiB (2.00+1.00)" in lines[1]
    assert tree(root) == before
    policy = deploy.HostRun(str(run_dir), HostReader(root).machine(), 2)
    snap = HostReader(root, ["tenants/a", "tenants/b"]).read()
    d = policy.decide(snap, first=True)
    plan = deploy.host_action(d, snap.knobs, snap.node_ids)
    assert plan.numa_balancing in (0, 2) and plan.demotion is True
    code, lines, err = run(
        [*argv, "--steps", "1", "--apply", "--journal", str(tmp_path / "j.json")], capsys
    )
    assert code == 0 and err == [] and "wrote: " in lines[1]
    assert any(x.startswith("restored ") for x in lines[2:])
    assert tree(root) == before


# ----------------------------------------------------------------------------- replay


def test_replay_shows_the_counters_and_what_the_policy_would_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rec = tmp_path / "rec"
    for i, (free_gib, promoted) in enumerate([(8, 0), (1, 2560), (0, 5120)]):
        host(
            rec / f"snap{i + 1}",
            mem_kib=[(32 * GIB_KIB, free_gib * GIB_KIB), (64 * GIB_KIB, 60 * GIB_KIB)],
            vmstat={"pgpromote_success": promoted, "pgdemote_kswapd": 0},
            uptime_s=100.0 + 2.0 * i,
        )
    before = tree(rec)
    code, lines, err = run(["--policy", "damon-tiering", "--replay", str(rec)], capsys)
    assert code == 0 and err == [] and tree(rec) == before
    assert lines[0] == f"replay damon-tiering over 3 snapshot(s) in {rec}"
    assert [x.split("]")[0] for x in lines[1:]] == ["[snap1", "[snap2", "[snap3"]
    # 2560 pages of 4 KiB in 2 s of uptime: 5.2 MB/s
    page = os.sysconf("SC_PAGE_SIZE")
    assert f"promote {2560 * page / 2 / 1e6:.1f} demote 0.0 MB/s" in lines[2]
    # DAMON's quota starts at 1 byte per second and grows geometrically: 1 MB/s, the least
    for x in lines[1:]:
        assert x.endswith(
            f"policy would write: {NUMA_BALANCING}: 0 -> 2; {PROMOTE_RATE}: 65536 -> 1; {DEMOTION}: false -> true"
        )


def test_damon_tiering_tunes_on_the_dram_use_a_host_shows(tmp_path: Path) -> None:
    """The quota tuner reads the DRAM nodes' used share from meminfo: under the 99.7% goal
    its quota grows, over it the quota shrinks."""
    root = host(tmp_path / "h")
    reader = HostReader(root)
    pol = deploy.HostHeuristic(
        "damon-tiering", catalogue.entry("damon-tiering").host, reader.machine()
    )
    damon = pol.policy
    assert isinstance(damon, DamonTiering) and damon.tuner is not None
    pol.decide(reader.read(), first=True)
    sizes = []
    for _ in range(30):  # DRAM 75% used (24 of 32 GiB)
        pol.decide(reader.read(), first=False)
        sizes.append(float(damon.tuner.esz_bp[0]))
    assert all(b > a for a, b in itertools.pairwise(sizes))
    host(root, mem_kib=[(32 * GIB_KIB, 0), (64 * GIB_KIB, 60 * GIB_KIB)])  # DRAM full
    pol.decide(reader.read(), first=False)
    assert float(damon.tuner.esz_bp[0]) < sizes[-1]


def test_reader_sees_the_written_tree_like_a_host(tmp_path: Path) -> None:
    """The fixture tree the tests use reads as a two-node host with a slow CXL node."""
    r = HostReader(host(tmp_path))
    assert r.machine().is_slow.tolist() == [False, True]


def test_replay_of_snapshots_without_knobs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A snapshot that recorded no knob files (``calibration probe --snapshot`` copies the
    machine's files only): the plan shows '?' for what the knobs read."""
    rec = tmp_path / "rec"
    host(rec / "1", weights=None, knobs={"numa_balancing": "", "promote_rate": "", "demotion": ""})
    code, lines, err = run(["--policy", "weighted-interleave", "--replay", str(rec)], capsys)
    assert code == 0 and err == [], err
    assert lines[1].endswith(
        f"| knobs none | policy would write: {WI_DIR}/auto: ? -> Y; {NUMA_BALANCING}: ? -> 0; "
        f"{DEMOTION}: ? -> true"
    )


def test_record_then_replay(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--record copies each interval's files; --replay over them sees what the live run
    saw (the rates over each snapshot's proc/uptime) and plans the same writes."""
    root = host(tmp_path / "h", cgroups=cgroup_files())
    rec = tmp_path / "rec"
    live: list[str] = []
    page = os.sysconf("SC_PAGE_SIZE")

    def out(line: str) -> None:
        live.append(line)
        k = len(live) - 1  # after interval k: the host moves on (counters and uptime)
        host(root, cgroups=cgroup_files(), uptime_s=100.0 + 4.0 * k,
             vmstat={"pgpromote_success": 1000 * k, "pgdemote_kswapd": 0})  # fmt: skip

    argv = ["--policy", "numa-tiering", "--root", str(root), "--cgroups", "tenants/a,tenants/b"]
    before_rec = tree(root)
    assert (
        deploy.main([*argv, "--steps", "3", "--interval", "0.01", "--record", str(rec)], out) == 0
    )
    assert sorted(p.name for p in rec.iterdir()) == ["0001", "0002", "0003"]
    assert (rec / "0001/sys/fs/cgroup/tenants/a/memory.numa_stat").is_file()
    assert before_rec.keys() == tree(rec / "0001").keys()
    code, lines, err = run(
        [*argv[:2], "--cgroups", "tenants/a,tenants/b", "--replay", str(rec)], capsys
    )
    assert code == 0 and err == [] and len(lines) == 4
    for a, b in zip(live[1:], lines[1:], strict=True):
        assert a.split("| ")[1:] == b.replace("policy would write", "would write").split("| ")[1:]
        assert a.split("; ")[0].split("read: ")[1] == b.split("; ")[0].split("kernel: ")[1]
    # snapshot 2: 1000 pages more over 4 s of uptime
    assert f"promote {1000 * page / 4 / 1e6:.1f} demote 0.0 MB/s" in lines[2]
    code, _, err = run([*argv, "--record", str(rec)], capsys)
    assert code == 2 and "exists and is not an empty folder" in err[0]


def test_replay_needs_no_knob_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A policy that writes weights replays over snapshots without weight files ('?')."""
    rec = tmp_path / "rec"
    host(rec / "1", weights=None)
    code, lines, err = run(["--policy", "interleave", "--replay", str(rec)], capsys)
    assert code == 0 and err == [], err
    assert f"{WI_DIR}/node0: ? -> 1; {WI_DIR}/node1: ? -> 1" in lines[1]


# ----------------------------------------------------------------------------- host-ppo


def _plan_of(line: str, verb: str) -> dict[str, tuple[str, str]]:
    """``{path: (old, new)}`` of an interval's line (``... | VERB: a: x -> y; b: ...``)."""
    tail = line.rsplit(" | ", 1)[1]
    if tail == "nothing to write":
        return {}
    assert tail.startswith(f"{verb}: "), line
    out = {}
    for w in tail.removeprefix(f"{verb}: ").split("; "):
        path, change = w.split(": ", 1)
        old, new = change.split(" -> ")
        out[path] = (old, new)
    return out


@pytest.mark.slow
def test_a_trained_host_ppo_policy_deploys_on_a_fixture_host(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The ``host-ppo`` recipe, trained for 4,096 steps through ``train.py`` on ``mixed``
    (two nodes, like the fixture host), runs through ``deploy.py``: the dry run changes no
    byte and prints what it would write; ``--apply`` writes exactly that (the model's own
    decision on the host view of the fixture: its weights' ratio, its rate and the
    tiering bit, its demotion mode) and restores every original."""
    import numpy as np

    import train
    from agents.evaluation import load_policy
    from envs.host import host_view
    from envs.spaces import ActionCodec

    run_dir = tmp_path / "run"
    assert train.main([
        "--recipe", "host-ppo", "--scenario", "mixed", "--weights", "global",
        "--timesteps", "4096", "--num-envs", "8", "--set", "n_steps=64",
        "--set", "batch_size=128", "--set", "env.pool_size=8", "--eval-interval", "0",
        "--compare-episodes", "0", "--run-dir", str(run_dir), "--no-progress", "--quiet",
    ]) == 0  # fmt: skip
    meta = json.loads((run_dir / "tiergym.json").read_text())
    assert meta["env"]["observation"] == "host" and meta["env"]["weights"] == "global"

    cgroups = "tenants/a,tenants/b"
    root = host(tmp_path / "h", cgroups=cgroup_files())
    before = tree(root)
    argv = ["--policy", str(run_dir), "--root", str(root), "--cgroups", cgroups]
    code, lines, err = run([*argv, "--steps", "2", "--interval", "0.01"], capsys)
    assert code == 0 and err == [], err
    assert tree(root) == before  # the dry run changes no byte
    assert lines[0].startswith(f"deploy {run_dir}") and "dry run" in lines[0]
    planned = _plan_of(lines[1], "would write")
    assert planned == _plan_of(lines[2], "would write") and planned  # nothing was written

    # the model's own decision on the host view of the fixture, decoded independently
    policy, env = load_policy(str(run_dir))
    snap = HostReader(root, cgroups.split(",")).read()
    obs = host_view(snap, HostReader(root).machine().is_slow, int(env["max_tenants"]))
    act, _ = policy.model.predict(obs[None], deterministic=True)
    codec = ActionCodec(
        int(env["max_tenants"]), 2, "global", "box", 65536.0, ("default", "no-demotion")
    )
    model_action, weights = codec.decode(np.asarray(act).reshape(1, -1))
    rate = float(model_action.promote_mbps[0])
    mode = codec.modes[int(codec.decode_mode(np.asarray(act).reshape(1, -1))[0])]
    want_demotion = "false" if mode == "no-demotion" else "true"
    assert planned.get(DEMOTION, ("", "false"))[1] == want_demotion
    if rate > 0:
        assert planned[PROMOTE_RATE][1] == str(max(round(rate), 1))
        assert planned[NUMA_BALANCING][1] == "2"
    else:
        assert PROMOTE_RATE not in planned and NUMA_BALANCING not in planned  # 0 stays 0
    w = weights[0, 0]
    if w.max() > 0 and w.min() > 0:  # both nodes interleaved: the written weights' ratio
        w0, w1 = (int(planned.get(f"{WI_DIR}/node{n}", ("", "1"))[1]) for n in (0, 1))
        assert w0 / w1 == pytest.approx(w[0] / w[1], rel=0.02)

    seen: dict[str, str] = {}
    applied: list[str] = []

    def out(line: str) -> None:
        if line.startswith("[1]"):
            seen.update({rel: (root / rel).read_text().strip() for rel in planned})
        applied.append(line)

    journal = tmp_path / "j.json"
    assert deploy.main([*argv, "--steps", "1", "--apply", "--journal", str(journal)], out=out) == 0
    assert _plan_of(applied[1], "wrote") == planned  # what the dry run said, written
    assert seen == {rel: new for rel, (_, new) in planned.items()}  # each file holds it
    assert applied[2].startswith(f"restored {len(planned)} file(s)")
    assert tree(root) == before  # every original back
    assert json.loads(journal.read_text())["restored"]


# ----------------------------------------------------------------------------- evaluate.py


def test_evaluate_compares_a_host_view_run_with_the_host_heuristics(tmp_path: Path) -> None:
    """``evaluate.py``'s references: a run on the host view among --policies brings the
    catalogue's heuristics a host can run (``names(host=True)``); any other run brings
    nothing (the command lines before ``--references`` mean what they meant);
    ``--references`` names them, ``host`` or ``none``."""
    import evaluate

    hosted = make_run(tmp_path, "hosted", observation="host", weights="global")
    full = make_run(tmp_path, "full")
    host_names = catalogue.names(host=True)
    assert "colloid" in host_names and "caption" not in host_names

    def names_of(policies: list[str], references: str | None) -> list[str]:
        out = evaluate.with_references(policies, references)
        return [p if isinstance(p, str) else p[0].name for p in out]

    assert names_of([str(hosted)], None) == ["hosted", *host_names]
    assert names_of([str(full)], None) == ["full"]
    assert names_of([str(full), "tpp"], "host") == ["full", "tpp"] + [
        n for n in host_names if n != "tpp"
    ]
    assert names_of([str(hosted)], "none") == ["hosted"]
    assert names_of([f"mine={hosted}", "dram-first"], "dram-first,caption") == [
        "mine",
        "dram-first",
        "caption",
    ]
    with pytest.raises(ValueError, match="--references 'tpp,': an empty entry"):
        evaluate.with_references(["tpp"], "tpp,")
    args = evaluate.parse_args(["--policies", str(hosted), "--references", "host"])
    assert args.references == "host" and args.reference == "dram-first"


@pytest.mark.slow
def test_evaluate_main_with_a_host_view_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``python evaluate.py --policies RUN`` with a host-view RUN: the results hold the run
    and every host heuristic, the ratios against dram-first (one of them)."""
    import evaluate

    hosted = make_run(tmp_path, "hosted", observation="host", weights="global")
    out = tmp_path / "out"
    argv = ["--scenarios", "colocation", "--policies", str(hosted), "--episodes", "1"]
    code = evaluate.main([*argv, "--no-plots", "--no-progress", "--output", str(out)])
    assert code == 0, capsys.readouterr().err
    doc = json.loads((out / "results.json").read_text())
    policies = list(dict.fromkeys(r["policy"] for r in doc["records"]))
    assert policies == ["hosted", *catalogue.names(host=True)]
    assert "hosted" in capsys.readouterr().out


# ----------------------------------------------------------------------------- residual runs

#: the residual the built model adds (its action head's bias): more DRAM weight, less CXL
#: weight, a lower promotion rate, and the tiering-mode entry past no-demotion's threshold
RESIDUAL_BIAS = (0.1, -0.1, -0.4, 1.2)


def make_residual_run(
    tmp_path: Path,
    name: str,
    base: str = "bw-aware-interleave",
    recorded_base: str | None = None,
    bias: tuple[float, ...] = RESIDUAL_BIAS,
    **settings: Any,
) -> Path:
    """A run folder of a freshly built PPO model in the agent's view: the host view, global
    weights, the host's tiering modes, a residual over ``base`` (its spaces; the run
    records ``recorded_base`` instead when given). Its action head's bias is ``bias``, so
    its residual is far from zero and the decision differs from the base's."""
    import torch
    from stable_baselines3 import PPO

    from agents import persist
    from agents.view.vec_env import make_training_vec_env
    from envs import core

    run_dir = tmp_path / name
    run_dir.mkdir()
    env = core.make_params(
        "colocation", pool_size=8, observation="host", weights="global",
        tiering_modes=["default", "no-demotion"], **settings,
    ).env_kwargs()  # fmt: skip
    venv = make_training_vec_env(2, {**env, "pool_size": 8, "base_policy": base})
    model = PPO("MlpPolicy", venv, n_steps=8, batch_size=16, device="cpu", seed=0)
    head = model.policy.action_net
    assert isinstance(head, torch.nn.Linear) and head.bias is not None
    with torch.no_grad():
        head.bias.copy_(torch.tensor(bias))
    env = {**env, "base_policy": recorded_base or base}
    meta = {"algo": "ppo", "policy": "MlpPolicy", "hyperparams": {"n_steps": 8, "batch_size": 16},
            "normalize_reward": False, "env": env, "seed": 0}  # fmt: skip
    persist.write_model(run_dir / "model.zip", model, meta, 0)
    (run_dir / "tiergym.json").write_text(json.dumps({"algo": "ppo", "env": env, "seed": 0}))
    return run_dir


def view_decisions(run_dir: Path, snaps: list[Any], machine: Any) -> list[deploy.Decision]:
    """What the simulator's agent view decides on the host view of ``snaps`` (in order):
    the run's view bound to the simulator's own parameters of its settings, its base
    observing each snapshot's counters (not the first), the residual applied, the action
    decoded by the simulator's codec."""
    import numpy as np

    from agents.config.view import environment_config
    from agents.evaluation import load_policy
    from agents.view import make_interface
    from envs import core
    from envs.host import host_view

    policy, env = load_policy(str(run_dir))
    trained = json.loads((run_dir / "tiergym.json").read_text())["env"]  # its scenario
    params = core.make_params(**{**environment_config(trained).given(), "pool_size": 8})
    codec = params.codec
    agent = make_interface(env)
    assert agent.names == ["bw-aware-interleave"]
    agent.bind(params, 1)
    hw = deploy.host_hardware(machine)
    agent.observe(None, hw)
    out = []
    for i, snap in enumerate(snaps):
        if i:
            agent.observe(deploy.host_info(snap), hw)
        obs = host_view(snap, machine.is_slow, params.encoder.T)[None]
        base = agent.decide(obs, np.array([i == 0]))
        act, _ = policy.model.predict(agent.obs_to_agent(obs, base), deterministic=True)
        a = agent.action_to_env(base, act)
        model_action, w = codec.decode(a)
        mode = codec.modes[int(codec.decode_mode(a)[0])]
        out.append(
            deploy.Decision(
                w[0, 0].astype(np.int64), float(model_action.promote_mbps[0]), mode == "default"
            )
        )
    return out


def _same(a: deploy.Decision, b: deploy.Decision) -> bool:
    return (
        a.weights.tolist() == b.weights.tolist()
        and a.rate_mbps == pytest.approx(b.rate_mbps, rel=1e-6)
        and a.demotion == b.demotion
        and a.auto == b.auto
    )


def test_a_residual_run_decides_what_the_simulators_view_decides(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A residual over ``bw-aware-interleave`` (host view, global weights) in a dry run:
    its base runs on the host's counters and its residual is added by the view's code, so
    each interval's writes are those of the decision the simulator's agent view takes on
    the same host view and counters, and they differ from the base heuristic's alone; no
    byte changes. A replay over snapshots whose MBM bandwidth grows (the base offloads
    part of it to CXL) matches the view's decisions too."""
    from envs.host import HostWriter

    run_dir = make_residual_run(tmp_path, "run")
    root = host(tmp_path / "h", mbm_bytes=[0, 0])
    before = tree(root)
    code, lines, err = run(
        ["--policy", str(run_dir), "--root", str(root), "--steps", "2", "--interval", "0.01"],
        capsys,
    )
    assert code == 0 and err == [], err
    assert tree(root) == before
    reader = HostReader(root)
    machine = reader.machine()
    snaps = [reader.read(), reader.read()]  # a static tree: what each interval read
    want = view_decisions(run_dir, snaps, machine)
    writer = HostWriter(root)
    for line, d, snap in zip(lines[1:], want, snaps, strict=True):
        plan = writer.plan(deploy.host_action(d, snap.knobs, snap.node_ids), snap.knobs)
        assert line.rsplit(" | ", 1)[1] == deploy._writes("would write", plan), line
    assert not want[0].demotion  # the residual's mode entry: no-demotion, the base's default
    # the base alone decides otherwise (the residual is not dropped)
    alone = deploy.HostHeuristic(
        "bw-aware-interleave", catalogue.host_role("bw-aware-interleave"), machine
    )
    assert not any(
        _same(alone.decide(s, first=i == 0), d)
        for i, (s, d) in enumerate(zip(snaps, want, strict=True))
    )

    rec = tmp_path / "rec"
    for i, gb in enumerate([0, 600, 1120]):  # 300 then 260 GB/s over 2 s: DRAM gives 250
        host(rec / f"snap{i + 1}", mbm_bytes=[gb * 10**9, 0], uptime_s=100.0 + 2.0 * i)
    code, lines, err = run(["--policy", str(run_dir), "--replay", str(rec)], capsys)
    assert code == 0 and err == [] and len(lines) == 4, err
    reader = HostReader(rec / "snap1", clock=iter([100.0, 102.0, 104.0]).__next__)
    snaps = []
    for i in range(3):
        reader.root = rec / f"snap{i + 1}"
        snaps.append(reader.read())
    assert snaps[2].bandwidth_gbps == pytest.approx(260.0)
    want = view_decisions(run_dir, snaps, machine)
    policy = deploy.HostRun(str(run_dir), machine, 0)
    got = [policy.decide(s, first=i == 0) for i, s in enumerate(snaps)]
    assert all(_same(g, w) for g, w in zip(got, want, strict=True)), (got, want)
    assert len({tuple(d.weights.tolist()) for d in want}) == 3, want  # the base moves
    for line, d, snap, i in zip(lines[1:], want, snaps, range(3), strict=True):
        plan = HostWriter(rec / f"snap{i + 1}").plan(
            deploy.host_action(d, snap.knobs, snap.node_ids), snap.knobs, unknown="?"
        )
        assert line.endswith(deploy._writes("policy would write", plan)), line


@pytest.mark.parametrize(
    ("recorded", "tree_kw", "message"),
    [
        ("memcg-fair", {"mbm_bytes": [0, 0]}, "base policy memcg-fair cannot run on a host"),
        ("bw-aware-interleave", {}, "needs what this host does not expose: mbm"),
    ],
)
def test_residual_runs_a_host_cannot_run_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], recorded: str, tree_kw: dict, message: str
) -> None:
    """A residual over a base a host cannot run, or on a host without what its base reads
    (bw-aware-interleave: resctrl MBM), is refused in one line; no byte changes."""
    run_dir = make_residual_run(tmp_path, "run", recorded_base=recorded)
    root = host(tmp_path / "h", **tree_kw)
    before = tree(root)
    code, lines, err = run(["--policy", str(run_dir), "--root", str(root), "--steps", "1"], capsys)
    assert code == 2 and lines == [] and len(err) == 1, err
    assert message in err[0], err[0]
    assert tree(root) == before
