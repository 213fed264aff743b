"""The stable-baselines3 logger of a run: scalars with descriptions, typed hparams, purging.

:class:`DescribedTensorBoardFormat` is stable-baselines3's TensorBoard output
with each scalar tag's :func:`~agents.tensorboard.tags.describe` text in its
metadata, hyperparameters written with booleans as booleans, a resumed
run's stale events purged, and sub-folders for runs of their own (the references'
evaluations); :func:`make_logger` is the run's logger with it
(and the console table).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from stable_baselines3.common.logger import (
    HParam,
    HumanOutputFormat,
    Logger,
    TensorBoardOutputFormat,
)
from tensorboard.compat.proto.summary_pb2 import DataClass, Summary, SummaryMetadata
from tensorboard.plugins.hparams import api_pb2, plugin_data_pb2
from torch.utils.tensorboard import SummaryWriter

from agents.tensorboard.tags import describe

__all__ = ["DescribedTensorBoardFormat", "make_logger"]


def _hparams_summaries(
    hparams: Mapping[str, Any], metrics: Sequence[str]
) -> tuple[Summary, Summary, Summary]:
    """The hparams plugin's experiment, session start and end, values with their real types.

    (torch's ``hparams`` writes booleans as numbers: ``bool`` is an ``int``.)
    """

    def summary(tag: str, content: Any) -> Summary:
        meta = SummaryMetadata(
            plugin_data=SummaryMetadata.PluginData(
                plugin_name="hparams", content=content.SerializeToString()
            )
        )
        return Summary(value=[Summary.Value(tag=tag, metadata=meta)])

    infos = []
    start = plugin_data_pb2.SessionStartInfo()
    for k, v in hparams.items():
        if isinstance(v, bool):
            start.hparams[k].bool_value = v
            kind = "DATA_TYPE_BOOL"
        elif isinstance(v, int | float):
            start.hparams[k].number_value = float(v)
            kind = "DATA_TYPE_FLOAT64"
        elif isinstance(v, str):
            start.hparams[k].string_value = v
            kind = "DATA_TYPE_STRING"
        else:
            raise ValueError(f"hparam {k!r}: {type(v).__name__} is not a bool, number or string")
        infos.append(api_pb2.HParamInfo(name=k, type=api_pb2.DataType.Value(kind)))
    exp = api_pb2.Experiment(
        hparam_infos=infos,
        metric_infos=[
            api_pb2.MetricInfo(name=api_pb2.MetricName(tag=t), description=describe(t) or "")
            for t in metrics
        ],
    )
    end = plugin_data_pb2.SessionEndInfo(status=api_pb2.Status.Value("STATUS_SUCCESS"))
    parts = {"experiment": exp, "session_start_info": start, "session_end_info": end}
    exp_s, start_s, end_s = (
        summary(f"_hparams_/{k}", plugin_data_pb2.HParamsPluginData(version=0, **{k: v}))
        for k, v in parts.items()
    )
    return exp_s, start_s, end_s


class DescribedTensorBoardFormat(TensorBoardOutputFormat):
    """stable-baselines3's TensorBoard output with tag descriptions, typed hparams and purging.

    - The first value of every scalar tag carries its :func:`describe` text in
      its ``SummaryMetadata`` (``summary_description``), which TensorBoard keeps
      for the tag.
    - :class:`~stable_baselines3.common.logger.HParam` values are written with
      booleans as booleans.
    - A scalar is written at most once per step and never at a step before
      its last one (stable-baselines3's off-policy loop dumps twice at one step
      when several instances finish episodes together): the first value stays.
    - ``purge_step``: a resumed run passes the step of its checkpoint plus one;
      the writer opens its event file with a ``SessionLog.START`` at that step,
      and TensorBoard drops every event at or past it from the earlier files
      (what the killed process wrote after the checkpoint), so curves continue
      without duplicated or backwards steps.
    - :meth:`write_run` writes scalars into a sub-folder, a TensorBoard run of its
      own (one colour and one name per run on a chart): each reference heuristic's
      evaluation, under the tag the learned policy's has in this folder. Each
      sub-folder's writer opens at its first value, with the same ``purge_step``.
    """

    def __init__(self, folder: str, purge_step: int | None = None) -> None:
        self.writer = SummaryWriter(log_dir=folder, purge_step=purge_step)
        self._is_closed = False
        self._described: set[str] = set()
        self._last_step: dict[str, int] = {}
        self.folder = folder
        self._purge_step = purge_step  # (the writer forgets it once its file is open)
        self._runs: dict[str, DescribedTensorBoardFormat] = {}

    def write_run(self, run: str, values: Mapping[str, float], step: int) -> None:
        """Scalars ``values`` at ``step`` into the sub-folder ``run`` of this one (a plain
        folder name, e.g. :func:`~agents.tensorboard.tags.reference_run`'s), described and
        written at most once per step like :meth:`write`'s."""
        if not run or Path(run).name != run or run in (".", ".."):
            raise ValueError(f"run: got {run!r}, expected one folder name")
        sub = self._runs.get(run)
        if sub is None:
            sub = DescribedTensorBoardFormat(str(Path(self.folder) / run), self._purge_step)
            self._runs[run] = sub
        sub.write(dict(values), dict.fromkeys(values), step)

    def close(self) -> None:
        for sub in self._runs.values():
            sub.close()
        super().close()

    def _file_writer(self) -> Any:
        assert not self._is_closed, "the SummaryWriter was closed"
        return self.writer._get_file_writer()

    def write(
        self, key_values: dict[str, Any], key_excluded: dict[str, Any], step: int = 0
    ) -> None:
        rest_v: dict[str, Any] = {}
        rest_x: dict[str, Any] = {}
        summary = Summary()
        for key, value in key_values.items():
            excluded = key_excluded.get(key)
            if excluded is not None and "tensorboard" in excluded:
                continue
            if isinstance(value, HParam):
                for s in _hparams_summaries(value.hparam_dict, list(value.metric_dict)):
                    self._file_writer().add_summary(s, step)
            elif isinstance(value, int | float | np.integer | np.floating) and not isinstance(
                value, bool
            ):
                if step <= self._last_step.get(key, -1):
                    continue  # a second dump at one step (SB3's off-policy loop does that)
                self._last_step[key] = step
                v = summary.value.add(tag=key, simple_value=float(value))
                if key not in self._described:
                    self._described.add(key)
                    # plugin and data class set: TensorBoard's fast loader (Rust) then
                    # keeps the metadata of an old-style value, description included
                    v.metadata.plugin_data.plugin_name = "scalars"
                    v.metadata.data_class = DataClass.DATA_CLASS_SCALAR
                    v.metadata.summary_description = describe(key) or ""
            else:
                rest_v[key], rest_x[key] = value, excluded
        if summary.value:
            self._file_writer().add_summary(summary, step)
        if rest_v:
            super().write(rest_v, rest_x, step)
        self.writer.flush()


def make_logger(folder: str, stdout: bool = True, purge_step: int | None = None) -> Logger:
    """The run's logger: :class:`DescribedTensorBoardFormat` into ``folder`` (+ stdout)."""
    formats: list[Any] = [DescribedTensorBoardFormat(folder, purge_step)]
    if stdout:
        # the unit-bearing tags are longer than SB3's 36-character default: truncated,
        # two tags could collide and the table would refuse them
        formats.append(HumanOutputFormat(sys.stdout, max_length=80))
    return Logger(folder=folder, output_formats=formats)
