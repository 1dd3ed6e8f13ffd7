"""Reading a canary step's counts from Prometheus instead of the pods (``analysis.prometheus``).

Where the operator may not reach vLLM's pods (a NetworkPolicy it cannot change, pods in a
mesh) but a Prometheus already scrapes them, the step's start and end counts come from
Prometheus's HTTP API: one instant query (``GET /api/v1/query``, ``time`` = the moment the
shell reads) selecting exactly the series the canary judges, for the step's pods. The answer
is turned into the same per-pod counts a /metrics page gives (``counts_from_samples``), so
the deltas, the restart handling and the judge are the same code. The values are those of
Prometheus's last scrape before that moment (up to one scrape interval old): a step should
hold several scrape intervals.

A step reads every analysis interval, Prometheus scrapes more often: from the step's second
read on, the samples since the previous read are read too (the same selector with a range),
and what a series held before each reset among them is kept (``resets_by_pod``), so a
restart between two reads loses nothing Prometheus scraped, as with ``increase()``. With
``gatewayErrors``, one more instant query counts the gateway's own failures (a template of
``api/canary_prometheus.py`` or the author's query, one number).

Prometheus is another party: its answer is bounded (``MAX_ANSWER`` bytes, ``MAX_SERIES``
series, ``MAX_SAMPLES`` samples of a range, the source's timeout) and checked for shape;
anything else is a ``PrometheusAnswerError`` reported per pod as a ``ScrapeFailure``, so the
step waits and says why (Event ``CanaryScrapeFailed``), never a traceback.
"""

from __future__ import annotations

import dataclasses
import itertools
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
    IDENTITY_LABELS,
    WANTED_SERIES,
    PodCounts,
    ScrapeError,
    ScrapeFailure,
    counts_from_samples,
)
from vllm_operator.rollout.canary.reads import GatewayScope
from vllm_operator.rollout.views import PodView

MAX_ANSWER = 8 * 1024 * 1024
"""Most bytes of one answer (a step's pods' series are ~2,000 samples, ~1 MB)."""
MAX_SERIES = 50_000
MAX_SAMPLES = 500_000
"""Most samples of one range answer (the samples since the step's previous read: with a
15 s scrape and a 30 s analysis interval, ~3 per series)."""
QUERY_PATH = "/api/v1/query"
MAX_RANGE_SECONDS = 300
"""Longest look back for resets since the previous read (Prometheus' default lookback): a
read after a long gap (the operator down) looks no further."""


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


def _result(answer: bytes, kind: str, max_series: int) -> list[Any]:
    """The ``data.result`` list of a successful answer of ``kind`` (vector, matrix)."""
    try:
        body = json.loads(answer)
    except (ValueError, RecursionError) as exc:
        raise PrometheusAnswerError(f"the answer is not JSON ({type(exc).__name__})") from None
    if not isinstance(body, dict):
        raise PrometheusAnswerError("the answer is not a JSON object")
    if body.get("status") != "success":
        kind_, error = body.get("errorType"), body.get("error")
        raise PrometheusAnswerError(f"Prometheus answered {str(kind_)[:60]}: {str(error)[:200]}")
    data = body.get("data")
    if not isinstance(data, dict) or data.get("resultType") != kind:
        what = "an instant vector" if kind == "vector" else "a range of samples"
        raise PrometheusAnswerError(f"the answer's data is not {what}")
    result = data.get("result")
    if not isinstance(result, list):
        raise PrometheusAnswerError("the answer's data.result is not a list")
    if len(result) > max_series:
        raise PrometheusAnswerError(f"{len(result)} series, more than {max_series}")
    return result


def samples_by_pod(
    answer: bytes, pod_label: str, max_series: int = MAX_SERIES
) -> dict[str, list[tuple[str, Mapping[str, str], float]]]:
    """An instant query's JSON answer -> pod -> its samples; PrometheusAnswerError when the
    answer is not a successful vector of finite samples, each with the pod label."""
    result = _result(answer, "vector", max_series)
    out: dict[str, list[tuple[str, Mapping[str, str], float]]] = {}
    for item in result:
        name, labels, value = _one(item)
        pod = labels.get(pod_label)
        if pod is None:
            raise PrometheusAnswerError(f"a series of {name[:100]} has no {pod_label} label")
        out.setdefault(pod, []).append((name, labels, value))
    return out


Sample = tuple[str, Mapping[str, str], float]


def resets_by_pod(
    answer: bytes, pod_label: str, max_series: int = MAX_SERIES, max_samples: int = MAX_SAMPLES
) -> dict[str, list[Sample]]:
    """A range selector's answer (each series' samples since the previous read) -> pod ->
    per series, the sum of its values just before each reset (a value below the one
    before it), for the pods with at least one reset. Of the same series scraped by several
    jobs or instances, the one with the latest largest value is used, as for the counts."""
    result = _result(answer, "matrix", max_series)
    chosen: dict[tuple[str, ...], tuple[str, dict[str, str], list[float]]] = {}
    samples = 0
    for item in result:
        name, labels, values = _series(item)
        samples += len(values)
        if samples > max_samples:
            raise PrometheusAnswerError(f"more than {max_samples} samples since the last read")
        if not values or labels.get(pod_label) is None:
            continue
        key = (labels[pod_label], name, *(labels.get(k, "") for k in IDENTITY_LABELS))
        kept = chosen.get(key)
        if kept is None or values[-1] > kept[2][-1]:
            chosen[key] = (name, labels, values)
    out: dict[str, list[Sample]] = {}
    reset_pods: set[str] = set()
    for name, labels, values in chosen.values():
        before = sum(a for a, b in itertools.pairwise(values) if b < a)
        pod = labels[pod_label]
        out.setdefault(pod, []).append((name, labels, before))
        if before > 0:
            reset_pods.add(pod)
    return {pod: found for pod, found in out.items() if pod in reset_pods}


def _series(item: Any) -> tuple[str, dict[str, str], list[float]]:
    """One series of a matrix: name, labels, finite values in time order."""
    if not isinstance(item, dict) or not isinstance(item.get("values"), list):
        raise PrometheusAnswerError("a series of the range answer has no values")
    metric = _labels(item.get("metric"))
    values: list[float] = []
    for pair in item["values"]:
        if not isinstance(pair, list) or len(pair) != 2 or not isinstance(pair[1], str):
            raise PrometheusAnswerError('a range sample is not [time, "number"]')
        try:
            number = float(pair[1])
        except ValueError:
            raise PrometheusAnswerError(f"a sample {pair[1][:40]!r} is no number") from None
        if math.isfinite(number):
            values.append(number)
    return str(metric.get("__name__", "")), metric, values


def _labels(metric: Any) -> dict[str, str]:
    """A series' ``metric``, which must be a map of label strings."""
    if not isinstance(metric, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metric.items()
    ):
        raise PrometheusAnswerError("a series' metric is not a map of label strings")
    return metric


def _one(item: Any) -> tuple[str, dict[str, str], float]:
    if not isinstance(item, dict):
        raise PrometheusAnswerError("a series is not an object")
    metric, value = _labels(item.get("metric")), item.get("value")
    if not isinstance(value, list) or len(value) != 2 or not isinstance(value[1], str):
        raise PrometheusAnswerError('a series\' value is not [time, "number"]')
    try:
        number = float(value[1])
    except ValueError:
        raise PrometheusAnswerError(f"a series' value {value[1][:40]!r} is no number") from None
    if math.isnan(number):
        number = math.inf  # skipped as not finite by counts_from_samples
    return str(metric.get("__name__", "")), metric, number


def _with_resets(counts: PodCounts, before: list[Sample] | None) -> PodCounts:
    """``counts`` with what its series held before their resets, where that is readable as
    a pod's counts (else the plain counts: the samples only refine them)."""
    if before is None:
        return counts
    try:
        return dataclasses.replace(counts, before_reset=counts_from_samples(before, 0))
    except ScrapeError:
        return counts


class PrometheusReader:
    """Reads a step's per-pod counts from Prometheus; one aiohttp session per call."""

    def __init__(self, max_answer: int = MAX_ANSWER, max_series: int = MAX_SERIES) -> None:
        self.max_answer = max_answer
        self.max_series = max_series

    async def read(
        self,
        source: PrometheusSource,
        namespace: str,
        pods: Sequence[PodView],
        when: datetime,
        *,
        since: datetime | None = None,
        gateway: GatewayScope | None = None,
    ) -> dict[str, PodCounts | ScrapeFailure]:
        """Pod name -> its counts at ``when`` (restarts left 0: the planner knows them), or
        why they could not be read (the same reason for every pod when the query failed).

        ``since``: the step's previous read. The samples Prometheus scraped in between are
        read too (a range selector), and a counter reset among them gives the pod's
        ``before_reset``: what it counted up to the reset is kept, as ``increase()`` keeps
        it, not only what it counted after.

        ``gateway`` (with ``source.gateway_errors``): the gateway's own failures, one
        number, on the scope's holder pod."""
        names = [p.name for p in pods]
        selector = query(source, namespace, names)
        try:
            answer = await self._query(source, selector, when)
            found = samples_by_pod(answer, source.pod_label, self.max_series)
            resets = await self._resets(source, selector, since, when)
            failed = await self._gateway_errors(source, namespace, gateway, when)
        except PrometheusAnswerError as exc:
            failure = ScrapeFailure(f"Prometheus {source.url}: {exc}"[:300])
            return dict.fromkeys(names, failure)
        out: dict[str, PodCounts | ScrapeFailure] = {}
        for name in names:
            try:
                counts = counts_from_samples(
                    found.get(name, []), 0, f"Prometheus's answer for pod {name}"
                )
                counts = _with_resets(counts, resets.get(name))
                if gateway is not None and name == gateway.holder and failed is not None:
                    counts = dataclasses.replace(counts, gateway_errors=failed)
                out[name] = counts
            except ScrapeError as exc:
                out[name] = ScrapeFailure(str(exc)[:300])
        return out

    async def _resets(
        self, source: PrometheusSource, selector: str, since: datetime | None, when: datetime
    ) -> dict[str, list[Sample]]:
        """``resets_by_pod`` of the samples since ``since`` (at most ``MAX_RANGE_SECONDS``
        back). Nothing when they cannot be read (too many, an error): the read then counts
        as without them (a reset's earlier counts since the last read are lost), never
        failing the step for what only refines it."""
        if since is None or when <= since:
            return {}
        seconds = min((when - since).total_seconds(), MAX_RANGE_SECONDS)
        window = max(math.ceil(seconds * 1000), 1)
        try:
            ranged = await self._query(source, f"{selector}[{window}ms]", when)
            return resets_by_pod(ranged, source.pod_label, self.max_series)
        except PrometheusAnswerError:
            return {}

    async def _gateway_errors(
        self, source: PrometheusSource, namespace: str, gateway: GatewayScope | None, when: datetime
    ) -> float | None:
        """The gateway's own failures so far (the sum of the query's series; 0 before the
        first), or None when not asked for."""
        if source.gateway_errors is None or gateway is None:
            return None
        promql = source.gateway_errors.promql(namespace, gateway.service, gateway.route)
        result = _result(await self._query(source, promql, when), "vector", self.max_series)
        total = 0.0
        for item in result:
            _, _, value = _one(item)
            if not math.isfinite(value) or value < 0:
                raise PrometheusAnswerError(f"the gateway query gave {value}, not a count")
            total += value
        return total

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
