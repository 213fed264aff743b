"""scripts/seed_table.py: each training seed's ratio to every scenario's best heuristic, the
mean over seeds, the floor's verdict, and one-line errors on bad input."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest


@pytest.fixture(scope="module")
def seed_table(script: Callable[[str], ModuleType]) -> ModuleType:
    return script("scripts/seed_table.py")


def _results(
    path: Path,
    means: dict[str, dict[str, float]],
    heuristics: tuple[str, ...] = ("dram-first", "tpp"),
) -> Path:
    """A results.json whose summary holds ``means`` (scenario -> policy -> mean)."""
    per_scenario = {
        sc: {p: {"metrics": {"geomean_perf": {"mean": m}}} for p, m in pols.items()}
        for sc, pols in means.items()
    }
    summary = {
        "metric": "geomean_perf",
        "per_scenario": per_scenario,
        "robustness": {"heuristics": list(heuristics)},
    }
    path.write_text(json.dumps({"summary": summary}))
    return path


def test_ratios_to_each_scenarios_best_heuristic_and_their_mean(
    seed_table: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _results(
        tmp_path / "a.json",
        {
            "x": {"dram-first": 0.5, "tpp": 0.8, "s0": 0.8, "s1": 0.72, "adaptive": 0.6},
            "y": {"dram-first": 1.0, "tpp": 0.9, "s0": 1.1, "s1": 1.0, "adaptive": 1.0},
        },
    )
    b = _results(tmp_path / "b.json", {"x": {"dram-first": 0.5, "tpp": 0.8, "s2": 0.8}})
    with pytest.raises(SystemExit, match="run 's2' has no results on 'y'"):
        seed_table.table([a, b], ["s0", "s1", "s2"], 0.98)
    b = _results(  # a later run of the new seed beside dram-first alone: tpp still counts
        tmp_path / "b.json",
        {"x": {"dram-first": 0.5, "s2": 0.8}, "y": {"dram-first": 1.0, "s2": 0.97}},
        heuristics=("dram-first",),
    )
    text, ok = seed_table.table([a, b], ["s0", "s1", "s2"], 0.98)
    # x: best tpp 0.8; ratios 1, 0.9, 1 -> mean 0.967, below. y: best dram-first 1.0
    assert (
        "| x | tpp (0.800) | 1.000 | 0.900 | 1.000 | 0.967 [0.900, 1.000] **below** | - |" in text
    )
    assert "| y | dram-first (1.000) | 1.100 | 1.000 | 0.970 | 1.023 [0.970, 1.100] | - |" in text
    assert not ok and text.endswith("below 0.98: x")
    # over x and y against dram-first: s0 sqrt(1.6 * 1.1), s1 sqrt(1.44 * 1.0), s2 sqrt(1.6 * 0.97)
    assert (
        "geometric mean of the ratios to dram-first: s0 1.327, s1 1.200, s2 1.246; "
        "mean 1.257 [1.200, 1.327]" in text
    )
    assert "ratios to tpp: " in text and "ratios to adaptive: " in text
    assert seed_table.main([str(a), str(b), "--runs", "s0,s1,s2", "--floor", "0.9"]) == 0
    assert seed_table.main([str(a), str(b), "--runs", "s0,s1,s2"]) == 1
    capsys.readouterr()


def test_bad_input_is_one_line_and_exit_code_2(
    seed_table: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert seed_table.main([str(bad), "--runs", "s0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {bad}: not an evaluate.py results.json")
    assert seed_table.main([str(tmp_path / "missing.json"), "--runs", "s0"]) == 2
    assert seed_table.main([str(bad), "--runs", ","]) == 2


def test_against_a_named_policy_takes_every_scenarios_ratio_to_it(
    seed_table: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _results(
        tmp_path / "a.json",
        {
            "x": {"dram-first": 0.5, "tpp": 0.8, "s0": 0.6, "s1": 0.45},
            "y": {"dram-first": 1.0, "tpp": 0.9, "s0": 1.1, "s1": 1.2},
        },
    )
    text, ok = seed_table.table([a], ["s0", "s1"], 0.98, against="dram-first")
    # x: against dram-first 0.5 (not tpp, the best heuristic): 1.2 and 0.9, mean 1.05
    assert "| scenario | reference (mean) | s0 | s1 |" in text
    assert "| x | dram-first (0.500) | 1.200 | 0.900 | 1.050 [0.900, 1.200] | - |" in text
    assert "| y | dram-first (1.000) | 1.100 | 1.200 | 1.150 [1.100, 1.200] | - |" in text
    assert ok and text.endswith("mean ratio to dram-first is below 0.98: none")
    text, ok = seed_table.table([a], ["s0", "s1"], 1.1, against="tpp")
    assert "| x | tpp (0.800) | 0.750 | 0.562 |" in text and not ok
    assert text.endswith("mean ratio to tpp is below 1.1: x")
    assert seed_table.main([str(a), "--runs", "s0,s1", "--against", "adaptive"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: --against: policy 'adaptive' has no results on 'x'"]
