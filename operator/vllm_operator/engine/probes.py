"""Probes for a server that does not listen until it is warm and answers slowly when busy.

vLLM opens its port only after loading weights, compiling and capturing CUDA graphs, so
until then every probe gets "connection refused". The startupProbe therefore carries the
whole warm-up budget (period x failureThreshold >= budget) and readiness/liveness start
only after it succeeded. Readiness and liveness are sized so that an engine saturated with
requests, whose HTTP loop answers ``/health`` late, is neither flapped out of the Service
nor restarted. Every number is explained in ``docs/probes.md``.
"""

from __future__ import annotations

import math
from typing import Any

from vllm_operator.engine import tables

HEALTH_PATH = "/health"

# startupProbe: poll every 10 s (a Ready pod is noticed within 10 s of vLLM listening).
STARTUP_PERIOD_SECONDS = 10
STARTUP_TIMEOUT_SECONDS = 5

# readinessProbe: every 5 s; 6 consecutive misses (about 30 s) before leaving the Service.
READINESS_PERIOD_SECONDS = 5
READINESS_TIMEOUT_SECONDS = 5
READINESS_FAILURE_THRESHOLD = 6

# livenessProbe: every 15 s with a 10 s timeout; 10 misses (about 150 s) before a restart,
# so a /health blocked for one to two minutes under load does not throw away a warm engine.
LIVENESS_PERIOD_SECONDS = 15
LIVENESS_TIMEOUT_SECONDS = 10
LIVENESS_FAILURE_THRESHOLD = 10


def default_warmup_budget(compiled: bool) -> int:
    """Seconds a fresh pod may take to listen: by whether it compiles (see docs/probes.md)."""
    return tables.WARMUP_BUDGET_COMPILED if compiled else tables.WARMUP_BUDGET_EAGER


def _http_get(port: int) -> dict[str, Any]:
    return {"path": HEALTH_PATH, "port": port, "scheme": "HTTP"}


def startup_probe(port: int, warmup_budget_seconds: int) -> dict[str, Any]:
    """A startupProbe whose period x failureThreshold covers ``warmup_budget_seconds``."""
    failures = max(1, math.ceil(warmup_budget_seconds / STARTUP_PERIOD_SECONDS))
    return {
        "httpGet": _http_get(port),
        "periodSeconds": STARTUP_PERIOD_SECONDS,
        "timeoutSeconds": STARTUP_TIMEOUT_SECONDS,
        "failureThreshold": failures,
        "successThreshold": 1,
    }


def readiness_probe(port: int) -> dict[str, Any]:
    """Ready while ``/health`` answers 200; tolerant of a slow answer from a busy server."""
    return {
        "httpGet": _http_get(port),
        "periodSeconds": READINESS_PERIOD_SECONDS,
        "timeoutSeconds": READINESS_TIMEOUT_SECONDS,
        "failureThreshold": READINESS_FAILURE_THRESHOLD,
        "successThreshold": 1,
    }


def liveness_probe(port: int) -> dict[str, Any]:
    """Restart only an engine that stays dead (503) or silent for about 150 s."""
    return {
        "httpGet": _http_get(port),
        "periodSeconds": LIVENESS_PERIOD_SECONDS,
        "timeoutSeconds": LIVENESS_TIMEOUT_SECONDS,
        "failureThreshold": LIVENESS_FAILURE_THRESHOLD,
        "successThreshold": 1,
    }


def probes(port: int, compiled: bool, warmup_budget_seconds: int | None) -> dict[str, Any]:
    """The three probes of a vLLM container, keyed as in a core/v1 Container."""
    budget = warmup_budget_seconds or default_warmup_budget(compiled)
    return {
        "startupProbe": startup_probe(port, budget),
        "readinessProbe": readiness_probe(port),
        "livenessProbe": liveness_probe(port),
    }
