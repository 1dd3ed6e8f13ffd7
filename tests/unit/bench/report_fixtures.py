"""Hand-made benchmark reports for the report page's tests (unit and Chromium).

``load_report`` follows the ``load`` section of the report contract (ISSUE25_CONTRACT.md,
written by the load sweep): one run per (server, level, trial) with percentiles, throughput,
goodput and per-request samples. ``study_report`` is a study run's shape as ``bench``
writes it (``bench/report.py``). ``HOSTILE`` strings go wherever the measured side or a
user writes text: model and class names, server versions, reasons, test ids, error names.
"""

from __future__ import annotations

import random
from typing import Any

SCHEMA = "vllm-operator.dev/bench-report/v1"

HOSTILE = (
    '</script><script>window.__pwned = 1</script><img src="x" onerror="window.__pwned = 2">'
    '<a href="javascript:window.__pwned=3">x</a>"\'&<!--'
)
"""Markup that runs script if any report string reaches the page unescaped."""


def _percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)

    return {"p50": at(0.50), "p90": at(0.90), "p95": at(0.95), "p99": at(0.99)}


def load_run(
    server: str, level: float, trial: int, *, slow: float, samples: int, seed: int
) -> dict[str, Any]:
    """One run of the load sweep; latency grows with the level and with ``slow``."""
    rng = random.Random(seed)
    pressure = 1.0 + (level / 12.0) ** 3
    rows = []
    for i in range(samples):
        ttft = 40.0 * slow * pressure * rng.lognormvariate(0, 0.35)
        itl = 10.0 * slow * (1 + level / 40) * rng.lognormvariate(0, 0.2)
        out = 64
        e2e = ttft + itl * (out - 1)
        ok = rng.random() > 0.01 * pressure
        rows.append(
            {
                "t": round(i / level, 4),
                "ttft_ms": round(ttft, 3),
                "itl_ms": round(itl, 3),
                "tpot_ms": round((e2e - ttft) / (out - 1), 3),
                "e2e_ms": round(e2e, 3),
                "input_tokens": 512,
                "output_tokens": out,
                "ok": ok,
                "met_slo": ok and ttft < 500 and itl < 50,
            }
        )
    good = [r for r in rows if r["ok"]]
    met = [r for r in rows if r["met_slo"]]
    seconds = samples / level

    def pct(key: str) -> dict[str, float]:
        return _percentiles([r[key] for r in good])

    return {
        "server": server,
        "level": level,
        "trial": trial,
        "seconds": seconds,
        "asked_rate": level,
        "achieved_rate": round(level * (1 - 0.004 * (trial + 1)), 3),
        "requests": samples,
        "completed": len(good),
        "errors": {"timeout": samples - len(good)} if len(good) < samples else {},
        "error_percent": round(100 * (samples - len(good)) / samples, 2),
        "goodput_percent": round(100 * len(met) / samples, 2),
        "goodput_rps": round(len(met) / seconds, 3),
        "request_throughput": round(len(good) / seconds, 3),
        "output_tokens_per_second": round(64 * len(good) / seconds, 2),
        "percentiles": {k: pct(k) for k in ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms")},
        "samples": rows,
    }


def load_report(
    *,
    levels: tuple[float, ...] = (5.0, 10.0, 20.0),
    trials: int = 2,
    samples: int = 120,
    baseline: bool = True,
    model: str = "Qwen/Qwen3-30B-A3B-Instruct-2507-GPTQ-Int4",
    outcome: str = "Failed",
) -> dict[str, Any]:
    """A load-sweep report: open loop at ``levels``, the candidate 30% slower."""
    runs = []
    seed = 0
    for level in levels:
        for trial in range(trials):
            servers = (("candidate", 1.3), ("baseline", 1.0)) if baseline else (("candidate", 1.3),)
            for server, slow in servers:
                seed += 1
                runs.append(load_run(server, level, trial, slow=slow, samples=samples, seed=seed))
    report = study_report(model=model, outcome=outcome, baseline=baseline, classes=())
    report["concurrency"] = []
    if report["baseline"] is not None:
        report["baseline"]["concurrency"] = []
    report["verdict"]["reasons"] = [
        "20 requests/s: TTFT p99 812.4 ms, limit 500 ms: SLO breached",
        "10 requests/s: every SLO met (goodput 99.2%, limit 95%)",
    ]
    report["load"] = {
        "mode": "rate",
        "workload": {
            "kind": "synthetic",
            "input_tokens": {"distribution": "lognormal", "mean": 512, "spread": 128},
            "output_tokens": {"distribution": "fixed", "mean": 64},
            "seed": 7,
        },
        "levels_asked": list(levels),
        "capacity": levels[1] if len(levels) > 1 else None,
        "stopped_at": levels[-1],
        "runs": runs,
    }
    return report


def _latency_class(name: str, base_ms: float, rng: random.Random) -> dict[str, Any]:
    per = [
        {
            "trial": t + 1,
            "ttft_ms": round(base_ms * 0.2 * rng.uniform(0.9, 1.2), 3),
            "e2e_ms": round(base_ms * rng.uniform(0.95, 1.05), 3),
            "output_tokens": 105,
            "prompt_tokens": 1024,
        }
        for t in range(3)
        for _ in range(5)
    ]
    return {
        "class": name,
        "requests": len(per),
        "ok": len(per),
        "e2e_ms": {"median": base_ms},
        "ttft_ms": {"median": base_ms * 0.2},
        "trials_median_e2e_ms": [round(base_ms * f, 3) for f in (0.98, 1.0, 1.03)],
        "per_request": per,
    }


def _server(slow: float, seed: int, classes: tuple[str, ...]) -> dict[str, Any]:
    rng = random.Random(seed)
    sizes = {"short": 300.0, "medium": 900.0, "long": 4800.0}
    return {
        "server_version": "0.17.0",
        "latency": [_latency_class(c, sizes.get(c, 500.0) * slow, rng) for c in classes],
        "concurrency": [
            {
                "concurrency": level,
                "aggregate_tokens_per_second": round(96.0 * level / slow * 0.97, 2),
                "trials": [
                    {"trial": t + 1, "aggregate_tokens_per_second": round(96 * level / slow * f, 2)}
                    for t, f in enumerate((0.95, 0.97, 1.0))
                ],
            }
            for level in (1, 2, 4, 8)
        ],
        "quality": {
            "suite": "default",
            "passed": 12,
            "total": 13,
            "tests": [
                {"id": f"test-{n}", "category": "reasoning", "passed": n != 3, "reason": "ok"}
                for n in range(13)
            ],
        },
        "errors": {},
    }


def study_report(
    *,
    model: str = "Qwen/Qwen3-30B-A3B-Instruct-2507-GPTQ-Int4",
    outcome: str | None = "Failed",
    baseline: bool = True,
    classes: tuple[str, ...] = ("short", "medium", "long"),
) -> dict[str, Any]:
    """A study report (no ``load``): the candidate 20% slower than its paired baseline, with
    the differential quality check (same prompts, greedy: 11 of 13 answers identical)."""
    report: dict[str, Any] = {
        "schema": SCHEMA,
        "config": {
            "url": "http://candidate:8000",
            "model": model,
            "baseline_url": "http://baseline:8000" if baseline else None,
            "trials": 3,
        },
        "started_unix": 1796148261.456,
        "duration_seconds": 30.0,
        "deadline_hit": False,
        "aborted": None,
        **_server(1.2, 1, classes),
        "baseline": (
            {"url": "http://baseline:8000", **_server(1.0, 2, classes)} if baseline else None
        ),
        "verdict": (
            None
            if outcome is None
            else {
                "outcome": outcome,
                "reasons": ["medium prompts, median latency: 1,080 ms, +20.0% vs baseline 900 ms"],
            }
        ),
        "load": None,
        "exit_code": 1,
    }
    if baseline:
        report["quality"]["differential"] = {
            "compared": 13,
            "identical": 11,
            "identical_percent": 84.62,
            "baseline_passed": 12,
            "still_passing": 12,
            "still_passing_percent": 100.0,
            "tests": [{"id": f"test-{n}", "identical": n not in (4, 7)} for n in range(13)],
        }
    return report


def hostile(report: dict[str, Any]) -> dict[str, Any]:
    """``report`` with ``HOSTILE`` in every string a server or a user writes."""
    report["config"]["model"] = HOSTILE
    report["config"]["url"] = HOSTILE
    report["server_version"] = HOSTILE
    if report["verdict"] is not None:
        report["verdict"]["reasons"] = [HOSTILE, *report["verdict"]["reasons"]]
    for cls in report["latency"]:
        cls["class"] = HOSTILE + cls["class"]
    if report["baseline"] is not None:
        report["baseline"]["server_version"] = HOSTILE
        for cls in report["baseline"]["latency"]:
            cls["class"] = HOSTILE + cls["class"]
        report["baseline"]["quality"]["tests"][0]["id"] = HOSTILE
    report["quality"]["tests"][0]["id"] = HOSTILE
    report["quality"]["tests"][0]["reason"] = HOSTILE
    report["quality"]["tests"][1]["category"] = HOSTILE
    report["errors"] = {HOSTILE: {"count": 2, "meaning": HOSTILE}}
    if report["load"] is not None:
        report["load"]["workload"][HOSTILE] = HOSTILE
    return report
