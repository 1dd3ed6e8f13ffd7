"""Which benchmark results the operator believes, and the verdict it takes from them.

The termination message is written from inside the benchmark pod, where code the operator
does not control may run (the model's answers, in the python-tests assertion). A summary is
therefore evidence only when the way the Job ended vouches for it (issue 10: a child of the
bench wrote a Passed summary to ``/dev/termination-log`` and SIGINTed the bench; the pod
died, and the summary was promoted). The operator believes a summary only when:

- the Job's own pod (controlled by this Job's uid) has exactly one bench container, and it
  *exited* (no signal, not OOM-killed) with a documented code: 0 with the bench's verdict
  Passed, or 1 with Failed or Inconclusive (``commands/bench.py``'s exit-code contract);
- the Job did not fail for a deadline;
- the summary names this run (``identity``: Job, revision, attempt) exactly.

Any other end is an Error whatever the message says, and the reasons say which rule broke.
When the summary is believed, the gate judges it again and the stricter of the bench's and
the operator's verdicts stands: a bench that says Failed is never promoted because the
operator's limits happen to pass.
"""

from __future__ import annotations

from dataclasses import dataclass

from vllm_operator import gate
from vllm_operator.api.gate_spec import Thresholds
from vllm_operator.api.summary import (
    STRICTEST_FIRST,
    BenchSummary,
    RunIdentity,
    TrialPlan,
    Verdict,
    VerdictOutcome,
)
from vllm_operator.rollout.observed import Observed
from vllm_operator.rollout.results import (
    job_summary,
    parse_summary,
    refused_summary,
    summary_from_log,
)
from vllm_operator.rollout.views import ContainerView, JobView, PodView

BENCH_CONTAINER = "bench"
# The bench's exit codes and the verdicts each may carry (bench/report.py).
EXIT_VERDICTS: dict[int, frozenset[str]] = {
    0: frozenset({"Passed"}),
    1: frozenset({"Failed", "Inconclusive"}),
}


@dataclass(frozen=True)
class Judgement:
    """The verdict on one finished benchmark Job, and the summary it was taken from."""

    verdict: Verdict
    summary: BenchSummary | None  # kept even when not believed, for people to read


def _error(reasons: list[str], summary: BenchSummary | None) -> Judgement:
    return Judgement(Verdict(outcome="Error", reasons=reasons), summary)


def stricter(a: VerdictOutcome, b: VerdictOutcome) -> VerdictOutcome:
    """The stricter of two verdicts (Failed > Error > Inconclusive > Passed)."""
    return a if STRICTEST_FIRST.index(a) <= STRICTEST_FIRST.index(b) else b


def expected_identity(job: JobView) -> RunIdentity:
    return RunIdentity(job=job.name, revision=job.revision, attempt=job.attempt)


def _bench_container(pod: PodView) -> ContainerView | None:
    return next((c for c in pod.containers if c.name == BENCH_CONTAINER), None)


def end_problem(observed: Observed, job: JobView) -> str | ContainerView:
    """Why the Job's end does not vouch for its summary, or the bench container that ended
    as documented (its ``exit_code`` is 0 or 1)."""
    if job.failed_reason == "DeadlineExceeded":
        return f"Job {job.name} hit its deadline ({job.failed_message or 'DeadlineExceeded'})"
    pods = observed.job_pods(job)
    if not pods:
        return f"the pod of Job {job.name} is gone: its end cannot be checked"
    if len(pods) > 1:
        names = ", ".join(sorted(p.name for p in pods))
        return f"Job {job.name} has {len(pods)} pods ({names}); it runs exactly one"
    pod = pods[0]
    container = _bench_container(pod)
    if container is None or container.exit_code is None:
        return f"pod {pod.name}: the {BENCH_CONTAINER} container has not terminated"
    code = container.exit_code
    if container.terminated_reason == "OOMKilled":
        return f"pod {pod.name} was OOM-killed (exit code {code})"
    if container.signal:
        return f"pod {pod.name} was killed by signal {container.signal} (exit code {code})"
    if code not in EXIT_VERDICTS:
        reason = f" ({container.terminated_reason})" if container.terminated_reason else ""
        return f"pod {pod.name} exited with code {code}{reason}"
    if code == 0 and not job.complete:
        return f"pod {pod.name} exited 0 but Job {job.name} did not complete"
    return container


def bench_summary(observed: Observed, job: JobView, bench: ContainerView) -> BenchSummary | None:
    """The summary of the bench container itself (never another container of the pod, where
    code under test may run): its termination message, else the log read for this Job."""
    message = bench.termination_message
    return (
        parse_summary(message)
        or summary_from_log(message)
        or summary_from_log(observed.logs.get(job.name))
    )


def judge(
    observed: Observed,
    job: JobView,
    thresholds: Thresholds,
    baseline: BenchSummary | None,
    *,
    require_paired: bool = False,
    plan: TrialPlan | None = None,
) -> Judgement:
    """The verdict on a finished Job (``job.finished``); Error unless its end vouches for it.

    ``plan``: the trial plan the spec asks for. The summary records the plan its run followed;
    the gate uses whichever allows more looks (wider intervals), so a summary cannot narrow
    its own intervals by claiming fewer looks than the spec allowed.
    """
    ended = end_problem(observed, job)
    if isinstance(ended, str):
        summary = job_summary(observed, job)  # shown to people, never judged
        reasons = [f"benchmark Job not trusted: {ended}"]
        if summary is not None and summary.verdict is not None:
            reasons.append(f"its summary's verdict {summary.verdict} is disregarded")
        return _error(reasons, summary)
    code = ended.exit_code
    assert code is not None
    summary = bench_summary(observed, job, ended)
    if summary is None:
        why = refused_summary(ended.termination_message)
        return _error(
            [f"benchmark Job {job.name} left no summary{f': {why}' if why else ''}"], None
        )
    wanted = expected_identity(job)
    if summary.identity is None:
        return _error([f"the summary of Job {job.name} carries no run identity"], summary)
    if summary.identity != wanted:
        got = summary.identity
        return _error(
            [
                f"the summary read from Job {job.name} names another run (Job {got.job}, "
                f"revision {got.revision}, attempt {got.attempt}; expected revision "
                f"{wanted.revision}, attempt {wanted.attempt})"
            ],
            summary,
        )
    own = summary.own_verdict
    if own is None or own.outcome not in EXIT_VERDICTS[code]:
        return _error(
            [
                f"pod exit code {code} does not match the summary's verdict "
                f"{own.outcome if own else 'none'} (exit 0 means Passed, 1 Failed or "
                "Inconclusive)"
            ],
            summary,
        )
    plans = [p for p in (plan, summary.trial_plan) if p is not None]
    widest = max(plans, key=lambda p: p.looks) if plans else None
    verdict = gate.verdict(
        summary, thresholds, baseline, require_paired=require_paired, plan=widest
    )
    outcome = stricter(own.outcome, verdict.outcome)
    if outcome == verdict.outcome:
        return Judgement(verdict, summary)
    said = "; ".join(own.reasons[:3]) or "no reasons given"
    stricter_own = f"the benchmark's own verdict {own.outcome} is stricter ({said})"
    return Judgement(
        Verdict(outcome=outcome, reasons=[stricter_own, *verdict.reasons], deciding=1),
        summary,
    )
