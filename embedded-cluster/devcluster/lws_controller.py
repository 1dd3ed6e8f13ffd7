"""The LeaderWorkerSet controller (kubernetes-sigs/lws v0.10.0) as a pure function.

A model that outgrows one node runs as a LeaderWorkerSet: one replica is a *group* of
``size`` pods, a leader and ``size - 1`` workers, started, counted and restarted together.
In a cluster the LWS controller, its pod controller and its pod webhook do that through
StatefulSets; here ``lws_plan`` is values in, values out (like ``kubelet_controllers``), so
the rules the operator relies on are unit-testable and the kubelet only applies the plan.
What follows the LWS source at v0.10.0 (file names under ``pkg/`` and ``api/``):

- Names: leader ``<lws>-<group>``, workers ``<lws>-<group>-<worker>`` (worker 1..size-1):
  the leader StatefulSet ``<lws>`` and one worker StatefulSet per leader pod.
- Labels (``leaderworkerset_types.go``): ``leaderworkerset.sigs.k8s.io/name``,
  ``group-index``, ``worker-index`` (0 on the leader), ``group-key`` (sha1 of
  ``<namespace>/<leader pod>``, ``pod_webhook.go``), ``template-revision-hash``; annotations
  ``size`` on every pod and ``leader-name`` on workers.
- Env (``pod_utils.go`` ``AddLWSVariables``): ``LWS_LEADER_ADDRESS`` =
  ``<lws>-<group>.<subdomain>.<namespace>`` (the subdomain is the set's name, its headless
  Service), ``LWS_GROUP_SIZE``, ``LWS_WORKER_INDEX``, put *first* in every container's env
  so the template's ``$(VAR)`` references expand (lws PR 152).
- ``restartPolicy`` ``RecreateGroupOnPodRestart`` (``pod_controller.go``
  ``handleRestartPolicy``): a container of any pod restarted, or a pod deleted or failed ->
  the whole group is deleted and created anew. ``None``: only that pod is replaced.
- Status (``leaderworkerset_controller.go`` ``updateStatus``/``updateConditions``):
  ``replicas`` (groups created), ``readyReplicas`` (leader Ready and every worker Ready),
  ``updatedReplicas``, ``hpaPodSelector`` (the leaders: what the scale subresource names),
  ``observedGeneration``, and exactly one of Available (``AllGroupsReady``) / Progressing
  (``GroupsProgressing``) / UpdateInProgress (``GroupsUpdating``) True, the other False.

Simplified, and said so: pods are owned by the set itself (no StatefulSets, as Deployments
here own their pods without ReplicaSets); a template change recreates every outdated group
at once instead of rolling them ``maxUnavailable`` at a time (the operator never changes a
revision's set in place: a new revision is a new set); no headless Service is created (the
kubelet maps the leader address to loopback, ``kubelet_launch``); ``startupPolicy`` is
always ``LeaderCreated`` (workers with the leader); a worker pod that vanished at once
(deleted with no grace period) is replaced alone, since nothing saw it go (LWS's pod
controller sees the deletion event; a restarted or failed worker recreates the group here
too).
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any

from devcluster.kubelet_controllers import (
    Plan,
    owned_by,
    pod_from_template,
    pod_phase,
    pod_ready,
    rfc3339,
    template_hash,
)

Obj = dict[str, Any]

GROUP = "leaderworkerset.x-k8s.io"
PREFIX = "leaderworkerset.sigs.k8s.io/"
NAME_LABEL = PREFIX + "name"
GROUP_INDEX_LABEL = PREFIX + "group-index"
WORKER_INDEX_LABEL = PREFIX + "worker-index"
GROUP_KEY_LABEL = PREFIX + "group-key"
REVISION_LABEL = PREFIX + "template-revision-hash"
SIZE_ANNOTATION = PREFIX + "size"
LEADER_NAME_ANNOTATION = PREFIX + "leader-name"
LEADER_ADDRESS_ENV = "LWS_LEADER_ADDRESS"
GROUP_SIZE_ENV = "LWS_GROUP_SIZE"
WORKER_INDEX_ENV = "LWS_WORKER_INDEX"
RECREATE_GROUP = "RecreateGroupOnPodRestart"

_CONDITIONS = {
    "Available": ("AllGroupsReady", "All replicas are ready"),
    "Progressing": ("GroupsProgressing", "Replicas are progressing"),
    "UpdateInProgress": ("GroupsUpdating", "Rolling Upgrade is in progress"),
}


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def leader_address(lws_name: str, group: int, namespace: str) -> str:
    """``LWS_LEADER_ADDRESS`` of a group (the leader's DNS name under the set's Service)."""
    return f"{lws_name}-{group}.{lws_name}.{namespace}"


def group_key(namespace: str, leader: str) -> str:
    return hashlib.sha1(f"{namespace}/{leader}".encode()).hexdigest()


def _templates(lws: Obj) -> tuple[Obj, Obj, int]:
    lwt = (lws.get("spec") or {}).get("leaderWorkerTemplate") or {}
    worker = lwt.get("workerTemplate") or {}
    leader = lwt.get("leaderTemplate") or worker
    return leader, worker, max(1, _int(lwt.get("size"), 1))


def revision_key(lws: Obj) -> str:
    """The hash of both templates and the size: pods of another key are outdated."""
    leader, worker, size = _templates(lws)
    return template_hash({"leader": leader, "worker": worker, "size": size})


def _with_env(pod: Obj, env: list[Obj]) -> None:
    names = {e["name"] for e in env}
    for key in ("containers", "initContainers"):
        for container in pod["spec"].get(key) or []:
            rest = [e for e in container.get("env") or [] if e.get("name") not in names]
            container["env"] = [*copy.deepcopy(env), *rest]


def group_pod(lws: Obj, group: int, worker: int) -> Obj:
    """Pod ``worker`` (0: the leader) of group ``group``, as LWS and its webhook make it."""
    meta = lws.get("metadata") or {}
    name, ns = str(meta.get("name")), str(meta.get("namespace") or "default")
    leader_tpl, worker_tpl, size = _templates(lws)
    leader_name = f"{name}-{group}"
    pod_name = leader_name if worker == 0 else f"{leader_name}-{worker}"
    labels = {
        NAME_LABEL: name,
        GROUP_INDEX_LABEL: str(group),
        WORKER_INDEX_LABEL: str(worker),
        GROUP_KEY_LABEL: group_key(ns, leader_name),
        REVISION_LABEL: revision_key(lws),
    }
    pod = pod_from_template(lws, worker_tpl if worker else leader_tpl, pod_name, labels)
    annotations = pod["metadata"].setdefault("annotations", {})
    annotations[SIZE_ANNOTATION] = str(size)
    if worker:
        annotations[LEADER_NAME_ANNOTATION] = leader_name
    pod["spec"]["hostname"] = pod_name
    pod["spec"]["subdomain"] = name
    env = [
        {"name": LEADER_ADDRESS_ENV, "value": leader_address(name, group, ns)},
        {"name": GROUP_SIZE_ENV, "value": str(size)},
        {"name": WORKER_INDEX_ENV, "value": str(worker)},
    ]
    _with_env(pod, env)
    return pod


def _label_int(pod: Obj, key: str) -> int:
    text = ((pod.get("metadata") or {}).get("labels") or {}).get(key, "")
    return int(text) if str(text).isdigit() else -1


def _restarted(pod: Obj) -> bool:
    """Deleted, failed, or a container restarted: ``handleRestartPolicy``'s trigger."""
    if (pod.get("metadata") or {}).get("deletionTimestamp") or pod_phase(pod) == "Failed":
        return True
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return any(_int(s.get("restartCount"), 0) > 0 for s in statuses)


def _groups(lws: Obj, pods: list[Obj]) -> dict[int, dict[int, Obj]]:
    """The set's pods by group index and worker index."""
    found: dict[int, dict[int, Obj]] = {}
    for pod in pods:
        if not owned_by(pod, lws):
            continue
        group, worker = _label_int(pod, GROUP_INDEX_LABEL), _label_int(pod, WORKER_INDEX_LABEL)
        if group >= 0 and worker >= 0:
            found.setdefault(group, {})[worker] = pod
    return found


def lws_plan(lws: Obj, pods: list[Obj], now: float) -> Plan:
    """What the LWS controllers do next for ``lws`` given the cluster's ``pods``."""
    replicas = _int((lws.get("spec") or {}).get("replicas"), 1)
    _, _, size = _templates(lws)
    plan = Plan()
    kept = ready = 0
    groups = _groups(lws, pods)
    for index in sorted(set(groups) | set(range(replicas))):
        members = groups.get(index)
        if not members:
            if index < replicas:  # a new group: the leader and its workers together
                plan.create.extend(group_pod(lws, index, w) for w in range(size))
            continue
        fate = _group_fate(lws, index, members, plan)
        kept += fate != "deleted"
        ready += fate == "ready"
    plan.status = _status(lws, replicas, kept, ready, now)
    return plan


def _group_fate(lws: Obj, index: int, members: dict[int, Obj], plan: Plan) -> str:
    """Add to ``plan`` what group ``index`` needs; "deleted" (created anew once its pods are
    gone: a pod name cannot be reused before), "ready" or "kept"."""
    spec = lws.get("spec") or {}
    recreate = (spec.get("leaderWorkerTemplate") or {}).get("restartPolicy") == RECREATE_GROUP
    key = revision_key(lws)
    _, _, size = _templates(lws)
    outdated = any(
        (p["metadata"].get("labels") or {}).get(REVISION_LABEL) != key for p in members.values()
    )
    restarted = [w for w, p in members.items() if _restarted(p)]
    leaderless = 0 not in members or (0 in restarted and not recreate)
    replicas = _int(spec.get("replicas"), 1)
    if index >= replicas or outdated or leaderless or (recreate and restarted):
        # The group goes (workers without a leader: the leader's deletion cascades).
        plan.delete.extend(p["metadata"]["name"] for p in members.values())
        return "deleted"
    for w in restarted:  # restartPolicy None: only that worker is replaced
        plan.delete.append(members.pop(w)["metadata"]["name"])
    plan.create.extend(group_pod(lws, index, w) for w in range(1, size) if w not in members)
    whole = len(members) == size and all(pod_ready(p) for p in members.values())
    return "ready" if whole else "kept"


def hpa_selector(lws: Obj) -> str:
    """``status.hpaPodSelector``: the leaders (``selector.String()`` sorts the keys)."""
    name = (lws.get("metadata") or {}).get("name")
    return f"{NAME_LABEL}={name},{WORKER_INDEX_LABEL}=0"


def _status(lws: Obj, replicas: int, created: int, ready: int, now: float) -> Obj:
    """Every group kept is of the current revision (outdated ones are recreated at once),
    so ``updatedReplicas`` is ``replicas`` and UpdateInProgress is never set True here."""
    old = lws.get("status") or {}
    generation = _int((lws.get("metadata") or {}).get("generation"), 1)
    true = "Available" if ready >= replicas else "Progressing"
    return {
        "replicas": created,
        "readyReplicas": ready,
        "updatedReplicas": created,
        "hpaPodSelector": hpa_selector(lws),
        "observedGeneration": generation,
        "conditions": _conditions(old.get("conditions") or [], true, generation, now),
    }


def _conditions(old: list[Obj], true: str, generation: int, now: float) -> list[Obj]:
    """``setConditions``: the new condition True; Available excludes the other two."""
    stamp = rfc3339(now)
    previous = {c.get("type"): c for c in old if isinstance(c, dict)}
    out: list[Obj] = []
    for ctype, (reason, message) in _CONDITIONS.items():
        prev = previous.get(ctype)
        if ctype == true:
            status = "True"
        elif prev is None:
            continue  # a condition appears only once it is True
        elif ctype == "Available" or true == "Available":
            status = "False"
        else:
            status = str(prev.get("status"))
        before = prev or {}
        kept = ctype != true and prev is not None  # a False condition keeps its words
        out.append(
            {
                "type": ctype,
                "status": status,
                "observedGeneration": generation,
                "lastTransitionTime": stamp
                if before.get("status") != status
                else before.get("lastTransitionTime", stamp),
                "reason": before.get("reason", reason) if kept else reason,
                "message": before.get("message", message) if kept else message,
            }
        )
    return out
