"""`bench --workload-json --dataset` against a simulator process: a bad line sends nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
from bench_simproc import MODEL, StartSim

from vllm_operator.api.summary import BenchSummary

FAST = [
    "--prompt-classes", "short", "--iterations", "2", "--warmup", "0", "--concurrency", "1",
    "--requests-per-stream", "1", "--deadline-seconds", "60", "--suite", "builtin:none",
    "--settle-max-passes", "0", "--trials", "1",
]  # fmt: skip
WORKLOAD = json.dumps(
    {
        "dataset": {"configMap": "ds", "maxOutputTokens": 16},
        "seed": 1,
        "load": {"mode": "concurrency", "concurrency": [1], "secondsPerLevel": 2},
    }
)


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "vllm_operator.commands", "bench", "--model", MODEL, *args]
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=120, check=False, env=dict(os.environ)
    )


def requests_seen(url: str) -> float:
    """Chat requests the simulator took in: the prompt tokens it counted (Prometheus)."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("vllm:prompt_tokens_total")
    )


def test_a_malformed_line_is_refused_before_any_request(sim: StartSim, tmp_path: Path) -> None:
    url = sim("--sim-time-scale", "0.05")
    data = tmp_path / "team.jsonl"
    good = json.dumps({"messages": [{"role": "user", "content": "hello"}]})
    data.write_text("\n".join([good, good, '{"messages": [{"role": "user"}]}', good]) + "\n")
    summary_path = tmp_path / "termination-log"
    done = bench(
        "--url", url, *FAST, "--workload-json", WORKLOAD, "--dataset", str(data),
        "--summary-path", str(summary_path),
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    expected = "--dataset: line 3: messages[0].content is empty or not text"
    assert expected in done.stderr
    summary = BenchSummary.model_validate_json(summary_path.read_text())
    assert summary.verdict == "Error"
    assert summary.reasons[0].startswith(f"usage: {expected}")
    assert requests_seen(url) == 0
    # The same file without the bad line is accepted and the run reaches the server (the
    # count above can see requests).
    data.write_text("\n".join([good, good, good]) + "\n")
    done = bench("--url", url, *FAST, "--workload-json", WORKLOAD, "--dataset", str(data))
    assert done.returncode == 0, done.stderr[-2000:]
    assert requests_seen(url) > 0
