"""The VLLMDeployment API as pydantic models: the single source of truth.

The CRD in ``crds/`` is generated from these models by ``vllm-operator crds``; a test fails
when the committed file differs. Import from here::

    from vllm_operator.api import VLLMDeployment, parse_vllm_deployment
"""

from vllm_operator.api.gate_spec import GateSpec, Thresholds
from vllm_operator.api.resource import (
    API_VERSION,
    GROUP,
    KIND,
    PLURAL,
    SHORT_NAMES,
    SINGULAR,
    VERSION,
    ObjectMeta,
    VLLMDeployment,
    parse_spec,
    parse_vllm_deployment,
)
from vllm_operator.api.spec import (
    EngineSpec,
    ModelSpec,
    ResourcesSpec,
    RolloutSpec,
    VLLMDeploymentSpec,
)
from vllm_operator.api.status import (
    Condition,
    GateRecord,
    HistoryEntry,
    RevisionSummary,
    VLLMDeploymentStatus,
)
from vllm_operator.api.summary import BenchSummary, Verdict, VerdictOutcome

__all__ = [
    "API_VERSION",
    "GROUP",
    "KIND",
    "PLURAL",
    "SHORT_NAMES",
    "SINGULAR",
    "VERSION",
    "BenchSummary",
    "Condition",
    "EngineSpec",
    "GateRecord",
    "GateSpec",
    "HistoryEntry",
    "ModelSpec",
    "ObjectMeta",
    "ResourcesSpec",
    "RevisionSummary",
    "RolloutSpec",
    "Thresholds",
    "VLLMDeployment",
    "VLLMDeploymentSpec",
    "VLLMDeploymentStatus",
    "Verdict",
    "VerdictOutcome",
    "parse_spec",
    "parse_vllm_deployment",
]
