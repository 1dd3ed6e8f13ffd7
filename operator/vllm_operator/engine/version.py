"""vLLM versions: parsing, comparison and extraction from image references.

A version is compared numerically (0.9 < 0.10). Pre-release and local suffixes
(``0.17.0rc1``, ``0.16.0+cu129``) are kept for display but ignored for policy: the flag
set of a release candidate is that of its release.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import total_ordering

_VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?([A-Za-z0-9.+\-]*)$")
# The last path component of an image reference, without any digest: "vllm-openai:v0.17.0".
_TAG_RE = re.compile(r":(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127})$")


@total_ordering
@dataclass(frozen=True)
class Version:
    """A vLLM release number; ``suffix`` is informational only."""

    major: int
    minor: int
    patch: int = 0
    suffix: str = ""

    @classmethod
    def parse(cls, text: str) -> Version:
        """Parse ``0.17.0``, ``v0.17.0``, ``0.17`` or ``0.17.0rc1``; else raise ``ValueError``."""
        m = _VERSION_RE.match(text.strip())
        if not m:
            raise ValueError(f"not a vLLM version: {text!r} (expected X.Y.Z, e.g. 0.17.0)")
        return cls(int(m.group(1)), int(m.group(2)), int(m.group(3) or 0), m.group(4) or "")

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.major, self.minor, self.patch)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self.key < other.key

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}{self.suffix}"


def v(text: str) -> Version:
    """Shorthand for tables: ``v("0.17.0")``."""
    return Version.parse(text)


def version_from_image(image: str) -> Version | None:
    """The vLLM version named by an image tag ``vX.Y.Z`` (or ``X.Y.Z``), else ``None``.

    Digests (``@sha256:...``) and unversioned tags (``latest``, ``nightly``) give ``None``:
    the caller must then require an explicit version.
    """
    if "@" in image:
        return None
    last = image.rsplit("/", 1)[-1]
    m = _TAG_RE.search(last)
    if not m:
        return None
    try:
        return Version.parse(m.group("tag"))
    except ValueError:
        return None
