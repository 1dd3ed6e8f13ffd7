"""The user's HTTPRoute split for a canary step, and given back as it was. Pure.

The route is the user's, shared with whatever else it routes, so a step changes as little of
it as it can:
- **which rules**: those ``traffic.httpRoute.rules`` names (indices into ``spec.rules``), or
  by default every rule with the serving Service among its backends and no header or
  query-parameter match (a rule that pins some clients to a backend by header, "stable only"
  say, is the user's decision and keeps its backends);
- **which weight**: only the serving backend's own weight is split between the serving and
  the candidate Service; other backends (another model's, a fallback) keep their share of
  the rule. All weights of a split rule are scaled by 100 so the split is exact in integers
  (50/50 with another backend is 5000/4500/500 at a 10% step; reduced by their common
  divisor only past Gateway API's largest weight);
- **filters** of the serving backend are kept, and copied to the candidate's backend, so a
  header the backend adds reaches the candidate too.

The patch carries the route's ``resourceVersion``: a route someone changed after the
operator read it is refused with 409 by the API server, and the next pass (retried by kopf)
splits the route as it is now, so no edit is lost. The rules as they were before the first
split and as last written are kept in an annotation on the route itself
(``ORIGINAL_ANNOTATION``), written in the same patch: giving the traffic back writes the
original rules exactly, or, if someone changed the route since the operator's last write, the
current rules without the candidate's backend (the serving backend takes its weight back).
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Mapping, Sequence
from functools import reduce
from typing import Any

from vllm_operator.render import labels

ORIGINAL_ANNOTATION = labels.CANARY_ROUTE_ANNOTATION
SCALE = 100
MAX_WEIGHT = 1_000_000  # Gateway API's limit on a backendRef's weight

Rule = dict[str, Any]


def is_ref(ref: object, service: str) -> bool:
    """``ref`` is a backendRef to the Service ``service`` (core group, kind Service)."""
    return (
        isinstance(ref, Mapping)
        and ref.get("name") == service
        and ref.get("kind", "Service") == "Service"
        and ref.get("group", "") in ("", "core")
    )


def _refs(rule: object) -> list[Mapping[str, Any]]:
    if not isinstance(rule, Mapping):
        return []
    return [r for r in rule.get("backendRefs") or [] if isinstance(r, Mapping)]


def _pinned(rule: Mapping[str, Any]) -> bool:
    """A rule that matches on headers or query parameters."""
    return any(
        isinstance(m, Mapping) and (m.get("headers") or m.get("queryParams"))
        for m in rule.get("matches") or []
    )


def selected(rules: Sequence[object], serving: str, chosen: Sequence[int] | None) -> list[int]:
    """Indices of the rules a step splits (see the module docstring)."""
    out = []
    for i, rule in enumerate(rules):
        if not isinstance(rule, Mapping) or not any(is_ref(r, serving) for r in _refs(rule)):
            continue
        if (i in chosen) if chosen is not None else not _pinned(rule):
            out.append(i)
    return out


def _weight(ref: Mapping[str, Any]) -> int:
    weight = ref.get("weight", 1)
    return weight if isinstance(weight, int) and weight >= 0 else 1


def split(
    rules: Sequence[object],
    indices: Sequence[int],
    *,
    serving: str,
    candidate: str,
    weight: int,
    port: int,
) -> list[Any] | str:
    """``rules`` with the serving backend of each selected rule split ``100 - weight`` /
    ``weight`` with the candidate's; a message when the weights cannot be made exactly."""
    out: list[Any] = copy.deepcopy(list(rules))
    for i in indices:
        rule = out[i]
        refs = _refs(rule)
        new: list[dict[str, Any]] = []
        for ref in refs:
            if is_ref(ref, candidate):
                continue  # made again beside the serving backend
            if not is_ref(ref, serving):
                new.append({**ref, "weight": _weight(ref) * SCALE})
                continue
            share = _weight(ref)
            new.append({**ref, "weight": share * (SCALE - weight)})
            if weight > 0:
                ours: dict[str, Any] = {"name": candidate, "port": ref.get("port") or port}
                if ref.get("filters"):
                    ours["filters"] = copy.deepcopy(ref["filters"])
                ours["weight"] = share * weight
                new.append(ours)
        if any(r["weight"] > MAX_WEIGHT for r in new):
            divisor = reduce(math.gcd, (r["weight"] for r in new if r["weight"] > 0), 0) or 1
            for ref in new:
                ref["weight"] //= divisor
        if any(r["weight"] > MAX_WEIGHT for r in new):
            return (
                f"rule {i} of the HTTPRoute has backend weights too large to split exactly "
                f"(at most {MAX_WEIGHT} each)"
            )
        rule["backendRefs"] = new
    return out


def without_candidate(rules: Sequence[object], serving: str, candidate: str) -> list[Any]:
    """The rules with the candidate's backend gone and its weight back on the serving one."""
    out: list[Any] = copy.deepcopy(list(rules))
    for rule in out:
        refs = _refs(rule)
        back = sum(_weight(r) for r in refs if is_ref(r, candidate))
        if not any(is_ref(r, candidate) for r in refs):
            continue
        kept = [dict(r) for r in refs if not is_ref(r, candidate)]
        for ref in kept:
            if is_ref(ref, serving):
                ref["weight"] = _weight(ref) + back
                break
        rule["backendRefs"] = kept
    return out


def stored(route: Mapping[str, Any]) -> tuple[list[Any], list[Any]] | None:
    """(original rules, rules last written) from the route's annotation, if it has one."""
    meta = route.get("metadata") or {}
    text = (meta.get("annotations") or {}).get(ORIGINAL_ANNOTATION)
    if not isinstance(text, str):
        return None
    try:
        kept = json.loads(text)
    except ValueError:
        return None
    if not isinstance(kept, Mapping):
        return None
    original, written = kept.get("original"), kept.get("written")
    if not isinstance(original, list) or not isinstance(written, list):
        return None
    return original, written


def rules_of(route: Mapping[str, Any]) -> list[Any]:
    return list((route.get("spec") or {}).get("rules") or [])


def _defaulted(rules: Sequence[object]) -> list[Any]:
    """The rules with the defaults Gateway API's CRD gives a backendRef (group "", kind
    Service, weight 1): what the API server stores for what the operator wrote."""
    out: list[Any] = copy.deepcopy(list(rules))
    for rule in out:
        if isinstance(rule, dict) and isinstance(rule.get("backendRefs"), list):
            rule["backendRefs"] = [
                {"group": "", "kind": "Service", "weight": 1, **r} if isinstance(r, dict) else r
                for r in rule["backendRefs"]
            ]
    return out


def same_rules(a: Sequence[object], b: Sequence[object]) -> bool:
    """The same rules once the API server's defaults are in both."""
    return _defaulted(a) == _defaulted(b)


def base(route: Mapping[str, Any], serving: str, candidate: str) -> list[Any]:
    """The route's rules without any canary: the originals when nobody changed the route
    since the operator's last write, else the current rules without the candidate."""
    current = rules_of(route)
    kept = stored(route)
    if kept is not None and same_rules(kept[1], current):
        return kept[0]
    return without_candidate(current, serving, candidate)


def _meta(route: Mapping[str, Any], annotation: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"annotations": {ORIGINAL_ANNOTATION: annotation}}
    version = (route.get("metadata") or {}).get("resourceVersion")
    if version:
        meta["resourceVersion"] = version
    return meta


def shift_patch(
    route: Mapping[str, Any],
    *,
    serving: str,
    candidate: str,
    weight: int,
    port: int,
    chosen: Sequence[int] | None,
) -> Mapping[str, Any] | str | None:
    """The merge patch that gives the candidate ``weight`` percent of the serving backend's
    traffic; None when the route shows it already; a message when it cannot be made."""
    original = base(route, serving, candidate)
    indices = selected(original, serving, chosen)
    if not indices:
        which = (
            f"none of the rules {list(chosen)} (traffic.httpRoute.rules)"
            if chosen is not None
            else "no rule without header or query matches"
        )
        return f"{which} names the serving Service {serving} as a backend"
    rules = split(original, indices, serving=serving, candidate=candidate, weight=weight, port=port)
    if isinstance(rules, str):
        return rules
    if same_rules(rules, rules_of(route)):
        return None
    kept = json.dumps({"original": original, "written": rules}, separators=(",", ":"))
    return {"metadata": _meta(route, kept), "spec": {"rules": rules}}


def restore_patch(route: Mapping[str, Any], serving: str, candidate: str) -> Mapping[str, Any]:
    """The merge patch that gives the route back (see ``base``) and drops the annotation."""
    return {
        "metadata": _meta(route, None),
        "spec": {"rules": base(route, serving, candidate)},
    }


def candidate_share(route: Mapping[str, Any] | None, candidate: str) -> float:
    """The candidate's share (percent) of the first rule that sends it traffic: the share of
    that rule's requests in effect, other backends included."""
    for rule in rules_of(route or {}):
        refs = _refs(rule)
        ours = sum(_weight(r) for r in refs if is_ref(r, candidate))
        if ours > 0:
            return round(100.0 * ours / sum(_weight(r) for r in refs), 2)
    return 0.0
