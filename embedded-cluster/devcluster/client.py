"""Synchronous helpers over the devcluster's HTTP API, for tests, scripts and the demo.

They are thin clients: every call is an HTTP request like any other client's (creation
always goes through the API), failures come back as ``ApiError`` with the server's code
and reason. Mixed into ``DevCluster``, which provides the URL, the connection and ``call``.
"""

from __future__ import annotations

import builtins
import json
import ssl
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import httpx

from .apierrors import ApiError
from .resources import ResourceType
from .semantics import JSON_PATCH, MERGE, Semantics

T = TypeVar("T")


class ClusterClient:
    """HTTP helpers; the host class supplies ``url``, ``_http``, ``call`` and ``semantics``."""

    _http: httpx.Client | None

    @property
    def url(self) -> str:
        raise NotImplementedError

    @property
    def verify(self) -> ssl.SSLContext | bool:
        return True

    @property
    def semantics(self) -> Semantics:
        raise NotImplementedError

    def call(self, fn: Callable[[], T], timeout: float = 10.0) -> T:
        raise NotImplementedError

    def resource_type(self, api_version: str, plural_or_kind: str) -> ResourceType:
        group, _, version = api_version.rpartition("/")

        def find() -> ResourceType | None:
            for rtype in self.semantics.registry:
                if (rtype.group, rtype.version) == (group, version) and plural_or_kind in (
                    rtype.plural,
                    rtype.kind,
                ):
                    return rtype
            return None

        found = self.call(find)
        if found is None:
            raise ApiError(404, "NotFound", f"{api_version} {plural_or_kind} is not served")
        return found

    def path(
        self,
        api_version: str,
        plural: str,
        name: str | None = None,
        namespace: str | None = "default",
        subresource: str = "",
    ) -> str:
        rtype = self.resource_type(api_version, plural)
        base = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
        parts = [base]
        if rtype.namespaced and namespace:
            parts.append(f"namespaces/{namespace}")
        parts.append(rtype.plural)
        if name:
            parts.append(name)
        if subresource:
            parts.append(subresource)
        return "/".join(parts)

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str = "application/json",
        params: dict[str, str] | None = None,
    ) -> Any:
        assert self._http is not None, "DevCluster is not started"
        content = None if body is None else _dumps(body)
        response = self._http.request(
            method, path, content=content, params=params, headers={"Content-Type": content_type}
        )
        data = response.json() if response.content else None
        if response.status_code >= 400:
            status = data if isinstance(data, dict) else {}
            raise ApiError(
                response.status_code,
                str(status.get("reason", "")),
                str(status.get("message", response.text)),
                status.get("details"),
            )
        return data

    def create(self, body: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        meta = body.get("metadata") or {}
        ns = namespace or meta.get("namespace") or "default"
        result: dict[str, Any] = self.request(
            "POST", self.path(body["apiVersion"], body["kind"], namespace=ns), body=body
        )
        return result

    def get(
        self,
        api_version: str,
        plural: str,
        name: str,
        namespace: str | None = "default",
        subresource: str = "",
    ) -> dict[str, Any]:
        result: dict[str, Any] = self.request(
            "GET", self.path(api_version, plural, name, namespace, subresource)
        )
        return result

    def list(
        self,
        api_version: str,
        plural: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        params = {
            k: v
            for k, v in (("labelSelector", label_selector), ("fieldSelector", field_selector))
            if v
        }
        result = self.request("GET", self.path(api_version, plural, None, namespace), params=params)
        return list(result["items"])

    def patch(
        self,
        api_version: str,
        plural: str,
        name: str,
        patch: Any,
        namespace: str | None = "default",
        *,
        subresource: str = "",
        content_type: str = "",
    ) -> dict[str, Any]:
        content_type = content_type or (JSON_PATCH if isinstance(patch, list) else MERGE)
        result: dict[str, Any] = self.request(
            "PATCH",
            self.path(api_version, plural, name, namespace, subresource),
            body=patch,
            content_type=content_type,
        )
        return result

    def replace(
        self, body: dict[str, Any], *, subresource: str = "", namespace: str | None = None
    ) -> dict[str, Any]:
        meta = body.get("metadata") or {}
        ns = namespace or meta.get("namespace") or "default"
        path = self.path(body["apiVersion"], body["kind"], meta["name"], ns, subresource)
        result: dict[str, Any] = self.request("PUT", path, body=body)
        return result

    def delete(
        self,
        api_version: str,
        plural: str,
        name: str,
        namespace: str | None = "default",
        *,
        propagation: str | None = None,
    ) -> dict[str, Any]:
        body = {"propagationPolicy": propagation} if propagation else None
        result: dict[str, Any] = self.request(
            "DELETE", self.path(api_version, plural, name, namespace), body=body
        )
        return result

    def watch(
        self,
        api_version: str,
        plural: str,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        timeout: float = 5.0,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> Iterator[dict[str, Any]]:
        """Watch events (dicts with ``type`` and ``object``) until ``timeout`` seconds pass.

        Stop early by breaking out of the loop; the stream is closed on exit.
        """
        params = {"watch": "true", "timeoutSeconds": str(max(1, round(timeout)))}
        for key, value in (
            ("resourceVersion", resource_version),
            ("labelSelector", label_selector),
            ("fieldSelector", field_selector),
        ):
            if value:
                params[key] = value
        path = self.path(api_version, plural, None, namespace)
        with httpx.stream(
            "GET", self.url + path, params=params, timeout=timeout + 5, verify=self.verify
        ) as response:
            for line in response.iter_lines():
                if line.strip():
                    yield json.loads(line)

    def exists(
        self, api_version: str, plural: str, name: str, namespace: str | None = "default"
    ) -> bool:
        try:
            self.get(api_version, plural, name, namespace)
        except ApiError as exc:
            if exc.code == 404:
                return False
            raise
        return True

    def wait_for(
        self,
        condition: Callable[[], T],
        *,
        timeout: float = 5.0,
        interval: float = 0.01,
        message: str = "condition",
    ) -> T:
        """Poll ``condition`` until it returns something truthy; its last error is reported."""
        deadline = time.monotonic() + timeout
        last_error: Exception | None = None
        while True:
            try:
                result = condition()
                if result:
                    return result
            except Exception as exc:  # e.g. 404 while the object is not there yet
                last_error = exc
            if time.monotonic() > deadline:
                raise TimeoutError(f"{message} not met within {timeout}s") from last_error
            time.sleep(interval)

    def history(
        self, api_version: str, plural: str, name: str, namespace: str | None = "default"
    ) -> builtins.list[dict[str, Any]]:
        """Every stored version of one object, oldest first (from the change log)."""
        rtype = self.resource_type(api_version, plural)
        ns = (namespace or "") if rtype.namespaced else ""
        changes = self.call(lambda: self.semantics.store.history(rtype.store_key, ns, name))
        return [dict(change.obj, _event=change.type) for change in changes]

    def set_pod_log(self, namespace: str, name: str, text: str) -> None:
        """What ``GET .../pods/<name>/log`` returns (no API writes logs, hence a helper)."""
        self.call(lambda: self.semantics.pod_logs.__setitem__((namespace, name), text))

    def set_log_source(self, source: Callable[[str, str, str], str | None] | None) -> None:
        """Serve pod logs from ``source(namespace, pod, container)`` (called on the server's
        loop: keep it quick, e.g. read a file); None falls back to ``set_pod_log`` text."""

        def install() -> None:
            self.semantics.log_source = source

        self.call(install)


def _dumps(body: Any) -> bytes:
    return json.dumps(body).encode()
