"""The progress line says why the trials stopped: every figure decided, a figure already
failed (more trials cannot change the verdict), or ``maxTrials`` reached; and a load sweep's
warm-up is named in its own unit (requests/s in rate mode, not streams)."""

from __future__ import annotations

from test_bench_settle import Recorder, Servers, run_config

from vllm_operator.bench.progress import _what
from vllm_operator.bench.run_state import RunState
from vllm_operator.bench.runner import run


async def trials_event(closes_by_failure: bool, max_trials: int = 6) -> list[str]:
    def open_figures(state: RunState) -> set[tuple[str, str]]:
        if len(state.rounds) < 3:
            return {("latency", "short")}
        state.closed_by_failure = closes_by_failure  # as the gate's open_figures sets it
        return set()

    progress = Recorder()
    servers = Servers()
    await run(
        run_config(max_trials=max_trials),
        transport_factory=servers.factory,
        clock=servers.time,
        progress=progress,
        open_figures=open_figures,
    )
    return [_what("trials", f) or "" for f in progress.named("trials")]


async def test_a_failed_figure_is_named_as_why_the_trials_stopped() -> None:
    assert await trials_event(True) == ["trials done: a figure failed after 3 trial(s)"]
    assert await trials_event(False) == ["trials done: all decided after 3 trial(s)"]
    assert await trials_event(False, max_trials=3) == [
        "trials done: maxTrials reached after 3 trial(s)"
    ]


def test_a_rate_sweep_warm_up_is_in_requests_per_second() -> None:
    assert _what("warmup", {"level": 2.0, "mode": "rate"}) == "warm-up at 2 requests/s done"
    assert _what("warmup", {"level": 4, "mode": "concurrency"}) == "warm-up of 4 streams done"
    assert _what("warmup", {"level": 8}) == "warm-up of 8 streams done"
