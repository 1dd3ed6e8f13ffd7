"""The benchmark Job of one gate attempt, rendered purely.

The Job runs the operator's own image (``vllm-operator bench``) against the candidate
Service and writes the compact ``BenchSummary`` to its termination message, where the
operator reads it without log access. It is built to fail closed and to be harmless:
no retries (``backoffLimit: 0``: a second run would hide a flaky first), a hard deadline
from the gate timeout, no service-account token (it needs no API access), the restricted
Pod Security profile, and small resources (it is an HTTP client, not a GPU workload).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from vllm_operator.api.resource import VLLMDeployment
from vllm_operator.api.summary import BenchSummary
from vllm_operator.render import labels
from vllm_operator.render.deployment import API_KEY_ENV
from vllm_operator.render.names import candidate_service_name, job_name, serving_service_name

SUITE_MOUNT = "/etc/vllm-operator/suite"
# A dataset workload's file: the ConfigMap's key projected under a fixed name (the key is
# the user's; the path bench reads is ours), or the claim mounted read-only with its path.
DATASET_MOUNT = "/etc/vllm-operator/dataset"
DATASET_FILE = "dataset"
DATASET_CLAIM_MOUNT = "/var/lib/vllm-operator/dataset-claim"
TERMINATION_LOG = "/dev/termination-log"
TTL_SECONDS_AFTER_FINISHED = 3600
# The bench stops measuring this long before the Job's hard deadline, so it still has time
# to write its summary (an Error with reasons beats a Job killed mid-sentence).
DEADLINE_MARGIN_SECONDS = 30

RESOURCES: dict[str, dict[str, str]] = {
    "requests": {"cpu": "100m", "memory": "128Mi"},
    "limits": {"cpu": "1", "memory": "512Mi"},
}
# The python-tests sandbox (docs/security-sandbox.md): a native sidecar (an init container
# with restartPolicy Always, so the Job completes when bench exits) running the same image
# as another uid, with no env, no secrets, a read-only root, its own PID namespace and a
# size-limited scratch volume. Bench hands it code through the exchange volume only.
SANDBOX_UID = 65533
# Not under /var/run: on Debian-based images that is a symlink to /run, and some runtimes
# (buildah's chroot isolation, used by the image test) do not mount through it.
EXCHANGE_MOUNT = "/var/lib/vllm-operator/exchange"
SCRATCH_MOUNT = "/var/lib/vllm-operator/scratch"
SANDBOX_RESOURCES: dict[str, dict[str, str]] = {
    "requests": {"cpu": "50m", "memory": "64Mi"},
    "limits": {"cpu": "1", "memory": "768Mi"},  # the code's own address space limit is 512Mi
}
_RESTRICTED = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "runAsNonRoot": True,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


def bench_deadline(timeout_seconds: int) -> int:
    """The bench's ``--deadline-seconds`` for a gate's ``timeoutSeconds`` (the Job's)."""
    return max(timeout_seconds - DEADLINE_MARGIN_SECONDS, 30)


def candidate_url(vd: VLLMDeployment) -> str:
    """The in-cluster URL of the candidate Service."""
    service = candidate_service_name(vd.metadata.name)
    return f"http://{service}.{vd.metadata.namespace}.svc:{vd.spec.service.port}"


def _suite_argument(vd: VLLMDeployment) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]]]:
    suite = vd.spec.gate.suite
    if suite.config_map is not None:
        volume = {
            "name": "suite",
            "configMap": {
                "name": suite.config_map,
                "items": [{"key": suite.key, "path": suite.key}],
            },
        }
        mount = {"name": "suite", "mountPath": SUITE_MOUNT, "readOnly": True}
        return f"{SUITE_MOUNT}/{suite.key}", [volume], [mount]
    return f"builtin:{suite.builtin or 'default'}", [], []


def _workload_arguments(
    vd: VLLMDeployment,
) -> tuple[list[str], list[dict[str, Any]], list[dict[str, Any]]]:
    """``--workload-json`` (and ``--dataset`` with its volume) unless the study is measured.

    The study's Job stays exactly as it was: no argument, no volume.
    """
    workload = vd.spec.gate.workload
    if workload.is_study:
        return [], [], []
    wire = json.dumps(workload.to_wire(), sort_keys=True, separators=(",", ":"))
    args = ["--workload-json", wire]
    dataset = workload.dataset
    if dataset is None:
        return args, [], []
    if dataset.config_map is not None:
        volume: dict[str, Any] = {
            "name": "dataset",
            "configMap": {
                "name": dataset.config_map,
                "items": [{"key": dataset.key, "path": DATASET_FILE}],
            },
        }
        mount = {"name": "dataset", "mountPath": DATASET_MOUNT, "readOnly": True}
        path = f"{DATASET_MOUNT}/{DATASET_FILE}"
    else:
        assert dataset.persistent_volume_claim is not None  # the model allows only these two
        volume = {
            "name": "dataset",
            "persistentVolumeClaim": {
                "claimName": dataset.persistent_volume_claim,
                "readOnly": True,
            },
        }
        mount = {"name": "dataset", "mountPath": DATASET_CLAIM_MOUNT, "readOnly": True}
        path = f"{DATASET_CLAIM_MOUNT}/{dataset.path}"
    return [*args, "--dataset", path], [volume], [mount]


def bench_args(
    vd: VLLMDeployment,
    baseline: BenchSummary | None,
    *,
    baseline_url: str | None = None,
    placement: Mapping[str, str] | None = None,
) -> list[str]:
    """The ``vllm-operator bench`` arguments of this gate (the suite path included).

    ``baseline_url`` (a twin of the stable revision) makes the bench measure the baseline
    itself, interleaved with the candidate; ``baseline`` (stored figures) is then not sent.
    ``placement`` maps bench flags (``candidate-node``, ``baseline-gpu-product``, ...) to
    where each server runs, which only the operator knows.
    """
    gate = vd.spec.gate
    suite_arg, _, _ = _suite_argument(vd)
    args = [
        "bench",
        "--url",
        candidate_url(vd),
        "--model",
        vd.spec.model.served_model_name or vd.spec.model.name,
        "--suite",
        suite_arg,
        "--iterations",
        str(gate.iterations),
        "--thresholds-json",
        json.dumps(gate.thresholds.to_wire(), sort_keys=True, separators=(",", ":")),
        "--summary-path",
        TERMINATION_LOG,
        "--output",  # the log is read by machines: `kubectl logs job | vllm-operator report -`
        "jsonl",
        "--deadline-seconds",
        str(bench_deadline(gate.timeout_seconds)),
        "--sandbox-dir",
        EXCHANGE_MOUNT,
    ]
    if vd.spec.engine.api_key_secret is not None:
        args += ["--api-key-env", API_KEY_ENV]
    if gate.concurrency:
        args += ["--concurrency", ",".join(str(c) for c in gate.concurrency)]
    args += ["--trials", str(gate.trials), "--max-trials", str(gate.max_trials)]
    args += _workload_arguments(vd)[0]
    if gate.suite.concurrency is not None:
        args += ["--quality-concurrency", str(gate.suite.concurrency)]
    for flag, value in sorted((placement or {}).items()):
        args += [f"--{flag}", value]
    if baseline_url is not None:
        args += ["--baseline-url", baseline_url]
    elif baseline is not None:
        args += [
            "--baseline-json",
            json.dumps(baseline.to_wire(), sort_keys=True, separators=(",", ":")),
        ]
    return args


def sandbox_container(image: str) -> dict[str, Any]:
    """The python-tests sandbox sidecar: bench's image, another uid, nothing of bench's."""
    return {
        "name": "sandbox",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "restartPolicy": "Always",
        "command": ["vllm-operator"],
        "args": ["sandbox", "serve", "--exchange", EXCHANGE_MOUNT, "--scratch", SCRATCH_MOUNT],
        "env": [],
        "resources": SANDBOX_RESOURCES,
        "volumeMounts": [
            {"name": "exchange", "mountPath": EXCHANGE_MOUNT},
            {"name": "scratch", "mountPath": SCRATCH_MOUNT},
        ],
        "securityContext": {
            **_RESTRICTED,
            "runAsUser": SANDBOX_UID,
            "runAsGroup": SANDBOX_UID,
        },
    }


def render_job(
    vd: VLLMDeployment,
    revision: str,
    attempt: int,
    *,
    image: str,
    baseline: BenchSummary | None = None,
    extra_env: Mapping[str, str] | None = None,
    ttl_seconds: int = TTL_SECONDS_AFTER_FINISHED,
    baseline_url: str | None = None,
    placement: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The batch/v1 Job benchmarking ``revision`` (attempt ``attempt``, from 1)."""
    name = job_name(vd.metadata.name, revision, attempt)
    pod_labels = {
        **labels.revision_labels(vd.metadata.name, revision, labels.COMPONENT_BENCHMARK),
        labels.JOB_LABEL: name,
    }
    _, volumes, mounts = _suite_argument(vd)
    _, dataset_volumes, dataset_mounts = _workload_arguments(vd)
    volumes, mounts = [*volumes, *dataset_volumes], [*mounts, *dataset_mounts]
    # Bench writes only its summary (the termination message) and, for the sandbox, the
    # exchange volume: no /tmp, its root stays read-only (hack/image_roles.py checks it).
    volumes = [
        {"name": "exchange", "emptyDir": {"sizeLimit": "16Mi"}},
        # In memory: a tmpfs of this size, so the kernel refuses the 65th MiB whatever wrote
        # it (a disk-backed emptyDir is only measured, and the pod evicted, after the fact).
        # Its pages count against the sandbox's 768Mi with the code's 512Mi: it fits.
        {"name": "scratch", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}},
        *volumes,
    ]
    mounts = [
        {"name": "exchange", "mountPath": EXCHANGE_MOUNT},
        *mounts,
    ]
    env: list[dict[str, Any]] = [{"name": "PYTHONUNBUFFERED", "value": "1"}]
    api_key = vd.spec.engine.api_key_secret
    env += [
        {"name": k, "value": v}
        for k, v in sorted((extra_env or {}).items())
        if api_key is None or k != API_KEY_ENV
    ]
    if api_key is not None:
        # The same Secret key vLLM gets; bench reads it with --api-key-env (never in argv).
        env.append(
            {
                "name": API_KEY_ENV,
                "valueFrom": {"secretKeyRef": {"name": api_key.name, "key": api_key.key}},
            }
        )
    container = {
        "name": "bench",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["vllm-operator"],
        # The run's identity goes into the summary; the operator believes a summary only
        # from the Job it names.
        "args": [
            *bench_args(vd, baseline, baseline_url=baseline_url, placement=placement),
            *("--job-name", name, "--revision", revision, "--attempt", str(attempt)),
        ],
        "env": env,
        "resources": RESOURCES,
        "terminationMessagePath": TERMINATION_LOG,
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "volumeMounts": mounts,
        "securityContext": dict(_RESTRICTED),
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": vd.metadata.namespace,
            "labels": dict(pod_labels),
            "annotations": {
                labels.REVISION_ANNOTATION: revision,
                labels.ATTEMPT_ANNOTATION: str(attempt),
            },
        },
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": vd.spec.gate.timeout_seconds,
            "ttlSecondsAfterFinished": ttl_seconds,
            "template": {
                "metadata": {"labels": pod_labels},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": 65532,
                        "runAsGroup": 65532,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "shareProcessNamespace": False,
                    "initContainers": [sandbox_container(image)],
                    "containers": [container],
                    "volumes": volumes,
                },
            },
        },
    }


def render_calibration_job(
    vd: VLLMDeployment,
    revision: str,
    name: str,
    *,
    image: str,
    baseline_url: str,
    extra_env: Mapping[str, str] | None = None,
    ttl_seconds: int = TTL_SECONDS_AFTER_FINISHED,
) -> dict[str, Any]:
    """An A/A calibration Job: the gate's own bench of ``revision`` (through the serving
    Service) against its twin, named ``name``, labelled component calibration so that no
    gate counts or retires it (``rollout/calibration.py``)."""
    manifest = render_job(
        vd, revision, 1, image=image, extra_env=extra_env, ttl_seconds=ttl_seconds,
        baseline_url=baseline_url,
    )  # fmt: skip
    serving = serving_service_name(vd.metadata.name)
    url = f"http://{serving}.{vd.metadata.namespace}.svc:{vd.spec.service.port}"
    manifest["metadata"]["name"] = name
    template = manifest["spec"]["template"]
    for where in (manifest["metadata"]["labels"], template["metadata"]["labels"]):
        where[labels.COMPONENT_LABEL] = labels.COMPONENT_CALIBRATION
        where[labels.JOB_LABEL] = name
    bench = template["spec"]["containers"][0]
    args = bench["args"]
    args[args.index("--url") + 1] = url
    args[args.index("--job-name") + 1] = name
    return manifest
