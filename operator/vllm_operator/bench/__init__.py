"""The benchmark: latency, concurrency and quality of an OpenAI-compatible vLLM server.

``run_benchmark(config)`` runs in-process and returns a ``BenchReport`` (the CLI
``vllm-operator bench`` is a thin shell over it). No kopf import here: the benchmark Job
runs this package alone.

The runner, report and config are imported when first used, not with the package: the
Job's sandbox container (``vllm-operator sandbox serve``, ``bench.sandbox``) is a
subpackage, and importing a subpackage runs this file first; eager imports here cost every
sandbox start about 0.6 CPU s of modules (aiohttp, the API models) it never uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vllm_operator.bench.config import BenchConfig
    from vllm_operator.bench.report import BenchReport
    from vllm_operator.bench.run_state import Clock, Progress
    from vllm_operator.bench.runner import TransportFactory


async def run_benchmark(
    config: BenchConfig,
    *,
    progress: Progress | None = None,
    transport_factory: TransportFactory | None = None,
    clock: Clock | None = None,
) -> BenchReport:
    """Measure the server ``config`` points at and judge the result."""
    from vllm_operator.bench.report import build_report, open_figures, slo_breached  # noqa: PLC0415
    from vllm_operator.bench.runner import run  # noqa: PLC0415

    state = await run(
        config,
        progress=progress,
        transport_factory=transport_factory,
        clock=clock,
        open_figures=lambda so_far: open_figures(config, so_far),
        breached=lambda so_far, level: slo_breached(config, so_far, level),
    )
    return build_report(config, state)


def __getattr__(name: str) -> object:
    """``BenchConfig`` and ``BenchReport``, imported on first use (see the docstring)."""
    if name == "BenchConfig":
        from vllm_operator.bench.config import BenchConfig  # noqa: PLC0415

        return BenchConfig
    if name == "BenchReport":
        from vllm_operator.bench.report import BenchReport  # noqa: PLC0415

        return BenchReport
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["BenchConfig", "BenchReport", "run_benchmark"]
