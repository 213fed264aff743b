"""Tests for agents.report: summaries, Markdown, CSV and PNG rendering."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agents.report import (
    METRICS,
    leaderboard_markdown,
    markdown_table,
    plot_ratio_bars,
    plot_timeseries,
    summarize_records,
    write_csv,
)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
REF = "linux-tpp"
SCENARIOS = ("bw-hog", "kv-mix")
POLICIES = {REF: 1.0, "ppo": 1.2, "random": 0.8}


def make_records(n_seeds: int = 3, n_episodes: int = 4, seed: int = 0) -> list[dict[str, Any]]:
    """Synthetic records following the product's record contract."""
    rng = np.random.default_rng(seed)
    records = []
    for si, scen in enumerate(SCENARIOS):
        for pol, factor in POLICIES.items():
            for s in range(n_seeds):
                for ep in range(n_episodes):
                    base = 0.6 + 0.1 * si + 0.02 * s
                    perf = base * factor * float(rng.uniform(0.95, 1.05))
                    records.append(
                        {
                            "scenario": scen,
                            "policy": pol,
                            "seed": s,
                            "episode": ep,
                            "metrics": {
                                "reward": perf - 1.0,
                                "geomean_perf": perf,
                                "throughput_gbps": 40.0 * perf,
                                "worst_perf": 0.9 * perf,
                                "mean_latency_ns": 300.0 / perf,
                                "promotion_mbps": float(rng.uniform(0, 500)),
                                "demotion_mbps": float(rng.uniform(0, 500)),
                            },
                            "tenants": {
                                "kv": {
                                    "norm_perf": perf,
                                    "throughput_gbps": 20.0,
                                    "mean_latency_ns": 250.0,
                                    "dram_access_share": 0.7,
                                },
                                "scan": {
                                    "norm_perf": perf * 0.9,
                                    "throughput_gbps": 20.0,
                                    "mean_latency_ns": 350.0,
                                    "dram_access_share": 0.3,
                                },
                            },
                        }
                    )
    return records


@pytest.fixture(scope="module")
def records() -> list[dict[str, Any]]:
    return make_records()


@pytest.fixture(scope="module")
def summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    return summarize_records(records, reference=REF, n_boot=500, seed=0)


# ----------------------------------------------------------------------------- summary


def test_summary_structure(summary: dict[str, Any]) -> None:
    assert summary["scenarios"] == sorted(SCENARIOS)
    assert summary["policies"][0] == REF
    assert set(summary["policies"]) == set(POLICIES)
    cell = summary["per_scenario"]["bw-hog"]["ppo"]
    assert cell["n"] == 12 and cell["n_seeds"] == 3
    assert list(cell["metrics"]) == list(METRICS)
    m = cell["metrics"]["geomean_perf"]
    assert m["mean_ci"][0] <= m["mean"] <= m["mean_ci"][1]
    assert m["iqm_ci"][0] <= m["iqm"] <= m["iqm_ci"][1]
    ratio = cell["ratio"]
    assert ratio["n"] == 12
    assert ratio["ci"][0] <= ratio["mean"] <= ratio["ci"][1]
    assert ratio["mean"] == pytest.approx(1.2, rel=0.05)
    assert summary["per_policy"]["ppo"]["geomean_ratio"] == pytest.approx(1.2, rel=0.05)
    assert summary["per_policy"]["random"]["geomean_ratio"] == pytest.approx(0.8, rel=0.05)


def test_reference_ratio_is_exactly_one(summary: dict[str, Any]) -> None:
    for scen in SCENARIOS:
        ratio = summary["per_scenario"][scen][REF]["ratio"]
        assert ratio["mean"] == 1.0
        assert ratio["ci"] == [1.0, 1.0]
    assert summary["per_policy"][REF]["geomean_ratio"] == 1.0


def test_summary_json_serialisable_and_deterministic(records: list[dict[str, Any]]) -> None:
    a = summarize_records(records, reference=REF, n_boot=300, seed=5)
    b = summarize_records(list(reversed(records)), reference=REF, n_boot=300, seed=5)
    text = json.dumps(a, allow_nan=False)
    assert json.loads(text) == a
    assert text == json.dumps(b, allow_nan=False)
    c = summarize_records(records, reference=REF, n_boot=300, seed=6)
    assert json.dumps(c) != text


def test_summary_without_reference(records: list[dict[str, Any]]) -> None:
    s = summarize_records(records, reference=None, n_boot=200)
    assert s["per_scenario"]["kv-mix"]["ppo"]["ratio"] is None
    assert s["per_policy"]["ppo"]["geomean_ratio"] is None
    json.dumps(s, allow_nan=False)
    assert "geomean ratio" not in markdown_table(s)
    with pytest.raises(ValueError, match="reference"):
        leaderboard_markdown(s)


def test_missing_reference_is_a_clear_error(records: list[dict[str, Any]]) -> None:
    with pytest.raises(ValueError, match=r"reference policy 'nope' is not in the records"):
        summarize_records(records, reference="nope")
    partial = [r for r in records if not (r["policy"] == REF and r["scenario"] == "kv-mix")]
    with pytest.raises(ValueError, match=r"no records in scenario 'kv-mix'"):
        summarize_records(partial, reference=REF)


def test_record_validation_errors(records: list[dict[str, Any]]) -> None:
    with pytest.raises(ValueError, match="no evaluation records"):
        summarize_records([], reference=None)
    with pytest.raises(ValueError, match="duplicate"):
        summarize_records([*records, records[0]], reference=REF)
    bad = {k: v for k, v in records[0].items() if k != "seed"}
    with pytest.raises(ValueError, match="seed"):
        summarize_records([bad], reference=None)
    with pytest.raises(ValueError, match="primary metric"):
        summarize_records(records, reference=REF, metric="no_such_metric")


def test_unpaired_episodes_use_shared_keys(records: list[dict[str, Any]]) -> None:
    # Drop one reference episode: the ratio is computed on the 11 shared pairs.
    recs = [
        r
        for r in records
        if not (
            r["policy"] == REF
            and r["scenario"] == "bw-hog"
            and r["seed"] == 0
            and r["episode"] == 0
        )
    ]
    s = summarize_records(recs, reference=REF, n_boot=100)
    assert s["per_scenario"]["bw-hog"]["ppo"]["ratio"]["n"] == 11
    assert s["per_scenario"]["bw-hog"]["ppo"]["n"] == 12


# ----------------------------------------------------------------------------- Markdown

CELL = re.compile(r"^(-?\d+\.\d+) \[(-?\d+\.\d+), (-?\d+\.\d+)\]$")


def _parse_table(text: str) -> list[list[str]]:
    rows = [line for line in text.strip().splitlines() if line.startswith("|")]
    return [[c.strip() for c in row.strip("|").split("|")] for row in rows]


@pytest.mark.parametrize(("metric", "stat"), [(None, "mean"), ("throughput_gbps", "iqm")])
def test_markdown_table_numbers_match_summary(
    summary: dict[str, Any], metric: str | None, stat: str
) -> None:
    text = markdown_table(summary, metric=metric, stat=stat)
    rows = _parse_table(text)
    header, body = rows[0], rows[2:]
    policies = header[1:]
    assert policies == summary["policies"]
    name = metric or summary["metric"]
    assert [r[0] for r in body[:-1]] == summary["scenarios"]
    for row in body[:-1]:
        scen = row[0]
        for pol, cell in zip(policies, row[1:], strict=True):
            m = CELL.match(cell)
            assert m, cell
            value, lo, hi = (float(g) for g in m.groups())
            entry = summary["per_scenario"][scen][pol]["metrics"][name]
            assert value == pytest.approx(entry[stat], abs=5e-4)
            assert lo == pytest.approx(entry[f"{stat}_ci"][0], abs=5e-4)
            assert hi == pytest.approx(entry[f"{stat}_ci"][1], abs=5e-4)
    last = body[-1]
    assert last[0].startswith("geomean ratio to linux-tpp")
    for pol, cell in zip(policies, last[1:], strict=True):
        assert float(cell) == pytest.approx(summary["per_policy"][pol]["geomean_ratio"], abs=5e-4)
    assert last[1] == "1.000"


def test_markdown_table_missing_cell(records: list[dict[str, Any]]) -> None:
    recs = [r for r in records if not (r["policy"] == "random" and r["scenario"] == "kv-mix")]
    s = summarize_records(recs, reference=REF, n_boot=100)
    rows = _parse_table(markdown_table(s))
    kv_row = next(r for r in rows if r[0] == "kv-mix")
    assert kv_row[s["policies"].index("random") + 1] == "-"
    assert s["per_policy"]["random"]["n_scenarios"] == 1


def test_leaderboard_ranks_by_geomean_ratio(summary: dict[str, Any]) -> None:
    rows = _parse_table(leaderboard_markdown(summary))[2:]
    assert [r[1] for r in rows] == ["ppo", REF, "random"]
    assert [int(r[0]) for r in rows] == [1, 2, 3]
    for r in rows:
        assert float(r[2]) == pytest.approx(summary["per_policy"][r[1]]["geomean_ratio"], abs=5e-4)
        assert r[3] == "2/2"


# ----------------------------------------------------------------------------- CSV


def test_write_csv_one_row_per_record(records: list[dict[str, Any]], tmp_path: Path) -> None:
    path = write_csv(records, tmp_path / "out" / "episodes.csv")
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == len(records)
    with path.open(newline="") as fh:
        header = next(csv.reader(fh))
    assert header == ["scenario", "policy", "seed", "episode", *METRICS]
    for row, rec in zip(rows, records, strict=True):
        assert row["scenario"] == rec["scenario"] and row["policy"] == rec["policy"]
        assert int(row["seed"]) == rec["seed"] and int(row["episode"]) == rec["episode"]
        for m in METRICS:
            assert float(row[m]) == rec["metrics"][m]  # full precision round trip


def test_write_csv_with_tenants(records: list[dict[str, Any]], tmp_path: Path) -> None:
    path = write_csv(records[:3], tmp_path / "t.csv", include_tenants=True)
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 3
    assert float(rows[0]["tenant.kv.dram_access_share"]) == 0.7
    assert "tenant.scan.norm_perf" in rows[0]


# ----------------------------------------------------------------------------- plots


def _assert_png(path: Path) -> None:
    data = path.read_bytes()
    assert len(data) > len(PNG_SIGNATURE)
    assert data[:8] == PNG_SIGNATURE


def test_plot_ratio_bars_writes_png(summary: dict[str, Any], tmp_path: Path) -> None:
    out = plot_ratio_bars(summary, tmp_path / "plots" / "ratios.png")
    _assert_png(out)
    _assert_png(plot_ratio_bars(summary, tmp_path / "with_ref.png", include_reference=True))


def test_plot_ratio_bars_needs_reference(records: list[dict[str, Any]], tmp_path: Path) -> None:
    s = summarize_records(records, reference=None, n_boot=50)
    with pytest.raises(ValueError, match="reference"):
        plot_ratio_bars(s, tmp_path / "x.png")


def _series(n: int = 50) -> dict[str, Any]:
    t = list(range(n))
    x = np.linspace(0, 1, n)
    return {
        "t": t,
        "tenants": {
            "kv": {"norm_perf": list(0.8 + 0.1 * x), "dram_access_share": list(0.5 + 0.3 * x)},
            "scan": {"norm_perf": list(0.9 - 0.1 * x), "dram_access_share": list(0.5 - 0.3 * x)},
        },
        "weights": {"kv:dram": list(0.5 + 0.4 * x), "kv:cxl": list(0.5 - 0.4 * x)},
        "promotion_rate_mbps": list(200.0 * x),
    }


def test_plot_timeseries_writes_png(tmp_path: Path) -> None:
    out = plot_timeseries(_series(), tmp_path / "ts.png", title="PPO on kv-mix, seed 0")
    _assert_png(out)


def test_plot_timeseries_validates_lengths(tmp_path: Path) -> None:
    series = _series()
    series["promotion_rate_mbps"] = series["promotion_rate_mbps"][:-1]
    with pytest.raises(ValueError, match="promotion_rate_mbps"):
        plot_timeseries(series, tmp_path / "bad.png", title="bad")
    series = _series()
    del series["weights"]
    with pytest.raises(ValueError, match="weights"):
        plot_timeseries(series, tmp_path / "bad.png", title="bad")
