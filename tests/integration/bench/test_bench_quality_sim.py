"""The quality suite against simulator processes over real HTTP: overlap and the differential.

Overlap is read from the simulator's own ledger (``GET /sim/requests/{id}``: wall-clock
arrival and last token of each request), not from the client: it shows what the server saw
in flight at once.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest
from bench_simproc import MODEL, StartSim
from test_bench_cli_sim import bench

from vllm_operator.api.summary import BenchSummary
from vllm_operator.bench import BenchConfig, run_benchmark
from vllm_operator.bench.quality.suite import load_suite
from vllm_operator.sim import answers

SUITE = load_suite("builtin:default")


def ledger(url: str, request_id: str) -> tuple[float, float]:
    with urllib.request.urlopen(f"{url}/sim/requests/{request_id}", timeout=5) as resp:
        record = json.load(resp)
    return float(record["arrival"]), float(record["last_token"])


def most_at_once(spans: list[tuple[float, float]]) -> int:
    """The most intervals open at one instant (an end before a start at the same time)."""
    events = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans])
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


@pytest.mark.parametrize("concurrency", [1, 4])
async def test_the_server_sees_at_most_n_quality_requests_at_once(
    sim: StartSim, concurrency: int
) -> None:
    # 150 ms before the first token: four requests sent together overlap on any machine
    url = sim("--sim-ttft-ms", "150", "--sim-itl-ms", "1")
    config = BenchConfig(
        url=url,
        model=MODEL,
        suite=SUITE,
        suite_ref="builtin:default",
        prompt_classes=(),
        concurrency=(),
        quality_concurrency=concurrency,
    )
    report = await run_benchmark(config)
    quality = report.state.candidate.quality
    assert quality is not None
    assert [o.test.id for o in quality.outcomes] == SUITE.ids  # suite order
    # the recorded answers pass all but multi-step-reason-1; code-1 is not run (no sandbox)
    assert (quality.passed, quality.refused) == (11, 1)
    ids = [o.record.server_id for o in quality.outcomes]
    assert all(ids)
    spans = [ledger(url, i) for i in ids if i is not None]
    assert most_at_once(spans) == concurrency
    assert report.to_json()["config"]["quality_concurrency"] == concurrency


def test_a_degraded_candidate_fails_the_identical_share_against_its_twin(
    sim: StartSim, tmp_path: Path
) -> None:
    fast = ["--sim-time-scale", "0.05"]
    candidate, baseline = sim(*fast, "--sim-degraded"), sim(*fast)
    summary_path, report_path = tmp_path / "summary.json", tmp_path / "report.json"
    thresholds = {"quality": {"minIdenticalPercent": 90, "minStillPassingPercent": 90}}
    done = bench(
        "--url", candidate, "--baseline-url", baseline, "--prompt-classes", "short",
        "--iterations", "3", "--concurrency", "1", "--requests-per-stream", "1",
        "--trials", "1", "--settle-max-passes", "0", "--deadline-seconds", "90",
        "--thresholds-json", json.dumps(thresholds), "--output", "jsonl", "--allow-code-execution",
        "--summary-path", str(summary_path), "--report-path", str(report_path),
    )  # fmt: skip
    assert done.returncode == 1, done.stderr[-2000:]
    summary = BenchSummary.model_validate_json(summary_path.read_bytes())
    assert summary.verdict == "Failed"
    assert summary.quality is not None
    diff = summary.quality.differential
    assert diff is not None
    # --sim-degraded changes seven recorded answers (six of them from passing to failing)
    book = answers.load()
    changed = [a.id for a in book.answers if a.reply(degraded=True) != a.text]
    assert changed == [
        "classify-2", "structured-output-1", "structured-output-2", "instruct-1", "code-1",
        "summarize-1", "multi-step-reason-1",
    ]  # fmt: skip
    assert (diff.compared, diff.identical, diff.baseline_passed) == (13, 6, 12)
    assert diff.differing == changed
    assert diff.still_passing == 6
    assert diff.lost == changed[:-1]  # multi-step-reason-1 failed on the baseline too
    identical = next(r for r in summary.reasons if "identical to the paired baseline" in r)
    assert identical == (
        "quality differential: 6/13 answers (46.2%) identical to the paired baseline's, "
        "below minIdenticalPercent 90 (differing: classify-2, structured-output-1, "
        "structured-output-2 +4 more)"
    )
    still = next(r for r in summary.reasons if "still pass on the candidate" in r)
    assert "6 of the baseline's 12 passing test(s) (50.0%)" in still
    assert "below minStillPassingPercent 90 (no longer passing: " in still
    report = json.loads(report_path.read_text())
    rows = report["quality"]["differential"]["tests"]
    assert [r["id"] for r in rows] == SUITE.ids
    assert [r["id"] for r in rows if not r["identical"]] == changed
    assert sum(r["baseline_passed"] for r in rows) == 12
    assert sum(r["candidate_passed"] for r in rows) == 6
    assert report["quality"]["differential"]["identical_percent"] == 46.15
    assert report["baseline"]["quality"]["passed"] == 12


def test_twins_answer_identically_and_pass(sim: StartSim, tmp_path: Path) -> None:
    fast = ["--sim-time-scale", "0.05"]
    candidate, baseline = sim(*fast), sim(*fast)
    summary_path = tmp_path / "summary.json"
    thresholds = {"quality": {"minIdenticalPercent": 100, "minStillPassingPercent": 100}}
    done = bench(
        "--url", candidate, "--baseline-url", baseline, "--prompt-classes", "short",
        "--iterations", "3", "--concurrency", "1", "--requests-per-stream", "1",
        "--trials", "1", "--settle-max-passes", "0", "--deadline-seconds", "90",
        "--thresholds-json", json.dumps(thresholds), "--output", "jsonl", "--allow-code-execution",
        "--summary-path", str(summary_path),
    )  # fmt: skip
    summary = BenchSummary.model_validate_json(summary_path.read_bytes())
    assert summary.quality is not None
    assert summary.quality.differential is not None
    assert summary.quality.differential.identical == 13
    assert not [r for r in summary.reasons if "below min" in r], summary.reasons
    assert any("13/13 answers (100.0%) identical" in r for r in summary.reasons)
    assert done.returncode in (0, 1), done.stderr[-2000:]  # 1: a noisy latency comparison
