"""The noise model behind the gate's stated power (``gate/power_noise.py``), fitted from the
recorded A/A GPU reports (two identical vLLM servers, candidate and twin; issue 40 item 3).

Per metric (TTFT, ITL, TPOT, E2E) and rate (8 and 24 requests/s), over every A/A report
that kept its samples (H100 2026-12-07 aa1, aa2 and the per-floor aa1; H200 2026-12-02
slo-aa, the slo-bars and slo-tails aa1/aa2, and the 2026-12-01 warm A/A):

- ``p99_ms``: the median over the twin's trials of its p99 (where the bar sits);
- ``tail_sigma``: the median over every run of (ln p99 - ln p95) / (z99 - z95), the log
  scale of the tail just below the p99, where a regression's share above the bar comes from;
- ``across`` and ``within``: the judge's own clustering of the comparison with the twin
  (``gate.clustering``, as ``judge --report`` counts it again: each report recounted with
  p99 limits on all four metrics and ``maxRegressionPercent: 10``), the median over the
  reports of the per-trial design effect inside a trial (ITL gaps by request), and the
  *largest* over the reports of the design effect across trials: the statement is one of
  95% probability, so it is made for the most scattered run recorded, not the typical one
  (the typical tail shape and bar are the medians). A user's own reports
  (``vllm-operator calibrate``) give their own. Run:
``.venv/bin/python benchmarks/power_fit.py`` (a few seconds); it prints the table that
``gate/power_noise.py`` holds and saves ``benchmarks/results/power_fit.json``.
"""

from __future__ import annotations

import gzip
import json
import math
import statistics
from pathlib import Path
from typing import Any

from vllm_operator.api.gate_spec import Thresholds
from vllm_operator.api.summary import BenchSummary
from vllm_operator.bench.load.recount import recounted

ROOT = Path(__file__).resolve().parents[1]
CAL = ROOT / "docs" / "calibration"
SHARED = ROOT.parent.parent / "shared" / "calibration"
REPORTS = (
    CAL / "h100-2026-12-07" / "report-aa1.json.gz",
    CAL / "h100-2026-12-07" / "report-aa2.json.gz",
    CAL / "h100-slo-perfloor-2026-12-07" / "report-aa1.json.gz",
    CAL / "h200-tails-2026-12-02" / "report-slo-aa.json.gz",
    CAL / "h200-slo-bars-2026-12-02" / "report-aa1.json.gz",
    CAL / "h200-slo-bars-2026-12-02" / "report-aa2.json.gz",
    CAL / "h200-slo-tails-2026-12-02" / "report-aa1.json.gz",
    CAL / "h200-slo-tails-2026-12-02" / "report-aa2.json.gz",
    CAL / "h200-slo-2026-12-01" / "report-aa-warm.json.gz",
)
METRICS = ("ttft", "itl", "tpot", "e2e")
RATES = (8.0, 24.0)
Z95, Z99 = 1.6448536269514722, 2.3263478740408408
THRESHOLDS = Thresholds.model_validate(
    {
        "maxRegressionPercent": 10,
        "slo": {f"{m}Ms": {"p99": 100_000} for m in METRICS},
    }
)
RESULTS = ROOT / "benchmarks" / "results" / "power_fit.json"


def fit() -> dict[str, Any]:
    p99: dict[tuple[str, float], list[float]] = {}
    sigma: dict[tuple[str, float], list[float]] = {}
    across: dict[tuple[str, float], list[float]] = {}
    within: dict[tuple[str, float], list[float]] = {}
    used = []
    for path in REPORTS:
        with gzip.open(path) as fh:
            report = json.loads(fh.read())
        used.append(str(path.relative_to(ROOT)))
        for run in report["load"]["runs"]:
            level = float(run["level"])
            for m in METRICS:
                pct = run["percentiles"].get(f"{m}_ms") or {}
                if not pct.get("p99") or not pct.get("p95"):
                    continue
                key = (m, level)
                if run["server"] == "baseline":
                    p99.setdefault(key, []).append(pct["p99"])
                ratio = math.log(pct["p99"] / pct["p95"]) / (Z99 - Z95)
                sigma.setdefault(key, []).append(max(ratio, 1e-3))
        summary = BenchSummary.model_validate(report["summary"])
        counted = recounted(summary, report, THRESHOLDS, None)
        assert counted.load is not None
        for figures in counted.load.levels:
            for m in METRICS:
                counts = figures.tails.get(f"{m}.p99")
                regression = counts.regression if counts is not None else None
                if regression is None or regression.across is None:
                    continue
                key = (m, float(figures.level))
                across.setdefault(key, []).append(regression.across)
                if regression.design_effect:
                    within.setdefault(key, []).append(statistics.median(regression.design_effect))
    table = {}
    for m in METRICS:
        for r in RATES:
            key = (m, r)
            if key not in p99 or key not in across:
                continue
            table[f"{m}@{r:g}"] = {
                "p99_ms": round(statistics.median(p99[key]), 1),
                "tail_sigma": round(statistics.median(sigma[key]), 3),
                "across": round(max(across[key]), 1),
                "within": round(statistics.median(within.get(key, [1.0])), 2),
                "runs": len(sigma[key]),
                "reports": len(across[key]),
                "across_range": [min(across[key]), max(across[key])],
            }
    return {"reports": used, "table": table}


def main() -> None:
    out = fit()
    print(json.dumps(out, indent=1))
    RESULTS.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
