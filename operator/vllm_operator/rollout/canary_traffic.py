"""How a canary's share of the live traffic is made, and taken back. Pure.

``replicas`` (the default, no mesh): the serving Service's selector drops the revision and
selects every server pod of the resource (``labels.canary_selector``), so stable and
candidate pods are endpoints alike and kube-proxy spreads new connections over them: the
candidate's share is its Ready pods over all Ready pods, per connection and on average (a
client that keeps one connection open stays where it landed). The candidate's pods join the
endpoints only once Ready, and the selector is shared only once they are, so no request is
sent to a pod that cannot answer. The Service's revision annotation keeps naming the stable
revision meanwhile (``ServiceView.revision``), which is how the operator still knows it.

Taking it back is one write: the serving Service selects the stable revision again.
"""

from __future__ import annotations

from vllm_operator.api.canary import TrafficMode
from vllm_operator.api.reasons import EventReason
from vllm_operator.api.resource import VLLMDeployment
from vllm_operator.render import labels, names
from vllm_operator.render.services import render_serving_service
from vllm_operator.rollout.actions import Patch
from vllm_operator.rollout.context import Pass
from vllm_operator.rollout.objects import ensure_service


def share(mode: TrafficMode, weight: int, candidate_ready: int, stable_ready: int) -> float:
    """The share of the serving traffic (percent) the candidate gets now."""
    if mode == "gatewayAPI":
        return float(weight)
    total = candidate_ready + stable_ready
    return round(100.0 * candidate_ready / total, 2) if total > 0 else 0.0


def how(mode: TrafficMode, candidate_ready: int, stable_ready: int) -> str:
    if mode == "gatewayAPI":
        return "HTTPRoute weights"
    return f"{candidate_ready} candidate and {stable_ready} stable pods behind the Service"


def is_shared(state: Pass, vd: VLLMDeployment, stable: str) -> bool:
    """The serving Service, as the cluster shows it, selects both revisions."""
    serving = state.observed.service(names.serving_service_name(vd.metadata.name))
    return serving is not None and serving.shared


def ensure_shared(state: Pass, vd: VLLMDeployment, stable: str) -> bool:
    """Share the serving traffic with the candidate; True when the cluster already shows it
    shared (the step can start), False when this pass's actions share it."""
    if is_shared(state, vd, stable):
        return True
    manifest = render_serving_service(vd, stable)
    manifest["spec"]["selector"] = labels.canary_selector(vd.metadata.name)
    ensure_service(state, manifest, stable)
    return False


def restore(
    state: Pass,
    vd: VLLMDeployment,
    mode: TrafficMode | None,
    stable: str,
    candidate: str | None,
) -> None:
    """The serving traffic back on the stable revision alone, in this pass's actions."""
    if not is_shared(state, vd, stable) or _patched(state, names.serving_service_name(state.name)):
        return
    ensure_service(state, render_serving_service(vd, stable), stable)
    state.event(
        "Normal",
        EventReason.TrafficRestored,
        f"serving Service selects revision {stable} only again"
        + (f" (revision {candidate} off the traffic)" if candidate else ""),
    )


def _patched(state: Pass, service: str) -> bool:
    return any(
        isinstance(a, Patch) and a.kind == "Service" and a.name == service for a in state.actions
    )


def still_shared(state: Pass, candidate: str) -> bool:
    """The cluster still shows the serving traffic shared (a restore not yet seen)."""
    serving = state.observed.service(names.serving_service_name(state.name))
    return serving is not None and serving.shared
