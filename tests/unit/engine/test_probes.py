"""Probe sizing: the start-up budget is covered, a busy server is neither flapped nor killed."""

from __future__ import annotations

import pytest

from vllm_operator.engine import probes, tables


def window(probe: dict[str, int | object]) -> int:
    period = probe["periodSeconds"]
    failures = probe["failureThreshold"]
    assert isinstance(period, int)
    assert isinstance(failures, int)
    return period * failures


@pytest.mark.parametrize(
    ("compiled", "override", "budget"),
    [
        (True, None, tables.WARMUP_BUDGET_COMPILED),
        (False, None, tables.WARMUP_BUDGET_EAGER),
        (True, 2700, 2700),
        (False, 31, 31),  # rounds up: 4 x 10 s >= 31 s
        (True, 86_400, 86_400),
    ],
)
def test_startup_window_covers_the_budget(
    compiled: bool, override: int | None, budget: int
) -> None:
    startup = probes.probes(8000, compiled, override)["startupProbe"]
    assert window(startup) >= budget
    assert window(startup) < budget + probes.STARTUP_PERIOD_SECONDS
    assert startup["httpGet"] == {"path": "/health", "port": 8000, "scheme": "HTTP"}


def test_defaults_cover_calibrated_cold_starts_with_margin() -> None:
    # Calibration: 54 s eager, 112-147 s compiled on a fresh cache with dummy weights.
    assert probes.default_warmup_budget(False) >= 54 * 10
    assert probes.default_warmup_budget(True) >= 147 * 10
    # and at least what other projects allow (production-stack 615 s, KServe 600 s).
    assert probes.default_warmup_budget(False) >= 615


def test_busy_server_is_not_restarted_within_two_minutes() -> None:
    all_probes = probes.probes(8123, True, None)
    liveness = all_probes["livenessProbe"]
    assert window(liveness) >= 120
    assert liveness["timeoutSeconds"] >= 10
    readiness = all_probes["readinessProbe"]
    assert readiness["periodSeconds"] in range(5, 11)
    assert window(readiness) >= 30
    for probe in all_probes.values():
        assert probe["httpGet"]["port"] == 8123
        assert probe["httpGet"]["path"] == "/health"
