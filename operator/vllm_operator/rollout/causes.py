"""Why a candidate or a benchmark Job does not run, in words a person can act on.

A stuck candidate is rejected with the cause its pods report (unschedulable, image pull,
crash loop with the last container message), not with "timed out". A benchmark Job whose
pod never started is an Error, never a success: Argo Rollouts counted a gate Job whose
image never pulled as passed (argo-rollouts#3562); this module is where we refuse to.
"""

from __future__ import annotations

from collections.abc import Sequence

from vllm_operator.api.summary import BenchSummary
from vllm_operator.rollout.views import ContainerView, JobView, PodView

IMAGE_PULL = frozenset({"ImagePullBackOff", "ErrImagePull", "ErrImageNeverPull"})
# Waiting reasons no amount of waiting fixes.
HOPELESS = frozenset({"InvalidImageName", "CreateContainerConfigError", "ErrImageNeverPull"})
CRASH = frozenset({"CrashLoopBackOff", "RunContainerError", "CreateContainerError"})

MESSAGE_LIMIT = 400


def _short(text: str | None) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= MESSAGE_LIMIT else text[: MESSAGE_LIMIT - 3] + "..."


def _tail(text: str | None) -> str:
    """The end of a log-like message: where a crashing program says why."""
    text = " ".join((text or "").split())
    return text if len(text) <= MESSAGE_LIMIT else "..." + text[-(MESSAGE_LIMIT - 3) :]


def _crash_detail(container: ContainerView) -> str:
    message = container.last_message or container.termination_message
    code = container.last_exit_code if container.last_exit_code is not None else container.exit_code
    parts = [f"crash loop ({container.restart_count} restarts"]
    if code is not None:
        parts.append(f", exit code {code}")
    parts.append(")")
    text = "".join(parts)
    if message:
        text += f": {_tail(message)}"
    elif container.waiting_message:
        text += f": {_short(container.waiting_message)}"
    return text


def pod_cause(pod: PodView) -> str | None:
    """The most specific reason this pod is not running, or None when nothing is wrong."""
    if pod.unschedulable is not None:
        return f"unschedulable: {_short(pod.unschedulable)}"
    for container in pod.containers:
        reason = container.waiting_reason
        if reason in IMAGE_PULL or reason == "InvalidImageName":
            return f"image pull ({reason}): {_short(container.waiting_message)}".rstrip(": ")
        if reason in CRASH or (container.restart_count > 0 and not container.ready):
            return _crash_detail(container)
        if reason == "CreateContainerConfigError":
            return f"container config: {_short(container.waiting_message)}".rstrip(": ")
    return None


def pods_cause(pods: Sequence[PodView]) -> str | None:
    """The first cause found among ``pods`` (pods named in order, for stable messages)."""
    for pod in sorted(pods, key=lambda p: p.name):
        cause = pod_cause(pod)
        if cause is not None:
            return f"pod {pod.name}: {cause}"
    return None


def start_failure(pods: Sequence[PodView]) -> tuple[str, bool] | None:
    """Why a benchmark Job's pod has not started: (cause, hopeless) or None.

    ``hopeless`` causes (an invalid image name, a missing Secret or ConfigMap) fail the gate
    at once; the others (image pull back-off, unschedulable) only after the start deadline,
    since a registry hiccup or a node being added can still resolve them.
    """
    for pod in sorted(pods, key=lambda p: p.name):
        if pod.unschedulable is not None:
            return f"pod {pod.name} unschedulable: {_short(pod.unschedulable)}", False
        for container in pod.containers:
            reason = container.waiting_reason
            if reason is None:
                continue
            detail = f"pod {pod.name} cannot start ({reason})"
            if container.waiting_message:
                detail += f": {_short(container.waiting_message)}"
            if reason in HOPELESS:
                return detail, True
            if reason in IMAGE_PULL or reason in CRASH:
                return detail, False
    return None


def job_pod_exit(pods: Sequence[PodView]) -> str | None:
    """How a finished benchmark pod ended (exit code and reason), for an Error's reasons."""
    for pod in sorted(pods, key=lambda p: p.name):
        for container in pod.containers:
            if container.exit_code is not None:
                text = f"pod {pod.name} exited with code {container.exit_code}"
                if container.terminated_reason:
                    text += f" ({container.terminated_reason})"
                return text
    return None


def job_error_details(
    job: JobView, pods: Sequence[PodView], reasons: Sequence[str], summary: BenchSummary | None
) -> list[str]:
    """What an Error verdict on a finished Job adds to its ``reasons``: how the Job and its
    pod ended, and the first things the benchmark itself said."""
    extra: list[str] = []
    if job.failed_reason:
        extra.append(f"Job failed: {job.failed_reason} {job.failed_message or ''}".strip())
    for found in (start_failure(pods), job_pod_exit(pods)):
        if isinstance(found, tuple):
            extra.append(found[0])
        elif found and found not in " ".join([*reasons, *extra]):
            extra.append(found)
    if summary is not None and summary.reasons:
        extra.append("the benchmark said: " + "; ".join(summary.reasons[:3]))
    return extra
