"""The words the gate's and the canary's reasons use that a newcomer cannot guess. Pure data.

Reasons say "widened for 8 looks", "the 5 ms floor", "undecided (another figure failed
first)", "candidate <= 10 ms (bucket bounds)": exact, short, and jargon to someone who has
not read docs/bench.md. One glossary holds what each word means: this table. The report
page prints the entries its reasons use (``bench.page``), docs/glossary.md holds every entry
word for word (a test compares them), and the reasons keep using these terms verbatim, so
the word a person reads is the word the glossary explains.
"""

from __future__ import annotations

GLOSSARY: dict[str, str] = {
    "looks": (
        "The moments the gate may stop and decide: after the first trials (gate.trials) and "
        "after each further round, up to gate.maxTrials. Looking several times would raise the "
        'chance of a wrong verdict, so every interval is "widened for N looks": wider the more '
        "looks the plan allows."
    ),
    "floor": (
        "The smallest change that counts as a regression, in absolute units "
        "(gate.thresholds.regressionFloorMs, regressionFloorTokensPerSecond). When the "
        "relative limit of a fast figure is smaller than the floor, the floor is the limit: "
        '"limit +29.7% (the 5 ms floor; 10% would be +2 ms)" reads: 10% of this figure is 2 '
        "ms, less than the 5 ms floor, so the limit is 5 ms, +29.7% of it."
    ),
    "twin": (
        "A zero-traffic copy of the stable revision started beside the candidate for one gate "
        "and measured in the same benchmark Job, trial by trial, on the same kind of GPU "
        "(gate.baseline.mode twin, or auto when it can be scheduled). Removed after the verdict."
    ),
    "stored baseline": (
        "The stable revision's figures as its own gate measured them (on its Deployment, under "
        "status.stable.figuresDigest), used when no twin runs: an earlier run, perhaps on "
        "another node, so the figures are compared as points or unpaired, and the reason says "
        "so."
    ),
    "undecided": (
        "A figure whose interval straddles its limit: the data cannot yet tell a regression "
        "from noise. More trials run while the plan allows; it stays undecided when the time "
        "budget ran out, every allowed trial ran, or another figure failed first (more trials "
        "could not change a Failed verdict, so none were run). An undecided figure alone makes "
        "the verdict Inconclusive; next to a failed one it decides nothing."
    ),
    "bucket bounds": (
        "vLLM's latency metrics are Prometheus histograms: they count requests between fixed "
        'bounds (10 ms, 20 ms, ...), not exact times. A canary figure such as "candidate <= 10 '
        'ms (bucket bounds)" is the bound its requests fell under, not a measurement: the true '
        "value lies somewhere below it, and the canary judges conservatively from the bounds."
    ),
    "share in effect": (
        "The share of the serving traffic the candidate actually gets. A canary step asks for "
        "a weight (25%); with traffic.mode replicas, whole pods behind one Service, the share "
        "in effect is candidate / (candidate + stable) Ready pods, rounded up: 1 candidate and "
        "1 stable pod take 50% each. Gateway API routes give the weight itself."
    ),
}
"""Term -> what it means, in the order docs/glossary.md lists them."""


def used_in(texts: list[str]) -> list[tuple[str, str]]:
    """The glossary entries whose term appears in any of ``texts`` (in glossary order)."""
    joined = " ".join(texts).lower()
    return [(term, text) for term, text in GLOSSARY.items() if term in joined]
