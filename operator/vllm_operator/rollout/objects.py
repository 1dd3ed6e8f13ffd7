"""Actions on the objects of one revision: create-if-absent, patch only what differs.

Comparing with what is observed before patching keeps a steady state free of writes (no
write, no watch event, no reconcile loop), and ignoring fields the API server assigns
(a NodePort Service's nodePort) keeps the operator from fighting the server.
"""

from __future__ import annotations

from collections.abc import Mapping

from vllm_operator.api.resource import VLLMDeployment
from vllm_operator.engine.policy import LaunchPlan
from vllm_operator.render import labels
from vllm_operator.render.deployment import render_deployment
from vllm_operator.render.leaderworkerset import render_leaderworkerset
from vllm_operator.render.revision import spec_digest
from vllm_operator.rollout import ledger
from vllm_operator.rollout.actions import Patch
from vllm_operator.rollout.context import Pass
from vllm_operator.rollout.views import DeploymentView


def create_deployment(
    state: Pass, vd: VLLMDeployment, launch: LaunchPlan, revision: str, replicas: int, *, role: str
) -> None:
    """Create ``revision``'s Deployment from the pass's launch plan, stamped with when it
    started and the spec digest it was rendered from."""
    if launch.group is not None:  # a multi-node revision: one group per replica
        manifest = render_leaderworkerset(vd, launch, revision, replicas)
    else:
        manifest = render_deployment(vd, launch, revision, replicas)
    annotations = manifest["metadata"].setdefault("annotations", {})
    annotations[labels.STARTED_ANNOTATION] = ledger.timestamp(state.now)
    annotations[labels.SPEC_DIGEST_ANNOTATION] = spec_digest(vd.spec)
    state.create(manifest, role)


def ensure_service(state: Pass, manifest: dict[str, object], revision: str) -> None:
    meta = manifest["metadata"]
    assert isinstance(meta, dict)
    current = state.observed.service(str(meta["name"]))
    if current is None:
        state.create(dict(manifest))
        return
    spec = manifest["spec"]
    assert isinstance(spec, dict)
    selector = spec["selector"]
    patch: dict[str, object] = {}
    if dict(current.selector) != selector:
        patch["selector"] = {
            **{k: None for k in current.selector if k not in selector},
            **selector,
        }
    if current.service_type != spec["type"]:
        patch["type"] = spec["type"]
    if port_keys(current.ports) != port_keys(spec["ports"]):
        patch["ports"] = spec["ports"]
    if patch:
        state.actions.append(
            Patch(
                "Service",
                current.name,
                {
                    "metadata": {"annotations": {labels.REVISION_ANNOTATION: revision}},
                    "spec": patch,
                },
            )
        )


def port_keys(ports: object) -> list[tuple[str, ...]]:
    """What the operator sets on a Service port; ignores what the API server assigns
    (nodePort, appProtocol), so a NodePort Service is not re-patched on every pass."""
    keys = ("name", "port", "targetPort", "protocol")
    items = ports if isinstance(ports, list | tuple) else []
    return sorted(tuple(str(p.get(k, "")) for k in keys) for p in items if isinstance(p, Mapping))


def patch_deployment(state: Pass, dep: DeploymentView, replicas: int, role: str) -> None:
    patch: dict[str, object] = {}
    if dep.replicas != replicas:
        patch["spec"] = {"replicas": replicas}
    if dep.role != role:
        patch["metadata"] = {"labels": {labels.ROLE_LABEL: role}}
    if patch:
        state.actions.append(Patch(dep.kind, dep.name, patch))
