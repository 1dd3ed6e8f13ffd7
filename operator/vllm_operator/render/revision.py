"""The revision: a short hash of the pod template, and the spec digest it was rendered from.

A revision names what the pods run, so it is the hash of the rendered pod template itself
(``render.deployment.pod_template``), nothing hand-listed: whatever shapes the pods (model,
engine flags, entrypoint, env, probes, security context, resources, scheduling, the port)
changes the revision by construction, whether a user changed the spec or a new operator
release renders the same spec differently. What does not reach the pods (gate thresholds,
rollout settings, replicas, the Service type) rolls nothing. The template is hashed without
its identity (the revision label and annotation it carries, and the resource's name:
``render/identity.py``), then stamped with it, so the hash is not circular.

The hash is sha256 over canonical JSON (sorted keys, no whitespace, ASCII), so it is stable
across runs, Python versions and dict ordering.

The **spec digest** is the other half of the record: a hash of the spec minus the sections
that never reach a pod. The planner keeps both on a revision's Deployment, so after an
operator upgrade it can tell "the user changed the spec" (digest differs: a new revision,
gated as usual) from "the operator now renders the unchanged spec differently" (same digest,
different template hash: an operator update, rolled only on request; docs/rollout.md). The
digest leaves out fields at their defaults, so a later operator adding a spec field with a
default does not make every spec look changed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from vllm_operator.api.spec import VLLMDeploymentSpec
from vllm_operator.engine.policy import LaunchPlan
from vllm_operator.render.deployment import pod_template
from vllm_operator.render.identity import without_identity
from vllm_operator.render.leaderworkerset import group_templates, set_annotations
from vllm_operator.render.names import REVISION_LENGTH

# Spec sections that never reach a pod template (the digest leaves them out). Leaving out
# too little only makes an edit of them, during a pending operator update, roll that update
# (gated); leaving out too much would hide a user's change, so the list is short.
NOT_IN_PODS = ("gate", "rollout", "replicas", "autoscaling", "disruption")
NOT_IN_PODS_SERVICE = ("type",)

DIGEST_LENGTH = 16


def _sha256(value: Any) -> str:
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


def template_revision(template: Mapping[str, Any]) -> str:
    """10 lowercase hex characters naming a pod template (its identity fields ignored)."""
    return _sha256(without_identity(template))[:REVISION_LENGTH]


def revision_hash(spec: VLLMDeploymentSpec, launch: LaunchPlan) -> str:
    """The revision the current operator renders ``spec`` into.

    ``launch``: the spec's launch plan (``plan_launch(spec)``), computed once by the caller.
    A multi-node revision is the hash of both of its templates (leader and worker).
    """
    if launch.group is not None:
        bare: dict[str, Any] = {
            k: without_identity(t) for k, t in group_templates(spec, launch).items()
        }
        placement = set_annotations(spec)
        if placement:  # only when set: revisions without it keep their hash
            bare["annotations"] = placement
        return _sha256(bare)[:REVISION_LENGTH]
    return template_revision(pod_template(spec, launch))


def spec_digest(spec: VLLMDeploymentSpec) -> str:
    """16 hex characters naming the pod-shaping part of ``spec`` as the user wrote it."""
    wire = spec.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    for section in NOT_IN_PODS:
        wire.pop(section, None)
    service = wire.get("service")
    if isinstance(service, dict):
        for key in NOT_IN_PODS_SERVICE:
            service.pop(key, None)
        if not service:
            del wire["service"]
    return _sha256(wire)[:DIGEST_LENGTH]
