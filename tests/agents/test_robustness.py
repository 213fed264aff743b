"""Robustness reported: each policy's worst ratio to the best heuristic, and where.

:func:`agents.stats.worst_ratio_to_best` on known tables, :func:`agents.report.robustness_summary`
on a summary of known records, and the leaderboard ``evaluate.py`` and ``train.py`` print
(:func:`agents.evaluation.write_results`) showing it. No simulation: the records are made up.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agents.report import leaderboard_markdown, robustness_summary, summarize_records
from agents.stats import worst_ratio_to_best

#: mean geomean_perf per scenario and policy; "learned" is worst on "b" (0.8 of dram-first)
TABLE = {
    "a": {"dram-first": 1.0, "tpp": 1.2, "learned": 1.1},
    "b": {"dram-first": 1.0, "tpp": 0.9, "learned": 0.8},
    "c": {"dram-first": 2.0, "learned": 2.0},
}
HEUR = ["dram-first", "tpp"]


def test_known_table_gives_known_worst_ratio_and_scenario() -> None:
    got = worst_ratio_to_best(TABLE, HEUR)
    assert got["best"] == {
        "a": {"heuristic": "tpp", "mean": 1.2},
        "b": {"heuristic": "dram-first", "mean": 1.0},
        "c": {"heuristic": "dram-first", "mean": 2.0},
    }
    learned = got["per_policy"]["learned"]
    assert learned["worst_scenario"] == "b"
    assert learned["worst_ratio"] == pytest.approx(0.8)
    assert learned["best_heuristic"] == "dram-first"
    assert learned["ratios"] == pytest.approx({"a": 1.1 / 1.2, "b": 0.8, "c": 1.0})
    assert learned["n_scenarios"] == 3
    # a heuristic is 1 where it is the best; tpp did not run "c"
    tpp = got["per_policy"]["tpp"]
    assert (tpp["worst_scenario"], tpp["n_scenarios"]) == ("b", 2)
    assert tpp["worst_ratio"] == pytest.approx(0.9)
    df = got["per_policy"]["dram-first"]
    assert df["worst_scenario"] == "a" and df["worst_ratio"] == pytest.approx(1.0 / 1.2)


def test_lower_is_better_takes_the_lowest_as_best_and_the_highest_ratio_as_worst() -> None:
    lat = {"a": {"h1": 100.0, "h2": 80.0, "p": 120.0}, "b": {"h1": 50.0, "h2": 60.0, "p": 50.0}}
    got = worst_ratio_to_best(lat, ["h1", "h2"], higher_is_better=False)
    assert got["best"]["a"]["heuristic"] == "h2" and got["best"]["b"]["heuristic"] == "h1"
    p = got["per_policy"]["p"]
    assert (p["worst_scenario"], p["worst_ratio"]) == ("a", pytest.approx(1.5))


def test_scenarios_without_a_usable_heuristic_are_skipped_and_ties_are_fixed() -> None:
    table: dict[str, dict[str, Any]] = {
        "x": {"h1": 0.0, "h2": None, "p": 1.0},  # no positive heuristic mean: skipped
        "y": {"h1": 1.0, "h2": 1.0, "p": 0.5},  # a tie: the later name, as generalisation's
        "z": {"h1": 1.0, "p": 0.5},  # the same worst ratio: the first scenario by name wins
    }
    got = worst_ratio_to_best(table, ["h1", "h2"])
    assert set(got["best"]) == {"y", "z"} and got["best"]["y"]["heuristic"] == "h2"
    p = got["per_policy"]["p"]
    assert (p["worst_scenario"], p["worst_ratio"], p["n_scenarios"]) == ("y", 0.5, 2)
    assert worst_ratio_to_best({"x": {"p": 1.0}}, ["h1"]) == {"best": {}, "per_policy": {}}


def _records() -> list[dict[str, Any]]:
    """Two episodes per (scenario, policy) whose means are :data:`TABLE`'s."""
    out = []
    for scen, row in TABLE.items():
        for pol, mean in row.items():
            for ep, d in enumerate((-0.05, 0.05)):
                out.append(
                    {
                        "scenario": scen,
                        "policy": pol,
                        "seed": 10 + ep,
                        "episode": ep,
                        "metrics": {"geomean_perf": mean + d},
                    }
                )
    return out


def test_summary_robustness_section_and_leaderboard_columns() -> None:
    summ = summarize_records(_records(), reference="dram-first", n_boot=50, heuristics=HEUR)
    rob = summ["robustness"]
    assert rob == robustness_summary(summ, HEUR)
    assert rob["heuristics"] == HEUR and rob["higher_is_better"] is True
    learned = rob["per_policy"]["learned"]
    assert learned["worst_scenario"] == "b"
    assert learned["worst_vs_best_heuristic"] == pytest.approx(0.8)
    assert learned["best_heuristic"] == "dram-first"
    assert rob["per_scenario"]["a"]["best_heuristic"] == "tpp"
    lines = leaderboard_markdown(summ).splitlines()
    assert "worst vs best heuristic | worst scenario (its best heuristic) |" in lines[0]
    (row,) = [ln for ln in lines if "| learned |" in ln]
    assert row.endswith("| 0.800 | b (dram-first) |")
    assert all(len(ln.split("|")) == len(lines[0].split("|")) for ln in lines)
    # without heuristics: no section, the leaderboard as before (the existing keys kept)
    plain = summarize_records(_records(), reference="dram-first", n_boot=50)
    assert "robustness" not in plain
    assert "worst vs best heuristic" not in leaderboard_markdown(plain)
    assert {k: v for k, v in summ.items() if k != "robustness"} == plain


def test_evaluation_results_carry_it(tmp_path: Path) -> None:
    """What ``evaluate.py`` and ``train.py`` write and print: the catalogue's deployable
    heuristics are the reference set, and the leaderboard shows the worst scenario."""
    from agents.evaluation import write_results
    from baselines import catalogue

    recs = _records()  # "dram-first" and "tpp" are catalogue heuristics, "learned" is not
    summ = write_results(
        tmp_path, recs, reference="dram-first", metric="geomean_perf", seed=0, n_boot=50,
        command=None, plots=False,
    )  # fmt: skip
    assert summ["robustness"]["heuristics"] == [
        h for h in catalogue.names(kind="heuristic", deployable=True) if h in ("dram-first", "tpp")
    ]
    saved = json.loads((tmp_path / "results.json").read_text())["summary"]["robustness"]
    assert saved["per_policy"]["learned"]["worst_scenario"] == "b"
    board = (tmp_path / "leaderboard.md").read_text()
    assert "| 0.800 | b (dram-first) |" in board
