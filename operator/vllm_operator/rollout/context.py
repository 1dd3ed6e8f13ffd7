"""The shared state of one planning pass, and the operator settings the planner needs.

``Pass`` collects what the steps decide (actions, events, new verdicts, when to look
again) so each step stays a small function; it lives only for one call of ``plan``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from vllm_operator import __version__
from vllm_operator.api.calibration import CalibrationStatus
from vllm_operator.api.launch import LaunchRecord
from vllm_operator.api.reasons import ConditionReason, EventReason
from vllm_operator.api.resource import API_VERSION, KIND
from vllm_operator.api.status import (
    ConditionStatus,
    GateRecord,
    RevisionSummary,
    VLLMDeploymentStatus,
)
from vllm_operator.api.summary import BenchSummary
from vllm_operator.render import labels
from vllm_operator.render.job import TTL_SECONDS_AFTER_FINISHED
from vllm_operator.rollout import figures, ledger
from vllm_operator.rollout.actions import Action, Create, Delete, Event, EventType, JobRef, Kind
from vllm_operator.rollout.observed import Observed
from vllm_operator.rollout.status import Outcome, build_status, previous_status, summarise

# The benchmark client is versioned with the operator that reads its summary: by default the
# operator's own image, at its own version (the chart passes the image it runs).
DEFAULT_BENCH_IMAGE = f"ghcr.io/vllm-operator/vllm-operator:{__version__}"


@dataclass(frozen=True)
class Settings:
    """Operator-wide settings the planner needs, and the one owner of their defaults.

    ``config.OperatorConfig`` extends this with the shell's own settings and reads every
    field from ``vllm-operator run``'s options; the reconciler passes it to the planner as is.
    """

    bench_image: str = DEFAULT_BENCH_IMAGE
    # Multiplies every deadline (progress, Job start); < 1 only for demos and tests.
    deadline_scale: float = 1.0
    # How long a benchmark pod may stay unschedulable or in image-pull back-off.
    job_start_seconds: float = 300.0
    job_env: tuple[tuple[str, str], ...] = ()
    job_ttl_seconds: int = TTL_SECONDS_AFTER_FINISHED
    # Patterns "<namespace>/<secret>" a VLLMDeployment may reference; None: any (references.py).
    allowed_secrets: tuple[str, ...] | None = None
    # Autoscaler kinds this operator may manage ("hpa", "keda"): what its RBAC grants.
    autoscaling_engines: tuple[str, ...] = ("hpa",)
    # LeaderWorkerSet is installed and granted: multi-node revisions roll out as groups.
    multi_node: bool = False


@dataclass
class Pass:
    """The mutable scratch state of one planning pass (never outlives ``plan``)."""

    observed: Observed
    now: datetime
    settings: Settings
    previous: VLLMDeploymentStatus
    history: list[GateRecord]
    handled: ledger.Handled
    actions: list[Action] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    verdicts: list[GateRecord] = field(default_factory=list)
    requeue: list[float] = field(default_factory=list)
    handled_changed: bool = False
    # The stable revision whose twin this pass keeps (twin-mode gate under way), else None.
    twin: str | None = None
    # The revision the serving Service selects once this pass's actions are applied (the
    # autoscaler and the disruption budget follow it); set by the planner and promotion.
    serving: str | None = None
    # A canary keeps live traffic on the candidate after this pass (rollout/canary/phase.py); when
    # False, a serving Service still shared with a candidate goes back to the stable.
    canary_traffic: bool = False
    # The canary's status for this pass (api.canary.CanaryStatus), set by rollout/canary/phase.py.
    canary_status: Any = None
    # status.calibration as this pass leaves it (rollout/calibration.py); starts as it was.
    calibration: CalibrationStatus | None = None

    @classmethod
    def begin(cls, observed: Observed, now: datetime, settings: Settings | None) -> Pass:
        """A pass over ``observed``, starting from the status and ledger it carries."""
        previous = previous_status(observed.body.get("status"))
        handled, problems = ledger.check_handled(observed.annotations)
        state = cls(
            observed=observed,
            now=now,
            settings=settings or Settings(),
            previous=previous,
            history=[entry.record() for entry in previous.history],
            handled=handled,
            calibration=previous.calibration,
        )
        if problems:
            # Rewritten at the end of this pass, so the Event is said once, not every pass.
            state.handled_changed = True
            state.event(
                "Warning",
                EventReason.AnnotationIgnored,
                f"{labels.HANDLED_ANNOTATION}: " + "; ".join(problems) + ": treated as absent "
                "and rewritten (the annotation is the operator's record; do not edit it)",
            )
        return state

    @property
    def name(self) -> str:
        return self.observed.name

    def event(
        self, kind: EventType, reason: EventReason, message: str, *, job: JobRef | None = None
    ) -> None:
        self.events.append(Event(kind, reason, message, job))

    def after(self, seconds: float) -> None:
        self.requeue.append(max(seconds, 0.0))

    def elapsed(self, since: datetime | None) -> float:
        return 0.0 if since is None else (self.now - since).total_seconds()

    def scaled(self, seconds: float) -> float:
        return seconds * self.settings.deadline_scale

    def decide(self, entry: GateRecord, event: EventReason | None) -> GateRecord:
        """Record a verdict in the history and post its Warning (``revision R: reasons``).

        The one way a step records a verdict, so status and Events say the same; ``event``
        None where the caller announces it itself (a judged Job: ``rollout.benchmark``) or
        nobody needs telling (the gate disabled).
        """
        stamped = entry.model_copy(update={"finished_at": ledger.timestamp(self.now)})
        self.history = ledger.record(self.history, stamped)
        self.verdicts.append(stamped)
        if event is not None:
            text = f"revision {entry.revision}: " + "; ".join(entry.reasons)
            self.event("Warning", event, text)
        return stamped

    def status(
        self,
        outcome: Outcome,
        *,
        stable: str | None,
        stable_benchmark: BenchSummary | None,
        candidate: RevisionSummary | None,
        warnings: Sequence[str],
        gate: tuple[ConditionStatus, ConditionReason, str],
        fallback: LaunchRecord | None = None,
        flags_note: str = "",
        operator_update: tuple[ConditionReason, str] | None = None,
        gate_plan_note: str = "",
        gate_plan_power: str = "",
    ) -> VLLMDeploymentStatus:
        """The status this pass writes: the one builder of the planner and of a pass that
        stops (``rollout.stopped``); the stable revision summarised from what is observed,
        the history as this pass leaves it; figures that a revision's Deployment holds are
        left out (``rollout.figures``)."""
        stable_summary = None
        if stable is not None:
            stable_summary = summarise(
                self.observed.deployment_of(stable),
                stable,
                fallback=fallback,
                benchmark=stable_benchmark,
                previous=self.previous.stable,
                now=self.now,
            )
        observed = self.observed
        keep = (stable, candidate.revision if candidate is not None else None)
        return build_status(
            self.previous,
            outcome,
            generation=observed.generation,
            now=self.now,
            stable=figures.slim_revision(observed, stable_summary),
            candidate=figures.slim_revision(observed, candidate),
            history=figures.slim_history(observed, self.history, keep),
            warnings=warnings,
            gate=gate,
            flags_note=flags_note,
            operator_update=operator_update,
            gate_plan_note=gate_plan_note,
            gate_plan_power=gate_plan_power,
        )

    def decision(self, revision: str) -> GateRecord | None:
        return ledger.decision(self.history, revision, self.handled.rerun)

    def owned(self, manifest: dict[str, Any], role: str | None = None) -> dict[str, Any]:
        meta = manifest.setdefault("metadata", {})
        uid = self.observed.uid
        if uid:
            meta["ownerReferences"] = [
                {
                    "apiVersion": API_VERSION,
                    "kind": KIND,
                    "name": self.name,
                    "uid": uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ]
        if role is not None:
            meta.setdefault("labels", {})[labels.ROLE_LABEL] = role
        return manifest

    def create(self, manifest: dict[str, Any], role: str | None = None) -> None:
        self.actions.append(Create(self.owned(manifest, role)))

    def delete(self, kind: Kind, name: str) -> None:
        self.actions.append(Delete(kind, name))
