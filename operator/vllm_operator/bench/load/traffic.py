"""The seam between a workload (what requests) and the load that sends them (when).

A gate on a team's own traffic sends the same requests to the candidate and to the
baseline: request ``i`` of a workload is fixed by its seed, whichever server asks for it and
in whatever order. ``bench.workload`` builds a ``Traffic`` from ``gate.workload`` (a
synthetic distribution or a dataset, checked whole before any request is sent);
``bench.load.send`` sends it at each load level. Keeping the two apart lets either be tested
without the other.
"""

from __future__ import annotations

from typing import Any, Protocol

from vllm_operator.bench.http.request import ChatRequest


class Traffic(Protocol):
    """The requests of one workload, identical for every server."""

    def request(self, index: int) -> ChatRequest:
        """Request number ``index`` (from 0); the same ``index`` always gives the same one."""
        ...

    def describe(self) -> dict[str, Any]:
        """What the workload is, for the report (kind, source, seed, sizes): JSON-ready."""
        ...
