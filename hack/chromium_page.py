"""Open a report page in headless Chromium and report what a person would see.

Why: ``vllm-operator report`` writes pages people open in a browser; only a browser can say
that a page renders without console errors, that its charts were drawn with data, and what
it looks like. Chromium comes from Debian's package (``apt-get install chromium``;
``hack/ci-tools.sh`` installs it; Playwright's browser download is not possible here). It is
driven over the DevTools protocol with aiohttp's WebSocket client (already a dependency),
so no WebDriver or extra Python package is needed.

What it collects: console errors and uncaught exceptions (``Runtime``), browser log errors
such as Content-Security-Policy violations (``Log``), every URL the page requested
(``Network``: a self-contained page asks only for its own ``file:`` URL), the result of a
JavaScript expression (the tests read the plotly figures' state with it), and a full-page
PNG screenshot. ``tests/integration/report/`` imports this file; people run it:

    .venv/bin/python hack/chromium_page.py report.html --screenshot docs/report.png

Exit status: 0 the page rendered without errors, asked for nothing but itself and every
chart drew each revision (``--roles``); 1 otherwise (printed); 2 usage error or no Chromium.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")

RENDERED = """(() => {
  const b = document.body;
  if (!b) return null;
  return b.getAttribute("data-rendered") ? "rendered"
       : b.getAttribute("data-render-error") ? "error: " + b.getAttribute("data-render-error")
       : null;
})()"""


REPORT_STATE = """(() => ({
  charts: Array.from(document.querySelectorAll(".js-plotly-plot")).map(gd => ({
    id: gd.id,
    points: gd.data.map(t => [t.meta, (t.y || []).filter(v => v !== null).length]),
    rows: gd.data.map(t => [t.meta, Array.from(t.y || []), Array.from(t.x || [])]),
    drawn: Array.from(gd.querySelectorAll("g.trace")).map(g => {
      const d = g.__data__;
      const first = Array.isArray(d) ? d[0] : d;
      return [first && first.trace ? first.trace.meta : null, g.querySelectorAll("path").length];
    }),
  })),
  sections: Object.fromEntries(Array.from(document.querySelectorAll("section[id]"))
    .map(s => [s.id, s.innerText])),
  title: document.title,
  pwned: typeof window.__pwned,
}))()"""
"""What a person sees of a ``vllm-operator report`` page: per chart, the points of each
trace (plotly's ``div.data``, by ``meta``: candidate or baseline; ``rows``: each trace's
y and x values) and the trace groups
plotly drew (each SVG ``g.trace`` with its trace's ``meta`` and its ``path`` count); the
text of each section (verdict, load, quality, errors)."""


def find_chromium() -> str | None:
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


@dataclass
class PageResult:
    """What the browser saw while loading one page."""

    state: str | None = None  # RENDERED's answer: "rendered", "error: ...", None (timeout)
    errors: list[str] = field(default_factory=list)  # console errors, exceptions, log errors
    requests: list[str] = field(default_factory=list)  # every URL the page asked for
    value: Any = None  # the evaluated expression's result
    screenshot: bytes | None = None


class _Browser:
    """One headless Chromium process and a DevTools WebSocket to it."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.next_id = 0
        self.pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.events: list[dict[str, Any]] = []
        self.changed = asyncio.Event()

    async def pump(self) -> None:
        async for msg in self.ws:
            if msg.type != aiohttp.WSMsgType.TEXT:
                break
            data = json.loads(msg.data)
            waiter = self.pending.pop(data.get("id", -1), None)
            if waiter is not None and not waiter.done():
                waiter.set_result(data)
            elif "method" in data:
                self.events.append(data)
                self.changed.set()
        for waiter in self.pending.values():
            if not waiter.done():
                waiter.set_exception(ConnectionError("DevTools connection closed"))

    async def call(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None
    ) -> dict[str, Any]:
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        waiter: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.pending[self.next_id] = waiter
        await self.ws.send_str(json.dumps(message))
        answer = await waiter
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        result: dict[str, Any] = answer.get("result", {})
        return result

    async def wait_event(self, method: str, deadline: float) -> None:
        while not any(e["method"] == method for e in self.events):
            self.changed.clear()
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no {method} within the time limit")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), left)


def _launch(chromium: str, profile: Path) -> tuple[subprocess.Popen[str], str]:
    args = [
        chromium,
        "--headless=new",
        "--disable-gpu",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-extensions",
        "--disable-background-networking",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--remote-debugging-port=0",
        f"--user-data-dir={profile}",
        "about:blank",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        args.insert(1, "--no-sandbox")  # Chromium refuses to start as root with its sandbox
    proc = subprocess.Popen(
        args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        if line.startswith("DevTools listening on "):
            # keep draining stderr so Chromium never blocks on a full pipe
            import threading  # noqa: PLC0415

            threading.Thread(target=proc.stderr.read, daemon=True).start()
            return proc, line.split()[-1]
    proc.wait()
    raise RuntimeError(f"chromium exited with {proc.returncode} before DevTools listened")


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _collect(result: PageResult, events: Sequence[dict[str, Any]]) -> None:
    for event in events:
        method, params = event["method"], event.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            texts = [str(a.get("value", a.get("description", ""))) for a in params.get("args", [])]
            result.errors.append("console: " + " ".join(texts))
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            text = details.get("exception", {}).get("description") or details.get("text")
            result.errors.append(f"exception: {text}")
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            result.errors.append(f"log ({entry.get('source')}): {entry.get('text')}")
        elif method == "Network.requestWillBeSent":
            result.requests.append(params.get("request", {}).get("url", ""))


def report_problems(result: PageResult, page: Path, roles: Sequence[str]) -> list[str]:
    """What is wrong with a report page as a person would see it (``REPORT_STATE``): it did
    not render, logged an error, asked for anything but its own file, or a chart lacks a
    revision's data or drawing."""
    problems = [f"not rendered: {result.state}"] if result.state != "rendered" else []
    problems += result.errors
    problems += [f"requested {u}" for u in result.requests if u != page.resolve().as_uri()]
    state = result.value or {}
    if not state.get("charts"):
        problems.append("no charts")
    for chart in state.get("charts", []):
        if chart["id"].startswith("gate-"):
            continue  # the gate's own chart (figures against limits), not one per revision
        for role in roles:
            points = sum(n for meta, n in chart["points"] if meta == role)
            drawn = sum(paths for meta, paths in chart["drawn"] if meta == role)
            if points == 0 or drawn == 0:
                problems.append(f"chart {chart['id']}: {role}: {points} points, {drawn} drawn")
    return problems


async def _open(  # noqa: PLR0917 - private, one caller
    page_url: str,
    expression: str | None,
    screenshot: bool,
    width: int,
    seconds: float,
    element: str | None = None,
) -> PageResult:
    chromium = find_chromium()
    if chromium is None:
        raise FileNotFoundError("chromium not installed (apt-get install chromium)")
    deadline = time.monotonic() + seconds
    result = PageResult()
    with tempfile.TemporaryDirectory(prefix="chromium-page-") as profile:
        proc, devtools = await asyncio.to_thread(_launch, chromium, Path(profile))
        try:
            async with (
                aiohttp.ClientSession() as http,
                http.ws_connect(devtools, max_msg_size=0) as ws,
            ):
                browser = _Browser(ws)
                pump = asyncio.create_task(browser.pump())
                target = await browser.call("Target.createTarget", {"url": "about:blank"})
                attached = await browser.call(
                    "Target.attachToTarget", {"targetId": target["targetId"], "flatten": True}
                )
                session = attached["sessionId"]
                for domain in ("Runtime", "Log", "Network", "Page"):
                    await browser.call(f"{domain}.enable", session=session)
                await browser.call(
                    "Emulation.setDeviceMetricsOverride",
                    {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False},
                    session=session,
                )
                browser.events.clear()
                await browser.call("Page.navigate", {"url": page_url}, session)
                await browser.wait_event("Page.loadEventFired", deadline)
                while time.monotonic() < deadline:
                    answer = await browser.call(
                        "Runtime.evaluate",
                        {"expression": RENDERED, "returnByValue": True},
                        session,
                    )
                    result.state = answer.get("result", {}).get("value")
                    if result.state is not None:
                        break
                    await asyncio.sleep(0.1)  # polling a condition, not a fixed wait
                if expression is not None:
                    answer = await browser.call(
                        "Runtime.evaluate",
                        {"expression": expression, "returnByValue": True},
                        session,
                    )
                    result.value = answer.get("result", {}).get("value")
                if screenshot:
                    metrics = await browser.call("Page.getLayoutMetrics", session=session)
                    size = metrics["cssContentSize"]
                    clip = {"x": 0, "y": 0, "width": width, "height": size["height"], "scale": 1}
                    if element is not None:  # the element's box only, in page coordinates
                        box = await browser.call(
                            "Runtime.evaluate",
                            {"expression": _box(element), "returnByValue": True},
                            session,
                        )
                        found = box.get("result", {}).get("value")
                        if not found:
                            raise LookupError(f"no element with id {element!r} on the page")
                        clip = {**found, "scale": 1}
                    shot = await browser.call(
                        "Page.captureScreenshot",
                        {"format": "png", "captureBeyondViewport": True, "clip": clip},
                        session,
                    )
                    result.screenshot = base64.b64decode(shot["data"])
                _collect(result, browser.events)
                with contextlib.suppress(Exception):
                    await browser.call("Browser.close")
                pump.cancel()
        finally:
            await asyncio.to_thread(_stop, proc)
    return result


def _box(element: str) -> str:
    """JavaScript: the box of the element with id ``element`` in page coordinates, or null."""
    return (
        f"(function () {{ var e = document.getElementById({json.dumps(element)}); "
        "if (!e) return null; var r = e.getBoundingClientRect(); "
        "return {x: r.left + window.scrollX, y: r.top + window.scrollY, "
        "width: r.width, height: r.height}; })()"
    )


def open_page(
    page: Path,
    *,
    expression: str | None = None,
    screenshot: bool = False,
    width: int = 1280,
    timeout: float = 90.0,
    element: str | None = None,
) -> PageResult:
    """Load ``page`` (a local file) in headless Chromium and say what happened; with
    ``element`` (an id), the screenshot is of that element only."""
    return asyncio.run(
        _open(page.resolve().as_uri(), expression, screenshot, width, timeout, element)
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Open a local HTML page in headless Chromium: print console errors and "
        "requested URLs, optionally save a full-page screenshot."
    )
    parser.add_argument("page", type=Path)
    parser.add_argument("--screenshot", type=Path, metavar="PNG")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument(
        "--element", metavar="ID", help="screenshot only the element with this id (e.g. verdict)"
    )
    parser.add_argument(
        "--roles",
        default="candidate,baseline",
        help="revisions every chart of a report page must draw (default: %(default)s)",
    )
    args = parser.parse_args(argv)
    if not args.page.is_file():
        print(f"chromium_page: {args.page}: no such file", file=sys.stderr)
        return 2
    try:
        result = open_page(
            args.page,
            expression=REPORT_STATE,
            screenshot=args.screenshot is not None,
            width=args.width,
            element=args.element,
        )
    except (FileNotFoundError, LookupError) as exc:
        print(f"chromium_page: {exc}", file=sys.stderr)
        return 2
    if args.screenshot is not None and result.screenshot is not None:
        args.screenshot.write_bytes(result.screenshot)
        print(f"wrote {args.screenshot} ({len(result.screenshot):,} bytes)")
    print(f"state: {result.state}")
    for chart in (result.value or {}).get("charts", []):
        print(f"chart {chart['id']}: points {chart['points']}")
    problems = report_problems(result, args.page, args.roles.split(","))
    for problem in problems:
        print(f"PROBLEM {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
