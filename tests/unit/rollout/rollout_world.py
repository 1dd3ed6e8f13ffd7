"""A tiny in-memory cluster for planner tests: applies plans and plays the controllers.

Not an API server: just enough to run the planner pass after pass (create-if-absent,
merge patch, delete) and to let a test say "the candidate is Ready" or "the Job finished
with this summary". Integration tests run the real thing against DevCluster.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from builders import minimal_spec, resource
from vllm_operator.api.summary import BenchSummary, PairedBaseline, Placement, RunIdentity
from vllm_operator.render import labels
from vllm_operator.rollout import (
    Create,
    Delete,
    Patch,
    Plan,
    Settings,
    observe,
    plan,
)
from vllm_operator.rollout.canary import phase as canary
from vllm_operator.rollout.canary import reads as canary_reads
from vllm_operator.rollout.preview import apply_merge_patch
from vllm_operator.rollout.views import holder, owned_by

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


merge = apply_merge_patch  # the planner's patches land as the API server merges them


def spec(
    image: str = "vllm/vllm-openai:v0.17.0",
    mode: str = "throughput",
    **extra: Any,
) -> dict[str, Any]:
    doc = {**minimal_spec(image=image, performanceMode=mode), "replicas": 2}
    return merge(doc, extra)


def summary(
    *,
    median_ms: float = 900.0,
    tokens: float = 1000.0,
    passed: int = 13,
    total: int = 13,
) -> BenchSummary:
    return BenchSummary.model_validate(
        {
            "model": "Qwen/Qwen3-8B",
            "latency": [
                {
                    "prompt_class": c,
                    "requests": 5,
                    "median_ms": median_ms * f,
                    "ttft_ms": 50.0,
                    "output_tokens": 64,
                    "e2e_tokens_per_second": 70.0,
                    "decode_tokens_per_second": 75.0,
                }
                for c, f in (("short", 0.5), ("medium", 1.0), ("long", 2.0))
            ],
            "concurrency": [
                {
                    "concurrency": n,
                    "aggregate_tokens_per_second": tokens * n,
                    "requests_per_second": n * 1.0,
                    "requests": n * 4,
                }
                for n in (1, 2, 4, 8)
            ],
            "quality": {
                "suite": "default",
                "passed": passed,
                "total": total,
                "failed": [f"t{i}" for i in range(total - passed)],
            },
        }
    )


def paired(result: BenchSummary, baseline: BenchSummary) -> BenchSummary:
    """``result`` with ``baseline``'s figures as the baseline measured in the same run."""
    return result.model_copy(
        update={
            "paired_baseline": PairedBaseline(
                latency=baseline.latency,
                concurrency=baseline.concurrency,
                quality=baseline.quality,
                errors=baseline.errors,
                placement=baseline.placement or Placement(),
            )
        }
    )


# What a revision runs as: a Deployment, or a LeaderWorkerSet for a multi-node revision.
REVISION_KINDS = ("Deployment", "LeaderWorkerSet")


class World:
    """One VLLMDeployment and its children, in memory."""

    def __init__(self, spec_doc: dict[str, Any], settings: Settings | None = None) -> None:
        self.now = T0
        self.settings = settings or Settings(bench_image="op:1", job_start_seconds=120)
        self.body = resource(spec_doc, namespace="ml", uid="uid-1", generation=1, annotations={})
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.logs: dict[str, str] = {}
        self.progress: dict[str, dict[str, Any]] = {}  # Job -> the newest progress event
        self.plans: list[Plan] = []
        self.selector_changes: list[tuple[str, int]] = []  # (revision, ready at the switch)
        self.node_gpu: dict[str, str] = {}  # what the shell read from Nodes
        # Pod -> its /metrics page now, for a canary step (what the shell would read).
        self.metrics_pages: Callable[[], dict[str, str]] | None = None
        self.scraped = 0  # passes that read pages
        self.groups_served = True  # API discovery: the LeaderWorkerSet CRD is installed

    # -- the operator side -------------------------------------------------------------
    def plan(self) -> Plan:
        """What the shell does: observe the owned children, plan, and plan again knowing
        who holds a name the first plan would create (handlers/reconcile.py)."""
        objs = self.objects
        uid = self.body["metadata"]["uid"]

        def children(kind: str) -> list[dict[str, Any]]:
            return [o for (k, _), o in objs.items() if k == kind and owned_by(uid, o)]

        observed = observe(
            copy.deepcopy(self.body),
            deployments=children("Deployment") + children("LeaderWorkerSet"),
            services=children("Service"),
            jobs=children("Job"),
            pods=[o for (k, _), o in objs.items() if k == "Pod"],
            logs=self.logs,
            progress=self.progress,
            node_gpu=self.node_gpu,
            autoscalers=children("HorizontalPodAutoscaler") + children("ScaledObject"),
            budgets=children("PodDisruptionBudget"),
        )
        observed = dataclasses.replace(observed, groups_served=self.groups_served)
        route = canary_reads.route_to_read(observed)
        if route is not None and ("HTTPRoute", route) in objs:  # the user's, not owned
            observed = dataclasses.replace(
                observed, routes={route: copy.deepcopy(objs[("HTTPRoute", route)])}
            )
        targets = {pod.name for pod in canary.scrape_targets(observed, self.now)}
        if targets and self.metrics_pages is not None:
            self.scraped += 1
            pages = {k: v for k, v in self.metrics_pages().items() if k in targets}
            observed = dataclasses.replace(observed, scrapes=pages)
        p = plan(observed, self.now, self.settings)
        foreign = {
            (a.kind, a.name): holder(objs[(a.kind, a.name)])
            for a in p.actions
            if isinstance(a, Create)
            and (a.kind, a.name) in objs
            and not owned_by(uid, objs[(a.kind, a.name)])
        }
        if foreign:
            p = plan(dataclasses.replace(observed, foreign=foreign), self.now, self.settings)
        return p

    def squat(self, kind: str, name: str, owner: dict[str, Any] | None = None) -> None:
        """Someone else's object at ``name`` (``owner``: its controller ownerReference)."""
        meta: dict[str, Any] = {"name": name, "namespace": "ml", "uid": f"uid-foreign-{name}"}
        if owner is not None:
            meta["ownerReferences"] = [{**owner, "controller": True}]
        spec: dict[str, Any] = {"selector": {"app": "other"}, "type": "ClusterIP", "ports": []}
        self.objects[(kind, name)] = {"metadata": meta, "spec": spec}

    def apply(self, p: Plan) -> None:
        self.body["status"] = p.status.to_wire()
        for key, value in p.annotations.items():
            annotations = self.body["metadata"].setdefault("annotations", {})
            if value is None:
                annotations.pop(key, None)
            else:
                annotations[key] = value
        for action in p.actions:
            if isinstance(action, Create):
                key = (action.kind, action.name)
                if key not in self.objects:
                    obj = copy.deepcopy(dict(action.manifest))
                    obj["metadata"]["creationTimestamp"] = self.now.strftime("%Y-%m-%dT%H:%M:%SZ")
                    obj["metadata"]["uid"] = f"uid-{action.kind.lower()}-{action.name}"
                    self.objects[key] = obj
                    self._selector_changed(action.kind, action.name)
            elif isinstance(action, Patch):
                key = (action.kind, action.name)
                assert key in self.objects, f"patch of a missing {key}"
                self.objects[key] = merge(self.objects[key], dict(action.patch))
                self._selector_changed(action.kind, action.name)
            elif isinstance(action, Delete):
                self.objects.pop((action.kind, action.name), None)
                if action.kind == "Job":
                    for k in [
                        k
                        for k, o in self.objects.items()
                        if k[0] == "Pod" and self._job_of(o) == action.name
                    ]:
                        del self.objects[k]
        self.plans.append(p)

    def step(self) -> Plan:
        p = self.plan()
        self.apply(p)
        return p

    def settle(self, limit: int = 10) -> Plan:
        """Plan and apply until a pass has no actions (a fixed point)."""
        p = self.step()
        for _ in range(limit):
            if not p.actions and not p.annotations:
                return p
            p = self.step()
        raise AssertionError(f"no fixed point: {p.kinds()}")

    # -- the cluster side ----------------------------------------------------------------
    def _job_of(self, obj: dict[str, Any]) -> str | None:
        return obj["metadata"].get("labels", {}).get(f"{labels.DOMAIN}/job")

    def _selector_changed(self, kind: str, name: str) -> None:
        if kind != "Service" or name != "qwen":
            return
        rev = self.objects[(kind, name)]["spec"]["selector"].get(labels.REVISION_LABEL)
        if rev is None:  # a canary's shared selector: both revisions
            return
        dep = self.deployment(rev)
        ready = dep.get("status", {}).get("readyReplicas", 0) if dep else 0
        if not self.selector_changes or self.selector_changes[-1][0] != rev:
            self.selector_changes.append((rev, ready))

    def set_spec(self, spec_doc: dict[str, Any]) -> None:
        self.body["spec"] = spec_doc
        self.body["metadata"]["generation"] += 1

    def annotate(self, key: str, value: str | None) -> None:
        annotations = self.body["metadata"].setdefault("annotations", {})
        if value is None:
            annotations.pop(key, None)
        else:
            annotations[key] = value

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    def kinds(self, kind: str) -> list[str]:
        return sorted(n for k, n in self.objects if k == kind)

    @staticmethod
    def _is_twin(obj: dict[str, Any]) -> bool:
        return obj["metadata"]["labels"].get(labels.COMPONENT_LABEL) == labels.COMPONENT_TWIN

    def deployment(self, revision: str) -> dict[str, Any] | None:
        for (k, _), o in self.objects.items():
            if (
                k in REVISION_KINDS
                and not self._is_twin(o)
                and o["metadata"]["labels"][labels.REVISION_LABEL] == revision
            ):
                return o
        return None

    def revisions(self) -> list[str]:
        """Revisions with a Deployment of their own (twins not included)."""
        return sorted(
            o["metadata"]["labels"][labels.REVISION_LABEL]
            for (k, _), o in self.objects.items()
            if k in REVISION_KINDS and not self._is_twin(o)
        )

    def twins(self) -> list[str]:
        """Revisions that have a twin Deployment."""
        return sorted(
            o["metadata"]["labels"][labels.REVISION_LABEL]
            for (k, _), o in self.objects.items()
            if k in REVISION_KINDS and self._is_twin(o)
        )

    def serving(self) -> str | None:
        svc = self.objects.get(("Service", "qwen"))
        return svc["spec"]["selector"].get(labels.REVISION_LABEL) if svc else None

    def ready_all(self) -> None:
        """Every Deployment has all its replicas Ready (the kubelet did its job)."""
        for (k, _), o in self.objects.items():
            if k in REVISION_KINDS:
                o["status"] = {"readyReplicas": o["spec"]["replicas"]}

    def ready(self, revision: str, count: int) -> None:
        dep = self.deployment(revision)
        assert dep is not None
        dep["status"] = {"readyReplicas": count}

    def job(self) -> dict[str, Any]:
        jobs = [o for (k, _), o in self.objects.items() if k == "Job"]
        assert len(jobs) == 1, [j["metadata"]["name"] for j in jobs]
        return jobs[0]

    def add_pod(
        self,
        name: str,
        pod_labels: dict[str, str],
        status: dict[str, Any],
        owner_uid: str | None = None,
    ) -> None:
        meta: dict[str, Any] = {"name": name, "labels": pod_labels}
        if owner_uid is not None:
            meta["ownerReferences"] = [{"kind": "Job", "uid": owner_uid, "controller": True}]
        self.objects[("Pod", name)] = {"metadata": meta, "status": status}

    def finish_job(
        self,
        result: BenchSummary | None,
        *,
        exit_code: int = 0,
        in_log: bool = False,
        failed_reason: str | None = None,
        identity: RunIdentity | str | None = "own",
        signal: int | None = None,
        reason: str | None = None,
        baseline: BenchSummary | None = None,
        pair: bool = True,
    ) -> None:
        """The Job's pod ends with ``exit_code`` after writing ``result``, as the bench does:
        stamped with the Job's identity (``identity="own"``) and carrying the bench's own
        verdict for that exit code (0 Passed, 1 Failed) unless ``result`` sets one."""
        job = self.job()
        name = job["metadata"]["name"]
        twin_job = "--baseline-url" in self.job_args()
        if result is not None and pair and twin_job and result.paired_baseline is None:
            # A twin-mode Job measures the twin too: by default as fast as the candidate.
            result = paired(result, baseline or result)
        if result is not None:
            if identity == "own":
                meta = job["metadata"]
                identity = RunIdentity(
                    job=name,
                    revision=meta["labels"][labels.REVISION_LABEL],
                    attempt=int(meta["annotations"][f"{labels.DOMAIN}/attempt"]),
                )
            assert not isinstance(identity, str)
            own = result.verdict or {0: "Passed", 1: "Failed"}.get(exit_code, "Error")
            result = result.model_copy(update={"identity": identity, "verdict": own})
        message = json.dumps(result.to_wire()) if result is not None else ""
        terminated: dict[str, Any] = {
            "exitCode": exit_code,
            "reason": reason or ("Completed" if exit_code == 0 else "Error"),
        }
        if signal is not None:
            terminated["signal"] = signal
        if message and not in_log:
            terminated["message"] = message
        if in_log and message:
            self.logs[name] = "progress line\n" + message + "\n"
        self.add_pod(
            f"{name}-pod",
            dict(job["spec"]["template"]["metadata"]["labels"]),
            {
                "phase": "Succeeded" if exit_code == 0 else "Failed",
                "containerStatuses": [{"name": "bench", "state": {"terminated": terminated}}],
            },
            owner_uid=job["metadata"]["uid"],
        )
        if exit_code == 0 and failed_reason is None:
            job["status"] = {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}
        else:
            job["status"] = {
                "failed": 1,
                "conditions": [
                    {
                        "type": "Failed",
                        "status": "True",
                        "reason": failed_reason or "BackoffLimitExceeded",
                    }
                ],
            }

    def job_args(self) -> list[str]:
        return list(self.job()["spec"]["template"]["spec"]["containers"][0]["args"])

    def arg(self, flag: str) -> str | None:
        args = self.job_args()
        return args[args.index(flag) + 1] if flag in args else None

    def twin_pod(self, revision: str, name: str, node: str | None = None) -> None:
        """A Running pod of the twin of ``revision`` (its template's labels), on ``node``."""
        dep = self.objects[("Deployment", f"qwen--twin-{revision}")]
        self.add_pod(name, dict(dep["spec"]["template"]["metadata"]["labels"]), {})
        if node is not None:
            self.objects[("Pod", name)]["spec"] = {"nodeName": node}

    def server_pod(self, revision: str, name: str, node: str | None = None) -> None:
        """A pod of ``revision``'s own Deployment, on ``node``."""
        dep = self.deployment(revision)
        assert dep is not None
        self.add_pod(name, dict(dep["spec"]["template"]["metadata"]["labels"]), {})
        if node is not None:
            self.objects[("Pod", name)]["spec"] = {"nodeName": node}

    def start_benchmark(self, limit: int = 4) -> Plan:
        """Plan, let every Deployment become Ready, plan again, until a benchmark Job exists:
        the candidate starts, then (mode auto, once the candidate is scheduled) the twin
        beside it, then the Job."""
        p = self.step()
        for _ in range(limit):
            if self.kinds("Job"):
                return p
            self.ready_all()
            p = self.step()
        raise AssertionError(f"no benchmark Job after {limit} passes: {self.status}")

    def pass_first_gate(self) -> None:
        """Walk the first revision through candidate, Ready, a Passed benchmark and promotion."""
        self.step()
        self.ready_all()
        self.step()
        self.finish_job(summary())
        self.step()
        self.ready_all()

    @property
    def status(self) -> dict[str, Any]:
        return self.body.get("status", {})

    def condition(self, kind: str) -> dict[str, Any]:
        return next(c for c in self.status["conditions"] if c["type"] == kind)

    def events(self) -> list[str]:
        return [e.reason for p in self.plans for e in p.events]


def serving_world(spec_doc: dict[str, Any], settings: Settings | None = None) -> World:
    """A world where ``spec_doc`` passed its gate and serves."""
    w = World(spec_doc, settings)
    w.pass_first_gate()
    w.settle()
    assert w.status["phase"] == "Serving", w.status
    return w
