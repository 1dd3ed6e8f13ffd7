"""Derive the simulator's timing constants from the published study (prints YAML snippets).

Why a script: the numbers in ``operator/vllm_operator/sim/data/profiles.yaml`` must be
traceable to ``shared/docs/published-study.md``. This solves, per profile, four equations
for four unknowns (TTFT base, prefill cost per prompt token, inter-token latency and its
growth with context length): the three single-stream rows (short, medium, long latency) and
the 1-stream aggregate of the concurrency table, which is one request at a time in a closed
loop. Then it derives the batch factor that reproduces each aggregate tok/s figure at
2/4/8 streams.

Latency of one request alone (p prompt tokens, n output tokens), as the simulator runs it::

    L(p, n) = ttft_base + ttft_per_token * p + sum_{k=1}^{n-1} (itl + itl_per_ctx * (p + k))

Targets: the study's tok/s is n / L, so for the short row (2 output tokens) latency and
tok/s cannot both match; the target is the geometric mean of the published latency and
n / published tok/s, which balances the two relative errors. The 1-stream aggregate gives
L = n / (tok/s) for the concurrency request shape.

Concurrency request shape: the study did not publish it. With the medium shape (256 prompt
tokens, 105 output) its 0.17.0 throughput figures contradict each other (118.6 tok/s for
one medium request, 97.2 for one stream); with a long prompt (1,024 tokens) and 105 output
tokens all three tables fit one model, so ``vllm_operator.sim.tokens`` uses that shape and
this fit uses the 1-stream aggregate to pin the prefill cost, which the study did not
publish directly.

Run: ``.venv/bin/python benchmarks/sim_fit_profiles.py``
"""

from __future__ import annotations

import math

from vllm_operator.bench.prompts import CONCURRENCY_CLASS, DEFAULT_CLASSES
from vllm_operator.sim.study import CLASSES, STREAMS, published

# Published figures: (short ms, short tok/s, medium ms, medium tok/s, long ms, long tok/s),
# aggregate tok/s at 1, 2, 4, 8 streams.
PUBLISHED = {
    name: (
        tuple(x for k in CLASSES for x in (c.latency_ms[k], c.tokens_per_second[k])),
        tuple(c.aggregate[s] for s in STREAMS),
    )
    for name, c in published().items()
}


def target(latency_ms: float, tok_s: float, n: int) -> float:
    return math.sqrt(latency_ms * (n * 1000.0 / tok_s))


def solve(m: list[list[float]], r: list[float]) -> list[float]:
    """Gaussian elimination with partial pivoting for a square system ``m @ x = r``."""
    a = [[*row, y] for row, y in zip(m, r, strict=True)]
    size = len(a)
    for col in range(size):
        pivot = max(range(col, size), key=lambda i: abs(a[i][col]))
        a[col], a[pivot] = a[pivot], a[col]
        for i in range(col + 1, size):
            f = a[i][col] / a[col][col]
            a[i] = [x - f * y for x, y in zip(a[i], a[col], strict=True)]
    x = [0.0] * size
    for i in reversed(range(size)):
        x[i] = (a[i][size] - sum(a[i][j] * x[j] for j in range(i + 1, size))) / a[i][i]
    return x


def fit_relative(m: list[list[float]], r: list[float]) -> list[float]:
    """Least squares of relative errors for ``m @ x = r`` (normal equations)."""
    w = [[a / y for a in row] for row, y in zip(m, r, strict=True)]
    k = len(w[0])
    ata = [[sum(row[i] * row[j] for row in w) for j in range(k)] for i in range(k)]
    atb = [sum(row[i] for row in w) for i in range(k)]
    return solve(ata, atb)


def row_of(p: int, n: int) -> list[float]:
    """Coefficients of (ttft_base, ttft_per_token, itl, itl_per_ctx) in L(p, n)."""
    return [1.0, float(p), float(n - 1), (n - 1) * p + n * (n - 1) / 2]


def main() -> None:
    sizes = tuple((c.prompt_tokens, c.output_tokens) for c in DEFAULT_CLASSES)
    cp, cn = CONCURRENCY_CLASS.prompt_tokens, CONCURRENCY_CLASS.output_tokens
    for name, (lat, agg) in PUBLISHED.items():
        rows = [row_of(p, n) for p, n in sizes] + [row_of(cp, cn)]
        rhs = [target(lat[2 * i], lat[2 * i + 1], n) for i, (p, n) in enumerate(sizes)]
        rhs.append(cn * 1000.0 / agg[0])
        base, prefill, itl, slope = solve(rows, rhs)
        note = "exact solve of the four rows"
        if slope < 0:
            # ITL falling with context is unphysical (and would reach zero on long contexts):
            # clamp the slope to 0 and fit the other three by least squares of relative error.
            base, prefill, itl = fit_relative([r[:3] for r in rows], rhs)
            slope = 0.0
            note = "context slope clamped to 0, the rest by least squares of relative error"
        if prefill < 0:
            raise SystemExit(f"{name}: negative prefill cost {prefill}; model does not fit")
        ttft_c = base + prefill * cp
        decode_c = (cn - 1) * itl + slope * ((cn - 1) * cp + cn * (cn - 1) / 2)
        print(f"{name}:  # {note}")
        for (p, n), y, r in zip((*sizes, (cp, cn)), rhs, rows, strict=True):
            got = sum(a * b for a, b in zip(r, (base, prefill, itl, slope), strict=True))
            err = 100 * (got / y - 1)
            print(f"  # {p}/{n}: target {y:.1f} ms, model {got:.1f} ms ({err:+.1f}%)")
        print(f"  ttft_base_ms: {base:.2f}")
        print(f"  ttft_per_prompt_token_ms: {prefill:.4f}")
        print(f"  itl_ms: {itl:.4f}")
        print(f"  itl_per_context_token_ms: {slope:.7f}")
        print("  batch_factor (raw fit; c=1 is forced to 1.0 in the profile):")
        for c, a in zip((1, 2, 4, 8), agg, strict=True):
            cycle = c * cn * 1000.0 / a
            print(f"    {c}: {(cycle - ttft_c) / decode_c:.4f}")


if __name__ == "__main__":
    main()
