"""vLLM's Prometheus metrics, fed by the simulator's real traffic.

Why: dashboards, autoscalers and the operator's own checks read ``vllm:*`` metrics; the
simulator exports the names listed in vllm-facts (0.17-0.33) with the ``model_name`` and
``engine`` labels vLLM uses. Each server owns a ``CollectorRegistry`` so several simulators
can live in one test process. Gauges are computed when scraped.

The bucket bounds are vLLM's own, so a canary judged on the simulator meets the bucket
edges a real server shows: ``PrometheusStatLogger`` in ``vllm/v1/metrics/loggers.py``
(read at vllm-project/vllm commit 005a810, the 0.10 line; the same lists in the 0.10.2,
0.11.0, 0.16.0, 0.17.0 and 0.22.0 wheels checked for issue 39): TTFT, ITL (as
``time_per_output_token`` before ``inter_token_latency``) and the request latencies
(E2E, queue, prefill, decode). ``http_requests_total{handler,method,status}`` is
prometheus-fastapi-instrumentator's counter as vLLM's API server mounts it (status grouped
``2xx``/``4xx``/``5xx``; counted when the handler ends, so a stream that broke after its
header is a 2xx).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

LATENCY_BUCKETS = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
    120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip
TTFT_BUCKETS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
    7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
ITL_BUCKETS = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0,
    7.5, 10.0, 20.0, 40.0, 80.0,
)  # fmt: skip

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
SERVING_PREFIXES = ("/v1/",)  # the instrumentator's excluded handlers are the rest


class TokenMetrics(Collector):
    """The per-token series (generation tokens, inter-token latency) without locks.

    prometheus-client's Counter/Histogram take a lock per update; at thousands of tokens per
    second on one core that is a measurable share of the budget, and the simulator updates
    them from a single event loop thread anyway.
    """

    def __init__(self, labels: dict[str, str], buckets: tuple[float, ...]) -> None:
        self._labels = labels
        self._bounds = buckets
        self._counts = [0] * (len(buckets) + 1)
        self._sum = 0.0
        self.generation_tokens = 0

    def observe_itl(self, seconds: float) -> None:
        self._counts[bisect.bisect_left(self._bounds, seconds)] += 1
        self._sum += seconds

    def collect(self) -> Iterator[Metric]:
        names, values = list(self._labels), list(self._labels.values())
        tokens = CounterMetricFamily(
            "vllm:generation_tokens", "Generation tokens processed.", labels=names
        )
        tokens.add_metric(values, float(self.generation_tokens))
        yield tokens
        hist = HistogramMetricFamily(
            "vllm:inter_token_latency_seconds", "Inter-token latency.", labels=names
        )
        cumulative, running = [], 0
        for bound, n in zip((*self._bounds, float("inf")), self._counts, strict=True):
            running += n
            cumulative.append((str(bound) if bound != float("inf") else "+Inf", float(running)))
        hist.add_metric(values, cumulative, self._sum)
        yield hist


class SimMetrics:
    """The metric families of one simulator, pre-bound to its model name."""

    def __init__(
        self,
        model_name: str,
        *,
        running: Callable[[], float],
        waiting: Callable[[], float],
        kv_usage: Callable[[], float],
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        labels = ("model_name", "engine")
        values = (model_name, "0")
        reg = self.registry

        def gauge(name: str, doc: str, fn: Callable[[], float]) -> None:
            Gauge(name, doc, labels, registry=reg).labels(*values).set_function(fn)

        gauge("vllm:num_requests_running", "Requests in model execution batches.", running)
        gauge("vllm:num_requests_waiting", "Requests waiting to be processed.", waiting)
        gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent.", kv_usage)

        def counter(name: str, doc: str) -> Counter:
            return Counter(name, doc, labels, registry=reg)

        self.prompt_tokens = counter("vllm:prompt_tokens", "Prefill tokens processed.").labels(
            *values
        )
        self.tokens = TokenMetrics(dict(zip(labels, values, strict=True)), ITL_BUCKETS)
        reg.register(self.tokens)
        self.preemptions = counter("vllm:num_preemptions", "Cumulative preemptions.").labels(
            *values
        )
        self._success = Counter(
            "vllm:request_success",
            "Successfully processed requests.",
            (*labels, "finished_reason"),
            registry=reg,
        )
        self._values = values
        # prometheus-fastapi-instrumentator's default counter, as vLLM's API server mounts it.
        self._http = Counter(
            "http_requests",
            "Total number of requests by method, status and handler.",
            ("handler", "method", "status"),
            registry=reg,
        )

        def hist(name: str, doc: str, buckets: tuple[float, ...]) -> Histogram:
            return Histogram(name, doc, labels, buckets=buckets, registry=reg)

        self.ttft = hist(
            "vllm:time_to_first_token_seconds", "Time to first token.", TTFT_BUCKETS
        ).labels(*values)
        self.e2e = hist(
            "vllm:e2e_request_latency_seconds", "End-to-end request latency.", LATENCY_BUCKETS
        ).labels(*values)
        self.queue = hist(
            "vllm:request_queue_time_seconds", "Time spent waiting.", LATENCY_BUCKETS
        ).labels(*values)
        self.prefill = hist(
            "vllm:request_prefill_time_seconds", "Time spent in prefill.", LATENCY_BUCKETS
        ).labels(*values)
        self.decode = hist(
            "vllm:request_decode_time_seconds", "Time spent in decode.", LATENCY_BUCKETS
        ).labels(*values)

    def http(self, path: str, method: str, status: int) -> None:
        """One answer of the API server, as vLLM's instrumentator counts it."""
        if path.startswith(SERVING_PREFIXES):
            self._http.labels(path, method, f"{status // 100}xx").inc()

    def success(self, finished_reason: str) -> None:
        self._success.labels(*self._values, finished_reason).inc()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
