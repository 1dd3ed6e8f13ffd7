"""The report states its plan's power beside the SLO figures (issue 40, item 3): the same
statements ``render`` makes for the CR the report was measured with, read back from the
report's recorded plan and bars; a hostile report gives none, never an exception."""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from vllm_operator.api.resource import parse_vllm_deployment
from vllm_operator.bench.human import _power as human_power
from vllm_operator.bench.page.document import _power
from vllm_operator.bench.page.view import parse
from vllm_operator.bench.report_power import power_lines, report_power
from vllm_operator.rollout.gate_plan import plan_power_notes

ROOT = Path(__file__).resolve().parents[3]
RUN = ROOT / "docs" / "calibration" / "h100-slo-perfloor-2026-12-07"


def report() -> dict[str, Any]:
    with gzip.open(RUN / "report-aa1.json.gz") as fh:
        data: dict[str, Any] = json.loads(fh.read())
    return data


def test_a_report_states_what_render_states_for_its_cr() -> None:
    cr = yaml.safe_load((RUN / "gpu-slo-aa-480.yaml").read_text())
    from_cr = plan_power_notes(parse_vllm_deployment(cr).spec.gate)
    from_report = [p.message for p in report_power(report())]
    assert from_report == from_cr
    assert len(from_report) == 4  # TTFT and ITL p99 at 8 and 24 req/s


def test_the_html_page_shows_the_statements_beside_the_load_figures() -> None:
    page = parse(report(), "report")
    assert page.stated_power == power_lines(report())
    html = _power(page.stated_power)
    assert "<h2>Stated power</h2>" in html
    assert "<li>detects TTFT p99 +" in html
    assert "ms or more at 24 req/s</li>" in html
    forged = report()
    forged["stated_power"] = ["detects everything"]  # never read from the file
    assert parse(forged, "report").stated_power == power_lines(report())


def _broken(path: tuple[str, ...], value: object) -> dict[str, Any]:
    data = copy.deepcopy(report())
    here: Any = data
    for key in path[:-1]:
        here = here[key]
    here[path[-1]] = value
    return data


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("config",), "x"),
        (("config", "baseline_url"), None),  # no twin: nothing compared
        (("config", "deadline_seconds"), "450"),
        (("config", "trials"), 0),
        (("config", "max_trials"), 11),
        (("load", "mode"), "concurrency"),
        (("load", "seconds_per_level"), -20),
        (("load", "levels_asked"), {"8": 1}),
        (("summary", "load"), []),
        (("summary", "load", "levels"), [None, 3, "x"]),
    ],
)
def test_a_hostile_report_states_nothing_and_raises_nothing(
    path: tuple[str, ...], value: object
) -> None:
    assert report_power(_broken(path, value)) == []


def test_a_broken_bar_drops_only_its_own_figure() -> None:
    data = copy.deepcopy(report())
    data["summary"]["load"]["levels"][0]["tails"]["ttft.p99"]["regression"]["floor"] = "big"
    messages = [p.message for p in report_power(data)]
    assert len(messages) == 3
    assert not any("TTFT p99" in m and "at 8 req/s" in m for m in messages)


def test_the_text_report_has_a_stated_power_section() -> None:
    data = report()
    # the text tables read the report's JSON and its config's thresholds, nothing else
    bench = SimpleNamespace(config=SimpleNamespace(thresholds=None), to_json=lambda: data)
    lines = human_power(bench)  # type: ignore[arg-type]
    assert lines[0] == "## Stated power"
    assert lines[2:-1] == [f"- {m}" for m in power_lines(data)[1:]]
    assert lines[-1] == ""
    plain = copy.deepcopy(data)
    plain["config"]["baseline_url"] = None
    quiet = SimpleNamespace(config=SimpleNamespace(thresholds=None), to_json=lambda: plain)
    assert human_power(quiet) == []  # type: ignore[arg-type]
