"""How a canary's share of the live traffic is made, and taken back. Pure.

``replicas`` (the default, no mesh): the serving Service's selector drops the revision and
selects every server pod of the resource (``labels.canary_selector``), so stable and
candidate pods are endpoints alike and kube-proxy spreads new connections over them: the
candidate's share is its Ready pods over all Ready pods, per connection and on average (a
client that keeps one connection open stays where it landed). The candidate's pods join the
endpoints only once Ready, and the selector is shared only once they are, so no request is
sent to a pod that cannot answer. The Service's revision annotation keeps naming the stable
revision meanwhile (``ServiceView.revision``), which is how the operator still knows it.

``gatewayAPI``: the user's HTTPRoute (Gateway API v1) names the serving Service as a backend;
in each rule that does, the operator sets the backends to the serving Service (stable) with
weight ``100 - w`` and the candidate Service with weight ``w``. The gateway splits requests,
not connections, so the share is the weight. The route is the user's: only those rules'
``backendRefs`` are written (a JSON merge patch replaces the rules list whole, so a person
editing the route during a canary should expect the operator to write the weights again).

Taking it back is one write: the serving Service selects the stable revision again, or the
route's rules name the serving Service alone.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

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
        rules = weighted_rules(found, vd, weight)
        if rules is None:
            return (
                f"HTTPRoute {route} has no rule with the serving Service "
                f"{names.serving_service_name(vd.metadata.name)} as a backend"
            )
        if _route_weight(found, vd) == weight:
            return True
        state.actions.append(Patch("HTTPRoute", route, {"spec": {"rules": rules}}))
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
    rules = weighted_rules(found, vd, 0)
    if rules is not None:
        state.actions.append(Patch("HTTPRoute", route, {"spec": {"rules": rules}}))
        state.event(
            "Normal",
            EventReason.TrafficRestored,
            f"HTTPRoute {route} sends every request to the serving Service: {what}",
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


def _is_ref(ref: object, service: str) -> bool:
    return (
        isinstance(ref, Mapping)
        and ref.get("name") == service
        and ref.get("kind", "Service") == "Service"
        and ref.get("group", "") in ("", "core")
    )


def _route_weight(route: Mapping[str, Any] | None, vd: VLLMDeployment | None) -> int:
    """The candidate's weight in the route (the first rule naming it), 0 when none."""
    if route is None or vd is None:
        return 0
    candidate = names.candidate_service_name(vd.metadata.name)
    for rule in (route.get("spec") or {}).get("rules") or []:
        for ref in (rule or {}).get("backendRefs") or []:
            if _is_ref(ref, candidate):
                weight = ref.get("weight", 1)
                return weight if isinstance(weight, int) else 0
    return 0


def weighted_rules(
    route: Mapping[str, Any], vd: VLLMDeployment, weight: int
) -> list[dict[str, Any]] | None:
    """The route's rules with every rule that names the serving (or candidate) Service sent
    ``weight`` percent to the candidate Service and the rest to the serving one; weight 0
    drops the candidate. None when no rule names either."""
    serving = names.serving_service_name(vd.metadata.name)
    candidate = names.candidate_service_name(vd.metadata.name)
    rules = copy.deepcopy(list((route.get("spec") or {}).get("rules") or []))
    touched = False
    for rule in rules:
        refs = [r for r in (rule or {}).get("backendRefs") or [] if isinstance(r, Mapping)]
        ours = [r for r in refs if _is_ref(r, serving) or _is_ref(r, candidate)]
        if not ours:
            continue
        touched = True
        port = next((r.get("port") for r in ours if r.get("port")), vd.spec.service.port)
        others = [r for r in refs if r not in ours]
        stable_ref: dict[str, Any] = {"name": serving, "port": port, "weight": 100 - weight}
        new = [*others, stable_ref]
        if weight > 0:
            new.append({"name": candidate, "port": port, "weight": weight})
        rule["backendRefs"] = new
    return rules if touched else None
