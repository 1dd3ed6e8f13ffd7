"""devcluster: an embedded Kubernetes API (kmock 0.8 + real API-server semantics).

A distribution of its own (``embedded-cluster/`` in the vllm-operator repository): the operator
package and its image do not carry it. Used by the integration tests and by the demo. No
cluster, no network beyond 127.0.0.1. kopf, the ``kubernetes`` client and a real kubectl
all talk to it.

Start it (own thread and event loop; port 0 picks a free port)::

    from devcluster import ApiError, DevCluster, OperatorThread

    with DevCluster(crds=["crds/vllm-operator.dev_vllmdeployments.yaml"]) as cluster:
        cluster.url                                   # http://127.0.0.1:PORT
        kc = cluster.write_kubeconfig(tmp / "kubeconfig")  # kubectl --kubeconfig kc get vllmd
        cluster.create({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "x", "namespace": "default"}, "data": {}})
        cluster.get("apps/v1", "deployments", "name", namespace="default")
        cluster.list("batch/v1", "jobs", "default", label_selector="app=x")
        cluster.patch("apps/v1", "deployments", "name", {"status": {...}}, subresource="status")
        cluster.patch("v1", "pods", "p", [{"op": "remove", "path": "/metadata/finalizers"}])
        cluster.replace(obj); cluster.delete("v1", "pods", "p", propagation="Background")
        cluster.exists("v1", "pods", "p")
        cluster.wait_for(lambda: cluster.get(...)["status"].get("phase") == "Ready", timeout=5)
        for event in cluster.watch("v1", "pods", "default", resource_version=rv, timeout=5): ...
        cluster.history("v1", "services", "svc")      # every stored version, oldest first
        cluster.set_pod_log("default", "pod", "text") # what GET .../pods/pod/log returns
        cluster.set_log_source(lambda ns, pod, container: text_or_None)  # or serve them live
        cluster.server[kmock.resource("apps", "v1", "deployments"), "patch"] << 500  # faults

    DevCluster(port=8001, clock=..., namespaces=("default", "llm"), seed=1, max_log=100_000)
    DevCluster(tls=True)   # HTTPS: url https://..., ca_pem, kubeconfigs carry the CA,
                           # cluster.http (httpx) verifies it (README: HTTPS)

``cluster.server`` is the ``kmock.KubernetesEmulator`` subclass: reactions declared on it
win over the semantics (fault injection); iterating ``cluster.server[criteria]`` yields
the recorded requests (the last 10 000).
Errors come back as ``ApiError`` (``.code``, ``.reason``, ``.message``) from the server's
``Status``. Creation always goes through the HTTP API; the helpers are thin clients.

Run a kopf operator against it (its own thread and loop, explicit login, standalone
peering, sub-second cancellation polling; stop takes well under a second)::

    registry = kopf.OperatorRegistry()
    @kopf.on.create("vllm-operator.dev", "v1alpha1", "vllmdeployments", registry=registry)
    def created(**_): ...
    with OperatorThread(registry, cluster, settings=hook, memo=memo, posting=True,
                        namespaces=["default"]) as operator:   # no namespaces: clusterwide
        ...                                                    # operator.stop() on exit

Run its pods (``devcluster.kubelet``): ``Kubelet(cluster, workdir, images=hooks)`` plays the
controllers, scheduler, kube-proxy and kubelet, each pod a host process. devcluster knows no
image: ``hooks`` (``devcluster.images.ImageHooks``) says which programs and environment an
image provides; the product supplies them (vllm-operator: ``vllm_operator_demo.pods``).

In pytest (``devcluster/testing.py``, a pytest11 plugin): fixtures ``devcluster``,
``kubeconfig`` and
``run_operator(registry, **OperatorThread kwargs)`` (stopped at teardown).

Semantics (``semantics.py``, ``lifecycle.py``, ``kinds.py``, ``schema.py``, ``validation/``,
``strategic.py``, ``selectors.py``): uid, one global resourceVersion, generation (spec
changes; content of spec-less kinds), creationTimestamp, generateName, 201/400/404/409/410/
415/422 ``Status`` bodies (422 with ``details.causes``, one per field, worded as the API
server words them: kubectl prints them), optimistic concurrency on PUT/PATCH, status
subresource (CRDs that declare it, pods, deployments, replicasets, jobs, services,
namespaces), PUT, merge / JSON patches, strategic-merge patches on built-in kinds (lists
merged by their Go merge keys: containers, env and volumes by name, ports by
containerPort, ...; ``$patch``, ``$retainKeys``, ``$setElementOrder``,
``$deleteFromPrimitiveList``), no-op writes keep the resourceVersion, finalizers, garbage
collection by owner uid (background, orphan; Jobs orphan by default), namespace and CRD
cleanup, label selectors, field selectors on the fields each kind indexes (a CRD's
``selectableFields`` included), watches resuming after ``resourceVersion`` (410 when
compacted, ``timeoutSeconds``), ``?dryRun``, CRDs served on creation with printer columns,
schema defaults, pruning and validation (types, bounds, enums, required, patterns,
``x-kubernetes-list-type`` map/set keys; ``?fieldValidation=Strict``, kubectl's default,
makes an unknown field a 400 instead of pruning it), built-in defaults and immutable
fields, built-in validation of Pods, pod templates, Deployments, ReplicaSets, Jobs,
Services, ConfigMaps, core Events, PodDisruptionBudgets, HorizontalPodAutoscalers and
HTTPRoutes (names per kind, labels, annotations, containers, ports, quantities, requests
<= limits, replicas, restart policies, tolerations, affinity; an unparsable quantity is a
400 decode error), discovery, OpenAPI v3 with the CRDs' schemas (``kubectl explain`` and
``kubectl apply``'s validation probe), ``Table`` for ``kubectl get``.

Refused as a server without them refuses: server-side apply (415; kubectl says
"Server-side apply not available"), strategic-merge patches on custom resources (415),
field selectors on unindexed fields (400 "field label not supported"), protobuf bodies
(415: kubectl's imperative ``create configmap``/``create deployment`` fail; ``create -f``
and ``apply`` send JSON).

Not implemented: admission webhooks, CEL rules (``x-kubernetes-validations``), ``format``
checks, field managers, unknown fields of built-in kinds (kept; a real server drops them
or, with ``Strict``, refuses them), RBAC/auth, aggregated discovery, OpenAPI schemas of
built-in kinds (``kubectl explain deployment`` fails; ``/openapi/v2`` is not served:
kubectl 1.27+ reads only v3), validation of rarely written built-in fields (security
contexts beyond user and group ids, probes beyond their ports and handler, volume
sources' own fields), real controllers (the kubelet modules play those).
"""

from typing import TYPE_CHECKING

from .apierrors import ApiError

if TYPE_CHECKING:
    from .cluster import DevCluster
    from .kopfrun import OperatorThread, fast_settings


def __getattr__(name: str) -> object:
    """``DevCluster``, ``OperatorThread`` and ``fast_settings``, imported on first use: a
    process that runs only a kubelet (``devcluster.kubelet``, a subpackage module, so this
    file runs first) then skips the API server, kopf and the kubernetes client, about 1 CPU
    second of imports per start (each rollout test starts one)."""
    if name == "DevCluster":
        from .cluster import DevCluster  # noqa: PLC0415

        return DevCluster
    if name in ("OperatorThread", "fast_settings"):
        from . import kopfrun  # noqa: PLC0415

        return getattr(kopfrun, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ApiError", "DevCluster", "OperatorThread", "fast_settings"]
