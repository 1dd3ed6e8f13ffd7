"""The reconcile reads watch caches: a resource at rest costs the API nothing.

Counted on the embedded API server's recorded requests, told apart by client: kopf's
watches (``kopf/...``) and the operator's own client (``OpenAPI-Generator/...``, the
``kubernetes`` package); the kubelet and this test use other clients.
"""

from __future__ import annotations

from typing import Any

import kmock

from .harness import Rollout, resource

OPERATOR_AGENTS = ("kopf/", "OpenAPI-Generator/")


def operator_requests(rollout: Rollout, after: set[int] | None = None) -> list[Any]:
    return [
        r
        for r in list(rollout.cluster.server)
        if str(r.headers.get("User-Agent", "")).startswith(OPERATOR_AGENTS)
        and (after is None or id(r) not in after)
    ]


def passes(rollout: Rollout) -> float:
    return rollout.prometheus.get_sample_value("vllm_operator_reconciliations_total") or 0.0


def test_a_resource_at_rest_is_reconciled_without_a_list_or_a_write(rollout: Rollout) -> None:
    rollout.apply(resource())
    rollout.wait_phase("Serving", gate="Passed", timeout=90)
    # Let the pass that wrote Serving finish its actions (the judged Job's delete).
    settled = passes(rollout) + 2
    rollout.wait(lambda: passes(rollout) >= settled, 30, "two passes after Serving")
    seen = list(rollout.cluster.server)  # kept alive: their ids stay unique
    before, start = {id(r) for r in seen}, passes(rollout)
    # The resync (every 2 s here) and the pods' readiness probes keep reconciles coming.
    rollout.wait(lambda: passes(rollout) >= start + 3, 30, "three more reconciles")
    new = operator_requests(rollout, before)
    lists = [r for r in new if r.action == kmock.action.LIST]
    reads = [r for r in new if r.action == kmock.action.FETCH]
    writes = [r for r in new if r.action not in (kmock.action.WATCH, kmock.action.FETCH)]
    assert lists == [], [str(r.url) for r in lists]
    assert reads == [], [str(r.url) for r in reads]
    assert writes == [], [(r.method, str(r.url)) for r in writes]
    # The check can see them: the operator's start listed every cached kind once.
    started = {
        r.resource.plural for r in operator_requests(rollout) if r.action == kmock.action.LIST
    }
    assert {"vllmdeployments", "deployments", "services", "jobs", "pods"} <= started
