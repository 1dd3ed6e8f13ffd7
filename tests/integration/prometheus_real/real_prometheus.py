"""A real Prometheus (Debian's ``prometheus``, installed by hack/ci-tools.sh) on loopback.

One Prometheus per test module: a free port on 127.0.0.1, its storage in a temporary folder,
a 1 s scrape interval, and two scrape jobs (``a`` and ``b``) whose targets come from files
(``file_sd``) the tests write, so a target can be added or scraped twice mid-test without a
restart. Every target carries the ``pod`` and ``namespace`` labels kube-prometheus adds.

Without the binary the tests skip, saying why, unless ``VLLMOP_REQUIRE_PROMETHEUS`` is set
(CI: .ci/run installs it first), where they fail.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest

SCRAPE_SECONDS = 1.0
JOBS = ("a", "b")
NAMESPACE = "ml"
START_TIMEOUT = 60.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Prometheus:
    """A running Prometheus and the target files of its jobs."""

    def __init__(self, root: Path, url: str, process: subprocess.Popen[bytes]) -> None:
        self.root = root
        self.url = url
        self.process = process
        self.targets: dict[str, dict[str, tuple[str, str]]] = {job: {} for job in JOBS}

    def scrape(self, job: str, pod: str, address: str, namespace: str = NAMESPACE) -> None:
        """Let ``job`` scrape ``address`` (host:port) as pod ``pod`` of ``namespace``."""
        self.targets[job][pod] = (address, namespace)
        groups = [
            {"targets": [addr], "labels": {"pod": name, "namespace": ns}}
            for name, (addr, ns) in sorted(self.targets[job].items())
        ]
        path = self.root / f"{job}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(groups))
        tmp.rename(path)  # file_sd reads whole files only

    async def query(self, promql: str, at: float | None = None) -> list[dict[str, Any]]:
        """An instant query's result (a list of series)."""
        params = {"query": promql}
        if at is not None:
            params["time"] = f"{at:.3f}"
        timeout = aiohttp.ClientTimeout(total=10)
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.get(f"{self.url}/api/v1/query", params=params) as answer,
        ):
            body = await answer.json()
        assert body["status"] == "success", body
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    async def value(self, promql: str, at: float | None = None) -> float:
        """A query's single value (0 when it has no series)."""
        result = await self.query(promql, at)
        assert len(result) <= 1, result
        return float(result[0]["value"][1]) if result else 0.0

    async def wait_for(self, promql: str, wanted: float, seconds: float = 30.0) -> None:
        """Wait until ``promql`` gives ``wanted`` (scrapes are asynchronous)."""
        deadline = time.monotonic() + seconds
        seen = None
        while time.monotonic() < deadline:
            seen = await self.value(promql)
            if seen == wanted:
                return
            await asyncio.sleep(SCRAPE_SECONDS / 10)
        raise AssertionError(f"{promql} stayed {seen}, not {wanted}, for {seconds} s")


def _config(root: Path) -> str:
    jobs = "".join(
        f"  - job_name: {job}\n"
        f"    file_sd_configs:\n"
        f"      - files: [{root / (job + '.json')}]\n"
        f"        refresh_interval: 1s\n"
        for job in JOBS
    )
    return (
        "global:\n"
        f"  scrape_interval: {round(SCRAPE_SECONDS * 1000)}ms\n"
        f"  scrape_timeout: {round(SCRAPE_SECONDS * 800)}ms\n"
        "scrape_configs:\n" + jobs
    )


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/-/ready", timeout=2) as answer:
            return bool(answer.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@contextmanager
def start_prometheus(root: Path) -> Iterator[Prometheus]:
    """A Prometheus on a free loopback port, storing in ``root``; ready when entered.

    Skips without the binary, unless ``VLLMOP_REQUIRE_PROMETHEUS`` is set (CI)."""
    binary = shutil.which("prometheus")
    if binary is None:
        if os.environ.get("VLLMOP_REQUIRE_PROMETHEUS"):
            pytest.fail("prometheus is required here (VLLMOP_REQUIRE_PROMETHEUS is set)")
        pytest.skip("prometheus not installed (hack/ci-tools.sh installs it)")
    for job in JOBS:
        (root / f"{job}.json").write_text("[]")
    (root / "prometheus.yml").write_text(_config(root))
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    with (root / "prometheus.log").open("wb") as log:
        process = subprocess.Popen(
            [
                binary,
                f"--config.file={root / 'prometheus.yml'}",
                f"--storage.tsdb.path={root / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--storage.tsdb.retention.time=1h",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + START_TIMEOUT
            while not _ready(url):
                if process.poll() is not None or time.monotonic() > deadline:
                    text = (root / "prometheus.log").read_text()[-2000:]
                    pytest.fail(f"prometheus did not become ready: {text}")
                time.sleep(0.1)
            yield Prometheus(root, url, process)
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
