"""Failed requests of a load sweep: judged by maxErrorPercent where set, counted elsewhere."""

from __future__ import annotations

from collections import Counter
from typing import Any

from vllm_operator.api.gate_spec import Thresholds
from vllm_operator.api.workload import WorkloadSpec
from vllm_operator.bench.config import BenchConfig
from vllm_operator.bench.http.request import ChatRequest
from vllm_operator.bench.load.report import counted, judged_errors, sweep_of
from vllm_operator.bench.load.send import LoadRecord, LoadRun
from vllm_operator.bench.run_state import ServerRun


class One:
    def request(self, index: int) -> ChatRequest:
        return ChatRequest(prompt="x", max_tokens=1)

    def describe(self) -> dict[str, Any]:
        return {"kind": "one"}


def failing(level: float, error: str) -> LoadRun:
    run = LoadRun("candidate", level, 0, "rate", 1.0)
    record = LoadRecord(scheduled_at=0.0)
    record.fail(error, "x")
    run.records.append(record)
    return run


def test_errors_of_levels_with_a_max_error_limit_are_left_to_it() -> None:
    config = BenchConfig(
        url="http://c:8000",
        model="m",
        workload=WorkloadSpec.model_validate(
            {
                "synthetic": {"inputTokens": {"mean": 8}, "outputTokens": {"mean": 1}},
                "load": {"mode": "rate", "rates": [5, 10]},
            }
        ),
        traffic=One(),
        thresholds=Thresholds.model_validate(
            {"slo": {"ttftMs": {"p99": 500}, "levels": [{"at": 10, "maxErrorPercent": 1}]}}
        ),
    )
    server = ServerRun("candidate", "http://c:8000")
    server.load = [failing(5, "timeout"), failing(10, "http_5xx"), failing(10, "timeout")]
    server.load_warmup = [failing(10, "stall")]
    judged = judged_errors(config, server)
    assert judged == Counter({"http_5xx": 1, "timeout": 1})  # level 10's measured runs only
    assert counted(server.errors(), judged) == {"stall": 1, "timeout": 1}
    sweep = sweep_of(config, server, None)
    assert sweep is not None
    assert [(lv.level, lv.requests, lv.error_percent) for lv in sweep.levels] == [
        (5.0, 1, [100.0]),
        (10.0, 2, [100.0, 100.0]),
    ]
