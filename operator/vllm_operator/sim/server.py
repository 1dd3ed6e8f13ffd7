"""The simulator's HTTP surface: vLLM's endpoints on one aiohttp application.

Why aiohttp on a single event loop: a token is one small write, and thousands of streams
must be paced to the millisecond on one core; coroutines sleeping to absolute deadlines
(see :mod:`.engine`) do that without threads. The completion handler is in
:mod:`.streaming`; this module wires routes, the ``--api-key`` check on ``/v1/*`` only
(as vLLM), and the ``/sim/*`` side channel, which needs no key.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from vllm_operator.sim import generation
from vllm_operator.sim.config import SimConfig
from vllm_operator.sim.engine import Engine
from vllm_operator.sim.ledger import Ledger, RequestRecord, TimingStats
from vllm_operator.sim.metrics import CONTENT_TYPE, SimMetrics
from vllm_operator.sim.openai_format import error_body
from vllm_operator.sim.requests import RequestError, parse
from vllm_operator.sim.streaming import Generation

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def error_response(status: int, message: str, param: str | None = None) -> web.Response:
    return web.json_response(error_body(status, message, param=param), status=status)


class SimState:
    """Everything the handlers of one simulator share."""

    def __init__(self, config: SimConfig, *, wall: Callable[[], float] = time.time) -> None:
        self.config = config
        self.wall = wall
        self.engine = Engine(
            config.profile,
            max_num_seqs=config.max_num_seqs,
            time_scale=config.time_scale,
            noise=config.noise,
            rng=random.Random(config.seed),  # None: a fresh draw per start
        )
        self.ledger = Ledger(config.ledger_size)
        self.timing = TimingStats()
        engine = self.engine
        self.metrics = SimMetrics(
            config.model_names[0],
            running=lambda: float(engine.running),
            waiting=lambda: float(engine.waiting),
            kv_usage=engine.kv_usage,
        )
        self.rng = random.Random(0 if config.seed is None else config.seed)
        self.created = int(wall())
        self.dead = False  # the engine died (fault): /health 503, completions 500


def build_app(state: SimState) -> web.Application:
    """The aiohttp application of one simulator."""
    config = state.config

    @web.middleware
    async def api_key(request: web.Request, handler: Handler) -> web.StreamResponse:
        if (
            config.api_key
            and request.path.startswith("/v1")
            and request.headers.get("Authorization", "") != f"Bearer {config.api_key}"
        ):
            return error_response(401, "Unauthorized: a valid API key is required")
        return await handler(request)

    app = web.Application(middlewares=[api_key], client_max_size=64 * 1024 * 1024)

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
                    "stalled_buckets": list(state.engine.noise.stalls),
                },
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
    try:
        req = parse(
            body, chat=chat, model_names=config.model_names, max_model_len=config.max_model_len
        )
    except RequestError as e:
        return error_response(e.status, e.message, e.param)
    faults = config.faults
    if faults.error_rate > 0 and state.rng.random() < faults.error_rate:
        return error_response(faults.error_status, "injected fault (--sim-error-rate)")
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
        state=state, request=request, req=req, plan=plan, record=record, arrival=arrival
    )
    return await run.respond()
