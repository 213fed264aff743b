"""The warm start's settings: one validated, immutable object that every step reads.

Every field is required: the values live in the training recipe (the run's
hyperparameter file), not in code, so that a run's warm start is stated in one
place and a missing value is an error instead of a silent default. The bounds
refuse values that cannot work (an empty label set, a margin that does not
reach past the clip of the entries it fits); integers and booleans are strict
(``true`` is no ``1``, ``2.0`` no episode count).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from envs.scenario import scenario_names

__all__ = ["ImitationSettings", "PlanSearch"]

_STRICT = ConfigDict(frozen=True, extra="forbid", strict=True)
#: Largest episode count, epoch count or batch size accepted (as the run's other counts).
_MAX_COUNT = 1 << 16


class PlanSearch(BaseModel):
    """The planner's search for the plan labels (:class:`baselines.planner.Planner`'s arguments).

    A small fraction of the evaluation planner's candidates: one static plan per episode
    is what the policy can learn from its observation, and the search runs on every
    planned training episode.
    """

    model_config = _STRICT

    segments: int = Field(
        ge=1,
        le=64,
        description="equal parts of each episode with their own planned action (1: one "
        "static per-tenant DRAM share and promotion rate for the whole episode)",
    )
    population: int = Field(ge=2, le=4096, description="CEM candidates per episode and iteration")
    iterations: int = Field(ge=0, le=1024, description="CEM iterations after the seed candidates")


class ImitationSettings(BaseModel):
    """What :func:`agents.imitation.warm_start` does: which episodes it labels, how it fits.

    Frozen and closed (an unknown key is an error). :meth:`updated` gives a validated
    copy with some values changed (``model_copy(update=...)`` does not validate).
    """

    model_config = _STRICT

    episodes: int = Field(
        ge=1,
        le=_MAX_COUNT,
        description="training-split episodes labelled per training family (the run's "
        "scenario and train_families)",
    )
    plans: bool = Field(
        description="also plan each training family episode with the clairvoyant planner: "
        "the plan (as the residual over env.residual_bases' first base) is the episode's "
        "label where it beats every base, and the residual is fitted to it"
    )
    scenarios: list[str] = Field(
        description="shipped scenarios labelled as jobs of their own (not planned), so that "
        "the choice of base covers machines and mixes the families do not; distinct names "
        "of envs.scenario.scenario_names(); the run's families are skipped"
    )
    scenario_episodes: int = Field(
        ge=0,
        le=_MAX_COUNT,
        description="training-split episodes labelled per scenario of `scenarios` (0: no "
        "scenario jobs)",
    )
    rounds: int = Field(
        ge=0,
        le=16,
        description="DAgger rounds after the first fit: the fitted policy runs the same "
        "episodes, the states it reaches are added with their episode's targets, and the fit "
        "continues on the aggregate",
    )
    epochs: int = Field(
        ge=1,
        le=_MAX_COUNT,
        description="epochs of the first fit; DAgger round r fits round(epochs / (r + 1)) "
        "epochs of the (r + 1) times larger aggregate, as many gradient steps as the first",
    )
    batch_size: int = Field(ge=1, le=_MAX_COUNT, description="rows per gradient step of the fit")
    learning_rate: float = Field(
        gt=0.0, le=1.0, allow_inf_nan=False, description="Adam's learning rate of the fit"
    )
    stride: int = Field(
        ge=1,
        le=_MAX_COUNT,
        description="record every stride-th step's observation of the label and DAgger runs",
    )
    seed: int = Field(
        ge=0,
        le=1 << 40,
        description="first seed of the labelling episodes (training split), to which the "
        "run's seed is added; job n's episodes start 100000 * n above it, and fit r is "
        "shuffled with seed + run seed + r",
    )
    tie_tolerance: float = Field(
        ge=0.0,
        lt=1.0,
        allow_inf_nan=False,
        description="bases within this relative distance of an episode's best score all "
        "count as best, and the plan is the label only where it beats the best base by more: "
        "two scenarios that look the same to the agent then average to the base that is best "
        "on both, instead of to whichever of a tie the label happened to name",
    )
    corner_margin: float = Field(
        ge=1.0,
        le=100.0,
        allow_inf_nan=False,
        description="mixing targets are +corner_margin for a near-best base and "
        "-corner_margin for the others: past the clip of the mixing entries, because a blend "
        "of two bases can be worse than either (interleave weights and tiering modes do not "
        "average), so that a small error of the fit still picks one base whole",
    )
    off_margin: float = Field(
        ge=0.0,
        le=100.0,
        allow_inf_nan=False,
        description="residual targets of plan entries that switch something off (a weight of "
        "0, promotion off) lie this far below the box's -1 (then clipped to the residual's "
        "range), so that an uncertain fit leaves them off: a tenant whose plan the fit cannot "
        "tell stays local-first, as its base places it, instead of turning on one node (a lone "
        "CXL weight sends every new page there)",
    )
    on_margin: float = Field(
        gt=0.0,
        le=1.0,
        allow_inf_nan=False,
        description="plan entries that are on lie at least this far above the box's threshold "
        "of off (a weight or rate of 1), so that float rounding cannot turn them off",
    )
    plan_search: PlanSearch = Field(
        description="the planner's search for the plan labels (with plans)"
    )
    teacher: Literal["plan", "mpc"] = Field(
        default="plan",
        description="who labels the residual with plans: 'plan', the clairvoyant planner's "
        "static plan of each episode (agents.imitation.experts.plan_actions); 'mpc', the causal "
        "model-predictive controller's decisions, interval by interval (baselines.mpc.MPC, "
        "plan_search's population and iterations; agents.imitation.experts.mpc_actions). "
        "Either is the episode's label where it beats every base; the only field with a "
        "default (plan), so that recipes written before it read as they did",
    )

    @field_validator("scenarios")
    @classmethod
    def _shipped(cls, v: list[str]) -> list[str]:
        shipped = scenario_names()
        bad = [s for s in v if s not in shipped]
        if bad:
            raise ValueError(f"unknown scenarios {bad}, expected names of {shipped}")
        if len(set(v)) != len(v):
            raise ValueError(f"scenarios: {v} names one twice")
        return v

    @model_validator(mode="after")
    def _teacher_needs_plans(self) -> ImitationSettings:
        if self.teacher != "plan" and not self.plans:
            raise ValueError(f"teacher: {self.teacher!r} labels the residual, expected plans: true")
        return self

    def updated(self, **changes: Any) -> ImitationSettings:
        """A validated copy with ``changes`` (field name -> value) applied."""
        return ImitationSettings.model_validate({**self.model_dump(), **changes})
