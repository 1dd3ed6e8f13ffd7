"""The official openai client parses the simulator's responses and streams."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from vllm_operator.sim import tokens


async def test_completions_stream_and_not(start_sim: Any) -> None:
    async with start_sim(api_key="k", served_model_names=("qwen",)) as sim:
        client = openai.AsyncOpenAI(base_url=sim.url + "/v1", api_key="k", max_retries=0)
        full = await client.completions.create(model="qwen", prompt="one two", max_tokens=5)
        assert full.choices[0].finish_reason == "length"
        assert full.usage is not None
        assert full.usage.completion_tokens == 5 == tokens.count(full.choices[0].text)
        stream = await client.completions.create(
            model="qwen", prompt="one two", max_tokens=5, stream=True,
            stream_options={"include_usage": True},
        )  # fmt: skip
        text, usage = "", None
        async for chunk in stream:
            if chunk.choices:
                text += chunk.choices[0].text
            if chunk.usage is not None:
                usage = chunk.usage
        assert text == full.choices[0].text  # deterministic
        assert usage is not None
        assert usage.prompt_tokens == 2
        assert usage.completion_tokens == 5
        models = await client.models.list()
        assert [m.id for m in models.data] == ["qwen"]
        await client.close()


async def test_chat_stream_and_not(start_sim: Any) -> None:
    async with start_sim() as sim:
        client = openai.AsyncOpenAI(base_url=sim.url + "/v1", api_key="none", max_retries=0)
        messages: Any = [{"role": "user", "content": "Say something"}]
        full = await client.chat.completions.create(
            model="sim-model", messages=messages, max_tokens=4
        )
        assert full.choices[0].message.role == "assistant"
        content = full.choices[0].message.content
        assert content is not None
        assert tokens.count(content) == 4
        stream = await client.chat.completions.create(
            model="sim-model", messages=messages, max_tokens=4, stream=True,
            stream_options={"include_usage": True},
        )  # fmt: skip
        roles, text, finish, usage = [], "", None, None
        async for chunk in stream:
            if chunk.choices:
                delta = chunk.choices[0].delta
                if delta.role:
                    roles.append(delta.role)
                text += delta.content or ""
                finish = chunk.choices[0].finish_reason or finish
            usage = chunk.usage or usage
        assert roles == ["assistant"]
        assert text == content
        assert finish == "length"
        assert usage is not None
        assert usage.completion_tokens == 4
        await client.close()


async def test_errors_map_to_openai_exceptions(start_sim: Any) -> None:
    async with start_sim(api_key="k") as sim:
        bad = openai.AsyncOpenAI(base_url=sim.url + "/v1", api_key="wrong", max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            await bad.completions.create(model="sim-model", prompt="x", max_tokens=1)
        good = openai.AsyncOpenAI(base_url=sim.url + "/v1", api_key="k", max_retries=0)
        with pytest.raises(openai.NotFoundError):
            await good.completions.create(model="nope", prompt="x", max_tokens=1)
        await bad.close()
        await good.close()


def test_sync_client_against_thread_runner() -> None:
    from vllm_operator.sim import SimConfig, SimThread

    with SimThread(SimConfig.create("m", warmup_seconds=0, ttft_ms=1.0, itl_ms=1.0)) as sim:
        client = openai.OpenAI(base_url=sim.url + "/v1", api_key="x", max_retries=0)
        out = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=3
        )
        assert out.usage is not None
        assert out.usage.completion_tokens == 3
        client.close()
