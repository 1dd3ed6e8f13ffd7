"""`vllm-operator report`: the page holds both revisions, escapes the report, stays bounded.

What a browser shows is checked in tests/integration/report (headless Chromium); here the
page's content is read as text: the figures' JSON data island (what plotly draws), the
verdict and quality sections, the Content-Security-Policy, and the command's exit codes
and named errors for files that are not reports.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from report_fixtures import HOSTILE, hostile, load_report, study_report

from vllm_operator.bench.page import charts, view
from vllm_operator.bench.page.document import render_report
from vllm_operator.commands import main

ISLAND = re.compile(r'<script type="application/json" id="report-figures">(.*?)</script>', re.S)


def page(report: dict[str, Any], other: dict[str, Any] | None = None) -> str:
    parsed = view.parse(report, "REPORT")
    return render_report(parsed, None if other is None else view.parse(other, "B"), "old.json")


def figures(text: str) -> dict[str, dict[str, Any]]:
    found = ISLAND.search(text)
    assert found is not None
    return {f["id"]: f["figure"] for f in json.loads(found.group(1))}


def drawn(figure: dict[str, Any], role: str) -> int:
    """Points of ``role``'s traces in a figure (what plotly would draw)."""
    return sum(
        sum(1 for v in t.get("y", []) if v is not None)
        for t in figure["data"]
        if t.get("meta") == role
    )


def write(tmp_path: Path, name: str, data: object) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


def test_study_page_has_both_revisions_in_every_chart_the_verdict_and_quality() -> None:
    text = page(study_report())
    figs = figures(text)
    assert set(figs) == {"study-latency", "study-ttft", "study-throughput"}
    for fig in figs.values():
        assert drawn(fig, "candidate") > 0
        assert drawn(fig, "baseline") > 0
    latency = figs["study-latency"]["data"]
    assert {t["meta"]: sorted(set(t["x"])) for t in latency} == {
        "candidate": ["long", "medium", "short"],
        "baseline": ["long", "medium", "short"],
    }
    assert drawn(figs["study-latency"], "candidate") == 9  # 3 classes x 3 trials
    assert "Verdict: FAILED" in text
    assert "+20.0% vs baseline 900 ms" in text
    assert "candidate 12/13 passed (default); baseline 12/13 passed (default)" in text
    assert text.count('<td class="fail">FAIL</td>') == 2  # test-3 on both
    assert "same answer as the baseline: 11/13 (84.6%)" in text
    assert "baseline&#x27;s passes still passing: 12/12 (100.0%)" in text
    assert text.count("<td>differs</td>") == 2


def test_load_page_draws_percentiles_distributions_and_throughput_for_both() -> None:
    text = page(load_report())
    figs = figures(text)
    assert set(figs) == {"load-percentiles", "load-ttft-ms", "load-itl-ms", "load-throughput"}
    for fig in figs.values():
        assert drawn(fig, "candidate") > 0
        assert drawn(fig, "baseline") > 0
    curves = figs["load-percentiles"]["data"]
    assert len(curves) == 4 * 2 * 4  # metrics x revisions x percentiles
    p99 = next(
        t
        for t in curves
        if t["meta"] == "candidate" and t["name"].endswith(" p99") and t["xaxis"] == "x"
    )
    assert p99["x"] == [5.0, 10.0, 20.0]
    assert p99["y"][2] > p99["y"][0]  # TTFT p99 grows with the rate
    boxes = figs["load-ttft-ms"]["data"]
    assert [(t["type"], t["meta"]) for t in boxes] == [("box", "candidate"), ("box", "baseline")]
    assert sorted(set(boxes[0]["x"])) == ["10 requests/s", "20 requests/s", "5 requests/s"]
    assert drawn(figs["load-ttft-ms"], "candidate") <= 3 * 2 * 120
    shapes = figs["load-throughput"]["layout"]["shapes"]
    assert {s["x0"] for s in shapes} == {10.0, 20.0}  # capacity and where the sweep stopped
    assert "capacity: 10 requests/s" in text
    assert "the sweep stopped at 20 requests/s" in text
    assert "open loop, Poisson arrivals at 5, 10, 20 requests/s" in text
    assert "TTFT p99 812.4 ms, limit 500 ms: SLO breached" in text


def test_without_a_baseline_the_page_says_so_and_draws_the_candidate() -> None:
    text = page(study_report(baseline=False, outcome=None))
    assert "none in this report" in text
    assert "No verdict" in text
    for fig in figures(text).values():
        assert drawn(fig, "candidate") > 0
        assert drawn(fig, "baseline") == 0


def test_baseline_from_another_report_is_its_candidate() -> None:
    mine = load_report(baseline=False)
    other = load_report(baseline=False)
    for run in other["load"]["runs"]:
        run["percentiles"]["ttft_ms"]["p99"] = 1.0
    figs = figures(page(mine, other))
    for fig in figs.values():
        assert drawn(fig, "baseline") > 0
    curves = figs["load-percentiles"]["data"]
    base = next(
        t
        for t in curves
        if t["meta"] == "baseline" and t["name"].endswith(" p99") and t["xaxis"] == "x"
    )
    assert base["y"] == [1.0, 1.0, 1.0]


def test_every_report_string_is_escaped_and_only_the_pages_own_scripts_may_run() -> None:
    for report in (hostile(study_report()), hostile(load_report())):
        text = page(report)
        assert HOSTILE not in text
        for tag in ("<script>window", '<img src="x"', '<a href="javascript', "<!--"):
            assert tag not in text
        assert html.escape(HOSTILE) in text  # shown, as text
        scripts = re.findall(r"<script([^>]*)>(.*?)</script>", text, re.S)
        assert [attrs for attrs, _ in scripts] == [
            "",
            ' type="application/json" id="report-figures"',
            "",
        ]
        island = scripts[1][1]
        assert "<" not in island
        assert ">" not in island
        policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', text)
        assert policy is not None
        hashes = set(re.findall(r"'sha256-([^']+)'", html.unescape(policy.group(1))))
        for _, source in (scripts[0], scripts[2]):
            digest = base64.b64encode(hashlib.sha256(source.encode()).digest()).decode()
            assert digest in hashes
        assert "default-src 'none'" in html.unescape(policy.group(1))


def test_a_huge_report_draws_a_bounded_page() -> None:
    report = load_report(levels=tuple(float(x) for x in range(1, 17)), trials=1, samples=10)
    sample = report["load"]["runs"][0]["samples"][0]
    for run in report["load"]["runs"]:  # 16 levels x 2 revisions x 2,100 samples
        run["samples"] = [dict(sample, t=i * 0.01) for i in range(2_100)]
    parsed = view.parse(json.loads(json.dumps(report)), "REPORT")
    assert parsed.load is not None
    assert all(len(r.samples) == view.MAX_SAMPLES for r in parsed.load.runs)
    assert parsed.load.runs[0].samples[-1].t == pytest.approx(20.99)  # thinned evenly
    text = render_report(parsed)
    figs = figures(text)
    for name in ("load-ttft-ms", "load-itl-ms"):
        total = drawn(figs[name], "candidate") + drawn(figs[name], "baseline")
        assert 30_000 <= total <= charts.MAX_POINTS_PER_CHART < 16 * 2 * view.MAX_SAMPLES
    assert len(text) < 7_000_000  # plotly.js is 4.8 MB of it


def test_strings_and_lists_are_clipped() -> None:
    report = study_report()
    report["verdict"]["reasons"] = ["x" * 50_000] * 1_000
    report["config"]["model"] = "m" * 10_000
    parsed = view.parse(report, "REPORT")
    assert parsed.verdict is not None
    assert len(parsed.verdict.reasons) == view.MAX_REASONS
    assert len(parsed.verdict.reasons[0]) == view.MAX_TEXT
    assert len(parsed.config.model) == view.MAX_NAME


def run_cli(*args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["report", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_command_writes_the_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = write(tmp_path, "r.json", study_report())
    code, out, err = run_cli(str(src), "-o", str(tmp_path / "r.html"), capsys=capsys)
    assert (code, err) == (0, "")
    assert out.startswith(f"wrote {tmp_path / 'r.html'} (")
    assert out.endswith("MB): Failed\n")
    assert "Verdict: FAILED" in (tmp_path / "r.html").read_text()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temp left


def test_dash_writes_the_page_to_stdout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = write(tmp_path, "r.json", study_report())
    code, out, err = run_cli(str(src), "-o", "-", capsys=capsys)
    assert (code, err) == (0, "")
    assert out.startswith("<!DOCTYPE html>")
    assert out.endswith("</body></html>\n")


def test_a_jobs_log_is_a_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = [
        json.dumps({"event": "progress", "phase": "latency"}),
        "some text the Job printed",
        json.dumps({"event": "report", "report": study_report(outcome="Passed")}),
    ]
    src = write(tmp_path, "job.log", "\n".join(lines) + "\n")
    code, out, _ = run_cli(str(src), "-o", str(tmp_path / "r.html"), capsys=capsys)
    assert code == 0
    assert out.endswith(": Passed\n")


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("not json at all", "REPORT {path}: not JSON, and no report event among its lines"),
        ('{"schema": "other/v1"}', "REPORT {path}: not a benchmark report (schema 'other/v1'"),
        ("[1, 2]", "REPORT {path}: not a benchmark report (schema 'list'"),
        ("[" * 100 + "]" * 100, "nested deeper than 48 levels"),
    ],
)
def test_a_malformed_report_is_a_named_error_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, expected: str
) -> None:
    src = write(tmp_path, "bad.json", content)
    code, out, err = run_cli(str(src), "-o", str(tmp_path / "r.html"), capsys=capsys)
    assert code == 2
    assert out == ""
    assert expected.format(path=src) in err
    assert "Traceback" not in err
    assert not (tmp_path / "r.html").exists()


def test_a_wrong_field_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = load_report()
    report["load"]["runs"][3]["level"] = "fast"
    src = write(tmp_path, "bad.json", report)
    code, _, err = run_cli(str(src), "-o", str(tmp_path / "r.html"), capsys=capsys)
    assert code == 2
    assert f"REPORT {src}: load.runs.3.level: Input should be a valid number" in err


def test_absurd_numbers_are_named_or_dropped() -> None:
    report = load_report()
    report["load"]["runs"][0]["trial"] = 10**100
    with pytest.raises(view.ReportError, match=r"load\.runs\.0\.trial: Input should be less"):
        view.parse(report, "REPORT")
    report = load_report()
    report["load"]["runs"][0]["percentiles"]["ttft_ms"]["p99"] = float("nan")
    report["load"]["runs"][0]["samples"][0]["ttft_ms"] = float("inf")
    parsed = view.parse(report, "REPORT")
    assert parsed.load is not None
    run = parsed.load.runs[0]
    assert run.percentiles.ttft_ms is not None
    assert (run.percentiles.ttft_ms.p99, run.samples[0].ttft_ms) == (None, None)
    island = ISLAND.search(render_report(parsed))
    assert island is not None
    assert "NaN" not in island.group(1)  # JSON.parse would refuse the page's figures
    assert "Infinity" not in island.group(1)


def test_unreadable_and_oversized_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(str(tmp_path / "absent.json"), "-o", "x.html", capsys=capsys)
    assert code == 2
    assert "cannot read" in err
    big = tmp_path / "big.json"
    with big.open("wb") as handle:
        handle.truncate(view.MAX_REPORT_BYTES + 10)  # sparse: no disk used
    code, _, err = run_cli(str(big), "-o", str(tmp_path / "r.html"), capsys=capsys)
    assert code == 2
    assert "is larger than 128 MiB" in err


def test_comparing_a_study_with_a_load_sweep_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    study = write(tmp_path, "s.json", study_report())
    sweep = write(tmp_path, "l.json", load_report())
    code, _, err = run_cli(
        str(sweep), "--baseline", str(study), "-o", str(tmp_path / "r.html"), capsys=capsys
    )
    assert code == 2
    assert f"--baseline: {study} is a study report and REPORT is a load report" in err


def test_without_plotly_the_command_says_what_to_install(tmp_path: Path) -> None:
    src = write(tmp_path, "r.json", study_report())
    code = (
        "import sys; sys.modules['plotly'] = None\n"  # as if plotly were not installed
        "from vllm_operator.commands import main\n"
        f"raise SystemExit(main(['report', {str(src)!r}, '-o', {str(tmp_path / 'r.html')!r}]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 2
    assert "plotly: not installed (fix: pip install 'vllm-operator[report]'" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_real_sweeps_report_draws_both_revisions() -> None:
    """A report the load sweep wrote (branch issue-25s at 18b7d20: a paired open-loop sweep
    at 5/12/30/60 requests/s against simulators, stopped at 30; samples thinned to 20 a run
    to keep the file small), so the page follows the sweep's real output, not only the
    contract's example."""
    data = json.loads((Path(__file__).parent / "data" / "load-report-sweep.json").read_text())
    text = page(data)
    figs = figures(text)
    assert set(figs) == {"load-percentiles", "load-ttft-ms", "load-itl-ms", "load-throughput"}
    for fig in figs.values():
        assert drawn(fig, "candidate") > 0
        assert drawn(fig, "baseline") > 0
    assert "the sweep stopped at 30 requests/s" in text
    assert "ttft p99 at 30 req/s: 1318 ms [999, 1739] above the 300 ms limit" in text
