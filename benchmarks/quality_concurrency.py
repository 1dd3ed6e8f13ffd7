"""How long does the quality suite take one test at a time, and N at a time?

The built-in suite (13 tests) against a simulator process with an eager profile, unscaled
(real time), at ``--quality-concurrency`` 1, 2, 4 and 8: the wall time of the suite, the
tests passed, and whether every answer is the text the sequential run got (the simulator is
batch-invariant by construction, so any difference here would be the bench's; a real GPU
can differ, see docs/bench.md). Profiles: ``0.22.0-eager`` (fitted to this project's own
H200 run, 48.9 ms per output token) and ``0.16.0-eager`` (the published study's), each with
the recorded answers (short: 281 output tokens for the whole suite), and ``0.22.0-eager``
once more with no recorded answers, so every test runs to its ``maxTokens`` (1,888 tokens in
all): the long-answer case, near the 123 s a real eager server took one test at a time.

Run: ``.venv/bin/python benchmarks/quality_concurrency.py [--levels 1,4]`` (about 6 minutes);
figures go to stdout and benchmarks/results/quality_concurrency.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path
from typing import Any

from vllm_operator.bench import BenchConfig, run_benchmark
from vllm_operator.bench.quality.suite import load_suite
from vllm_operator.sim.runner import SimProcess

RESULTS = Path(__file__).parent / "results" / "quality_concurrency.json"
NO_ANSWERS = "/nonexistent/answers.yaml"
"""A missing answers file: the simulator answers every test with filler up to maxTokens."""
SCENARIOS = {
    "0.22.0-eager": ("0.22.0", []),
    "0.16.0-eager": ("0.16.0", []),
    "0.22.0-eager, max-length answers": ("0.22.0", ["--sim-answers", NO_ANSWERS]),
}


async def suite_run(url: str, concurrency: int) -> dict[str, Any]:
    config = BenchConfig(
        url=url,
        model="sim",
        suite=load_suite("builtin:default"),
        suite_ref="builtin:default",
        prompt_classes=(),
        concurrency=(),
        quality_concurrency=concurrency,
        deadline_seconds=900,
    )
    began = time.perf_counter()
    report = await run_benchmark(config)
    seconds = time.perf_counter() - began
    quality = report.state.candidate.quality
    assert quality is not None
    return {
        "concurrency": concurrency,
        "seconds": round(seconds, 2),
        "passed": quality.passed,
        "total": len(quality.suite.tests),
        "output_tokens": sum(o.record.output_tokens for o in quality.outcomes),
        "answers": {o.test.id: o.record.text for o in quality.outcomes},
    }


async def main(levels: list[int]) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for name, (version, extra) in SCENARIOS.items():
        profile = f"{version}-eager"
        argv = ["sim", "--host", "127.0.0.1", "--port", "0", "--served-model-name", "sim",
                "--sim-warmup-seconds", "0", "--sim-version", version,
                "--sim-profile", profile, *extra]  # fmt: skip
        sim = SimProcess.start(argv)
        try:
            runs = [await suite_run(sim.url, c) for c in levels]
        finally:
            sim.stop()
        first = runs[0]["answers"]
        rows = []
        for run in runs:
            same = sum(1 for k, v in run.pop("answers").items() if first.get(k) == v)
            rows.append({**run, "identical_to_first": same})
        results[name] = rows
        for row in rows:
            print(
                f"{name}: concurrency {row['concurrency']}: {row['seconds']:6.1f} s, "
                f"{row['passed']}/{row['total']} passed, {row['output_tokens']} output tokens, "
                f"{row['identical_to_first']}/{row['total']} answers as at concurrency "
                f"{levels[0]}"
            )
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", default="1,2,4,8")
    args = parser.parse_args()
    out = asyncio.run(main([int(x) for x in args.levels.split(",")]))
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")
