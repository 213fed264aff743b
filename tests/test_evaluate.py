"""evaluate.py: JSON against the table, reproducibility, wrong input."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def run_eval(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "evaluate.py"), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_two_scenarios_three_policies_json_matches_table_and_repeats(tmp_path: Path) -> None:
    common = [
        "--scenarios",
        "kv-store,colocation",
        "--policies",
        "dram-first,numa-tiering,static:3:1@256",
        "--episodes",
        "3",
        "--seed",
        "5",
        "--no-progress",
    ]
    a = run_eval([*common, "--output", str(tmp_path / "a")])
    assert a.returncode == 0, a.stderr
    data = json.loads((tmp_path / "a" / "results.json").read_text())
    records = data["records"]
    assert len(records) == 2 * 3 * 3
    for r in records:
        assert {"scenario", "policy", "seed", "episode", "metrics", "tenants"} <= set(r)
        assert set(r["metrics"]) >= {
            "reward",
            "geomean_perf",
            "throughput_gbps",
            "worst_perf",
            "mean_latency_ns",
            "promotion_mbps",
            "demotion_mbps",
        }
        for t in r["tenants"].values():
            assert set(t) == {
                "norm_perf",
                "throughput_gbps",
                "mean_latency_ns",
                "dram_access_share",
            }
    # every table cell is the summary's mean, which is the mean of the records
    summary = data["summary"]
    rows = {
        line.split("|")[1].strip(): line
        for line in a.stdout.splitlines()
        if line.startswith("| kv-store") or line.startswith("| colocation")
    }
    header = next(line for line in a.stdout.splitlines() if line.startswith("| scenario"))
    cols = [c.strip() for c in header.strip("|").split("|")][1:]
    for sc, line in rows.items():
        cells = [c.strip() for c in line.strip("|").split("|")][1:]
        for pol, cell in zip(cols, cells, strict=True):
            mean = float(cell.split()[0])
            want = summary["per_scenario"][sc][pol]["metrics"]["geomean_perf"]["mean"]
            assert mean == pytest.approx(want, abs=5e-4)
            vals = [
                r["metrics"]["geomean_perf"]
                for r in records
                if r["scenario"] == sc and r["policy"] == pol
            ]
            assert want == pytest.approx(sum(vals) / len(vals), rel=1e-12)
            lo, hi = (float(x) for x in re.findall(r"[-\d.]+", cell.split("[")[1]))
            assert lo <= mean <= hi
    assert summary["per_scenario"]["kv-store"]["dram-first"]["ratio"]["mean"] == pytest.approx(1.0)
    # files
    out = tmp_path / "a"
    assert len((out / "results.csv").read_text().strip().splitlines()) == 1 + len(records)
    assert (out / "leaderboard.md").read_text().startswith("|")
    assert (out / "ratio.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "timeseries-kv-store-numa-tiering.png").is_file()
    # the same command again gives identical numbers
    b = run_eval([*common, "--output", str(tmp_path / "b")])
    assert b.returncode == 0, b.stderr
    assert json.loads((tmp_path / "b" / "results.json").read_text())["records"] == records
    assert a.stdout == b.stdout


def test_unknown_policy_lists_the_valid_names(tmp_path: Path) -> None:
    res = run_eval(
        [
            "--scenarios",
            "kv-store",
            "--policies",
            "dram-first,bestest",
            "--output",
            str(tmp_path),
            "--no-progress",
        ]
    )
    assert res.returncode == 2
    assert "bestest" in res.stderr
    for name in ("dram-first", "numa-tiering", "tpp", "colloid", "static-best", "static:"):
        assert name in res.stderr
    assert not (tmp_path / "results.json").exists()


def test_missing_corrupt_and_mismatched_models(tmp_path: Path) -> None:
    import train

    res = run_eval(
        [
            "--scenarios",
            "kv-store",
            "--policies",
            f"dram-first,{tmp_path / 'nothing.zip'}",
            "--no-progress",
        ]
    )
    assert res.returncode == 2 and "nothing.zip" in res.stderr
    # a corrupt model file beside a valid run description
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "model.zip").write_bytes(b"not a zip")
    (bad / "tiergym.json").write_text(
        json.dumps({"algo": "ppo", "env": {"scenario": "kv-store"}, "seed": 0})
    )
    res = run_eval(
        [
            "--scenarios",
            "kv-store",
            "--policies",
            f"dram-first,{bad / 'model.zip'}",
            "--no-progress",
        ]
    )
    assert res.returncode == 2 and "could not be loaded" in res.stderr and "model.zip" in res.stderr
    # a model trained for another machine (5 nodes) on a 2-node scenario
    run = tmp_path / "run"
    sc = tmp_path / "mlc.yaml"
    from envs import load_scenario

    sc.write_text(
        yaml.safe_dump(load_scenario("mlc-bandwidth", episode_steps=4).model_dump(mode="json"))
    )
    args = [
        "--scenario",
        str(sc),
        "--num-envs",
        "4",
        "--set",
        "n_steps=8",
        "--set",
        "batch_size=32",
        "--timesteps",
        "32",
        "--eval-interval",
        "0",
        "--compare-episodes",
        "0",
        "--run-dir",
        str(run),
        "--quiet",
        "--no-progress",
    ]
    assert train.main(args) == 0
    res = run_eval(
        [
            "--scenarios",
            "kv-store",
            "--policies",
            f"dram-first,{run}",
            "--episodes",
            "2",
            "--no-progress",
            "--output",
            str(tmp_path / "o"),
        ]
    )
    assert res.returncode == 2
    assert "trained for observations" in res.stderr and "this scenario gives" in res.stderr
