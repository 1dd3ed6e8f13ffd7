"""Per-kind rules of built-in resources that operators trip over on real clusters.

Defaulting (what a GET returns after a create: a Deployment's replicas and strategy, a
Job's selector and controller labels, a Service port's protocol and targetPort) and
validation (a Deployment selector must match its template; selectors, a Job's template, a
Service's clusterIP and an immutable ConfigMap's data cannot change). Each rule exists
because code that ignores it passes against a naive emulator and fails against a cluster.
"""

from __future__ import annotations

from typing import Any

from . import apierrors, fielderrors
from .objects import meta
from .resources import ResourceType

_JOB_LABELS = ("batch.kubernetes.io/controller-uid", "controller-uid")
_JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")


def _spec(obj: dict[str, Any]) -> dict[str, Any]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        spec = obj["spec"] = {}
    return spec


def apply_kind_defaults(rtype: ResourceType, obj: dict[str, Any]) -> None:
    """Server-side defaults of a few built-in kinds (in place)."""
    key = rtype.store_key
    if key == ("apps", "deployments"):
        spec = _spec(obj)
        spec.setdefault("replicas", 1)
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("progressDeadlineSeconds", 600)
        strategy = spec.setdefault("strategy", {"type": "RollingUpdate"})
        if strategy.get("type", "RollingUpdate") == "RollingUpdate":
            strategy.setdefault("type", "RollingUpdate")
            strategy.setdefault("rollingUpdate", {"maxSurge": "25%", "maxUnavailable": "25%"})
    elif key == ("batch", "jobs"):
        spec = _spec(obj)
        for field, value in (("backoffLimit", 6), ("completions", 1), ("parallelism", 1)):
            spec.setdefault(field, value)
        uid, name = meta(obj).get("uid"), meta(obj).get("name")
        if uid and not spec.get("manualSelector") and not spec.get("selector"):
            spec["selector"] = {"matchLabels": {_JOB_LABELS[0]: uid}}
            template_meta = spec.setdefault("template", {}).setdefault("metadata", {})
            labels = template_meta.setdefault("labels", {})
            labels.update(dict.fromkeys(_JOB_LABELS, uid))
            labels.update(dict.fromkeys(_JOB_NAME_LABELS, name))
    elif key == ("", "services"):
        for port in _spec(obj).get("ports") or []:
            if isinstance(port, dict):
                port.setdefault("protocol", "TCP")
                port.setdefault("targetPort", port.get("port"))


def _invalid(rtype: ResourceType, obj: dict[str, Any], message: str) -> apierrors.ApiError:
    name = str(meta(obj).get("name"))
    return fielderrors.invalid_error(
        rtype.kind, rtype.group, name, [fielderrors.from_text(message)]
    )


def _get(obj: dict[str, Any], path: str) -> Any:
    current: Any = obj
    for part in path.split("."):
        if not isinstance(current, dict):
            return None
        current = current.get(part)
    return current


_IMMUTABLE: dict[tuple[str, str], tuple[str, ...]] = {
    ("apps", "deployments"): ("spec.selector",),
    ("apps", "replicasets"): ("spec.selector",),
    ("batch", "jobs"): ("spec.selector", "spec.template", "spec.completionMode"),
    ("", "services"): ("spec.clusterIP",),
}


def validate_kind(
    rtype: ResourceType, new: dict[str, Any], old: dict[str, Any] | None = None
) -> None:
    """Reject what the API server rejects for these kinds (422 Invalid)."""
    key = rtype.store_key
    if key in (("apps", "deployments"), ("apps", "replicasets")):
        selector = (_get(new, "spec.selector") or {}).get("matchLabels") or {}
        labels = _get(new, "spec.template.metadata.labels") or {}
        if not selector and not (_get(new, "spec.selector") or {}).get("matchExpressions"):
            raise _invalid(rtype, new, "spec.selector: Required value")
        if any(labels.get(k) != v for k, v in selector.items()):
            raise _invalid(
                rtype,
                new,
                "spec.template.metadata.labels: Invalid value: `selector` does not match"
                " template `labels`",
            )
    if old is None:
        return
    for path in _IMMUTABLE.get(key, ()):
        before, after = _get(old, path), _get(new, path)
        if before not in (None, "") and before != after:
            raise _invalid(rtype, new, f"{path}: Invalid value: field is immutable")
    if key in (("", "configmaps"), ("", "secrets")) and old.get("immutable"):
        for field in ("data", "binaryData", "stringData"):
            if old.get(field) != new.get(field):
                raise _invalid(
                    rtype, new, f"{field}: Forbidden: field is immutable when `immutable` is set"
                )
    old_finalizers = set(meta(old).get("finalizers") or [])
    if meta(old).get("deletionTimestamp") and set(meta(new).get("finalizers") or []) - (
        old_finalizers
    ):
        raise _invalid(
            rtype,
            new,
            "metadata.finalizers: Forbidden: no new finalizers can be added if the object is"
            " being deleted",
        )
