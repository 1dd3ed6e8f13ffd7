"""What the planner asks the shell to do: the Plan and its actions.

Actions are values, not callbacks, so a unit test reads a plan like a log ("create the
candidate Deployment, then the candidate Service") and the shell applies each one
idempotently: a create that meets 409 AlreadyExists and a delete that meets 404 NotFound
both mean the cluster already is as planned.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from vllm_operator.api.kinds import ChildKind
from vllm_operator.api.reasons import EventReason
from vllm_operator.api.status import GateRecord, VLLMDeploymentStatus

Kind = ChildKind  # the children a VLLMDeployment owns (api/kinds.py)
# What a Patch may name: a child, or the user's HTTPRoute a canary weights.
PatchKind = ChildKind | Literal["HTTPRoute"]
EventType = Literal["Normal", "Warning"]


@dataclass(frozen=True)
class Create:
    """Create ``manifest`` unless an object of that name exists."""

    manifest: Mapping[str, Any]

    @property
    def kind(self) -> str:
        return str(self.manifest.get("kind", ""))

    @property
    def name(self) -> str:
        meta = self.manifest.get("metadata", {})
        return str(meta.get("name", "")) if isinstance(meta, Mapping) else ""


@dataclass(frozen=True)
class Patch:
    """JSON merge patch (RFC 7386) of one object."""

    kind: PatchKind
    name: str
    patch: Mapping[str, Any]


@dataclass(frozen=True)
class Delete:
    """Delete one object (background propagation: its pods go with it)."""

    kind: Kind
    name: str


Action = Create | Patch | Delete


@dataclass(frozen=True)
class JobRef:
    """A benchmark Job an Event is about: its name and uid (``kubectl describe job`` finds
    Events by the uid)."""

    name: str
    uid: str

    def involved(self, namespace: str) -> dict[str, Any]:
        """The Job as the Event's involved object (what ``Kube.event`` reads)."""
        meta = {"name": self.name, "namespace": namespace, "uid": self.uid}
        return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta}


@dataclass(frozen=True)
class Event:
    """A Kubernetes Event on the VLLMDeployment, or on one of its benchmark Jobs (``job``):
    a gate's progress goes on its Job, so the VLLMDeployment keeps the Events a person acts
    on (issue 42)."""

    type: EventType
    reason: EventReason
    message: str
    job: JobRef | None = None


@dataclass(frozen=True)
class Plan:
    """The next step of one VLLMDeployment, computed without I/O.

    The shell applies, in this order: ``status`` (decisions are recorded before anything is
    deleted, so a crash never loses a verdict), ``annotations`` (handled requests), then
    ``actions`` in order, then ``events``. ``requeue_after`` asks for another pass after
    that many seconds (a deadline is due), 0 for at once, None for "wait for an event".
    """

    status: VLLMDeploymentStatus
    actions: tuple[Action, ...] = ()
    events: tuple[Event, ...] = ()
    annotations: Mapping[str, str | None] = field(default_factory=dict)
    requeue_after: float | None = None
    verdicts: tuple[GateRecord, ...] = ()  # newly recorded, for metrics

    def kinds(self) -> list[str]:
        """A short description of the actions, e.g. ``["create Deployment x"]`` (for tests)."""
        out: list[str] = []
        for action in self.actions:
            if isinstance(action, Create):
                out.append(f"create {action.kind} {action.name}")
            elif isinstance(action, Patch):
                out.append(f"patch {action.kind} {action.name}")
            else:
                out.append(f"delete {action.kind} {action.name}")
        return out
