"""Ground truth for clients: what the server intended and when it actually sent tokens.

Why: a benchmark can only trust its own latency figures after comparing them with the
server's. Each request gets a record (wall-clock ``time.time()`` of arrival, first and last
token written, intended TTFT and mean intended inter-token gap) served at
``GET /sim/requests/{id}``; the server's own scheduling error (actual minus intended gap
per token) is summarised at ``GET /sim/timing``.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import asdict, dataclass
from typing import Any


@dataclass
class RequestRecord:
    """One request as the server saw it (seconds; timestamps are ``time.time()``)."""

    id: str
    arrival: float
    first_token: float | None = None
    last_token: float | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    intended_ttft: float | None = None
    intended_itl: float | None = None
    queue_time: float = 0.0
    finish_reason: str | None = None

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


class Ledger:
    """The last ``size`` request records, by id."""

    def __init__(self, size: int = 10_000) -> None:
        self._size = size
        self._records: OrderedDict[str, RequestRecord] = OrderedDict()

    def add(self, record: RequestRecord) -> None:
        self._records[record.id] = record
        while len(self._records) > self._size:
            self._records.popitem(last=False)

    def get(self, request_id: str) -> RequestRecord | None:
        return self._records.get(request_id)

    def __len__(self) -> int:
        return len(self._records)


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted list (``q`` in 0..100)."""
    if not sorted_values:
        return float("nan")
    k = max(0, min(len(sorted_values) - 1, round(q / 100 * (len(sorted_values) - 1))))
    return sorted_values[k]


class TimingStats:
    """Scheduling error samples (seconds): actual minus intended, per gap and per TTFT."""

    def __init__(self, keep: int = 200_000) -> None:
        self.gap_errors: deque[float] = deque(maxlen=keep)
        self.ttft_errors: deque[float] = deque(maxlen=keep)

    def reset(self) -> None:
        self.gap_errors.clear()
        self.ttft_errors.clear()

    def summary(self) -> dict[str, Any]:
        def stats(values: deque[float]) -> dict[str, float | int]:
            s = sorted(values)
            return {
                "count": len(s),
                "p50_ms": percentile(s, 50) * 1000,
                "p99_ms": percentile(s, 99) * 1000,
                "abs_p50_ms": percentile(sorted(abs(x) for x in s), 50) * 1000,
                "abs_p99_ms": percentile(sorted(abs(x) for x in s), 99) * 1000,
            }

        return {"gap_error": stats(self.gap_errors), "ttft_error": stats(self.ttft_errors)}
