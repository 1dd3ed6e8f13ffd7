"""Which Secrets a VLLMDeployment may put into the pods it makes.

``hfTokenSecret`` and ``apiKeySecret`` name a Secret of the resource's namespace, and the
operator puts it into a pod whose image and command the resource's author chooses: whoever
may create a VLLMDeployment may read those Secrets. The model (docs/security.md): creating a
VLLMDeployment is creating pods that mount Secrets of the namespace, and the chart's
aggregated roles give VLLMDeployment rights only to roles that already hold those rights.
Where authors are trusted less than that, the operator's ``--allowed-secret`` list narrows
what may be referenced without Secret read access or a webhook: a pattern
``<namespace>/<name>`` (shell-style ``*`` and ``?``, e.g. ``ml/hf-token`` or
``team-*/vllm-*``). Unset, any Secret of the namespace may be referenced; set, a reference
outside it is an invalid spec (nothing is created, what serves keeps serving).
"""

from __future__ import annotations

import fnmatch

from vllm_operator.api.resource import VLLMDeployment
from vllm_operator.errors import SpecError


def referenced_secrets(vd: VLLMDeployment) -> list[tuple[str, str]]:
    """(field, Secret name) of every Secret the spec puts into a pod."""
    found: list[tuple[str, str]] = []
    if vd.spec.model.hf_token_secret is not None:
        found.append(("spec.model.hfTokenSecret.name", vd.spec.model.hf_token_secret.name))
    if vd.spec.engine.api_key_secret is not None:
        found.append(("spec.engine.apiKeySecret.name", vd.spec.engine.api_key_secret.name))
    return found


def allowed(namespace: str, secret: str, patterns: tuple[str, ...]) -> bool:
    """Whether ``namespace/secret`` matches one of ``patterns``."""
    return any(fnmatch.fnmatchcase(f"{namespace}/{secret}", p) for p in patterns)


def secret_problems(vd: VLLMDeployment, patterns: tuple[str, ...] | None) -> list[SpecError]:
    """A SpecError for each referenced Secret outside the allow-list (None: no list)."""
    if patterns is None:
        return []
    namespace = vd.metadata.namespace
    return [
        SpecError(
            field,
            f"Secret {namespace}/{name} is not on the operator's allow-list of Secrets a "
            "VLLMDeployment may reference",
            f"reference an allowed Secret, or ask the operator's administrator to add "
            f"{namespace}/{name} (--allowed-secret)",
        )
        for field, name in referenced_secrets(vd)
        if not allowed(namespace, name, patterns)
    ]
