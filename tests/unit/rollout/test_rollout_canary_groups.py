"""The canary on multi-node revisions (LeaderWorkerSet groups), pass after pass.

A group is one replica: the step's share counts groups (the serving Service selects one
leader per group), only the leaders are read (the workers run ``--headless``: no HTTP, no
metrics page), and a group that loses a member during the step (LeaderWorkerSet recreates
it whole, under the same pod names) fails the step at once, as a crashed server does.
"""

from __future__ import annotations

import copy
import json
from datetime import timedelta
from typing import Any

from rollout_world import World, serving_world, spec, summary
from test_rollout_canary import ANALYSIS, ROUTE, STEPS, Pods, backends, shared

from builders import resource
from vllm_operator.api import parse_vllm_deployment
from vllm_operator.render import labels
from vllm_operator.rollout.canary.traffic import share_warnings
from vllm_operator.rollout.context import Settings
from vllm_operator.rollout.views import parse_time

TWO_NODES = {
    "engine": {
        "image": "vllm/vllm-openai:v0.22.0",
        "tensorParallelSize": 8,
        "extraArgs": ["--pipeline-parallel-size", "2"],
    },
    "resources": {"gpus": 8, "nodes": 2},
}
MULTI = Settings(bench_image="op:1", job_start_seconds=120, multi_node=True)


def group_spec(mode: str, **canary: Any) -> dict[str, Any]:
    doc = spec(mode=mode, **TWO_NODES, gate={"baseline": {"mode": "stored"}})
    doc["rollout"] = {"canary": {"steps": STEPS, "analysis": ANALYSIS, **canary}}
    return doc


class Groups(Pods):
    """The leaders (``Pods``' server pods, named as LWS names them: ``<set>-<group>``) and
    one worker per group (``<set>-<group>-1``), which no Service selects and no one reads."""

    def __init__(self, world: World) -> None:
        super().__init__(world)
        self.worker_restarts: dict[str, int] = {}
        self.started: dict[str, str] = {}  # the server's running.startedAt, per pod

    def sync(self) -> None:
        super().sync()  # leaders (and it drops the pods of revisions gone)
        for key in [k for k in self.world.objects if k[0] == "Pod"]:
            name = key[1]
            obj = self.world.objects[key]
            if name in self.started:
                status = obj["status"]["containerStatuses"][0]
                status["state"] = {"running": {"startedAt": self.started[name]}}
        for rev in self.world.revisions():
            dep = self.world.deployment(rev)
            assert dep is not None
            for group in range(dep["spec"]["replicas"]):
                name = f"qwen--{rev}-{group}-1"
                running = {"running": {"startedAt": self.started.get(name, "2026-01-01T00:00:00Z")}}
                self.world.objects[("Pod", name)] = {
                    "metadata": {
                        "name": name,
                        "uid": f"uid-{name}",
                        "labels": labels.revision_labels("qwen", rev, labels.COMPONENT_WORKER),
                    },
                    "status": {
                        "phase": "Running",
                        "podIP": "10.0.0.2",
                        "containerStatuses": [
                            {
                                "name": "vllm",
                                "ready": True,
                                "restartCount": self.worker_restarts.get(name, 0),
                                "state": running,
                            }
                        ],
                    },
                }


def at_group_canary(**canary: Any) -> tuple[World, Groups, str, str]:
    """Two stable groups serving; a new revision's group passed its gate, in its canary."""
    w = serving_world(group_spec("balanced", **canary), MULTI)
    w.objects[("HTTPRoute", "web")] = copy.deepcopy(ROUTE)
    stable = w.serving()
    assert stable is not None
    w.set_spec(group_spec("throughput", **canary))
    w.start_benchmark()
    w.finish_job(summary())
    pods = Groups(w)
    w.step()
    candidate = next(r for r in w.revisions() if r != stable)
    assert w.status["phase"] == "Canary", w.status
    assert ("LeaderWorkerSet", f"qwen--{candidate}") in w.objects
    return w, pods, stable, candidate


def started(w: World, pods: Groups, limit: int = 6) -> None:
    for _ in range(limit):
        w.ready_all()
        pods.sync()
        w.step()
        if (w.status.get("canary") or {}).get("startedAt"):
            return
    raise AssertionError(f"step never started: {w.status}")


def test_a_clean_canary_counts_groups_reads_leaders_and_promotes() -> None:
    w, pods, stable, candidate = at_group_canary()
    started(w, pods)
    assert shared(w)  # the serving Service selects the leaders of both revisions
    status = w.status["canary"]
    # 10% asked of 2 stable groups: 1 candidate group, a third of the groups.
    assert w.deployment(candidate)["spec"]["replicas"] == 1
    assert status["sharePercent"] == round(100 / 3, 2)
    events = [e.message for p in w.plans for e in p.events if e.reason == "CanaryStepStarted"]
    assert "(1 candidate and 2 stable groups behind the Service)" in events[-1]
    record = json.loads(
        w.deployment(candidate)["metadata"]["annotations"][labels.CANARY_ANNOTATION]
    )
    leaders = {f"qwen--{candidate}-0", f"qwen--{stable}-0", f"qwen--{stable}-1"}
    assert set(record["counts"]) == leaders  # the leaders only: no worker read
    pods.serve(candidate, 150)
    pods.serve(stable, 150)
    w.advance(600)
    w.step()
    assert "CanaryStepPassed" in w.events()
    started(w, pods)
    assert w.deployment(candidate)["spec"]["replicas"] == 2  # 50% of 2 groups: 2 groups
    pods.serve(candidate, 150)
    pods.serve(stable, 150)
    w.advance(600)
    w.step()
    assert "CanaryPassed" in w.events()
    w.ready_all()
    w.settle()
    assert w.serving() == candidate
    assert w.status["phase"] == "Serving"


def _later(w: World, seconds: float) -> str:
    when = parse_time(w.status["canary"]["startedAt"])
    assert when is not None
    return (when + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _failed_at_once(w: World, stable: str) -> str:
    gate = w.status["lastGate"]
    assert gate["outcome"] == "Failed", gate
    assert w.serving() == stable  # traffic back on the stable group in the same pass
    assert not shared(w)
    assert w.deployment(stable)["spec"]["replicas"] == 2  # the stable untouched
    return str(gate["reasons"][0])


def test_a_worker_lost_mid_step_fails_the_canary_at_once() -> None:
    w, pods, stable, candidate = at_group_canary()
    started(w, pods)
    pods.serve(candidate, 50)
    pods.worker_restarts[f"qwen--{candidate}-0-1"] = 1  # its vLLM died: the group goes
    pods.sync()
    w.advance(1)  # long before the step is due
    w.step()
    reason = _failed_at_once(w, stable)
    assert "failed: candidate worker" in reason, reason
    assert "its group is recreated" in reason


def test_a_group_recreated_between_two_passes_fails_the_canary() -> None:
    """Same pod names, restart counts 0: only the servers' start times tell."""
    w, pods, stable, candidate = at_group_canary()
    started(w, pods)
    leader = f"qwen--{candidate}-0"
    pods.serve(candidate, 50)
    pods.restarts[leader] = 0
    pods.started[leader] = pods.started[f"{leader}-1"] = _later(w, 2)
    w.advance(3)
    pods.sync()
    w.step()
    reason = _failed_at_once(w, stable)
    assert f"candidate pod {leader}: started after the step began" in reason, reason


def test_a_leader_gone_mid_step_fails_the_canary() -> None:
    w, pods, stable, candidate = at_group_canary()
    started(w, pods)
    leader = f"qwen--{candidate}-0"
    pods.sync()
    del w.objects[("Pod", leader)]
    del w.objects[("Pod", f"{leader}-1")]
    w.advance(1)
    w.step()
    assert f"candidate leader {leader} is gone" in _failed_at_once(w, stable)


def test_gateway_api_sends_the_steps_share_to_the_candidate_leaders_service() -> None:
    w, pods, stable, candidate = at_group_canary(
        traffic={"mode": "gatewayAPI", "httpRoute": {"name": "web"}}
    )
    started(w, pods)
    assert backends(w)[0] == [("qwen", 90), ("qwen--candidate", 10)]
    assert w.serving() == stable  # the serving Service keeps selecting the stable leaders
    # The route's candidate backend selects the candidate's leader, never a worker.
    selector = w.objects[("Service", "qwen--candidate")]["spec"]["selector"]
    lws = w.objects[("LeaderWorkerSet", f"qwen--{candidate}")]["spec"]["leaderWorkerTemplate"]
    leader = lws["leaderTemplate"]["metadata"]["labels"]
    worker = lws["workerTemplate"]["metadata"]["labels"]
    assert all(leader.get(k) == v for k, v in selector.items())
    assert not all(worker.get(k) == v for k, v in selector.items())
    pods.serve(candidate, 150)
    pods.serve(stable, 150)
    w.advance(600)
    w.step()
    assert "CanaryStepPassed" in w.events()


def test_render_warns_in_groups_when_whole_groups_cannot_make_a_weight() -> None:
    doc = resource(group_spec("throughput"))
    (warning,) = share_warnings(parse_vllm_deployment(doc))  # 50% of 2 groups is whole
    assert warning == (
        "rollout.canary.steps[0]: weight 10% cannot be made of whole replicas beside 2 stable "
        "group(s): 1 candidate group(s) get 33.3% of the serving traffic (more replicas, or "
        "traffic.mode gatewayAPI, make it closer)"
    )
