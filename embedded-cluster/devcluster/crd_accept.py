"""Accepting a CustomResourceDefinition: the checks and the status a real API server gives.

A CRD's name must be ``<plural>.<group>``, its CEL rules must compile and it must serve at
least one version; an accepted one answers with ``acceptedNames``, ``storedVersions`` and the
``NamesAccepted`` and ``Established`` conditions, which clients (kubectl, kopf) wait for.
Split from ``semantics.py``, which registers the types this returns.
"""

from __future__ import annotations

import datetime
from typing import Any

from . import apierrors, cel
from . import fielderrors as fe
from .objects import meta, timestamp
from .resources import CRD_GROUP, CRD_PLURAL, ResourceType, types_from_crd


def accept_crd(crd: dict[str, Any], now: datetime.datetime) -> tuple[str, list[ResourceType]]:
    """Check a CRD as the API server does (its name, its CEL rules, its versions) and write
    the status it answers with; its name and the resource types it serves."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    expected = f"{names.get('plural', '')}.{spec.get('group', '')}"
    if meta(crd).get("name") != expected:
        raise apierrors.invalid(
            CRD_PLURAL,
            CRD_GROUP,
            str(meta(crd).get("name")),
            f'metadata.name: Invalid value: must be spec.names.plural+"."+spec.group ({expected})',
        )
    rule_errors = [
        error
        for index, version in enumerate(spec.get("versions") or [])
        if isinstance(version, dict)
        for error in cel.compile_schema(
            (version.get("schema") or {}).get("openAPIV3Schema"),
            f"spec.versions[{index}].schema.openAPIV3Schema",
        )[1]
    ]
    if rule_errors:
        raise fe.invalid_error(
            "CustomResourceDefinition", CRD_GROUP, str(meta(crd).get("name")), rule_errors
        )
    types = types_from_crd(crd)
    if not types:
        raise apierrors.invalid(CRD_PLURAL, CRD_GROUP, expected, "spec.versions: Required")
    accepted = dict(names)
    accepted.setdefault("singular", names.get("kind", "").lower())
    accepted.setdefault("listKind", f"{names.get('kind', '')}List")
    stamp = timestamp(now)
    crd["status"] = {
        "acceptedNames": accepted,
        "storedVersions": [v["name"] for v in spec.get("versions", []) if v.get("storage")],
        "conditions": [
            {"type": t, "status": "True", "reason": r, "message": m, "lastTransitionTime": stamp}
            for t, r, m in (
                ("NamesAccepted", "NoConflicts", "no conflicts found"),
                ("Established", "InitialNamesAccepted", "the initial names have been accepted"),
            )
        ],
    }
    return expected, types
