"""vLLM's ``/metrics`` text -> the counts a canary step is judged on, and their deltas. Pure.

A canary compares candidate and stable under the same live traffic, so it needs what each
pod observed *during the step*: the difference of two scrapes, one at the step's start and
one at its end. Only a few series matter, summed over their label sets (engines, finish
reasons) but never over pods: a pod is one cluster of observations for the tail judge.

The names and buckets are vLLM's (``vllm/v1/metrics/loggers.py``, ``PrometheusStatLogger``;
listed for 0.17-0.33 in shared/docs/vllm-facts.md):
- ``vllm:time_to_first_token_seconds``, ``vllm:inter_token_latency_seconds``,
  ``vllm:e2e_request_latency_seconds``: histograms, cumulative ``_bucket{le=...}`` series;
- ``vllm:request_success_total{finished_reason=...}``: finished requests by reason; ``abort``
  and ``error`` are failures to the user;
- ``vllm:generation_tokens_total``: tokens generated;
- ``http_requests_total{handler,status}`` (prometheus-fastapi-instrumentator, which vLLM's
  API server mounts; ``status`` grouped as ``2xx``/``4xx``/``5xx``): answers by status class.

A counter only grows while its process lives. A pod whose container restarted inside the
step starts again from zero, and a negative delta would count observations that never
happened: such a pod (its restart count changed, or any series went down) contributes what
it counted since the restart, as Prometheus's ``increase()`` does, and nothing negative.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from vllm_operator.errors import TransientError

HISTOGRAMS: dict[str, str] = {
    "ttft": "vllm:time_to_first_token_seconds",
    "itl": "vllm:inter_token_latency_seconds",
    "e2e": "vllm:e2e_request_latency_seconds",
}
SUCCESS = "vllm:request_success_total"
GENERATION_TOKENS = "vllm:generation_tokens_total"
HTTP_REQUESTS = "http_requests_total"
FAILED_REASONS = frozenset({"abort", "error"})
# Handlers of requests users send (the OpenAI API): not /metrics, /health, /ping.
SERVING_HANDLER_PREFIXES = ("/v1/", "/v2/", "/inference/")
MAX_TEXT = 4 * 1024 * 1024
"""Most bytes of one scrape read; vLLM's page is ~50 kB, LoRA series included."""

Buckets = tuple[tuple[float, float], ...]


class ScrapeError(TransientError):
    """A scrape's text could not be read as vLLM's metrics."""


@dataclass(frozen=True)
class ScrapeFailure:
    """A pod's /metrics page the shell could not read, and why (for the Event)."""

    reason: str


@dataclass(frozen=True)
class PodCounts:
    """What one pod had counted at one moment (or, as a delta, during a step)."""

    histograms: Mapping[str, Buckets] = field(default_factory=dict)
    """``ttft``/``itl``/``e2e`` -> cumulative (le, count) pairs, +Inf last."""
    finished: float = 0.0
    """Requests vLLM finished, any reason."""
    aborted: float = 0.0
    """... of which aborted or in error."""
    http_requests: float = 0.0
    """Answers to serving requests (0 when the page has no HTTP series)."""
    http_errors: float = 0.0
    """... of which not 2xx."""
    generation_tokens: float = 0.0
    restarts: int = 0
    """The vLLM container's restart count when scraped (from the pod's status)."""

    @property
    def requests(self) -> float:
        """Requests of the step: the larger of what the server finished and what HTTP
        answered (a request refused before the engine never finishes there)."""
        return max(self.finished, self.http_requests)

    @property
    def errors(self) -> float:
        """Requests that failed the user: non-2xx answers, or aborted in the engine."""
        return max(self.aborted, self.http_errors)

    def to_json(self) -> dict[str, object]:
        """A compact form for the step's record (the candidate Deployment's annotation)."""
        return {
            "h": {k: [[_le_text(le), c] for le, c in v] for k, v in self.histograms.items()},
            "f": self.finished,
            "a": self.aborted,
            "r": self.http_requests,
            "e": self.http_errors,
            "g": self.generation_tokens,
            "n": self.restarts,
        }

    @classmethod
    def from_json(cls, raw: object) -> PodCounts:
        """Read ``to_json``'s form back; ScrapeError when it is not that form."""
        try:
            assert isinstance(raw, Mapping)
            hists = raw.get("h") or {}
            assert isinstance(hists, Mapping)
            histograms = {
                str(k): tuple((float(le), float(c)) for le, c in v) for k, v in hists.items()
            }
            return cls(
                histograms=histograms,
                finished=float(raw.get("f", 0)),
                aborted=float(raw.get("a", 0)),
                http_requests=float(raw.get("r", 0)),
                http_errors=float(raw.get("e", 0)),
                generation_tokens=float(raw.get("g", 0)),
                restarts=int(raw.get("n", 0)),
            )
        except (AssertionError, TypeError, ValueError) as exc:
            raise ScrapeError(f"a recorded canary scrape is damaged: {exc}") from None


def _le_text(le: float) -> float | str:
    return "+Inf" if math.isinf(le) else le


def parse_metrics(text: str, restarts: int = 0) -> PodCounts:
    """The counts the canary reads from one pod's ``/metrics`` page (Prometheus text format).

    Unknown series are skipped; a page without vLLM's request histograms is a ScrapeError
    (not a vLLM server, or one still loading).
    """
    if len(text) > MAX_TEXT:
        raise ScrapeError(f"a /metrics page of {len(text)} bytes is over {MAX_TEXT}")
    samples = (_sample(line) for line in text.splitlines() if line and line[0] != "#")
    return counts_from_samples(
        ((n, labels, v) for n, labels, v in samples if n is not None),
        restarts,
        "the /metrics page",
    )


WANTED_SERIES: tuple[str, ...] = (
    *(f"{name}_bucket" for name in HISTOGRAMS.values()),
    SUCCESS,
    GENERATION_TOKENS,
    HTTP_REQUESTS,
)
"""Every series name the canary reads (a Prometheus query selects exactly these)."""


def counts_from_samples(
    samples: Iterable[tuple[str, Mapping[str, str], float]],
    restarts: int = 0,
    source: str = "the samples",
) -> PodCounts:
    """One pod's counts from its samples ``(name, labels, value)``, wherever they were read
    (its /metrics page, or a Prometheus query). Series other than ``WANTED_SERIES`` and
    values that are not finite are skipped; no histogram of vLLM's is a ScrapeError."""
    buckets: dict[str, dict[float, float]] = {k: {} for k in HISTOGRAMS}
    by_name = {f"{v}_bucket": k for k, v in HISTOGRAMS.items()}
    finished = aborted = http_requests = http_errors = tokens = 0.0
    for name, labels, value in samples:
        if not math.isfinite(value):
            continue
        if name in by_name:
            le = labels.get("le")
            if le is None:
                continue
            try:
                bound = math.inf if le in ("+Inf", "Inf") else float(le)
            except ValueError:
                continue
            series = buckets[by_name[name]]
            series[bound] = series.get(bound, 0.0) + value
        elif name == SUCCESS:
            finished += value
            if labels.get("finished_reason") in FAILED_REASONS:
                aborted += value
        elif name == GENERATION_TOKENS:
            tokens += value
        elif name == HTTP_REQUESTS and labels.get("handler", "").startswith(
            SERVING_HANDLER_PREFIXES
        ):
            http_requests += value
            if not labels.get("status", "").startswith("2"):
                http_errors += value
    missing = [HISTOGRAMS[k] for k, v in buckets.items() if math.inf not in v]
    if missing:
        raise ScrapeError(f"{source} has no {', '.join(missing)}: not a vLLM server?")
    histograms = {k: tuple(sorted(v.items())) for k, v in buckets.items()}
    return PodCounts(histograms, finished, aborted, http_requests, http_errors, tokens, restarts)


def _sample(line: str) -> tuple[str | None, dict[str, str], float]:
    """One sample line: name, labels, value (name None when the line is not a sample)."""
    labels: dict[str, str] = {}
    brace = line.find("{")
    if brace >= 0:
        close = line.rfind("}")
        if close < brace:
            return None, labels, 0.0
        name = line[:brace]
        labels = _labels(line[brace + 1 : close])
        rest = line[close + 1 :].split()
    else:
        parts = line.split()
        if len(parts) < 2:
            return None, labels, 0.0
        name, rest = parts[0], parts[1:]
    if not rest:
        return None, labels, 0.0
    try:
        value = float(rest[0])
    except ValueError:
        return None, labels, 0.0
    if not math.isfinite(value):
        return None, labels, 0.0
    return name, labels, value


def _labels(text: str) -> dict[str, str]:
    """``a="x",b="y"`` -> dict (values with escaped quotes kept as written)."""
    out: dict[str, str] = {}
    i = 0
    while i < len(text):
        eq = text.find("=", i)
        if eq < 0:
            break
        key = text[i:eq].strip().lstrip(",").strip()
        if eq + 1 >= len(text) or text[eq + 1] != '"':
            break
        j = eq + 2
        value: list[str] = []
        while j < len(text) and text[j] != '"':
            if text[j] == "\\" and j + 1 < len(text):
                j += 1
            value.append(text[j])
            j += 1
        out[key] = "".join(value)
        i = j + 1
    return out


@dataclass(frozen=True)
class PodDelta:
    """What one pod counted during a step."""

    counts: PodCounts
    restarted: bool
    """The pod restarted inside the step: ``counts`` holds only what it counted since."""


def delta(start: PodCounts | None, end: PodCounts) -> PodDelta:
    """``end - start`` of one pod, never negative.

    No start (a pod that appeared during the step): all of ``end`` happened in the step.
    A restart (restart count changed, or any series went down): ``end`` is what it counted
    since the restart, all inside the step.
    """
    if start is None:
        return PodDelta(end, restarted=False)
    if end.restarts != start.restarts or _went_down(start, end):
        return PodDelta(end, restarted=True)
    histograms = {
        k: _bucket_delta(start.histograms.get(k, ()), v) for k, v in end.histograms.items()
    }
    return PodDelta(
        PodCounts(
            histograms=histograms,
            finished=end.finished - start.finished,
            aborted=end.aborted - start.aborted,
            http_requests=end.http_requests - start.http_requests,
            http_errors=end.http_errors - start.http_errors,
            generation_tokens=end.generation_tokens - start.generation_tokens,
            restarts=end.restarts,
        ),
        restarted=False,
    )


def _went_down(start: PodCounts, end: PodCounts) -> bool:
    scalars = (
        (start.finished, end.finished),
        (start.aborted, end.aborted),
        (start.http_requests, end.http_requests),
        (start.http_errors, end.http_errors),
        (start.generation_tokens, end.generation_tokens),
    )
    if any(after < before for before, after in scalars):
        return True
    for key, before in start.histograms.items():
        after = dict(end.histograms.get(key, ()))
        if any(after.get(le, 0.0) < count for le, count in before):
            return True
    return False


def _bucket_delta(start: Sequence[tuple[float, float]], end: Buckets) -> Buckets:
    """Bucket-wise difference (buckets missing at the start count from zero)."""
    before = dict(start)
    return tuple((le, max(count - before.get(le, 0.0), 0.0)) for le, count in end)


def step_deltas(
    start: Mapping[str, PodCounts], end: Mapping[str, PodCounts]
) -> dict[str, PodDelta]:
    """Per pod, what it counted during the step (pods gone by the end contribute nothing:
    what they counted is lost with them)."""
    return {pod: delta(start.get(pod), counts) for pod, counts in sorted(end.items())}
