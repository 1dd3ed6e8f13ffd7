"""The VLLMDeployment resource: identity constants and parsing of a raw object.

``parse_vllm_deployment`` is the one door from untrusted YAML/JSON into typed values: every
validation problem comes out as a ``SpecErrors`` whose entries name the field
(``spec.engine.performanceMode``) and the fix, never as a pydantic traceback.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, ValidationError

from vllm_operator.api.affinity import check_affinity
from vllm_operator.api.base import APIModel
from vllm_operator.api.fixes import field_location, fix_for
from vllm_operator.api.limits import check_raw, child_path, describe
from vllm_operator.api.spec import VLLMDeploymentSpec
from vllm_operator.api.status import VLLMDeploymentStatus
from vllm_operator.errors import SpecError, SpecErrors

GROUP = "vllm-operator.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "VLLMDeployment"
PLURAL = "vllmdeployments"
SINGULAR = "vllmdeployment"
SHORT_NAMES = ("vllmd",)

# Names: every child is named ``<name>--<suffix>`` (render/names.py); the CRD refuses a
# name that leaves no room for the longest child name, so the limits live here, in the API.
MAX_OBJECT_NAME = 63
REVISION_LENGTH = 10
# Gate attempts are numbered from 1; room is kept for three digits.
MAX_ATTEMPT_DIGITS = 3
SEPARATOR = "--"
# The Job's "--gate-" + revision + "-" + attempt is the longest suffix.
_LONGEST_SUFFIX = len(SEPARATOR + "gate-") + REVISION_LENGTH + 1 + MAX_ATTEMPT_DIGITS
MAX_NAME_LENGTH = MAX_OBJECT_NAME - _LONGEST_SUFFIX  # 42


class ObjectMeta(APIModel):
    """The parts of metadata the operator reads."""

    model_config = APIModel.model_config | {"extra": "ignore"}

    name: str = Field(min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    namespace: str = Field(default="default")
    uid: str | None = None
    generation: int | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class VLLMDeployment(APIModel):
    """A parsed VLLMDeployment: metadata, spec and (possibly empty) status."""

    model_config = APIModel.model_config | {"extra": "ignore"}

    api_version: str = Field(default=API_VERSION)
    kind: str = Field(default=KIND)
    metadata: ObjectMeta
    spec: VLLMDeploymentSpec
    status: VLLMDeploymentStatus = Field(default_factory=VLLMDeploymentStatus)


def _field_path(loc: tuple[int | str, ...], prefix: str) -> str:
    path = prefix
    for item in loc:
        path = f"{path}[{item}]" if isinstance(item, int) else child_path(path, item)
    return path


def spec_errors_from(
    exc: ValidationError, prefix: str = "", model: type[BaseModel] | None = None
) -> SpecErrors:
    """Translate a pydantic ValidationError into SpecErrors naming each field (camelCase),
    each with a fix (``api/fixes.py``; ``model``, the model validated, gives a misspelt
    field its "did you mean")."""
    errors: list[SpecError] = []
    for err in exc.errors():
        loc = field_location(err["loc"])
        path = _field_path(loc, prefix)
        errors.append(
            SpecError(path, str(err["msg"]), fix_for({**err, "loc": loc}, path, None, model))
        )
    return SpecErrors(errors)


def parse_vllm_deployment(obj: dict[str, Any]) -> VLLMDeployment:
    """Validate a raw object (from YAML or the API) into a ``VLLMDeployment``.

    Raises ``SpecErrors`` listing every problem with its field path.
    """
    problems: list[SpecError] = []
    if obj.get("apiVersion") not in (None, API_VERSION):
        problems.append(
            SpecError("apiVersion", f"is {describe(obj.get('apiVersion'))}", f"use {API_VERSION}")
        )
    if obj.get("kind") not in (None, KIND):
        problems.append(SpecError("kind", f"is {describe(obj.get('kind'))}", f"use {KIND}"))
    if "spec" not in obj or not isinstance(obj.get("spec"), dict):
        problems.append(SpecError("spec", "is missing", "add a spec with model and engine"))
    if problems:
        raise SpecErrors(problems)
    for part in ("spec", "status"):
        problems += check_raw(obj.get(part), part)
    if problems:
        raise SpecErrors(problems)
    problems = _free_form(obj["spec"], "spec")
    try:
        vd = VLLMDeployment.model_validate(obj)
    except ValidationError as exc:
        raise SpecErrors(spec_errors_from(exc, model=VLLMDeployment).errors + problems) from None
    if problems:
        raise SpecErrors(problems)
    return vd


def _free_form(spec: dict[str, Any], prefix: str) -> list[SpecError]:
    """Problems of the free-form fields the models take as they are (the affinity)."""
    scheduling = spec.get("scheduling")
    if not isinstance(scheduling, dict):
        return []
    return check_affinity(scheduling.get("affinity"), f"{prefix}.scheduling.affinity")


def parse_spec(spec: dict[str, Any]) -> VLLMDeploymentSpec:
    """Validate only a spec (as kopf hands it to a handler)."""
    problems = check_raw(spec, "spec")
    if problems:
        raise SpecErrors(problems)
    problems = _free_form(spec, "spec")
    try:
        parsed = VLLMDeploymentSpec.model_validate(spec)
    except ValidationError as exc:
        raise SpecErrors(
            spec_errors_from(exc, prefix="spec", model=VLLMDeploymentSpec).errors + problems
        ) from None
    if problems:
        raise SpecErrors(problems)
    return parsed
