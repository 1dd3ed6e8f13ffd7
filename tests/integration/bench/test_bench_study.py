"""Acceptance: the benchmark reproduces the published study against the simulator's profiles.

Three simulator processes per profile, each time-scaled for what it measures, so the whole
module stays near ten seconds of wall time without measuring noise instead of the server:

- medium and long prompts and the quality suite at a scale that keeps the inter-token gap
  at 1.7 ms or more (the simulator's timers are good to about a millisecond): 0.05 eager
  (a long request takes 1.5 s instead of 30 s), 0.3 throughput;
- short prompts at scale 0.5: a short request is two tokens, and at 0.05 it would last
  23 ms, where a millisecond or two of client and timer jitter is already 5-10%;
- concurrency at the same scales as the first, which keeps the simulator under about
  3,500 tokens/s (it sustains 5,000 on a free core; these machines are shared).

Figures are converted back to model time (latency / scale, tok/s x scale) and compared with
the published tables within 10%. The un-scaled comparison is ``benchmarks/bench_profiles.py``.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from bench_simproc import MODEL, start_sim

from vllm_operator.api.gate_spec import Thresholds
from vllm_operator.api.summary import BenchSummary
from vllm_operator.bench import BenchConfig, BenchReport, run_benchmark
from vllm_operator.bench.prompts import DEFAULT_CLASSES
from vllm_operator.bench.quality.suite import load_suite
from vllm_operator.gate import verdict
from vllm_operator.sim.study import CLASSES, STREAMS, published

# Verdicts on measured times (the module fixture starts its simulators once): in the timing
# phase, alone (conftest.py).
pytestmark = pytest.mark.timing

# name -> (flags, (short, medium, long) latency ms, (1, 2, 4, 8) streams aggregate tok/s)
PUBLISHED = {
    name: (
        c.sim_args,
        tuple(c.latency_ms[k] for k in CLASSES),
        tuple(c.aggregate[s] for s in STREAMS),
    )
    for name, c in published().items()
}
SCALE_SHORT = 0.5
SCALE = {"0.16.0-eager": 0.05, "0.17.0-eager": 0.05, "0.17.0-throughput": 0.3}


@dataclass
class Measured:
    fast: BenchReport
    short: BenchReport
    concurrency: BenchReport
    scale: float

    def normalised(self) -> BenchSummary:
        """One summary in model time, as an un-scaled run would have produced."""
        lat = [
            f.model_copy(
                update={
                    "median_ms": f.median_ms / scale,
                    "ttft_ms": f.ttft_ms / scale,
                    "e2e_tokens_per_second": f.e2e_tokens_per_second * scale,
                    "decode_tokens_per_second": f.decode_tokens_per_second * scale,
                    "trials": [t / scale for t in f.trials],
                }
            )
            for report, scale in ((self.short, SCALE_SHORT), (self.fast, self.scale))
            for f in report.summary.latency
        ]
        conc = [
            f.model_copy(
                update={
                    "aggregate_tokens_per_second": f.aggregate_tokens_per_second * self.scale,
                    "requests_per_second": f.requests_per_second * self.scale,
                    "trials": [t * self.scale for t in f.trials],
                }
            )
            for f in self.concurrency.summary.concurrency
        ]
        errors = {**self.fast.summary.errors}
        for report in (self.short, self.concurrency):
            for name, count in report.summary.errors.items():
                errors[name] = errors.get(name, 0) + count
        return BenchSummary(
            model=MODEL,
            latency=lat,
            concurrency=conc,
            quality=self.fast.summary.quality,
            errors=errors,
        )


async def _measure_latency(
    urls: dict[str, tuple[str, str]],
) -> dict[str, tuple[BenchReport, BenchReport]]:
    suite = load_suite("builtin:default")
    short, rest = DEFAULT_CLASSES[0], DEFAULT_CLASSES[1:]

    async def one(name: str) -> tuple[str, tuple[BenchReport, BenchReport]]:
        fast_url, short_url = urls[name]
        common = {"model": MODEL, "iterations": 3, "warmup": 0, "concurrency": ()}
        fast, slow = await asyncio.gather(
            run_benchmark(
                BenchConfig(
                    url=fast_url,
                    prompt_classes=rest,
                    suite=suite,
                    allow_code_execution=True,
                    **common,
                )  # type: ignore[arg-type]
            ),
            run_benchmark(BenchConfig(url=short_url, prompt_classes=(short,), **common)),  # type: ignore[arg-type]
        )
        return name, (fast, slow)

    return dict(await asyncio.gather(*(one(n) for n in PUBLISHED)))


async def _measure_concurrency(url: str) -> BenchReport:
    config = BenchConfig(
        url=url, model=MODEL, prompt_classes=(), concurrency=(1, 2, 4, 8), requests_per_stream=2
    )
    return await run_benchmark(config)


@pytest.fixture(scope="module")
def measured() -> Iterator[dict[str, Measured]]:
    procs: list[subprocess.Popen[str]] = []

    def start(*args: str) -> str:
        proc, url = start_sim(*args)
        procs.append(proc)
        return url

    try:
        urls = {
            name: (
                start(*flags, "--sim-time-scale", str(SCALE[name])),
                start(*flags, "--sim-time-scale", str(SCALE_SHORT)),
            )
            for name, (flags, _, _) in PUBLISHED.items()
        }
        conc_urls = {
            name: start(*flags, "--sim-time-scale", str(SCALE[name]))
            for name, (flags, _, _) in PUBLISHED.items()
        }
        latency = asyncio.run(_measure_latency(urls))
        out = {}
        for name in PUBLISHED:  # one at a time: concurrency is the CPU-heavy phase
            conc = asyncio.run(_measure_concurrency(conc_urls[name]))
            fast, short = latency[name]
            out[name] = Measured(fast, short, conc, SCALE[name])
        yield out
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=10)


@pytest.mark.parametrize("profile", list(PUBLISHED))
def test_latency_table_within_10_percent(measured: dict[str, Measured], profile: str) -> None:
    summary = measured[profile].normalised()
    _, published, _ = PUBLISHED[profile]
    got = {f.prompt_class: f for f in summary.latency}
    for name, expected in zip(("short", "medium", "long"), published, strict=True):
        figure = got[name]
        assert figure.requests == 3
        assert figure.median_ms == pytest.approx(expected, rel=0.10), name
    # tok/s of the study = output tokens / end-to-end latency, with 2 / 105 / 700 tokens
    assert [got[c.name].output_tokens for c in DEFAULT_CLASSES] == [2, 105, 700]
    medium = got["medium"]
    assert medium.e2e_tokens_per_second == pytest.approx(105 / medium.median_ms * 1000, rel=0.02)


@pytest.mark.parametrize("profile", list(PUBLISHED))
def test_concurrency_table_within_10_percent(measured: dict[str, Measured], profile: str) -> None:
    summary = measured[profile].normalised()
    _, _, published = PUBLISHED[profile]
    got = {f.concurrency: f for f in summary.concurrency}
    # every cell, 1 stream included: with long-prompt concurrency requests (1,024 prompt
    # tokens, 105 output; sim/tokens.py) the study's tables agree with each other
    for level, expected in zip((1, 2, 4, 8), published, strict=True):
        assert got[level].aggregate_tokens_per_second == pytest.approx(expected, rel=0.10), level
        assert got[level].requests == 2 * level


@pytest.mark.parametrize("profile", list(PUBLISHED))
def test_quality_is_12_of_13_with_gross_profit_failing(
    measured: dict[str, Measured], profile: str
) -> None:
    report = measured[profile].fast
    quality = report.summary.quality
    assert quality is not None
    assert (quality.passed, quality.total, quality.failed) == (12, 13, ["multi-step-reason-1"])
    assert report.summary.errors == {}
    tests = report.to_json()["quality"]["tests"]
    gross = next(t for t in tests if t["id"] == "multi-step-reason-1")
    assert "got 3922, expected 9422" in gross["reason"]


def test_gate_rejects_017_eager_against_016_eager(measured: dict[str, Measured]) -> None:
    thresholds = Thresholds.model_validate(
        {"maxRegressionPercent": 10, "quality": {"minPassed": 12}}
    )
    base = measured["0.16.0-eager"].normalised()
    result = verdict(measured["0.17.0-eager"].normalised(), thresholds, base)
    assert result.outcome == "Failed", result.reasons
    assert any(
        r.startswith("2 streams:") and r.endswith("regression beyond the limit")
        for r in result.reasons
    )


def test_gate_passes_017_throughput_against_016_eager(measured: dict[str, Measured]) -> None:
    thresholds = Thresholds.model_validate(
        {"maxRegressionPercent": 10, "quality": {"minPassed": 12}}
    )
    base = measured["0.16.0-eager"].normalised()
    result = verdict(measured["0.17.0-throughput"].normalised(), thresholds, base)
    assert result.outcome == "Passed", result.reasons
