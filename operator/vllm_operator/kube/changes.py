"""Write only on change: whether a JSON merge patch would change an object.

The reconcile runs on every event of every child, and most passes decide what the last
one decided. A patch that changes nothing still costs an API request, a new
resourceVersion on some servers and a watch event that triggers yet another pass; so the
shell asks ``changes`` first and skips the no-op. Pure (no I/O): the object is the one the
cache holds, read-your-own-writes included (``own_writes``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# A patch nested deeper than this is sent as is (no object the operator writes comes close).
MAX_DEPTH = 32


def changes(obj: Mapping[str, Any] | None, patch: Mapping[str, Any], depth: int = 0) -> bool:
    """Whether applying the JSON merge patch ``patch`` (RFC 7396) to ``obj`` changes it.

    ``None`` as a value removes a key (a change only when the key is there); a mapping
    merges into a mapping; anything else replaces, so it changes unless equal. No object
    (``obj is None``) or a patch too deep to compare counts as a change.
    """
    if obj is None or depth > MAX_DEPTH:
        return True
    for key, value in patch.items():
        if value is None:
            if key in obj:
                return True
        elif isinstance(value, Mapping):
            current = obj.get(key)
            if not isinstance(current, Mapping):  # absent or not an object: replaced
                return True
            if changes(current, value, depth + 1):
                return True
        elif key not in obj or obj[key] != value:
            return True
    return False
