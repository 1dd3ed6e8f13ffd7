"""The twin of the stable revision: a zero-traffic copy measured beside a candidate.

A twin-mode gate compares the candidate with the stable revision measured in the same run,
on the same kind of node, in the same time window, instead of with figures stored from
another run (which rejected an identical revision on H200s). The twin is built from the
stable Deployment's pod template *as it runs in the cluster*: the spec already describes
the candidate, and the stable revision is whatever the serving Service selects.

Its pods carry ``component: twin`` in place of ``component: server``, so neither the serving
Service, the candidate Service nor the stable Deployment ever selects them; only the twin
Service does, for the benchmark. Pure: the operator adds ownerReferences.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from vllm_operator.render import labels, leaderworkerset
from vllm_operator.render.deployment import PORT_NAME, REVISION_HISTORY_LIMIT
from vllm_operator.render.names import twin_deployment_name, twin_service_name

DEFAULT_PORT = 8000


def template_port(template: Mapping[str, Any]) -> int:
    """The port the pod template's server listens on (its ``http`` port)."""
    spec = template.get("spec")
    containers = spec.get("containers") if isinstance(spec, Mapping) else None
    for container in containers if isinstance(containers, list) else []:
        ports = container.get("ports") if isinstance(container, Mapping) else None
        for port in ports if isinstance(ports, list) else []:
            if isinstance(port, Mapping) and port.get("name") == PORT_NAME:
                number = port.get("containerPort")
                if isinstance(number, int) and 0 < number < 65536:
                    return number
    return DEFAULT_PORT


def render_twin_deployment(
    name: str,
    namespace: str,
    revision: str,
    template: Mapping[str, Any],
    replicas: int,
) -> dict[str, Any]:
    """The twin Deployment of ``revision``, from the stable Deployment's pod ``template``."""
    pod_template = copy.deepcopy(dict(template))
    meta = pod_template.setdefault("metadata", {})
    pod_labels = {
        **{
            k: v
            for k, v in (meta.get("labels") or {}).items()
            if isinstance(k, str) and isinstance(v, str)
        },
        **labels.revision_labels(name, revision, labels.COMPONENT_TWIN),
    }
    meta["labels"] = pod_labels
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": twin_deployment_name(name, revision),
            "namespace": namespace,
            "labels": labels.revision_labels(name, revision, labels.COMPONENT_TWIN),
            "annotations": {labels.REVISION_ANNOTATION: revision},
        },
        "spec": {
            "replicas": replicas,
            "revisionHistoryLimit": REVISION_HISTORY_LIMIT,
            "selector": {"matchLabels": labels.twin_selector(name, revision)},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1},
            },
            "template": pod_template,
        },
    }


def render_twin_group(
    name: str,
    namespace: str,
    revision: str,
    group: Mapping[str, Any],
    replicas: int,
) -> dict[str, Any]:
    """The twin of a multi-node ``revision``: a LeaderWorkerSet from the stable set's
    ``leaderWorkerTemplate`` as it runs, its leader relabelled as the twin (the only pod the
    twin Service selects); the workers keep component ``worker``, which nothing selects."""
    lwt = copy.deepcopy(dict(group))
    leader = dict(lwt.get("leaderTemplate") or {})
    twin = render_twin_deployment(name, namespace, revision, leader, replicas)
    lwt["leaderTemplate"] = twin["spec"]["template"]
    return {
        "apiVersion": leaderworkerset.API_VERSION,
        "kind": leaderworkerset.KIND,
        "metadata": twin["metadata"],
        "spec": {
            "replicas": replicas,
            "startupPolicy": leaderworkerset.STARTUP_POLICY,
            "rolloutStrategy": {
                "type": "RollingUpdate",
                "rollingUpdateConfiguration": {"maxSurge": 0, "maxUnavailable": 1},
            },
            "leaderWorkerTemplate": lwt,
        },
    }


def render_twin_service(name: str, namespace: str, revision: str, port: int) -> dict[str, Any]:
    """The ClusterIP Service the benchmark measures the twin of ``revision`` through."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": twin_service_name(name),
            "namespace": namespace,
            "labels": labels.common_labels(name, labels.COMPONENT_TWIN),
            "annotations": {labels.REVISION_ANNOTATION: revision},
        },
        "spec": {
            "type": "ClusterIP",
            "selector": labels.twin_selector(name, revision),
            "ports": [
                {"name": PORT_NAME, "port": port, "targetPort": PORT_NAME, "protocol": "TCP"}
            ],
        },
    }


def twin_url(name: str, namespace: str, port: int) -> str:
    """The in-cluster URL of the twin Service."""
    return f"http://{twin_service_name(name)}.{namespace}.svc:{port}"
