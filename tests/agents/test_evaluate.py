"""evaluate.py and run_comparison: JSON against the table, reproducibility, wrong input."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def assert_png(path: Path, min_side: int = 400) -> None:
    """The file decodes as an image of a plausible size with something drawn on it."""
    import matplotlib.image
    import numpy as np

    img = matplotlib.image.imread(path)
    assert img.ndim == 3 and min(img.shape[:2]) >= min_side
    ink = np.any(img[..., :3] < 0.9, axis=-1).mean()
    assert 0.01 < ink < 0.9


def run_eval(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "evaluate.py"), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.slow
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
    assert data["command"][0] == "evaluate.py" and "--seed" in data["command"]
    assert len(records) == 2 * 3 * 3
    for r in records:
        assert {"scenario", "instance", "policy", "seed", "episode", "run_seed"} <= set(r)
        assert r["seed"] == 5 + r["episode"] and r["run_seed"] == 5  # the episode's own seed
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
    assert summary["per_scenario"]["kv-store"]["dram-first"]["ratio"]["mean"] == 1.0
    assert summary["per_policy"]["numa-tiering"]["n_scenarios"] == 2
    # files
    out = tmp_path / "a"
    assert len((out / "results.csv").read_text().strip().splitlines()) == 1 + len(records)
    assert (out / "leaderboard.md").read_text() in a.stdout
    assert (out / "table.md").read_text() in a.stdout
    assert_png(out / "ratio.png")
    for sc in ("kv-store", "colocation"):
        for pol in ("dram-first", "numa-tiering", "static-3-1-256"):
            assert_png(out / f"timeseries-{sc}-{pol}.png")
    # the same command again gives identical numbers
    b = run_eval([*common, "--output", str(tmp_path / "b")])
    assert b.returncode == 0, b.stderr
    assert json.loads((tmp_path / "b" / "results.json").read_text())["records"] == records
    assert a.stdout == b.stdout


def test_run_comparison_is_a_function_call(tmp_path: Path) -> None:
    from agents.evaluation import run_comparison

    out = tmp_path / "o"
    summary = run_comparison(
        ["dram-first", "numa-tiering"], ["kv-store"], 3, out, seed=7, plots=False
    )
    data = json.loads((out / "results.json").read_text())
    assert data["summary"] == json.loads(json.dumps(summary))
    assert data["command"] is None
    assert [r["seed"] for r in data["records"] if r["policy"] == "dram-first"] == [7, 8, 9]
    assert summary["per_scenario"]["kv-store"]["numa-tiering"]["n"] == 3
    assert sorted(p.name for p in out.iterdir()) == [
        "leaderboard.md",
        "results.csv",
        "results.json",
        "table.md",
    ]
    with pytest.raises(ValueError, match="reference 'tpp' is not among the policies"):
        run_comparison(["dram-first"], ["kv-store"], 2, tmp_path / "x", reference="tpp")
    assert not (tmp_path / "x").exists()


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


@pytest.mark.slow
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
    # a model trained for another machine (5 nodes) on a 2-node scenario: a recipe on the
    # environment's own spaces (the ppo recipe pads nodes, so it runs on any machine)
    run = tmp_path / "run"
    sc = tmp_path / "mlc.yaml"
    from envs import load_scenario

    sc.write_text(
        yaml.safe_dump(load_scenario("mlc-bandwidth", episode_steps=4).model_dump(mode="json"))
    )
    args = [
        "--recipe",
        "a2c",
        "--scenario",
        str(sc),
        "--num-envs",
        "4",
        "--set",
        "n_steps=8",
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


def test_train_runs_the_final_comparison_in_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import evaluate
    import train

    def no_argv(*_: object, **__: object) -> int:
        raise AssertionError("train.py must not drive evaluate.main")

    monkeypatch.setattr(evaluate, "main", no_argv)
    from envs import load_scenario

    sc = tmp_path / "kv.yaml"
    sc.write_text(
        yaml.safe_dump(load_scenario("kv-store", episode_steps=4).model_dump(mode="json"))
    )
    run = tmp_path / "run"
    args = [
        "--recipe", "ppo", "--scenario", str(sc), "--num-envs", "4", "--set", "n_steps=8", "--set", "batch_size=32",
        "--timesteps", "32", "--eval-interval", "0", "--compare-episodes", "2",
        "--run-dir", str(run), "--quiet", "--no-progress", "--seed", "1",
    ]  # fmt: skip
    assert train.main(args) == 0
    data = json.loads((run / "results" / "results.json").read_text())
    assert data["command"][0] == "train.py"
    from baselines import catalogue

    # the closing table: every heuristic of the catalogue, the selector and the closing bounds
    heuristics = set(catalogue.names(kind="heuristic"))
    assert {"memcg-fair", "caption", "damon-tiering"} <= heuristics
    expected = {"ppo", *heuristics, "adaptive", "best-heuristic-per-episode", "planner", "mpc"}
    assert {r["policy"] for r in data["records"]} == expected
    head = data["summary"]["headroom"]["per_scenario"][str(sc)]  # the share column is there
    assert "ppo" in head["policies"] and head["headroom"] >= 0.0  # planner >= dram-first
    assert "ppo" in data["summary"]["headroom_mpc"]["per_scenario"][str(sc)]["policies"]
    assert "ppo" in data["summary"]["robustness"]["per_policy"]
    assert sorted({r["seed"] for r in data["records"]}) == [20_001, 20_002]
    out = capsys.readouterr().out
    assert (run / "results" / "leaderboard.md").read_text() in out
    # what the learned policy trained on: its own scenario, so the one scenario is "trained"
    gen = data["summary"]["generalisation"]["ppo"]
    assert gen["trained_on"] == [str(sc)]
    assert gen["per_scenario"][str(sc)]["group"] == "trained"
    assert list(gen["groups"]) == ["trained"] and "best_heuristic" in gen["groups"]["trained"]
    assert f"ppo trained on: {sc}" in out


def test_generator_chances_draw_the_families_of_every_policy_alike(tmp_path: Path) -> None:
    from agents.evaluation import run_comparison
    from agents.rollout import rollout
    from baselines import make_policy

    kw = {"episodes": 2, "seed": 3, "plots": False}
    drawn = run_comparison(
        ["dram-first", "colloid"], ["gen-1s-4cxl"], output=tmp_path / "c",
        generator_chances={"channels": 1.0}, **kw,
    )  # fmt: skip
    plain = run_comparison(["dram-first", "colloid"], ["gen-1s-4cxl"], output=tmp_path / "p", **kw)
    records = json.loads((tmp_path / "c" / "results.json").read_text())["records"]
    for name in ("dram-first", "colloid"):
        want = rollout(
            make_policy(name), "gen-1s-4cxl", 2, seed=3,
            env_kwargs={"generator_chances": {"channels": 1.0}},
        )  # fmt: skip
        got = [r["metrics"] for r in records if r["policy"] == name]
        assert got == [r["metrics"] for r in want]
        a = drawn["per_scenario"]["gen-1s-4cxl"][name]["metrics"]["geomean_perf"]["mean"]
        b = plain["per_scenario"]["gen-1s-4cxl"][name]["metrics"]["geomean_perf"]["mean"]
        assert a != b  # other machines: the socket's channels drawn 4..8


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("channels", r"entry 'channels', expected NAME=P"),
        ("channels=most", r"entry 'channels=most', expected NAME=P"),
        ("chanels=1", r"--generator-chances: generator_chances: unknown chance 'chanels'"),
        ("channels=2", r"generator_chances.channels: got 2.0, expected a number in \[0, 1\]"),
    ],
)
def test_bad_generator_chances_are_one_line_errors(
    value: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import evaluate

    out = tmp_path / "out"
    args = ["--scenarios", "gen-1s-1cxl", "--policies", "dram-first", "--output", str(out)]
    assert evaluate.main([*args, "--generator-chances", value]) == 2
    err = capsys.readouterr().err
    assert re.search(message, err) and len(err.strip().splitlines()) == 1
    assert not out.exists()
