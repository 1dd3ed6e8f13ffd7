"""HTTPRoutes (Gateway API), by the bounds of the upstream ``gateway.networking.k8s.io``
CRD schema: what traffic splitting writes.

On a real cluster HTTPRoute is a CRD and its published schema refuses these; the
devcluster may serve the kind without that schema, so the bounds the operator's canary
steps depend on are checked here with the schema's wording: ``parentRefs[].name``
required, ``backendRefs[].port`` 1..65535 (required for a Service backend), ``weight``
0..1000000, at most 16 rules and 16 backends per rule.
"""

from __future__ import annotations

from typing import Any

from .. import fielderrors as fe
from ..fielderrors import FieldError
from .common import want_dict, want_int, want_list, want_str

MAX_WEIGHT = 1_000_000


def _bounded(value: int | None, path: str, low: int, high: int) -> list[FieldError]:
    if value is None:
        return []
    if value < low:
        detail = f"{path} in body should be greater than or equal to {low}"
        return [fe.invalid(path, value, detail)]
    if value > high:
        return [fe.invalid(path, value, f"{path} in body should be less than or equal to {high}")]
    return []


def httproute_rules(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    spec = want_dict(obj.get("spec"), "spec")
    errors: list[FieldError] = []
    for index, raw in enumerate(want_list(spec.get("parentRefs"), "spec.parentRefs")):
        where = f"spec.parentRefs[{index}]"
        if not want_str(want_dict(raw, where).get("name"), f"{where}.name"):
            errors.append(fe.required(f"{where}.name"))
    rules = want_list(spec.get("rules"), "spec.rules")
    if len(rules) > 16:
        errors.append(fe.too_many("spec.rules", len(rules), 16))
    for r_index, raw_rule in enumerate(rules):
        rule_path = f"spec.rules[{r_index}]"
        backends = want_list(
            want_dict(raw_rule, rule_path).get("backendRefs"), f"{rule_path}.backendRefs"
        )
        if len(backends) > 16:
            errors.append(fe.too_many(f"{rule_path}.backendRefs", len(backends), 16))
        for b_index, raw_backend in enumerate(backends):
            where = f"{rule_path}.backendRefs[{b_index}]"
            backend = want_dict(raw_backend, where)
            if not want_str(backend.get("name"), f"{where}.name"):
                errors.append(fe.required(f"{where}.name"))
            port = want_int(backend.get("port"), f"{where}.port")
            kind = want_str(backend.get("kind"), f"{where}.kind") or "Service"
            if port is None and kind == "Service":
                errors.append(fe.invalid(where, "object", "Must have port for Service reference"))
            errors += _bounded(port, f"{where}.port", 1, 65535)
            weight = want_int(backend.get("weight"), f"{where}.weight")
            errors += _bounded(weight, f"{where}.weight", 0, MAX_WEIGHT)
    return errors
