"""A team's own requests from a dataset file, checked whole before any request is sent.

A gate on "our prompts" is only as good as the file it reads, and that file comes from a
ConfigMap or a volume anyone in the namespace may write: it is read with fixed limits
(``MAX_DATASET_BYTES`` in all, ``MAX_LINE_BYTES`` per line or entry, ``MAX_LINES`` lines,
``MAX_MESSAGES`` turns, JSON nesting ``MAX_DEPTH``), every record is checked, and the first
malformed one is a ``DatasetError`` naming its line and the fix, raised before any load is
sent (a half-measured gate would judge a different workload than the one written). The
file is streamed (``bench.dataset_read``) and each record is kept only as the compact JSON of
the turns it sends, so memory stays near the size of what is sent (docs/workloads.md gives
the measured peak). Text that is not Unicode (a lone surrogate escape, ``\\ud800``) is refused
there too, naming the line.

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
first user turn with ``[request i] `` (at the front, where it changes every cache block after
any shared system prompt; a marker at the end would leave the whole prompt cached).
Duplicates are found on the normalised conversation (each turn's role and text, text parts
joined by newlines as vLLM joins them), so a string and one text part of the same words are
one prompt. A prompt cannot spell the mark: a record whose first user turn starts with
``[request N] `` is refused, so a marked prompt never equals one sent as written, and two
marked prompts differ in their numbers.
``describe()`` says how many records and duplicates the file had.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import re
from dataclasses import dataclass
from typing import Any, BinaryIO

from vllm_operator.api.workload import DatasetRef
from vllm_operator.bench import dataset_read
from vllm_operator.bench.dataset_read import (
    MAX_DATASET_BYTES,
    MAX_DEPTH,
    MAX_LINE_BYTES,
    MAX_LINES,
    SAMPLE_FIX,
    too_big,
)
from vllm_operator.bench.http import bounded
from vllm_operator.bench.http.request import ChatRequest
from vllm_operator.bench.local_files import open_regular
from vllm_operator.errors import DatasetError, SpecError

MAX_MESSAGES = 256
"""Most turns of one request."""
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
_SHAREGPT_FIX = dataset_read.SHAREGPT_FIX
__all__ = ["MAX_DATASET_BYTES", "MAX_LINES", "MAX_LINE_BYTES", "DatasetTraffic", "Record"]


@dataclass(frozen=True, slots=True)
class Record:
    """One request of the dataset, checked, held as the compact JSON of what is sent."""

    line: int
    payload: bytes
    """``messages`` as compact UTF-8 JSON (only role and content of each turn)."""
    max_tokens: int
    key: bytes
    """Digest of the normalised conversation: records with equal keys send equal prompts."""

    @property
    def messages(self) -> tuple[dict[str, Any], ...]:
        """The turns sent, as JSON-ready dicts (a new copy each time)."""
        return tuple(json.loads(self.payload))


@dataclass(frozen=True)
class DatasetFile:
    """A dataset file checked at the start (readable, regular, within the size bound) and
    streamed when parsed (``bench.dataset_read``)."""

    path: str
    size: int


def read_dataset_file(path: str) -> DatasetFile:
    """The dataset file at ``path``, checked before reading; ``DatasetError`` if too big,
    ``SpecError`` (naming --dataset) if it is unreadable or not a regular file."""
    try:
        with open_regular(path) as fh:
            size = os.fstat(fh.fileno()).st_size
    except OSError as exc:
        raise SpecError(
            "--dataset", f"cannot read {path}: {exc.strerror or exc}", "name a readable file"
        ) from exc
    if size > MAX_DATASET_BYTES:
        raise DatasetError(None, too_big(size), SAMPLE_FIX)
    return DatasetFile(path, size)


def parse_dataset(source: str | DatasetFile, ref: DatasetRef) -> list[Record]:
    """Every record of ``source`` (the file, or its text) in file order; the first
    malformed one raises. Streams the file: see ``bench.dataset_read``."""
    if isinstance(source, str):
        if len(source) > MAX_DATASET_BYTES:
            raise DatasetError(None, too_big(len(source), "characters"), SAMPLE_FIX)
        return _parse(io.BytesIO(source.encode("utf-8", "surrogatepass")), ref)
    try:
        with open_regular(source.path) as stream:
            return _parse(stream, ref)
    except OSError as exc:
        raise SpecError(
            "--dataset", f"cannot read {source.path}: {exc.strerror or exc}", "name a readable file"
        ) from exc


def _parse(stream: BinaryIO, ref: DatasetRef) -> list[Record]:
    check = _chat_record if ref.format == "chat-jsonl" else _sharegpt_record
    out: list[Record] = []
    for line, raw in dataset_read.records(stream, array_ok=ref.format == "sharegpt"):
        messages, max_tokens = check(_load(raw, line, ref.format), line, ref.max_output_tokens)
        out.append(_record(line, messages, max_tokens))
    if not out:
        raise DatasetError(None, "the dataset holds no requests", _CHAT_FIX)
    return out


def _load(raw: bytes, line: int, fmt: str) -> Any:
    """One record's JSON; errors name the line they are on."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        where = line + raw.count(b"\n", 0, exc.start)
        raise DatasetError(where, f"not UTF-8 ({exc.reason})", "save the file as UTF-8") from exc
    sharegpt = fmt == "sharegpt"
    what, fix = ("not JSON", _SHAREGPT_FIX) if sharegpt else ("not a JSON object", _CHAT_FIX)
    try:
        value = json.loads(text)
    except RecursionError as exc:
        raise DatasetError(line, f"JSON nested deeper than {MAX_DEPTH}", "flatten it") from exc
    except json.JSONDecodeError as exc:
        raise DatasetError(line + exc.lineno - 1, f"{what}: {exc}", fix) from exc
    except ValueError as exc:  # an integer past Python's digit limit
        raise DatasetError(line, f"{what}: {exc}", fix) from exc
    if bounded.depth(value) > MAX_DEPTH:
        raise DatasetError(line, f"JSON nested deeper than {MAX_DEPTH}", fix)
    return value


def _record(line: int, messages: list[dict[str, Any]], max_tokens: int) -> Record:
    """The checked turns as a ``Record``: compact JSON, and the key of their normalised text."""
    try:
        payload = json.dumps(messages, ensure_ascii=False, separators=(",", ":")).encode()
    except UnicodeEncodeError as exc:
        code = ord(exc.object[exc.start])
        raise DatasetError(
            line,
            f"a lone surrogate \\u{code:04x} (half of a UTF-16 pair): not Unicode text",
            "remove the unpaired \\uXXXX escape, or complete the pair",
        ) from exc
    normal = [(m["role"], normalised(m["content"])) for m in messages]
    first_user = next(text for role, text in normal if role == "user")
    if spelled := MARK.match(first_user):
        raise DatasetError(
            line,
            f"the first user turn starts with {spelled[0]!r}, the mark bench puts on "
            "repeated prompts",
            "reword the start of the turn (docs/workloads.md: unique prompts)",
        )
    text = json.dumps(normal, ensure_ascii=False, separators=(",", ":"))
    key = hashlib.blake2b(text.encode(), digest_size=16).digest()
    return Record(line, payload, max_tokens, key)


def normalised(content: str | list[dict[str, str]]) -> str:
    """The text a server makes of a turn's content: text parts joined by newlines, as
    vLLM's chat parser does for string-format chat templates (``entrypoints/chat_utils.py``,
    ``_parse_chat_message_content_parts``, read on vLLM's main branch in December 2026)."""
    if isinstance(content, str):
        return content
    return "\n".join(part["text"] for part in content)


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


Checked = tuple[list[dict[str, Any]], int]
"""A record's turns (role and content only) and its max_tokens."""


def _chat_record(obj: Any, line: int, cap: int) -> Checked:
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
    return messages, min(max_tokens, cap)


def _sharegpt_record(obj: Any, line: int, cap: int) -> Checked:
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
            return messages, max(1, min(wanted, cap))
    raise DatasetError(line, "no human turn to send", "remove the conversation, or add one")


def _next_reply(turns: list[Any]) -> str | None:
    for turn in turns:
        if isinstance(turn, dict) and _SHAREGPT_ROLES.get(str(turn.get("from")).lower()) == (
            "assistant"
        ):
            value = turn.get("value")
            return value if isinstance(value, str) else None
    return None


PROMPT_LABEL = 200
"""Characters of the first user turn a request keeps as its name in logs (``prompt``)."""
MARK = re.compile(r"\[request \d+\] ")
"""The mark of a repeated prompt (``marked``); a record that starts with it is refused."""


def marked(messages: list[dict[str, Any]], index: int) -> list[dict[str, Any]]:
    """``messages`` with ``[request index]`` at the front of the first user turn (in place)."""
    tag = f"[request {index}] "
    for msg in messages:
        if msg["role"] == "user":
            content = msg["content"]
            if isinstance(content, str):
                msg["content"] = tag + content
            else:
                content[0]["text"] = tag + content[0]["text"]
            break
    return messages


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
            self.first.append(record.key not in seen)
            seen.add(record.key)
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
        messages = json.loads(record.payload)
        payload = record.payload  # shared, not copied, while the request is in flight
        if epoch > 0 or not self.first[which]:
            marked(messages, index)
            payload = json.dumps(messages, ensure_ascii=False, separators=(",", ":")).encode()
        user = normalised(next(m["content"] for m in messages if m["role"] == "user"))
        return ChatRequest(
            prompt=user[:PROMPT_LABEL], max_tokens=record.max_tokens, messages_json=payload
        )

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
                "a duplicate record (same normalised text), and every request after the first "
                "pass over the file, starts its first user turn with '[request N] '"
            ),
        }
