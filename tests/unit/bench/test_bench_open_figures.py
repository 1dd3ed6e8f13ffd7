"""The bench asks the gate's one rule which figures are still open (issue 33).

``bench.report.open_figures`` is what the runner calls between rounds; it must be the gate's
own ``gate.verdict.openness`` on the bench's summary, not a rule of the bench's: a planted
change to ``openness`` (nothing open, or everything open) changes the rounds run here.
"""

from __future__ import annotations

from test_bench_settle import Servers, run_config

from vllm_operator.api.gate_spec import Thresholds
from vllm_operator.bench import report
from vllm_operator.bench.report import raw_summary
from vllm_operator.bench.run_state import RunState
from vllm_operator.bench.runner import run
from vllm_operator.gate.finding import FigureKey
from vllm_operator.gate.verdict import openness


def delay(host: str, n: int) -> float:
    """The candidate's requests take 1.0-1.4 s in a fixed scatter, the baseline's 1.2 s:
    short prompts straddle a 10% limit after two trials and fall within it after three."""
    if host == "cand.test":
        return 1.0 + 0.4 * ((n * 7919) % 5) / 4
    return 1.2


async def test_the_rounds_follow_the_gates_open_figures() -> None:
    thresholds = Thresholds.model_validate({"maxRegressionPercent": 10})
    cfg = run_config(
        baseline_url="http://base.test", thresholds=thresholds, max_trials=6, concurrency=()
    )
    servers = Servers(delay)
    asked: list[tuple[int, set[FigureKey]]] = []

    def open_figures(state: RunState) -> set[FigureKey]:
        still = report.open_figures(cfg, state)
        judged = openness(raw_summary(cfg, state), thresholds, None, cfg.plan)
        assert still == set(judged.figures)  # the gate's rule, on the bench's own summary
        asked.append((len(state.rounds), still))
        return still

    state = await run(
        cfg, transport_factory=servers.factory, clock=servers.time, open_figures=open_figures
    )
    assert asked == [(2, {FigureKey.latency("short")}), (3, set())]
    assert len(state.rounds) == 3
    assert [r.classes for r in state.rounds][-1] == ("short",)
