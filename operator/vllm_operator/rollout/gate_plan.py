"""What a spec's gate plan can decide: tail limits it cannot decide within its time, and the
smallest regression of each limited figure it detects (its stated power). Pure.

``gate.decidable`` does the counting; this adds what only the rendered Job knows (the bench's
deadline inside ``timeoutSeconds``) and which servers are measured (a baseline twin doubles
every round: ``twin``, and ``auto``, whose usual case it is; ``stored`` measures the candidate
alone). ``render`` prints the warnings to stderr; the planner turns them into a
``GatePlanDecides`` condition and one ``GatePlanTooShort`` Event each per generation. The
stated power (``gate.power``: "detects TTFT p99 +140 ms or more at 8 req/s") goes beside
them: ``render`` prints it as notes, the condition carries it in its message (status True,
reason PowerStated, when every limit can be decided).
"""

from __future__ import annotations

from vllm_operator.api.gate_spec import GateSpec
from vllm_operator.gate.decidable import shortfalls
from vllm_operator.gate.power import plan_power
from vllm_operator.render.job import DEADLINE_MARGIN_SECONDS, bench_deadline


def _servers(gate: GateSpec) -> int:
    return 1 if gate.baseline.mode == "stored" else 2


def plan_power_notes(gate: GateSpec) -> list[str]:
    """One line per limited figure and level compared with the twin: the smallest regression
    the plan detects with 95% probability (``gate.power``, on the GPU runs' noise model)."""
    if not gate.enabled:
        return []
    found = plan_power(gate, bench_deadline(gate.timeout_seconds), servers=_servers(gate))
    return [p.message for p in found]


def plan_warnings(gate: GateSpec) -> list[str]:
    """One line per tail limit the gate's plan cannot decide within ``timeoutSeconds``."""
    if not gate.enabled:
        return []
    servers = _servers(gate)
    found = shortfalls(
        gate,
        bench_deadline(gate.timeout_seconds),
        servers=servers,
        margin_seconds=DEADLINE_MARGIN_SECONDS,
    )
    return [s.message for s in found]
