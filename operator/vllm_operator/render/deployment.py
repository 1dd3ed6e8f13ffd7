"""The Deployment of one revision: the vLLM pod, exactly as the launch plan says.

One Deployment per revision (named ``<name>--<revision>``) keeps stable and candidate apart:
the candidate is benchmarked while the stable one serves, and promotion only moves the
serving Service's selector and scales, never touches a running pod template. The update
strategy never needs a spare GPU (maxSurge 0), because a full GPU cluster would deadlock a
surge (kserve#5452).

Every user string goes to the container as its own argv item or env value, with ``$``
doubled so the kubelet's ``$(VAR)`` expansion cannot change it: what users write is what
vLLM receives.
"""

from __future__ import annotations

from typing import Any

from vllm_operator.api.resource import VLLMDeployment
from vllm_operator.api.spec import VLLMDeploymentSpec
from vllm_operator.engine import entrypoint, probes
from vllm_operator.engine.policy import LaunchPlan
from vllm_operator.errors import SpecErrors
from vllm_operator.render import labels
from vllm_operator.render.identity import IDENTITY_LABELS, with_identity
from vllm_operator.render.names import deployment_name
from vllm_operator.render.validate import object_errors

CONTAINER_NAME = labels.SERVER_CONTAINER
PORT_NAME = "http"
HF_HOME = "/cache/huggingface"
VLLM_CACHE_ROOT = "/cache/vllm"
SHM_PATH = "/dev/shm"
# The vLLM container runs as a non-root user. UID 2000 with GID 0 is the `vllm` user of the
# vllm/vllm-openai images and the configuration their docs support for Kubernetes
# (vllm-project/vllm docs/deployment/docker.md "Run as a non-root user", commit 02319794:
# runAsNonRoot, runAsGroup 0, fsGroup 0); older images (0.16/0.17) have no such user and
# run as root by default, but need root only for their caches under /root, so HOME points
# at a writable volume and USER is set (torch's inductor cache calls getpass.getuser(),
# which fails for a UID without a passwd entry unless LOGNAME/USER is set).
RUN_AS_USER = 2000
RUN_AS_GROUP = 0
HOME_PATH = "/home/vllm"
USER_NAME = "vllm"
# In-flight requests get this long to finish after SIGTERM: a long (700-token) generation
# took 30-44 s eager and 3-5 s compiled in the study and our calibration; 120 s covers
# eager long prompts under load with room to spare.
TERMINATION_GRACE_SECONDS = 120
REVISION_HISTORY_LIMIT = 2
# vLLM's own variable for the /v1 API key; the benchmark Job uses the same name.
API_KEY_ENV = "VLLM_API_KEY"


def kube_literal(text: str) -> str:
    """``text`` escaped so the kubelet's ``$(VAR)`` expansion leaves it as written."""
    return text.replace("$", "$$")


def _env(spec: VLLMDeploymentSpec, plan: LaunchPlan) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [
        {"name": k, "value": v} for k, v in entrypoint.environment(plan.library_path_fix).items()
    ]
    # The version the flags were checked against; the simulator standing in for vLLM
    # emulates it (commands/sim.py), real vLLM ignores it (outside its VLLM_ namespace).
    env.append({"name": "VLLMOP_VLLM_VERSION", "value": str(plan.version)})
    env.append({"name": "HF_HOME", "value": HF_HOME})
    env.append({"name": "VLLM_CACHE_ROOT", "value": VLLM_CACHE_ROOT})
    # Triton, FlashInfer, DeepGEMM and vLLM's config root write under $HOME.
    env.append({"name": "HOME", "value": HOME_PATH})
    env.append({"name": "USER", "value": USER_NAME})
    secret = spec.model.hf_token_secret
    if secret is not None:
        env.append(
            {
                "name": "HF_TOKEN",
                "valueFrom": {"secretKeyRef": {"name": secret.name, "key": secret.key}},
            }
        )
    api_key = spec.engine.api_key_secret
    if api_key is not None:
        # An env var, not `--api-key $(VLLM_API_KEY)` in args: vLLM reads VLLM_API_KEY itself
        # as the default of --api-key, so the key never enters argv (visible in ps and
        # /proc/*/cmdline). Verified in vllm-project/vllm: vllm/envs.py defines
        # "VLLM_API_KEY": lambda: os.environ.get("VLLM_API_KEY", None) (commit 001f69f8,
        # 0.9/0.10 era) and vllm/entrypoints/openai/api_server.py build_app() guards /v1 with
        # `args.api_key or [envs.VLLM_API_KEY]` (main, commit 0001948b); older copies of
        # api_server.py read `envs.VLLM_API_KEY or args.api_key`. docs/engine-policy.md.
        env.append(
            {
                "name": API_KEY_ENV,
                "valueFrom": {"secretKeyRef": {"name": api_key.name, "key": api_key.key}},
            }
        )
    env += [{"name": var.name, "value": kube_literal(var.value)} for var in spec.engine.env]
    return env


def _volumes(spec: VLLMDeploymentSpec) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    for name, claim, path in (
        ("hf-home", spec.model.weights_cache, HF_HOME),
        ("vllm-cache", spec.engine.compile_cache, VLLM_CACHE_ROOT),
    ):
        mount: dict[str, Any] = {"name": name, "mountPath": path}
        if claim is None:
            volumes.append({"name": name, "emptyDir": {}})
        else:
            volumes.append(
                {
                    "name": name,
                    "persistentVolumeClaim": {
                        "claimName": claim.claim_name,
                        "readOnly": claim.read_only,
                    },
                }
            )
            if claim.sub_path:
                mount["subPath"] = claim.sub_path
            if claim.read_only:
                mount["readOnly"] = True
        mounts.append(mount)
    volumes.append({"name": "home", "emptyDir": {}})
    mounts.append({"name": "home", "mountPath": HOME_PATH})
    volumes.append(
        {
            "name": "dshm",
            "emptyDir": {"medium": "Memory", "sizeLimit": spec.resources.shared_memory},
        }
    )
    mounts.append({"name": "dshm", "mountPath": SHM_PATH})
    return volumes, mounts


def _resources(spec: VLLMDeploymentSpec) -> dict[str, Any]:
    res = spec.resources
    amounts: dict[str, Any] = {res.gpu_resource_name: str(res.gpus)}
    if res.cpu is not None:
        amounts["cpu"] = res.cpu
    if res.memory is not None:
        amounts["memory"] = res.memory
    return {"limits": dict(amounts), "requests": dict(amounts)}


def _container(spec: VLLMDeploymentSpec, plan: LaunchPlan) -> dict[str, Any]:
    port = spec.service.port
    volumes_mounts = _volumes(spec)[1]
    container: dict[str, Any] = {
        "name": CONTAINER_NAME,
        "image": spec.engine.image,
        "imagePullPolicy": "IfNotPresent",
        "command": entrypoint.command(),
        "args": [kube_literal(arg) for arg in plan.args],
        "ports": [{"name": PORT_NAME, "containerPort": port, "protocol": "TCP"}],
        "env": _env(spec, plan),
        "resources": _resources(spec),
        "volumeMounts": volumes_mounts,
        # Non-root (see RUN_AS_USER), no capabilities, no privilege escalation. The root
        # filesystem stays writable: JIT compilers (Triton, Inductor, FlashInfer) write
        # to /tmp, which a non-root user can, and their paths vary by version.
        "securityContext": {
            "runAsNonRoot": True,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        },
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    container.update(probes.probes(port, plan.compiled, spec.probes.warmup_budget_seconds))
    return container


def _pod_spec(spec: VLLMDeploymentSpec, plan: LaunchPlan) -> dict[str, Any]:
    sched = spec.scheduling
    pod: dict[str, Any] = {
        # A Service named like an env prefix (vllm -> VLLM_PORT) would break vLLM.
        "enableServiceLinks": False,
        "automountServiceAccountToken": False,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": RUN_AS_USER,
            "runAsGroup": RUN_AS_GROUP,
            # Volumes (a weights-cache PVC filled by an earlier root pod) become writable.
            "fsGroup": RUN_AS_GROUP,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "terminationGracePeriodSeconds": TERMINATION_GRACE_SECONDS,
        "containers": [_container(spec, plan)],
        "volumes": _volumes(spec)[0],
    }
    if sched.node_selector:
        pod["nodeSelector"] = dict(sched.node_selector)
    if sched.tolerations:
        pod["tolerations"] = [t.to_wire() for t in sched.tolerations]
    if sched.affinity is not None:
        pod["affinity"] = sched.affinity
    if sched.runtime_class_name:
        pod["runtimeClassName"] = sched.runtime_class_name
    if sched.priority_class_name:
        pod["priorityClassName"] = sched.priority_class_name
    return pod


def pod_template(spec: VLLMDeploymentSpec, plan: LaunchPlan) -> dict[str, Any]:
    """The pod template of ``spec`` without its identity (``render/identity.py``).

    Everything the pods of a revision run comes from here, and the revision is the hash of
    exactly this (``render/revision.py``): change anything in it and the revision changes.
    """
    return {
        "metadata": {
            "labels": {
                k: v for k, v in labels.common_labels("").items() if k not in IDENTITY_LABELS
            },
        },
        "spec": _pod_spec(spec, plan),
    }


def render_deployment(
    vd: VLLMDeployment, launch: LaunchPlan, revision: str, replicas: int
) -> dict[str, Any]:
    """The apps/v1 Deployment running ``revision`` of ``vd`` with ``replicas`` pods.

    ``launch`` is the spec's launch plan, computed once by the caller (the planner, or
    ``render_all``), and ``revision`` is ``revision_hash(vd.spec, launch)``, the hash of
    the template rendered here. Raises ``SpecErrors`` for what only the objects reveal
    (``validate.object_errors``). No ownerReferences: the operator adds them (it knows
    the uid).
    """
    errors = object_errors(vd)
    if errors:
        raise SpecErrors(errors)
    name = vd.metadata.name
    annotations = {
        labels.REVISION_ANNOTATION: revision,
        labels.LAUNCH_PLAN_ANNOTATION: launch.record().to_annotation(),
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": deployment_name(name, revision),
            "namespace": vd.metadata.namespace,
            "labels": labels.revision_labels(name, revision),
            "annotations": annotations,
        },
        "spec": {
            "replicas": replicas,
            "revisionHistoryLimit": REVISION_HISTORY_LIMIT,
            "progressDeadlineSeconds": vd.spec.rollout.progress_deadline_seconds,
            "selector": {"matchLabels": labels.server_selector(name, revision)},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1},
            },
            "template": with_identity(pod_template(vd.spec, launch), name, revision),
        },
    }
