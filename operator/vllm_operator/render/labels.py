"""Labels and annotations shared by every object the operator creates.

``app.kubernetes.io/*`` lets generic tools group the objects; the ``vllm-operator.dev/*``
labels are what the operator itself selects on. The role of a revision (stable or
candidate) is deliberately not a pod-template label: promotion must not restart pods, so
the role lives on the Deployment only, where the operator patches it.

Every label and annotation key the operator writes or reads is spelled here, once, under
the API group (``api.resource.GROUP``); other modules import the keys from this one.
"""

from __future__ import annotations

from vllm_operator.api.resource import GROUP

DOMAIN = GROUP
NAME_LABEL = "app.kubernetes.io/name"
INSTANCE_LABEL = "app.kubernetes.io/instance"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
COMPONENT_LABEL = "app.kubernetes.io/component"
DEPLOYMENT_LABEL = f"{DOMAIN}/deployment"
REVISION_LABEL = f"{DOMAIN}/revision"
ROLE_LABEL = f"{DOMAIN}/role"

JOB_LABEL = f"{DOMAIN}/job"  # on a benchmark Job's pods: the Job they belong to

REVISION_ANNOTATION = f"{DOMAIN}/revision"
LAUNCH_PLAN_ANNOTATION = f"{DOMAIN}/launch-plan"
ATTEMPT_ANNOTATION = f"{DOMAIN}/attempt"  # a benchmark Job's gate attempt
STARTED_ANNOTATION = f"{DOMAIN}/started-at"  # when a candidate or twin was created
BASELINE_MODE_ANNOTATION = f"{DOMAIN}/baseline-mode"  # a Job's baseline: twin or stored
BASELINE_REASON_ANNOTATION = f"{DOMAIN}/baseline-reason"  # why (mode auto: why not the twin)
# The spec digest a revision's Deployment was created from (render/revision.py spec_digest).
SPEC_DIGEST_ANNOTATION = f"{DOMAIN}/spec-digest"
# Requests of people on the VLLMDeployment, and the operator's record of those it handled.
PROMOTE_ANNOTATION = f"{DOMAIN}/promote"
ABORT_ANNOTATION = f"{DOMAIN}/abort"
RERUN_ANNOTATION = f"{DOMAIN}/rerun-gate"
HANDLED_ANNOTATION = f"{DOMAIN}/handled"
# The newest verdict in one line (rollout/status.verdict_annotation), for the top of
# `kubectl describe` (it prints annotations before the spec); status.lastGate has it in full.
VERDICT_ANNOTATION = f"{DOMAIN}/verdict"
# Roll a pending operator update (rollout/upgrade.py): the new revision, or "true".
ROLL_OPERATOR_UPDATE_ANNOTATION = f"{DOMAIN}/roll-operator-update"
# calibrate=<N>: N A/A gate Jobs of the stable revision against its twin (rollout/calibration.py)
CALIBRATE_ANNOTATION = f"{DOMAIN}/calibrate"
# A candidate's canary: its step, when the step started and the counts scraped then
# (rollout/canary/phase.py); on the candidate's Deployment, so a restarted operator resumes it.
CANARY_ANNOTATION = f"{DOMAIN}/canary"
# A revision's benchmark figures (one line of JSON, the stored baseline once it is stable), on
# its own Deployment so status stays short; status keeps their digest (rollout/figures.py).
FIGURES_ANNOTATION = f"{DOMAIN}/figures"
# On the user's HTTPRoute during a gatewayAPI canary: its rules before the first split and as
# last written, so they are given back exactly (rollout/canary/route.py).
CANARY_ROUTE_ANNOTATION = f"{DOMAIN}/canary-route-rules"
# Not ours: the GPU product NVIDIA's GPU feature discovery puts on nodes.
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"

MANAGED_BY = "vllm-operator"
COMPONENT_SERVER = "server"
COMPONENT_BENCHMARK = "benchmark"
# The zero-traffic replica of the stable revision a twin-mode gate measures: its own
# component, so no selector of serving pods (Service or Deployment) ever matches it.
COMPONENT_TWIN = "twin"
# An A/A calibration Job (the stable revision against its twin): no gate's, never judged.
COMPONENT_CALIBRATION = "calibration"
# The worker pods of a multi-node group (render/leaderworkerset.py): they serve no HTTP, so
# no Service selects them (server_selector and canary_selector ask for COMPONENT_SERVER).
COMPONENT_WORKER = "worker"
ROLE_STABLE = "stable"
ROLE_CANDIDATE = "candidate"


def common_labels(name: str, component: str = COMPONENT_SERVER) -> dict[str, str]:
    """Labels of every object of one VLLMDeployment."""
    return {
        NAME_LABEL: "vllm",
        INSTANCE_LABEL: name,
        MANAGED_BY_LABEL: MANAGED_BY,
        COMPONENT_LABEL: component,
        DEPLOYMENT_LABEL: name,
    }


def revision_labels(name: str, revision: str, component: str = COMPONENT_SERVER) -> dict[str, str]:
    """Labels of the objects of one revision (Deployment, its pods, benchmark Jobs)."""
    return {**common_labels(name, component), REVISION_LABEL: revision}


def server_selector(name: str, revision: str) -> dict[str, str]:
    """Selects the vLLM pods of one revision (never a benchmark Job's pods)."""
    return {
        COMPONENT_LABEL: COMPONENT_SERVER,
        DEPLOYMENT_LABEL: name,
        REVISION_LABEL: revision,
    }


def canary_selector(name: str) -> dict[str, str]:
    """Selects the vLLM pods of every revision of ``name`` (stable and candidate alike, never
    a twin's or a Job's): the serving Service during a canary with traffic.mode replicas."""
    return {COMPONENT_LABEL: COMPONENT_SERVER, DEPLOYMENT_LABEL: name}


def twin_selector(name: str, revision: str) -> dict[str, str]:
    """Selects the pods of the twin of ``revision`` (never serving pods)."""
    return {
        COMPONENT_LABEL: COMPONENT_TWIN,
        DEPLOYMENT_LABEL: name,
        REVISION_LABEL: revision,
    }


SERVER_CONTAINER = "vllm"
"""The name of the vLLM server container in every pod the operator renders (a canary counts
only its restarts, never a sidecar's)."""
