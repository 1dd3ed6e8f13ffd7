"""Does an identical candidate pass a 10% gatewayAPI step beside 4 stable pods? N runs.

Issue 39's acceptance: "`gatewayAPI` at 10% with 4 stable pods: an identical candidate
Passed 10 of 10 runs". Each run is a new revision of the same server (an env var nothing
reads) on the embedded cluster, the real operator in kopf, an HTTPRoute with Gateway API's
own CRD, and live users sending requests by the route's weights (the rollout tests'
``WeightedRoute``); the gate is off, so a run is the canary alone. The runs follow one
another on one cluster (``identical_runs`` in tests/integration/rollout/
test_canary_gateway.py, whose suite test runs 2). Prints each run and saves
``results/canary_gateway_identical.json``.

Run: ``.venv/bin/python benchmarks/canary_gateway_identical.py [--runs 10]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "canary_gateway_identical.json"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    # The rollout tests' harness and builders (pytest's pythonpath is tests/).
    sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "integration")]
    from rollout.harness import Rollout  # after the path above
    from rollout.test_canary_gateway import GATEWAY_CRD, identical_runs

    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="canary-gw-") as tmp:
        r = Rollout(Path(tmp), crds=(GATEWAY_CRD,))
        r.start_operator()
        try:
            results = identical_runs(r, args.runs)
        finally:
            r.close()
    passed = sum(1 for x in results if x["outcome"] == "Passed")
    for x in results:
        print(f"run {x['run']}: {x['outcome']} in {x['seconds']} s; {x['step']}")
    seconds = sorted(x["seconds"] for x in results)
    summary = {
        "runs": args.runs,
        "passed": passed,
        "cores": os.cpu_count(),
        "seconds_median": seconds[len(seconds) // 2] if seconds else None,
        "seconds_max": seconds[-1] if seconds else None,
        "wall_seconds": round(time.monotonic() - began, 1),
        "detail": results,
    }
    OUT.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(f"identical candidate at 10% beside 4 stable pods: Passed {passed} of {args.runs}")
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0 if passed == args.runs else 1


if __name__ == "__main__":
    raise SystemExit(main())
