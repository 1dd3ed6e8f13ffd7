"""An operator upgrade on the embedded cluster: reported, and rolled through the gate on request.

The stable revision is rewritten as an earlier operator would have left it (another hash,
a template without the container security context, the same spec digest) while the
operator is stopped; the restarted operator must keep it serving and say so, and roll the
update only once annotated, gating it like any candidate.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from vllm_operator.render.labels import REVISION_LABEL
from vllm_operator.rollout.upgrade import ROLL_ANNOTATION

from .harness import API, Rollout, resource

OLD = "0ld0ld0ld0"
SERVER_FIELDS = ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields")


def _pending(r: Rollout) -> dict[str, Any] | None:
    conditions = r.status().get("conditions") or []
    return next((c for c in conditions if c["type"] == "OperatorUpdatePending"), None)


def _as_rendered_by_an_older_operator(r: Rollout, current: str) -> None:
    cluster = r.cluster
    dep = cluster.get("apps/v1", "deployments", f"qwen--{current}")
    old = json.loads(json.dumps(dep).replace(current, OLD))
    old.pop("status", None)
    for field in SERVER_FIELDS:
        old["metadata"].pop(field, None)
    del old["spec"]["template"]["spec"]["containers"][0]["securityContext"]
    cluster.create(old)
    r.wait(
        lambda: (
            (cluster.get("apps/v1", "deployments", f"qwen--{OLD}").get("status") or {}).get(
                "readyReplicas"
            )
            == 1
        ),
        60,
        "the older revision Ready",
    )
    cluster.patch("v1", "services", "qwen", {"spec": {"selector": {REVISION_LABEL: OLD}}})
    cluster.delete("apps/v1", "deployments", f"qwen--{current}")
    status = json.loads(json.dumps(r.status()).replace(current, OLD))
    cluster.patch(API, "vllmdeployments", "qwen", {"status": status}, subresource="status")


@pytest.mark.slow
def test_operator_update_waits_for_the_annotation_then_is_gated(rollout: Rollout) -> None:
    rollout.apply(resource())
    new = str(rollout.wait_phase("Serving", timeout=60)["stable"]["revision"])
    rollout.stop_operator()
    _as_rendered_by_an_older_operator(rollout, new)
    rollout.start_operator()

    pending = rollout.wait(lambda: _pending(rollout), 30, "OperatorUpdatePending")
    assert pending["status"] == "True"
    assert pending["reason"] == "TemplateChanged"
    assert OLD in pending["message"]
    assert new in pending["message"]
    time.sleep(2.5)  # a window longer than a resync (2 s): nothing may roll in it
    assert rollout.names("apps/v1", "deployments") == [f"qwen--{OLD}"]
    assert rollout.names("batch/v1", "jobs") == []
    assert rollout.serving_revision() == OLD
    assert rollout.status()["phase"] == "Serving"

    rollout.annotate("qwen", ROLL_ANNOTATION, new)
    rollout.wait(
        lambda: rollout.serving_revision() == new and rollout.status().get("phase") == "Serving",
        90,
        "the operator update rolled",
    )
    st = rollout.status()
    assert st["lastGate"]["revision"] == new
    assert st["lastGate"]["outcome"] == "Passed"
    assert st["lastGate"]["decidedBy"] == "gate"
    assert _pending(rollout) is None
    rollout.wait(
        lambda: rollout.names("apps/v1", "deployments") == [f"qwen--{new}"], 30, "old retired"
    )
    reasons = [e["reason"] for e in rollout.cluster.list("v1", "events", "default")]
    assert "OperatorUpdatePending" in reasons
    assert "OperatorUpdateRolling" in reasons
