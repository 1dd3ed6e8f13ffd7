"""One generation in time: queue, prefill, decode, and the faults injected on the way.

Why one loop for streaming and non-streaming: the timing (and the ground truth recorded in
the ledger) must be the same whether the client reads chunks or waits for the body; only
the sink differs. Faults apply after ``min(N, tokens)`` tokens: drop resets the TCP
connection, truncate ends the body without ``[DONE]`` (or cuts a JSON body), malformed
sends a broken chunk (or body), stall pauses once; ``--sim-wrong-usage`` adds one to the
reported completion tokens. On live traffic only: a stream error after the first token is
vLLM's error chunk then ``[DONE]`` (a 500 body without streaming), and a hang holds the
request after its header until the client leaves; neither is a finished request to the
engine's counters, as in vLLM (aborted requests are not counted there: vllm#31503,
vllm#55634).
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
from dataclasses import dataclass, field

from aiohttp import web

from vllm_operator.errors import VLLMOperatorError
from vllm_operator.sim import openai_format
from vllm_operator.sim.config import HANG_LIMIT_SECONDS
from vllm_operator.sim.engine import EARLY, sleep_until
from vllm_operator.sim.generation import Plan
from vllm_operator.sim.ledger import RequestRecord
from vllm_operator.sim.openai_format import StreamFormat
from vllm_operator.sim.requests import CompletionRequest
from vllm_operator.sim.state import SimState


def reset_connection(request: web.Request) -> None:
    """Abort the client's TCP connection with a RST (SO_LINGER 0), like a crashed server."""
    transport = request.transport
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


class _Dropped(VLLMOperatorError):
    """The connection was reset on purpose (fault) or by the client."""


@dataclass
class Generation:
    """Runs one request against the engine and writes its response."""

    state: SimState
    request: web.Request
    req: CompletionRequest
    plan: Plan
    record: RequestRecord
    arrival: float  # loop time at arrival
    stream_error: bool = False  # live fault: the stream breaks after its first token
    hang: bool = False  # live fault: nothing after the header until the client leaves
    sent: int = 0
    _resp: web.StreamResponse | None = field(default=None, repr=False)

    async def respond(self) -> web.StreamResponse:
        state, req, record = self.state, self.req, self.record
        headers = {"x-sim-request-id": record.id}
        fmt = StreamFormat(
            request_id=record.id, model=req.model, created=int(record.arrival), chat=req.chat
        )
        if req.stream:
            resp = web.StreamResponse(
                headers={
                    **headers,
                    "Content-Type": "text/event-stream; charset=utf-8",
                    "Cache-Control": "no-cache",
                }
            )
            await resp.prepare(self.request)
            self._resp = resp
        if self.hang:
            return await self._hang()
        engine = state.engine
        loop = asyncio.get_running_loop()
        arrival = self.arrival
        await engine.admit()
        admitted = loop.time()
        engine.kv_tokens += req.prompt_tokens
        try:
            fault = await self._generate(fmt, arrival, admitted)
        except (_Dropped, ConnectionError):
            record.finish_reason = "abort"
            return self._resp or web.Response(status=499)
        finally:
            engine.kv_tokens -= req.prompt_tokens + self.sent
            engine.release()
        return await self._finish(fmt, fault, headers)

    async def _generate(self, fmt: StreamFormat, arrival: float, admitted: float) -> str | None:
        """Emit the tokens on schedule; return the fault that ended the stream early, if any."""
        state, req, plan, record = self.state, self.req, self.plan, self.record
        engine, timing, metrics, faults = (
            state.engine,
            state.timing,
            state.metrics,
            state.config.faults,
        )
        loop = asyncio.get_running_loop()
        metrics.queue.observe(admitted - arrival)
        metrics.prompt_tokens.inc(req.prompt_tokens)
        record.queue_time = admitted - arrival
        factor = engine.noise.request_factor()  # 1.0 unless --sim-jitter
        ttft = engine.ttft(req.prompt_tokens) * factor + engine.noise.ttft_tail_ms() * engine.scale
        record.intended_ttft = record.queue_time + ttft
        deltas = plan.deltas
        n = len(deltas)
        deadline = admitted + ttft
        gap = 0.0
        gap_sum = 0.0
        prev = first = 0.0
        stops = {
            "truncate": faults.truncate_after_tokens,
            "malformed": faults.malformed_after_tokens,
            "drop": faults.drop_after_tokens,
            "stream_error": 1 if self.stream_error else None,
        }
        stop_k, stop_name = min(
            ((after, name) for name, after in stops.items() if after is not None),
            default=(-1, ""),
        )
        resp, steps, gap_errors, token_metrics = (
            self._resp,
            max(n, 1),
            timing.gap_errors,
            metrics.tokens,
        )

        def chunk(k: int) -> bytes:
            if k == steps - 1:
                delta = deltas[k] if n else None
                return fmt.last(delta, plan.finish_reason, plan.stop_reason, first=k == 0)
            return fmt.token(deltas[k], first=k == 0)

        k = 0
        while True:  # deadline and gap are those of token k
            if faults.stall_after_tokens == k:
                deadline += faults.stall_seconds
                gap += faults.stall_seconds
            if k == stop_k:
                return stop_name
            if engine.stall_until > deadline:  # a JIT compile stalls the whole batch
                gap += engine.stall_until - deadline
                deadline = engine.stall_until
            await sleep_until(loop, deadline)
            if state.dead:
                return "drop"
            # Tokens already due go out in the same write, as a busy server's would: at
            # heavily scaled time this keeps the per-token cost far below one syscall.
            due = loop.time() + EARLY
            batch = [(k, gap)]
            nxt: tuple[float, float] | None = None  # (gap, deadline) of token k + 1
            while k + 1 < steps:
                ngap = engine.itl(req.prompt_tokens + k + 1) * factor
                nxt = (ngap, deadline + ngap)
                if (
                    nxt[1] > due
                    or k + 1 == stop_k
                    or faults.stall_after_tokens == k + 1
                    or engine.stall_until > nxt[1]
                ):
                    break
                k, gap, deadline = k + 1, ngap, nxt[1]
                gap_sum += ngap
                batch.append((k, gap))
                nxt = None
            if resp is not None:
                await resp.write(b"".join(chunk(i) for i, _ in batch))
            now = loop.time()
            for i, intended in batch:
                if i == 0:
                    first = now
                    record.first_token = state.wall()
                    timing.ttft_errors.append(now - admitted - ttft)
                    metrics.ttft.observe(now - arrival)
                else:
                    gap_errors.append(now - prev - intended)
                    token_metrics.observe_itl(now - prev)
                prev = now
                if n:
                    self.sent += 1
                    engine.kv_tokens += 1
                    token_metrics.generation_tokens += 1
            if nxt is None:
                break
            k += 1
            gap, deadline = nxt
            gap_sum += gap
        record.last_token = state.wall()
        record.completion_tokens = self.sent
        record.intended_itl = gap_sum / (n - 1) if n > 1 else None
        end = loop.time()
        metrics.e2e.observe(end - arrival)
        metrics.prefill.observe(first - admitted)
        metrics.decode.observe(end - first)
        if stop_k >= n:
            return stop_name
        return None

    async def _hang(self) -> web.StreamResponse:
        """Hold the request until its client leaves (or HANG_LIMIT_SECONDS): what a client
        of a stuck server meets. Counted as the instrumentator does once vLLM cancels the
        handler: the header's 200 when streamed, else a 500."""
        loop = asyncio.get_running_loop()
        until = loop.time() + HANG_LIMIT_SECONDS
        transport = self.request.transport
        while loop.time() < until and transport is not None and not transport.is_closing():
            await asyncio.sleep(0.05)
            transport = self.request.transport
        self.record.finish_reason = "abort"
        if self._resp is not None:
            return self._resp
        return error_response_body(500, "the request was abandoned (simulated hang)")

    async def _finish(
        self, fmt: StreamFormat, fault: str | None, headers: dict[str, str]
    ) -> web.StreamResponse:
        state, req, plan, record = self.state, self.req, self.plan, self.record
        record.completion_tokens = self.sent
        reported = self.sent + (1 if state.config.faults.wrong_usage else 0)
        if fault == "drop":
            record.finish_reason = "abort"
            reset_connection(self.request)
            raise asyncio.CancelledError  # aiohttp drops the handler's connection quietly
        if fault is None:
            record.finish_reason = plan.finish_reason
            state.metrics.success(plan.finish_reason)
        else:
            record.finish_reason = "abort"
        resp = self._resp
        if fault == "stream_error":
            return await self._stream_error(fmt)
        if resp is not None:
            if fault == "malformed":
                await resp.write(fmt.malformed())
            if fault != "truncate":
                if req.include_usage:
                    await resp.write(fmt.usage_chunk(req.prompt_tokens, reported))
                await resp.write(openai_format.DONE)
            await resp.write_eof()
            return resp
        body = openai_format.full_response(
            request_id=record.id,
            model=req.model,
            created=int(record.arrival),
            chat=req.chat,
            text=plan.text if fault is None else "".join(plan.deltas[: self.sent]),
            finish_reason=plan.finish_reason,
            stop_reason=plan.stop_reason,
            prompt_tokens=req.prompt_tokens,
            completion_tokens=reported,
        )
        data = json.dumps(body).encode()
        if fault == "malformed":
            data = data[: len(data) // 2] + b" }"
        if fault == "truncate":
            out = web.StreamResponse(headers=headers)
            out.content_length = len(data)
            out.content_type = "application/json"
            await out.prepare(self.request)
            await out.write(data[: len(data) // 2])
            reset_connection(self.request)
            raise asyncio.CancelledError
        return web.Response(body=data, headers=headers, content_type="application/json")

    async def _stream_error(self, fmt: StreamFormat) -> web.StreamResponse:
        """vLLM's answer to an error in the middle of a generation: an error chunk and
        ``[DONE]`` after the 200 header (``create_streaming_error_response``), or a 500."""
        message = "EngineGenerateError: the request failed (simulated stream error)"
        if self._resp is None:
            return error_response_body(500, message)
        body = json.dumps(openai_format.error_body(500, message))
        await self._resp.write(f"data: {body}\n\n".encode())
        await self._resp.write(openai_format.DONE)
        await self._resp.write_eof()
        return self._resp


def error_response_body(status: int, message: str) -> web.Response:
    return web.json_response(openai_format.error_body(status, message), status=status)
