"""Hand-made mutants of the gate: does each boundary of ``gate/`` have a test that notices?

mutmut 3.8 was tried first (issue 19 asked for "mutmut or equivalent"): it copies the source
into ``mutants/`` and expects the tests to import it from there, but this project's package
lives under ``operator/`` and is installed editable, so the tests kept importing the
unmutated code (mutmut: "tests recorded trampoline hits but none match any mutant key", and
with the copy moved to ``src/``: "could not find any test case for any mutant"). This script
is the equivalent: each mutant is one small textual change to one file of
``operator/vllm_operator/gate/`` (a comparison turned, a constant moved, a rounding
flipped), applied on its own, the gate tests run with ``-x``, the file restored. A mutant is
*killed* when the tests fail.

Tests: ``tests/unit/gate`` (the noise model last: it is the slowest),
``tests/unit/bench/test_bench_summary.py``, the twin tests
(``tests/unit/rollout/test_rollout_twin.py``) and ``test_rollout_trial_plan.py``.

Run: ``.venv/bin/python benchmarks/gate_mutants.py [--only ID,...]``; saves
``benchmarks/results/gate_mutants.json``. It edits files in place and restores them (also on
Ctrl-C); run it on a clean work tree and check ``git status`` after.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GATE = ROOT / "operator" / "vllm_operator" / "gate"
RESULTS = ROOT / "benchmarks" / "results" / "gate_mutants.json"
TESTS = [
    "tests/unit/gate/test_gate_boundaries.py",
    "tests/unit/gate/test_gate_floors.py",
    "tests/unit/gate/test_gate_robust.py",
    "tests/unit/gate/test_gate_sequential.py",
    "tests/unit/gate/test_gate_interval.py",
    "tests/unit/gate/test_gate_verdict.py",
    "tests/unit/bench/test_bench_summary.py",
    "tests/unit/rollout/test_rollout_twin.py",
    "tests/unit/rollout/test_rollout_trial_plan.py",
    "tests/unit/gate/test_gate_slo.py",
    "tests/unit/gate/test_gate_differential.py",
    "tests/unit/bench/test_bench_judge_cli.py",
    "tests/unit/gate/test_gate_noise_model.py",
    "tests/unit/gate/test_tails.py",
    "tests/unit/gate/test_slo_tails.py",
    "tests/unit/bench/test_bench_load_tails.py",
]
TIMEOUT = 600


@dataclass(frozen=True)
class Mutant:
    id: str
    file: str
    old: str
    new: str
    equivalent: str = ""
    """Why the mutant cannot change a verdict (or a reason), when it is believed not to."""


M = Mutant
MUTANTS = [
    # robust.py: the outlier rule
    M("robust-distance", "robust.py", "OUTLIER_LOG_DISTANCE = 0.15", "OUTLIER_LOG_DISTANCE = 0.14"),
    M("robust-spreads", "robust.py", "OUTLIER_SPREADS = 5.0", "OUTLIER_SPREADS = 4.5"),
    M("robust-mad", "robust.py", "MAD_TO_SD = 1.4826", "MAD_TO_SD = 1.0"),
    M(
        "robust-most-3",
        "robust.py",
        "0 if trials < max(fewest, 3) else",
        "0 if trials <= max(fewest, 3) else",
    ),
    M("robust-most-8", "robust.py", "1 if trials < 8 else 2", "1 if trials <= 8 else 2"),
    M(
        "robust-n<3",
        "robust.py",
        "    if n < 3:\n        return None",
        "    if n < 2:\n        return None",
    ),
    M("robust-tie", "robust.py", "(abs(values[i] - centre), -i)", "(abs(values[i] - centre), i)"),
    M(
        "robust-and-or",
        "robust.py",
        "OUTLIER_LOG_DISTANCE and distance",
        "OUTLIER_LOG_DISTANCE or distance",
    ),
    M(
        "robust-distance->=",
        "robust.py",
        "distance > OUTLIER_LOG_DISTANCE",
        "distance >= OUTLIER_LOG_DISTANCE",
    ),
    M(
        "robust-spreads->=",
        "robust.py",
        "distance > OUTLIER_SPREADS * spread",
        "distance >= OUTLIER_SPREADS * spread",
        equivalent="differs only when the distance equals five robust sds exactly; with a "
        "spread of 0 the 0.15 rule already requires distance > 0",
    ),
    M(
        "robust-loop<=",
        "robust.py",
        "while len(out) < most_left_out",
        "while len(out) <= most_left_out",
    ),
    # sequential.py: the looks
    M("seq-share", "sequential.py", "LAST_LOOK_SHARE = 0.5", "LAST_LOOK_SHARE = 0.4"),
    M("seq-one-look", "sequential.py", "if plan is None or looks == 1:", "if plan is None:"),
    M("seq-last>=", "sequential.py", "trials >= plan.max_trials", "trials > plan.max_trials"),
    M("seq-looks-1", "sequential.py", "/ (looks - 1)", "/ looks"),
    M("seq-more<", "sequential.py", "trials < plan.max_trials", "trials <= plan.max_trials"),
    # interval.py: the arithmetic
    M(
        "interval-maxdf",
        "interval.py",
        "MAX_DF = 1000",
        "MAX_DF = 100",
        equivalent="the gate never has more than 10 trials a side (MAX_TRIALS): df <= 18",
    ),
    M(
        "interval-paired>1",
        "interval.py",
        "len(cand) == len(base) and len(cand) > 1",
        "len(cand) == len(base) and len(cand) > 0",
    ),
    M("interval-paired-df", "interval.py", "df = len(diffs) - 1", "df = len(diffs)"),
    M(
        "interval-spread>=",
        "interval.py",
        "spread = se > 0 and df > 0",
        "spread = se >= 0 and df > 0",
        equivalent="with se 0 the half-width is t x 0 = 0 either way",
    ),
    M(
        "interval-two-sided",
        "interval.py",
        "t_quantile((1 + confidence) / 2,",
        "t_quantile(confidence,",
    ),
    M("welch-ceil", "interval.py", "max(1, math.floor(df))", "max(1, math.ceil(df))"),
    M("welch-min-df", "interval.py", "max(1, math.floor(df))", "max(2, math.floor(df))"),
    M(
        "welch-borrowed-df",
        "interval.py",
        "(1 / nc + 1 / nb)), len(many) - 1",
        "(1 / nc + 1 / nb)), len(many)",
    ),
    M(
        "welch-zero-df",
        "interval.py",
        "return 0.0, nc + nb - 2",
        "return 0.0, nc + nb - 1",
        equivalent="with no spread (se 0) the degrees of freedom are never used",
    ),
    M("tcdf-odd", "interval.py", "if df % 2 == 1:", "if df % 2 == 0:"),
    M(
        "tquantile-steps",
        "interval.py",
        "for _ in range(100):",
        "for _ in range(30):",
        equivalent="30 bisection steps already pin the quantile to about 1e-8 of its bracket; "
        "the printed tables have 3 decimals",
    ),
    M(
        "robust-paired-lengths",
        "interval.py",
        "if paired and len(cand) == len(base):",
        "if paired:",
    ),
    M("robust-trial-1based", "interval.py", 'f"trial {i + 1}"', 'f"trial {i}"'),
    M(
        "robust-zero-figure",
        "interval.py",
        "min(*candidate, *baseline) <= 0:\n        return None\n    cand, base",
        "min(*candidate, *baseline) < 0:\n        return None\n    cand, base",
    ),
    # regression.py: limits and decisions
    M("min-latency-samples", "regression.py", "MIN_LATENCY_SAMPLES = 3", "MIN_LATENCY_SAMPLES = 2"),
    M(
        "floor-cap",
        "comparison.py",
        "absolute = min(absolute, 1.0)",
        "absolute = min(absolute, 2.0)",
    ),
    M("floor-wins>=", "comparison.py", "if absolute > relative:", "if absolute >= relative:"),
    M(
        "floor-swap",
        "comparison.py",
        "floor = self.floor_ms if higher_is_worse else self.floor_tps",
        "floor = self.floor_tps if higher_is_worse else self.floor_ms",
    ),
    M(
        "point-latency>=",
        "regression.py",
        "beyond = change > limit if",
        "beyond = change >= limit if",
    ),
    M("point-tps<=", "comparison.py", "else change < -limit", "else change <= -limit"),
    M(
        "interval-latency-beyond>=",
        "regression.py",
        "interval.low > limit, interval.high <= limit",
        "interval.low >= limit, interval.high <= limit",
    ),
    M(
        "interval-latency-within<",
        "regression.py",
        "interval.low > limit, interval.high <= limit",
        "interval.low > limit, interval.high < limit",
    ),
    M(
        "interval-tps-beyond<=",
        "regression.py",
        "interval.high < -limit, interval.low >= -limit",
        "interval.high <= -limit, interval.low >= -limit",
    ),
    M(
        "interval-tps-within>",
        "regression.py",
        "interval.high < -limit, interval.low >= -limit",
        "interval.high < -limit, interval.low > -limit",
    ),
    M(
        "open-ignores-plan",
        "comparison.py",
        'open_ = severity == "inconclusive" and more_allowed(self.plan, trials)',
        'open_ = severity == "inconclusive"',
    ),
    M(
        "look-trials-min",
        "comparison.py",
        "trials = max(len(candidate), len(baseline))",
        "trials = min(len(candidate), len(baseline))",
    ),
    M(
        "decides-budget<=",
        "comparison.py",
        "elif n < self.plan.max_trials:",
        "elif n <= self.plan.max_trials:",
    ),
    M("decides-on-limit", "regression.py", "if distance < half / 10:", "if distance < half / 20:"),
    M("decides-ceil", "comparison.py", "needed = math.ceil(", "needed = math.floor("),
    M("describe-looks>=", "comparison.py", "self.plan.looks > 1:", "self.plan.looks >= 1:"),
    M(
        "thin-latency<=",
        "regression.py",
        "if figure.requests < MIN_LATENCY_SAMPLES:",
        "if figure.requests <= MIN_LATENCY_SAMPLES:",
    ),
    M(
        "thin-base-latency<=",
        "regression.py",
        "elif base.requests < MIN_LATENCY_SAMPLES",
        "elif base.requests <= MIN_LATENCY_SAMPLES",
    ),
    M(
        "thin-level<=",
        "regression.py",
        "        if figure.requests < figure.concurrency:\n            found.append(Judged(",
        "        if figure.requests <= figure.concurrency:\n            found.append(Judged(",
    ),
    M(
        "base-zero-tps<",
        "regression.py",
        "elif base.aggregate_tokens_per_second <= 0:",
        "elif base.aggregate_tokens_per_second < 0:",
    ),
    M("gpu-products", "comparison.py", "if a and b and a != b:", "if a and b and a == b:"),
    M(
        "placement-paired",
        "regression.py",
        "if paired or not a or not b or a == b:",
        "if not a or not b or a == b:",
    ),
    M("quality-drop>=", "regression.py", "if drop > allowed:", "if drop >= allowed:"),
    M("baseline-errors>=", "comparison.py", "if v > 0)", "if v >= 0)"),
    M(
        "paired-flag",
        "regression.py",
        "paired = summary.paired_baseline is not None",
        "paired = False",
    ),
    # verdict.py: absolute limits and notes
    M(
        "verdict-plan-from-summary",
        "verdict.py",
        "plan = plan if plan is not None else summary.trial_plan",
        "plan = plan",
    ),
    M("verdict-settled-note", "verdict.py", "if warm is None or warm.settled:", "if warm is None:"),
    M(
        "verdict-latency>=",
        "verdict.py",
        "elif figure.median_ms > limit:",
        "elif figure.median_ms >= limit:",
    ),
    M(
        "verdict-tps<=",
        "verdict.py",
        "aggregate_tokens_per_second < limit.min_tokens_per_second",
        "aggregate_tokens_per_second <= limit.min_tokens_per_second",
    ),
    M("verdict-zero-count", "verdict.py", "if count <= 0:", "if count < 0:"),
    M(
        "verdict-min-passed<=",
        "verdict.py",
        "quality.passed < limits.min_passed",
        "quality.passed <= limits.min_passed",
    ),
    M(
        "verdict-thin-latency<=",
        "verdict.py",
        "elif figure.requests < MIN_LATENCY_SAMPLES:",
        "elif figure.requests <= MIN_LATENCY_SAMPLES:",
    ),
    # slo.py: service-level objectives of a load sweep (issue 25)
    M("slo-fewest", "slo.py", "FEWEST = 4", "FEWEST = 3"),
    M(
        "slo-floor-share",
        "slo_tails.py",
        "floor = max(thresholds.regression_floor_ms, percent / 100 * limit)",
        "floor = max(thresholds.regression_floor_ms, percent / 100 * limit * 0.99)",
    ),
    M(
        "slo-floor-max",
        "slo_tails.py",
        "floor = max(thresholds.regression_floor_ms, percent / 100 * limit)",
        "floor = min(thresholds.regression_floor_ms, percent / 100 * limit)",
    ),
    M(
        "slo-latency-beyond",
        "slo.py",
        "beyond, within = interval.low > EXACT, interval.high <= EXACT",
        "beyond, within = interval.low >= -EXACT, interval.high <= EXACT",
    ),
    M(
        "slo-least-within",
        "slo.py",
        "beyond, within = high < limit - EXACT, low >= limit - EXACT",
        "beyond, within = high < limit - EXACT, low > limit + EXACT",
    ),
    M(
        "slo-largest-beyond",
        "slo.py",
        "beyond, within = low > limit + EXACT, high <= limit + EXACT",
        "beyond, within = low >= limit - EXACT, high <= limit + EXACT",
    ),
]


def run_tests() -> tuple[bool, str, float]:
    """(passed, first failing test or '', seconds) of the test set on the tree as it is."""
    began = time.monotonic()
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *TESTS]
    try:
        done = subprocess.run(
            cmd, cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired:
        return False, "(timed out: counted as killed)", time.monotonic() - began
    failed = next(
        (
            line.split()[1]
            for line in done.stdout.splitlines()
            if line.startswith(("FAILED", "ERROR"))
        ),
        "",
    )
    return done.returncode == 0, failed, time.monotonic() - began


def apply(mutant: Mutant) -> tuple[Path, str, int]:
    path = GATE / mutant.file
    text = path.read_text()
    count = text.count(mutant.old)
    if count != 1:
        raise SystemExit(f"{mutant.id}: {mutant.old!r} occurs {count} times in {mutant.file}")
    line = text[: text.index(mutant.old)].count("\n") + 1
    path.write_text(text.replace(mutant.old, mutant.new))
    return path, text, line


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default="", help="comma-separated mutant ids")
    args = p.parse_args()
    chosen = [m for m in MUTANTS if not args.only or m.id in args.only.split(",")]
    ok, failed, seconds = run_tests()
    if not ok:
        raise SystemExit(f"the unmutated tests fail ({failed}): fix them first")
    print(f"unmutated: tests pass ({seconds:.0f} s); {len(chosen)} mutants")
    results = []
    for mutant in chosen:
        path, original, line = apply(mutant)
        try:
            passed, failed, seconds = run_tests()
        finally:
            path.write_text(original)
        killed = not passed
        print(f"{'killed  ' if killed else 'SURVIVED'} {mutant.id} ({mutant.file}:{line}, "
              f"{seconds:.0f} s) {failed}", flush=True)  # fmt: skip
        results.append({
            "id": mutant.id, "file": f"operator/vllm_operator/gate/{mutant.file}", "line": line,
            "from": mutant.old, "to": mutant.new, "killed": killed, "killed_by": failed or None,
            "equivalent": mutant.equivalent or None,
        })  # fmt: skip
    survivors = [r for r in results if not r["killed"]]
    summary = {
        "tests": TESTS,
        "mutants": len(results),
        "killed": len(results) - len(survivors),
        "survived": len(survivors),
        "survived_equivalent": sum(1 for r in survivors if r["equivalent"]),
        "survivors": [r["id"] for r in survivors],
        "results": results,
    }
    if not args.only:
        RESULTS.write_text(json.dumps(summary, indent=2) + "\n")
        print(f"saved {RESULTS.relative_to(ROOT)}")
    print(f"{summary['killed']} of {summary['mutants']} killed; survived: {summary['survivors']}")


if __name__ == "__main__":
    main()
