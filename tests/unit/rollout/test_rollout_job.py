"""The benchmark Job manifest: valid, fail-closed, harmless."""

from __future__ import annotations

import json

import kubernetes_validate
import pytest
from rollout_world import summary

from builders import minimal_spec, resource
from vllm_operator.api import parse_vllm_deployment
from vllm_operator.commands.bench import identity_from_args, parser
from vllm_operator.errors import SpecErrors
from vllm_operator.render.job import EXCHANGE_MOUNT, render_job


def _vd(engine: dict[str, object] | None = None, **gate: object) -> object:
    spec = minimal_spec(**(engine or {}))
    spec["model"]["servedModelName"] = "qwen3"
    spec |= {"service": {"port": 8000}, "gate": {"timeoutSeconds": 900, **gate}}
    return parse_vllm_deployment(resource(spec, namespace="ml"))


@pytest.mark.parametrize("version", ["1.30", kubernetes_validate.latest_version()])
def test_job_is_a_valid_batch_v1_job(version: str) -> None:
    job = render_job(_vd(), "0123456789", 1, image="op:1", baseline=summary())
    kubernetes_validate.validate(job, version, strict=True)


def test_job_fails_closed_and_runs_restricted() -> None:
    job = render_job(_vd(), "0123456789", 2, image="op:1")
    assert job["metadata"]["name"] == "qwen--gate-0123456789-2"
    spec = job["spec"]
    assert spec["backoffLimit"] == 0
    assert spec["activeDeadlineSeconds"] == 900
    assert spec["ttlSecondsAfterFinished"] > 0
    pod = spec["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert pod["restartPolicy"] == "Never"
    assert pod["securityContext"]["runAsNonRoot"] is True
    (container,) = pod["containers"]
    ctx = container["securityContext"]
    assert ctx["allowPrivilegeEscalation"] is False
    assert ctx["readOnlyRootFilesystem"] is True
    assert ctx["capabilities"] == {"drop": ["ALL"]}
    assert ctx["seccompProfile"] == {"type": "RuntimeDefault"}
    # The only writable mount bench has is the sandbox exchange (the image test shows it
    # writes nothing else); no /tmp.
    assert [m["mountPath"] for m in container["volumeMounts"]] == [EXCHANGE_MOUNT]
    assert container["terminationMessagePolicy"] == "FallbackToLogsOnError"
    assert container["resources"]["limits"]["memory"] == "512Mi"
    args = container["args"]
    assert args[:5] == ["bench", "--url", "http://qwen--candidate.ml.svc:8000", "--model", "qwen3"]
    assert args[args.index("--summary-path") + 1] == "/dev/termination-log"
    assert int(args[args.index("--deadline-seconds") + 1]) < 900
    assert "--baseline-json" not in args
    # Pods of the Job never match a Service (component=benchmark).
    assert pod_labels(job)["app.kubernetes.io/component"] == "benchmark"


def pod_labels(job: dict[str, object]) -> dict[str, str]:
    return job["spec"]["template"]["metadata"]["labels"]  # type: ignore[index,no-any-return]


def test_custom_suite_comes_from_a_configmap_volume() -> None:
    job = render_job(
        _vd(suite={"configMap": "my-suite", "key": "s.yaml"}), "0123456789", 1, image="op"
    )
    pod = job["spec"]["template"]["spec"]
    assert {
        "name": "suite",
        "configMap": {"name": "my-suite", "items": [{"key": "s.yaml", "path": "s.yaml"}]},
    } in pod["volumes"]
    args = pod["containers"][0]["args"]
    assert args[args.index("--suite") + 1] == "/etc/vllm-operator/suite/s.yaml"


def test_quality_concurrency_is_passed_only_when_set() -> None:
    from vllm_operator.bench.quality.run import MAX_CONCURRENCY
    from vllm_operator.commands.bench import config_from_args

    plain = render_job(_vd(), "0123456789", 1, image="op")
    assert "--quality-concurrency" not in plain["spec"]["template"]["spec"]["containers"][0]["args"]
    job = render_job(_vd(suite={"concurrency": 1}), "0123456789", 1, image="op")
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--quality-concurrency") + 1] == "1"
    suite = args.index("--suite")
    args[suite + 1] = "builtin:default"  # the mounted path does not exist here
    assert config_from_args(parser("bench").parse_args(args[1:])).quality_concurrency == 1
    with pytest.raises(SpecErrors, match=r"spec\.gate\.suite\.concurrency: Input should be less"):
        _vd(suite={"concurrency": MAX_CONCURRENCY + 1})


def test_thresholds_and_baseline_are_passed_as_json() -> None:
    vd = _vd(thresholds={"maxRegressionPercent": 10}, concurrency=[1, 8])
    job = render_job(vd, "0123456789", 1, image="op", baseline=summary())
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    assert json.loads(args[args.index("--thresholds-json") + 1])["maxRegressionPercent"] == 10
    assert json.loads(args[args.index("--baseline-json") + 1])["quality"]["passed"] == 13
    assert args[args.index("--concurrency") + 1] == "1,8"


@pytest.mark.parametrize("version", ["1.30", kubernetes_validate.latest_version()])
def test_job_gets_the_api_key_from_the_same_secret(version: str) -> None:
    secret = {"name": "vllm-key", "key": "api-key"}
    job = render_job(
        _vd(engine={"apiKeySecret": secret}),
        "0123456789",
        1,
        image="op:1",
        extra_env={"VLLM_API_KEY": "literal-from-settings", "OTHER": "1"},
    )
    kubernetes_validate.validate(job, version, strict=True)
    (container,) = job["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    assert args[args.index("--api-key-env") + 1] == "VLLM_API_KEY"
    keyed = [e for e in container["env"] if e["name"] == "VLLM_API_KEY"]
    assert keyed == [{"name": "VLLM_API_KEY", "valueFrom": {"secretKeyRef": secret}}]
    assert {"name": "OTHER", "value": "1"} in container["env"]
    unguarded = render_job(_vd(), "0123456789", 1, image="op:1")
    (plain,) = unguarded["spec"]["template"]["spec"]["containers"]
    assert "--api-key-env" not in plain["args"]
    assert all(e["name"] != "VLLM_API_KEY" for e in plain["env"])


def test_job_tells_the_bench_which_run_it_is() -> None:
    """The bench stamps its summary with these; the operator believes only a matching one."""
    job = render_job(_vd(), "0123456789", 3, image="op:1")
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--job-name") + 1] == job["metadata"]["name"]
    assert args[args.index("--revision") + 1] == "0123456789"
    assert args[args.index("--attempt") + 1] == "3"
    identity = identity_from_args(parser("bench").parse_args(args[1:]))
    assert identity is not None
    assert identity.to_wire() == {
        "job": "qwen--gate-0123456789-3",
        "revision": "0123456789",
        "attempt": 3,
    }


@pytest.mark.parametrize("version", ["1.30", kubernetes_validate.latest_version()])
def test_python_tests_run_in_a_sandbox_sidecar_with_nothing_of_bench(version: str) -> None:
    job = render_job(
        _vd(engine={"apiKeySecret": {"name": "vllm-key", "key": "api-key"}}),
        "0123456789",
        1,
        image="op:1",
        extra_env={"OTHER": "1"},
    )
    kubernetes_validate.validate(job, version, strict=True)
    pod = job["spec"]["template"]["spec"]
    assert pod["shareProcessNamespace"] is False  # no view of bench's /proc
    (sandbox,) = pod["initContainers"]
    (bench,) = pod["containers"]
    assert sandbox["restartPolicy"] == "Always"  # native sidecar: the Job ends with bench
    assert sandbox["image"] == bench["image"]
    assert sandbox["env"] == []  # no key, no settings
    assert "envFrom" not in sandbox
    ctx = sandbox["securityContext"]
    assert ctx["runAsUser"] != pod["securityContext"]["runAsUser"]
    assert ctx["readOnlyRootFilesystem"] is True
    assert ctx["allowPrivilegeEscalation"] is False
    assert ctx["capabilities"] == {"drop": ["ALL"]}
    assert "terminationMessagePath" not in sandbox  # its own, never bench's
    volumes = {v["name"]: v for v in pod["volumes"]}
    sandbox_mounts = {m["name"]: m["mountPath"] for m in sandbox["volumeMounts"]}
    bench_mounts = {m["name"]: m["mountPath"] for m in bench["volumeMounts"]}
    assert set(sandbox_mounts) == {"exchange", "scratch"}  # no suite, no /tmp of bench
    assert sandbox_mounts["exchange"] == bench_mounts["exchange"]
    assert "scratch" not in bench_mounts
    # a tmpfs of 64Mi: the kernel bounds every byte the code writes, named or not (issue 38)
    assert volumes["scratch"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "64Mi"}
    assert volumes["exchange"]["emptyDir"]["sizeLimit"] == "16Mi"
    assert bench["args"][bench["args"].index("--sandbox-dir") + 1] == sandbox_mounts["exchange"]
    assert sandbox["args"][:2] == ["sandbox", "serve"]
