"""Can the gate be trusted on noisy hardware, and is it decisive? Verdict rates and durations.

Two ways:

1. **Model** (pure): thousands of gates through the real gate (``gate.open_figures``
   for the sequential looks, then ``gate.verdict``) on per-trial figures drawn from the noise
   model below, **refitted to the H200 paired runs of 2026-12-01**
   (``shared/calibration/h200-paired-2026-12-01``: seven A/A gates and one regression, every
   trial of every figure, both servers).
2. **End to end**: the real benchmark (``run_benchmark``, in this process) against fresh
   simulator processes with ``--sim-preset h200-noisy`` at a small time scale.

Scenarios: the candidate is the baseline (A/A), 5% slower, 20% slower (every duration /
speed: latency +5.3% / +25%, tokens/s -5% / -20%). Modes: ``twin`` (paired, both servers
fresh, as twin mode starts them) and ``stored`` (the baseline's own earlier run). Default
settings: ``maxRegressionPercent: 10``, confidence 95%, floors 5 ms and 5 tok/s, 3 trials
then sequential up to 10; figures: short/medium/long latency and tok/s at 1, 2, 4, 8 streams.

Noise model (log scale, so percentages multiply), fitted per figure from the H200 runs
(``FIGURES``: the typical value, ``own``: each server's own per-trial sd, from the paired
log-ratio sd / sqrt 2; ``shared``: the part both servers of one trial share, from the
within-server sd beyond ``own``; root mean squares over the seven A/A runs, so the noisier
runs count fully):

- ``own``/``shared`` per figure: short latency 6.8% / 5.3%, medium 1.2% / 0, long 0.5% / 0,
  1 stream 2.2% / 1.2%, 2 streams 3.8% / 2.9%, 4 streams 3.2% / 0, 8 streams 3.0% / 2.9%.
  *Replaces* the old single 1.5% trial sd and 2% window sd for every figure: short prompts
  and the multi-stream levels are several times noisier than that.
- ``start``: each server start's own speed, sd 1.5% (both-fresh runs aa1, aa6, aa7 read
  within -3.4% and +4.2% of each other per figure, means of 3 trials). Kept.
- ``dip``: a JIT compile inside a measured trial costs that trial 45-58% of one level's
  tokens/s. On H200, 3 of the 24 (fresh server, level) pairs dipped in their **first** trial
  despite the per-level warm-up request (aa1 twice, aa6): 12.5%, *replacing* the old 2%; a
  later trial, 1% (none seen in 45 later trials). The model does not assume the settling
  warm-up removes them: it keeps 12.5% (conservative).
- ``fresh``: a fresh server runs slower for minutes (aa3 and aa5: a fresh candidate against a
  settled twin read -10% to -12% at every level). New: in ``twin`` both servers start fresh,
  so the slowdown is common, 5-12% decaying with a 300 s time constant, and each server's
  share of it differs by sd 10% of it (both-fresh runs showed no such gap); in ``stored``
  the baseline's figures are from its own fresh start too.

Durations (what a gate costs on an H200, per server and trial, from the same runs: short
0.1 s, medium 1.5 s, long 9.9 s, 1/2/4/8 streams 0.95/1.1/1.45/2.0 s; a settling pass is one
request per class plus every level at its measured shape): **today's** gate = per-shape
warm-up plus 3 rounds of everything (110-127 s measured, 112 s modelled); the new gate =
settling passes until two agree (at most 4) + 3 rounds + extra rounds of the undecided
figures only.

Run: ``.venv/bin/python benchmarks/gate_noise.py [--model-gates 2000] [--e2e-gates 10]``.
Saves ``benchmarks/results/gate_noise.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import statistics
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vllm_operator.api.gate_spec import Thresholds
from vllm_operator.api.summary import (
    BenchSummary,
    ConcurrencyFigures,
    LatencyFigures,
    PairedBaseline,
    TrialPlan,
)
from vllm_operator.bench import BenchConfig, run_benchmark
from vllm_operator.bench.prompts import SIZES
from vllm_operator.gate import open_figures, verdict

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "gate_noise.json"
MODEL = "Qwen/Qwen3-30B-A3B-Instruct-2507-GPTQ-Int4"

SCENARIOS = {"A/A": 1.0, "5% slower": 0.95, "20% slower": 0.8}
MODES = ("twin", "stored")
LIMIT = 10.0
TRIALS = 3
MAX_TRIALS = 10
LEVELS = (1, 2, 4, 8)
CLASSES = ("short", "medium", "long")


@dataclass(frozen=True)
class Figure:
    """One compared figure: its H200 value, noise, and seconds per trial per server."""

    value: float
    own: float
    shared: float
    seconds: float


FIGURES: dict[tuple[str, str], Figure] = {
    ("latency", "short"): Figure(21.4, 0.068, 0.053, 0.1),
    ("latency", "medium"): Figure(304.5, 0.012, 0.0, 1.5),
    ("latency", "long"): Figure(1973.6, 0.005, 0.0, 9.9),
    ("concurrency", "1"): Figure(312.4, 0.022, 0.012, 0.95),
    ("concurrency", "2"): Figure(522.3, 0.038, 0.029, 1.1),
    ("concurrency", "4"): Figure(791.4, 0.032, 0.0, 1.45),
    ("concurrency", "8"): Figure(1175.8, 0.030, 0.029, 2.0),
}
SETTLE_PASS_SECONDS = 2.3 + 5.5
"""One settling pass on one server: a request per class, every level at its measured shape."""
OLD_WARMUP_SECONDS = 2.3 + 1.7
"""Today's warm-up on one server: a request per class and per stream of each level."""


@dataclass(frozen=True)
class NoiseModel:
    """The refitted H200 model (module docstring); ``scale`` multiplies every sd."""

    start: float = 0.015
    dip_first: float = 0.125
    dip_later: float = 0.01
    dip: tuple[float, float] = (0.45, 0.58)
    fresh: tuple[float, float] = (0.05, 0.12)
    fresh_seconds: float = 300.0
    fresh_spread: float = 0.10
    scale: float = 1.0
    figures: dict[tuple[str, str], Figure] = field(default_factory=lambda: dict(FIGURES))


def _server(  # noqa: PLR0917 - one caller, the model's draw order
    rng: random.Random,
    noise: NoiseModel,
    speed: float,
    shared: dict[tuple[str, str], list[float]],
    fresh: float,
    times: list[float],
) -> dict[tuple[str, str], list[float]]:
    """One server start: MAX_TRIALS values of every figure (revealed as the gate asks)."""
    start = rng.gauss(0, noise.start)
    share = fresh * (1 + rng.gauss(0, noise.fresh_spread))
    out: dict[tuple[str, str], list[float]] = {}
    for key, fig in noise.figures.items():
        values = []
        for k in range(MAX_TRIALS):
            slow = share * math.exp(-times[k] / noise.fresh_seconds)
            if key[0] == "latency":
                slow *= 0.2  # long latency moved +1-2% where tokens/s moved -10%
            log = start + shared[key][k] + rng.gauss(0, fig.own * noise.scale) + slow
            if key[0] == "latency":
                values.append(fig.value / speed * math.exp(log))
            else:
                value = fig.value * speed * math.exp(-log)
                chance = noise.dip_first if k == 0 else noise.dip_later
                if rng.random() < chance:
                    value *= 1 - rng.uniform(*noise.dip)
                values.append(value)
        out[key] = values
    return out


def _summary(
    values: dict[tuple[str, str], list[float]], counts: dict[tuple[str, str], int]
) -> tuple[list[LatencyFigures], list[ConcurrencyFigures]]:
    lat, conc = [], []
    for key, n in counts.items():
        trials = [round(v, 2) for v in values[key][:n]]
        middle = sorted(trials)[len(trials) // 2]
        if key[0] == "latency":
            lat.append(
                LatencyFigures.model_construct(
                    prompt_class=key[1], requests=5 * n, median_ms=middle, ttft_ms=0,
                    output_tokens=0, e2e_tokens_per_second=0, decode_tokens_per_second=0,
                    trials=trials,
                )
            )  # fmt: skip
        else:
            level = int(key[1])
            conc.append(
                ConcurrencyFigures.model_construct(
                    concurrency=level, aggregate_tokens_per_second=middle,
                    requests_per_second=0, requests=3 * level * n, trials=trials,
                )
            )  # fmt: skip
    return lat, conc


@dataclass
class Gate:
    """One modelled gate: its verdict, trials per figure and duration."""

    outcome: str
    trials: dict[tuple[str, str], int]
    seconds: float
    settle_passes: int


def _settle_passes(rng: random.Random, noise: NoiseModel, tolerance: float = 0.15) -> int:
    """Passes until two agree within the tolerance (latency also within 5 ms), at most 4."""
    previous = None
    for number in range(1, 5):
        now = {
            k: rng.gauss(0, math.hypot(f.own, f.shared) * noise.scale)
            for k, f in noise.figures.items()
        }
        if number == 1 and rng.random() < noise.dip_first * len(LEVELS):
            now[("concurrency", "2")] -= 0.6  # a compile lands in the first pass
        if previous is not None:
            agree = True
            for key, fig in noise.figures.items():
                allowed = tolerance
                if key[0] == "latency":
                    allowed = max(tolerance, 5 / fig.value)
                if abs(math.exp(now[key] - previous[key]) - 1) > allowed:
                    agree = False
            if agree:
                return number
        previous = now
    return 4


def model_gate(  # noqa: PLR0917 - the cell's parameters, one caller
    rng: random.Random,
    noise: NoiseModel,
    speed: float,
    mode: str,
    thresholds: Thresholds,
    plan: TrialPlan,
) -> Gate:
    """One gate of the new design: settle, ``plan.min_trials`` rounds, then sequential."""
    passes = _settle_passes(rng, noise)
    settle_seconds = passes * SETTLE_PASS_SECONDS * (2 if mode == "twin" else 1)
    round_seconds = sum(f.seconds for f in noise.figures.values()) * (2 if mode == "twin" else 1)
    times = [settle_seconds + round_seconds * (k + 0.5) for k in range(MAX_TRIALS)]
    fresh = rng.uniform(*noise.fresh)

    def shared() -> dict[tuple[str, str], list[float]]:
        return {
            k: [rng.gauss(0, f.shared * noise.scale) for _ in range(MAX_TRIALS)]
            for k, f in noise.figures.items()
        }

    windows = shared()
    cand = _server(rng, noise, speed, windows, fresh, times)
    if mode == "twin":
        base = _server(rng, noise, 1.0, windows, fresh, times)
        stored = None
    else:
        base = _server(rng, noise, 1.0, shared(), rng.uniform(*noise.fresh), times)
        lat, conc = _summary(base, dict.fromkeys(noise.figures, plan.min_trials))
        stored = BenchSummary.model_construct(
            latency=lat, concurrency=conc, errors={}, schema_="vllm-operator.dev/bench-summary/v1",
            placement=None, paired_baseline=None, quality=None, trial_plan=plan, warmup=None,
        )  # fmt: skip
    counts = dict.fromkeys(noise.figures, plan.min_trials)
    seconds = settle_seconds + round_seconds * plan.min_trials

    def summary() -> BenchSummary:
        lat, conc = _summary(cand, counts)
        paired = None
        if mode == "twin":
            blat, bconc = _summary(base, counts)
            paired = PairedBaseline.model_construct(
                latency=blat, concurrency=bconc, errors={}, placement=None, quality=None
            )
        return BenchSummary.model_construct(
            latency=lat, concurrency=conc, errors={}, schema_="vllm-operator.dev/bench-summary/v1",
            placement=None, paired_baseline=paired, quality=None, trial_plan=plan, warmup=None,
        )  # fmt: skip

    for _ in range(plan.max_trials - plan.min_trials):
        # the bench's own rule: nothing is open once a figure is beyond its limit
        pending = open_figures(summary(), thresholds, stored, plan)
        if not pending:
            break
        for key in pending:
            counts[key] += 1
            seconds += noise.figures[key].seconds * (2 if mode == "twin" else 1)
    outcome = verdict(summary(), thresholds, stored, plan=plan).outcome
    return Gate(outcome, counts, seconds, passes)


def today_seconds(noise: NoiseModel, mode: str) -> float:
    """Today's gate on an H200: per-shape warm-up, then 3 rounds of everything."""
    per_round = sum(f.seconds for f in noise.figures.values())
    servers = 2 if mode == "twin" else 1
    return servers * (OLD_WARMUP_SECONDS + TRIALS * per_round)


def run_model(
    gates: int,
    seed: int = 1,
    noise: NoiseModel | None = None,
    plan: TrialPlan | None = None,
    thresholds: Thresholds | None = None,
) -> dict[str, Any]:
    """Verdict rates, trials and durations per mode and scenario, ``gates`` each."""
    noise = noise or NoiseModel()
    plan = plan or TrialPlan(min_trials=TRIALS, max_trials=MAX_TRIALS)
    thresholds = thresholds or Thresholds(max_regression_percent=LIMIT)
    out: dict[str, Any] = {}
    for mode in MODES:
        for name, speed in SCENARIOS.items():
            rng = random.Random(f"{seed}/{mode}/{name}")
            counts: Counter[str] = Counter()
            seconds, trials, passes = [], [], []
            for _ in range(gates):
                gate = model_gate(rng, noise, speed, mode, thresholds, plan)
                counts[gate.outcome] += 1
                seconds.append(gate.seconds)
                trials.append(max(gate.trials.values()))
                passes.append(gate.settle_passes)
            cell = _rates(counts, gates)
            seconds.sort()
            cell["seconds_median"] = round(statistics.median(seconds), 1)
            cell["seconds_p95"] = round(seconds[int(0.95 * (len(seconds) - 1))], 1)
            cell["today_seconds"] = round(today_seconds(noise, mode), 1)
            cell["most_trials_median"] = statistics.median(trials)
            cell["settle_passes_median"] = statistics.median(passes)
            out[f"{mode}/{name}"] = cell
    return out


def _rates(counts: Counter[str], n: int) -> dict[str, Any]:
    return {
        "gates": n,
        **{k: round(counts[k] / n, 4) for k in ("Failed", "Inconclusive", "Passed", "Error")},
    }


# ---------------------------------------------------------------- end to end (simulators)


def _start_sim(*args: str) -> tuple[subprocess.Popen[str], str]:
    cmd = [sys.executable, "-m", "vllm_operator.sim", MODEL, "--port", "0"]
    cmd += ["--sim-warmup-seconds", "0", "--sim-preset", "h200-noisy", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("SIM LISTENING "):
            return proc, line.split()[-1]
    raise RuntimeError(f"simulator {args} exited with {proc.wait()}")


async def _bench(url: str, baseline_url: str | None) -> BenchSummary:
    config = BenchConfig(
        url=url,
        model=MODEL,
        baseline_url=baseline_url,
        trials=TRIALS,
        max_trials=MAX_TRIALS,
        settle_max_passes=4,
        iterations=3,
        warmup=1,
        prompt_classes=(SIZES["medium"],),
        concurrency=LEVELS,
        requests_per_stream=2,
        thresholds=Thresholds(max_regression_percent=LIMIT),
    )
    report = await run_benchmark(config)
    return report.summary


def e2e_gate(rng: random.Random, speed: float, mode: str, scale: float) -> str:
    """One gate through the real bench against fresh simulators; returns the outcome."""
    noise = NoiseModel()

    def sim(true_speed: float) -> tuple[subprocess.Popen[str], str]:
        start = true_speed * math.exp(rng.gauss(0, noise.start))  # its own node and start
        seed = str(rng.randrange(1 << 30))
        return _start_sim("--sim-time-scale", str(scale), "--sim-speed", f"{start:.5f}",
                          "--sim-seed", seed)  # fmt: skip

    thresholds = Thresholds(max_regression_percent=LIMIT)
    procs = []
    try:
        if mode == "twin":
            (pc, cu), (pb, bu) = sim(speed), sim(1.0)
            procs += [pc, pb]
            summary = asyncio.run(_bench(cu, bu))
            return verdict(summary, thresholds, None).outcome
        pb, bu = sim(1.0)
        procs.append(pb)
        stored = asyncio.run(_bench(bu, None))
        pc, cu = sim(speed)
        procs.append(pc)
        summary = asyncio.run(_bench(cu, None))
        return verdict(summary, thresholds, stored).outcome
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=10)


def run_e2e(gates: int, scale: float, modes: tuple[str, ...], seed: int = 2) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for mode in modes:
        for name, speed in SCENARIOS.items():
            rng = random.Random(f"e2e/{seed}/{mode}/{name}")
            counts: Counter[str] = Counter()
            began = time.monotonic()
            for _ in range(gates):
                counts[e2e_gate(rng, speed, mode, scale)] += 1
            out[f"{mode}/{name}"] = _rates(counts, gates)
            took = time.monotonic() - began
            print(f"  e2e {mode}/{name}: {dict(counts)} ({took:.0f} s)", file=sys.stderr)
    return out


def _table(model: dict[str, Any], e2e: dict[str, Any] | None) -> list[str]:
    head = "| scenario | mode | Failed | Inconclusive | Passed | median s (today) | p95 s |"
    rule = "|---|---|---|---|---|---|---|"
    if e2e:
        head += " e2e Failed | e2e Inconclusive | e2e Passed |"
        rule += "---|---|---|"
    lines = [head, rule]
    for name in SCENARIOS:
        for mode in MODES:
            key = f"{mode}/{name}"
            m = model[key]
            row = f"| {name} | {mode} | {m['Failed']:.1%} | {m['Inconclusive']:.1%} | "
            row += f"{m['Passed']:.1%} | {m['seconds_median']:.0f} ({m['today_seconds']:.0f}) | "
            row += f"{m['seconds_p95']:.0f} |"
            if e2e and key in e2e:
                e = e2e[key]
                row += f" {e['Failed']:.0%} | {e['Inconclusive']:.0%} | {e['Passed']:.0%} |"
            lines.append(row)
    return lines


def targets(rates: dict[str, Any], modes: tuple[str, ...] = ("twin",)) -> dict[str, bool]:
    """Issue 19's targets: A/A Passed >= 95% and Failed <= 1%, 5% slower Failed <= 5%, 20%
    slower Failed >= 95%, median duration at most twice today's (model only)."""
    out = {}
    for mode in modes:
        aa = rates[f"{mode}/A/A"]
        out[f"{mode}: A/A Passed >= 95%"] = aa["Passed"] >= 0.95
        out[f"{mode}: A/A Failed <= 1%"] = aa["Failed"] <= 0.01
        out[f"{mode}: 5% slower Failed <= 5%"] = rates[f"{mode}/5% slower"]["Failed"] <= 0.05
        out[f"{mode}: 20% slower Failed >= 95%"] = rates[f"{mode}/20% slower"]["Failed"] >= 0.95
        if "seconds_median" in aa:
            out[f"{mode}: A/A median duration <= 2x today"] = (
                aa["seconds_median"] <= 2 * aa["today_seconds"]
            )
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model-gates", type=int, default=2000)
    p.add_argument("--e2e-gates", type=int, default=0, help="0 skips the end-to-end part")
    p.add_argument("--e2e-modes", default="twin", help="modes to run end to end")
    p.add_argument("--time-scale", type=float, default=0.05)
    args = p.parse_args()
    began = time.monotonic()
    model = run_model(args.model_gates)
    fixed = run_model(args.model_gates, plan=TrialPlan(min_trials=TRIALS, max_trials=TRIALS))
    print(f"model: {args.model_gates} gates per row ({time.monotonic() - began:.1f} s)")
    e2e: dict[str, Any] = {}
    if args.e2e_gates > 0:
        modes = tuple(m for m in args.e2e_modes.split(",") if m in MODES)
        e2e.update(run_e2e(args.e2e_gates, args.time_scale, modes))
    print("\nnew gate: 3 trials, then sequential up to 10, floors, one outlier left out")
    print("\n".join(_table(model, e2e or None)))
    print("\nthe same model, a fixed 3 trials (no sequential looks)")
    print("\n".join(_table(fixed, None)))
    checks = {f"model/{k}": v for k, v in targets(model).items()}
    print()
    for name, ok in checks.items():
        print(f"{'ok  ' if ok else 'MISS'} {name}")
    result = {
        "limit_percent": LIMIT,
        "confidence_percent": 95,
        "trials": TRIALS,
        "max_trials": MAX_TRIALS,
        "noise_model": {k: v for k, v in NoiseModel().__dict__.items() if k != "figures"}
        | {"figures": {":".join(k): f.__dict__ for k, f in FIGURES.items()}},
        "model": model,
        "model_fixed_3_trials": fixed,
        "e2e": e2e or None,
        "e2e_time_scale": args.time_scale,
        "targets": checks,
    }
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"saved {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
