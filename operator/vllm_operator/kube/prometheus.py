"""Reading a canary step's counts from Prometheus instead of the pods (``analysis.prometheus``).

Where the operator may not reach vLLM's pods (a NetworkPolicy it cannot change, pods in a
mesh) but a Prometheus already scrapes them, the step's start and end counts come from
Prometheus's HTTP API: one instant query (``GET /api/v1/query``, ``time`` = the moment the
shell reads) selecting exactly the series the canary judges, for the step's pods. The answer
is turned into the same per-pod counts a /metrics page gives (``counts_from_samples``), so
the deltas, the restart handling and the judge are the same code. The values are those of
Prometheus's last scrape before that moment (up to one scrape interval old): a step should
hold several scrape intervals.

Prometheus is another party: its answer is bounded (``MAX_ANSWER`` bytes, ``MAX_SERIES``
series, the source's timeout) and checked for shape; anything else is a
``PrometheusAnswerError`` reported per pod as a ``ScrapeFailure``, so the step waits and
says why (Event ``CanaryScrapeFailed``), never a traceback.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import aiohttp

from vllm_operator.api.canary_prometheus import PrometheusSource
from vllm_operator.kube.scrape import read_bounded
from vllm_operator.rollout.canary.metrics import (
    WANTED_SERIES,
    PodCounts,
    ScrapeError,
    ScrapeFailure,
    counts_from_samples,
)
from vllm_operator.rollout.views import PodView

MAX_ANSWER = 8 * 1024 * 1024
"""Most bytes of one answer (a step's pods' series are ~2,000 samples, ~1 MB)."""
MAX_SERIES = 50_000
QUERY_PATH = "/api/v1/query"


class PrometheusAnswerError(ScrapeError):
    """Prometheus's answer could not be used: an error, a wrong shape, too large, too slow."""


def query(source: PrometheusSource, namespace: str, pods: Sequence[str]) -> str:
    """The PromQL selector of every series the canary reads, for ``pods`` of ``namespace``."""
    names = "|".join(re.escape(n) for n in WANTED_SERIES)
    pod_names = "|".join(re.escape(p) for p in sorted(pods))
    return (
        f'{{__name__=~"{_quoted(names)}", {source.namespace_label}="{_quoted(namespace)}", '
        f'{source.pod_label}=~"{_quoted(pod_names)}"}}'
    )


def _quoted(text: str) -> str:
    """A PromQL double-quoted string's content (backslashes and quotes escaped)."""
    return text.replace("\\", "\\\\").replace('"', '\\"')


def samples_by_pod(
    answer: bytes, pod_label: str, max_series: int = MAX_SERIES
) -> dict[str, list[tuple[str, Mapping[str, str], float]]]:
    """An instant query's JSON answer -> pod -> its samples; PrometheusAnswerError when the
    answer is not a successful vector of finite samples, each with the pod label."""
    try:
        body = json.loads(answer)
    except (ValueError, RecursionError) as exc:
        raise PrometheusAnswerError(f"the answer is not JSON ({type(exc).__name__})") from None
    if not isinstance(body, dict):
        raise PrometheusAnswerError("the answer is not a JSON object")
    if body.get("status") != "success":
        kind, error = body.get("errorType"), body.get("error")
        raise PrometheusAnswerError(f"Prometheus answered {str(kind)[:60]}: {str(error)[:200]}")
    data = body.get("data")
    if not isinstance(data, dict) or data.get("resultType") != "vector":
        raise PrometheusAnswerError("the answer's data is not an instant vector")
    result = data.get("result")
    if not isinstance(result, list):
        raise PrometheusAnswerError("the answer's data.result is not a list")
    if len(result) > max_series:
        raise PrometheusAnswerError(f"{len(result)} series, more than {max_series}")
    out: dict[str, list[tuple[str, Mapping[str, str], float]]] = {}
    for item in result:
        name, labels, value = _one(item)
        pod = labels.get(pod_label)
        if pod is None:
            raise PrometheusAnswerError(f"a series of {name[:100]} has no {pod_label} label")
        out.setdefault(pod, []).append((name, labels, value))
    return out


def _one(item: Any) -> tuple[str, dict[str, str], float]:
    if not isinstance(item, dict):
        raise PrometheusAnswerError("a series is not an object")
    metric, value = item.get("metric"), item.get("value")
    if not isinstance(metric, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metric.items()
    ):
        raise PrometheusAnswerError("a series' metric is not a map of label strings")
    if not isinstance(value, list) or len(value) != 2 or not isinstance(value[1], str):
        raise PrometheusAnswerError('a series\' value is not [time, "number"]')
    try:
        number = float(value[1])
    except ValueError:
        raise PrometheusAnswerError(f"a series' value {value[1][:40]!r} is no number") from None
    if math.isnan(number):
        number = math.inf  # skipped as not finite by counts_from_samples
    return str(metric.get("__name__", "")), metric, number


class PrometheusReader:
    """Reads a step's per-pod counts from Prometheus; one aiohttp session per call."""

    def __init__(self, max_answer: int = MAX_ANSWER, max_series: int = MAX_SERIES) -> None:
        self.max_answer = max_answer
        self.max_series = max_series

    async def read(
        self, source: PrometheusSource, namespace: str, pods: Sequence[PodView], when: datetime
    ) -> dict[str, PodCounts | ScrapeFailure]:
        """Pod name -> its counts at ``when`` (restarts left 0: the planner knows them), or
        why they could not be read (the same reason for every pod when the query failed)."""
        names = [p.name for p in pods]
        try:
            answer = await self._query(source, query(source, namespace, names), when)
            found = samples_by_pod(answer, source.pod_label, self.max_series)
        except PrometheusAnswerError as exc:
            failure = ScrapeFailure(f"Prometheus {source.url}: {exc}"[:300])
            return dict.fromkeys(names, failure)
        out: dict[str, PodCounts | ScrapeFailure] = {}
        for name in names:
            try:
                out[name] = counts_from_samples(
                    found.get(name, []), 0, f"Prometheus's answer for pod {name}"
                )
            except ScrapeError as exc:
                out[name] = ScrapeFailure(str(exc)[:300])
        return out

    async def _query(self, source: PrometheusSource, promql: str, when: datetime) -> bytes:
        url = source.url.rstrip("/") + QUERY_PATH
        params = {"query": promql, "time": f"{when.timestamp():.3f}"}
        timeout = aiohttp.ClientTimeout(total=source.timeout_seconds)
        try:
            async with (
                aiohttp.ClientSession(timeout=timeout) as session,
                session.get(url, params=params, allow_redirects=False) as response,
            ):
                body = await read_bounded(response.content, self.max_answer)
                status = response.status
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise PrometheusAnswerError(f"{type(exc).__name__}: {exc}"[:200]) from None
        if body is None:
            raise PrometheusAnswerError(f"an answer over {self.max_answer} bytes")
        if status != 200:
            # Prometheus's own errors (400, 422, 503) carry the JSON envelope: say its error.
            try:
                samples_by_pod(body, source.pod_label)
            except PrometheusAnswerError as exc:
                raise PrometheusAnswerError(f"HTTP {status}: {exc}") from None
            raise PrometheusAnswerError(f"HTTP {status}")
        return body
