"""Wall time of `vllm-operator demo` (target: under 2 minutes on 2 cores) and its verdicts.

Runs the demo exactly as a user would (a fresh process, default options unless given),
times the whole command and each step, and saves the figures with the verdicts and the
closing tables to ``benchmarks/results/demo_wall_time.json``. The quoted runs (README,
docs/demo.md, ``benchmarks/results/demo_output.txt``) come from ``hack/demo_docs.py``, their
one writer.

Run: ``.venv/bin/python benchmarks/demo_wall_time.py [--time-scale X]``
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
TARGET_SECONDS = 120.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-scale", type=float, default=None)
    args = parser.parse_args()
    cmd = [sys.executable, "-m", "vllm_operator.commands", "demo"]
    if args.time_scale is not None:
        cmd += ["--time-scale", str(args.time_scale)]
    started = time.monotonic()
    proc = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    wall = time.monotonic() - started
    output = proc.stdout
    steps = [
        {"step": int(n), "verdict": verdict, "expected": expected, "at_seconds": float(at)}
        for at, n, verdict, expected in re.findall(
            r"\[\s*([\d.]+)s\] step (\d): verdict (\w+) \(expected (\w+)\)", output
        )
    ]
    story = re.search(r"finished in ([\d.]+) s", output)
    result = {
        "command": " ".join(["vllm-operator", *cmd[3:]]),
        "exit_code": proc.returncode,
        "wall_seconds": round(wall, 1),
        "story_seconds": float(story.group(1)) if story else None,
        "target_seconds": TARGET_SECONDS,
        "within_target": wall < TARGET_SECONDS,
        "cpus": os.cpu_count(),
        "steps": steps,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "demo_wall_time.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0 if proc.returncode == 0 and result["within_target"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
