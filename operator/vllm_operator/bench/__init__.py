"""The benchmark: latency, concurrency and quality of an OpenAI-compatible vLLM server.

``run_benchmark(config)`` runs in-process and returns a ``BenchReport`` (the CLI
``vllm-operator bench`` is a thin shell over it). No kopf import here: the benchmark Job
runs this package alone.
"""

from __future__ import annotations

from vllm_operator.bench.config import BenchConfig
from vllm_operator.bench.report import BenchReport, build_report, open_figures, slo_breached
from vllm_operator.bench.run_state import Clock, Progress
from vllm_operator.bench.runner import TransportFactory, run


async def run_benchmark(
    config: BenchConfig,
    *,
    progress: Progress | None = None,
    transport_factory: TransportFactory | None = None,
    clock: Clock | None = None,
) -> BenchReport:
    """Measure the server ``config`` points at and judge the result."""
    state = await run(
        config,
        progress=progress,
        transport_factory=transport_factory,
        clock=clock,
        open_figures=lambda so_far: open_figures(config, so_far),
        breached=lambda so_far, level: slo_breached(config, so_far, level),
    )
    return build_report(config, state)


__all__ = ["BenchConfig", "BenchReport", "run_benchmark"]
