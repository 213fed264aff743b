"""``python -m calibration mlc`` on the raw MLC logs in ../shared/calibration/mlc-raw.

Fitting the 216 raw console logs must give back the shipped presets: their peak
parameters within 1.1% and, per memory, a median latency error no worse than the
shipped presets' (docs/validation.md section 1), computed by the same code.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from host_fixtures import FixtureNode, build_host, one_socket_one_expander

from calibration import fit as shipped_fit
from calibration.cli import main
from calibration.data import DATA_DIR, MIXES, load_series
from calibration.metrics import memory_metrics, pooled_median
from calibration.mlc import (
    fit_logs,
    parse_log,
    series_from_runs,
)
from calibration.presets import read_preset
from calibration.probe import parse_cpulist
from envs import load_hardware

RAW = DATA_DIR / "mlc-raw" / "data"
pytestmark = pytest.mark.skipif(not RAW.is_dir(), reason=f"raw MLC logs not found ({RAW})")

#: the EuroSys machine's sockets, from the data's own labels (loaded_latency_all.csv:
#: "cpus 1-64: 47 on socket 0, 17 on socket 1"; the d2-d7 CPU sets 49-95 and 144-191
#: are "remote socket"): 48 cores per socket, hyperthreads from 96
REMOTE_CORES = "48-95,144-191"


def _logs(memory: str) -> list[str]:
    folder, pats = {
        "dram": ("ddr5", ("log_m_*", "log_d7_*")),
        "cxl": ("cxl", ("log_m_*", "log_d3_*")),
    }[memory]
    return [str(p) for pat in pats for p in sorted((RAW / folder).glob(pat))]


@pytest.fixture(scope="session")  # 8 s: once a worker (a module's scope ends each time
def fitted() -> dict:  # pytest-xdist hands the worker a test of another module)
    remote = parse_cpulist(REMOTE_CORES)
    return {
        k: fit_logs([parse_log(p) for p in _logs(k)], remote_cores=remote) for k in ("dram", "cxl")
    }


def test_parse_a_raw_log() -> None:
    run = parse_log(RAW / "cxl" / "log_d3_c16_w2_r0")
    assert (run.version, run.target, run.code, run.random) == ("3.10", 4, 2, False)
    assert run.cores == tuple(range(73, 89)) and run.mix == "2:1"
    assert run.delay[0] == 20000 and run.delay[-1] == 0 and len(run.delay) == 19
    assert run.bandwidth[0] == pytest.approx(1.9951) and run.latency[0] == pytest.approx(573.53)


@pytest.mark.parametrize("memory", ["mmem", "cxl"])
def test_series_from_raw_logs_equal_the_csv(memory: str) -> None:
    csv = load_series()
    runs = [parse_log(p) for p in _logs("dram" if memory == "mmem" else "cxl") if "log_m_" in p]
    mine = series_from_runs([r for r in runs if r.code in (0, 2, 3, 5, 6)], memory)
    assert set(mine) == {(memory, m) for m in MIXES}
    for key, s in mine.items():
        np.testing.assert_allclose(s.bandwidth, csv[key].bandwidth)
        np.testing.assert_allclose(s.latency, csv[key].latency)
        assert s.peak_all_threads == pytest.approx(csv[key].peak_all_threads)


@pytest.mark.parametrize("memory", ["mmem", "cxl", "cxl_remote", "mmem_remote"])
def test_residuals_are_the_shipped_fits(memory: str) -> None:
    """The residuals over one memory's logs (what mlc hands the fit) are those over the
    shipped data of every memory, number for number, in the shipped mixes' order."""
    series = load_series()
    hw = read_preset("spr-a1000" if memory in ("mmem", "cxl") else "spr-a1000-2s")
    mine = {k: v for k, v in series.items() if k[0] == memory}
    assert shipped_fit.mixes_of(memory, mine) == list(MIXES)
    np.testing.assert_array_equal(
        shipped_fit._curve_residuals(memory, hw, mine)[0],
        shipped_fit._curve_residuals(memory, hw, series)[0],
    )
    np.testing.assert_array_equal(
        shipped_fit._peak_residuals(memory, hw, mine),
        shipped_fit._peak_residuals(memory, hw, series),
    )


PEAK_KEYS = {
    "dram": ["read_gbps", "write_gbps", "mixed_gbps", "remote_read_gbps", "remote_write_gbps",
             "remote_mixed_gbps"],
    "cxl": ["read_gbps", "link_read_gbps", "link_write_gbps", "remote_read_gbps",
            "remote_write_gbps", "remote_mixed_gbps"],
}  # fmt: skip


@pytest.mark.parametrize("kind", ["dram", "cxl"])
def test_raw_logs_give_back_the_shipped_peaks(fitted: dict, kind: str) -> None:
    shipped = next(n for n in read_preset("spr-a1000-2s")["nodes"] if n["name"] == f"{kind}0")
    node = fitted[kind].node
    for k in PEAK_KEYS[kind]:
        assert node[k] == pytest.approx(shipped[k], rel=0.011), k


@pytest.mark.parametrize(
    ("kind", "memory"),
    [("dram", "mmem"), ("dram", "mmem_remote"), ("cxl", "cxl"), ("cxl", "cxl_remote")],
)
def test_raw_logs_give_back_the_shipped_latency_errors(
    fitted: dict, kind: str, memory: str
) -> None:
    series = load_series()
    preset = "spr-a1000" if memory in ("mmem", "cxl") else "spr-a1000-2s"
    shipped = pooled_median(memory_metrics(preset, memory, series))
    mine = fitted[kind].reports[memory]
    assert pooled_median(mine) <= shipped + 0.001
    # and the peaks the model gives match the shipped presets' errors
    shipped_m = memory_metrics(preset, memory, series)
    for mix, r in mine.items():
        assert abs(r.peak_rel) <= abs(shipped_m[mix].peak_rel) + 0.002, mix


def test_cli_fits_a_probed_machines_node(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A probed machine with node1 replaced by the fit; sockets from --root."""
    root = one_socket_one_expander(tmp_path / "host")
    assert main(["probe", "--root", str(root), "-o", str(tmp_path / "m.yaml")]) == 0
    # the EuroSys machine's cores: socket 0 = 0-47,96-143, socket 1 = the rest
    cpus0 = [*range(0, 48), *range(96, 144)]
    cpus1 = [*range(48, 96), *range(144, 192)]
    topo = build_host(
        tmp_path / "eurosys",
        [
            FixtureNode(0, cpus=cpus0, socket=0, mem_kib=1 << 20),
            FixtureNode(1, cpus=cpus1, socket=1, mem_kib=1 << 20),
        ],
        [[10, 21], [21, 10]],
    )
    out = tmp_path / "fitted.yaml"
    rc = main(["mlc", *_logs("cxl"), "--machine", str(tmp_path / "m.yaml"), "--node", "node1",
               "--root", str(topo), "-o", str(out), "--report", str(tmp_path / "r.md")])  # fmt: skip
    assert rc == 0, capsys.readouterr().err
    hw = yaml.safe_load(out.read_text())
    load_hardware(hw)
    before = yaml.safe_load((tmp_path / "m.yaml").read_text())
    assert hw["nodes"][0] == before["nodes"][0]  # node0 untouched
    n1 = hw["nodes"][1]
    assert n1["capacity_gib"] == 128.0 and n1["kind"] == "cxl"
    assert n1["link_read_gbps"] == pytest.approx(48.03, rel=0.011)
    assert n1["remote_read_gbps"] == pytest.approx(20.33, rel=0.011)  # the d3 runs: remote
    text = out.read_text()
    assert "measured: fit to" in text and "cxl_remote" in (tmp_path / "r.md").read_text()


def test_random_runs_set_the_random_peaks(tmp_path: Path) -> None:
    runs = []
    for p in _logs("dram"):
        if "log_m_c16" not in p:
            continue
        runs.append(parse_log(p))
        if p.endswith(("_w0_r0", "_w6_r0")):
            text = Path(p).read_text()
            lines = []
            for ln in text.splitlines():
                parts = ln.split("\t")
                if len(parts) == 3 and parts[0].strip().isdigit():
                    parts[2] = f"{float(parts[2]) * 0.9:10.1f}"
                    ln = "\t".join(parts)
                if ln.startswith("Command line"):
                    ln += " -U"
                lines.append(ln)
            q = tmp_path / (Path(p).name + "_random")
            q.write_text("\n".join(lines) + "\n")
            runs.append(parse_log(q))
    res = fit_logs(runs, kind="dram")
    n = res.node
    assert n["random_read_gbps"] == pytest.approx(0.9 * n["read_gbps"], rel=0.002)
    assert n["random_write_gbps"] == pytest.approx(0.9 * n["write_gbps"], rel=0.002)
    assert "random/sequential" in res.provenance["random_read_gbps"]


def test_an_older_table_layout_parses(tmp_path: Path) -> None:
    """Spaces instead of tabs, no 'Measuring Loaded Latencies' line, -R for reads."""
    p = tmp_path / "old.txt"
    p.write_text(
        "Intel(R) Memory Latency Checker - v3.5\nCommand line parameters: --loaded_latency -R -j1 -k0-3\n\n"
        "Inject  Latency Bandwidth\nDelay   (ns)    MB/sec\n==========================\n"
        " 00000  250.00    40000.0\n 01000  150.00    20000.0\n 20000  120.00     1000.0\n\n"
        "Measuring cache-to-cache transfer latency (in ns)...\n"
    )
    run = parse_log(p)
    assert (run.target, run.code, run.cores) == (1, 0, (0, 1, 2, 3))
    assert list(run.delay) == [20000, 1000, 0] and run.bandwidth[-1] == 40.0


def test_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    csv = tmp_path / "points.csv"
    csv.write_text("a,b,c\n1,2,3\n")
    assert main(["mlc", str(csv)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "not an MLC console log" in err
    idle_only = tmp_path / "idle.txt"
    idle_only.write_text(
        "Intel(R) Memory Latency Checker - v3.11\nCommand line parameters: --idle_latency\n\n"
        "Each iteration took 200.0 base frequency clocks (\t97.3\tns)\n"
    )
    assert main(["mlc", str(idle_only)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "without a loaded-latency section" in err
    root = one_socket_one_expander(tmp_path / "host")
    assert main(["probe", "--root", str(root), "-o", str(tmp_path / "m.yaml")]) == 0
    capsys.readouterr()
    log = _logs("cxl")[0]
    assert main(["mlc", log, "--machine", str(tmp_path / "m.yaml"), "--node", "node7"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--node node7: no such node" in err and "node1" in err
    assert main(["mlc", log, "--mixes", "0,99"]) == 2
    assert "unknown MLC traffic types [99]" in capsys.readouterr().err
