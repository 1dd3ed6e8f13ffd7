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
  API server mounts; ``status`` grouped as ``2xx``/``4xx``/``5xx``): answers by status class,
  counted when the handler ends. Only inference handlers count (``INFERENCE_HANDLERS``:
  completions, chat, responses, embeddings, pooling, scoring, transcription), never
  ``GET /v1/models`` or health polls, which would dilute the error share.

What vLLM does not count as a failure, the canary does: a stream that broke after its 200
header (vLLM sends an error chunk, then ``[DONE]``) and a request its client gave up on are
2xx answers of a generation handler that the engine never counted as finished (vLLM does
not count aborted requests in ``request_success_total{finished_reason="abort"}`` at all:
vllm#55634 on 0.10.1, vllm#31503 on 0.13, both open, their fixes closed unmerged; a release
that does shows them as ``aborted``, and they are not counted twice). So ``unfinished`` =
generation 2xx answers - requests finished without abort or error, over the whole step
(in-flight requests at a read even out).

A counter only grows while its process lives; a step's counts are accumulated read by read
with Prometheus' ``increase()`` rule (``accumulate``): between two reads of a pod, a series
that went down, or a restart count that changed, is a reset, and the value after it is the
increase since it; nothing before it is lost.
"""

from __future__ import annotations

import dataclasses
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
GENERATION_HANDLERS = frozenset(
    {
        "/v1/completions",
        "/v1/chat/completions",
        "/v1/responses",
        "/v1/audio/transcriptions",
        "/v1/audio/translations",
        "/inference/v1/generate",
    }
)
"""Handlers whose requests the engine counts in ``request_success_total`` when they end."""
INFERENCE_HANDLERS = GENERATION_HANDLERS | frozenset(
    {
        "/v1/embeddings",
        "/pooling",
        "/classify",
        "/score",
        "/v1/score",
        "/rerank",
        "/v1/rerank",
        "/v2/rerank",
    }
)
"""Handlers of inference requests: what the canary counts as requests (not /v1/models,
/tokenize, health or metrics)."""
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
    """The server container's restart count when read (from the pod's status; in a step's
    accumulated counts: at the pod's first read of the step)."""
    http_generation_ok: float = 0.0
    """2xx answers of generation handlers (``GENERATION_HANDLERS``)."""
    gateway_errors: float = 0.0
    """Failures the gateway or mesh gave itself for the candidate (``analysis.prometheus.
    gatewayErrors``): requests vLLM never answered, held on one candidate pod. A counter
    of the gateway's, so its deltas never follow the pod's resets."""
    before_reset: PodCounts | None = None
    """Read from Prometheus since the pod's previous read: what its series held just before
    each counter reset Prometheus scraped in between, summed (None: no reset seen). The
    counts between that read and a restart are then kept, as ``increase()`` keeps them;
    never recorded (a read's own)."""

    @property
    def requests(self) -> float:
        """Requests of the step: the larger of what the server finished and what HTTP
        answered (a request refused before the engine never finishes there), and the
        gateway's own failures."""
        return max(self.finished, self.http_requests) + self.gateway_errors

    @property
    def unfinished(self) -> float:
        """Generation requests answered 2xx that the engine never finished: streams broken
        after their header, requests their client gave up on."""
        return max(self.http_generation_ok - (self.finished - self.aborted), 0.0)

    @property
    def errors(self) -> float:
        """Requests that failed the user: non-2xx answers, unfinished 2xx answers, or
        aborted in the engine (each counted once), and the gateway's own failures."""
        own = max(self.aborted, self.http_errors + self.unfinished)
        return min(own + self.gateway_errors, self.requests)

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
            "o": self.http_generation_ok,
            "x": self.gateway_errors,
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
                http_generation_ok=float(raw.get("o", 0)),
                gateway_errors=float(raw.get("x", 0)),
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
    values that are not finite are skipped; no histogram of vLLM's is a ScrapeError.

    One series per identity (``IDENTITY_LABELS``: vLLM's own labels): the same series
    scraped by two jobs or instances of a Prometheus is counted once (the larger value),
    never summed; engines, reasons and handlers are distinct series and add up."""
    buckets: dict[str, dict[float, float]] = {k: {} for k in HISTOGRAMS}
    by_name = {f"{v}_bucket": k for k, v in HISTOGRAMS.items()}
    finished = aborted = http_requests = http_errors = tokens = generation_ok = 0.0
    for name, labels, value in _one_per_identity(samples):
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
        elif name == HTTP_REQUESTS and labels.get("handler", "") in INFERENCE_HANDLERS:
            http_requests += value
            if not labels.get("status", "").startswith("2"):
                http_errors += value
            elif labels["handler"] in GENERATION_HANDLERS:
                generation_ok += value
    missing = [HISTOGRAMS[k] for k, v in buckets.items() if math.inf not in v]
    if missing:
        raise ScrapeError(f"{source} has no {', '.join(missing)}: not a vLLM server?")
    histograms = {k: tuple(sorted(v.items())) for k, v in buckets.items()}
    return PodCounts(
        histograms, finished, aborted, http_requests, http_errors, tokens, restarts, generation_ok
    )


IDENTITY_LABELS = ("le", "finished_reason", "handler", "method", "status", "engine", "model_name")
"""The labels that tell vLLM's series of one pod apart; any other (job, instance, endpoint,
service, a Prometheus replica) only says who scraped it."""


def _one_per_identity(
    samples: Iterable[tuple[str, Mapping[str, str], float]],
) -> list[tuple[str, Mapping[str, str], float]]:
    """Finite samples, one per (name, identity labels): duplicates keep the larger value."""
    kept: dict[tuple[str, ...], tuple[str, Mapping[str, str], float]] = {}
    for name, labels, value in samples:
        if not math.isfinite(value):
            continue
        key = (name, *(labels.get(k, "") for k in IDENTITY_LABELS))
        found = kept.get(key)
        if found is None or value > found[2]:
            kept[key] = (name, labels, value)
    return list(kept.values())


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
    """The pod's server restarted inside the step (its counts span the restart)."""


_SCALARS = (
    "finished",
    "aborted",
    "http_requests",
    "http_errors",
    "generation_tokens",
    "http_generation_ok",
    "gateway_errors",
)


def increase(last: PodCounts | None, now: PodCounts) -> tuple[PodCounts, bool]:
    """What a pod counted between two reads, as Prometheus' ``increase()`` counts it, and
    whether its counters were reset in between.

    No earlier read (a pod first seen now): nothing yet; it counts from this read. A reset
    (the server container's restart count changed, or any series went down): the value
    after the reset is the increase since it, plus, where Prometheus scraped them
    (``before_reset``), the counts between the earlier read and the reset.
    """
    if last is None:
        return PodCounts(histograms={k: tuple((le, 0.0) for le, _ in v)
                                     for k, v in now.histograms.items()},
                         restarts=now.restarts), False  # fmt: skip
    gateway = max(now.gateway_errors - last.gateway_errors, 0.0)  # the gateway's counter
    if now.before_reset is not None:  # Prometheus scraped the counts before the reset too
        since = add(dataclasses.replace(now, before_reset=None), now.before_reset)
        return dataclasses.replace(_delta(last, since), gateway_errors=gateway), True
    if now.restarts != last.restarts or _went_down(last, now):
        return dataclasses.replace(now, gateway_errors=gateway, before_reset=None), True
    return _delta(last, now), False


def _delta(last: PodCounts, now: PodCounts) -> PodCounts:
    """``now - last``, series by series, never below zero."""
    histograms = {
        k: _bucket_delta(last.histograms.get(k, ()), v) for k, v in now.histograms.items()
    }
    values = {name: max(getattr(now, name) - getattr(last, name), 0.0) for name in _SCALARS}
    return PodCounts(histograms=histograms, restarts=now.restarts, **values)


def add(total: PodCounts | None, more: PodCounts) -> PodCounts:
    """``total + more`` (bucket-wise for histograms); ``total``'s restart count is kept."""
    if total is None:
        return more
    histograms: dict[str, Buckets] = {}
    for key in set(total.histograms) | set(more.histograms):
        summed = dict(total.histograms.get(key, ()))
        for le, count in more.histograms.get(key, ()):
            summed[le] = summed.get(le, 0.0) + count
        histograms[key] = tuple(sorted(summed.items()))
    values = {name: getattr(total, name) + getattr(more, name) for name in _SCALARS}
    return PodCounts(histograms=histograms, restarts=total.restarts, **values)


def accumulate(
    step: Mapping[str, PodCounts], last: Mapping[str, PodCounts], now: Mapping[str, PodCounts]
) -> dict[str, PodCounts]:
    """The step's counts per pod after one more read: ``step`` (what each pod counted so
    far; its ``restarts`` is the count at the pod's first read) plus the increase from
    ``last`` (each pod's previous read) to ``now``. A pod not read now keeps its counts."""
    out = dict(step)
    for pod, counts in now.items():
        more, _ = increase(last.get(pod), counts)
        out[pod] = add(step.get(pod), more)
    return out


def _went_down(start: PodCounts, end: PodCounts) -> bool:
    # the gateway's counter (last of _SCALARS) is not the pod's: it never resets the pod
    if any(getattr(end, name) < getattr(start, name) for name in _SCALARS[:-1]):
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
    step: Mapping[str, PodCounts], last: Mapping[str, PodCounts]
) -> dict[str, PodDelta]:
    """Per pod, what it counted during the step (``accumulate``'s result) and whether its
    server restarted since its first read of the step (``last``: its latest read)."""
    return {
        pod: PodDelta(counts, restarted=pod in last and last[pod].restarts != counts.restarts)
        for pod, counts in sorted(step.items())
    }
