"""An operator upgrade that renders the same spec into different pods: reported, not rolled.

The revision is the hash of the rendered pod template (``render/revision.py``), so a new
operator release that changes a probe, an env var or the security context gives an unchanged
spec a new revision. Rolling that at once would restart every GPU pod the operator manages,
all at the same time, for a change nobody asked for. So the planner tells the two causes
apart with the spec digest each revision's Deployment records (``spec-digest`` annotation):

- the stable revision's digest differs from the spec's: the user changed the spec, and the
  new revision is gated and promoted as usual;
- same digest (or none recorded: a Deployment made before digests existed, taken as the
  same spec), different template hash: an **operator update**. The stable revision keeps
  serving untouched; status gets ``OperatorUpdatePending=True`` naming both revisions and an
  Event says it once. A person rolls it with the annotation
  ``vllm-operator.dev/roll-operator-update`` set to the new revision (or ``true``: roll
  whatever this operator renders, now and after later upgrades); the next change of the
  spec rolls it too. Rolled, it is an ordinary candidate: gated, then promoted or rejected.

Only the stable revision is protected this way: a candidate under way when the operator is
upgraded is rendered again (it is being gated anyway), and a revision rejected under the old
template gets one gate under the new one, since its pods are no longer the ones judged.
"""

from __future__ import annotations

from dataclasses import dataclass

from vllm_operator.api.reasons import ConditionReason, EventReason
from vllm_operator.render import labels
from vllm_operator.render.labels import ROLL_OPERATOR_UPDATE_ANNOTATION
from vllm_operator.rollout.actions import Patch
from vllm_operator.rollout.context import Pass
from vllm_operator.rollout.observed import Observed

ROLL_ANNOTATION = ROLL_OPERATOR_UPDATE_ANNOTATION
ROLL_ALWAYS = "true"

MAX_SHOWN = 64

REASON_PENDING = ConditionReason.TemplateChanged
REASON_NO_DIGEST = ConditionReason.SpecDigestUnknown
REASON_ROLLING = ConditionReason.RollRequested


@dataclass(frozen=True)
class OperatorUpdate:
    """The stable revision was rendered by another operator from the spec as it is now."""

    name: str
    stable: str
    rendered: str
    recorded: bool  # whether the stable Deployment records the digest it was made from
    request: str | None  # the roll annotation's value, if set

    @property
    def requested(self) -> bool:
        return self.request is not None and self.request.lower() in (ROLL_ALWAYS, self.rendered)

    def condition(self) -> tuple[ConditionReason, str]:
        """(reason, message) of the OperatorUpdatePending condition."""
        if self.requested:
            return REASON_ROLLING, (
                f"rolling the operator update: revision {self.rendered} (the spec as this "
                f"operator renders it) replaces revision {self.stable} once its gate passes "
                f"(annotation {ROLL_ANNOTATION}={self.request})"
            )
        text = (
            f"this operator renders the unchanged spec into revision {self.rendered}; revision "
            f"{self.stable}, rendered by an earlier operator, keeps serving. To gate and roll "
            f"it: kubectl annotate vllmd {self.name} {ROLL_ANNOTATION}={self.rendered}; the "
            "next change of the spec rolls it too"
        )
        if self.request is not None:
            # Quoted short: an annotation value may be up to 256 KiB, a message is bounded.
            shown = self.request[:MAX_SHOWN] + ("..." if len(self.request) > MAX_SHOWN else "")
            text += f" (the annotation names {shown!r}, not revision {self.rendered})"
        if not self.recorded:
            return REASON_NO_DIGEST, (
                f"revision {self.stable} records no spec digest (made by an operator before "
                f"digests), so it is taken to run the current spec: {text}"
            )
        return REASON_PENDING, text


def detect(
    observed: Observed, stable: str | None, rendered: str, digest: str
) -> OperatorUpdate | None:
    """The operator update between ``stable`` and ``rendered``, or None when the spec changed
    (or nothing differs, or the stable revision has no Deployment left to keep serving)."""
    if stable is None or stable == rendered:
        return None
    dep = observed.deployment_of(stable)
    if dep is None or dep.deleting:
        return None
    if dep.spec_digest is not None and dep.spec_digest != digest:
        return None
    raw = observed.annotations.get(ROLL_ANNOTATION)
    request = raw.strip() if isinstance(raw, str) and raw.strip() else None
    return OperatorUpdate(observed.name, stable, rendered, dep.spec_digest is not None, request)


def target(update: OperatorUpdate | None, rendered: str) -> str:
    """The revision this pass works towards: the stable one while an update is not rolled."""
    if update is None or update.requested:
        return rendered
    return update.stable


def announce(state: Pass, update: OperatorUpdate) -> None:
    """One Event per new or changed OperatorUpdatePending condition."""
    reason, message = update.condition()
    before = next((c for c in state.previous.conditions if c.type == "OperatorUpdatePending"), None)
    if before is not None and before.reason == reason and before.message == message:
        return
    event = (
        EventReason.OperatorUpdateRolling if update.requested else EventReason.OperatorUpdatePending
    )
    state.event("Normal", event, message)


def record_digest(state: Pass, revision: str, digest: str) -> None:
    """Record ``digest`` on ``revision``'s Deployment when it is the spec's own revision.

    The spec renders into exactly this revision's template, so the Deployment runs the
    current spec even if it was created from an earlier wording of it (an edit that changed
    no pod); keeping the digest current keeps a later operator update from looking like a
    spec change. Patched only when it differs: no write at rest.
    """
    dep = state.observed.deployment_of(revision)
    if dep is None or dep.deleting or dep.spec_digest == digest:
        return
    state.actions.append(
        Patch(
            dep.kind,
            dep.name,
            {"metadata": {"annotations": {labels.SPEC_DIGEST_ANNOTATION: digest}}},
        )
    )
