"""The desired state of a VLLMDeployment: what users write in ``spec``.

These models are the single source of truth of the API: the CRD schema is generated from
them (``vllm-operator crds``) and every description here is what ``kubectl explain`` shows.
Cross-field rules that depend on the vLLM version (flags, tensor parallel size against GPUs)
live in ``engine.policy``; the models check only what a field can check alone.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from vllm_operator.api.autoscaling import (
    AUTOSCALING_RULES,
    DISRUPTION_RULES,
    AutoscalingSpec,
    DisruptionSpec,
)
from vllm_operator.api.base import APIModel
from vllm_operator.api.canary import CanarySpec, gate_slo_problem
from vllm_operator.api.gate_spec import TRIAL_PLAN_RULES, GateSpec
from vllm_operator.api.kube_rules import (
    GPU_RESOURCE_PATTERN,
    GPU_RESOURCE_RULES,
    SUB_PATH_PATTERN,
    SUB_PATH_RULES,
    ConfigKey,
    ObjectName,
    check_gpu_resource,
    check_sub_path,
)
from vllm_operator.api.workload import SLO_AT_RULES

PerformanceMode = Literal["balanced", "interactivity", "throughput", "eager"]
LibraryPathFix = Literal["auto", "strip-cuda", "unset", "none"]
InconclusivePolicy = Literal["hold", "reject", "rerun"]
PromptClass = Literal["short", "medium", "long"]

# A Kubernetes resource quantity such as "8", "500m", "64Gi".
QUANTITY_PATTERN = r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
ENV_NAME_PATTERN = r"^[-._a-zA-Z][-._a-zA-Z0-9]*$"
# A Kubernetes label key: an optional DNS-subdomain prefix and "/", then a name of at most 63
# characters (apimachinery's IsQualifiedName); the length of the whole is bounded by the field.
LABEL_KEY_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)


class SecretKeyRef(APIModel):
    """A key in a Secret of the VLLMDeployment's namespace."""

    name: ObjectName = Field(description="Name of the Secret.")
    key: ConfigKey = Field(
        default="token",
        description="Key inside the Secret whose value is used ([-._a-zA-Z0-9]+).",
    )


class VolumeClaimRef(APIModel):
    """A PersistentVolumeClaim mounted into the vLLM pods."""

    claim_name: ObjectName = Field(description="Name of the PersistentVolumeClaim.")
    sub_path: str | None = Field(
        default=None,
        max_length=1024,
        description="Optional sub-path inside the volume: relative, without '..' elements.",
        json_schema_extra={"x-kubernetes-validations": SUB_PATH_RULES, "pattern": SUB_PATH_PATTERN},
    )
    read_only: bool = Field(default=False, description="Mount the volume read-only.")

    @field_validator("sub_path")
    @classmethod
    def _sub_path(cls, value: str | None) -> str | None:
        return None if value is None else check_sub_path(value)


class ModelSpec(APIModel):
    """Which model vLLM serves and where its weights come from."""

    name: str = Field(
        min_length=1,
        max_length=1024,
        description=(
            "Hugging Face repository id (org/name) or a path inside the container, passed to "
            "`vllm serve` as its first argument."
        ),
    )
    revision: str | None = Field(
        default=None,
        max_length=256,
        description="Model revision (branch, tag or commit) to download (`--revision`).",
    )
    served_model_name: str | None = Field(
        default=None,
        max_length=256,
        description="Name clients use in requests (`--served-model-name`). Defaults to `name`.",
    )
    hf_token_secret: SecretKeyRef | None = Field(
        default=None,
        description=(
            "Secret holding a Hugging Face token, exposed to vLLM as HF_TOKEN. Only a "
            "reference: the token itself never appears in the spec."
        ),
    )
    weights_cache: VolumeClaimRef | None = Field(
        default=None,
        description=(
            "PersistentVolumeClaim for the Hugging Face cache (HF_HOME), so restarts do not "
            "download the weights again. Without it an emptyDir is used."
        ),
    )


class EnvVar(APIModel):
    """An environment variable for the vLLM container."""

    name: str = Field(
        min_length=1, max_length=256, pattern=ENV_NAME_PATTERN, description="Variable name."
    )
    value: str = Field(default="", max_length=32768, description="Literal value.")


class EngineSpec(APIModel):
    """How vLLM is launched: image, version and the settings that become `vllm serve` flags."""

    image: str = Field(
        min_length=1,
        max_length=1024,
        description="Container image running `vllm serve`, e.g. vllm/vllm-openai:v0.17.0.",
    )
    version: str | None = Field(
        default=None,
        pattern=r"^v?\d+\.\d+(\.\d+)?([A-Za-z0-9.+\-]*)$",
        description=(
            "vLLM version in the image (X.Y.Z). Taken from a vX.Y.Z image tag when omitted; "
            "required when the image is a digest or an unversioned tag. Decides which flags "
            "are valid and which fixes apply."
        ),
    )
    performance_mode: PerformanceMode = Field(
        default="balanced",
        description=(
            "balanced, interactivity or throughput become `--performance-mode` on vLLM >= "
            "0.17 (and nothing on older versions); all three keep torch.compile and CUDA "
            "graphs on. eager adds `--enforce-eager`: no compilation, no CUDA graphs, a "
            "faster start and much slower serving (the published study: medium-prompt "
            "latency 4,602 ms eager vs 886 ms compiled)."
        ),
    )
    tensor_parallel_size: int = Field(
        default=1,
        ge=1,
        le=64,
        description="GPUs one replica shards the model over (`--tensor-parallel-size`).",
    )
    max_model_len: int | None = Field(
        default=None, ge=1, le=10_000_000, description="Context length (`--max-model-len`)."
    )
    gpu_memory_utilization: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description="Fraction of GPU memory vLLM may use (`--gpu-memory-utilization`).",
    )
    extra_args: list[Annotated[str, Field(max_length=4096)]] = Field(
        default_factory=list,
        max_length=128,
        description=(
            "Further `vllm serve` arguments, one list item per argv item. Checked against the "
            "vLLM version: removed flags and flags that contradict a spec field are refused."
        ),
    )
    env: list[EnvVar] = Field(
        default_factory=list,
        max_length=128,
        description="Extra environment variables for the vLLM container.",
    )
    api_key_secret: SecretKeyRef | None = Field(
        default=None,
        description=(
            "Secret holding the API key vLLM requires on /v1/*; passed to vLLM as "
            "VLLM_API_KEY and to the benchmark Job; never literal."
        ),
    )
    library_path_fix: LibraryPathFix = Field(
        default="auto",
        description=(
            "What the entrypoint does to LD_LIBRARY_PATH before `vllm serve`. strip-cuda "
            "removes CUDA toolkit entries (/usr/local/cuda*/lib64) and keeps driver paths "
            "(/usr/local/nvidia/lib64); unset clears it (breaks GKE driver lookup); none "
            "leaves it; auto applies strip-cuda to the versions whose images are known to "
            "fail with CUBLAS_STATUS_INVALID_VALUE (0.16.x, 0.17.x) and nothing otherwise."
        ),
    )
    compile_cache: VolumeClaimRef | None = Field(
        default=None,
        description=(
            "PersistentVolumeClaim for VLLM_CACHE_ROOT (torch.compile cache). A warm cache "
            "saved about 40% of a compiled cold start in our calibration run."
        ),
    )


class ResourcesSpec(APIModel):
    """Compute resources of one vLLM replica."""

    gpus: int = Field(
        default=1,
        ge=0,
        le=64,
        description=(
            "GPUs per pod (per replica on one node); must be at least "
            "engine.tensorParallelSize on one node."
        ),
    )
    nodes: int = Field(
        default=1,
        ge=1,
        le=32,
        description=(
            "Pods per replica, one per node. 1 (the default): each replica is one pod of a "
            "Deployment. Above 1: each replica is a LeaderWorkerSet group of this many pods "
            "with `gpus` GPUs each (leaderworkerset.x-k8s.io must be installed), one vLLM "
            "spanning them; tensorParallelSize x --pipeline-parallel-size must equal nodes "
            "x gpus. vLLM >= 0.11.1 spans nodes with its own flags, 0.10.2 and 0.11.0 "
            "through Ray (docs: multi-node)."
        ),
    )
    group_topology_key: str | None = Field(
        default=None,
        min_length=1,
        max_length=317,
        pattern=LABEL_KEY_PATTERN,
        description=(
            "Only with nodes > 1: a node label key (e.g. a rack or network-block label, or "
            "kubernetes.io/hostname) whose value names one topology domain; each group then "
            "runs inside one domain, one group per domain (LeaderWorkerSet's "
            "exclusive-topology annotation). Unset: the scheduler places pods freely."
        ),
    )
    gpu_resource_name: Annotated[str, AfterValidator(check_gpu_resource)] = Field(
        default="nvidia.com/gpu",
        min_length=1,
        max_length=253,
        description=(
            "Extended resource name of the GPU (nvidia.com/gpu, amd.com/gpu, ...): "
            "domain-prefixed, not a native resource such as cpu or memory."
        ),
        json_schema_extra={
            "pattern": GPU_RESOURCE_PATTERN,
            "x-kubernetes-validations": GPU_RESOURCE_RULES,
        },
    )
    cpu: str | None = Field(
        default=None, pattern=QUANTITY_PATTERN, description="CPU request and limit, e.g. 8."
    )
    memory: str | None = Field(
        default=None,
        pattern=QUANTITY_PATTERN,
        description="Memory request and limit, e.g. 64Gi.",
    )
    shared_memory: str = Field(
        default="16Gi",
        pattern=QUANTITY_PATTERN,
        description="Size limit of the memory-backed /dev/shm (PyTorch and NCCL need it).",
    )


class Toleration(APIModel):
    """A Kubernetes toleration (same fields as core/v1 Toleration)."""

    key: str | None = Field(default=None, description="Taint key the toleration applies to.")
    operator: Literal["Exists", "Equal"] | None = Field(
        default=None, description="Exists or Equal (default Equal)."
    )
    value: str | None = Field(default=None, description="Taint value for operator Equal.")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = Field(
        default=None, description="Taint effect to match; empty matches all."
    )
    toleration_seconds: int | None = Field(
        default=None, description="How long a NoExecute taint is tolerated."
    )


class SchedulingSpec(APIModel):
    """Where vLLM pods may run."""

    node_selector: dict[str, str] = Field(
        default_factory=dict, description="Node labels the pods require."
    )
    tolerations: list[Toleration] = Field(
        default_factory=list, description="Tolerations, e.g. for tainted GPU nodes."
    )
    affinity: dict[str, Any] | None = Field(
        default=None,
        description=(
            "A core/v1 Affinity object, copied to the pods as is. The operator checks its "
            "fields and values as the API server would check a pod's (see "
            "`kubectl explain pod.spec.affinity`) and refuses the spec otherwise."
        ),
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
    )
    runtime_class_name: str | None = Field(
        default=None, max_length=253, description="RuntimeClass of the pods (e.g. nvidia)."
    )
    priority_class_name: str | None = Field(
        default=None, max_length=253, description="PriorityClass of the pods."
    )


class ServiceSpec(APIModel):
    """The serving Service clients use."""

    port: int = Field(
        default=8000, ge=1, le=65535, description="Port of the Service and of vLLM (`--port`)."
    )
    type: Literal["ClusterIP", "NodePort", "LoadBalancer"] = Field(
        default="ClusterIP", description="Service type of the serving Service."
    )


class ProbesSpec(APIModel):
    """Probe sizing. vLLM does not listen until its weights are loaded and compiled."""

    warmup_budget_seconds: int | None = Field(
        default=None,
        ge=30,
        le=86_400,
        description=(
            "Longest start-up (load, compile, CUDA-graph capture) the startupProbe tolerates "
            "before the container is restarted. Defaults by performance mode: eager 900 s, "
            "compiled modes 1800 s (see docs: probes)."
        ),
    )


class RolloutSpec(APIModel):
    """How a new revision becomes the serving one."""

    candidate_replicas: int = Field(
        default=1, ge=1, le=64, description="Replicas of a candidate while it is benchmarked."
    )
    progress_deadline_seconds: int = Field(
        default=3600,
        ge=60,
        le=86_400,
        description="A candidate not Ready within this time is rejected with its cause.",
    )
    on_inconclusive: InconclusivePolicy = Field(
        default="hold",
        description=(
            "What an Inconclusive gate (the data cannot tell a regression from noise) does: "
            "hold keeps the candidate waiting for a person (promote or abort annotation); "
            "reject removes it; rerun runs the benchmark again, up to maxReruns times, "
            "then holds."
        ),
    )
    max_reruns: int = Field(
        default=2,
        ge=1,
        le=5,
        description=(
            "With onInconclusive: rerun, how many more benchmark attempts an Inconclusive "
            "gate gets before the candidate is held for a person."
        ),
    )
    canary: CanarySpec | None = Field(
        default=None,
        description=(
            "Live traffic after the gate passed: steps of a rising share of the serving "
            "traffic, each judged on vLLM's metrics of candidate against stable; a failing "
            "step sends the traffic back to stable at once. Unset: promote at once."
        ),
    )


class VLLMDeploymentSpec(APIModel):
    """Desired state: a model served by vLLM, and how new revisions are proven."""

    model: ModelSpec = Field(description="The model to serve.")
    engine: EngineSpec = Field(description="vLLM image, version and launch settings.")
    resources: ResourcesSpec = Field(
        default_factory=ResourcesSpec, description="GPU, CPU and memory per replica."
    )
    replicas: int = Field(
        default=1,
        ge=0,
        le=1024,
        description=(
            "Serving replicas; with autoscaling, only the initial count (clamped to "
            "minReplicas..maxReplicas) and the autoscaler decides from then on."
        ),
    )
    scheduling: SchedulingSpec = Field(
        default_factory=SchedulingSpec, description="Node selection for the pods."
    )
    service: ServiceSpec = Field(default_factory=ServiceSpec, description="The serving Service.")
    probes: ProbesSpec = Field(default_factory=ProbesSpec, description="Probe sizing.")
    rollout: RolloutSpec = Field(
        default_factory=RolloutSpec, description="How candidates are rolled out."
    )
    gate: GateSpec = Field(
        default_factory=GateSpec,
        description="The benchmark gate.",
        json_schema_extra={"x-kubernetes-validations": [*TRIAL_PLAN_RULES, *SLO_AT_RULES]},
    )
    autoscaling: AutoscalingSpec | None = Field(
        default=None,
        description=(
            "Scale the serving revision with load (HorizontalPodAutoscaler or KEDA on vLLM's "
            "metrics). Unset: a fixed `replicas`."
        ),
        json_schema_extra={"x-kubernetes-validations": AUTOSCALING_RULES},
    )
    disruption: DisruptionSpec = Field(
        default_factory=DisruptionSpec,
        description=(
            "The PodDisruptionBudget of the serving revision (default: at most one serving "
            "pod unavailable in a voluntary disruption such as a node drain)."
        ),
        json_schema_extra={"x-kubernetes-validations": DISRUPTION_RULES},
    )

    @model_validator(mode="after")
    def _canary_can_judge_gate_slo(self) -> VLLMDeploymentSpec:
        canary = self.rollout.canary
        if canary is not None:
            problem = gate_slo_problem(canary, self.gate.thresholds.slo)
            if problem is not None:
                raise ValueError(problem)
        return self
