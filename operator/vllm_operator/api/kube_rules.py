"""Kubernetes' own rules for names the spec hands to pods: keys, sub-paths, resources.

A ConfigMap or Secret key becomes a file name in a mounted volume and a ``subPath`` a
directory inside one, so a "/" or ".." there would reach outside the mount; a GPU resource
name that is not an extended resource (``memory``) requests something else. The models use
these checks (with messages that name the fix) and the CRD carries the same rules as a
pattern or, where a pattern cannot say it, a CEL rule.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field, JsonValue

# Kubernetes' rule for ConfigMap and Secret keys (IsConfigMapKey): [-._a-zA-Z0-9]+, at most
# 253 characters, not "." or ".." and not starting with "..". A key becomes a file name in
# a mounted volume, so a "/" or ".." in it would write outside the mount.
CONFIG_KEY_PATTERN = r"^\.?[-_a-zA-Z0-9][-._a-zA-Z0-9]*$"


def check_config_key(value: str) -> str:
    """``value`` if it is a valid ConfigMap/Secret key (IsConfigMapKey)."""
    if not re.fullmatch(CONFIG_KEY_PATTERN, value):
        raise ValueError(
            f"{value[:64]!r} is not a ConfigMap/Secret key: use letters, digits, '-', '_' "
            "and '.', not '.' or '..' and not starting with '..' (no '/': a key is a file "
            "name, not a path)"
        )
    return value


# A DNS-1123 subdomain (names of Secrets, PVCs, ConfigMaps).
NAME_PATTERN = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"

ObjectName = Annotated[
    str,
    Field(min_length=1, max_length=253, pattern=NAME_PATTERN),
]

ConfigKey = Annotated[
    str,
    Field(min_length=1, max_length=253, json_schema_extra={"pattern": CONFIG_KEY_PATTERN}),
    AfterValidator(check_config_key),
]

# An extended resource name (IsExtendedResourceName): domain-prefixed, outside the
# kubernetes.io domain (cpu, memory, ephemeral-storage and hugepages-* are native
# resources, not GPUs) and not starting with the quota prefix "requests.".
GPU_RESOURCE_PATTERN = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[a-zA-Z0-9]([-a-zA-Z0-9_.]*[a-zA-Z0-9])?$"
GPU_RESOURCE_RULES: list[JsonValue] = [
    {
        "rule": "!self.contains('kubernetes.io/') && !self.startsWith('requests.')",
        "message": (
            "gpuResourceName must be an extended resource (e.g. nvidia.com/gpu), not a "
            "kubernetes.io resource or a requests. quota name"
        ),
    }
]
_GPU_FIX = "an extended resource with a domain, e.g. nvidia.com/gpu or amd.com/gpu"


def check_gpu_resource(value: str) -> str:
    """``value`` if it is an extended resource name (IsExtendedResourceName)."""
    shown = repr(value[:64])
    if "/" not in value:
        raise ValueError(
            f"{shown} is a native resource name (like cpu, memory, ephemeral-storage, "
            f"hugepages-*), not a GPU: use {_GPU_FIX}"
        )
    if "kubernetes.io/" in value or value.startswith("requests."):
        raise ValueError(f"{shown} is reserved by Kubernetes: use {_GPU_FIX}")
    domain, name = value.split("/", 1)
    if not re.fullmatch(GPU_RESOURCE_PATTERN, value) or len(name) > 63:
        raise ValueError(f"{shown} is not a valid resource name: use {_GPU_FIX}")
    if len("requests." + domain) > 253:
        raise ValueError(f"the domain of {value[:64]!r}... is too long: use {_GPU_FIX}")
    return value


# No control characters: a NUL or newline in a path renders into the pod (and the bench's
# --dataset argument) as something else than the file meant. The CRD carries it as a pattern.
SUB_PATH_PATTERN = r"^[^\x00-\x1f\x7f]*$"

# The CRD says the same as check_sub_path; CEL without split() so every Kubernetes has it.
SUB_PATH_RULES: list[JsonValue] = [
    {
        "rule": (
            "!self.startsWith('/') && self != '..' && !self.startsWith('../') "
            "&& !self.endsWith('/..') && !self.contains('/../')"
        ),
        "message": "subPath must be a relative path without '..' elements",
    }
]


def check_sub_path(value: str) -> str:
    """``value`` if it is a relative path without '..' elements (Kubernetes' subPath rule)."""
    if not re.fullmatch(SUB_PATH_PATTERN, value):
        raise ValueError(
            f"{value[:64]!r} has a control character (NUL, newline, tab...): a path in a "
            "volume is printable text; rename the file"
        )
    if value.startswith("/"):
        raise ValueError(
            f"{value[:64]!r} is absolute: a subPath is relative to the volume's root "
            "(drop the leading '/')"
        )
    if ".." in value.split("/"):
        raise ValueError(
            f"{value[:64]!r} has a '..' element, which would leave the volume: name a "
            "directory inside it"
        )
    return value
