"""Bounded YAML reading for resources people hand to the CLI.

``yaml.safe_load`` is safe from code execution but not from size: a billion-laughs document
(anchors and aliases doubling a list thirty times) is a few hundred bytes that expand to a
billion values when anything walks them, a 5,000-digit integer raises ``ValueError`` from
Python's int-conversion limit, 1,000 nested brackets end in ``RecursionError``, and a 100 MB
file takes minutes. ``load_documents`` refuses each of these with a ``YAMLInputError`` that
names the position in the document and the fix, before building any Python value:

- input larger than ``MAX_INPUT_BYTES`` or not UTF-8: refused before parsing;
- aliases (``*name``): refused; a VLLMDeployment never needs them (Kubernetes' own YAML
  reader accepts them only within an expansion budget; refusing is simpler and loses
  nothing a resource needs);
- nesting deeper than ``limits.MAX_DEPTH``: refused while the events stream by, so the
  recursive composer never sees it;
- integers longer than ``MAX_INT_DIGITS``: refused before conversion;
- a key that appears twice in one mapping: refused with both lines (YAML 1.2 forbids it;
  PyYAML keeps the last silently, so ``performanceMode: throughput`` followed by
  ``performanceMode: eager`` would render eager; kubectl refuses it too);
- more than ``MAX_DOCUMENTS`` documents or ``limits.MAX_VALUES`` values in one stream:
  refused.

The parser is PyYAML's (libyaml's C parser when available, else the pure-Python one), with
its own safe constructor; only the checks above are added.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, ScalarNode

from vllm_operator.api.limits import MAX_DEPTH, MAX_VALUES
from vllm_operator.errors import VLLMOperatorError

MAX_INPUT_BYTES = 1024 * 1024
"""Largest input accepted. One VLLMDeployment is a few KiB; etcd's limit is 1.5 MiB."""

MAX_DOCUMENTS = 1000
"""Most documents in one stream."""

MAX_INT_DIGITS = 40
"""Longest integer literal; int64 has 19 digits, so anything longer is refused later anyway."""

try:
    from yaml._yaml import CParser as _CParser

    _Parser: type[Any] = _CParser
except ImportError:  # PyYAML built without libyaml: the pure-Python parser, same checks
    from yaml.composer import Composer
    from yaml.parser import Parser
    from yaml.reader import Reader
    from yaml.scanner import Scanner

    class _PureParser(Reader, Scanner, Parser, Composer):
        def __init__(self, stream: str) -> None:
            Reader.__init__(self, stream)
            Scanner.__init__(self)
            Parser.__init__(self)
            Composer.__init__(self)

    _Parser = _PureParser


class YAMLInputError(VLLMOperatorError, ValueError):
    """Input that is not a bounded YAML stream; the message names where and what to do."""


class _BoundedConstructor(SafeConstructor):
    def construct_yaml_int(self, node: ScalarNode) -> int:
        text = str(node.value)
        digits = sum(ch.isalnum() for ch in text)
        if digits > MAX_INT_DIGITS:
            raise YAMLInputError(
                f"{_where(node.start_mark)}: an integer with {digits} digits; at most "
                f"{MAX_INT_DIGITS} are accepted (fix: write a smaller number, or quote it "
                "if it is meant as a string)"
            )
        value: int = super().construct_yaml_int(node)
        return value

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        if len(mapping) < len(node.value):  # some key came twice
            first: dict[Any, Any] = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node)
                if key in first:
                    raise YAMLInputError(
                        f"{_where(key_node.start_mark)}: the key {key!r} appears again in "
                        f"this mapping (first at {_where(first[key])}); YAML allows a key "
                        "once (fix: keep the one you mean and delete the other)"
                    )
                first[key] = key_node.start_mark
        return mapping


_BoundedConstructor.add_constructor(  # type: ignore[type-var]
    "tag:yaml.org,2002:int", _BoundedConstructor.construct_yaml_int
)


class _Loader(_Parser, _BoundedConstructor, yaml.resolver.Resolver):  # type: ignore[misc]
    def __init__(self, stream: str) -> None:
        _Parser.__init__(self, stream)
        _BoundedConstructor.__init__(self)
        yaml.resolver.Resolver.__init__(self)


def _where(mark: Any) -> str:
    if mark is None:
        return "document"
    return f"line {mark.line + 1}, column {mark.column + 1}"


def decode(data: bytes) -> str:
    """``data`` as text, refusing what is too large or not UTF-8."""
    if len(data) > MAX_INPUT_BYTES:
        raise YAMLInputError(
            f"more than the {MAX_INPUT_BYTES} bytes accepted "
            "(fix: split it into several files; one resource is far smaller)"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise YAMLInputError(
            f"not UTF-8: byte {exc.start} (line {line}) is invalid (fix: save the file as UTF-8)"
        ) from None


def _check_events(text: str) -> None:
    """Refuse aliases and deep nesting from the event stream (iterative, no recursion)."""
    depth = documents = values = 0
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, yaml.ScalarEvent | yaml.CollectionStartEvent):
            values += 1
            if values > MAX_VALUES:
                raise YAMLInputError(
                    f"{_where(event.start_mark)}: more than {MAX_VALUES} values in one "
                    "stream (fix: remove repeated or generated entries, or split the file)"
                )
        if isinstance(event, yaml.DocumentStartEvent):
            documents += 1
            if documents > MAX_DOCUMENTS:
                raise YAMLInputError(
                    f"{_where(event.start_mark)}: more than {MAX_DOCUMENTS} documents "
                    "(fix: split the stream into several files)"
                )
        if isinstance(event, yaml.AliasEvent):
            raise YAMLInputError(
                f"{_where(event.start_mark)}: alias *{event.anchor} is not accepted "
                "(fix: write the value out in full instead of referring to an anchor)"
            )
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise YAMLInputError(
                    f"{_where(event.start_mark)}: nested deeper than {MAX_DEPTH} levels "
                    "(fix: flatten it; a Kubernetes affinity needs about 11 levels)"
                )
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def load_documents(data: bytes | str) -> list[Any]:
    """Every document of a YAML stream, within the limits above.

    Raises ``YAMLInputError`` (too large, not UTF-8, alias, too deep, huge integer) or
    ``yaml.YAMLError`` (not YAML at all; its message carries the position).
    """
    text = decode(data) if isinstance(data, bytes) else data
    if len(text) > MAX_INPUT_BYTES:
        raise YAMLInputError(
            f"more than the {MAX_INPUT_BYTES} characters accepted "
            "(fix: split it into several files; one resource is far smaller)"
        )
    _check_events(text)
    return list(yaml.load_all(text, Loader=_Loader))
