"""Reading a benchmark Job's result: its termination message, else its log.

The Job writes the ``BenchSummary`` JSON to ``/dev/termination-log``; the kubelet copies it
into the pod's status, where the operator reads it with plain pod access. When that is
empty (a crash before writing, a node that truncated it), the log's last line that parses
as a summary is the fallback. Nothing found means no verdict from the figures: the caller
turns that into an Error, never a pass.
"""

from __future__ import annotations

import json

from pydantic import ValidationError

from vllm_operator.api.summary import SUMMARY_SCHEMA, BenchSummary
from vllm_operator.api.summary_checks import contradiction_in
from vllm_operator.rollout.observed import Observed
from vllm_operator.rollout.views import JobView


def parse_summary(text: str | None) -> BenchSummary | None:
    """A BenchSummary from one JSON document, or None when ``text`` is not one."""
    if not text or not text.strip().startswith("{"):
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    if not isinstance(doc, dict) or doc.get("schema", SUMMARY_SCHEMA) != SUMMARY_SCHEMA:
        return None
    # A log line may wrap the summary (e.g. {"summary": {...}}) or carry it bare.
    for candidate in (doc.get("summary"), doc):
        if isinstance(candidate, dict) and candidate.get("schema") == SUMMARY_SCHEMA:
            try:
                return BenchSummary.model_validate(candidate)
            except ValidationError:
                return None
    return None


def refused_summary(text: str | None) -> str | None:
    """Why ``text``, a summary by its schema, was refused for figures that contradict each
    other or are not finite (``api.summary_checks``); None otherwise."""
    if not text or not text.strip().startswith("{"):
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    if not isinstance(doc, dict) or doc.get("schema") != SUMMARY_SCHEMA:
        return None
    try:
        BenchSummary.model_validate(doc)
    except ValidationError as exc:
        return contradiction_in(exc)
    return None


def summary_from_log(log: str | None) -> BenchSummary | None:
    """The last line of ``log`` that is a BenchSummary."""
    for line in reversed((log or "").splitlines()):
        found = parse_summary(line)
        if found is not None:
            return found
    return None


def job_summary(observed: Observed, job: JobView) -> BenchSummary | None:
    """The summary a finished Job left: termination message first, the log second."""
    for pod in observed.job_pods(job):
        for container in pod.containers:
            # FallbackToLogsOnError puts the log's tail here when the file was left empty.
            found = parse_summary(container.termination_message) or summary_from_log(
                container.termination_message
            )
            if found is not None:
                return found
    return summary_from_log(observed.logs.get(job.name))
