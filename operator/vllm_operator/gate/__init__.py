"""The promotion gate: a pure verdict on a benchmark summary, shared by bench and operator.

``verdict(summary, thresholds, baseline, *, require_paired=False)`` is the only entry
point; ``classes`` names the request error classes both sides count; ``interval`` and
``regression`` decide regressions on confidence intervals over per-trial figures.
"""

from vllm_operator.gate.classes import ERROR_CLASSES, kind_of
from vllm_operator.gate.verdict import MIN_LATENCY_SAMPLES, verdict

__all__ = ["ERROR_CLASSES", "MIN_LATENCY_SAMPLES", "kind_of", "verdict"]
