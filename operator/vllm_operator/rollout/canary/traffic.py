"""How a canary's share of the live traffic is made, and taken back. Pure.

``replicas`` (the default, no mesh): the serving Service's selector drops the revision and
selects every server pod of the resource (``labels.canary_selector``; of a multi-node
revision, the leader of each group, so the share counts groups), so stable and candidate
pods are endpoints alike and kube-proxy spreads new connections over them: the
candidate's share is its Ready pods over all Ready pods, per connection and on average (a
client that keeps one connection open stays where it landed). The candidate's pods join the
endpoints only once Ready, and the selector is shared only once they are, so no request is
sent to a pod that cannot answer. The Service's revision annotation keeps naming the stable
revision meanwhile (``ServiceView.revision``), which is how the operator still knows it.

``gatewayAPI``: the user's HTTPRoute (Gateway API v1) names the serving Service as a backend;
in the rules the user selects, only the serving backend's own weight is split between it and
the candidate Service, the rest of the route kept as it is, and given back exactly
(``route``: which rules, the weights, the filters, optimistic concurrency). The gateway
splits requests, not connections, so the share holds per request.

Taking it back is one write: the serving Service selects the stable revision again, or the
route's rules are the user's again. With replicas, whole pods make the share, often not the
weight asked: ``shares`` names both wherever a step is named, ``share_warnings`` lets
``render`` say so before anything runs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from vllm_operator.api.canary import TrafficMode
from vllm_operator.api.reasons import EventReason
from vllm_operator.api.resource import VLLMDeployment
from vllm_operator.render import labels, names
from vllm_operator.render.services import render_serving_service
from vllm_operator.rollout.actions import Patch
from vllm_operator.rollout.canary import route as canary_route
from vllm_operator.rollout.context import Pass
from vllm_operator.rollout.objects import ensure_service


def share(mode: TrafficMode, weight: int, candidate_ready: int, stable_ready: int) -> float:
    """The share of the serving traffic (percent) the candidate gets now."""
    if mode == "gatewayAPI":
        return float(weight)
    total = candidate_ready + stable_ready
    return round(100.0 * candidate_ready / total, 2) if total > 0 else 0.0


def share_now(
    state: Pass, vd: VLLMDeployment, weight: int, candidate_ready: int, stable_ready: int
) -> float:
    """The share in effect now: of the Ready pods (replicas), or of the route's traffic
    (gatewayAPI, the weight until the route shows the split)."""
    routed = route_share(state, vd)
    if routed is not None and routed > 0:
        return routed
    mode: TrafficMode = "gatewayAPI" if routed is not None else "replicas"
    return share(mode, weight, candidate_ready, stable_ready)


def pod_load_ratio(mode: TrafficMode, weight: int, candidate_pods: int, stable_pods: int) -> float:
    """A candidate pod's share of the requests over a stable pod's, as the routing makes
    them: 1 with replicas (kube-proxy spreads connections over all pods alike); with
    gatewayAPI the route splits by Service, so ``(w / candidate pods) / ((100 - w) / stable
    pods)``: 0.44 at 10% with one candidate pod beside four stable ones (whole pods)."""
    if mode != "gatewayAPI" or candidate_pods <= 0 or stable_pods <= 0 or weight >= 100:
        return 1.0
    return (weight / candidate_pods) / ((100 - weight) / stable_pods)


def candidate_replicas(weight: int, stable_replicas: int, cap: int) -> int:
    """Candidate pods whose share of ``candidate + stable`` is at least ``weight`` percent
    (rounded up to a whole pod), at least 1 and at most ``cap``."""
    if stable_replicas <= 0:
        return 1
    needed = math.ceil(weight * stable_replicas / (100 - weight) - 1e-9)
    return max(1, min(needed, cap))


def shares(weight: int, in_effect: float) -> str:
    """The share asked and, where whole pods make another, the share in effect: "10%", or
    "10% asked, 50% in effect" (one stable pod: any step below 50% is 50%)."""
    if abs(in_effect - weight) < 0.5:
        return f"{weight}%"
    return f"{weight}% asked, {in_effect:.3g}% in effect"


def share_warnings(vd: VLLMDeployment) -> list[str]:
    """One line per step whose weight whole replicas cannot make (traffic.mode replicas),
    with ``spec.replicas`` stable pods (groups, for a multi-node model: the Service selects
    one leader per group): what the step will give instead."""
    canary = vd.spec.rollout.canary
    if canary is None or canary.traffic.mode != "replicas":
        return []
    stable = vd.spec.replicas
    cap = max(vd.spec.replicas, vd.spec.rollout.candidate_replicas)
    unit = "group(s)" if vd.spec.resources.nodes > 1 else "pod(s)"  # a replica of each
    out = []
    for i, step in enumerate(canary.steps):
        pods = candidate_replicas(step.weight, stable, cap)
        made = share("replicas", step.weight, pods, stable)
        if abs(made - step.weight) >= 0.5:
            out.append(
                f"rollout.canary.steps[{i}]: weight {step.weight}% cannot be made of whole "
                f"replicas beside {stable} stable {unit}: {pods} candidate {unit} get "
                f"{made:.3g}% of the serving traffic (more replicas, or traffic.mode "
                "gatewayAPI, make it closer)"
            )
    return out


def how(mode: TrafficMode, candidate_ready: int, stable_ready: int, unit: str = "pods") -> str:
    """How the step's share is made; ``unit`` is ``groups`` for multi-node revisions (the
    Service selects their leaders, one per group)."""
    if mode == "gatewayAPI":
        return "HTTPRoute weights"
    return f"{candidate_ready} candidate and {stable_ready} stable {unit} behind the Service"


def route_name(vd: VLLMDeployment) -> str | None:
    canary = vd.spec.rollout.canary
    if canary is None or canary.traffic.mode != "gatewayAPI" or canary.traffic.http_route is None:
        return None
    return canary.traffic.http_route.name


def is_shared(state: Pass, vd: VLLMDeployment, stable: str) -> bool:
    """The live traffic, as the cluster shows it, reaches the candidate too."""
    route = route_name(vd)
    if route is not None:
        return _route_weight(state.observed.routes.get(route), vd) > 0
    serving = state.observed.service(names.serving_service_name(vd.metadata.name))
    return serving is not None and serving.shared


def ensure_shared(state: Pass, vd: VLLMDeployment, stable: str, weight: int) -> bool | str:
    """Share the serving traffic with the candidate: True when the cluster already shows the
    step's share, False when this pass's actions make it, a message when it cannot be made
    (the route is missing or names no serving Service)."""
    route = route_name(vd)
    if route is not None:
        found = state.observed.routes.get(route)
        if found is None:
            return f"HTTPRoute {route} not found in namespace {state.observed.namespace}"
        patch = canary_route.shift_patch(
            found,
            serving=names.serving_service_name(vd.metadata.name),
            candidate=names.candidate_service_name(vd.metadata.name),
            weight=weight,
            port=vd.spec.service.port,
            chosen=_chosen(vd),
        )
        if patch is None:
            return True
        if isinstance(patch, str):
            return f"HTTPRoute {route}: {patch}"
        state.actions.append(Patch("HTTPRoute", route, patch))
        return False
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
    off = f" (revision {candidate} off the traffic)" if candidate else ""
    restore_route(state, vd, f"revision {stable}{off}")
    serving = state.observed.service(names.serving_service_name(vd.metadata.name))
    if serving is None or not serving.shared or _patched(state, "Service", serving.name):
        return
    ensure_service(state, render_serving_service(vd, stable), stable)
    state.event(
        "Normal",
        EventReason.TrafficRestored,
        f"serving Service selects revision {stable} only{off}",
    )


def restore_route(state: Pass, vd: VLLMDeployment, what: str) -> None:
    """The route's rules name the serving Service alone again (no candidate backend)."""
    route = route_name(vd)
    found = state.observed.routes.get(route) if route is not None else None
    if route is None or found is None or _route_weight(found, vd) <= 0:
        return
    if _patched(state, "HTTPRoute", route):
        return
    serving = names.serving_service_name(vd.metadata.name)
    candidate = names.candidate_service_name(vd.metadata.name)
    state.actions.append(
        Patch("HTTPRoute", route, canary_route.restore_patch(found, serving, candidate))
    )
    state.event(
        "Normal",
        EventReason.TrafficRestored,
        f"HTTPRoute {route} has its rules as before the canary: {what}",
    )


def still_shared(state: Pass, vd: VLLMDeployment | None = None) -> bool:
    """The cluster still shows live traffic reaching a candidate (a restore not yet seen)."""
    serving = state.observed.service(names.serving_service_name(state.name))
    if serving is not None and serving.shared:
        return True
    route = route_name(vd) if vd is not None else None
    return route is not None and _route_weight(state.observed.routes.get(route), vd) > 0


def _patched(state: Pass, kind: str, name: str) -> bool:
    return any(isinstance(a, Patch) and a.kind == kind and a.name == name for a in state.actions)


def _chosen(vd: VLLMDeployment) -> list[int] | None:
    canary = vd.spec.rollout.canary
    ref = canary.traffic.http_route if canary is not None else None
    return ref.rules if ref is not None else None


def _route_weight(route: Mapping[str, Any] | None, vd: VLLMDeployment | None) -> float:
    """The candidate's share (percent) of the route's traffic in its first split rule."""
    if route is None or vd is None:
        return 0.0
    return canary_route.candidate_share(route, names.candidate_service_name(vd.metadata.name))


def route_share(state: Pass, vd: VLLMDeployment) -> float | None:
    """With gatewayAPI, the candidate's share of the route's traffic in effect (of the
    first rule it is in, other backends included); None in replicas mode."""
    route = route_name(vd)
    if route is None:
        return None
    return _route_weight(state.observed.routes.get(route), vd)
