"""A team's own requests from a dataset file, checked whole before any request is sent.

A gate on "our prompts" is only as good as the file it reads, and that file comes from a
ConfigMap or a volume anyone in the namespace may write: it is read with fixed limits
(``MAX_DATASET_BYTES`` in all, ``MAX_LINE_BYTES`` per line or entry, ``MAX_LINES`` lines,
``MAX_MESSAGES`` turns, JSON nesting ``MAX_DEPTH``), every record is checked, and the first
malformed one is a ``DatasetError`` naming its line and the fix, raised before any load is
sent (a half-measured gate would judge a different workload than the one written).

Two formats (``gate.workload.dataset.format``):

- ``chat-jsonl``: one JSON object per line, ``{"messages": [{"role", "content"}, ...],
  "max_tokens": N}``; roles system, developer, user, assistant; content a string or a list
  of ``{"type": "text", "text": ...}`` parts; the last turn is the user's; ``max_tokens``
  optional (default and cap: ``maxOutputTokens``). Other keys are ignored; only role and
  content of each message are sent. Blank lines are skipped.
- ``sharegpt``: a JSON array (or JSONL) of ``{"conversations": [{"from", "value"}, ...]}``;
  the system turn before the first human turn (if any) and the first human turn are sent,
  asking for as many tokens as the reply that follows it has words (vLLM's ``bench serve``
  asks for the reply's length too), capped by ``maxOutputTokens``.

Every request asks for exactly its ``max_tokens`` (``ignore_eos``), so candidate and
baseline generate the same lengths and a model that stops early cannot look faster.

Sampling (``request(i)``): the records in a seeded random order, a new order for every pass
over the file; request ``i`` is the same on every server. Identical prompts would measure
vLLM's prefix cache instead of the server, so a prompt is sent as written only the first
time: a duplicate record, and every request after the first pass over the file, starts its
first user turn with ``[request i]`` (at the front, where it changes every cache block after
any shared system prompt; a marker at the end would leave the whole prompt cached).
``describe()`` says how many records and duplicates the file had.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import random
from dataclasses import dataclass
from typing import Any

from vllm_operator.api.workload import DatasetRef
from vllm_operator.bench import bounded
from vllm_operator.bench.request import ChatRequest
from vllm_operator.errors import DatasetError, SpecError

MAX_DATASET_BYTES = 32 << 20
"""Largest dataset file (a ConfigMap holds at most 1 MiB; a volume may hold more)."""
MAX_LINE_BYTES = 1 << 20
"""Largest line (JSONL) or array entry: a 128k-token prompt is about 700 kB of text."""
MAX_LINES = 100_000
"""Most lines (JSONL, blank ones included) or array entries."""
MAX_MESSAGES = 256
"""Most turns of one request."""
MAX_DEPTH = 8
"""JSON nesting of one record (an honest chat request nests 5 levels)."""
ROLES = ("system", "developer", "user", "assistant")
_SHAREGPT_ROLES = {
    "system": "system",
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "chatgpt": "assistant",
    "bard": "assistant",
}
_CHAT_FIX = 'one JSON object per line: {"messages": [{"role": "user", "content": "..."}]}'
_SHAREGPT_FIX = 'entries like {"conversations": [{"from": "human", "value": "..."}]}'
_SAMPLE_FIX = "take a sample of the file (e.g. `head -n 2000 big.jsonl`)"


@dataclass(frozen=True)
class Record:
    """One request of the dataset, checked."""

    line: int
    messages: tuple[dict[str, Any], ...]
    max_tokens: int


def read_dataset_file(path: str) -> str:
    """The text of the dataset file at ``path``, bounded; ``DatasetError`` if unreadable."""
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > MAX_DATASET_BYTES:
                raise DatasetError(None, _too_big(size), _SAMPLE_FIX)
            data = fh.read(MAX_DATASET_BYTES + 1)
    except OSError as exc:
        raise SpecError(
            "--dataset", f"cannot read {path}: {exc.strerror or exc}", "name a readable file"
        ) from exc
    if len(data) > MAX_DATASET_BYTES:  # a file that grew, or one whose size lies (a pipe)
        raise DatasetError(None, _too_big(len(data)), _SAMPLE_FIX)
    return decode(data)


def _too_big(size: int, unit: str = "bytes") -> str:
    return f"the file has {size} {unit}, more than the {MAX_DATASET_BYTES} allowed"


def decode(data: bytes) -> str:
    """UTF-8 text (a leading byte-order mark dropped); a bad byte names its line."""
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise DatasetError(line, f"not UTF-8 ({exc.reason})", "save the file as UTF-8") from exc


def parse_dataset(text: str, ref: DatasetRef) -> list[Record]:
    """Every record of ``text`` in file order; the first malformed one raises."""
    if len(text) > MAX_DATASET_BYTES:
        raise DatasetError(None, _too_big(len(text), "characters"), _SAMPLE_FIX)
    stripped = text.lstrip()
    lines = text.count("\n") + (not text.endswith("\n"))
    if not stripped.startswith("[") and lines > MAX_LINES:
        raise DatasetError(MAX_LINES + 1, f"more than {MAX_LINES} lines", _SAMPLE_FIX)
    if stripped.startswith("["):
        if ref.format != "sharegpt":
            raise DatasetError(
                text.count("\n", 0, len(text) - len(stripped)) + 1,
                "a JSON array, but format chat-jsonl reads one object per line",
                "write one object per line, or set format: sharegpt",
            )
        items = _array_items(text)
    else:
        items = _jsonl_items(text)
    check = _chat_record if ref.format == "chat-jsonl" else _sharegpt_record
    records = [check(obj, line, ref.max_output_tokens) for line, obj in items]
    if not records:
        raise DatasetError(None, "the dataset holds no requests", _CHAT_FIX)
    return records


def _load(raw: str, line: int) -> Any:
    if len(raw.encode()) > MAX_LINE_BYTES:
        raise DatasetError(line, f"longer than {MAX_LINE_BYTES} bytes", "shorten the request")
    try:
        return bounded.loads(raw, max_bytes=4 * MAX_LINE_BYTES, max_depth=MAX_DEPTH)
    except bounded.BoundError as exc:
        raise DatasetError(line, f"not a JSON object: {exc}", _CHAT_FIX) from exc


def _jsonl_items(text: str) -> list[tuple[int, Any]]:
    items = []
    for number, line in enumerate(text.split("\n"), 1):
        if line.strip():
            items.append((number, _load(line, number)))
    return items


def _array_items(text: str) -> list[tuple[int, Any]]:
    """The entries of a JSON array with the line each starts on (no whole-file parse)."""
    decoder = json.JSONDecoder()
    pos = len(text) - len(text.lstrip()) + 1  # after "["
    items: list[tuple[int, Any]] = []

    def skip(at: int) -> int:
        while at < len(text) and text[at] in " \t\r\n":
            at += 1
        return at

    counted = [0, 1]  # (position, its line): positions only grow, so counting stays linear

    def line_of(at: int) -> int:
        if at < counted[0]:
            return text.count("\n", 0, at) + 1
        counted[1] += text.count("\n", counted[0], at)
        counted[0] = at
        return counted[1]

    pos = skip(pos)
    if text.startswith("]", pos):
        pos = skip(pos + 1)
    else:
        while True:
            if len(items) >= MAX_LINES:
                raise DatasetError(line_of(pos), f"more than {MAX_LINES} entries", _SAMPLE_FIX)
            line = line_of(pos)
            try:
                obj, end = decoder.raw_decode(text, pos)
            except RecursionError as exc:
                raise DatasetError(
                    line, f"JSON nested deeper than {MAX_DEPTH}", "flatten it"
                ) from exc
            except ValueError as exc:
                where = line_of(exc.pos) if isinstance(exc, json.JSONDecodeError) else line
                raise DatasetError(where, f"not JSON: {exc}", _SHAREGPT_FIX) from exc
            if len(text[pos:end].encode()) > MAX_LINE_BYTES:
                raise DatasetError(line, f"entry longer than {MAX_LINE_BYTES} bytes", "shorten it")
            if bounded.depth(obj) > MAX_DEPTH:
                raise DatasetError(line, f"JSON nested deeper than {MAX_DEPTH}", _SHAREGPT_FIX)
            items.append((line, obj))
            pos = skip(end)
            if text.startswith(",", pos):
                pos = skip(pos + 1)
                continue
            if text.startswith("]", pos):
                pos = skip(pos + 1)
                break
            raise DatasetError(line_of(pos), "expected ',' or ']' after an entry", _SHAREGPT_FIX)
    if pos != len(text):
        raise DatasetError(line_of(pos), "text after the array's closing ']'", "remove it")
    return items


def _content(value: Any, line: int, where: str) -> str | list[dict[str, str]]:
    """A message's content: a non-empty string or a list of text parts."""
    if isinstance(value, str) and value.strip():
        return value
    if isinstance(value, list) and value:
        parts: list[dict[str, str]] = []
        for part in value:
            if not (
                isinstance(part, dict)
                and part.get("type") == "text"
                and isinstance(part.get("text"), str)
            ):
                raise DatasetError(
                    line,
                    f"{where}.content has a part that is not text",
                    'give text parts only: {"type": "text", "text": "..."}',
                )
            parts.append({"type": "text", "text": part["text"]})
        if any(p["text"].strip() for p in parts):
            return parts
    raise DatasetError(line, f"{where}.content is empty or not text", "give the turn's text")


def _chat_record(obj: Any, line: int, cap: int) -> Record:
    if not isinstance(obj, dict):
        raise DatasetError(line, "not a JSON object", _CHAT_FIX)
    raw = obj.get("messages")
    if not isinstance(raw, list) or not raw:
        raise DatasetError(line, "`messages` is missing or not a non-empty list", _CHAT_FIX)
    if len(raw) > MAX_MESSAGES:
        raise DatasetError(line, f"more than {MAX_MESSAGES} messages", "shorten the conversation")
    messages = []
    for i, msg in enumerate(raw):
        where = f"messages[{i}]"
        if not isinstance(msg, dict):
            raise DatasetError(line, f"{where} is not an object", _CHAT_FIX)
        role = msg.get("role")
        if role not in ROLES:
            raise DatasetError(
                line, f"{where}.role is {str(role)[:40]!r}", f"use one of {', '.join(ROLES)}"
            )
        messages.append({"role": role, "content": _content(msg.get("content"), line, where)})
    if messages[-1]["role"] != "user":
        raise DatasetError(
            line,
            f"the last message is the {messages[-1]['role']}'s",
            "end each request with the user turn the model answers",
        )
    max_tokens = obj.get("max_tokens", cap)
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise DatasetError(
            line,
            f"max_tokens is {json.dumps(max_tokens)[:40]}",
            "a whole number >= 1, or leave it out",
        )
    return Record(line, tuple(messages), min(max_tokens, cap))


def _sharegpt_record(obj: Any, line: int, cap: int) -> Record:
    turns = obj.get("conversations") if isinstance(obj, dict) else None
    if not isinstance(turns, list):
        raise DatasetError(line, "not an object with a `conversations` list", _SHAREGPT_FIX)
    if len(turns) > MAX_MESSAGES:
        raise DatasetError(line, f"more than {MAX_MESSAGES} turns", "shorten the conversation")
    system: str | None = None
    for i, turn in enumerate(turns):
        where = f"conversations[{i}]"
        if not isinstance(turn, dict) or not isinstance(turn.get("value"), str):
            raise DatasetError(line, f"{where} is not {{from, value}}", _SHAREGPT_FIX)
        role = _SHAREGPT_ROLES.get(str(turn.get("from")).lower())
        if role is None:
            raise DatasetError(
                line,
                f"{where}.from is {str(turn.get('from'))[:40]!r}",
                "use human, gpt or system",
            )
        if role == "system" and system is None:
            system = turn["value"]
        elif role == "user":
            if not turn["value"].strip():
                raise DatasetError(line, f"{where} (the first human turn) is empty", "remove it")
            messages = [{"role": "user", "content": turn["value"]}]
            if system and system.strip():
                messages.insert(0, {"role": "system", "content": system})
            reply = _next_reply(turns[i + 1 :])
            wanted = len(reply.split()) if reply and reply.split() else cap
            return Record(line, tuple(messages), max(1, min(wanted, cap)))
    raise DatasetError(line, "no human turn to send", "remove the conversation, or add one")


def _next_reply(turns: list[Any]) -> str | None:
    for turn in turns:
        if isinstance(turn, dict) and _SHAREGPT_ROLES.get(str(turn.get("from")).lower()) == (
            "assistant"
        ):
            value = turn.get("value")
            return value if isinstance(value, str) else None
    return None


def _prompt_key(messages: tuple[dict[str, Any], ...]) -> bytes:
    text = json.dumps(messages, sort_keys=True, ensure_ascii=False)
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


def marked(messages: tuple[dict[str, Any], ...], index: int) -> tuple[dict[str, Any], ...]:
    """``messages`` with ``[request index]`` at the front of the first user turn."""
    out = copy.deepcopy(list(messages))
    tag = f"[request {index}] "
    for msg in out:
        if msg["role"] == "user":
            content = msg["content"]
            if isinstance(content, str):
                msg["content"] = tag + content
            else:
                content[0]["text"] = tag + content[0]["text"]
            break
    return tuple(out)


class DatasetTraffic:
    """The requests of a dataset: seeded order, unique prompts (see the module's docstring)."""

    def __init__(self, records: list[Record], ref: DatasetRef, seed: int, source: str) -> None:
        self.records = records
        self.ref = ref
        self.seed = seed
        self.source = source
        seen: set[bytes] = set()
        self.first: list[bool] = []
        for record in records:
            key = _prompt_key(record.messages)
            self.first.append(key not in seen)
            seen.add(key)
        self.duplicates = self.first.count(False)

        self._orders: dict[int, list[int]] = {}

    def _order(self, epoch: int) -> list[int]:
        """The order of pass ``epoch`` over the records (the last few kept)."""
        if epoch not in self._orders:
            order = list(range(len(self.records)))
            random.Random(f"dataset/{self.seed}/{epoch}").shuffle(order)
            if len(self._orders) >= 4:
                self._orders.pop(next(iter(self._orders)))
            self._orders[epoch] = order
        return self._orders[epoch]

    def request(self, index: int) -> ChatRequest:
        if index < 0:
            raise ValueError("request index must be >= 0")
        epoch, pos = divmod(index, len(self.records))
        which = self._order(epoch)[pos]
        record = self.records[which]
        messages = record.messages
        if epoch > 0 or not self.first[which]:
            messages = marked(messages, index)
        else:
            messages = copy.deepcopy(messages)
        user = next(m["content"] for m in messages if m["role"] == "user")
        prompt = user if isinstance(user, str) else " ".join(p["text"] for p in user)
        return ChatRequest(prompt=prompt, max_tokens=record.max_tokens, messages=messages)

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "dataset",
            "format": self.ref.format,
            "source": self.source,
            "seed": self.seed,
            "records": len(self.records),
            "duplicates": self.duplicates,
            "max_output_tokens": self.ref.max_output_tokens,
            "unique_prompts": (
                "a duplicate record, and every request after the first pass over the file, "
                "starts its first user turn with '[request N]'"
            ),
        }
