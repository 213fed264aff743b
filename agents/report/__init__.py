"""Rendering of TierGym evaluation results: summaries, Markdown, CSV and plots.

Input contract: a list of episode records as :func:`agents.rollout.rollout` and
:func:`agents.evaluation.compare` make them, each a dict::

    {
        "scenario": str,            # the scenario or family asked for ("kv-store", "mixed")
        "instance": str,            # optional: the scenario the episode ran ("mixed-test-17")
        "policy": str,
        "seed": int,                # the episode's own seed (run seed + episode index)
        "episode": int,             # index of the episode in its run
        "run_seed": int,            # optional: the run's seed
        "metrics": {"reward": float, "geomean_perf": float, "throughput_gbps": float,
                    "worst_perf": float, "mean_latency_ns": float,
                    "promotion_mbps": float, "demotion_mbps": float},
        "tenants": {name: {"norm_perf": float, "throughput_gbps": float,
                           "mean_latency_ns": float, "dram_access_share": float}},
    }

The package's modules, each re-exported here:

- :mod:`agents.report.records`: the contract's metric names, the records' validation,
  :func:`write_csv` (one row per record);
- :mod:`agents.report.summary`: :func:`summarize_records` turns records into a
  JSON-serialisable summary (mean and IQM with bootstrap CIs over episodes; paired
  ratios to a reference policy; the geometric mean of those ratios across scenarios
  with a CI stratified by scenario; the details are in its docstring) and
  :func:`headroom_summary` each policy's share of the planner's headroom;
- :mod:`agents.report.markdown`: :func:`markdown_table`, :func:`headroom_markdown` and
  :func:`leaderboard_markdown` render a summary, :func:`generalisation_markdown` the
  generalisation summary;
- :mod:`agents.report.robustness`: :func:`robustness_summary` each policy's worst ratio to
  the best single heuristic over the scenarios, and which scenario (the leaderboard's
  robustness columns);
- :mod:`agents.report.generalisation`: :func:`generalisation_summary` sorts a learned
  policy's scenarios into trained, held-out and other, each against the best heuristic;
- :mod:`agents.report.plots`: :func:`plot_ratio_bars` draws a summary's ratios and
  :func:`plot_timeseries` one episode's trajectory (matplotlib's Agg canvas, no display).
"""

# Relative imports: a package's own re-exports are not import edges in
# tests/test_layers.py; the modules below carry the edges with absolute imports.
from .generalisation import generalisation_summary
from .markdown import (
    generalisation_markdown,
    headroom_markdown,
    leaderboard_markdown,
    markdown_table,
)
from .plots import plot_ratio_bars, plot_timeseries
from .records import LOWER_IS_BETTER, METRICS, TENANT_METRICS, write_csv
from .robustness import robustness_summary, scenario_means
from .summary import (
    CI_DESCRIPTION,
    HEADROOM_LOWER,
    HEADROOM_METRIC,
    HEADROOM_UPPER,
    HEADROOM_UPPERS,
    headroom_summary,
    summarize_records,
)

__all__ = [
    "CI_DESCRIPTION",
    "HEADROOM_LOWER",
    "HEADROOM_METRIC",
    "HEADROOM_UPPER",
    "HEADROOM_UPPERS",
    "LOWER_IS_BETTER",
    "METRICS",
    "TENANT_METRICS",
    "generalisation_markdown",
    "generalisation_summary",
    "headroom_markdown",
    "headroom_summary",
    "leaderboard_markdown",
    "markdown_table",
    "plot_ratio_bars",
    "plot_timeseries",
    "robustness_summary",
    "scenario_means",
    "summarize_records",
    "write_csv",
]
