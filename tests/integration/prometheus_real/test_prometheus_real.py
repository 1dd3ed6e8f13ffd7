"""analysis.prometheus against a real Prometheus scraping simulators (issue 39, item 9).

A canary step read from Prometheus must count what Prometheus' own ``increase()`` counts over
the step, within one scrape, where a stand-in would have agreed with anything: the same pod
scraped by two jobs (counted once), a target that appears mid-step (counted from its first
read, not with its history) and a counter reset (a simulator restarted mid-step: what it
counted before the restart is kept). The step is read as the operator reads it: the
reader's queries at each read, the planner's accumulation (``metrics.accumulate``), every
pod or none.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime

import aiohttp
from aiohttp import web

from vllm_operator.api.canary_prometheus import GatewayErrors, PrometheusSource
from vllm_operator.kube.prometheus import PrometheusReader
from vllm_operator.rollout.canary.metrics import PodCounts, ScrapeFailure, accumulate
from vllm_operator.rollout.canary.reads import GatewayScope
from vllm_operator.rollout.views import PodView
from vllm_operator.sim import SimConfig, SimServer

from .real_prometheus import NAMESPACE, SCRAPE_SECONDS, Prometheus

BODY = {"prompt": "x y", "max_tokens": 4}
HANDLER = "/v1/completions"


@asynccontextmanager
async def _sim(port: int = 0) -> AsyncIterator[SimServer]:
    config = SimConfig.create(
        "sim-model", warmup_seconds=0.0, ttft_ms=5.0, itl_ms=1.0, host="127.0.0.1", port=port
    )
    async with SimServer(config) as sim:
        yield sim


def _address(sim: SimServer) -> str:
    return sim.url.removeprefix("http://")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Traffic:
    """Requests sent one after another to a simulator's URL (the URL may change)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.sent = 0
        self.paused = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        async with aiohttp.ClientSession() as http:
            while True:
                if self.paused.is_set():
                    await asyncio.sleep(0.01)
                    continue
                try:
                    async with http.post(self.url + "/v1/completions", json=BODY) as r:
                        await r.read()
                        self.sent += 1
                except aiohttp.ClientError:
                    await asyncio.sleep(0.01)  # the simulator is restarting

    def __enter__(self) -> Traffic:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()


class Step:
    """One canary step's reads, as the operator makes them."""

    def __init__(self, prometheus: Prometheus) -> None:
        self.source = PrometheusSource(url=prometheus.url)
        self.reader = PrometheusReader()
        self.counts: dict[str, PodCounts] = {}
        self.last: dict[str, PodCounts] = {}
        self.since: datetime | None = None
        self.first: float | None = None
        self.latest: float | None = None

    async def read(self, pods: list[str]) -> bool:
        """Read every pod; False (nothing accumulated) when one could not be read."""
        now = datetime.now(UTC)
        views = [PodView(name=p, labels={}, ip="127.0.0.1") for p in pods]
        got = await self.reader.read(self.source, NAMESPACE, views, now, since=self.since)
        if any(isinstance(v, ScrapeFailure) for v in got.values()):
            return False
        counts = {p: c for p, c in got.items() if isinstance(c, PodCounts)}
        self.counts = accumulate(self.counts, self.last, counts)
        self.last = counts
        self.since = now
        self.first = now.timestamp() if self.first is None else self.first
        self.latest = now.timestamp()
        return True

    async def read_until(self, pods: list[str], seconds: float = 30.0) -> None:
        deadline = time.monotonic() + seconds
        while not await self.read(pods):
            assert time.monotonic() < deadline, f"{pods} never read from Prometheus"
            await asyncio.sleep(SCRAPE_SECONDS / 4)


async def _increase(prometheus: Prometheus, step: Step, pod: str, job: str) -> dict[str, float]:
    """What Prometheus' ``increase()`` gives over the step (first read to last) for the
    pod's series of one job, and the most one scrape added (the tolerance)."""
    assert step.first is not None
    assert step.latest is not None
    window = f"{round((step.latest - step.first) * 1000)}ms"
    selectors = {
        "requests": f'http_requests_total{{pod="{pod}",job="{job}",handler="{HANDLER}"}}',
        "finished": f'vllm:request_success_total{{pod="{pod}",job="{job}"}}',
        "ttft": f'vllm:time_to_first_token_seconds_count{{pod="{pod}",job="{job}"}}',
    }
    out: dict[str, float] = {}
    for key, selector in selectors.items():
        out[key] = await prometheus.value(f"sum(increase({selector}[{window}]))", step.latest)
    series = await prometheus.query(f"{selectors['requests']}[{window}]", step.latest)
    values = [float(v) for _, v in series[0]["values"]]
    out["one_scrape"] = max(
        (b - a if b >= a else b for a, b in itertools.pairwise(values)), default=0.0
    )
    return out


def _assert_within_one_scrape(counts: PodCounts, expected: dict[str, float]) -> None:
    tolerance = expected["one_scrape"] + 1
    assert abs(counts.http_requests - expected["requests"]) <= tolerance, (counts, expected)
    assert abs(counts.finished - expected["finished"]) <= tolerance, (counts, expected)
    ttft = dict(counts.histograms["ttft"])[math.inf]
    assert abs(ttft - expected["ttft"]) <= tolerance, (counts, expected)


async def _until(check: Callable[[], Awaitable[bool]], seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not await check():
        assert time.monotonic() < deadline, "the condition never held"
        await asyncio.sleep(SCRAPE_SECONDS / 10)


async def _scrapes(prometheus: Prometheus, pod: str, job: str, n: int) -> None:
    """Wait until ``job`` has scraped ``pod`` ``n`` more times."""
    query = f'count_over_time(up{{pod="{pod}",job="{job}"}}[10m])'
    start = await prometheus.value(query)

    async def done() -> bool:
        return await prometheus.value(query) >= start + n

    await _until(done)


async def test_a_pod_scraped_by_two_jobs_counts_once(prometheus: Prometheus) -> None:
    """Two jobs scrape the same simulator, the second from mid-step on: the step counts the
    pod's requests once, as increase() over one job's series does (summed: twice, and the
    second job's history on top)."""
    pod = "dup-0"
    async with _sim() as sim:
        with Traffic(sim.url) as traffic:
            prometheus.scrape("a", pod, _address(sim))
            await _until(lambda: _has_requests(prometheus, pod, "a"))
            step = Step(prometheus)
            await step.read_until([pod])
            await _scrapes(prometheus, pod, "a", 2)
            await step.read([pod])
            prometheus.scrape("b", pod, _address(sim))  # a second job, mid-step
            await _until(lambda: _has_requests(prometheus, pod, "b"))
            for _ in range(3):
                await _scrapes(prometheus, pod, "a", 2)
                assert await step.read([pod])
            assert traffic.sent > 0
    expected = await _increase(prometheus, step, pod, "a")
    assert expected["requests"] > 50  # the step saw real traffic
    _assert_within_one_scrape(step.counts[pod], expected)


async def _has_requests(prometheus: Prometheus, pod: str, job: str) -> bool:
    selector = f'http_requests_total{{pod="{pod}",job="{job}",handler="{HANDLER}"}}'
    return await prometheus.value(f"sum({selector})") > 0


async def test_a_target_that_appears_mid_step_counts_from_zero(prometheus: Prometheus) -> None:
    """A simulator that served many requests before Prometheus scraped it joins the step
    mid-way: it counts what it served after its first read (as increase() does), not its
    history."""
    old, new = "appear-old", "appear-new"
    async with _sim() as first, _sim() as second:
        with Traffic(first.url), Traffic(second.url) as history:
            prometheus.scrape("a", old, _address(first))
            await _until(lambda: _has_requests(prometheus, old, "a"))
            step = Step(prometheus)
            await step.read_until([old])
            await _until(_sent_at_least(history, 300))
            prometheus.scrape("a", new, _address(second))  # appears mid-step
            await step.read_until([old, new])
            for _ in range(3):
                await _scrapes(prometheus, new, "a", 2)
                assert await step.read([old, new])
            before = history.sent
    expected = await _increase(prometheus, step, new, "a")
    assert before >= 300
    assert expected["requests"] < before  # increase() leaves the history out ...
    _assert_within_one_scrape(step.counts[new], expected)  # ... and so does the step


def _sent_at_least(traffic: Traffic, n: int) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return traffic.sent >= n

    return check


async def test_a_counter_reset_mid_step_keeps_what_came_before(prometheus: Prometheus) -> None:
    """A simulator restarted between two reads of the step: what it counted after the
    earlier read and before it went down counts, as increase() counts it (the step reads
    every few scrapes, as a step reads every analysis.intervalSeconds)."""
    pod = "reset-0"
    port = _free_port()
    step = Step(prometheus)
    async with _sim(port) as sim:
        prometheus.scrape("a", pod, _address(sim))
        with Traffic(sim.url) as traffic:
            await _until(lambda: _has_requests(prometheus, pod, "a"))
            await step.read_until([pod])
            await _scrapes(prometheus, pod, "a", 3)
            traffic.paused.set()
            selector = f'sum(http_requests_total{{pod="{pod}",job="a",handler="{HANDLER}"}})'

            async def scraped_last_count() -> bool:
                return await prometheus.value(selector) == await _counter(sim)

            await _until(scraped_last_count)  # Prometheus saw the last count before the end
            final = await _counter(sim)
    async with _sim(port) as again:  # the same pod, its counters from zero
        with Traffic(again.url) as traffic:
            await _until(_sent_at_least(traffic, 20))
            await _until(lambda: _restarted(prometheus, pod))
            await _scrapes(prometheus, pod, "a", 2)
            assert await step.read([pod])
            await _scrapes(prometheus, pod, "a", 2)
            assert await step.read([pod])
    expected = await _increase(prometheus, step, pod, "a")
    assert expected["requests"] > final / 2  # the counts from before the restart are in
    _assert_within_one_scrape(step.counts[pod], expected)


async def _counter(sim: SimServer) -> float:
    async with aiohttp.ClientSession() as http, http.get(sim.url + "/metrics") as r:
        text = await r.text()
    for line in text.splitlines():
        ours = line.startswith("http_requests_total{") and f'handler="{HANDLER}"' in line
        if ours and 'status="2xx"' in line:
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError("the simulator has no http_requests_total for " + HANDLER)


async def _restarted(prometheus: Prometheus, pod: str) -> bool:
    reset = f'resets(http_requests_total{{pod="{pod}",job="a",handler="{HANDLER}"}}[10m])'
    return await prometheus.value(f"sum({reset})") >= 1


class Gateway:
    """A mesh proxy's /metrics as Istio exports it: failures it gave itself (a response
    flag) and answers the upstream gave (flag ``-``), to the candidate's Service and to
    the serving one."""

    def __init__(self) -> None:
        self.own_failures = 0  # to the candidate's Service, flag UH (no healthy upstream)
        self.url = ""
        self._runner: web.AppRunner | None = None

    def page(self) -> str:
        def line(service: str, code: str, flags: str, value: int) -> str:
            return (
                f'istio_requests_total{{reporter="source",destination_service_namespace="ml",'
                f'destination_service_name="{service}",response_code="{code}",'
                f'response_flags="{flags}"}} {value}'
            )

        return "\n".join(
            [
                "# TYPE istio_requests_total counter",
                line("m-candidate", "503", "UH", self.own_failures),
                line("m-candidate", "500", "-", 11),  # vLLM's own 500: vLLM counts it
                line("m-candidate", "200", "-", 900),
                line("m", "504", "UT", 13),  # the stable's: not the candidate's
                "",
            ]
        )

    async def __aenter__(self) -> Gateway:
        async def metrics(_: web.Request) -> web.Response:
            return web.Response(text=self.page())

        app = web.Application()
        app.router.add_get("/metrics", metrics)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.url = f"{host}:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._runner is not None
        await self._runner.cleanup()


async def test_the_istio_template_reads_the_proxys_own_failures(prometheus: Prometheus) -> None:
    """The named template against Istio-shaped series in a real Prometheus: only the
    failures the proxy gave itself for the candidate's Service count, and a step counts
    those that happened inside it, on the candidate pod that holds them."""
    pod = "gwc-0"
    source = PrometheusSource(url=prometheus.url, gateway_errors=GatewayErrors(template="istio"))
    scope = GatewayScope(service="m-candidate", route="r", holder=pod)
    reader = PrometheusReader()
    views = [PodView(name=pod, labels={}, ip="127.0.0.1")]
    async with _sim() as sim, Gateway() as gateway:
        gateway.own_failures = 4
        prometheus.scrape("a", pod, _address(sim))
        prometheus.scrape("a", "gateway-0", gateway.url)
        with Traffic(sim.url):
            await _until(lambda: _has_requests(prometheus, pod, "a"))
            await _until(lambda: _gateway_scraped(prometheus, 4))
            first = await reader.read(source, NAMESPACE, views, datetime.now(UTC), gateway=scope)
            gateway.own_failures = 11
            await _until(lambda: _gateway_scraped(prometheus, 11))
            now = datetime.now(UTC)
            second = await reader.read(source, NAMESPACE, views, now, gateway=scope)
    start, end = first[pod], second[pod]
    assert isinstance(start, PodCounts)
    assert isinstance(end, PodCounts)
    assert start.gateway_errors == 4  # UH only: not vLLM's 500, not the stable's 504
    step = accumulate(accumulate({}, {}, {pod: start}), {pod: start}, {pod: end})
    assert step[pod].gateway_errors == 7
    assert step[pod].errors == 7 + step[pod].http_errors
    assert step[pod].requests == 7 + max(step[pod].finished, step[pod].http_requests)


async def _gateway_scraped(prometheus: Prometheus, value: int) -> bool:
    found = await prometheus.value(
        'sum(istio_requests_total{destination_service_name="m-candidate",response_flags="UH"})'
    )
    return found == value
