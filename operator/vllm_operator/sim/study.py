"""The published upgrade study's figures, loaded from one cited data file.

The simulator's profile fit, the simulator and benchmark reproduction scripts and the
reproduction tests all compare with the same numbers; keeping them in
``data/published_study.yaml`` means a correction is made once.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources

import yaml

CLASSES = ("short", "medium", "long")
STREAMS = (1, 2, 4, 8)


@dataclass(frozen=True)
class StudyConfiguration:
    """One configuration of the study: how to emulate it and what was published."""

    name: str
    label: str
    sim_args: tuple[str, ...]
    latency_ms: dict[str, float]
    tokens_per_second: dict[str, float]
    aggregate: dict[int, float]


@cache
def published() -> dict[str, StudyConfiguration]:
    """The study's configurations by profile name (``0.16.0-eager``, ...), in table order."""
    text = resources.files("vllm_operator.sim").joinpath("data/published_study.yaml").read_text()
    raw = yaml.safe_load(text)["configurations"]
    return {
        name: StudyConfiguration(
            name=name,
            label=str(entry["label"]),
            sim_args=tuple(str(a) for a in entry["sim_args"]),
            latency_ms={c: float(entry["latency"][c][0]) for c in CLASSES},
            tokens_per_second={c: float(entry["latency"][c][1]) for c in CLASSES},
            aggregate={int(k): float(val) for k, val in entry["aggregate"].items()},
        )
        for name, entry in raw.items()
    }
