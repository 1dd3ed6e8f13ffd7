"""The observed state the operator writes: phase, conditions, revisions, verdicts.

Conditions follow kstatus (Ready, Reconciling, Stalled) so Flux and Argo CD understand the
resource without a custom plug-in; GatePassed carries the gate's verdict. Everything the
operator needs to continue after a restart is here or in labels and annotations.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    Field,
    PlainSerializer,
    TypeAdapter,
    WithJsonSchema,
    model_validator,
)

from vllm_operator.api.base import APIModel
from vllm_operator.api.calibration import CalibrationStatus
from vllm_operator.api.canary import CanaryStatus
from vllm_operator.api.summary import BenchSummary, Placement, Verdict, VerdictOutcome

Phase = Literal[
    "Pending",
    "Progressing",
    "Benchmarking",
    "Promoting",
    "Canary",
    "Serving",
    "Holding",
    "Degraded",
    "Failed",
]
ConditionStatus = Literal["True", "False", "Unknown"]
ConditionType = Literal[
    "Ready",
    "Reconciling",
    "Stalled",
    "GatePassed",
    "FlagsChecked",
    "OperatorUpdatePending",
    "GatePlanDecides",
]

HISTORY_LIMIT = 10
HISTORY_FULL = 2
"""Verdicts of the history that keep their figures (``rollout/ledger.bounded``)."""
HISTORY_BYTES = 32_768
"""Most bytes of JSON the history may take in status; figures go first, oldest first."""

Decision = Literal[
    "Passed",
    "Failed",
    "Inconclusive",
    "Error",
    "PromotedByPerson",
    "AbortedByPerson",
    "ProgressDeadlineExceeded",
]


def _figures_in(value: Any) -> Any:
    """Figures as status stores them (a JSON string), or as a model or mapping."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"figures are not JSON ({exc.msg})") from exc
        except RecursionError as exc:
            raise ValueError("figures are not JSON (nested too deep)") from exc
    return value


def _figures_out(summary: BenchSummary) -> str:
    return json.dumps(summary.to_wire(), separators=(",", ":"), sort_keys=True)


def figures_text(summary: BenchSummary) -> str:
    """Figures as one line of compact JSON: what status held and the Deployment holds."""
    return _figures_out(summary)


def figures_digest(text: str) -> str:
    """The digest status keeps of figures stored elsewhere: ``sha256:`` and 64 hex digits."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


DIGEST_PATTERN = r"^sha256:[0-9a-f]{64}$"


StoredFigures = Annotated[
    BenchSummary,
    BeforeValidator(_figures_in),
    PlainSerializer(_figures_out, return_type=str, when_used="json"),
    WithJsonSchema({"type": "string"}),
]
"""A benchmark summary kept in status as one line of compact JSON, only until the revision's
Deployment holds it (``rollout/figures.py``), or in a status written before that.

The figures are the operator's memory (the stable revision's are the stored baseline), not
something to read in ``kubectl describe``: as a tree they took about 100 lines per copy,
as one string one line of 2,500-4,000 characters; on the Deployment, none. A mapping (a
status written before the one-line format) is read as well.
"""

StoredFiguresAdapter: TypeAdapter[BenchSummary] = TypeAdapter(StoredFigures)
"""Reads figures from their one line of JSON (status, or a Deployment's annotation)."""


class Condition(APIModel):
    """A kstatus-compatible condition."""

    type: ConditionType = Field(
        description="Ready, Reconciling, Stalled, GatePassed, FlagsChecked (present only when "
        "the vLLM version is newer than every recorded flag table), OperatorUpdatePending "
        "(present only when this operator renders the unchanged spec into pods that differ "
        "from the serving revision's; annotate vllm-operator.dev/roll-operator-update to roll), "
        "or GatePlanDecides (False when a tail limit of gate.thresholds.slo needs more "
        "requests than the gate's plan measures within timeoutSeconds; True, reason "
        "PowerStated, when each limited figure compared with the twin can be decided; the "
        "message states the smallest regression of each the plan detects 95% of the time)."
    )
    status: ConditionStatus = Field(description="True, False or Unknown.")
    reason: str = Field(default="", max_length=1024, description="CamelCase machine reason.")
    message: str = Field(default="", max_length=32768, description="Human-readable detail.")
    last_transition_time: str | None = Field(
        default=None, description="When the status last changed (RFC 3339)."
    )
    observed_generation: int | None = Field(
        default=None, description="The generation this condition was computed for."
    )


class RevisionSummary(APIModel):
    """One revision of the pods: what it runs and how far it got."""

    revision: str = Field(description="Short hash of what the pods run.")
    image: str = Field(description="vLLM image.")
    version: str = Field(description="vLLM version the flags were chosen for.")
    performance_mode: str = Field(description="Performance mode of the revision.")
    key_flags: list[str] = Field(
        default_factory=list, description="The flags that decide performance."
    )
    replicas: int = Field(default=0, ge=0, description="Desired replicas.")
    ready_replicas: int = Field(default=0, ge=0, description="Ready replicas.")
    benchmark: StoredFigures | None = Field(
        default=None,
        description=(
            "The figures of the benchmark that admitted it, as one line of JSON (a bench "
            "summary, docs/bench.md), only until its Deployment holds them ("
            "the vllm-operator.dev/figures annotation, figuresDigest below); absent after that."
        ),
    )
    figures_digest: str | None = Field(
        default=None,
        pattern=DIGEST_PATTERN,
        description=(
            "sha256 of the figures of the benchmark that admitted it (the stored baseline when "
            "stable), kept in the vllm-operator.dev/figures annotation of the revision's "
            "Deployment: `kubectl get deploy NAME--REVISION -o jsonpath='{.metadata.annotations."
            "vllm-operator\\.dev/figures}' | jq`. Figures there that do not match are not used."
        ),
    )
    since: str | None = Field(default=None, description="When it reached its role (RFC 3339).")


class GateRecord(Verdict):
    """One verdict on one revision, as recorded: who decided, on which figures, when."""

    revision: str = Field(description="Revision judged.")
    summary: StoredFigures | None = Field(
        default=None,
        description=(
            "The figures judged, as one line of JSON (a bench summary, docs/bench.md), only "
            "while a Passed revision's Deployment does not hold them yet; else absent (the "
            "benchmark Job's log and its report page have every figure)."
        ),
    )
    figures_digest: str | None = Field(
        default=None,
        pattern=DIGEST_PATTERN,
        description="sha256 of the figures judged, when a benchmark gave figures.",
    )
    baseline_revision: str | None = Field(
        default=None, description="Stable revision compared against, if any."
    )
    finished_at: str | None = Field(default=None, description="When (RFC 3339).")
    decided_by: Literal["gate", "person", "deadline"] = Field(
        default="gate", description="gate, a person (annotation) or the progress deadline."
    )
    attempt: int | None = Field(
        default=None, ge=1, description="The benchmark Job attempt judged (counts from 1)."
    )
    baseline_mode: Literal["twin", "stored"] | None = Field(
        default=None,
        description=(
            "twin: the baseline was a replica of the stable revision measured in the same "
            "run, both servers started for this gate; stored: the stable revision's figures "
            "from its own gate, measured earlier on another server (the reasons say so); "
            "absent: no baseline (absolute limits only), or no benchmark ran."
        ),
    )
    baseline_reason: str | None = Field(
        default=None,
        description=(
            "Why this baseline: the gate.baseline.mode that chose it and, when mode auto fell "
            "back to the stored figures, why the twin was not used (not scheduled within "
            "twinWaitSeconds, or not Ready within the progress deadline, with its pods' cause)."
        ),
    )
    candidate_placement: Placement | None = Field(
        default=None,
        description=(
            "Where the candidate ran: node and GPU product as the operator read them from the "
            "cluster, vLLM version as the benchmark saw it."
        ),
    )
    baseline_placement: Placement | None = Field(
        default=None, description="Where the baseline (the twin) ran, in twin mode."
    )
    decision: Decision | None = Field(
        default=None,
        description=(
            "The outcome with who decided it, as the GATE column shows it: the outcome when "
            "the gate decided, PromotedByPerson / AbortedByPerson for the promote / abort "
            "annotations, ProgressDeadlineExceeded for the deadline. Derived, never set."
        ),
    )

    def key(self) -> tuple[object, ...]:
        """What tells one verdict from another: revision, attempt, outcome, who, when."""
        return (self.revision, self.attempt, self.outcome, self.decided_by, self.finished_at)

    def judge(self) -> Literal["gate", "canary", "person", "deadline"]:
        """Who gave this verdict, as people name it: the benchmark gate, the canary on live
        traffic (a record with no figures whose first reason is a canary step's), a person
        or the progress deadline."""
        if self.decided_by != "gate":
            return self.decided_by
        canary = (
            self.summary is None
            and self.figures_digest is None
            and self.reasons[:1] != []
            and (self.reasons[0].startswith("canary step"))
        )
        return "canary" if canary else "gate"

    @model_validator(mode="before")
    @classmethod
    def _derive_decision(cls, data: Any) -> Any:
        """``decision`` follows ``outcome`` and ``decidedBy``, whatever a writer passed."""
        if not isinstance(data, Mapping):
            return data
        out = dict(data)
        outcome = out.get("outcome")
        by = out.get("decidedBy", out.get("decided_by", "gate"))
        out.pop("decision", None)
        if by == "person":
            out["decision"] = "PromotedByPerson" if outcome == "Passed" else "AbortedByPerson"
        elif by == "deadline":
            out["decision"] = "ProgressDeadlineExceeded"
        elif isinstance(outcome, str):
            out["decision"] = outcome
        return out


_OLD_RECORD_ONLY = frozenset(
    {
        "reasons",
        "deciding",
        "headline",
        "decision",
        "baselineRevision",
        "baseline_revision",
        "baselineMode",
        "baseline_mode",
        "baselineReason",
        "baseline_reason",
        "candidatePlacement",
        "candidate_placement",
        "baselinePlacement",
        "baseline_placement",
    }
)
"""Fields of a history entry as statuses before issue 42 stored it (a whole GateRecord)."""


class HistoryEntry(APIModel):
    """One past verdict as ``status.history`` keeps it: what the operator reads back after a
    restart (which revision, its outcome, who decided, the attempt, when, the digest of its
    figures) and the verdict in one line for people (``lastGate`` has the newest in full)."""

    revision: str = Field(description="Revision judged.")
    outcome: VerdictOutcome = Field(description="Passed, Failed, Inconclusive or Error.")
    decided_by: Literal["person", "deadline"] | None = Field(
        default=None,
        description="person (annotation) or deadline (the progress deadline); absent: the gate.",
    )
    attempt: int | None = Field(
        default=None, ge=1, description="The benchmark Job attempt judged (counts from 1)."
    )
    finished_at: str | None = Field(default=None, description="When (RFC 3339).")
    figures_digest: str | None = Field(
        default=None,
        pattern=DIGEST_PATTERN,
        description="sha256 of the figures judged, when a benchmark gave figures.",
    )
    summary: StoredFigures | None = Field(
        default=None,
        description=(
            "The figures judged, as one line of JSON (a bench summary, docs/bench.md), only "
            "while a Passed revision's Deployment does not hold them yet; else absent."
        ),
    )
    verdict: str = Field(
        default="",
        max_length=1024,
        description="The verdict in one line: its headline, else its first reason and how "
        "many more.",
    )

    @model_validator(mode="before")
    @classmethod
    def _from_older_status(cls, data: Any) -> Any:
        """A whole GateRecord (a status written before issue 42, or a record given in
        code) read as its entry."""
        if isinstance(data, GateRecord):
            data = {**data.model_dump(exclude_none=True), "verdict": data.line()[:1024]}
        if not isinstance(data, Mapping):
            return data
        out = {k: v for k, v in data.items() if k not in _OLD_RECORD_ONLY}
        reasons = data.get("reasons")
        if "verdict" not in out and isinstance(reasons, list) and reasons:
            out["verdict"] = str(data.get("headline") or reasons[0])[:1024]
        for key in ("decidedBy", "decided_by"):
            if out.get(key) == "gate":
                del out[key]
        return out

    @classmethod
    def of(cls, record: GateRecord) -> HistoryEntry:
        """``record`` as the history keeps it (its reasons already cut to one line)."""
        return cls(
            revision=record.revision,
            outcome=record.outcome,
            decided_by=None if record.decided_by == "gate" else record.decided_by,
            attempt=record.attempt,
            finished_at=record.finished_at,
            figures_digest=record.figures_digest,
            summary=record.summary,
            verdict=record.line()[:1024],
        )

    def record(self) -> GateRecord:
        """The entry as a verdict record: its one line as its only reason."""
        return GateRecord(
            revision=self.revision,
            outcome=self.outcome,
            decided_by=self.decided_by or "gate",
            attempt=self.attempt,
            finished_at=self.finished_at,
            figures_digest=self.figures_digest,
            summary=self.summary,
            reasons=[self.verdict] if self.verdict else [],
        )


class VLLMDeploymentStatus(APIModel):
    """Observed state of a VLLMDeployment."""

    observed_generation: int | None = Field(
        default=None, description="The spec generation this status describes."
    )
    phase: Phase = Field(default="Pending", description="Where the rollout is.")
    message: str = Field(default="", max_length=32768, description="One-line summary.")
    conditions: list[Condition] = Field(default_factory=list, description="kstatus conditions.")
    stable: RevisionSummary | None = Field(
        default=None, description="The revision the serving Service selects."
    )
    candidate: RevisionSummary | None = Field(
        default=None, description="The revision being started or benchmarked."
    )
    last_gate: GateRecord | None = Field(
        default=None,
        description=(
            "The newest verdict in full: its headline, its reasons (the deciding ones first "
            "and in full, the others a few words each), where each side ran and why this "
            "baseline. history[0] is the same verdict in one line, with its figures."
        ),
    )
    history: list[HistoryEntry] = Field(
        default_factory=list,
        max_length=HISTORY_LIMIT,
        description=(
            f"The last {HISTORY_LIMIT} verdicts, newest first: revision, outcome, decidedBy "
            "(absent: the gate), attempt, when, the digest of its figures and the verdict in "
            "one line (lastGate has the newest in full), what the operator reads back after a "
            "restart (a rejected revision stays rejected). A Passed verdict keeps its figures "
            "(summary, one line of JSON) only until its revision's Deployment holds them. At "
            f"most {HISTORY_BYTES} bytes: figures are dropped first, oldest first. Every figure "
            "and request of a run is in the benchmark Job's log (kubectl logs "
            "job/<name>--gate-<revision>-<attempt>) until the verdict is recorded and the "
            "Job deleted, and on the report page `vllm-operator report` makes of it; the "
            "verdict's Event carries its reasons."
        ),
    )
    warnings: list[str] = Field(
        default_factory=list, description="Engine policy warnings for the current spec."
    )
    canary: CanaryStatus | None = Field(
        default=None,
        description="The live canary of the candidate (rollout.canary), while it runs.",
    )
    calibration: CalibrationStatus | None = Field(
        default=None,
        description="The last in-cluster calibration (annotation vllm-operator.dev/calibrate).",
    )

    @model_validator(mode="before")
    @classmethod
    def _last_gate_is_newest(cls, data: Any) -> Any:
        """``lastGate`` is the verdict of ``history[0]``, whatever a writer passed: the one
        given when it is that verdict (kept in full), else ``history[0]`` itself."""
        if not isinstance(data, Mapping):
            return data
        given = data.get("lastGate", data.get("last_gate"))
        out = {k: v for k, v in data.items() if k not in ("lastGate", "last_gate")}
        history = out.get("history")
        if isinstance(history, list | tuple) and history:
            newest = history[0]
            same = given is not None and _identity(given) == _identity(newest)
            chosen = given if same else _as_record(newest)
            if isinstance(chosen, GateRecord):
                chosen = chosen.model_dump()
            if isinstance(chosen, Mapping):
                chosen = {k: v for k, v in chosen.items() if k != "summary"}
            out["last_gate"] = chosen
        return out


def _as_record(entry: object) -> object:
    """A history entry (as a model or as stored) as the verdict record ``lastGate`` holds."""
    if isinstance(entry, Mapping):
        entry = HistoryEntry.model_validate(entry)
    return entry.record() if isinstance(entry, HistoryEntry) else entry


def _identity(record: object) -> tuple[object, ...] | None:
    """What tells one verdict from another: revision, attempt, outcome, who, when."""
    if isinstance(record, HistoryEntry):
        record = record.record()
    if isinstance(record, GateRecord):
        return record.key()
    if not isinstance(record, Mapping):
        return None

    def get(camel: str, snake: str, default: object = None) -> object:
        return record.get(camel, record.get(snake, default))

    return (
        record.get("revision"),
        record.get("attempt"),
        record.get("outcome"),
        get("decidedBy", "decided_by", "gate"),
        get("finishedAt", "finished_at"),
    )
