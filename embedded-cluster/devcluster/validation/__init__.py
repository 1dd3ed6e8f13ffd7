"""Built-in validation: what a real API server refuses in the kinds an operator writes.

``validate(rtype, obj, old)`` runs after defaulting on every create and update of the
main resource (not on status writes) and returns field errors (422 with causes);
``DecodeError`` stands for what a real server cannot even decode (a malformed quantity,
a string where an integer belongs: 400). Names follow the kind's rule from
``ValidateObjectMeta`` (a DNS-1123 subdomain for most kinds, a DNS-1123 label for
Namespaces, a DNS-1035 label for Services, nothing for core Events); each kind's own
rules live in one module, registered in ``RULES`` by (group, plural), so a new kind adds
one entry. Custom resources get the metadata rules here and their schema in ``schema.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..fielderrors import FieldError
from ..resources import ResourceType
from . import core, gateway, names, pods, policy, workloads
from .common import DecodeError, NameRule, reject_non_json_numbers, validate_object_meta

__all__ = ["NAME_RULES", "RULES", "DecodeError", "reject_non_json_numbers", "validate"]

Rule = Callable[[dict[str, Any], dict[str, Any] | None], list[FieldError]]

RULES: dict[tuple[str, str], Rule] = {
    ("", "pods"): pods.pod_rules,
    ("", "services"): core.service_rules,
    ("", "configmaps"): core.config_map_rules,
    ("", "secrets"): core.secret_rules,
    ("coordination.k8s.io", "leases"): core.lease_rules,
    ("", "events"): core.event_rules,
    ("apps", "deployments"): workloads.deployment_rules,
    ("apps", "replicasets"): workloads.replicaset_rules,
    ("batch", "jobs"): workloads.job_rules,
    ("policy", "poddisruptionbudgets"): policy.pdb_rules,
    ("autoscaling", "horizontalpodautoscalers"): policy.hpa_rules,
    ("gateway.networking.k8s.io", "httproutes"): gateway.httproute_rules,
}

# Name format per kind (ValidateObjectMeta's nameFn); the default is a DNS-1123 subdomain.
NAME_RULES: dict[tuple[str, str], NameRule | None] = {
    ("", "namespaces"): names.dns1123_label,
    ("", "services"): names.dns1035_label,
    ("", "events"): None,
}


def validate(
    rtype: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None = None
) -> list[FieldError]:
    """Every field error of ``obj`` (raises ``DecodeError`` when it cannot be decoded)."""
    reject_non_json_numbers(obj)
    name_rule = NAME_RULES.get(rtype.store_key, names.dns1123_subdomain)
    errors = validate_object_meta(obj, name_rule)
    rule = RULES.get(rtype.store_key)
    if rule is not None:
        errors += rule(obj, old)
    return errors
