"""Every Event reason and condition reason the operator writes, with what each means.

Reasons are API: people filter Events on them (``kubectl get events --field-selector
reason=GateFailed``), GitOps health checks and alerts match condition reasons. So they are
spelled once, here; the code takes these members (mypy refuses a bare string where a reason
is expected), and the tables in docs/rollout.md (built from ``EVENT_MEANINGS`` and
``CONDITION_MEANINGS``) are checked against this module by
``tests/unit/api/test_reasons.py``. A new reason is a member here, a line in its
meanings table and a row in the doc.
"""

from __future__ import annotations

from enum import StrEnum


class EventReason(StrEnum):
    """Reason of a Kubernetes Event on a VLLMDeployment."""

    CandidateCreated = "CandidateCreated"
    BenchmarkStarted = "BenchmarkStarted"
    BenchmarkProgress = "BenchmarkProgress"
    GatePassed = "GatePassed"
    GateFailed = "GateFailed"
    GateError = "GateError"
    GateInconclusive = "GateInconclusive"
    GateRerun = "GateRerun"
    GateHolding = "GateHolding"
    CandidateStuck = "CandidateStuck"
    Promoting = "Promoting"
    Promoted = "Promoted"
    RevisionRetired = "RevisionRetired"
    CandidateRemoved = "CandidateRemoved"
    CandidateAbandoned = "CandidateAbandoned"
    BenchmarkAbandoned = "BenchmarkAbandoned"
    StableRecreated = "StableRecreated"
    ForcedPromotion = "ForcedPromotion"
    Aborted = "Aborted"
    RequestIgnored = "RequestIgnored"
    AnnotationIgnored = "AnnotationIgnored"
    TwinCreated = "TwinCreated"
    TwinRemoved = "TwinRemoved"
    TwinStuck = "TwinStuck"
    TwinUnavailable = "TwinUnavailable"
    CalibrationStarted = "CalibrationStarted"
    CalibrationDone = "CalibrationDone"
    CalibrationAbandoned = "CalibrationAbandoned"
    CalibrationInvalid = "CalibrationInvalid"
    InvalidSpec = "InvalidSpec"
    MultiNodeUnavailable = "MultiNodeUnavailable"
    EngineWarning = "EngineWarning"
    FlagsCheckedAgainstOlderRelease = "FlagsCheckedAgainstOlderRelease"
    NameConflict = "NameConflict"
    ApplyFailed = "ApplyFailed"
    AutoscalerCreated = "AutoscalerCreated"
    AutoscalerMoved = "AutoscalerMoved"
    AutoscalerRemoved = "AutoscalerRemoved"
    OperatorUpdatePending = "OperatorUpdatePending"
    OperatorUpdateRolling = "OperatorUpdateRolling"
    GatePlanTooShort = "GatePlanTooShort"
    CanaryStepStarted = "CanaryStepStarted"
    CanaryStepPassed = "CanaryStepPassed"
    CanaryStepExtended = "CanaryStepExtended"
    CanaryFailed = "CanaryFailed"
    CanaryInconclusive = "CanaryInconclusive"
    CanaryPassed = "CanaryPassed"
    CanaryScrapeFailed = "CanaryScrapeFailed"
    TrafficRestored = "TrafficRestored"


class ConditionReason(StrEnum):
    """Reason of a condition (Ready, Reconciling, Stalled, GatePassed, FlagsChecked, ...)."""

    # Ready (and Reconciling/Stalled while True): where the rollout stands.
    Serving = "Serving"
    Scaling = "Scaling"
    StableMissing = "StableMissing"
    CandidateStarting = "CandidateStarting"
    TwinStarting = "TwinStarting"
    Benchmarking = "Benchmarking"
    GatePassed = "GatePassed"
    GateFailed = "GateFailed"
    GateError = "GateError"
    GateInconclusive = "GateInconclusive"
    GateDisabled = "GateDisabled"
    Promoting = "Promoting"
    Canary = "Canary"
    CandidateRejected = "CandidateRejected"
    ProgressDeadlineExceeded = "ProgressDeadlineExceeded"
    InvalidSpec = "InvalidSpec"
    MultiNodeUnavailable = "MultiNodeUnavailable"
    NameConflict = "NameConflict"
    # GatePassed: the decision on the spec's revision.
    AwaitingVerdict = "AwaitingVerdict"
    Passed = "Passed"
    Failed = "Failed"
    Inconclusive = "Inconclusive"
    Error = "Error"
    PromotedByPerson = "PromotedByPerson"
    AbortedByPerson = "AbortedByPerson"
    # FlagsChecked.
    NearestOlderRelease = "NearestOlderRelease"
    # OperatorUpdatePending (rollout/upgrade.py).
    TemplateChanged = "TemplateChanged"
    SpecDigestUnknown = "SpecDigestUnknown"
    RollRequested = "RollRequested"
    # GatePlanDecides (rollout/gate_plan.py).
    TooFewObservations = "TooFewObservations"
    PowerStated = "PowerStated"


# Two tables, not one: a StrEnum member equals its string, so EventReason.GatePassed and
# ConditionReason.GatePassed would be one key.
EVENT_MEANINGS: dict[EventReason, str] = {
    EventReason.CandidateCreated: "a candidate revision's Deployment was created",
    EventReason.BenchmarkStarted: "the benchmark Job of a gate attempt was created",
    EventReason.BenchmarkProgress: (
        "where a running benchmark is, once per stage (settling, the trials of the first "
        "look, each further trial, quality), read at most every 30 s; on the benchmark Job"
    ),
    EventReason.GatePassed: "the gate passed the candidate",
    EventReason.GateFailed: "the gate failed the candidate (a limit or a regression)",
    EventReason.GateError: "the benchmark could not measure, or its end was not trusted",
    EventReason.GateInconclusive: "measured, but the figures cannot tell",
    EventReason.GateRerun: "a new gate attempt runs (rerun-gate or onInconclusive: rerun)",
    EventReason.GateHolding: "inconclusive and held: a person decides (the message says how)",
    EventReason.CandidateStuck: "the candidate was not Ready within the progress deadline",
    EventReason.Promoting: "the promoted revision is scaled to spec.replicas",
    EventReason.Promoted: "the serving Service now selects the promoted revision",
    EventReason.RevisionRetired: "the previous stable revision's Deployment was deleted",
    EventReason.CandidateRemoved: "a rejected candidate's Deployment was deleted",
    EventReason.CandidateAbandoned: "a candidate the spec no longer wants was deleted",
    EventReason.BenchmarkAbandoned: "an unfinished benchmark Job was deleted",
    EventReason.StableRecreated: "the stable revision had no Deployment: it was recreated",
    EventReason.ForcedPromotion: "a person promoted the candidate (annotation promote)",
    EventReason.Aborted: "a person rejected the candidate (annotation abort)",
    EventReason.RequestIgnored: "a promote/abort/rerun-gate annotation names no candidate",
    EventReason.AnnotationIgnored: (
        "the operator's own bookkeeping annotation was damaged: treated as absent, rewritten"
    ),
    EventReason.TwinCreated: "a zero-traffic twin of the stable revision was created",
    EventReason.TwinRemoved: "the twin was deleted after the verdict",
    EventReason.TwinStuck: "the twin was not Ready within the progress deadline",
    EventReason.TwinUnavailable: "no twin in time: mode auto's gate uses the stored baseline; "
    "a calibration is abandoned",
    EventReason.CalibrationStarted: "annotation calibrate: A/A Jobs of the stable revision begin",
    EventReason.CalibrationDone: "the calibration's floors and plan are in status.calibration",
    EventReason.CalibrationAbandoned: "the calibration stopped (spec changed, a rollout, a Job)",
    EventReason.CalibrationInvalid: "the calibrate annotation's value is not a run count",
    EventReason.InvalidSpec: "the spec cannot be run; every field and fix is named",
    EventReason.MultiNodeUnavailable: "a multi-node spec where this operator runs no "
    "LeaderWorkerSets; the fix is named",
    EventReason.EngineWarning: "the engine policy warns about the spec",
    EventReason.FlagsCheckedAgainstOlderRelease: (
        "extra args were checked against an older release's recorded parser"
    ),
    EventReason.NameConflict: "a child's name is held by an object this resource does not own",
    EventReason.ApplyFailed: "the API refused an action of the plan (it is retried)",
    EventReason.AutoscalerCreated: "the serving revision's autoscaler was created",
    EventReason.AutoscalerMoved: "the autoscaler now targets the promoted revision",
    EventReason.AutoscalerRemoved: "an autoscaler the spec no longer asks for was deleted",
    EventReason.OperatorUpdatePending: "this operator renders the unchanged spec differently",
    EventReason.OperatorUpdateRolling: "a person asked to gate and roll the operator update",
    EventReason.GatePlanTooShort: "a tail limit needs more requests than the gate's plan measures",
    EventReason.CanaryStepStarted: "a canary step's share of live traffic is in place",
    EventReason.CanaryStepPassed: "a canary step's figures were within their limits",
    EventReason.CanaryStepExtended: "a canary step had too few requests or undecided figures",
    EventReason.CanaryFailed: "a canary step failed a figure: traffic back to stable",
    EventReason.CanaryInconclusive: "a canary step stayed undecided past maxExtensions",
    EventReason.CanaryPassed: "every canary step passed: the candidate is promoted",
    EventReason.CanaryScrapeFailed: "a pod's /metrics could not be read for a canary step",
    EventReason.TrafficRestored: "the serving traffic went back to the stable revision only",
}

CONDITION_MEANINGS: dict[ConditionReason, str] = {
    ConditionReason.Serving: "the spec's revision serves with all its replicas",
    ConditionReason.Scaling: "the serving revision is being scaled",
    ConditionReason.StableMissing: "the stable revision's Deployment is being recreated",
    ConditionReason.CandidateStarting: "the candidate is starting",
    ConditionReason.TwinStarting: "the twin of the stable revision is starting",
    ConditionReason.Benchmarking: "the benchmark Job runs",
    ConditionReason.GatePassed: "the verdict was just recorded: Passed",
    ConditionReason.GateFailed: "the verdict was just recorded: Failed",
    ConditionReason.GateError: "the verdict was just recorded: Error",
    ConditionReason.GateInconclusive: "inconclusive; holding (or just recorded)",
    ConditionReason.GateDisabled: "gate.enabled is false: promoted once Ready",
    ConditionReason.Promoting: "traffic moves to the promoted revision",
    ConditionReason.Canary: "a canary step: the candidate serves a share of live traffic",
    ConditionReason.CandidateRejected: "the candidate was rejected; the stable one serves",
    ConditionReason.ProgressDeadlineExceeded: "a candidate or twin was stuck past the deadline",
    ConditionReason.InvalidSpec: "the spec cannot be run (Stalled)",
    ConditionReason.MultiNodeUnavailable: "spec.resources.nodes > 1 without LeaderWorkerSet "
    "(Stalled)",
    ConditionReason.NameConflict: "a child's name is held by another object (Stalled)",
    ConditionReason.AwaitingVerdict: "GatePassed=Unknown: no verdict on the spec's revision yet",
    ConditionReason.Passed: "GatePassed=True: the gate passed the spec's revision",
    ConditionReason.Failed: "GatePassed=False: the gate failed it",
    ConditionReason.Inconclusive: "GatePassed=False: the gate could not tell",
    ConditionReason.Error: "GatePassed=False: the benchmark could not measure",
    ConditionReason.PromotedByPerson: "GatePassed=True: a person promoted it",
    ConditionReason.AbortedByPerson: "GatePassed=False: a person aborted it",
    ConditionReason.NearestOlderRelease: "FlagsChecked=False: flags checked with an older parser",
    ConditionReason.TemplateChanged: "OperatorUpdatePending=True: new template, same spec",
    ConditionReason.SpecDigestUnknown: "OperatorUpdatePending=True: the stable records no digest",
    ConditionReason.RollRequested: "OperatorUpdatePending=True: the update is being gated",
    ConditionReason.TooFewObservations: "GatePlanDecides=False: a tail limit cannot be decided",
    ConditionReason.PowerStated: "GatePlanDecides=True: the plan's power, figure by figure",
}
