"""List and watch options as the API server checks and serves them.

Before this, a list accepted any option (``resourceVersionMatch`` without a version, a
garbage ``continue`` token) and paginated by position, so an item was skipped when an
earlier one was deleted between two pages. Now, as on a real server:
- options are validated (``ValidateListOptions``): 422 ``ListOptions.meta.k8s.io "" is
  invalid`` with the same field errors;
- ``resourceVersion`` with ``resourceVersionMatch=Exact`` lists the state at exactly that
  version, rebuilt from the store's change log; a compacted version is 410, a future one 504;
- a ``continue`` token is opaque (base64 of the list's resourceVersion and the key after
  which the next page starts), so later pages come from the same snapshot and survive
  deletes; a token that does not decode is 400, one whose snapshot was compacted is 410.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Mapping
from typing import Any

from . import apierrors
from . import fielderrors as fe
from .apierrors import ApiError
from .store import Store, StoreKey, name_of, namespace_of

EXACT, NOT_OLDER = "Exact", "NotOlderThan"
_TOKEN_VERSION = "meta.k8s.io/v1"
_MAX_TOKEN = 4096


def _invalid(errors: list[fe.FieldError]) -> ApiError:
    return fe.invalid_error("ListOptions", "meta.k8s.io", "", errors)


def validate_options(params: Mapping[str, str], *, watch: bool) -> None:
    """422 for options a real server refuses (apimachinery's ValidateListOptions)."""
    match = params.get("resourceVersionMatch") or ""
    version = params.get("resourceVersion") or ""
    cont = params.get("continue") or ""
    initial = params.get("sendInitialEvents")
    errors: list[fe.FieldError] = []
    if watch:
        if initial is not None:
            if match != NOT_OLDER:
                detail = f"sendInitialEvents requires setting resourceVersionMatch to {NOT_OLDER}"
                errors.append(fe.forbidden("resourceVersionMatch", detail))
            if params.get("allowWatchBookmarks") != "true":
                detail = "sendInitialEvents requires setting allowWatchBookmarks to true"
                errors.append(fe.forbidden("allowWatchBookmarks", detail))
        if match:
            if initial is None:
                detail = (
                    "resourceVersionMatch is forbidden for watch unless sendInitialEvents"
                    " is provided"
                )
                errors.append(fe.forbidden("resourceVersionMatch", detail))
            if match != NOT_OLDER:
                errors.append(fe.not_supported("resourceVersionMatch", match, [NOT_OLDER]))
            if cont:
                detail = "resourceVersionMatch is forbidden when continue is provided"
                errors.append(fe.forbidden("resourceVersionMatch", detail))
    else:
        if match:
            if not version:
                detail = "resourceVersionMatch is forbidden unless resourceVersion is provided"
                errors.append(fe.forbidden("resourceVersionMatch", detail))
            if cont:
                detail = "resourceVersionMatch is forbidden when continue is provided"
                errors.append(fe.forbidden("resourceVersionMatch", detail))
            if match not in (EXACT, NOT_OLDER):
                errors.append(
                    fe.not_supported("resourceVersionMatch", match, [EXACT, NOT_OLDER, ""])
                )
            if match == EXACT and version == "0":
                detail = 'resourceVersionMatch "exact" is forbidden for resourceVersion "0"'
                errors.append(fe.forbidden("resourceVersionMatch", detail))
        if initial is not None:
            errors.append(
                fe.forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list")
            )
    if errors:
        raise _invalid(errors)


def parse_version(text: str) -> int:
    if text and not text.isdigit():
        raise apierrors.bad_request(f"invalid resourceVersion: {text!r}")
    return int(text) if text else 0


def too_large(requested: int, current: int) -> ApiError:
    """What a server says when asked for a version it has not reached (it waits ~3 s)."""
    return ApiError(
        504,
        "Timeout",
        f"Too large resource version: {requested}, current: {current}",
        {
            "causes": [
                {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
            ]
        },
    )


# --- continue tokens --------------------------------------------------------------------
def encode_continue(rv: int, after: tuple[str, str]) -> str:
    key = f"{after[0]}/{after[1]}"
    raw = json.dumps({"v": _TOKEN_VERSION, "rv": rv, "start": key + "\x00"}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_continue(token: str) -> tuple[int, tuple[str, str]]:
    """(the snapshot's resourceVersion, the key the next page starts after) or 400."""
    try:
        if len(token) > _MAX_TOKEN:
            raise ValueError("too long")
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        data = json.loads(raw)
        if not isinstance(data, dict) or data.get("v") != _TOKEN_VERSION:
            raise ValueError("unknown version")
        rv, start = data.get("rv"), data.get("start")
        if not isinstance(rv, int) or rv <= 0 or not isinstance(start, str):
            raise ValueError("missing rv or start")
        namespace, _, name = start.removesuffix("\x00").partition("/")
        return rv, (namespace, name)
    except (ValueError, binascii.Error, UnicodeDecodeError) as exc:
        raise apierrors.bad_request(f"invalid continue token: {exc}") from exc


def _stale_continue() -> ApiError:
    return ApiError(
        410,
        "Expired",
        "The provided continue parameter is too old to display a consistent list result. You"
        " can start a new list without the continue parameter.",
    )


# --- the list ---------------------------------------------------------------------------
def list_objects(
    store: Store,
    store_key: StoreKey,
    namespace: str | None,
    params: Mapping[str, str],
    matches: Callable[[dict[str, Any]], bool],
) -> tuple[list[dict[str, Any]], int, str | None, int | None]:
    """(this page's objects, the list's resourceVersion, the next continue token or None,
    remainingItemCount or None), as a real server pages a list."""
    validate_options(params, watch=False)
    limit_text = params.get("limit") or "0"
    limit = int(limit_text) if limit_text.isdigit() else 0
    after: tuple[str, str] | None = None
    if params.get("continue"):
        rv, after = decode_continue(str(params["continue"]))
        if rv > store.rv:
            raise apierrors.bad_request("invalid continue token: resourceVersion is in the future")
        try:
            objects = store.snapshot(store_key, namespace, rv)
        except ApiError as exc:
            raise _stale_continue() from exc
    else:
        requested = parse_version(params.get("resourceVersion") or "")
        if requested > store.rv:
            raise too_large(requested, store.rv)
        if params.get("resourceVersionMatch") == EXACT:
            rv, objects = requested, store.snapshot(store_key, namespace, requested)
        else:
            rv, objects = store.rv, store.select(store_key, namespace)
    found = [obj for obj in objects if matches(obj)]
    if after is not None:
        found = [obj for obj in found if (namespace_of(obj), name_of(obj)) > after]
    if not limit or len(found) <= limit:
        return found, rv, None, None
    page = found[:limit]
    last = page[-1]
    token = encode_continue(rv, (namespace_of(last), name_of(last)))
    return page, rv, token, len(found) - limit
