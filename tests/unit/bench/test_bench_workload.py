"""Workloads: synthetic distributions, datasets, sampling and the limits on hostile files."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

import pytest

from vllm_operator.api.spec import VLLMDeploymentSpec
from vllm_operator.api.workload import WorkloadSpec
from vllm_operator.bench import dataset as dataset_mod
from vllm_operator.bench.dataset import DatasetFile, DatasetTraffic, read_dataset_file
from vllm_operator.bench.http.request import ChatRequest
from vllm_operator.bench.workload import SyntheticTraffic, build_traffic, lognormal_params
from vllm_operator.errors import DatasetError, SpecError


def synthetic(inp: dict[str, Any], out: dict[str, Any], **extra: Any) -> SyntheticTraffic:
    spec = WorkloadSpec.model_validate(
        {"synthetic": {"inputTokens": inp, "outputTokens": out, **extra}, "seed": 7}
    )
    traffic = build_traffic(spec)
    assert isinstance(traffic, SyntheticTraffic)
    return traffic


def dataset(
    text: str | DatasetFile, fmt: str = "chat-jsonl", seed: int = 0, **ref: Any
) -> DatasetTraffic:
    spec = WorkloadSpec.model_validate(
        {"dataset": {"configMap": "ds", "format": fmt, **ref}, "seed": seed}
    )
    traffic = build_traffic(spec, text)
    assert isinstance(traffic, DatasetTraffic)
    return traffic


def chat_line(content: str, **extra: Any) -> str:
    return json.dumps({"messages": [{"role": "user", "content": content}], **extra})


def tokens(prompt: str) -> int:
    """The simulator's count of a one-message chat prompt: its words plus the role marker."""
    return len(prompt.split()) + 1


# --- synthetic -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("dist", "mean", "sd"),
    [("normal", 400, 80), ("lognormal", 500, 300), ("lognormal", 64, 16)],
)
def test_distributions_have_the_asked_mean_and_spread(dist: str, mean: int, sd: int) -> None:
    traffic = synthetic({"distribution": dist, "mean": mean, "spread": sd}, {"mean": 4})
    counts = [traffic.sizes(i)[0] for i in range(20_000)]
    assert statistics.mean(counts) == pytest.approx(mean, rel=0.02)
    assert statistics.stdev(counts) == pytest.approx(sd, rel=0.05)


def test_lognormal_parameters_give_the_counts_their_mean_and_sd() -> None:
    mu, sigma = lognormal_params(500, 300)
    assert math.exp(mu + sigma**2 / 2) == pytest.approx(500)
    assert math.sqrt((math.exp(sigma**2) - 1) * math.exp(2 * mu + sigma**2)) == pytest.approx(300)


def test_fixed_counts_bounds_and_exact_prompt_sizes() -> None:
    traffic = synthetic(
        {"distribution": "normal", "mean": 100, "spread": 200, "min": 50, "max": 150},
        {"mean": 33},
    )
    for i in range(300):
        prompt_tokens, output_tokens = traffic.sizes(i)
        assert 50 <= prompt_tokens <= 150
        assert output_tokens == 33
        request = traffic.request(i)
        assert tokens(request.prompt) == prompt_tokens
        assert request.max_tokens == 33
        assert request.ignore_eos


def test_requests_are_fixed_by_index_and_seed_and_all_differ() -> None:
    traffic = synthetic({"distribution": "normal", "mean": 20, "spread": 5}, {"mean": 8})
    again = synthetic({"distribution": "normal", "mean": 20, "spread": 5}, {"mean": 8})
    prompts = [traffic.request(i).prompt for i in range(2000)]
    assert len(set(prompts)) == 2000
    # Any order, another instance: the same request i (candidate and baseline agree).
    assert [again.request(i).prompt for i in reversed(range(2000))] == prompts[::-1]
    # The first word already differs: a prefix cache shares nothing between requests.
    assert len({p.split()[0] for p in prompts}) == 2000
    other_seed = WorkloadSpec.model_validate(
        {"synthetic": {"inputTokens": {"mean": 20}, "outputTokens": {"mean": 8}}, "seed": 8}
    )
    third = build_traffic(other_seed)
    assert third is not None
    assert third.request(3).prompt != traffic.request(3).prompt


def test_shortest_prompt_is_still_unique() -> None:
    traffic = synthetic({"mean": 1}, {"mean": 1})
    prompts = [traffic.request(i).prompt for i in range(50)]
    assert all(tokens(p) == 2 for p in prompts)
    assert len(set(prompts)) == 50


def test_shared_prefix_is_the_asked_share_and_common_to_all() -> None:
    traffic = synthetic(
        {"distribution": "normal", "mean": 200, "spread": 20}, {"mean": 4}, sharedPrefixPercent=40
    )
    assert traffic.prefix_tokens == 80
    prompts = [traffic.request(i).prompt.split() for i in range(200)]
    prefix = prompts[0][:80]
    for i, words in enumerate(prompts):
        assert words[:80] == prefix
        assert words[80] == f"#{i}"  # the unique part starts right after the prefix
    assert len({" ".join(w) for w in prompts}) == 200
    shares = [80 / (len(w) + 1) for w in prompts]
    assert statistics.mean(shares) == pytest.approx(0.40, abs=0.02)
    assert traffic.describe()["shared_prefix_tokens"] == 80


def test_prefix_longer_than_a_short_prompt_is_cut_to_fit() -> None:
    traffic = synthetic(
        {"distribution": "normal", "mean": 100, "spread": 60, "min": 2}, {"mean": 4},
        sharedPrefixPercent=100,
    )  # fmt: skip
    for i in range(200):
        size, _ = traffic.sizes(i)
        words = traffic.request(i).prompt.split()
        assert tokens(" ".join(words)) == size
        assert words[-1] == f"#{i}" or f"#{i}" in words


def test_the_study_builds_no_traffic_and_refuses_a_dataset() -> None:
    assert build_traffic(WorkloadSpec()) is None
    assert build_traffic(WorkloadSpec(builtin="study")) is None
    with pytest.raises(SpecError, match="--dataset: given, but the workload is not a dataset"):
        build_traffic(WorkloadSpec(), "{}")
    spec = WorkloadSpec.model_validate({"dataset": {"configMap": "x"}})
    with pytest.raises(SpecError, match="no dataset file was given"):
        build_traffic(spec, None)


# --- datasets --------------------------------------------------------------------------
def test_chat_jsonl_requests_send_the_whole_conversation() -> None:
    line = json.dumps(
        {
            "messages": [
                {"role": "system", "content": "Be brief.", "name": "ignored"},
                {"role": "user", "content": [{"type": "text", "text": "What is 2+2?"}]},
                {"role": "assistant", "content": "4"},
                {"role": "user", "content": "And 3+3?"},
            ],
            "max_tokens": 12,
            "id": "ignored",
        }
    )
    traffic = dataset(line + "\n\n" + chat_line("second", max_tokens=5000) + "\n")
    by_line = {r.line: r for r in traffic.records}
    assert sorted(by_line) == [1, 3]
    assert by_line[3].max_tokens == 1024  # capped by maxOutputTokens
    first = next(traffic.request(i) for i in range(2) if traffic.request(i).max_tokens == 12)
    body = json.loads(first.body("m"))
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "What is 2+2?"}]},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "And 3+3?"},
    ]
    assert body["max_tokens"] == 12
    assert body["ignore_eos"] is True


def test_sharegpt_array_and_jsonl() -> None:
    entries = [
        {
            "id": "a",
            "conversations": [
                {"from": "system", "value": "You are terse."},
                {"from": "human", "value": "Name three rivers."},
                {"from": "gpt", "value": "Nile Amazon Danube"},
                {"from": "human", "value": "More?"},
            ],
        },
        {"conversations": [{"from": "human", "value": "Hello there"}]},
    ]
    for text in (json.dumps(entries, indent=2), "\n".join(json.dumps(e) for e in entries)):
        traffic = dataset(text, "sharegpt", maxOutputTokens=64)
        first, second = traffic.records
        assert first.messages == (
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Name three rivers."},
        )
        assert first.max_tokens == 3  # the reply's words
        assert second.max_tokens == 64  # no reply: maxOutputTokens
    pretty = json.dumps(entries, indent=2)
    starts = [n for n, line in enumerate(pretty.split("\n"), 1) if line == "  {"]
    assert [r.line for r in dataset(pretty, "sharegpt").records] == starts


def test_sampling_is_seeded_and_the_same_for_every_server() -> None:
    text = "\n".join(chat_line(f"question {i}") for i in range(50))
    one, two = dataset(text, seed=3), dataset(text, seed=3)
    asked = [one.request(i).prompt for i in range(120)]
    assert [two.request(i).prompt for i in reversed(range(120))] == asked[::-1]
    assert asked[:50] != [f"question {i}" for i in range(50)]  # shuffled
    assert sorted(asked[:50]) == sorted(f"question {i}" for i in range(50))  # each once
    other = dataset(text, seed=4)
    assert [other.request(i).prompt for i in range(50)] != asked[:50]


def test_prompts_differ_per_request_with_duplicates_and_repeats() -> None:
    text = "\n".join([chat_line("same"), chat_line("same"), chat_line("other")])
    traffic = dataset(text)
    assert traffic.describe()["duplicates"] == 1
    bodies = [traffic.request(i).body("m") for i in range(30)]
    assert len(set(bodies)) == 30
    contents = [json.loads(b)["messages"][0]["content"] for b in bodies]
    # The first pass sends each distinct prompt once as written; everything else is marked
    # at the front (a marker at the end would leave the whole prompt to the prefix cache).
    assert sorted(c for c in contents[:3] if not c.startswith("[request")) == ["other", "same"]
    for i, content in enumerate(contents):
        if content not in ("same", "other"):
            assert content.startswith(f"[request {i}] ")
    # Marking never changes the stored record (request i is the same each time asked).
    assert traffic.request(7).body("m") == bodies[7]


def bad(text: str, fmt: str = "chat-jsonl") -> DatasetError:
    with pytest.raises(DatasetError) as caught:
        dataset(text, fmt)
    return caught.value


GOOD = chat_line("fine")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "not a JSON object"),
        ("[1, 2]", "not a JSON object"),
        ('"text"', "not a JSON object"),
        ('{"prompt": "hi"}', "`messages` is missing"),
        ('{"messages": []}', "`messages` is missing or not a non-empty list"),
        ('{"messages": ["hi"]}', "messages[0] is not an object"),
        ('{"messages": [{"role": "bot", "content": "x"}]}', "messages[0].role is 'bot'"),
        ('{"messages": [{"role": "user"}]}', "messages[0].content is empty or not text"),
        ('{"messages": [{"role": "user", "content": "  "}]}', "content is empty"),
        (
            '{"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}',
            "has a part that is not text",
        ),
        (
            '{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", '
            '"content": "a"}]}',
            "the last message is the assistant's",
        ),
        (chat_line("x", max_tokens=0), "max_tokens is 0"),
        (chat_line("x", max_tokens="5"), 'max_tokens is "5"'),
        (chat_line("x", max_tokens=True), "max_tokens is true"),
        ('{"messages": ' + "[" * 20 + "]" * 20 + "}", "nested deeper"),
    ],
)
def test_each_malformed_line_is_refused_with_its_line_number(line: str, message: str) -> None:
    text = "\n".join([GOOD, "", GOOD, line, GOOD])
    error = bad(text)
    assert error.line == 4
    assert str(error).startswith("--dataset: line 4: ")
    assert message in str(error)
    assert "(fix: " in str(error)


def test_a_chat_dataset_that_is_an_array_is_refused_with_the_fix() -> None:
    error = bad('\n\n[{"messages": []}]')
    assert error.line == 3
    assert "set format: sharegpt" in str(error)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ('{"conversations": "x"}', "not an object with a `conversations` list"),
        ('{"conversations": [{"from": "human"}]}', "conversations[0] is not {from, value}"),
        ('{"conversations": [{"from": "robot", "value": "x"}]}', "from is 'robot'"),
        ('{"conversations": [{"from": "gpt", "value": "x"}]}', "no human turn"),
        ('{"conversations": [{"from": "human", "value": " "}]}', "first human turn) is empty"),
    ],
)
def test_malformed_sharegpt_entries_name_their_line(entry: str, message: str) -> None:
    good = '{"conversations": [{"from": "human", "value": "hi"}]}'
    as_array = f"[\n  {good},\n  {good},\n  {entry}\n]"
    error = bad(as_array, "sharegpt")
    assert error.line == 4
    assert message in str(error)
    error = bad("\n".join([good, entry]), "sharegpt")
    assert error.line == 2


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        (
            '[\n{"conversations": [{"from": "human", "value": "a"}]}\n{"x": 1}]',
            3,
            "expected ',' or ']'",
        ),
        ('[\n{"conversations": [{"from": "human", "value": "a"}]}\n]\nextra', 4, "after the"),
        ('[\n{"conversations": [\n{"from": "human", "value": "a"},,\n]}]', 3, "not JSON"),
    ],
)
def test_broken_sharegpt_arrays_name_the_line(text: str, line: int, message: str) -> None:
    error = bad(text, "sharegpt")
    assert error.line == line, str(error)
    assert message in str(error)


def test_an_empty_dataset_is_refused() -> None:
    assert "holds no requests" in str(bad("\n\n"))
    assert "holds no requests" in str(bad("[]", "sharegpt"))


# --- bounds ----------------------------------------------------------------------------
def test_bounds_refuse_hostile_files(tmp_path: Path) -> None:
    big_line = chat_line("x" * (dataset_mod.MAX_LINE_BYTES + 10))
    error = bad(GOOD + "\n" + big_line)
    assert error.line == 2
    assert "longer than" in str(error)
    many = "\n" * (dataset_mod.MAX_LINES + 1)
    error = bad(many)
    assert "more than 100000 lines" in str(error)
    assert len(dataset((GOOD + "\n") * dataset_mod.MAX_LINES).records) == dataset_mod.MAX_LINES
    # A pretty-printed array spends many lines per entry: its limit is on entries.
    entry = {"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}]}
    pretty = json.dumps([entry] * 12_000, indent=2)
    assert pretty.count("\n") > dataset_mod.MAX_LINES
    assert len(dataset(pretty, "sharegpt").records) == 12_000
    one = '{"conversations": [{"from": "human", "value": "hi"}]}'
    too_many = "[" + ",".join([one] * (dataset_mod.MAX_LINES + 1)) + "]"
    assert "more than 100000 entries" in str(bad(too_many, "sharegpt"))
    deep = '{"conversations": ' + "[" * 5000 + "]" * 5000 + "}"
    assert "nested deeper" in str(bad("[" + deep + "]", "sharegpt"))
    assert "nested deeper" in str(bad(deep, "sharegpt"))
    # The file's size is checked before it is read whole.
    path = tmp_path / "big.jsonl"
    with path.open("wb") as fh:
        fh.truncate(dataset_mod.MAX_DATASET_BYTES + 1)
    with pytest.raises(DatasetError, match="more than the 33554432 allowed"):
        read_dataset_file(str(path))
    with pytest.raises(SpecError, match="cannot read"):
        read_dataset_file(str(tmp_path / "missing"))


def test_not_utf8_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + GOOD.encode() + b"\n" + b'{"messages": "\xff"}\n')
    with pytest.raises(DatasetError) as caught:
        dataset(read_dataset_file(str(path)))
    assert caught.value.line == 2
    assert "not UTF-8" in str(caught.value)
    path.write_bytes(b"\xef\xbb\xbf" + GOOD.encode())  # a byte-order mark is dropped
    assert dataset(read_dataset_file(str(path))).records[0].line == 1


def test_request_body_without_messages_is_unchanged() -> None:
    """The study's requests keep their exact bytes; ``messages`` replaces prompt and system."""
    plain = ChatRequest(prompt="hi there", max_tokens=3, system="be brief")
    assert plain.body("m") == (
        b'{"model": "m", "messages": [{"role": "system", "content": "be brief"}, {"role": '
        b'"user", "content": "hi there"}], "max_tokens": 3, "temperature": 0.0, "stream": '
        b'true, "stream_options": {"include_usage": true}, "ignore_eos": true}'
    )
    full = ChatRequest(
        prompt="ignored",
        max_tokens=3,
        system="ignored",
        messages=({"role": "user", "content": "x"},),
    )
    assert json.loads(full.body("m"))["messages"] == [{"role": "user", "content": "x"}]


def test_any_slo_needs_a_non_study_workload_as_the_crd_says() -> None:
    """The CRD's CEL rule cannot tell an empty slo from a set one; the model agrees with it."""
    base = {"model": {"name": "m"}, "engine": {"image": "vllm/vllm-openai:v0.17.0"}}
    for slo in ({}, {"ttftMs": {"p99": 500}}):
        with pytest.raises(ValueError, match=r"gate\.thresholds\.slo needs gate\.workload"):
            VLLMDeploymentSpec.model_validate({**base, "gate": {"thresholds": {"slo": slo}}})
    synthetic = {"synthetic": {"inputTokens": {"mean": 8}, "outputTokens": {"mean": 8}}}
    gate = {"thresholds": {"slo": {}}, "workload": synthetic}
    VLLMDeploymentSpec.model_validate({**base, "gate": gate})
