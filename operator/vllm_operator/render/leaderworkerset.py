"""The LeaderWorkerSet of one multi-node revision: a group of pods per replica. Pure.

A model that outgrows one node (``spec.resources.nodes`` > 1) runs as one vLLM spread over
a group of pods, and Kubernetes' LeaderWorkerSet (``leaderworkerset.x-k8s.io/v1``,
kubernetes-sigs/lws; fields as of v0.10.0) keeps such groups: one replica is one group,
created, scaled and restarted whole. The pods are the one-node pod of
``render.deployment.pod_template`` (same image, entrypoint with its library-path fix, env,
volumes, ``/dev/shm``, security context, scheduling), with:

- **leader** (worker index 0): vLLM's API server, the only pod any Service selects; its
  arguments end with the group's (``engine.multinode``); its startup probe allows the
  warm-up of one node plus ``GROUP_JOIN_SECONDS``, since it listens only once every worker
  has joined.
- **workers**: the same ``vllm serve`` with ``--headless`` (no API server, so no port and no
  HTTP probes) and component ``worker``, so neither the serving nor the candidate Service
  selects them. A worker whose vLLM dies exits, and the group is recreated (below).
- **Ray groups** (releases before native multi-node, ``engine.ray_group``): the leader's
  command starts the Ray head and waits for the group before ``vllm serve ...
  --distributed-executor-backend ray`` (group size in ``VLLMOP_RAY_NODES``); a worker's
  command joins the head at ``$(LWS_LEADER_ADDRESS)`` (its only argument) and runs no vLLM
  of its own: the head's vLLM starts its workers there through Ray.

Settings of the set itself, and why:

- ``restartPolicy: RecreateGroupOnPodRestart``: a vLLM group cannot lose a member. The
  leader's engine fails when a worker's process goes (its torch.distributed peers and the
  executor's worker monitor end it: ``MultiprocExecutor`` in vllm/v1/executor/
  multiproc_executor.py, 0.11.1 and 0.22.0), and a restarted worker cannot rejoin a running
  group; so a restart of any pod recreates all of them.
- ``startupPolicy: LeaderCreated``: the workers start with the leader. ``LeaderReady`` would
  deadlock: the leader becomes Ready only after the workers joined.
- ``rolloutStrategy`` RollingUpdate with ``maxSurge`` 0 as for Deployments: a revision's set
  is never changed in place anyway (a new revision is a new set), and a surge would need a
  spare group of GPUs.
"""

from __future__ import annotations

import copy
from typing import Any

from vllm_operator.api.resource import VLLMDeployment
from vllm_operator.api.spec import VLLMDeploymentSpec
from vllm_operator.engine import multinode, probes, ray_group
from vllm_operator.engine.policy import LaunchPlan
from vllm_operator.errors import SpecErrors
from vllm_operator.render import labels
from vllm_operator.render.deployment import kube_literal, pod_template
from vllm_operator.render.identity import with_identity
from vllm_operator.render.names import deployment_name
from vllm_operator.render.validate import object_errors

API_VERSION = "leaderworkerset.x-k8s.io/v1"
KIND = "LeaderWorkerSet"
RESTART_POLICY = "RecreateGroupOnPodRestart"
STARTUP_POLICY = "LeaderCreated"
# LeaderWorkerSet's ExclusiveKeyAnnotationKey (kubernetes-sigs/lws
# api/leaderworkerset/v1/leaderworkerset_types.go, commit 024af084): its value is a node label
# key, and LWS's pod webhook gives every pod of a group an affinity to the other pods of its
# group and an anti-affinity to other groups on that key: one group per topology domain.
EXCLUSIVE_TOPOLOGY_ANNOTATION = "leaderworkerset.sigs.k8s.io/exclusive-topology"
_PROBES = ("startupProbe", "readinessProbe", "livenessProbe")


def _group(launch: LaunchPlan) -> multinode.GroupLaunch:
    if launch.group is None:
        raise ValueError("a LeaderWorkerSet is rendered only for spec.resources.nodes > 1")
    return launch.group


def group_templates(spec: VLLMDeploymentSpec, launch: LaunchPlan) -> dict[str, dict[str, Any]]:
    """``leaderTemplate`` and ``workerTemplate`` without identity, keyed as in the set."""
    group = _group(launch)
    serve = [kube_literal(arg) for arg in launch.args]
    leader = pod_template(spec, launch)
    container = leader["spec"]["containers"][0]
    container["args"] = [*serve, *group.leader_args]
    budget = spec.probes.warmup_budget_seconds or probes.default_warmup_budget(launch.compiled)
    container.update(
        probes.probes(spec.service.port, launch.compiled, budget + multinode.GROUP_JOIN_SECONDS)
    )
    if group.backend == multinode.RAY:
        container["command"] = ray_group.leader_command()
        container["env"].append({"name": ray_group.NODES_ENV, "value": str(group.nodes)})
    worker = copy.deepcopy(leader)
    worker["metadata"]["labels"][labels.COMPONENT_LABEL] = labels.COMPONENT_WORKER
    container = worker["spec"]["containers"][0]
    container["args"] = [*serve, *group.worker_args]
    if group.backend == multinode.RAY:
        container["command"] = ray_group.worker_command()
        container["args"] = list(group.worker_args)
    for key in (*_PROBES, "ports"):
        container.pop(key, None)
    return {"leaderTemplate": leader, "workerTemplate": worker}


def set_annotations(spec: VLLMDeploymentSpec) -> dict[str, str]:
    """What the set's own annotations add from the spec: the exclusive topology, if any.

    Part of the revision (``render.revision``): LWS reads it when it creates the pods, and a
    revision's set is never changed in place, so a new key must make a new revision.
    """
    key = spec.resources.group_topology_key
    return {} if key is None else {EXCLUSIVE_TOPOLOGY_ANNOTATION: key}


def render_leaderworkerset(
    vd: VLLMDeployment, launch: LaunchPlan, revision: str, replicas: int
) -> dict[str, Any]:
    """The LeaderWorkerSet running ``revision`` of ``vd`` as ``replicas`` groups.

    The counterpart of ``render_deployment`` for ``spec.resources.nodes`` > 1, with the same
    name, labels and annotations, so everything that finds a revision's object by them finds
    this one; ``revision`` is ``revision_hash(vd.spec, launch)``, the hash of both templates.
    """
    errors = object_errors(vd)
    if errors:
        raise SpecErrors(errors)
    name = vd.metadata.name
    group = _group(launch)
    templates = {
        key: with_identity(template, name, revision)
        for key, template in group_templates(vd.spec, launch).items()
    }
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": deployment_name(name, revision),
            "namespace": vd.metadata.namespace,
            "labels": labels.revision_labels(name, revision),
            "annotations": {
                labels.REVISION_ANNOTATION: revision,
                labels.LAUNCH_PLAN_ANNOTATION: launch.record().to_annotation(),
                **set_annotations(vd.spec),
            },
        },
        "spec": {
            "replicas": replicas,
            "startupPolicy": STARTUP_POLICY,
            "rolloutStrategy": {
                "type": "RollingUpdate",
                "rollingUpdateConfiguration": {"maxSurge": 0, "maxUnavailable": 1},
            },
            "leaderWorkerTemplate": {
                "size": group.nodes,
                "restartPolicy": RESTART_POLICY,
                **templates,
            },
        },
    }
