"""devcluster: an embedded Kubernetes API (kmock 0.8 + real API-server semantics).

Used by the integration tests and by ``vllm-operator demo``. No cluster, no network beyond
127.0.0.1. kopf, the ``kubernetes`` client and a real kubectl all talk to it.

Start it (own thread and event loop; port 0 picks a free port)::

    from vllm_operator.devcluster import DevCluster, OperatorThread

    with DevCluster(crds=["crds/vllmdeployments.yaml"]) as cluster:   # or .start()/.stop()
        cluster.url                                  # http://127.0.0.1:PORT
        path = cluster.write_kubeconfig(tmp / "kubeconfig")   # kubectl --kubeconfig path ...
        cluster.create({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "x", "namespace": "default"}, "data": {}})
        cluster.get("apps/v1", "deployments", "name", namespace="default")
        cluster.list("batch/v1", "jobs", "default", label_selector="app=x")
        cluster.patch("apps/v1", "deployments", "name", {"status": {...}}, subresource="status")
        cluster.replace(obj); cluster.delete("v1", "pods", "p", propagation="Background")
        cluster.wait_for(lambda: cluster.get(...)["status"].get("phase") == "Ready", timeout=5)
        cluster.history("v1", "services", "svc")      # every stored version, oldest first
        cluster.set_pod_log("default", "pod", "text") # what GET .../pods/pod/log returns
        cluster.server                                # the kmock.KubernetesEmulator subclass:
        cluster.server[kmock.resource("apps", "v1", "deployments"), "patch"] << 500  # faults

Errors come back as ``apierrors.ApiError`` (``.code``, ``.reason``), as a real server's
``Status``. Everything is created through the HTTP API; the helpers are thin clients.

Run a kopf operator against it (its own thread and loop; stop is fast)::

    registry = kopf.OperatorRegistry()
    @kopf.on.create("vllm.ai", "v1alpha1", "vllmdeployments", registry=registry)
    def created(**_): ...
    with OperatorThread(registry, cluster, settings=optional_hook, memo=...) as op:
        ...                                          # op.stop() on exit

In pytest (``tests/integration/conftest.py``): fixtures ``devcluster``, ``kubeconfig``
and ``run_operator(registry, **kwargs)``.

Semantics implemented (see ``semantics.py``/``lifecycle.py``): uid, global resourceVersion,
generation (spec changes), creationTimestamp, generateName, 201/404/409/422 Status bodies,
optimistic concurrency, status subresource, PUT, merge / strategic (as merge) / JSON patch,
no-op writes suppressed, finalizers, garbage collection by ownerReferences, namespace and
CRD cleanup, label/field selectors, watches resuming at ``resourceVersion``, CRDs served
on creation with printer columns and schema defaults, discovery and ``Table`` for kubectl.
"""

from .apierrors import ApiError
from .cluster import DevCluster
from .kopfrun import OperatorThread, fast_settings

__all__ = ["ApiError", "DevCluster", "OperatorThread", "fast_settings"]
