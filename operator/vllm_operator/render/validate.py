"""Everything that makes a VLLMDeployment unrenderable, found in one pass.

The pydantic models check each field alone and the engine policy checks the launch; this
adds what only the rendered objects reveal (derived name lengths, resource quantities the
API server would reject, tolerations Kubernetes refuses) and merges all of it into one
``SpecErrors``, so ``render`` and the operator report every problem at once.
"""

from __future__ import annotations

import re

from vllm_operator.api.resource import VLLMDeployment
from vllm_operator.engine.policy import LaunchPlan, plan_launch
from vllm_operator.errors import SpecError, SpecErrors
from vllm_operator.render.names import check_name

# Kubernetes' quantity grammar (apimachinery resource.Quantity), without the sign.
_QUANTITY = re.compile(r"^(\d+(\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?$")


def check_quantity(field: str, text: str | None) -> list[SpecError]:
    """A positive Kubernetes quantity, or a SpecError naming ``field``."""
    if text is None:
        return []
    m = _QUANTITY.match(text)
    if m is None:
        return [
            SpecError(
                field,
                f"{text!r} is not a Kubernetes quantity",
                "write a number with an optional suffix, e.g. 8, 500m, 64Gi (not 64GB)",
            )
        ]
    if float(m.group(1)) <= 0:
        return [SpecError(field, f"{text!r} must be greater than zero", "")]
    return []


def _toleration_errors(vd: VLLMDeployment) -> list[SpecError]:
    errors: list[SpecError] = []
    for i, tol in enumerate(vd.spec.scheduling.tolerations):
        field = f"spec.scheduling.tolerations[{i}]"
        if tol.operator == "Exists" and tol.value:
            errors.append(
                SpecError(f"{field}.value", "must be empty when operator is Exists", "drop it")
            )
        if not tol.key and tol.operator != "Exists":
            errors.append(
                SpecError(
                    f"{field}.operator",
                    "must be Exists when key is empty",
                    "set operator: Exists or give a key",
                )
            )
        if tol.toleration_seconds is not None and tol.effect != "NoExecute":
            errors.append(
                SpecError(
                    f"{field}.tolerationSeconds",
                    "only applies to the NoExecute effect",
                    "set effect: NoExecute or drop tolerationSeconds",
                )
            )
    return errors


def object_errors(vd: VLLMDeployment) -> list[SpecError]:
    """What only the rendered objects reveal: derived names, quantities, tolerations.

    ``render_deployment`` refuses these itself, so a caller that planned the launch on its
    own (the planner) cannot render an object the API server would reject.
    """
    errors = check_name(vd.metadata.name)
    resources = vd.spec.resources
    errors += check_quantity("spec.resources.cpu", resources.cpu)
    errors += check_quantity("spec.resources.memory", resources.memory)
    errors += check_quantity("spec.resources.sharedMemory", resources.shared_memory)
    errors += _toleration_errors(vd)
    return errors


def check(vd: VLLMDeployment) -> LaunchPlan:
    """The launch plan of ``vd``; raises ``SpecErrors`` with every problem found."""
    errors: list[SpecError] = []
    plan: LaunchPlan | None = None
    try:
        plan = plan_launch(vd.spec)
    except SpecErrors as exc:
        errors += exc.errors
    errors += object_errors(vd)
    if errors or plan is None:
        raise SpecErrors(errors)
    return plan
