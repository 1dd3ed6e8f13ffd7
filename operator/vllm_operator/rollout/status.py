"""From a phase to the status people and GitOps tools read: conditions, revisions, history.

Conditions follow kstatus: ``Reconciling=True`` while the operator works towards the spec,
``Stalled=True`` when it cannot get there without a person (a rejected revision, an invalid
spec, an inconclusive gate on hold), each absent otherwise (kstatus reads an absent one as
False), ``Ready=True`` only when the spec's revision serves with all its replicas.
``GatePassed`` carries the verdict on the spec's revision. A condition keeps its
``lastTransitionTime`` while its status does not change, so repeated reconciles do not churn
the resource.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from vllm_operator.api.launch import LaunchRecord
from vllm_operator.api.reasons import ConditionReason
from vllm_operator.api.status import (
    Condition,
    ConditionStatus,
    ConditionType,
    GateRecord,
    HistoryEntry,
    Phase,
    RevisionSummary,
    VLLMDeploymentStatus,
)
from vllm_operator.api.summary import BenchSummary
from vllm_operator.api.text import clip
from vllm_operator.render import labels
from vllm_operator.rollout.ledger import bounded, second_timestamp
from vllm_operator.rollout.views import DeploymentView

WORKING: frozenset[str] = frozenset(
    {"Pending", "Progressing", "Benchmarking", "Canary", "Promoting"}
)
NEEDS_PERSON: frozenset[str] = frozenset({"Holding", "Degraded", "Failed"})


def previous_status(raw: object) -> VLLMDeploymentStatus:
    """The status as stored, tolerating fields written by others (kopf) or older versions."""
    if not isinstance(raw, Mapping):
        return VLLMDeploymentStatus()
    known = set(VLLMDeploymentStatus.model_fields) | {
        f.alias for f in VLLMDeploymentStatus.model_fields.values() if f.alias
    }
    try:
        return VLLMDeploymentStatus.model_validate({k: v for k, v in raw.items() if k in known})
    except ValidationError:
        history = raw.get("history")
        # Keep the verdict history even if something else in the status is damaged: it is
        # what prevents a rejected revision from being tried again.
        try:
            return VLLMDeploymentStatus.model_validate({"history": history or []})
        except ValidationError:
            return VLLMDeploymentStatus()


@dataclass(frozen=True)
class Outcome:
    """Where the rollout stands after this pass, in a few words."""

    phase: Phase
    message: str
    reason: ConditionReason  # of Ready (and of Reconciling/Stalled when True)


def summarise(
    dep: DeploymentView | None,
    revision: str,
    *,
    fallback: LaunchRecord | None = None,
    benchmark: BenchSummary | None = None,
    previous: RevisionSummary | None = None,
    now: datetime,
) -> RevisionSummary:
    """A revision's summary from its Deployment's launch record (the launch-plan
    annotation), else ``fallback`` (this pass's plan, when it is the spec's revision)."""
    launch = dep.launch if dep is not None and dep.launch is not None else fallback
    image = (launch.image if launch is not None else "") or (dep.image if dep else None) or ""
    since = previous.since if previous is not None and previous.revision == revision else None
    return RevisionSummary(
        revision=revision,
        image=image,
        version=launch.version if launch is not None else "",
        performance_mode=launch.performance_mode if launch is not None else "",
        key_flags=list(launch.key_flags) if launch is not None else [],
        replicas=dep.replicas if dep is not None else 0,
        ready_replicas=dep.ready_replicas if dep is not None else 0,
        benchmark=benchmark,
        since=since or second_timestamp(now),
    )


def _condition(
    previous: Sequence[Condition],
    kind: ConditionType,
    status: ConditionStatus,
    reason: ConditionReason,
    message: str,
    *,
    generation: int | None,
    now: datetime,
) -> Condition:
    before = next((c for c in previous if c.type == kind), None)
    since = second_timestamp(now)
    if before is not None and before.status == status and before.last_transition_time:
        since = before.last_transition_time
    return Condition(
        type=kind,
        status=status,
        reason=reason,
        message=message,
        last_transition_time=since,
        observed_generation=generation,
    )


def gate_condition(
    decided: GateRecord | None, gate_enabled: bool
) -> tuple[ConditionStatus, ConditionReason]:
    """GatePassed from the decision on the spec's revision."""
    if decided is None:
        return (
            "Unknown",
            ConditionReason.AwaitingVerdict if gate_enabled else ConditionReason.GateDisabled,
        )
    if decided.outcome == "Passed":
        if decided.decided_by == "person":
            return "True", ConditionReason.PromotedByPerson
        return "True", ConditionReason.Passed if gate_enabled else ConditionReason.GateDisabled
    if decided.decided_by == "person":
        return "False", ConditionReason.AbortedByPerson
    if decided.decided_by == "deadline":
        return "False", ConditionReason.ProgressDeadlineExceeded
    return "False", ConditionReason(decided.outcome)


def build_status(
    previous: VLLMDeploymentStatus,
    outcome: Outcome,
    *,
    generation: int | None,
    now: datetime,
    stable: RevisionSummary | None,
    candidate: RevisionSummary | None,
    history: Sequence[GateRecord],
    warnings: Sequence[str],
    gate: tuple[ConditionStatus, ConditionReason, str],
    flags_note: str = "",
    operator_update: tuple[ConditionReason, str] | None = None,
    gate_plan_note: str = "",
    gate_plan_power: str = "",
) -> VLLMDeploymentStatus:
    """The full status for ``outcome``; conditions keep their transition times.

    ``flags_note``: set when the extra args were checked against an older release's
    recorded parser (the version is newer than the data); it becomes a FlagsChecked
    condition (status False, reason NearestOlderRelease). ``operator_update``: (reason,
    message) of an OperatorUpdatePending condition (status True, ``rollout/upgrade.py``).
    ``gate_plan_note``: set when the gate's plan cannot decide a tail limit in its time
    (``rollout/gate_plan.py``); it becomes a GatePlanDecides condition (status False, reason
    TooFewObservations). ``gate_plan_power``: the plan's stated power (``gate.power``); it
    follows the note in that condition's message, or alone makes it True (PowerStated).
    """
    phase = outcome.phase
    ready: ConditionStatus = "True" if phase == "Serving" else "False"
    ready_message = outcome.message
    if phase == "Degraded" and outcome.reason == ConditionReason.CandidateRejected:
        ready_message = READY_WHILE_REJECTED
    # kstatus reads an absent Reconciling or Stalled as False: present only while True, so
    # describe shows no idle condition (issue 42), and the list a pass writes replaces the
    # stored one whole (``merge_patch``), so one that turns False disappears.
    working = phase in WORKING
    stalled = phase in NEEDS_PERSON
    prev = previous.conditions
    gate_status, gate_reason, gate_message = gate
    conditions = [
        _condition(
            prev, "Ready", ready, outcome.reason, ready_message, generation=generation, now=now
        ),
        *(
            [
                _condition(
                    prev,
                    "Reconciling",
                    "True",
                    outcome.reason,
                    outcome.message,
                    generation=generation,
                    now=now,
                )
            ]
            if working
            else []
        ),
        *(
            [
                _condition(
                    prev,
                    "Stalled",
                    "True",
                    outcome.reason,
                    outcome.message,
                    generation=generation,
                    now=now,
                )
            ]
            if stalled
            else []
        ),
        _condition(
            prev,
            "GatePassed",
            gate_status,
            gate_reason,
            gate_message,
            generation=generation,
            now=now,
        ),
    ]
    if flags_note:
        conditions.append(
            _condition(
                prev,
                "FlagsChecked",
                "False",
                ConditionReason.NearestOlderRelease,
                flags_note,
                generation=generation,
                now=now,
            )
        )
    if operator_update is not None:
        conditions.append(
            _condition(
                prev,
                "OperatorUpdatePending",
                "True",
                *operator_update,
                generation=generation,
                now=now,
            )
        )
    if gate_plan_note or gate_plan_power:
        conditions.append(
            _condition(
                prev,
                "GatePlanDecides",
                "False" if gate_plan_note else "True",
                ConditionReason.TooFewObservations
                if gate_plan_note
                else ConditionReason.PowerStated,
                "; ".join(text for text in (gate_plan_note, gate_plan_power) if text),
                generation=generation,
                now=now,
            )
        )
    return VLLMDeploymentStatus(
        observed_generation=generation,
        phase=phase,
        message=outcome.message,
        conditions=conditions,
        stable=stable,
        candidate=candidate,
        last_gate=_newest_in_full(previous, history),
        history=[HistoryEntry.of(_one_line(entry)) for entry in bounded(history)],
        warnings=list(warnings),
    )


READY_WHILE_REJECTED = (
    "the spec's revision was rejected (Stalled says why) while the stable one serves "
    "(status.stable): Ready is False until the spec changes (kstatus Failed, Argo CD Degraded)"
)
"""Ready's message in Degraded: why Ready is False while users are served (issue 42)."""

REASON_CHARS = 190
"""Longest line of a history entry, and of a canary figure that decided nothing: describe
prints each on a line of its own after 6 spaces. ``lastGate``'s other reasons stay whole."""


def _one_line(gate: GateRecord) -> GateRecord:
    """A history entry with its line cut to ``REASON_CHARS`` (a no-op on one already cut)."""
    kept = [clip(r, REASON_CHARS) for r in gate.reasons]
    return gate if kept == gate.reasons else gate.model_copy(update={"reasons": kept})


def _newest_in_full(
    previous: VLLMDeploymentStatus, history: Sequence[GateRecord]
) -> GateRecord | None:
    """The newest verdict with every reason and placement: as recorded when this pass
    recorded it, else as the last status kept it (its history entry is one line)."""
    if not history:
        return None
    newest, kept = history[0], previous.last_gate
    same = kept is not None and kept.key() == newest.key()
    return kept if same else newest


VERDICT_CHARS = 600
"""Longest verdict annotation: a few lines, each shorter than ``kubectl describe`` cuts."""

LINE_CHARS = 130
"""``kubectl describe`` prints each line of a long annotation, cut at 138 characters."""

DONE = {"Failed": "rejected", "Error": "rejected", "Inconclusive": "undecided"}
"""What a verdict's outcome did to its revision, in words (Passed: see ``_verdict_head``)."""


def _verdict_head(status: VLLMDeploymentStatus, gate: GateRecord) -> str:
    """The verdict's first line: revision, what happened to it, which judge, the decision."""
    stable = status.stable
    if gate.outcome == "Passed":
        done = "promoted" if stable is not None and stable.revision == gate.revision else "passed"
    else:
        done = DONE.get(gate.outcome, gate.outcome)
    judge = {"gate": "its gate", "canary": "its canary", "person": "a person"}
    who = judge.get(gate.judge(), "its progress deadline")
    return f"revision {gate.revision} {done} by {who} ({gate.decision or gate.outcome}):"


def verdict_annotation(
    status: VLLMDeploymentStatus, current: Mapping[str, str]
) -> dict[str, str | None]:
    """The verdict annotation to write for ``status``: which revision serves, the newest
    verdict (revision, what happened to it, which judge) and what decided it, the deciding
    figure first; nothing before any verdict, nor when ``current`` (the resource's
    annotations) already says it.

    ``kubectl describe`` sorts what it prints and puts the spec before the status, so on a
    resource with a spec of some size the status's verdict is 50 lines down; annotations
    come before both, the way a Deployment's ``deployment.kubernetes.io/revision`` does.
    A value over 140 characters is printed one line per line of the value, each cut at 138:
    so the answer comes as a few short lines, all shown, in the first lines of describe.
    """
    gate = status.last_gate
    if gate is None:
        return {}
    stable = status.stable
    serves = (
        ""
        if stable is None
        else f"stable revision {stable.revision} serves "
        f"({stable.ready_replicas}/{stable.replicas} Ready); "
    )
    lines = [serves + _verdict_head(status, gate)]
    lines += [
        "  " + part
        for part in textwrap.wrap(gate.line(), LINE_CHARS - 2, break_long_words=True)[:4]
    ]
    candidate = status.candidate
    if candidate is not None and candidate.revision != gate.revision:
        lines.append(f"candidate revision {candidate.revision} in progress")
    text = "\n".join(lines)
    if len(text) > VERDICT_CHARS:
        text = text[: VERDICT_CHARS - 3] + "..."
    if current.get(labels.VERDICT_ANNOTATION) == text:
        return {}
    return {labels.VERDICT_ANNOTATION: text}


def merge_patch(old: Any, new: Any) -> Any:
    """The RFC 7386 merge patch turning ``old`` into ``new`` (None when they are equal).

    Removed keys become ``null``; lists are replaced whole. Used for the status: sending
    only the difference keeps writes small and makes "nothing changed" a skipped write.
    """
    if not isinstance(old, dict) or not isinstance(new, dict):
        return None if old == new else new
    patch: dict[str, Any] = {}
    for key in old.keys() - new.keys():
        patch[key] = None
    for key, value in new.items():
        if key not in old:
            patch[key] = value
            continue
        sub = merge_patch(old[key], value)
        if sub is not None or (value is None and old[key] is not None):
            patch[key] = sub
    return patch or None
