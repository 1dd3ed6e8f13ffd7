"""One thing the gate noticed, with how much it weighs; shared by the gate's rule modules."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["fail", "error", "inconclusive", "note"]


@dataclass(frozen=True)
class Finding:
    """One thing the gate noticed."""

    severity: Severity
    text: str
