"""The simulator's HTTP surface: vLLM's endpoints on one aiohttp application.

Why aiohttp on a single event loop: a token is one small write, and thousands of streams
must be paced to the millisecond on one core; coroutines sleeping to absolute deadlines
(see :mod:`.engine`) do that without threads. The completion handler is in
:mod:`.streaming`; this module wires routes, the ``--api-key`` check on ``/v1/*`` only
(as vLLM), and the ``/sim/*`` side channel, which needs no key.

Errors are JSON in vLLM's ``ErrorResponse`` shape, ``{"error": {"message", "type", "param",
"code"}}`` (vllm/entrypoints/openai/engine/protocol.py ``ErrorInfo``; main at commit
0753ceeb, 2026): an unknown path or method answers like vLLM's ``http_exception_handler``
(``type`` is the HTTP phrase, e.g. "Not Found"), and a body FastAPI cannot parse is a 400:
invalid JSON is a validation error, anything else json raises (nesting past the recursion
limit, integers past Python's 4,300-digit limit) is FastAPI's "There was an error parsing
the body" (fastapi/routing.py), never a 500 in plain text.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from aiohttp import web

from vllm_operator.sim import generation
from vllm_operator.sim.ledger import RequestRecord
from vllm_operator.sim.metrics import CONTENT_TYPE
from vllm_operator.sim.openai_format import error_body
from vllm_operator.sim.requests import RequestError, parse
from vllm_operator.sim.state import LiveFaults, SimState
from vllm_operator.sim.streaming import Generation

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
LIVE_HEADER = "x-sim-live"
"""A request from a simulated live user (the demo's, the canary tests'), not a benchmark."""


def error_response(status: int, message: str, param: str | None = None) -> web.Response:
    return web.json_response(error_body(status, message, param=param), status=status)


LIVE_FAULT_KEYS = (
    "errorRate",
    "delaySeconds",
    "streamErrorRate",
    "hangRate",
    "crashAfterSeconds",
    "metricsStatus",
)


@dataclass(frozen=True)
class LiveFaultChange:
    live: LiveFaults
    crash_after: float | None


def live_faults_from(body: object, now: LiveFaults) -> LiveFaultChange:
    """``POST /sim/live-faults``'s body over the faults in force; ValueError when a value is
    out of its range (rates 0..1, delay 0..60 s, crash 0..3600 s, metricsStatus 200 or 5xx)
    or a key unknown."""
    if not isinstance(body, dict):
        raise ValueError("the body is not a JSON object")
    unknown = set(body) - set(LIVE_FAULT_KEYS)
    if unknown:
        raise ValueError(f"unknown key(s) {sorted(unknown)}")
    rates = {
        key: float(body.get(key, old))
        for key, old in (
            ("errorRate", now.error_rate),
            ("streamErrorRate", now.stream_error_rate),
            ("hangRate", now.hang_rate),
        )
    }
    delay = float(body.get("delaySeconds", now.delay_seconds))
    crash = body.get("crashAfterSeconds")
    crash_after = None if crash is None else float(crash)
    if not all(0 <= r <= 1 for r in rates.values()) or not 0 <= delay <= 60:
        raise ValueError("rates must be 0..1 and delaySeconds 0..60")
    if crash_after is not None and not 0 <= crash_after <= 3600:
        raise ValueError("crashAfterSeconds must be 0..3600")
    metrics_status = int(body.get("metricsStatus", now.metrics_status))
    if metrics_status != 200 and not 500 <= metrics_status <= 599:
        raise ValueError("metricsStatus must be 200 or 500..599")
    live = LiveFaults(
        error_rate=rates["errorRate"],
        delay_seconds=delay,
        stream_error_rate=rates["streamErrorRate"],
        hang_rate=rates["hangRate"],
        metrics_status=metrics_status,
    )
    return LiveFaultChange(live, crash_after)


def build_app(state: SimState) -> web.Application:
    """The aiohttp application of one simulator."""
    config = state.config

    keys = (config.api_key,) if isinstance(config.api_key, str) else config.api_key or ()
    accepted = {f"Bearer {key}" for key in keys}

    @web.middleware
    async def api_key(request: web.Request, handler: Handler) -> web.StreamResponse:
        if (
            accepted
            and request.path.startswith("/v1")
            and request.headers.get("Authorization", "") not in accepted
        ):
            return error_response(401, "Unauthorized: a valid API key is required")
        return await handler(request)

    @web.middleware
    async def json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            phrase = HTTPStatus(exc.status).phrase
            body = error_body(exc.status, phrase)
            body["error"]["type"] = phrase  # vLLM: HTTPStatus(exc.status_code).phrase
            return web.json_response(body, status=exc.status)

    @web.middleware
    async def http_metrics(request: web.Request, handler: Handler) -> web.StreamResponse:
        # vLLM's API server counts answers with prometheus-fastapi-instrumentator:
        # http_requests_total{handler, method, status="2xx"}, serving routes only.
        try:
            response = await handler(request)
        except web.HTTPException as exc:
            state.metrics.http(request.path, request.method, exc.status)
            raise
        state.metrics.http(request.path, request.method, response.status)
        return response

    app = web.Application(
        middlewares=[http_metrics, json_errors, api_key], client_max_size=64 * 1024 * 1024
    )

    async def health(_: web.Request) -> web.Response:
        return web.Response(status=503 if state.dead else 200)

    async def version(_: web.Request) -> web.Response:
        return web.json_response({"version": str(config.version)})

    async def models(_: web.Request) -> web.Response:
        data = [
            {
                "id": name,
                "object": "model",
                "created": state.created,
                "owned_by": "vllm",
                "root": config.model,
                "parent": None,
                "max_model_len": config.max_model_len,
            }
            for name in config.model_names
        ]
        return web.json_response({"object": "list", "data": data})

    async def metrics(_: web.Request) -> web.Response:
        if state.live.metrics_status != 200:
            return error_response(state.live.metrics_status, "injected fault (metrics)")
        return web.Response(body=state.metrics.exposition(), headers={"Content-Type": CONTENT_TYPE})

    async def sim_request(request: web.Request) -> web.Response:
        record = state.ledger.get(request.match_info["id"])
        if record is None:
            return error_response(404, "unknown request id (the ledger keeps the last ones)")
        return web.json_response(record.as_json())

    async def sim_timing(request: web.Request) -> web.Response:
        summary = state.timing.summary()
        if request.query.get("reset") in ("1", "true"):
            state.timing.reset()
        return web.json_response(summary)

    async def sim_config(_: web.Request) -> web.Response:
        p = config.profile
        return web.json_response(
            {
                "model": config.model,
                "version": str(config.version),
                "profile": p.name,
                "mode": p.mode,
                "profile_source": p.source,
                "time_scale": config.time_scale,
                "warmup_seconds": config.warmup_seconds,
                "max_num_seqs": config.max_num_seqs,
                "max_model_len": config.max_model_len,
                "answers": len(config.answers),
                "degraded": config.degraded,
                "noise": {
                    "speed": config.noise.speed,
                    "jitter_percent": config.noise.jitter_percent,
                    "jit_stall_ms": config.noise.jit_stall_ms,
                    "jit_stall_chance": config.noise.jit_stall_chance,
                    "ttft_tail_percent": config.noise.ttft_tail_percent,
                    "ttft_tail_ms": config.noise.ttft_tail_ms,
                    "stalled_buckets": list(state.engine.noise.stalls),
                },
            }
        )

    async def sim_live_faults(request: web.Request) -> web.Response:
        try:
            body = await request.json()
            changed = live_faults_from(body, state.live)
        except (ValueError, TypeError, AttributeError) as exc:
            return error_response(400, f"expected {{{', '.join(LIVE_FAULT_KEYS)}}}: {exc}")
        state.live = changed.live
        if changed.crash_after is not None:
            asyncio.get_running_loop().call_later(changed.crash_after, state.crash)
        return web.json_response(
            {
                "errorRate": changed.live.error_rate,
                "delaySeconds": changed.live.delay_seconds,
                "streamErrorRate": changed.live.stream_error_rate,
                "hangRate": changed.live.hang_rate,
                "crashAfterSeconds": changed.crash_after,
                "metricsStatus": changed.live.metrics_status,
            }
        )

    async def completions(request: web.Request) -> web.StreamResponse:
        return await handle_completion(state, request, chat=False)

    async def chat(request: web.Request) -> web.StreamResponse:
        return await handle_completion(state, request, chat=True)

    app.router.add_get("/health", health)
    app.router.add_get("/ping", health)
    app.router.add_post("/ping", health)
    app.router.add_get("/version", version)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/metrics", metrics)
    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/sim/requests/{id}", sim_request)
    app.router.add_get("/sim/timing", sim_timing)
    app.router.add_get("/sim/config", sim_config)
    app.router.add_post("/sim/live-faults", sim_live_faults)
    return app


async def handle_completion(
    state: SimState, request: web.Request, *, chat: bool
) -> web.StreamResponse:
    """Validate, maybe inject an error, plan the answer, then generate it in time."""
    config = state.config
    if state.dead:
        return error_response(500, "EngineDeadError: the engine core died (simulated)")
    arrival_wall = state.wall()
    arrival = asyncio.get_running_loop().time()
    try:
        body: Any = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return error_response(400, "request body is not valid JSON")
    except (ValueError, RecursionError):  # FastAPI: any other parse failure is a 400
        return error_response(400, "There was an error parsing the body")
    try:
        req = parse(
            body, chat=chat, model_names=config.model_names, max_model_len=config.max_model_len
        )
    except RequestError as e:
        return error_response(e.status, e.message, e.param)
    faults = config.faults
    if faults.error_rate > 0 and state.rng.random() < faults.error_rate:
        return error_response(faults.error_status, "injected fault (--sim-error-rate)")
    stream_error = hang = False
    if request.headers.get(LIVE_HEADER):
        # Faults only real traffic meets (the demo's live users mark their requests): a
        # candidate that passes its synthetic gate and fails its canary.
        live = state.live
        if live.error_rate > 0 and state.rng.random() < live.error_rate:
            return error_response(faults.error_status, "injected fault (--sim-live-error-rate)")
        if live.delay_seconds > 0:
            await asyncio.sleep(live.delay_seconds)
        stream_error = live.stream_error_rate > 0 and state.rng.random() < live.stream_error_rate
        hang = live.hang_rate > 0 and state.rng.random() < live.hang_rate
    request_id = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
    plan = generation.plan(
        req.prompt,
        max_tokens=req.max_tokens,
        book=config.answers,
        degraded=config.degraded,
        stop=req.stop,
        ignore_eos=req.ignore_eos,
        chat=chat,
    )
    record = RequestRecord(id=request_id, arrival=arrival_wall, prompt_tokens=req.prompt_tokens)
    state.ledger.add(record)
    run = Generation(
        state=state,
        request=request,
        req=req,
        plan=plan,
        record=record,
        arrival=arrival,
        stream_error=stream_error,
        hang=hang,
    )
    return await run.respond()
