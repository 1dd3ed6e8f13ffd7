"""What one benchmark run is asked to do, decided once before it starts.

The CLI, the operator's Job arguments and in-process callers all build a ``BenchConfig``;
the runner reads nothing else (no environment, no files), so a run is reproducible from its
config, which the report records (without the API key).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

from vllm_operator.api.gate_spec import Thresholds
from vllm_operator.api.summary import MAX_TRIALS, BenchSummary, Placement, TrialPlan
from vllm_operator.api.workload import WorkloadSpec
from vllm_operator.bench.load.send import MAX_RUN_REQUESTS
from vllm_operator.bench.load.traffic import Traffic
from vllm_operator.bench.prompts import CONCURRENCY_CLASS, DEFAULT_CLASSES, PromptClass
from vllm_operator.bench.quality.run import DEFAULT_CONCURRENCY as DEFAULT_QUALITY_CONCURRENCY
from vllm_operator.bench.quality.run import MAX_CONCURRENCY as MAX_QUALITY_CONCURRENCY
from vllm_operator.bench.quality.suite import EMPTY_SUITE, Suite
from vllm_operator.gate.budget import SweepBudget, reachable_plan, reserve_for

MAX_LEVELS = 16
"""Concurrency levels per run (the CRD allows 16; keeps the summary under 4,096 bytes)."""
MAX_ITERATIONS = 100
"""Measured requests per prompt class (the CRD's limit)."""
MAX_WARMUP = 99
MAX_REQUESTS_PER_STREAM = 99
MAX_SETTLE_PASSES = 20
"""Bounds that keep every request's prompt index distinct (``bench.runner`` numbering)."""


@dataclass(frozen=True)
class BenchConfig:
    """One benchmark run."""

    url: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    suite: Suite = EMPTY_SUITE
    suite_ref: str = "builtin:none"
    iterations: int = 5
    warmup: int = 1
    prompt_classes: tuple[PromptClass, ...] = DEFAULT_CLASSES
    concurrency: tuple[int, ...] = (1, 2, 4, 8)
    concurrency_class: PromptClass = CONCURRENCY_CLASS
    requests_per_stream: int = 3
    thresholds: Thresholds | None = None
    baseline: BenchSummary | None = None
    deadline_seconds: float = 1500.0
    request_timeout: float = 600.0
    stall_seconds: float = 60.0
    connect_timeout: float = 10.0
    client: str = "aiohttp"
    baseline_url: str | None = None
    """A baseline server measured in the same run, interleaved with ``url`` (paired)."""
    trials: int = 1
    """Rounds of every compared figure before the gate's first look (the CLI's default: 3)."""
    max_trials: int | None = None
    """Most rounds of a figure still undecided (sequential trials); None: ``trials``."""
    settle_max_passes: int = 0
    """Settling warm-up passes at most (0: the one-shot warm-up; the CLI's default is 4)."""
    settle_tolerance: float = 0.15
    """Two warm-up passes agree when every figure is within this fraction (or the floor)."""
    settle_max_seconds: float = 300.0
    """No warm-up pass starts after this long."""
    candidate_placement: Placement = field(default_factory=Placement)
    baseline_placement: Placement = field(default_factory=Placement)
    quality_concurrency: int = DEFAULT_QUALITY_CONCURRENCY
    """Quality tests in flight at once (1: one at a time, the strictest repeatability)."""
    allow_code_execution: bool = False
    """Run python-tests code in a local sandbox process (laptop; weaker than the Job's)."""
    sandbox_dir: str | None = None
    """Exchange directory of the Job pod's sandbox container (python-tests run there)."""
    workload: WorkloadSpec = field(default_factory=WorkloadSpec)
    """What is measured: the study's classes (default), or a synthetic/dataset workload."""
    traffic: Traffic | None = field(default=None, compare=False, repr=False)
    """The requests of a synthetic or dataset workload, built (and checked whole) before the
    run by ``bench.workload``; None with the study's classes."""

    def __post_init__(self) -> None:
        if not (
            1 <= self.iterations <= MAX_ITERATIONS
            and 0 <= self.warmup <= MAX_WARMUP
            and 1 <= self.requests_per_stream <= MAX_REQUESTS_PER_STREAM
        ):
            raise ValueError(
                f"iterations 1..{MAX_ITERATIONS}, warmup 0..{MAX_WARMUP}, requests per stream "
                f"1..{MAX_REQUESTS_PER_STREAM}"
            )
        if not 1 <= self.trials <= MAX_TRIALS:
            raise ValueError(f"trials must be 1..{MAX_TRIALS}")
        if self.max_trials is None:
            object.__setattr__(self, "max_trials", self.trials)
        if not self.trials <= (self.max_trials or 0) <= MAX_TRIALS:
            raise ValueError(f"max trials must be trials..{MAX_TRIALS}")
        if not 0 <= self.settle_max_passes <= MAX_SETTLE_PASSES:
            raise ValueError(f"settle passes must be 0..{MAX_SETTLE_PASSES}")
        if not 0 < self.settle_tolerance < 1 or not self.settle_max_seconds > 0:
            raise ValueError("settle tolerance must be in (0, 1), settle seconds > 0")
        if len(self.concurrency) > MAX_LEVELS or any(c < 1 for c in self.concurrency):
            raise ValueError(f"at most {MAX_LEVELS} concurrency levels, each >= 1")
        if self.deadline_seconds <= 0:
            raise ValueError("deadline must be > 0")
        if not 1 <= self.quality_concurrency <= MAX_QUALITY_CONCURRENCY:
            raise ValueError(f"quality concurrency must be 1..{MAX_QUALITY_CONCURRENCY}")
        load = self.workload.load
        if self.traffic is not None and load.mode == "rate":
            most = max(load.rates) * load.seconds_per_level
            if round(most) > MAX_RUN_REQUESTS:
                raise ValueError(
                    f"gate.workload.load: {max(load.rates):g} requests/s for "
                    f"{load.seconds_per_level} s is {round(most)} requests, more than "
                    f"{MAX_RUN_REQUESTS} per level: lower secondsPerLevel or the rate"
                )

    @property
    def budget_reserve(self) -> float:
        """Share of the deadline extra rounds leave free: a quality suite still to run after
        them needs more (``gate.budget.reserve_for``)."""
        return reserve_for(bool(self.suite.tests))

    @property
    def plan(self) -> TrialPlan:
        """The sequential trial plan: ``trials`` before the first look, ``max_trials`` at most,
        cut for a load sweep to the trials its deadline can give a level
        (``gate.budget.reachable_plan``: the looks it cannot reach take no error rate)."""
        plan = TrialPlan(min_trials=self.trials, max_trials=self.max_trials or self.trials)
        if self.workload.is_study:
            return plan
        load = self.workload.load
        return reachable_plan(
            SweepBudget(
                deadline=self.deadline_seconds,
                levels=len(load.levels),
                seconds_per_level=load.seconds_per_level,
                servers=2 if self.baseline_url else 1,
                trials=plan.min_trials,
                max_trials=plan.max_trials,
                warmup=self.warmup > 0 or self.settle_max_passes > 0,
                reserve=self.budget_reserve,
            )
        )

    @property
    def base_url(self) -> str:
        """The server root (``/v1`` stripped if given)."""
        return root_url(self.url)

    @property
    def chat_url(self) -> str:
        return f"{self.base_url}/v1/chat/completions"

    @property
    def headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    @property
    def gated(self) -> bool:
        """Was the run given limits or a baseline (otherwise: no gate)?"""
        return (
            self.thresholds is not None
            or self.baseline is not None
            or self.baseline_url is not None
        )

    def public(self) -> dict[str, object]:
        """The config as the report shows it: everything except the API key."""
        return {
            "url": _without_userinfo(self.url),
            "model": self.model,
            "api_key": "set" if self.api_key else "none",
            "suite": self.suite_ref,
            "iterations": self.iterations,
            "warmup": self.warmup,
            "prompt_classes": [
                {"name": c.name, "prompt_tokens": c.prompt_tokens, "output_tokens": c.output_tokens}
                for c in self.prompt_classes
            ],
            "concurrency": list(self.concurrency),
            "requests_per_stream": self.requests_per_stream,
            "quality_concurrency": self.quality_concurrency,
            "deadline_seconds": self.deadline_seconds,
            "request_timeout_seconds": self.request_timeout,
            "stall_seconds": self.stall_seconds,
            "client": self.client,
            "baseline_url": _without_userinfo(self.baseline_url) if self.baseline_url else None,
            "trials": self.trials,
            "max_trials": self.plan.max_trials,
            "settle": {
                "max_passes": self.settle_max_passes,
                "tolerance": self.settle_tolerance,
                "max_seconds": self.settle_max_seconds,
            },
            "candidate_placement": self.candidate_placement.to_wire(),
            "baseline_placement": self.baseline_placement.to_wire(),
            "code_execution": (
                "sandbox-container"
                if self.sandbox_dir
                else "local-sandbox"
                if self.allow_code_execution
                else "refused"
            ),
        }


def root_url(url: str) -> str:
    """The server root of ``url`` (``/v1`` stripped if given)."""
    base = url.rstrip("/")
    return base[: -len("/v1")] if base.endswith("/v1") else base


def _without_userinfo(url: str) -> str:
    """``http://user:secret@host/`` -> ``http://host/``: credentials never reach a report."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))
