"""Reading the bench's progress events: generic, bounded, tolerant of anything else in a log."""

from __future__ import annotations

import json

from vllm_operator.api.progress import MAX_LINE, describe, latest_event, parse_event, stage


def _line(event: str, **fields: object) -> str:
    return json.dumps({"event": event, "t": 1.0, **fields})


def test_the_kinds_the_bench_emits_today() -> None:
    request = {"event": "request", "server": "candidate", "phase": "latency", "class": "medium"}
    assert describe({**request, "index": 1, "trial": 2}, 3) == (
        "latency, medium prompts #2, trial 2 of 3"
    )
    warm = {**request, "phase": "warmup", "index": 0}
    assert describe(warm, 3) == "warmup, medium prompts #1"
    level = {"event": "concurrency", "server": "baseline", "trial": 1, "level": 8, "completed": 32}
    assert describe(level, 3) == "baseline: concurrency, 8 streams, trial 1 of 3"
    assert describe({"event": "warmup", "server": "candidate", "level": 1}) == "warmup, 1 stream"
    quality = {"event": "quality", "server": "candidate", "id": "json-1", "passed": True}
    assert describe(quality) == "quality, test json-1"


def test_an_event_kind_added_later_shows_without_a_change_here() -> None:
    """The lead's gate adds settle passes and extra trial rounds: phase, trial and level
    fields are enough to show them."""
    assert describe({"event": "settle", "level": 4, "trial": 2}, 3) == (
        "settle, 4 streams, trial 2 of 3"
    )
    # A trial beyond the planned number (sequential trials) is not shown as "4 of 3".
    assert describe({"event": "trial", "trial": 4}, 3) == "trial, trial 4"
    assert describe({"event": "trial", "trial": 4, "trials": 6}, 3) == "trial, trial 4 of 6"


def test_the_newest_event_of_a_log_tail() -> None:
    log = "\n".join(
        [
            "not json",
            _line("start", config={"trials": 3}),
            _line("request", phase="latency", **{"class": "short"}, index=0, trial=1),
            '{"schema": "report", "no": "event"}',
            _line("concurrency", level=2, trial=1),
            "",
        ]
    )
    event = latest_event(log)
    assert event is not None
    assert event["event"] == "concurrency"
    assert latest_event(_line("start", config={})) is None  # says nothing of where it is
    assert latest_event("") is None


def test_hostile_lines_are_skipped_or_cut() -> None:
    assert parse_event("{" + " " * MAX_LINE + "}") is None  # the final report: too long
    assert parse_event('{"event": 5}') is None
    assert parse_event("[1, 2]") is None
    assert parse_event('{"event": "x"') is None
    shown = describe({"event": "x" * 1000, "class": "\n" * 3 + "y" * 500, "trial": True})
    assert len(shown) < 200
    assert "\n" not in shown


def test_a_stage_is_a_look_whatever_the_server_or_figure_else_the_phase() -> None:
    """One BenchmarkProgress Event per stage: the trials up to the first look (gate.trials)
    are one stage, each further trial (a look the gate needed) one more, on either server
    and any figure; settling (any shape, either server) is one; quality is one."""
    assert stage("latency, long prompts #1, trial 1 of 10", 3) == "trials"
    assert stage("baseline: concurrency, 8 streams, trial 3 of 10", 3) == "trials"
    assert stage("concurrency, 8 streams, trial 4 of 10", 3) == "trial 4"
    assert stage("baseline: latency, short prompts #2, trial 4 of 10", 3) == "trial 4"
    assert stage("concurrency, 8 streams, trial 12", 3) == "trial 12"
    assert stage("latency, long prompts #1, trial 2 of 10") == "trial 2"  # first look: 1
    assert stage("settle, 8 streams", 3) == stage("baseline: settle, 2 streams") == "settle"
    assert stage("quality, test classify-3", 3) == "quality"
    assert stage("quality, test trial-1-ish", 3) == "quality"
