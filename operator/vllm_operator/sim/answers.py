"""Canned answers: how the simulator passes (or, degraded, fails) the quality suite.

Why: a gate must be demonstrable without a GPU. The benchmark engineer records, in
``data/answers.yaml``, what the reference model answered to each suite prompt; the simulator
looks a prompt up by a unique substring and replays that answer, or with ``--sim-degraded``
a wrong one, so a gate can be shown to fail on quality. Everything else gets deterministic
filler text (see :mod:`vllm_operator.sim.tokens`).

File format (missing file = no answers)::

    answers:
      - id: classify-1                         # the suite test id
        match: "unique substring of the prompt"
        text: "the answer the reference model gave"
        degraded: "wrong answer"               # optional
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import yaml

from vllm_operator.sim import tokens


@dataclass(frozen=True)
class Answer:
    """One recorded answer of the reference model."""

    id: str
    match: str
    text: str
    degraded: str = ""

    def reply(self, *, degraded: bool) -> str:
        """The text to send: the recorded answer, or a deterministic wrong one."""
        if not degraded:
            return self.text
        if self.degraded:
            return self.degraded
        return wrong_answer(self.id, self.text)


def wrong_answer(answer_id: str, text: str) -> str:
    """A deterministic answer that shares no word with ``text`` (so any check of it fails)."""
    words = {w.strip(".,:;!?\"'()[]{}").lower() for w in text.split()}
    seed = tokens.seed_of(answer_id)
    n = max(3, min(24, tokens.count(text)))
    chosen = [w for w in tokens.join(tokens.filler(n * 3, seed)).split() if w.lower() not in words]
    return "I am not sure. " + " ".join(chosen[:n] or ["unknown"])


@dataclass(frozen=True)
class AnswerBook:
    """The recorded answers, looked up by substring of the prompt (first match wins)."""

    answers: tuple[Answer, ...] = ()

    def find(self, prompt: str) -> Answer | None:
        for answer in self.answers:
            if answer.match and answer.match in prompt:
                return answer
        return None

    def __len__(self) -> int:
        return len(self.answers)


def parse(text: str) -> AnswerBook:
    """Parse the YAML format in the module docstring; raise ``ValueError`` when malformed."""
    raw = yaml.safe_load(text) or {}
    if not isinstance(raw, dict):
        raise ValueError("answers file: expected a mapping with key 'answers'")
    items = raw.get("answers") or []
    if not isinstance(items, list):
        raise ValueError("answers file: 'answers' must be a list")
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or "match" not in item or "text" not in item:
            raise ValueError(f"answers file: entry {i} needs 'match' and 'text'")
        out.append(
            Answer(
                id=str(item.get("id", f"answer-{i}")),
                match=str(item["match"]),
                text=str(item["text"]),
                degraded=str(item.get("degraded") or ""),
            )
        )
    return AnswerBook(tuple(out))


def load(path: Path | None = None) -> AnswerBook:
    """Answers from ``path``, or the packaged ``data/answers.yaml``; absent file = none."""
    if path is not None:
        return parse(path.read_text()) if path.exists() else AnswerBook()
    packaged = resources.files("vllm_operator.sim").joinpath("data/answers.yaml")
    if not packaged.is_file():
        return AnswerBook()
    return parse(packaged.read_text())
