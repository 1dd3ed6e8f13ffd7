"""The SSE parser: any split of the byte stream gives the same events."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_operator.bench.http.sse import MAX_EVENT_BYTES, SSEError, SSEParser

STREAM = (
    b": keep-alive comment\n\n"
    b'data: {"a": 1}\n\n'
    b"event: ignored\r\ndata: first line\r\ndata:second line\r\n\r\n"
    b'data: {"b": "x\xc3\xa9"}\r\r'
    b"data: [DONE]\n\n"
)
EXPECTED = ['{"a": 1}', "first line\nsecond line", '{"b": "xé"}', "[DONE]"]


def parse(chunks: list[bytes]) -> list[str]:
    parser = SSEParser()
    events = []
    for i, chunk in enumerate(chunks):
        events += [e.data for e in parser.feed(chunk, float(i))]
    assert parser.close() == ""
    return events


def test_whole_stream() -> None:
    assert parse([STREAM]) == EXPECTED


def test_byte_by_byte() -> None:
    assert parse([STREAM[i : i + 1] for i in range(len(STREAM))]) == EXPECTED


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, len(STREAM)), max_size=12))
def test_any_split_gives_the_same_events(cuts: list[int]) -> None:
    points = sorted(set(cuts))
    chunks = [STREAM[a:b] for a, b in zip([0, *points], [*points, len(STREAM)], strict=True)]
    assert parse(chunks) == EXPECTED


def test_event_is_stamped_with_the_read_that_completed_it() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: he", 1.0) == []
    assert parser.feed(b"llo\n", 2.0) == []
    [event] = parser.feed(b"\n", 3.0)
    assert (event.data, event.at) == ("hello", 3.0)


def test_long_line_far_beyond_aiohttp_default_buffer() -> None:
    payload = "x" * 300_000
    body = f"data: {payload}\n\n".encode()
    chunks = [body[i : i + 4096] for i in range(0, len(body), 4096)]
    assert parse(chunks) == [payload]


def test_trailing_incomplete_event_is_returned_by_close() -> None:
    parser = SSEParser()
    assert parser.feed(b'data: {"partial": tr', 0.0) == []
    assert parser.close() == 'data: {"partial": tr'


def test_unterminated_data_line_reported_at_close() -> None:
    parser = SSEParser()
    parser.feed(b"data: complete line\n", 0.0)
    assert parser.close() == "complete line"


def test_oversized_event_is_an_error() -> None:
    parser = SSEParser()
    with pytest.raises(SSEError):
        parser.feed(b"data: " + b"y" * (MAX_EVENT_BYTES + 1), 0.0)


def test_invalid_utf8_raises_unicode_error() -> None:
    with pytest.raises(UnicodeDecodeError):
        SSEParser().feed(b"data: \xff\xfe\n\n", 0.0)
