"""API-server semantics over the store: what kmock 0.8 leaves out and an operator relies on.

Create stamps uid/resourceVersion/generation/creationTimestamp and resolves generateName;
writes honour optimistic concurrency (409 on a stale resourceVersion), the status
subresource split, no-op suppression and generation bumps on spec changes; CRD schemas
default their fields. Deletion (finalizers, garbage collection, namespace and CRD cleanup)
lives in ``lifecycle.py``. Every method is synchronous: run on the devcluster's loop, each
call is atomic with respect to watches.
"""

from __future__ import annotations

import contextlib
import copy
import datetime
import ipaddress
import random
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from . import apierrors, cel, validation
from . import fielderrors as fe
from .crd_accept import accept_crd
from .fielderrors import GoLiteral
from .kinds import apply_kind_defaults, validate_kind
from .lifecycle import Lifecycle
from .objects import (
    SERVER_METADATA,
    apply_defaults,
    generated_name,
    meta,
    next_generation,
    owner_uids,
    prune,
    same_except_version,
    timestamp,
)
from .patches import PatchFailed, PatchMalformed, json_patch, merge_patch
from .resources import (
    BUILTINS,
    CRD_GROUP,
    CRD_PLURAL,
    Registry,
    ResourceType,
)
from .schema import unknown_fields
from .schema import validate as validate_schema
from .selectors import check_field_labels, selector_matcher
from .store import Store
from .strategic import keys_for as strategic_keys
from .strategic import strategic_merge_patch

Clock = Callable[[], datetime.datetime]
Schedule = Callable[[Callable[[], None]], None]

MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY = "application/apply-patch+yaml"


_BUILTIN_KEYS = {(t.group, t.version, t.plural) for t in BUILTINS}


def is_builtin(rtype: ResourceType) -> bool:
    """A kind the server knows (Go types, strategic merge), not one a CRD defines."""
    return (rtype.group, rtype.version, rtype.plural) in _BUILTIN_KEYS


def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class Semantics(Lifecycle):
    """CRUD with real API-server rules. ``schedule`` defers garbage collection (a seam)."""

    def __init__(
        self,
        store: Store | None = None,
        registry: Registry | None = None,
        *,
        clock: Clock = utcnow,
        schedule: Schedule | None = None,
        seed: int | None = None,
    ) -> None:
        self.store = store or Store()
        self.registry = registry or Registry()
        self.clock = clock
        self.schedule: Schedule = schedule or (lambda fn: fn())
        self.rng = random.Random(seed)
        self.pod_logs: dict[tuple[str, str], str] = {}
        # (namespace, pod, container) -> log text, or None to fall back to ``pod_logs``.
        self.log_source: Callable[[str, str, str], str | None] | None = None
        self._next_ip = int(ipaddress.IPv4Address("10.96.0.10"))
        self._orphaning: set[str] = set()
        self._strict = False  # set around a request with ?fieldValidation=Strict

    @contextlib.contextmanager
    def strict_fields(self, field_validation: str | None) -> Iterator[None]:
        """``?fieldValidation=Strict`` (kubectl's default): an unknown field of a custom
        resource is a 400 instead of being pruned silently. Built-in kinds carry no schema
        here, so their unknown fields are kept (a real server would refuse or drop them)."""
        before = self._strict
        self._strict = (field_validation or "").lower() == "strict"
        try:
            yield
        finally:
            self._strict = before

    def _refuse_unknown(self, rtype: ResourceType, obj: dict[str, Any]) -> None:
        if not self._strict:
            return
        unknown = unknown_fields(rtype.schema, obj)
        if unknown:
            listed = ", ".join(f'unknown field "{field}"' for field in unknown[:20])
            raise apierrors.bad_request(
                f'{rtype.kind} in version "{rtype.version}" cannot be handled as a'
                f" {rtype.kind}: strict decoding error: {listed}"
            )

    @contextlib.contextmanager
    def dry_run(self) -> Iterator[None]:
        """``?dryRun=All`` (kubectl diff): validate and answer, but store and schedule nothing."""
        schedule = self.schedule
        self.store.dry_run, self.schedule = True, lambda fn: None
        try:
            yield
        finally:
            self.store.dry_run, self.schedule = False, schedule

    # --- reads -------------------------------------------------------------------------
    def get(self, rtype: ResourceType, namespace: str, name: str) -> dict[str, Any]:
        obj = self.store.get(rtype.store_key, namespace, name)
        if obj is None:
            raise apierrors.not_found(rtype.plural, rtype.group, name)
        return self._present(rtype, obj)

    def list(
        self,
        rtype: ResourceType,
        namespace: str | None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> tuple[list[dict[str, Any]], int]:
        self.check_field_selector(rtype, field_selector)
        matches = selector_matcher(label_selector, field_selector)
        items = [
            self._present(rtype, obj)
            for obj in self.store.select(rtype.store_key, namespace)
            if matches(obj)
        ]
        return items, self.store.rv

    def check_field_selector(self, rtype: ResourceType, field_selector: str | None) -> None:
        """400 for a field selector on a field the kind does not index (a CRD indexes its
        version's ``selectableFields``)."""
        extra: set[str] = set()
        if not is_builtin(rtype):
            crd_name = f"{rtype.plural}.{rtype.group}"
            crd = self.store.get((CRD_GROUP, CRD_PLURAL), "", crd_name) or {}
            for version in (crd.get("spec") or {}).get("versions") or []:
                if isinstance(version, dict) and version.get("name") == rtype.version:
                    for selectable in version.get("selectableFields") or []:
                        path = str((selectable or {}).get("jsonPath") or "")
                        extra.add(path.removeprefix("."))
        check_field_labels(rtype.store_key, field_selector, frozenset(extra))

    def present(self, rtype: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        return self._present(rtype, obj)

    def _present(self, rtype: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        """The stored object as served under ``rtype``'s version (no conversion)."""
        if obj.get("apiVersion") == rtype.api_version:
            return obj
        shown = dict(obj)
        shown["apiVersion"] = rtype.api_version
        return shown

    # --- create ------------------------------------------------------------------------
    def create(self, rtype: ResourceType, namespace: str, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise apierrors.bad_request("the request body must be a JSON object")
        if body.get("kind") not in (None, rtype.kind):
            raise apierrors.bad_request(
                f"the API version in the data ({body.get('apiVersion')}) and kind "
                f"({body.get('kind')}) do not match the resource {rtype.describe()}"
            )
        obj = copy.deepcopy(body)
        metadata = obj.setdefault("metadata", {})
        if not isinstance(metadata, dict):
            raise apierrors.bad_request("metadata must be an object")
        namespace = self._namespace_for(rtype, namespace, metadata)
        self._require_namespace(rtype, namespace, creating=True)
        name = metadata.get("name") or ""
        if not name:
            prefix = metadata.get("generateName") or ""
            if not prefix:
                raise fe.invalid_error(
                    rtype.kind,
                    rtype.group,
                    "",
                    [fe.required("metadata.name", "name or generateName is required")],
                )
            name = generated_name(prefix, self.rng)
            while self.store.get(rtype.store_key, namespace, name) is not None:
                name = generated_name(prefix, self.rng)
        if self.store.get(rtype.store_key, namespace, name) is not None:
            raise apierrors.already_exists(rtype.plural, rtype.group, name)

        for key in SERVER_METADATA:
            metadata.pop(key, None)
        metadata["name"] = name
        if rtype.namespaced:
            metadata["namespace"] = namespace
        else:
            metadata.pop("namespace", None)
        metadata["uid"] = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
        metadata["generation"] = 1
        metadata["creationTimestamp"] = timestamp(self.clock())
        obj["apiVersion"] = rtype.api_version
        obj["kind"] = rtype.kind
        self._initial_status(rtype, obj)
        self._refuse_unknown(rtype, obj)
        apply_defaults(rtype.schema, prune(rtype.schema, obj))
        apply_kind_defaults(rtype, obj)
        validate_kind(rtype, obj)
        self._validate(rtype, obj)
        if rtype.store_key == (CRD_GROUP, CRD_PLURAL):
            self._accept_crd(obj)
        stored = self.store.commit(rtype.store_key, "ADDED", obj)
        if owner_uids(stored):
            self.schedule(lambda: self.collect_if_orphaned(rtype.store_key, stored))
        return stored

    def _namespace_for(self, rtype: ResourceType, url_ns: str, metadata: dict[str, Any]) -> str:
        if not rtype.namespaced:
            return ""
        body_ns = metadata.get("namespace") or ""
        if url_ns and body_ns and body_ns != url_ns:
            raise apierrors.bad_request(
                "the namespace of the provided object does not match the namespace sent on"
                " the request"
            )
        namespace = url_ns or body_ns
        if not namespace:
            raise apierrors.bad_request("a namespace is required for a namespaced resource")
        return str(namespace)

    def _require_namespace(self, rtype: ResourceType, namespace: str, *, creating: bool) -> None:
        if not rtype.namespaced:
            return
        ns = self.store.get(("", "namespaces"), "", namespace)
        if ns is None:
            raise apierrors.not_found("namespaces", "", namespace)
        if creating and meta(ns).get("deletionTimestamp"):
            raise apierrors.forbidden(
                f"{rtype.describe()} is forbidden: unable to create new content in namespace"
                f" {namespace} because it is being terminated"
            )

    def _initial_status(self, rtype: ResourceType, obj: dict[str, Any]) -> None:
        """What a create may say about status: nothing, when status is a subresource."""
        if rtype.status_subresource:
            obj.pop("status", None)
        if rtype.store_key == ("", "pods"):
            obj["status"] = {"phase": "Pending"}
        elif rtype.store_key == ("", "namespaces"):
            obj["status"] = {"phase": "Active"}
        elif rtype.store_key == ("", "services"):
            spec = obj.setdefault("spec", {})
            spec.setdefault("type", "ClusterIP")
            if spec.get("clusterIP") in (None, ""):
                spec["clusterIP"] = str(ipaddress.IPv4Address(self._next_ip))
                spec["clusterIPs"] = [spec["clusterIP"]]
                self._next_ip += 1

    def _accept_crd(self, crd: dict[str, Any]) -> None:
        name, types = accept_crd(crd, self.clock())
        if not self.store.dry_run:
            self.registry.set_crd(name, types)

    # --- update (PUT) and patch ----------------------------------------------------------
    def replace(
        self, rtype: ResourceType, namespace: str, name: str, body: Any, subresource: str = ""
    ) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise apierrors.bad_request("the request body must be a JSON object")
        old = self._existing(rtype, namespace, name)
        body_meta = meta(body)
        if body_meta.get("name") not in (None, "", name):
            raise apierrors.bad_request(
                f"the name of the object ({body_meta.get('name')}) does not match the name on"
                f" the URL ({name})"
            )
        unconditional_ok = is_builtin(rtype) and rtype.store_key != (CRD_GROUP, CRD_PLURAL)
        if not unconditional_ok and body_meta.get("resourceVersion") in (None, ""):
            # Custom resources and CRDs refuse unconditional updates (their strategies'
            # AllowUnconditionalUpdate is false): the kind in the error is the resource.
            error = fe.invalid(
                "metadata.resourceVersion", GoLiteral("0x0"), "must be specified for an update"
            )
            raise fe.invalid_error(rtype.plural, rtype.group, name, [error])
        return self._write(rtype, old, body, subresource)

    def patch(
        self,
        rtype: ResourceType,
        namespace: str,
        name: str,
        body: Any,
        *,
        content_type: str = MERGE,
        subresource: str = "",
    ) -> dict[str, Any]:
        content_type = content_type.split(";", maxsplit=1)[0].strip().lower()
        builtin = is_builtin(rtype)
        if content_type == APPLY or (content_type == STRATEGIC and not builtin):
            # Server-side apply (field managers, conflicts) is not implemented, and custom
            # resources have no strategic-merge schema: refuse both, as a server without
            # them does, rather than merge silently.
            accepted = [JSON_PATCH, MERGE, *([STRATEGIC] if builtin else [])]
            raise apierrors.ApiError(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format - accepted media types"
                f" include: {', '.join(accepted)}",
            )
        old = self._existing(rtype, namespace, name)
        try:
            if content_type == MERGE:
                if not isinstance(body, dict):
                    raise apierrors.bad_request("a merge patch must be a JSON object")
                candidate = merge_patch(old, body)
            elif content_type == STRATEGIC:
                candidate = strategic_merge_patch(old, body, strategic_keys(rtype.store_key))
            elif content_type == JSON_PATCH:
                candidate = json_patch(old, body)
            else:
                raise apierrors.unsupported_media_type(content_type)
        except PatchMalformed as exc:
            raise apierrors.bad_request(str(exc)) from exc
        except PatchFailed as exc:
            raise apierrors.invalid(rtype.plural, rtype.group, name, str(exc)) from exc
        if not isinstance(candidate, dict):
            raise apierrors.bad_request("the patched object is not a JSON object")
        return self._write(rtype, old, candidate, subresource)

    def _existing(self, rtype: ResourceType, namespace: str, name: str) -> dict[str, Any]:
        old = self.store.get(rtype.store_key, namespace, name)
        if old is None:
            raise apierrors.not_found(rtype.plural, rtype.group, name)
        return old

    def _write(
        self, rtype: ResourceType, old: dict[str, Any], candidate: dict[str, Any], subresource: str
    ) -> dict[str, Any]:
        old_meta = meta(old)
        name = str(old_meta.get("name"))
        wanted_rv = meta(candidate).get("resourceVersion")
        if wanted_rv not in (None, "") and str(wanted_rv) != old_meta.get("resourceVersion"):
            raise apierrors.conflict(rtype.plural, rtype.group, name)
        if subresource == "status":
            if not rtype.status_subresource:
                raise apierrors.resource_not_found()
            new = copy.deepcopy(old)
            if "status" in candidate:
                new["status"] = copy.deepcopy(candidate["status"])
            else:
                new.pop("status", None)
        elif subresource:
            raise apierrors.method_not_allowed(f"cannot write the {subresource} subresource")
        else:
            new = copy.deepcopy(candidate)
            if not isinstance(new.get("metadata"), dict):
                new["metadata"] = {}
            if rtype.status_subresource:
                if "status" in old:
                    new["status"] = copy.deepcopy(old["status"])
                else:
                    new.pop("status", None)
            for key in (*SERVER_METADATA, "name", "namespace"):
                if key in old_meta:
                    new["metadata"][key] = copy.deepcopy(old_meta[key])
                else:
                    new["metadata"].pop(key, None)
            new["apiVersion"] = old.get("apiVersion", rtype.api_version)
            new["kind"] = rtype.kind
        self._refuse_unknown(rtype, new)
        apply_defaults(rtype.schema, prune(rtype.schema, new))
        if not subresource:
            apply_kind_defaults(rtype, new)
            validate_kind(rtype, new, old)
        self._validate(rtype, new, old, subresource)
        new["metadata"]["generation"] = next_generation(old, new)
        if same_except_version(old, new):
            return self._present(rtype, old)
        if rtype.store_key == (CRD_GROUP, CRD_PLURAL) and not subresource:
            self._accept_crd(new)
        if meta(new).get("deletionTimestamp") and not meta(new).get("finalizers"):
            return self._present(rtype, self.remove(rtype.store_key, new))
        stored = self.store.commit(rtype.store_key, "MODIFIED", new)
        if owner_uids(stored) and owner_uids(stored) != owner_uids(old):
            self.schedule(lambda: self.collect_if_orphaned(rtype.store_key, stored))
        return self._present(rtype, stored)

    def _validate(
        self,
        rtype: ResourceType,
        obj: dict[str, Any],
        old: dict[str, Any] | None = None,
        subresource: str = "",
    ) -> None:
        """422 with one cause per field error (built-in rules, then the CRD schema); 400
        when a built-in object could not even be decoded (as a real server)."""
        errors: list[fe.FieldError] = []
        try:
            if subresource:
                validation.reject_non_json_numbers(obj)
            else:
                errors += validation.validate(rtype, obj, old)
        except validation.DecodeError as exc:
            raise apierrors.bad_request(
                f'{rtype.kind} in version "{rtype.version}" cannot be handled as a'
                f" {rtype.kind}: {exc}"
            ) from exc
        errors += validate_schema(rtype.schema, obj)
        if rtype.rules is not None:
            errors += cel.validate_after_schema(rtype.rules, obj, old, errors)
        if errors:
            name = str(meta(obj).get("name") or "")
            raise fe.invalid_error(rtype.kind, rtype.group, name, errors)

    # --- subresources ----------------------------------------------------------------------
    def pod_log(
        self, namespace: str, name: str, container: str = "", tail_lines: int | None = None
    ) -> str:
        """What ``GET .../pods/<name>/log`` returns: the log source's text, else the stored
        text (no API writes logs: the kubelet or a test provides them)."""
        if self.store.get(("", "pods"), namespace, name) is None:
            raise apierrors.not_found("pods", "", name)
        text = self.log_source(namespace, name, container) if self.log_source else None
        if text is None:
            text = self.pod_logs.get((namespace, name), "")
        if tail_lines is not None:
            lines = text.splitlines(keepends=True)
            text = "".join(lines[-tail_lines:] if tail_lines > 0 else [])
        return text

    def scale(self, rtype: ResourceType, namespace: str, name: str) -> dict[str, Any]:
        obj = self._existing(rtype, namespace, name)
        m = meta(obj)
        selector = ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        text = ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
        if rtype.scale_selector_path:  # the CRD names where its selector is, as a string
            found: Any = obj
            for part in rtype.scale_selector_path.strip(".").split("."):
                found = found.get(part) if isinstance(found, dict) else None
            text = found if isinstance(found, str) else ""
        return {
            "apiVersion": "autoscaling/v1",
            "kind": "Scale",
            "metadata": {
                k: m[k]
                for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                if k in m
            },
            "spec": {"replicas": (obj.get("spec") or {}).get("replicas", 1)},
            "status": {
                "replicas": (obj.get("status") or {}).get("replicas", 0),
                "selector": text,
            },
        }

    def set_scale(
        self, rtype: ResourceType, namespace: str, name: str, replicas: Any
    ) -> dict[str, Any]:
        if not isinstance(replicas, int) or replicas < 0:
            detail = "must be greater than or equal to 0"
            raise fe.invalid_error(
                "Scale", "autoscaling", name, [fe.invalid("spec.replicas", replicas, detail)]
            )
        self.patch(rtype, namespace, name, {"spec": {"replicas": replicas}})
        return self.scale(rtype, namespace, name)
