"""The classes of failed requests, shared by the benchmark that counts them and the gate.

A benchmark that quietly drops failed requests reports the speed of the requests that
happened to work. Every request that did not end in a complete, well-formed stream is
therefore counted under exactly one class, and the gate reads those counts. Two kinds:

- *server faults*: the candidate answered, but wrongly (5xx, a broken or unterminated
  stream, usage that does not match what was asked or streamed, a stream that stalled).
  These are findings about the candidate: the gate says **Failed**.
- *measurement faults*: the benchmark could not get an answer it can judge (nothing
  listening, a request or the whole run out of time, a 4xx that points at the benchmark's
  own configuration such as a wrong key or model name). The gate says **Error**.

An unknown class (a newer benchmark talking to an older operator) counts as a measurement
fault: never Passed.
"""

from __future__ import annotations

from typing import Final, Literal

ErrorKind = Literal["server", "measurement"]

ERROR_CLASSES: Final[dict[str, tuple[ErrorKind, str]]] = {
    "http_5xx": ("server", "the server answered with a 5xx status"),
    "malformed_sse": ("server", "a stream event was not valid SSE/JSON of the OpenAI format"),
    "no_done": ("server", "the stream ended without `data: [DONE]` (truncated or dropped)"),
    "usage_missing": ("server", "the stream carried no usage chunk"),
    "usage_mismatch": ("server", "usage disagreed with max_tokens or with what was streamed"),
    "stall": ("server", "no bytes arrived for longer than the stall limit mid-request"),
    "oversized": ("server", "an answer exceeded a size limit (body, decompressed, event, text)"),
    "connect_error": ("measurement", "could not connect (endpoint down or refusing)"),
    "reset": ("measurement", "the connection was closed or reset before any response"),
    "protocol": ("measurement", "the reply was not HTTP (another protocol on that port)"),
    "timeout": ("measurement", "a request did not finish within its time limit"),
    "deadline": ("measurement", "the benchmark's global deadline ended the run early"),
    "http_4xx": ("measurement", "the server refused the request (key, model name, limits)"),
    "client_error": ("measurement", "the benchmark client failed unexpectedly"),
    "redirect": ("measurement", "the server answered with a redirect; the benchmark follows none"),
    "code_refused": (
        "measurement",
        "a python-tests check was not run: no sandbox (bench never runs answer code itself)",
    ),
}


def kind_of(error_class: str) -> ErrorKind:
    """Server fault or measurement fault; unknown classes are measurement faults."""
    known = ERROR_CLASSES.get(error_class)
    return known[0] if known else "measurement"


def describe(error_class: str) -> str:
    """One line for people: what the class means."""
    known = ERROR_CLASSES.get(error_class)
    return known[1] if known else "an error class this gate does not know"
