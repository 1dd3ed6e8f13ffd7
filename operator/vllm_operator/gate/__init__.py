"""The promotion gate: a pure verdict on a benchmark summary, shared by bench and operator.

``verdict(summary, thresholds, baseline, *, require_paired=False)`` is the entry point, and
``open_figures`` (on the same judgement) names the figures more trials could still decide;
``classes`` names the request error classes both sides count; ``interval``, ``comparison``
and ``regression`` decide regressions on confidence intervals over per-trial figures,
``tails`` and ``slo`` a load sweep's limits on counts above them.
"""

from vllm_operator.gate.classes import ERROR_CLASSES, kind_of
from vllm_operator.gate.verdict import MIN_LATENCY_SAMPLES, open_figures, verdict

__all__ = ["ERROR_CLASSES", "MIN_LATENCY_SAMPLES", "kind_of", "open_figures", "verdict"]
