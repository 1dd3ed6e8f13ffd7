"""Read a benchmark report into what the page draws: typed, bounded, with named errors.

The report is written by ``bench``, but the file a person hands to ``vllm-operator report``
may come from anywhere (another cluster, a log copied by hand, a forged line), and much of
it was written by the measured side or by users (model and class names, server versions,
reasons, test ids). So nothing here trusts it: the file is read by ``bench.report_input``
(up to ``MAX_REPORT_BYTES``, counted before it is parsed with a nesting limit, the reader
``judge`` uses too), every string is clipped, lists are capped (per-request
samples evenly thinned, so a huge run still draws its whole time span), numbers that are not
finite count as missing, and anything that is not a report is a ``ReportError`` naming the
field, never a traceback. Escaping is not done here: ``document`` and ``charts`` escape at
the point where text meets HTML.

Only what the page shows is modelled; other fields of the report are ignored, so a report
gaining fields (the ``load`` section, new quality figures) still opens.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from vllm_operator.api.fixes import first_error
from vllm_operator.bench import report_input
from vllm_operator.bench.report import REPORT_SCHEMA
from vllm_operator.bench.report_power import power_lines
from vllm_operator.errors import SpecError

MAX_REPORT_BYTES = report_input.MAX_REPORT_BYTES
MAX_CONTAINERS = report_input.MAX_CONTAINERS
MAX_VALUES = report_input.MAX_VALUES
"""The page's bounds are the shared reader's (``bench.report_input``)."""
MAX_TEXT = 2_000
"""Longest reason, detail or answer kept (characters); longer ones end in an ellipsis."""
MAX_NAME = 200
"""Longest name kept: model, prompt class, test id, server version."""
MAX_ROWS = 64
"""Most prompt classes, concurrency levels, trials per figure and error classes kept."""
MAX_REASONS = 200
MAX_TESTS = 1_000
MAX_RUNS = 400
"""Most load runs: 2 servers x 16 levels x 10 trials is 320."""
MAX_SAMPLES = 2_000
"""Per-request samples kept per run or prompt class (evenly thinned beyond)."""


class ReportError(SpecError):
    """A file that is not a readable benchmark report (exit 2, ``field: message (fix)``)."""


def _clip(limit: int) -> Callable[[Any], Any]:
    def clip(value: Any) -> Any:
        if isinstance(value, str) and len(value) > limit:
            return value[: limit - 1] + "…"
        return value

    return clip


def _thin(limit: int) -> Callable[[Any], Any]:
    """At most ``limit`` items, evenly spread over the whole list (first and last kept)."""

    def thin(value: Any) -> Any:
        if isinstance(value, list) and len(value) > limit:
            last = len(value) - 1
            return [value[round(i * last / (limit - 1))] for i in range(limit)]
        return value

    return thin


def _head(limit: int) -> Callable[[Any], Any]:
    def head(value: Any) -> Any:
        if isinstance(value, list):
            return value[:limit]
        if isinstance(value, dict):
            return dict(list(value.items())[:limit])
        return value

    return head


def _finite(value: Any) -> Any:
    """NaN and infinities (json.loads accepts them) are missing values, not points."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, int) and abs(value) > 1e15:
        return None
    return value


Text = Annotated[str, BeforeValidator(_clip(MAX_TEXT))]
Name = Annotated[str, BeforeValidator(_clip(MAX_NAME))]
Num = Annotated[float | None, BeforeValidator(_finite)]
Count = Annotated[int, Field(ge=0, le=10**12)]
"""Counts and trial numbers: a 4,000-digit integer is valid JSON, not a count."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


class Stats(_Model):
    median: Num = None


class RequestSample(_Model):
    """One measured request of a prompt class (``per_request``)."""

    trial: Count = 1
    ttft_ms: Num = None
    e2e_ms: Num = None


class LatencyClass(_Model):
    name: Name = Field(alias="class")
    requests: Count = 0
    ok: Count = 0
    e2e_ms: Stats | None = None
    ttft_ms: Stats | None = None
    trials_median_e2e_ms: Annotated[list[Num], BeforeValidator(_head(MAX_ROWS))] = []
    per_request: Annotated[list[RequestSample], BeforeValidator(_thin(MAX_SAMPLES))] = []


class TrialAggregate(_Model):
    trial: Count = 0
    aggregate_tokens_per_second: Num = None


class ConcurrencyRow(_Model):
    concurrency: int = Field(ge=1, le=1 << 20)
    aggregate_tokens_per_second: Num = None
    trials: Annotated[list[TrialAggregate], BeforeValidator(_head(MAX_ROWS))] = []


class QualityTest(_Model):
    id: Name
    category: Name = ""
    passed: bool
    reason: Text = ""


class DifferentialTest(_Model):
    id: Name
    identical: bool | None = None


class Differential(_Model):
    """The same prompts, greedy, to candidate and baseline (``quality.differential``)."""

    compared: Count = 0
    identical: Count = 0
    identical_percent: Num = None
    baseline_passed: Count = 0
    still_passing: Count = 0
    still_passing_percent: Num = None
    tests: Annotated[list[DifferentialTest], BeforeValidator(_head(MAX_TESTS))] = []


class Quality(_Model):
    suite: Name = ""
    passed: Count = 0
    total: Count = 0
    tests: Annotated[list[QualityTest], BeforeValidator(_head(MAX_TESTS))] = []
    differential: Differential | None = None


class ErrorClass(_Model):
    count: Count = 0
    meaning: Text = ""


class Server(_Model):
    """What one server measured: the report's top level (candidate) or its ``baseline``."""

    server_version: Name | None = None
    latency: Annotated[list[LatencyClass], BeforeValidator(_head(MAX_ROWS))] = []
    concurrency: Annotated[list[ConcurrencyRow], BeforeValidator(_head(MAX_ROWS))] = []
    quality: Quality | None = None
    errors: Annotated[dict[Name, ErrorClass], BeforeValidator(_head(MAX_ROWS))] = {}


class Percentiles(_Model):
    p50: Num = None
    p90: Num = None
    p95: Num = None
    p99: Num = None


class RunPercentiles(_Model):
    ttft_ms: Percentiles | None = None
    itl_ms: Percentiles | None = None
    tpot_ms: Percentiles | None = None
    e2e_ms: Percentiles | None = None


class Sample(_Model):
    """One request of a load run (there are up to 640,000: one check per sample, not per
    field, keeps a worst-case report's parse at seconds)."""

    t: float | None = None
    ttft_ms: float | None = None
    itl_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None
    ok: bool = True
    met_slo: bool | None = None

    @model_validator(mode="before")
    @classmethod
    def _finite_figures(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return {k: _finite(v) for k, v in data.items() if k in _SAMPLE_FIELDS}
        return data


_SAMPLE_FIELDS = frozenset(Sample.model_fields)


Role = Literal["candidate", "baseline"]


class LoadRun(_Model):
    """One (server, level, trial) of the load sweep."""

    server: Role
    level: float = Field(gt=0, le=1e9, allow_inf_nan=False)
    trial: Count = 0
    seconds: Num = None
    asked_rate: Num = None
    achieved_rate: Num = None
    requests: Count = 0
    completed: Count = 0
    errors: Annotated[dict[Name, Count], BeforeValidator(_head(MAX_ROWS))] = {}
    error_percent: Num = None
    goodput_percent: Num = None
    goodput_rps: Num = None
    request_throughput: Num = None
    output_tokens_per_second: Num = None
    percentiles: RunPercentiles = RunPercentiles()
    samples: Annotated[list[Sample], BeforeValidator(_thin(MAX_SAMPLES))] = []


class Load(_Model):
    """``report["load"]``: the sweep over load levels (absent for the study)."""

    mode: Literal["rate", "concurrency"]
    workload: dict[str, Any] = {}
    levels_asked: Annotated[list[Num], BeforeValidator(_head(MAX_ROWS))] = []
    capacity: Num = None
    stopped_at: Num = None
    runs: list[LoadRun] = Field(default=[], max_length=MAX_RUNS)


class Figure(_Model):
    """One judged figure of the verdict (``bench.report.figure_json``): what was decided,
    why it stopped, and the numbers where the judge gave them (fractions: -0.2 is -20%)."""

    figure: Name = ""
    outcome: Literal["beyond", "within", "undecided"] | None = None
    deciding: bool = False
    stop: Literal["budget", "failed-first", "plan-exhausted", "early"] | None = None
    reason: Text = ""
    candidate: Num = None
    baseline: Num = None
    unit: Name = ""
    change: Num = None
    low: Num = None
    high: Num = None
    limit: Num = None
    higher_is_worse: bool = True
    trials: Count = 0
    against: Literal["baseline", "limit"] = "baseline"


class Verdict(_Model):
    outcome: Literal["Passed", "Failed", "Inconclusive", "Error"]
    reasons: Annotated[list[Text], BeforeValidator(_head(MAX_REASONS))] = []
    deciding: Count | None = None
    headline: Text | None = None
    figures: Annotated[list[Figure], BeforeValidator(_head(MAX_REASONS))] = []


class Config(_Model):
    model: Name = ""
    url: Name = ""
    baseline_url: Name | None = None
    trials: Count | None = None


class Report(Server):
    """A whole report: the candidate's figures at the top level, as ``bench`` writes it."""

    schema_: Literal["vllm-operator.dev/bench-report/v1"] = Field(alias="schema")
    config: Config = Config()
    started_unix: Num = None
    duration_seconds: Num = None
    deadline_hit: bool = False
    aborted: Text | None = None
    verdict: Verdict | None = None
    baseline: Server | None = None
    load: Load | None = None
    stated_power: list[Text] = []
    """Computed on reading (``bench.report_power``), never read from the file."""


assert REPORT_SCHEMA == "vllm-operator.dev/bench-report/v1"  # the Literal above follows it


def parse(data: object, where: str) -> Report:
    """``data`` (parsed JSON) as a report; ``ReportError`` names ``where`` and the field."""
    if isinstance(data, dict) and data.get("event") == "report":
        data = data.get("report")  # one JSON line of a benchmark Job's log
    if not isinstance(data, dict) or data.get("schema") != REPORT_SCHEMA:
        found = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise ReportError(
            where,
            f"not a benchmark report (schema {str(found)[:80]!r}, expected {REPORT_SCHEMA})",
            "give the file `vllm-operator bench --report-path` wrote, or a benchmark Job's log",
        )
    try:
        report = Report.model_validate(data)
    except ValidationError as exc:
        error = first_error(
            exc, where, fix="give a report as `vllm-operator bench --report-path` writes it"
        )
        raise ReportError(error.field, error.message, error.fix) from exc
    # what its plan could detect, from the summary's bars and the recorded plan
    return report.model_copy(update={"stated_power": power_lines(data)})


def from_bytes(raw: bytes, path: str, where: str) -> Report:
    """The report in ``raw`` (read from ``path`` with one byte past ``MAX_REPORT_BYTES``):
    a report, gzipped or not, or a Job's log ending in one, read by ``bench.report_input``
    (the reader ``judge`` uses, with the same caps)."""
    try:
        data = report_input.read_json(raw, path, where)
    except report_input.InputError as exc:
        raise ReportError(exc.field, exc.message, exc.fix) from exc
    return parse(data, where)


def loads(text: bytes, where: str) -> Report:
    """A report from a JSON document, or from JSON lines (the last ``report`` event)."""
    return from_bytes(text, "the text", where)
