"""``vllm-operator calibrate``'s human output: the fit, the plan, its power, the replays, the
patch. Apart from the command so that the command stays argument handling and I/O; every
string a report could carry (its path, a verdict's reason) is escaped (``api.text.printable``)."""

from __future__ import annotations

from vllm_operator.api.text import printable
from vllm_operator.gate.calibration import AA_PASS
from vllm_operator.gate.calibration_plan import Proposal


def _signed(values: tuple[float, ...]) -> str:
    return ", ".join(f"{v:+.1f}" for v in values)


def _floors(proposal: Proposal) -> str:
    return ", ".join(f"{m} {v}%" for m, v in sorted(proposal.floors.items()))


def human(  # noqa: PLR0917 - one call site, each a part of the text
    fitted: Proposal,
    proposal: Proposal,
    replays: list[tuple[str, str, list[str]]],
    patch: str,
    budget: tuple[int, int],
    unit: str,
    power: list[str] | None,
) -> str:
    """The whole human answer of ``calibrate`` (``fitted``: the model's proposal,
    ``proposal``: after the replays; ``budget``: timeoutSeconds and maxTrials; ``power``:
    ``gate.power``'s statements at the patched CR, None without a CR)."""
    timeout, max_trials = budget
    first = proposal.figures[0].noise if proposal.figures else None
    runs = len(first.offsets) if first else 0
    seconds = f"{first.seconds:g}" if first else "?"
    lines = [
        f"calibrated from {runs} A/A runs (their levels {seconds} s each); "
        "in percent of each figure's limit:",
        f"  {'figure':<24} {'limit':>9}  {'instance':>8} {'within':>7} {'floor':>6}  "
        "each run's mean offset",
    ]
    for f in proposal.figures:
        n = f.noise
        lines.append(
            f"  {n.key.name(unit):<24} {n.limit_ms:>6g} ms  {n.instance:>8.1f} "
            f"{n.within_at(proposal.seconds_per_level):>7.1f} {f.floor:>6.1f}  {_signed(n.offsets)}"
        )
    lines += [
        "  (instance: the spread of the offset between identical servers; within: one trial's "
        f"noise at {proposal.seconds_per_level} s levels; floor: what the figure alone asks)",
        "",
        f"plan: trials {proposal.trials} (maxTrials {max_trials}), "
        f"secondsPerLevel {proposal.seconds_per_level}: every "
        f"level's first look within timeoutSeconds {timeout}, an A/A gate Passed "
        f">= {AA_PASS:.0%} of the time by the fitted model",
        f"floors (regressionFloorPercent): {_floors(proposal)}",
        *(
            [f"  (raised by the replays, from the fitted {_floors(fitted)})"]
            if fitted.floors != proposal.floors
            else []
        ),
        "power at this plan (gate.power, on the tail of these runs' twins):",
        *(f"  {line}" for line in power or ["(give --cr: the power needs the CR's workload)"]),
    ]
    lines += ["", "the reports judged again at the proposal (judge --report):"]
    for path, outcome, reasons in replays:
        lines.append(f"  {printable(path, newlines=False)}: {outcome}")
        if outcome != "Passed":
            lines += [f"    - {printable(r, newlines=False)}" for r in reasons[:3]]
    if power is None:
        lines.append("  (no --cr: the limits the reports were counted at, maxRegressionPercent 10)")
    lines += [
        "",
        "spec patch (kubectl patch vllmdeployment NAME --type merge --patch-file FILE;",
        "a slo.levels entry with its own limits needs its floors set there too):",
        *(f"  {line}" for line in patch.rstrip("\n").splitlines()),
    ]
    return "\n".join(lines) + "\n"
