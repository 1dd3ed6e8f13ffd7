"""Bounded decoding: a gzip bomb comes out in small pieces, deep JSON is refused, not fatal."""

from __future__ import annotations

import gzip
import json
import zlib

import pytest

from vllm_operator.bench.http.bounded import (
    MAX_JSON_DEPTH,
    PIECE_BYTES,
    BoundError,
    Decoder,
    depth,
    loads,
)


def test_gzip_bomb_inflates_in_bounded_pieces() -> None:
    bomb = gzip.compress(b"0" * (64 << 20), 9)
    assert len(bomb) < 100_000
    pieces = Decoder("gzip").feed(bomb)
    first = next(pieces)
    assert len(first) == PIECE_BYTES  # never the whole 64 MiB at once
    assert all(len(p) <= PIECE_BYTES for p in pieces)


@pytest.mark.parametrize("encoding", [None, "identity", "gzip", "x-gzip", "deflate"])
def test_round_trip_of_each_encoding(encoding: str | None) -> None:
    raw = b"data: hello\n\n" * 1000
    if encoding in ("gzip", "x-gzip"):
        body = gzip.compress(raw)
    elif encoding == "deflate":
        body = zlib.compress(raw)
    else:
        body = raw
    decoder = Decoder(encoding)
    out = b"".join(p for i in range(0, len(body), 7) for p in decoder.feed(body[i : i + 7]))
    assert out == raw


def test_unknown_or_corrupt_encoding_is_a_bound_error() -> None:
    with pytest.raises(BoundError, match="'br' is not supported"):
        Decoder("br")
    with pytest.raises(BoundError, match="corrupt"):
        list(Decoder("gzip").feed(b"not gzip at all"))


def test_depth_limit_is_exact() -> None:
    at_limit = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert depth(loads(at_limit)) == MAX_JSON_DEPTH
    over = "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1)
    with pytest.raises(BoundError, match="nested deeper than 32"):
        loads(over)
    with pytest.raises(BoundError, match="nested deeper"):
        loads("[" * 100_000 + "]" * 100_000)  # json's own RecursionError, caught


def test_size_and_huge_integers() -> None:
    with pytest.raises(BoundError, match="exceeds 10"):
        loads(json.dumps("x" * 20), max_bytes=10)
    with pytest.raises(BoundError, match="not JSON"):
        loads("9" * 5000)
    assert loads('{"a": [1, {"b": 2}]}') == {"a": [1, {"b": 2}]}
