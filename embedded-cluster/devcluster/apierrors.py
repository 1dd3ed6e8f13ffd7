"""Kubernetes-shaped API errors.

Clients (kopf, the ``kubernetes`` client, kubectl) branch on the HTTP code AND on the
``Status`` body's ``reason``: kopf retries 409s, treats 422 on a JSON-patch ``test`` op as
"newer changes pending", kubectl prints ``message``. So every failure of the semantics
layer is one of these, rendered exactly like a real API server's ``Status``.
"""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """A failed API call, carrying the Status body that a real API server would send."""

    def __init__(
        self, code: int, reason: str, message: str, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details or {}

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            body["details"] = self.details
        return body


def _qualified(plural: str, group: str) -> str:
    return f"{plural}.{group}" if group else plural


def _details(plural: str, group: str, name: str) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name, "kind": plural}
    if group:
        details["group"] = group
    return details


def not_found(plural: str, group: str, name: str) -> ApiError:
    what = _qualified(plural, group)
    return ApiError(404, "NotFound", f'{what} "{name}" not found', _details(plural, group, name))


def resource_not_found() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource")


def already_exists(plural: str, group: str, name: str) -> ApiError:
    what = _qualified(plural, group)
    return ApiError(
        409, "AlreadyExists", f'{what} "{name}" already exists', _details(plural, group, name)
    )


def conflict(plural: str, group: str, name: str) -> ApiError:
    what = _qualified(plural, group)
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {what} "{name}": the object has been modified;'
        " please apply your changes to the latest version and try again",
        _details(plural, group, name),
    )


def invalid(plural: str, group: str, name: str, message: str) -> ApiError:
    what = _qualified(plural, group)
    return ApiError(
        422, "Invalid", f'{what} "{name}" is invalid: {message}', _details(plural, group, name)
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def forbidden(message: str) -> ApiError:
    return ApiError(403, "Forbidden", message)


def method_not_allowed(message: str = "the server does not allow this method") -> ApiError:
    return ApiError(405, "MethodNotAllowed", message)


def unsupported_media_type(content_type: str) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format: {content_type}",
    )


def expired(requested: int, oldest: int) -> ApiError:
    return ApiError(410, "Expired", f"too old resource version: {requested} ({oldest})")
