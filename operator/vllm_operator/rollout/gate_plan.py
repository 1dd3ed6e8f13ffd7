"""Warnings about a spec's gate plan: tail limits it cannot decide within its time. Pure.

``gate.decidable`` does the counting; this adds what only the rendered Job knows (the bench's
deadline inside ``timeoutSeconds``) and which servers are measured (a baseline twin doubles
every round: ``twin``, and ``auto``, whose usual case it is; ``stored`` measures the candidate
alone). ``render`` prints the warnings to stderr; the planner turns them into a
``GatePlanDecides`` condition and one ``GatePlanTooShort`` Event each per generation.
"""

from __future__ import annotations

from vllm_operator.api.gate_spec import GateSpec
from vllm_operator.gate.decidable import shortfalls
from vllm_operator.render.job import DEADLINE_MARGIN_SECONDS, bench_deadline


def plan_warnings(gate: GateSpec) -> list[str]:
    """One line per tail limit the gate's plan cannot decide within ``timeoutSeconds``."""
    if not gate.enabled:
        return []
    servers = 1 if gate.baseline.mode == "stored" else 2
    found = shortfalls(
        gate,
        bench_deadline(gate.timeout_seconds),
        servers=servers,
        margin_seconds=DEADLINE_MARGIN_SECONDS,
    )
    return [s.message for s in found]
