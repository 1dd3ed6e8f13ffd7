"""Hostile OpenAI-style servers on loopback: each answers the way issue 10's attacks did.

Used by ``test_bench_hostile.py`` (in-process, one aiohttp app per case) and by
``benchmarks/bench_hostile.py`` (``python hostile_servers.py CASE`` prints its URL and serves
until killed, so bench's memory can be measured as a process of its own).
"""

from __future__ import annotations

import asyncio
import functools
import json
import sys
import zlib
from collections.abc import Awaitable, Callable

from aiohttp import web

MODEL = "hostile-model"
MODELS_BODY = json.dumps({"object": "list", "data": [{"id": MODEL, "object": "model"}]})
DEEP = "[" * 100_000 + "]" * 100_000
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@functools.cache
def gzip_bomb(compressed_bytes: int = 1 << 20) -> bytes:
    """About ``compressed_bytes`` of gzip that inflates ~1000-fold (zeros)."""
    z = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = b"0" * (1 << 20)
    parts = []
    size = 0
    while size < compressed_bytes:
        part = z.compress(block)
        parts.append(part)
        size += len(part)
    parts.append(z.flush())
    return b"".join(parts)


def _chunk(content: str | None = None, usage: dict[str, int] | None = None) -> bytes:
    obj: dict[str, object] = {
        "id": "x",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": MODEL,
        "choices": [] if content is None else [{"index": 0, "delta": {"content": content}}],
    }
    if usage is not None:
        obj["usage"] = usage
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


async def models(_request: web.Request) -> web.StreamResponse:
    return web.Response(text=MODELS_BODY, content_type="application/json")


async def _sse(request: web.Request, encoding: str | None = None) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
    if encoding:
        resp.headers["content-encoding"] = encoding
    await resp.prepare(request)
    return resp


async def gzip_bomb_models(_request: web.Request) -> web.StreamResponse:
    return web.Response(
        body=gzip_bomb(),
        headers={"content-type": "application/json", "content-encoding": "gzip"},
    )


async def gzip_bomb_stream(request: web.Request) -> web.StreamResponse:
    resp = await _sse(request, "gzip")
    await resp.write(gzip_bomb())
    return resp


async def huge_models(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"content-type": "application/json"})
    await resp.prepare(request)
    block = b" " * (1 << 20)
    for _ in range(1024):  # 1 GiB of whitespace, if anyone reads it
        await resp.write(block)
    return resp


async def endless_stream(request: web.Request) -> web.StreamResponse:
    """Valid content chunks, as fast as the client takes them, forever."""
    resp = await _sse(request)
    batch = _chunk(" tok") * 64
    while True:
        await resp.write(batch)


async def endless_keepalive(request: web.Request) -> web.StreamResponse:
    """Valid events without content, forever: only the deadline can end it."""
    resp = await _sse(request)
    batch = _chunk(None) * 64
    while True:
        await resp.write(batch)


async def deep_models(_request: web.Request) -> web.StreamResponse:
    return web.Response(text=DEEP, content_type="application/json")


async def deep_stream(request: web.Request) -> web.StreamResponse:
    resp = await _sse(request)
    await resp.write(b"data: " + DEEP.encode() + b"\n\n")
    return resp


async def lying_usage(request: web.Request) -> web.StreamResponse:
    """One content chunk, then usage claiming exactly max_tokens (1.5M tok/s, if believed)."""
    body = await request.json()
    resp = await _sse(request)
    await resp.write(_chunk("x"))
    usage = {"prompt_tokens": 10, "completion_tokens": int(body["max_tokens"]), "total_tokens": 0}
    await resp.write(_chunk(None, usage))
    await resp.write(b"data: [DONE]\n\n")
    return resp


def redirect_to(target: str) -> Handler:
    async def handler(_request: web.Request) -> web.StreamResponse:
        raise web.HTTPTemporaryRedirect(target)

    return handler


CASES: dict[str, tuple[Handler, Handler]] = {
    # case: (GET /v1/models, POST /v1/chat/completions)
    "gzip-bomb-models": (gzip_bomb_models, lying_usage),
    "gzip-bomb-stream": (models, gzip_bomb_stream),
    "huge-models": (huge_models, lying_usage),
    "endless-stream": (models, endless_stream),
    "endless-keepalive": (models, endless_keepalive),
    "deep-json-models": (deep_models, lying_usage),
    "deep-json-stream": (models, deep_stream),
    "lying-usage": (models, lying_usage),
}


def app(case: str, redirect_target: str | None = None) -> web.Application:
    """The app of ``case``; ``redirect`` sends every request to ``redirect_target``."""
    application = web.Application()
    if case == "redirect":
        assert redirect_target is not None
        get = post = redirect_to(redirect_target)
    elif case == "redirect-chat":
        assert redirect_target is not None
        get, post = models, redirect_to(redirect_target)
    else:
        get, post = CASES[case]
    application.router.add_get("/v1/models", get)
    application.router.add_get("/version", deep_models if "deep" in case else _version)
    application.router.add_post("/v1/chat/completions", post)
    return application


async def _version(_request: web.Request) -> web.StreamResponse:
    return web.json_response({"version": "0.17.0"})


async def start(case: str, redirect_target: str | None = None) -> tuple[web.AppRunner, str]:
    """Serve ``case`` on a free loopback port; return the runner and the base URL."""
    if "gzip" in case:
        # Seconds of CPU (a GiB of zeros at level 9), made once per process and before the
        # server answers: the bench's deadline times bench, not the making of the bomb.
        gzip_bomb()
    runner = web.AppRunner(app(case, redirect_target), handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, f"http://127.0.0.1:{port}"


async def _serve_forever(case: str, redirect_target: str | None) -> None:
    _, url = await start(case, redirect_target)
    print(url, flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(_serve_forever(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None))
