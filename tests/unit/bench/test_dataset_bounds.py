"""Datasets read the way the Job's 512 MiB allow: streamed, non-Unicode text and
non-regular files refused by name, and duplicates found on what the server sees (issue 31)."""

from __future__ import annotations

import json
import os
import threading
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from vllm_operator.api.workload import WorkloadSpec
from vllm_operator.bench import dataset as dataset_mod
from vllm_operator.bench.dataset import DatasetFile, DatasetTraffic, read_dataset_file
from vllm_operator.bench.workload import build_traffic
from vllm_operator.errors import DatasetError, SpecError


def dataset(source: str | DatasetFile, fmt: str = "chat-jsonl") -> DatasetTraffic:
    spec = WorkloadSpec.model_validate({"dataset": {"configMap": "ds", "format": fmt}})
    traffic = build_traffic(spec, source)
    assert isinstance(traffic, DatasetTraffic)
    return traffic


def chat(content: Any) -> str:
    return json.dumps({"messages": [{"role": "user", "content": content}]})


def test_a_lone_surrogate_is_a_named_error_on_its_line() -> None:
    lone = '{"messages": [{"role": "user", "content": "half \\ud800 a pair"}]}'
    with pytest.raises(DatasetError) as caught:
        dataset("\n".join([chat("fine"), lone]))
    assert caught.value.line == 2
    assert "lone surrogate \\ud800" in str(caught.value)
    assert "(fix: " in str(caught.value)
    # A complete pair is an ordinary character, sent as such.
    pair = '{"messages": [{"role": "user", "content": "ok \\ud83d\\ude00"}]}'
    body = json.loads(dataset(pair).request(0).body("m"))
    assert body["messages"][0]["content"] == "ok \U0001f600"


def test_a_string_and_one_text_part_of_the_same_words_are_one_prompt() -> None:
    parts = [{"type": "text", "text": "hello"}]
    traffic = dataset("\n".join([chat("hello"), chat(parts)]))
    assert traffic.describe()["duplicates"] == 1
    # Two parts are the text joined by a newline, as vLLM joins them.
    two = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    assert dataset("\n".join([chat("a\nb"), chat(two)])).describe()["duplicates"] == 1
    assert dataset("\n".join([chat("a b"), chat(two)])).describe()["duplicates"] == 0
    # The shape each record was written in is the shape sent.
    traffic = dataset("\n".join([chat("hello"), chat(parts)]))
    sent = [json.loads(traffic.request(i).body("m"))["messages"][0]["content"] for i in (0, 1)]
    assert {type(c) for c in sent} == {str, list}


@pytest.mark.parametrize(
    "content", ["[request 3] hello", [{"type": "text", "text": "[request 0] x"}]]
)
def test_a_prompt_cannot_spell_the_mark_of_a_repeated_prompt(content: Any) -> None:
    with pytest.raises(DatasetError) as caught:
        dataset("\n".join([chat("hello"), chat("hello"), chat(content)]))
    assert caught.value.line == 3
    assert "the mark bench puts on repeated prompts" in str(caught.value)
    # The mark only counts at the start: the same words later in the turn are fine.
    traffic = dataset("\n".join([chat("hello"), chat("see [request 3] hello")]))
    assert traffic.describe()["duplicates"] == 0


def test_every_prompt_sent_differs_whatever_the_shapes() -> None:
    parts = [{"type": "text", "text": "hello"}]
    traffic = dataset("\n".join([chat("hello"), chat(parts), chat("request 1 hello")]))
    seen = set()
    for i in range(12):
        turn = json.loads(traffic.request(i).body("m"))["messages"][0]["content"]
        text = turn if isinstance(turn, str) else "\n".join(p["text"] for p in turn)
        seen.add(text)
    assert len(seen) == 12


def test_an_oversized_array_entry_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    """A ShareGPT entry of 16 MiB is refused after about 1 MiB of it, never held whole."""
    entry = {"conversations": [{"from": "human", "value": "w " * (8 << 20)}]}
    path = tmp_path / "one.json"
    path.write_text(json.dumps([entry]))
    tracemalloc.start()
    try:
        with pytest.raises(DatasetError, match="entry longer than 1048576 bytes") as caught:
            dataset(read_dataset_file(str(path)), "sharegpt")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert caught.value.line == 1
    assert peak < 8 << 20, f"peak {peak >> 20} MiB while refusing a 16 MiB entry"


def test_records_hold_only_what_is_sent(tmp_path: Path) -> None:
    """Ignored keys and the parsed objects are not kept: 4 MiB of lines with 64 kB of
    ignored payload each keep well under their file size."""
    lines = [
        json.dumps({"messages": [{"role": "user", "content": f"q{i}"}], "extra": "x" * 65_000})
        for i in range(64)
    ]
    path = tmp_path / "d.jsonl"
    path.write_text("\n".join(lines))
    tracemalloc.start()
    try:
        traffic = dataset(read_dataset_file(str(path)))
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(traffic.records) == 64
    assert held < 1 << 20, f"{held} bytes held for 64 records of 2 words each"


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_dataset_that_is_not_a_regular_file_is_refused_at_once(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "data"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    outcome: list[BaseException] = []

    def attempt() -> None:
        try:
            read_dataset_file(str(path))
        except BaseException as exc:  # handed to the test thread
            outcome.append(exc)

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(20)
    if worker.is_alive() and kind == "fifo":  # unblock the open of today's code
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
    assert not worker.is_alive(), "opening the dataset blocked"
    assert len(outcome) == 1
    assert isinstance(outcome[0], SpecError)
    assert "not a regular file" in str(outcome[0])


def test_the_bounds_are_the_documented_ones() -> None:
    assert dataset_mod.MAX_DATASET_BYTES == 32 << 20
    assert dataset_mod.MAX_LINE_BYTES == 1 << 20


def test_a_request_in_flight_holds_no_copy_of_its_prompt() -> None:
    """Sent as written, a request carries its record's encoded turns (the same bytes);
    its ``prompt`` is only a short name for logs."""
    long = "word " * 10_000
    traffic = dataset("\n".join([chat(long), chat("b " + long)]))
    for i in range(2):
        request = traffic.request(i)
        assert any(request.messages_json is r.payload for r in traffic.records)
        assert len(request.prompt) == dataset_mod.PROMPT_LABEL
        body = json.loads(request.body("m"))
        assert body["messages"][0]["content"] in (long, "b " + long)
        assert body["model"] == "m"
        assert body["ignore_eos"] is True
    marked = traffic.request(2)  # the second pass: marked, its own bytes
    assert all(marked.messages_json is not r.payload for r in traffic.records)
    assert json.loads(marked.body("m"))["messages"][0]["content"].startswith("[request 2] ")
