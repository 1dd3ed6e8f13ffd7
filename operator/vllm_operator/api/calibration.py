"""``status.calibration``: an in-cluster calibration's state and its proposal.

The annotation ``vllm-operator.dev/calibrate=<N>`` asks for N A/A gate Jobs of the stable
revision against its twin (``rollout/calibration.py``). Everything the operator needs to go on
after a restart is here: what was asked, for which revision and spec, the name stem of its
Jobs, and each finished run's per-trial figures (a Job's summary is gone once its TTL passes),
then the proposal fitted from them (``gate/calibration.py``).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from vllm_operator.api.base import APIModel

MAX_RUNS = 20
"""Most A/A Jobs one calibration may ask for (each costs a gate's timeoutSeconds)."""

CalibrationPhase = Literal["Waiting", "Running", "Done", "Abandoned", "Invalid"]

_Ms = Annotated[float, Field(ge=0, le=3_600_000)]


class CalibrationRun(APIModel):
    """One finished A/A Job: per figure (``itl.p99@24``), each trial's percentile (ms)."""

    job: str = Field(max_length=253, description="The Job that measured it.")
    candidate: dict[str, list[_Ms]] = Field(
        default_factory=dict, description="The stable revision's percentile per trial."
    )
    twin: dict[str, list[_Ms]] = Field(
        default_factory=dict, description="Its twin's percentile per trial."
    )
    rates: dict[str, Annotated[float, Field(ge=0)]] = Field(
        default_factory=dict, description="Requests per second each level brought."
    )


class CalibrationProposal(APIModel):
    """The floors and plan fitted from the runs (``vllm-operator calibrate``'s rule)."""

    trials: int = Field(ge=1, le=10, description="gate.trials to set.")
    seconds_per_level: int = Field(ge=1, le=3600, description="gate.workload.load.secondsPerLevel.")
    floors: dict[str, Annotated[int, Field(ge=1, le=100)]] = Field(
        default_factory=dict,
        description="regressionFloorPercent per metric (ttft, itl, tpot, e2e).",
    )
    power: list[str] = Field(
        default_factory=list, description="What the plan detects (gate.power), per figure."
    )
    patch: str = Field(default="", max_length=4096, description="The merge patch, YAML.")


class CalibrationStatus(APIModel):
    """An in-cluster calibration (annotation ``vllm-operator.dev/calibrate``)."""

    request: str | None = Field(
        default=None,
        max_length=64,
        description="The annotation's value this answers (absent: removed since; set it "
        "again to calibrate again).",
    )
    phase: CalibrationPhase = Field(
        description="Waiting (a rollout first), Running, Done, Abandoned or Invalid."
    )
    message: str = Field(default="", max_length=4096, description="Where it stands, or why.")
    runs_wanted: int = Field(default=0, ge=0, le=MAX_RUNS, description="N of calibrate=<N>.")
    revision: str | None = Field(default=None, description="The stable revision calibrated.")
    generation: int | None = Field(
        default=None, description="The spec's generation it started on: a change abandons it."
    )
    token: str | None = Field(default=None, max_length=16, description="Its Jobs' name stem.")
    runs: list[CalibrationRun] = Field(
        default_factory=list, max_length=MAX_RUNS, description="The finished A/A runs."
    )
    proposal: CalibrationProposal | None = Field(
        default=None, description="The fitted floors and plan, once every run finished."
    )
