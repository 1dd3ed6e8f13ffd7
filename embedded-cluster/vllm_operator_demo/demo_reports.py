"""One report page per step of the demo: the verdict, the charts and the quality table.

Each benchmark Job logs its full report as its last JSON line (``{"event": "report", ...}``)
and the operator keeps only the compact summary in status; the page needs the full report
(per-trial figures, per-request samples, every quality test). The Job is deleted once the
operator has decided, but the local kubelet keeps each pod's log in its work directory
(``<workdir>/<namespace>/<pod>/logs/``, ``Kubelet.pod_log``), so the report is read from
there after the verdict, as ``kubectl logs job/NAME`` would have shown it while the Job
existed. The page is the one ``vllm-operator report`` writes (``bench/page/``).

A missing report or a page that cannot be drawn is said in one line and never changes the
demo's outcome: the verdicts are what the demo checks.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from pathlib import Path

from vllm_operator.api.status import GateRecord
from vllm_operator.api.summary import BenchSummary
from vllm_operator.errors import SpecError
from vllm_operator.render import job_name
from vllm_operator.rollout.results import parse_summary, summary_from_log
from vllm_operator_demo.demo_session import Session

REPORTS_PREFIX = "vllm-operator-demo-reports-"
KEEP_EARLIER = 2
"""Earlier runs' default report folders kept (a run's pages are about 14 MB)."""


def reports_dir(given: Path | None, temp: Path | None = None) -> Path:
    """Where the pages go: ``given`` (created), or a new temporary folder kept after exit;
    the default folders of earlier runs beyond the newest ``KEEP_EARLIER`` are removed, so
    pages do not pile up in the temporary directory run after run."""
    if given is not None:
        given.mkdir(parents=True, exist_ok=True)
        return given
    temp = temp or Path(tempfile.gettempdir())
    earlier = sorted(
        (p for p in temp.glob(f"{REPORTS_PREFIX}*") if p.is_dir()),
        key=lambda p: p.stat().st_mtime,
    )
    for old in earlier[: max(0, len(earlier) - KEEP_EARLIER)]:
        pages = list(old.iterdir())
        if all(p.is_file() and p.suffix == ".html" for p in pages):  # only what a run wrote
            for page in pages:
                page.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                old.rmdir()
    return Path(tempfile.mkdtemp(prefix=REPORTS_PREFIX, dir=temp))


def bench_log(session: Session, job: str, namespace: str) -> str:
    """The logs of the Job's pods (every attempt of the pod, oldest name first)."""
    folder = session.kubelet.workdir / namespace
    if not folder.is_dir():
        return ""
    pods = sorted(p.name for p in folder.glob(f"{job}-*") if p.is_dir())
    return "".join(session.kubelet.pod_log(namespace, pod) for pod in pods)


def figures(
    session: Session, name: str, namespace: str, record: GateRecord | None
) -> BenchSummary | None:
    """The figures ``record``'s benchmark measured, from its Job's log (status keeps only
    their digest, and a rejected revision's Deployment, which held them, is gone)."""
    if record is None or record.judge() != "gate":
        return None
    job = job_name(name, record.revision, record.attempt or 1)
    return report_summary(bench_log(session, job, namespace))


def report_summary(log: str) -> BenchSummary | None:
    """The summary of the report event a bench log ends with, else its last summary line."""
    for line in reversed(log.splitlines()):
        if '"report"' not in line:
            continue
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):
            continue
        report = event.get("report") if isinstance(event, dict) else None
        if isinstance(report, dict) and event.get("event") == "report":
            found = parse_summary(json.dumps(report.get("summary")))
            if found is not None:
                return found
    return summary_from_log(log)


def write_report(
    session: Session, name: str, namespace: str, record: GateRecord | None, path: Path
) -> str:
    """Write the page of ``record``'s benchmark to ``path``; the line to print about it."""
    if record is None or record.decided_by != "gate":
        return "report: none (no benchmark decided this step)"
    job = job_name(name, record.revision, record.attempt or 1)
    log = bench_log(session, job, namespace)
    if not log:
        return f"report: none (Job {job} left no log)"
    try:
        from vllm_operator.bench.page import document, view  # noqa: PLC0415 (plotly)

        page = document.render_report(view.loads(log.encode("utf-8"), f"Job {job}'s log"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(page, encoding="utf-8")
    except (ImportError, SpecError, OSError) as exc:
        return f"report: not written ({exc})"
    return f"report: {path}"
