"""Names of everything one VLLMDeployment owns, and the rules that keep them valid and apart.

Every child name is the resource's name, ``--``, then a suffix naming the child's role:
``<name>--<revision>`` (Deployment), ``<name>--candidate`` (Service),
``<name>--gate-<revision>-<attempt>`` (Job). A VLLMDeployment name may not contain ``--``, so
the first ``--`` of a child name ends the resource's name: two resources can never derive the
same child name, and no resource can be named like another's child. (Before, a resource
named ``beta-candidate`` was the candidate Service of ``beta``, and ``beta``'s gate measured
the other resource's pods; issue 10.) The serving Service keeps the resource's own name,
which clients use; it cannot collide with a child name either, since it has no ``--``.

Child names are Kubernetes object names (DNS-1123 labels, at most 63 characters) and the
Services' names must also start with a letter (DNS-1035). The longest derived name is the
benchmark Job's, so the VLLMDeployment's own name is limited to what leaves room for it;
checking this up front turns "the Job could not be created" halfway through a rollout into
a spec error on ``metadata.name``. New children add a function here built with ``_child``
and a distinct suffix (not a 10-character revision alone), and keep the Job's suffix the
longest (the limits are in ``api.resource``, which the CRD's validation rules also use).
"""

from __future__ import annotations

import re

from vllm_operator.api.resource import (
    MAX_ATTEMPT_DIGITS,
    MAX_NAME_LENGTH,
    MAX_OBJECT_NAME,
    REVISION_LENGTH,
    SEPARATOR,
)
from vllm_operator.errors import SpecError

__all__ = [
    "MAX_ATTEMPT_DIGITS",
    "MAX_NAME_LENGTH",
    "MAX_OBJECT_NAME",
    "REVISION_LENGTH",
    "SEPARATOR",
]

_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")

# A Service named "vllm" makes the kubelet inject VLLM_PORT=tcp://... into every pod of the
# namespace that keeps service links on, and vLLM refuses to start there (vllm-facts).
RESERVED_NAMES = frozenset({"vllm"})


def _child(name: str, suffix: str) -> str:
    """The name of one child of ``name``: the resource name, ``--``, the child's suffix."""
    return f"{name}{SEPARATOR}{suffix}"


def deployment_name(name: str, revision: str) -> str:
    """The Deployment of one revision."""
    return _child(name, revision)


def serving_service_name(name: str) -> str:
    """The Service clients use; it selects the stable revision."""
    return name


def candidate_service_name(name: str) -> str:
    """The Service the benchmark Job measures; it selects the candidate revision."""
    return _child(name, "candidate")


def twin_deployment_name(name: str, revision: str) -> str:
    """The zero-traffic twin of the stable ``revision``, measured beside a candidate."""
    return _child(name, f"twin-{revision}")


def twin_service_name(name: str) -> str:
    """The Service the benchmark Job measures the twin through; it selects only the twin."""
    return _child(name, "twin")


def autoscaler_name(name: str) -> str:
    """The HorizontalPodAutoscaler (or KEDA ScaledObject) of the serving revision: the
    resource's own name, like the serving Service it follows (another kind, so no clash)."""
    return name


def disruption_budget_name(name: str, revision: str) -> str:
    """The PodDisruptionBudget of a serving revision: named like its Deployment."""
    return deployment_name(name, revision)


def job_name(name: str, revision: str, attempt: int) -> str:
    """The benchmark Job of one gate attempt (attempts count from 1)."""
    if attempt < 1:
        raise ValueError(f"attempt counts from 1, got {attempt}")
    return _child(name, f"gate-{revision}-{attempt}")


def calibration_job_name(name: str, token: str, index: int) -> str:
    """The ``index``-th A/A Job (from 1) of the calibration ``token`` names."""
    if index < 1:
        raise ValueError(f"index counts from 1, got {index}")
    return _child(name, f"calibrate-{token}-{index}")


def check_name(name: str) -> list[SpecError]:
    """Problems with a VLLMDeployment name as the stem of every derived name."""
    errors: list[SpecError] = []
    if len(name) > MAX_NAME_LENGTH:
        longest = job_name(name, "r" * REVISION_LENGTH, 10**MAX_ATTEMPT_DIGITS - 1)
        errors.append(
            SpecError(
                "metadata.name",
                f"is {len(name)} characters; derived names such as the benchmark Job "
                f"({len(longest)} characters) must stay within {MAX_OBJECT_NAME}",
                f"use at most {MAX_NAME_LENGTH} characters",
            )
        )
    if not _DNS1035.match(name):
        errors.append(
            SpecError(
                "metadata.name",
                f"{name!r} is not a valid Service name (lowercase letters, digits and '-', "
                "starting with a letter)",
                "start the name with a letter and use only a-z, 0-9 and '-'",
            )
        )
    if SEPARATOR in name:
        errors.append(
            SpecError(
                "metadata.name",
                f"{name!r} contains {SEPARATOR!r}, which separates a resource's name from the "
                "suffix of the objects it owns (e.g. <name>--candidate)",
                f"use single '-' between words, e.g. {re.sub('-{2,}', '-', name)!r}",
            )
        )
    if name in RESERVED_NAMES:
        errors.append(
            SpecError(
                "metadata.name",
                f"a Service named {name!r} injects {name.upper()}_PORT=tcp://... into pods "
                "with service links, and vLLM refuses to start with it",
                "choose another name, e.g. vllm-qwen3",
            )
        )
    return errors
