"""Deployment and Job controllers as pure functions: (object, its pods, now) -> plan.

In a cluster these are kube-controller-manager's loops; here they are values in, values out,
so their rules (pod names, ownerReferences, Recreate-style replacement, status fields and
conditions, Job deadlines) are unit-testable and the kubelet shell only applies the plan.
No ReplicaSet objects are created: pods are owned by their Deployment directly (with its uid,
so garbage collection by ownerReferences works) and carry ``pod-template-hash``.
"""

from __future__ import annotations

import calendar
import copy
import hashlib
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]

HASH_LABEL = "pod-template-hash"
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def rfc3339(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def parse_rfc3339(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return float(calendar.timegm(time.strptime(text[:19], "%Y-%m-%dT%H:%M:%S")))
    except ValueError:
        return None


def template_hash(template: Obj) -> str:
    """A stable 10-character hash of a pod template (like Kubernetes' pod-template-hash)."""
    digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).digest()
    return "".join(_ALPHABET[b % len(_ALPHABET)] for b in digest[:10])


def owned_by(pod: Obj, owner: Obj) -> bool:
    uid = (owner.get("metadata") or {}).get("uid")
    name = (owner.get("metadata") or {}).get("name")
    kind = owner.get("kind")
    refs = (pod.get("metadata") or {}).get("ownerReferences") or []
    return any(
        (ref.get("uid") == uid) if uid else (ref.get("name"), ref.get("kind")) == (name, kind)
        for ref in refs
    )


def pod_phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def pod_ready(pod: Obj) -> bool:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


def _terminating(pod: Obj) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def _owner_ref(owner: Obj) -> Obj:
    meta = owner.get("metadata") or {}
    ref: Obj = {
        "apiVersion": owner.get("apiVersion"),
        "kind": owner.get("kind"),
        "name": meta.get("name"),
        "controller": True,
        "blockOwnerDeletion": True,
    }
    if meta.get("uid"):
        ref["uid"] = meta["uid"]
    return ref


def pod_from_template(owner: Obj, template: Obj, name: str, extra_labels: dict[str, str]) -> Obj:
    tmeta = template.get("metadata") or {}
    meta: Obj = {
        "name": name,
        "namespace": (owner.get("metadata") or {}).get("namespace"),
        "labels": {**(tmeta.get("labels") or {}), **extra_labels},
        "ownerReferences": [_owner_ref(owner)],
    }
    if tmeta.get("annotations"):
        meta["annotations"] = dict(tmeta["annotations"])
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": copy.deepcopy(template.get("spec") or {}),
    }


def random_suffix(n: int = 5) -> str:
    return "".join(secrets.choice(_ALPHABET) for _ in range(n))


@dataclass
class Plan:
    """What a controller wants done: pods to create and delete, and the status to write."""

    create: list[Obj] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)
    status: Obj | None = None
    delete_owner: bool = False  # the Job's TTL after finishing has passed


def _condition(
    old: list[Obj], ctype: str, status: str, reason: str, message: str, *, now: float
) -> Obj:
    prev = next((c for c in old if c.get("type") == ctype), None)
    changed = prev is None or prev.get("status") != status
    stamp = rfc3339(now)
    return {
        "type": ctype,
        "status": status,
        "reason": reason,
        "message": message,
        "lastUpdateTime": stamp if changed or prev is None else prev.get("lastUpdateTime", stamp),
        "lastTransitionTime": stamp if changed else (prev or {}).get("lastTransitionTime", stamp),
    }


def deployment_plan(
    deploy: Obj,
    pods: list[Obj],
    now: float,
    *,
    suffix: Callable[[], str] = random_suffix,
    deadline_scale: float = 1.0,
) -> Plan:
    """Recreate-style: pods of an old template go first, then the current template is scaled."""
    meta = deploy.get("metadata") or {}
    spec = deploy.get("spec") or {}
    template = spec.get("template") or {}
    want = int(spec.get("replicas", 1) if spec.get("replicas") is not None else 1)
    thash = template_hash(template)
    plan = Plan()
    current, rolling = _replace_and_scale(deploy, pods, want, thash, suffix, plan)
    ready = sum(1 for p in current if pod_ready(p))
    total = len(current) + len(plan.create)
    old_conds = list((deploy.get("status") or {}).get("conditions") or [])
    available = ready >= want
    replica_set = f'ReplicaSet "{meta.get("name")}-{thash}"'
    conds = [
        _available(old_conds, available, now),
        _progressing(
            old_conds,
            replica_set,
            spec.get("progressDeadlineSeconds"),
            available=available,
            rolling=rolling,
            now=now,
            deadline_scale=deadline_scale,
        ),
    ]
    plan.status = {
        "observedGeneration": meta.get("generation", 1),
        "replicas": total,
        "updatedReplicas": total,
        "readyReplicas": ready,
        "availableReplicas": ready,
        "unavailableReplicas": max(0, want - ready),
        "conditions": conds,
    }
    return plan


def _replace_and_scale(  # noqa: PLR0917 - private, one call site
    deploy: Obj,
    pods: list[Obj],
    want: int,
    thash: str,
    suffix: Callable[[], str],
    plan: Plan,
) -> tuple[list[Obj], bool]:
    """Delete the pods of an old template, then scale the current one to ``want`` (only once
    the old ones are gone: Recreate). The current pods kept, and whether old ones remain."""
    owned = [p for p in pods if owned_by(p, deploy) and not _terminating(p)]
    old = [p for p in owned if (p["metadata"].get("labels") or {}).get(HASH_LABEL) != thash]
    current = [p for p in owned if p not in old]
    plan.delete.extend(p["metadata"]["name"] for p in old)
    if len(current) > want:
        # Drop pods that are not Ready first, then the newest.
        ranked = sorted(
            current,
            key=lambda p: (pod_ready(p), p["metadata"].get("creationTimestamp") or ""),
        )
        extra = ranked[: len(current) - want]
        plan.delete.extend(p["metadata"]["name"] for p in extra)
        current = [p for p in current if p not in extra]
    elif len(current) < want and not old:
        template = (deploy.get("spec") or {}).get("template") or {}
        name = (deploy.get("metadata") or {}).get("name")
        for _ in range(want - len(current)):
            pod_name = f"{name}-{thash}-{suffix()}"
            plan.create.append(pod_from_template(deploy, template, pod_name, {HASH_LABEL: thash}))
    return current, bool(old)


def _available(old_conds: list[Obj], available: bool, now: float) -> Obj:
    """A Deployment's Available condition: True once ``replicas`` pods are Ready."""
    return _condition(
        old_conds,
        "Available",
        "True" if available else "False",
        "MinimumReplicasAvailable" if available else "MinimumReplicasUnavailable",
        "Deployment has minimum availability."
        if available
        else "Deployment does not have minimum availability.",
        now=now,
    )


def _progressing(
    old_conds: list[Obj],
    replica_set: str,
    deadline: Any,
    *,
    available: bool,
    rolling: bool,
    now: float,
    deadline_scale: float,
) -> Obj:
    """A Deployment's Progressing condition; False (ProgressDeadlineExceeded) once it has
    not become available within ``progressDeadlineSeconds``, and then for good."""
    progressing = _condition(
        old_conds,
        "Progressing",
        "True",
        "NewReplicaSetAvailable" if available and not rolling else "ReplicaSetUpdated",
        f"{replica_set} " + ("has successfully progressed." if available else "is progressing."),
        now=now,
    )
    if available or deadline is None:
        return progressing
    prev = next((c for c in old_conds if c.get("type") == "Progressing"), None)
    since = parse_rfc3339((prev or {}).get("lastUpdateTime")) or now
    if prev and prev.get("reason") == "ProgressDeadlineExceeded":
        return dict(prev)
    if now - since > float(deadline) * deadline_scale:
        return _condition(
            old_conds,
            "Progressing",
            "False",
            "ProgressDeadlineExceeded",
            f"{replica_set} has timed out progressing.",
            now=now,
        )
    return progressing


def _job_finished(status: Obj) -> str | None:
    for cond in status.get("conditions") or []:
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return str(cond["type"])
    return None


def job_plan(
    job: Obj,
    pods: list[Obj],
    now: float,
    *,
    suffix: Callable[[], str] = random_suffix,
    deadline_scale: float = 1.0,
) -> Plan:
    """One pod per attempt; Complete on success, Failed after backoffLimit or the deadline."""
    spec = job.get("spec") or {}
    old = job.get("status") or {}
    plan = Plan()
    live, succeeded, failed = _job_pods(job, pods)
    status: Obj = dict(old)
    start = parse_rfc3339(old.get("startTime"))
    if start is None:
        start = now
        status["startTime"] = rfc3339(now)
    if _job_finished(old):
        plan.delete_owner = _ttl_passed(spec, old, now, deadline_scale)
        plan.delete.extend(p["metadata"]["name"] for p in live)
        return plan
    conds: list[Obj] = list(old.get("conditions") or [])
    deadline = spec.get("activeDeadlineSeconds")
    backoff = int(spec.get("backoffLimit", 6) if spec.get("backoffLimit") is not None else 6)
    if succeeded:
        conds = [
            _condition(conds, "SuccessCriteriaMet", "True", "CompletionsReached", "", now=now),
            _condition(conds, "Complete", "True", "CompletionsReached", "", now=now),
        ]
        status["completionTime"] = rfc3339(now)
    elif deadline is not None and now - start > float(deadline) * deadline_scale:
        why = "Job was active longer than specified deadline"
        conds = [
            _condition(conds, "FailureTarget", "True", "DeadlineExceeded", why, now=now),
            _condition(conds, "Failed", "True", "DeadlineExceeded", why, now=now),
        ]
        plan.delete.extend(p["metadata"]["name"] for p in live)
        failed += len(live)
        live = []
    elif failed > backoff:
        why = "Job has reached the specified backoff limit"
        conds = [_condition(conds, "Failed", "True", "BackoffLimitExceeded", why, now=now)]
    elif not live:
        pod = _job_pod(job, suffix)
        plan.create.append(pod)
        live = [pod]
    status["active"] = len(live)
    status["succeeded"] = succeeded
    status["failed"] = failed
    status["ready"] = sum(1 for p in live if pod_ready(p))
    if conds:
        status["conditions"] = conds
    plan.status = status
    return plan


def _job_pods(job: Obj, pods: list[Obj]) -> tuple[list[Obj], int, int]:
    """A Job's running pods, and how many of its pods succeeded and failed."""
    owned = [p for p in pods if owned_by(p, job)]
    live = [p for p in owned if pod_phase(p) not in ("Succeeded", "Failed") and not _terminating(p)]
    succeeded = sum(1 for p in owned if pod_phase(p) == "Succeeded")
    failed = sum(1 for p in owned if pod_phase(p) == "Failed")
    return live, succeeded, failed


def _ttl_passed(spec: Obj, old: Obj, now: float, deadline_scale: float) -> bool:
    """Whether a finished Job's ``ttlSecondsAfterFinished`` has run out (it is deleted)."""
    ttl = spec.get("ttlSecondsAfterFinished")
    done_at = parse_rfc3339(old.get("completionTime")) or parse_rfc3339(
        next(
            (c.get("lastTransitionTime") for c in old.get("conditions") or []),
            None,
        )
    )
    return ttl is not None and done_at is not None and now - done_at >= ttl * deadline_scale


def _job_pod(job: Obj, suffix: Callable[[], str]) -> Obj:
    """The pod of a Job's next attempt, labelled as the Job controller labels it."""
    meta = job.get("metadata") or {}
    template = (job.get("spec") or {}).get("template") or {}
    uid = str(meta.get("uid") or "")
    labels = {
        "job-name": str(meta.get("name")),
        "batch.kubernetes.io/job-name": str(meta.get("name")),
    }
    if uid:
        labels["controller-uid"] = uid
        labels["batch.kubernetes.io/controller-uid"] = uid
    return pod_from_template(job, template, f"{meta.get('name')}-{suffix()}", labels)
