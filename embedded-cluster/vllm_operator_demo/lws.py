"""LeaderWorkerSet's API on the embedded cluster, for `demo --multi-node`.

Why not the vendored CRD: kubernetes-sigs/lws v0.10.0's CRD is 1.3 MB of schema, kept in
tests/unit/render/crds/ where the render tests validate the operator's sets against it; the
demo ships in the devcluster distribution and needs only LWS's names and subresources (the
kubelet plays its controller: ``devcluster.lws_controller``).
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]

LWS_API = "leaderworkerset.x-k8s.io/v1"
LWS_PLURAL = "leaderworkersets"
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"


def lws_crd() -> Obj:
    """LeaderWorkerSet's API as the embedded cluster serves it for the demo.

    The names, scope, version and subresources (status; scale from ``spec.replicas`` to
    ``status.replicas`` with ``status.hpaPodSelector``) are those of kubernetes-sigs/lws
    v0.10.0's CRD (config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml); its
    1.3 MB schema is not shipped in the demo: this one keeps every field. The render tests
    validate the operator's sets against the full schema (tests/unit/render/crds/).
    """
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{LWS_PLURAL}.leaderworkerset.x-k8s.io"},
        "spec": {
            "group": "leaderworkerset.x-k8s.io",
            "names": {
                "kind": "LeaderWorkerSet",
                "listKind": "LeaderWorkerSetList",
                "plural": LWS_PLURAL,
                "singular": "leaderworkerset",
                "shortNames": ["lws"],
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                    "subresources": {
                        "status": {},
                        "scale": {
                            "labelSelectorPath": ".status.hpaPodSelector",
                            "specReplicasPath": ".spec.replicas",
                            "statusReplicasPath": ".status.replicas",
                        },
                    },
                }
            ],
        },
    }
