"""The canary phase, pass after pass, against the in-memory cluster with simulated metrics."""

from __future__ import annotations

import copy
import json
import math
import random
from typing import Any

import pytest
from rollout_world import World, serving_world, spec, summary

from vllm_operator.render import labels
from vllm_operator.render.labels import ABORT_ANNOTATION, PROMOTE_ANNOTATION
from vllm_operator.rollout.canary.metrics import parse_metrics
from vllm_operator.rollout.canary.phase import candidate_replicas
from vllm_operator.rollout.canary.route import ORIGINAL_ANNOTATION
from vllm_operator.sim.metrics import SimMetrics

STEPS = [{"weight": 10, "holdSeconds": 600}, {"weight": 50, "holdSeconds": 600}]
ANALYSIS = {
    "minRequests": 100,
    "maxErrorPercentPoints": 5,
    "maxExtensions": 1,
    "latency": [{"metric": "ttft", "percentile": "p95"}],
}


def canary_spec(mode: str = "balanced", **canary: Any) -> dict[str, Any]:
    doc = spec(mode=mode, gate={"baseline": {"mode": "stored"}})
    doc["rollout"] = {"canary": {"steps": STEPS, "analysis": ANALYSIS, **canary}}
    return doc


class Pods:
    """Server pods of both revisions, each with the simulator's own metrics families."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.metrics: dict[str, SimMetrics] = {}
        self.restarts: dict[str, int] = {}
        self.sidecar_restarts: dict[str, int] = {}  # a native sidecar beside the server
        self.last_reason: dict[str, str] = {}  # the server's lastState.terminated.reason
        self.unready: set[str] = set()
        world.metrics_pages = self.pages

    def sync(self) -> None:
        """A Ready pod for every replica each revision's Deployment asks for."""
        for rev in self.world.revisions():
            dep = self.world.deployment(rev)
            assert dep is not None
            for i in range(dep["spec"]["replicas"]):
                name = f"qwen--{rev}-{i}"
                if name not in self.metrics:
                    self.metrics[name] = _sim()
                    self.restarts[name] = 0
                self.world.objects[("Pod", name)] = {
                    "metadata": {
                        "name": name,
                        "uid": f"uid-{name}",
                        "labels": labels.server_selector("qwen", rev),
                    },
                    "status": self._status(name),
                }
        for key in [k for k in self.world.objects if k[0] == "Pod"]:
            rev = key[1].split("--")[1].rsplit("-", 1)[0]
            if rev not in self.world.revisions():
                del self.world.objects[key]
                self.metrics.pop(key[1], None)

    def _status(self, name: str) -> dict[str, Any]:
        server: dict[str, Any] = {
            "name": "vllm",
            "ready": name not in self.unready,
            "restartCount": self.restarts[name],
        }
        if name in self.last_reason:
            server["lastState"] = {
                "terminated": {"reason": self.last_reason[name], "exitCode": 137}
            }
        status: dict[str, Any] = {
            "phase": "Running",
            "podIP": "10.0.0.1",
            "containerStatuses": [server],
        }
        if name in self.sidecar_restarts:
            status["initContainerStatuses"] = [
                {"name": "proxy", "ready": True, "restartCount": self.sidecar_restarts[name]}
            ]
        return status

    def serve(
        self, revision: str, requests: int, *, ttft: float = 0.03, error_share: float = 0.0
    ) -> None:
        """``requests`` live requests on each of the revision's pods."""
        for name, sim in self.metrics.items():
            if f"--{revision}-" not in name:
                continue
            failed = round(requests * error_share)
            for i in range(requests):
                sim.ttft.observe(ttft * (1 + (i % 10) / 20))
                sim.e2e.observe(1.0)
                sim.tokens.observe_itl(0.02)
                sim.tokens.generation_tokens += 50
                sim.success("abort" if i < failed else "stop")

    def restart(self, name: str) -> None:
        self.metrics[name] = _sim()
        self.restarts[name] += 1

    def pages(self) -> dict[str, str]:
        return {n: m.exposition().decode() for n, m in self.metrics.items()}


def _sim() -> SimMetrics:
    return SimMetrics("m", running=lambda: 0.0, waiting=lambda: 0.0, kv_usage=lambda: 0.0)


def at_canary(
    doc: dict[str, Any] | None = None, route: dict[str, Any] | None = None
) -> tuple[World, Pods, str, str]:
    """A serving world whose new revision passed its gate and entered its canary."""
    w = serving_world(canary_spec())
    if route is not None:
        w.objects[("HTTPRoute", route["metadata"]["name"])] = copy.deepcopy(route)
    stable = w.serving()
    assert stable is not None
    w.set_spec(doc or canary_spec(mode="throughput"))
    w.start_benchmark()
    w.finish_job(summary())
    pods = Pods(w)
    w.step()  # the verdict: Passed; the canary starts
    candidate = next(r for r in w.revisions() if r != stable)
    assert w.status["phase"] == "Canary", w.status
    return w, pods, stable, candidate


def until_step_started(w: World, pods: Pods, limit: int = 6) -> None:
    for _ in range(limit):
        w.ready_all()
        pods.sync()
        w.step()
        if (w.status.get("canary") or {}).get("startedAt"):
            return
    raise AssertionError(f"step never started: {w.status}")


def shared(w: World) -> bool:
    return w.objects[("Service", "qwen")]["spec"]["selector"] == labels.canary_selector("qwen")


@pytest.mark.parametrize(
    ("weight", "stable", "cap", "wanted"),
    [(10, 2, 2, 1), (50, 2, 2, 2), (60, 2, 4, 3), (90, 1, 1, 1), (34, 2, 8, 2), (33, 2, 8, 1)],
)
def test_candidate_replicas_round_up_to_the_share(
    weight: int, stable: int, cap: int, wanted: int
) -> None:
    got = candidate_replicas(weight, stable, cap)
    assert got == wanted
    if got < cap:
        assert got / (got + stable) >= weight / 100 - 1e-9


def test_a_clean_canary_steps_through_and_promotes() -> None:
    w, pods, stable, candidate = at_canary()
    assert w.condition("Reconciling")["status"] == "True"
    # Shared at once: the gate's candidate pod is Ready and 1 pod is the step's share.
    assert shared(w)
    assert w.deployment(candidate)["status"]["readyReplicas"] == 1
    until_step_started(w, pods)
    assert shared(w)
    assert w.serving() is None  # the selector names no revision ...
    assert w.objects[("Service", "qwen")]["metadata"]["annotations"][
        labels.REVISION_ANNOTATION
    ] == (stable)  # ... and the annotation keeps the stable's name
    status = w.status["canary"]
    assert (status["step"], status["steps"], status["weight"]) == (1, 2, 10)
    assert status["sharePercent"] == pytest.approx(100 / 3, abs=0.01)  # 1 of 3 pods
    # Whole pods make a third, not 10%: the Ready message and the Event say both.
    assert "canary step 1/2 (10% asked, 33.3% in effect)" in w.condition("Ready")["message"]
    started = [e.message for p in w.plans for e in p.events if e.reason == "CanaryStepStarted"]
    assert "canary step 1/2 (10% asked, 33.3% in effect) started (" in started[-1]
    assert "33.33%" not in started[-1]  # the share in effect once, as the step names it
    pods.serve(candidate, 150)
    pods.serve(stable, 150)
    w.advance(599)
    w.step()
    assert w.status["canary"]["step"] == 1  # not due yet
    w.advance(1)
    w.step()
    assert "CanaryStepPassed" in w.events()
    assert w.status["canary"]["candidate"]["requests"] == 150
    until_step_started(w, pods)
    assert w.status["canary"]["step"] == 2
    assert w.deployment(candidate)["spec"]["replicas"] == 2  # 50% of 2 stable pods
    pods.serve(candidate, 150)
    pods.serve(stable, 150)
    w.advance(600)
    w.step()
    assert "CanaryPassed" in w.events()
    w.ready_all()
    w.settle()
    assert w.serving() == candidate
    assert w.status["phase"] == "Serving"
    assert "canary" not in w.status


def test_a_failing_error_share_sends_traffic_back_in_the_same_pass() -> None:
    w, pods, stable, candidate = at_canary()
    until_step_started(w, pods)
    pods.serve(candidate, 150, error_share=0.2)
    pods.serve(stable, 150)
    w.advance(600)
    p = w.step()
    assert w.status["lastGate"]["outcome"] == "Failed"
    # 10% asked of 2 stable pods is 1 candidate pod: a third of the traffic, and it says so.
    assert w.status["lastGate"]["reasons"][0].startswith(
        "canary step 1/2 (10% asked, 33.3% in effect) failed: error share"
    )
    assert "patch Service qwen" in p.kinds()
    assert w.serving() == stable  # back within this one pass
    assert [e.reason for e in p.events][:2] == ["CanaryFailed", "TrafficRestored"]
    assert w.deployment(candidate) is not None  # drained before it goes
    w.advance(5)
    w.settle()
    assert w.deployment(candidate) is None
    assert w.status["phase"] == "Degraded"


def test_a_ttft_regression_fails_at_step_two() -> None:
    w, pods, stable, candidate = at_canary()
    until_step_started(w, pods)
    pods.serve(candidate, 150)
    pods.serve(stable, 150)
    w.advance(600)
    w.step()
    until_step_started(w, pods)
    pods.serve(candidate, 150, ttft=0.5)  # tenfold
    pods.serve(stable, 150)
    w.advance(600)
    w.step()
    assert w.status["lastGate"]["reasons"][0].startswith("canary step 2/2 (50%) failed: TTFT p95")
    assert w.serving() == stable


def test_too_few_requests_extend_the_step_then_it_is_inconclusive_and_held() -> None:
    w, pods, stable, candidate = at_canary()
    until_step_started(w, pods)
    pods.serve(candidate, 50)
    pods.serve(stable, 50)
    w.advance(600)
    w.step()
    assert "CanaryStepExtended" in w.events()
    assert w.status["canary"]["extensions"] == 1
    assert shared(w)  # still live while extended
    w.advance(600)
    w.step()
    assert w.status["lastGate"]["outcome"] == "Inconclusive"
    assert w.serving() == stable
    w.settle()
    assert w.status["phase"] == "Holding"
    assert w.deployment(candidate) is not None  # held for a person, off the traffic


def test_a_restarted_stable_pod_loses_nothing_counted_before_its_restart() -> None:
    """Read every intervalSeconds: the restarted pod's 150 requests before its restart and
    120 after it are the 270 Prometheus' increase() counts (the old start/end delta saw
    120); its sibling counted 150 + 120 as well."""
    w, pods, stable, candidate = at_canary()
    until_step_started(w, pods)
    pods.serve(candidate, 270)
    pods.serve(stable, 150)
    w.advance(30)  # analysis.intervalSeconds (default 30): a read inside the step
    w.step()
    pods.restart(f"qwen--{stable}-0")
    pods.sync()
    pods.serve(stable, 120)
    w.advance(570)
    w.step()
    assert "CanaryStepPassed" in w.events()
    figures = w.status["canary"]["stable"]
    assert (figures["requests"], figures["restartedPods"]) == (540, 1)


def test_abort_mid_canary_restores_traffic_and_removes_the_candidate() -> None:
    w, pods, stable, candidate = at_canary()
    until_step_started(w, pods)
    w.annotate(ABORT_ANNOTATION, candidate)
    w.step()
    assert w.serving() == stable
    w.advance(5)
    w.settle()
    assert w.deployment(candidate) is None
    assert w.status["lastGate"]["decision"] == "AbortedByPerson"


def test_promote_mid_canary_skips_the_rest() -> None:
    w, pods, _stable, candidate = at_canary()
    until_step_started(w, pods)
    w.annotate(PROMOTE_ANNOTATION, candidate)
    w.step()
    w.ready_all()
    w.settle()
    assert w.serving() == candidate
    assert w.status["lastGate"]["decision"] == "PromotedByPerson"


def test_every_pass_of_a_canary_plans_the_same_again() -> None:
    """Restart safety: the state is the cluster's, so a second planner agrees."""
    w, pods, stable, candidate = at_canary()
    for _ in range(8):
        w.ready_all()
        pods.sync()
        pods.serve(candidate, 40)
        pods.serve(stable, 40)
        first = w.plan()
        again = w.plan()
        assert first.kinds() == again.kinds()
        assert first.status == again.status
        w.apply(first)
        w.advance(300)


def test_a_spec_change_mid_canary_takes_the_traffic_back() -> None:
    w, pods, stable, candidate = at_canary()
    until_step_started(w, pods)
    w.set_spec(canary_spec(mode="interactivity"))
    w.step()
    assert w.serving() == stable
    assert w.deployment(candidate) is not None  # not while new requests may still reach it
    w.step()
    assert w.deployment(candidate) is None  # abandoned: its Deployment goes


ROUTE = {
    "apiVersion": "gateway.networking.k8s.io/v1",
    "kind": "HTTPRoute",
    "metadata": {"name": "web", "namespace": "ml"},
    "spec": {
        "parentRefs": [{"name": "gw"}],
        "rules": [
            {"matches": [{"path": {"type": "PathPrefix", "value": "/v1"}}],
             "backendRefs": [{"name": "qwen", "port": 8000}]},
            {"backendRefs": [{"name": "other", "port": 80}]},
        ],
    },
}  # fmt: skip


def gateway_world() -> tuple[World, Pods, str, str]:
    doc = canary_spec(
        mode="throughput", traffic={"mode": "gatewayAPI", "httpRoute": {"name": "web"}}
    )
    w, pods, stable, candidate = at_canary(doc, route=ROUTE)
    return w, pods, stable, candidate


def backends(w: World) -> list[list[tuple[str, int]]]:
    route = w.objects[("HTTPRoute", "web")]
    return [
        [(ref["name"], ref.get("weight", 1)) for ref in rule["backendRefs"]]
        for rule in route["spec"]["rules"]
    ]


def assert_restored(w: World) -> None:
    """The route's rules as the user wrote them, byte for byte, and no trace of the canary."""
    route = w.objects[("HTTPRoute", "web")]
    assert json.dumps(route["spec"]["rules"]) == json.dumps(ROUTE["spec"]["rules"])
    assert ORIGINAL_ANNOTATION not in (route["metadata"].get("annotations") or {})


def test_gateway_api_weights_follow_the_steps_and_fall_back_on_failure() -> None:
    w, pods, stable, candidate = gateway_world()
    until_step_started(w, pods)
    assert backends(w) == [[("qwen", 90), ("qwen--candidate", 10)], [("other", 1)]]
    assert w.serving() == stable  # the Service is untouched in this mode
    assert w.status["canary"]["sharePercent"] == 10.0
    pods.serve(candidate, 150)
    pods.serve(stable, 150)
    w.advance(600)
    w.step()
    until_step_started(w, pods)
    assert backends(w)[0] == [("qwen", 50), ("qwen--candidate", 50)]
    pods.serve(candidate, 150, error_share=0.5)
    pods.serve(stable, 150)
    w.advance(600)
    p = w.step()
    assert "patch HTTPRoute web" in p.kinds()
    assert_restored(w)
    assert w.status["lastGate"]["reasons"][0].startswith("canary step 2/2 (50%) failed")
    w.advance(5)
    w.settle()
    assert w.deployment(candidate) is None


def test_gateway_api_route_back_on_the_service_when_promoted() -> None:
    w, pods, stable, candidate = gateway_world()
    for _ in range(2):
        until_step_started(w, pods)
        pods.serve(candidate, 150)
        pods.serve(stable, 150)
        w.advance(600)
        w.step()
    assert "CanaryPassed" in w.events()
    w.ready_all()
    pods.sync()
    w.settle()
    assert w.serving() == candidate
    assert_restored(w)


def test_gateway_api_without_the_route_waits_and_says_so() -> None:
    doc = canary_spec(
        mode="throughput", traffic={"mode": "gatewayAPI", "httpRoute": {"name": "web"}}
    )
    w, _pods, _stable, _candidate = at_canary(doc)
    assert "HTTPRoute web not found" in w.status["message"]


def test_counts_read_from_prometheus_are_judged_like_pages() -> None:
    """analysis.prometheus: the shell hands the planner PodCounts instead of page text; the
    same figures fail the same step, and the pods' restart counts still come from status."""
    doc = canary_spec(mode="throughput")
    doc["rollout"]["canary"]["analysis"] = {
        **ANALYSIS,
        "prometheus": {"url": "http://prometheus.monitoring:9090"},
    }
    w, pods, stable, candidate = at_canary(doc)
    w.metrics_pages = lambda: {n: parse_metrics(t) for n, t in pods.pages().items()}  # type: ignore[misc,dict-item]
    until_step_started(w, pods)
    pods.serve(candidate, 150, error_share=0.2)
    pods.serve(stable, 150)
    w.advance(600)
    w.step()
    assert w.status["lastGate"]["reasons"][0].startswith(
        "canary step 1/2 (10% asked, 33.3% in effect) failed: error share"
    )
    assert w.serving() == stable


def test_gateway_api_status_shows_the_share_of_the_routes_traffic_in_effect() -> None:
    shared_route = copy.deepcopy(ROUTE)
    shared_route["spec"]["rules"][0]["backendRefs"] = [
        {"name": "other-model", "port": 80, "weight": 1},
        {"name": "qwen", "port": 8000, "weight": 1},
    ]
    doc = canary_spec(
        mode="throughput", traffic={"mode": "gatewayAPI", "httpRoute": {"name": "web"}}
    )
    w, pods, _stable, _candidate = at_canary(doc, route=shared_route)
    until_step_started(w, pods)
    assert backends(w)[0] == [("other-model", 100), ("qwen", 90), ("qwen--candidate", 10)]
    assert w.status["canary"]["weight"] == 10
    assert w.status["canary"]["sharePercent"] == 5.0  # half the rule is the other model's


def _serve_random(pods: Pods, revision: str, per_pod: int, rng: random.Random) -> None:
    """``per_pod`` requests on each of the revision's pods, latencies drawn alike for both
    revisions (an identical candidate), 50 tokens each."""
    for name, sim in pods.metrics.items():
        if f"--{revision}-" not in name:
            continue
        for _ in range(per_pod):
            sim.ttft.observe(rng.lognormvariate(math.log(0.05), 0.4))
            sim.e2e.observe(rng.lognormvariate(math.log(1.0), 0.3))
            for _ in range(5):
                sim.tokens.observe_itl(rng.lognormvariate(math.log(0.02), 0.3))
            sim.tokens.generation_tokens += 50
            sim.success("stop")


@pytest.mark.parametrize("seed", range(10))
def test_gateway_api_at_10_percent_beside_4_stable_pods_passes_an_identical_candidate(
    seed: int,
) -> None:
    """Issue 39 item 5: one candidate pod at 10% carries 0.44x a stable pod's requests; its
    tokens/s per replica is judged against the stable's scaled by that, and the reasons say
    so (unscaled, the 56% 'drop' failed a healthy candidate)."""
    rng = random.Random(seed)
    analysis = {**ANALYSIS, "maxThroughputDropPercent": 20, "latency": [
        {"metric": m, "percentile": "p95"} for m in ("ttft", "itl", "e2e")]}  # fmt: skip
    traffic = {"mode": "gatewayAPI", "httpRoute": {"name": "web"}}
    w = serving_world({**canary_spec(mode="balanced"), "replicas": 4})
    w.objects[("HTTPRoute", "web")] = copy.deepcopy(ROUTE)
    stable = w.serving()
    doc = {**canary_spec(mode="throughput", analysis=analysis, traffic=traffic), "replicas": 4}
    w.set_spec(doc)
    w.start_benchmark()
    w.finish_job(summary())
    pods = Pods(w)
    w.step()
    candidate = next(r for r in w.revisions() if r != stable)
    until_step_started(w, pods)
    assert w.deployment(candidate)["spec"]["replicas"] == 1
    total = 2000
    _serve_random(pods, candidate, total // 10, rng)  # 10% on one pod
    _serve_random(pods, stable, total * 9 // 10 // 4, rng)  # 90% over four
    w.advance(600)
    w.step()
    assert "CanaryStepPassed" in w.events(), w.status.get("lastGate")
    judged = w.status["canary"]["lastJudgement"]
    assert any("a candidate pod gets 0.44x a stable pod's requests" in r for r in judged)
    assert any(r.startswith("tokens/s per replica") and "x 0.44 per-pod load" in r for r in judged)
