"""Reading the benchmark's progress from its log: the newest event, as a short line.

``vllm-operator bench`` in a Job writes one JSON object per event (``bench/progress.py``:
``{"event": ..., "t": ..., fields}``). The operator (status message and a
BenchmarkProgress Event) and the demo (its live line) show where a run is from the newest
of those lines. The reading is generic on purpose: an event is shown by its phase (the
``phase`` field, else the event's name), then whichever of ``class``, ``level``, ``trial``
and ``id`` it carries, so an event kind the bench adds later shows up without a change
here. Everything read is bounded: lines past ``MAX_LINE`` characters (the final report) are
skipped, values are cut short.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

MAX_LINE = 4096
"""Longest log line read as a progress event; the final report is longer and skipped."""

MAX_VALUE = 48
"""Longest text taken from any one field."""

NOW = "; now: "
"""Joins a Benchmarking status message and where the run is (readers split on it)."""

# Events that say nothing about where a run is.
_QUIET = frozenset({"start"})


def _text(value: object) -> str:
    text = str(value).replace("\n", " ").replace("\r", " ")
    return text if len(text) <= MAX_VALUE else text[: MAX_VALUE - 3] + "..."


def parse_event(line: str) -> dict[str, Any] | None:
    """One progress event from a log line, or None (not JSON, no ``event``, too long)."""
    line = line.strip()
    if not line.startswith("{") or len(line) > MAX_LINE:
        return None
    try:
        data = json.loads(line)
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("event"), str):
        return None
    return data


def latest_event(log: str) -> dict[str, Any] | None:
    """The newest progress event in a log (tail), skipping quiet ones."""
    for line in reversed(log.splitlines()):
        event = parse_event(line)
        if event is not None and event["event"] not in _QUIET:
            return event
    return None


def _int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    return None


def describe(event: Mapping[str, Any], trials: int | None = None) -> str:
    """``event`` as a short line: phase, prompt class or streams, trial k of n, test.

    ``trials`` is the planned number of trials (the spec's ``gate.trials``); an event's own
    ``trials`` field wins, and a trial beyond either is shown as ``trial k``.
    """
    phase = event.get("phase") or event.get("event") or "?"
    parts = [_text(phase)]
    if "class" in event:
        index = _int(event.get("index"))
        number = f" #{index + 1}" if index is not None else ""
        parts.append(f"{_text(event['class'])} prompts{number}")
    level = _int(event.get("level"))
    if level is not None:
        parts.append(f"{level} stream" + ("s" if level != 1 else ""))
    trial = _int(event.get("trial"))
    if trial is not None:
        total = _int(event.get("trials")) or trials
        parts.append(f"trial {trial} of {total}" if total and total >= trial else f"trial {trial}")
    if "id" in event:
        parts.append(f"test {_text(event['id'])}")
    server = event.get("server")
    text = ", ".join(parts)
    if isinstance(server, str) and server and server != "candidate":
        text = f"{_text(server)}: {text}"
    return text


_TRIAL = re.compile(r"\btrial (\d+)\b")


def stage(line: str, first_look: int = 1) -> str:
    """The stage of a run a ``describe`` line names: while trials run (either server, any
    figure), ``trials`` up to the first look (``first_look``: ``gate.trials``) and ``trial
    k`` for each further one (the gate needed more); else its phase (settle, quality, ...).
    An Event per stage, not per line, keeps a gate's BenchmarkProgress Events to about one
    per look: a handful in ``kubectl describe``, not one per 30 s read."""
    found = _TRIAL.search(line)
    if found:
        trial = int(found.group(1))
        return "trials" if trial <= first_look else f"trial {trial}"
    return line.split(": ", 1)[-1].split(",", 1)[0]
