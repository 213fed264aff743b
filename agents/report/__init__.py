"""Rendering of TierGym evaluation results: summaries, Markdown, CSV and plots.

Input contract: a list of episode records as :func:`agents.rollout.rollout` makes them
(its docstring lays one out; :func:`agents.evaluation.compare` adds ``run_seed``, the run's
seed); ``instance`` is optional.

The package's modules, each re-exported here:

- :mod:`agents.report.records`: the contract's metric names, the records' validation,
  :func:`write_csv` (one row per record);
- :mod:`agents.report.summary`: :func:`summarize_records`, the statistics summary of the
  records (its module says what it holds), and :func:`headroom_summary`;
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
# tests/test_layers.py; the modules below carry the edges with absolute imports. Each
# module's ``__all__`` is its public names, re-exported here as they are.
from . import generalisation, markdown, plots, records, robustness, summary
from .generalisation import *  # noqa: F403
from .markdown import *  # noqa: F403
from .plots import *  # noqa: F403
from .records import *  # noqa: F403
from .robustness import *  # noqa: F403
from .summary import *  # noqa: F403

__all__ = [
    *generalisation.__all__,
    *markdown.__all__,
    *plots.__all__,
    *records.__all__,
    *robustness.__all__,
    *summary.__all__,
]
