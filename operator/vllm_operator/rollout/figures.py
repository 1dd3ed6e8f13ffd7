"""Where a revision's benchmark figures live: on its own Deployment, status keeps a digest.

The figures a gate measured (a bench summary, 2-4 KB of JSON) are the operator's memory: the
stable revision's are the stored baseline a later gate without a twin judges against
(``rollout.baseline``). In status they made ``kubectl describe vllmd`` about 200 lines with
lines of 4,000 characters (issue 42). They now live in the ``vllm-operator.dev/figures``
annotation of the revision's own Deployment, which the operator already owns, watches and
patches (no new kind, no new right, no new read: the watch cache brings it back), which
becomes the stable's when the revision is promoted, and which goes with the revision
(retired, rejected, or the resource deleted: ownerReferences). Status keeps only
``figuresDigest`` (sha256 of that exact text).

Rules, so that no figures are lost and none can be forged:
- Figures stay in status (``benchmark`` / the history's ``summary``) until the Deployment is
  seen holding text with the same digest: a restart between the status write and the
  annotation's patch finds them still in status and patches again. A status written before
  this (figures in status, no annotation) moves the same way: the upgrade path.
- Figures on a Deployment are believed only when their digest is the one status keeps: a
  person who may edit Deployments but not the resource's status cannot plant a baseline.
- Only Passed verdicts of the stable or candidate revision keep figures anywhere, and only
  verdicts on those two revisions keep a digest; any other verdict keeps one line (its Job's
  log and report page have every figure).
- Figures over ``MAX_BYTES`` are not moved (they stay in status, as before): annotations of
  one object share 256 KiB.
"""

from __future__ import annotations

from collections.abc import Iterable

from vllm_operator.api.status import (
    GateRecord,
    RevisionSummary,
    StoredFiguresAdapter,
    figures_digest,
    figures_text,
)
from vllm_operator.api.summary import BenchSummary
from vllm_operator.render import labels
from vllm_operator.rollout.actions import Patch
from vllm_operator.rollout.observed import Observed
from vllm_operator.rollout.views import DeploymentView

MAX_BYTES = 65_536
"""Most bytes of figures moved to a Deployment's annotation (a summary is 2-8 KB)."""


def digest_of(summary: BenchSummary) -> str:
    return figures_digest(figures_text(summary))


def held(dep: DeploymentView | None, digest: str | None) -> bool:
    """Whether ``dep`` holds figures whose digest is ``digest``."""
    if dep is None or dep.deleting or dep.figures is None or digest is None:
        return False
    return figures_digest(dep.figures) == digest


def read(dep: DeploymentView | None, digest: str | None) -> BenchSummary | None:
    """The figures ``dep`` holds, if their digest is ``digest`` (else None: absent or not
    the operator's)."""
    if dep is None or dep.figures is None or not held(dep, digest):
        return None
    try:
        return StoredFiguresAdapter.validate_python(dep.figures)
    except ValueError:
        return None


def store(observed: Observed, revision: str, summary: BenchSummary | None) -> Patch | None:
    """The patch that puts ``summary`` on ``revision``'s Deployment (or LeaderWorkerSet), if it
    is not there."""
    if summary is None:
        return None
    dep = observed.deployment_of(revision)
    text = figures_text(summary)
    if dep is None or dep.deleting or dep.figures == text or len(text) > MAX_BYTES:
        return None
    return Patch(
        dep.kind,
        dep.name,
        {"metadata": {"annotations": {labels.FIGURES_ANNOTATION: text}}},
    )


def slim_revision(observed: Observed, summary: RevisionSummary | None) -> RevisionSummary | None:
    """``summary`` as status keeps it: the digest always, the figures only until the
    revision's Deployment holds them."""
    if summary is None or summary.benchmark is None:
        return summary
    digest = digest_of(summary.benchmark)
    moved = held(observed.deployment_of(summary.revision), digest)
    return summary.model_copy(
        update={"figures_digest": digest, "benchmark": None if moved else summary.benchmark}
    )


def slim_history(
    observed: Observed, history: Iterable[GateRecord], keep: Iterable[str | None]
) -> list[GateRecord]:
    """The history as status keeps it: verdicts on the revisions in ``keep`` (stable,
    candidate) with the digest of their figures, and their figures only while a Passed
    one's Deployment does not hold them yet; every other verdict without either (its
    revision is gone: its figures are in its Job's log and report page)."""
    wanted = {r for r in keep if r is not None}
    out = []
    for entry in history:
        if entry.revision not in wanted:
            out.append(entry.model_copy(update={"summary": None, "figures_digest": None}))
            continue
        if entry.summary is None:
            out.append(entry)
            continue
        digest = digest_of(entry.summary)
        needed = entry.outcome == "Passed" and not held(
            observed.deployment_of(entry.revision), digest
        )
        out.append(
            entry.model_copy(
                update={"figures_digest": digest, "summary": entry.summary if needed else None}
            )
        )
    return out


def of_revision(
    observed: Observed, revision: str, sources: Iterable[tuple[BenchSummary | None, str | None]]
) -> BenchSummary | None:
    """A revision's figures: the first of ``sources`` (figures in status, their digest) that
    has figures in status, else the figures its Deployment holds under one of their digests."""
    known = list(sources)
    for summary, _ in known:
        if summary is not None:
            return summary
    dep = observed.deployment_of(revision)
    for _, digest in known:
        found = read(dep, digest)
        if found is not None:
            return found
    return None
