"""The processes started by the thousand show no modules they never use (issue 44).

Every simulated pod is ``python -m vllm_operator.sim`` and every benchmark Job has a
sandbox container (``vllm-operator sandbox serve``): the test suite starts hundreds of
each, a cluster as many. Importing the API package builds every pydantic model (about
0.25 CPU s) and the bench package's runner pulls aiohttp and those models (about 0.6 CPU
s); neither of these two processes uses them. Each rollout test also starts a kubelet
process, which needs neither the API server nor kopf (about 1 CPU s). Each check runs a
fresh interpreter, as a pod does.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def loaded_after(module: str, watched: list[str]) -> list[str]:
    code = (
        "import importlib, json, sys\n"
        f"importlib.import_module({module!r})\n"
        f"print(json.dumps([m for m in {watched!r} if m in sys.modules]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    found: list[str] = json.loads(out.stdout)
    return found


@pytest.mark.parametrize(
    ("module", "unused"),
    [
        ("vllm_operator.commands.sim", ["vllm_operator.api"]),
        (
            "vllm_operator.commands.sandbox",
            ["vllm_operator.api", "vllm_operator.bench.runner", "aiohttp", "pydantic"],
        ),
        # the rollout tests' kubelet process (tests/integration/rollout/kubelet_child.py)
        ("devcluster.kubelet", ["kopf", "kubernetes", "devcluster.cluster", "vllm_operator.api"]),
    ],
)
def test_a_process_started_per_pod_imports_nothing_it_does_not_use(
    module: str, unused: list[str]
) -> None:
    assert loaded_after(module, unused) == []


def test_the_bench_package_still_gives_its_names() -> None:
    from vllm_operator import bench
    from vllm_operator.bench.config import BenchConfig
    from vllm_operator.bench.report import BenchReport

    assert bench.BenchConfig is BenchConfig
    assert bench.BenchReport is BenchReport
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        _ = bench.nothing  # type: ignore[attr-defined]
