"""The objects the planner creates for a first revision, found by running the planner.

``vllm-operator render`` prints what the operator would create, so it asks the planner
itself rather than a second description of the rollout that could drift from it: passes of
``plan`` over an empty, in-memory cluster that does what it is asked (creates, patches,
deletes), where every Deployment becomes Ready and every benchmark Job's gate is taken to
pass. What comes out, in creation order: the candidate Service and the candidate Deployment
at ``rollout.candidateReplicas`` (pass one), the benchmark Job once the candidate is Ready
(unless the gate is disabled), then the serving Service once the candidate, scaled to
``replicas`` on promotion, is Ready. Each object is shown as created (the promotion patches
the Deployment's replicas and role label later). No uid, so no ownerReferences. Pure.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from vllm_operator.api.resource import parse_vllm_deployment
from vllm_operator.api.status import GateRecord, HistoryEntry
from vllm_operator.render import labels
from vllm_operator.render.validate import check
from vllm_operator.rollout import ledger
from vllm_operator.rollout.actions import Create, Delete, Patch
from vllm_operator.rollout.context import Settings
from vllm_operator.rollout.observed import observe
from vllm_operator.rollout.planner import plan
from vllm_operator.rollout.status import previous_status

# A first rollout takes five passes (create, benchmark, verdict, scale, switch); the bound
# only stops a planner bug from looping.
MAX_PASSES = 12
ASSUMED = "preview: the gate is assumed to pass"
AUTOSCALER_KINDS = ("HorizontalPodAutoscaler", "ScaledObject")
# What a revision runs as: a Deployment, or a LeaderWorkerSet for spec.resources.nodes > 1.
REVISION_KINDS = ("Deployment", "LeaderWorkerSet")


def apply_merge_patch(target: Any, patch: Any) -> Any:
    """``target`` with JSON merge ``patch`` (RFC 7386) applied, as a new object."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = apply_merge_patch(out.get(key), value)
    return out


def first_revision(
    resource: Mapping[str, Any], now: datetime, settings: Settings | None = None
) -> list[dict[str, Any]]:
    """Every object the planner creates for ``resource``'s first revision, in order.

    ``resource``: a VLLMDeployment as parsed from YAML (no status is needed). Raises
    ``SpecErrors`` when the spec is invalid, as the planner would report it.
    """
    check(parse_vllm_deployment(dict(resource)))
    body: dict[str, Any] = copy.deepcopy(dict(resource))
    body.pop("status", None)
    objects: dict[tuple[str, str], dict[str, Any]] = {}
    created: list[dict[str, Any]] = []
    for _ in range(MAX_PASSES):
        observed = observe(
            copy.deepcopy(body),
            deployments=[o for (k, _), o in objects.items() if k in REVISION_KINDS],
            services=[o for (k, _), o in objects.items() if k == "Service"],
            jobs=[o for (k, _), o in objects.items() if k == "Job"],
            autoscalers=[o for (k, _), o in objects.items() if k in AUTOSCALER_KINDS],
            budgets=[o for (k, _), o in objects.items() if k == "PodDisruptionBudget"],
        )
        step = plan(observed, now, settings)
        body["status"] = step.status.to_wire()
        meta = body.setdefault("metadata", {})
        meta["annotations"] = apply_merge_patch(
            meta.get("annotations") or {}, dict(step.annotations)
        )
        for action in step.actions:
            key = (action.kind, action.name)
            if isinstance(action, Create):
                if key not in objects:
                    objects[key] = copy.deepcopy(dict(action.manifest))
                    created.append(copy.deepcopy(dict(action.manifest)))
            elif isinstance(action, Patch):
                if key in objects:
                    objects[key] = apply_merge_patch(objects[key], action.patch)
            elif isinstance(action, Delete):
                objects.pop(key, None)
        if not step.actions:
            break
        _cluster_catches_up(body, objects, now)
    else:
        raise RuntimeError(f"the first rollout did not settle in {MAX_PASSES} passes")
    return created


def _cluster_catches_up(
    body: dict[str, Any], objects: dict[tuple[str, str], dict[str, Any]], now: datetime
) -> None:
    """Every Deployment Ready at its replicas; every benchmark Job's revision Passed."""
    status = previous_status(body.get("status"))
    history = [entry.record() for entry in status.history]
    for (kind, _), obj in objects.items():
        if kind in REVISION_KINDS:
            obj["status"] = {"readyReplicas": obj["spec"]["replicas"]}
        elif kind == "Job":
            revision = obj["metadata"]["labels"].get(labels.REVISION_LABEL, "")
            if ledger.decision(history, revision, None) is None:
                history = ledger.record(
                    history,
                    GateRecord(
                        revision=revision,
                        outcome="Passed",
                        reasons=[ASSUMED],
                        finished_at=ledger.timestamp(now),
                    ),
                )
    kept = [HistoryEntry.of(ledger.one_line(entry)) for entry in history]
    if kept != status.history:
        body["status"] = status.model_copy(update={"history": kept}).to_wire()
