"""The launch record: what a revision's Deployment says about how its vLLM was started.

The operator computes a revision's launch plan once per pass (``engine.policy.plan_launch``)
and keeps its essentials on the revision's Deployment, in the ``launch-plan`` annotation
(``render.labels.LAUNCH_PLAN_ANNOTATION``), so a restarted operator, or one that no longer
renders the spec the same way, can still summarise the revision in status. This model is
the one owner of that annotation's shape: the render writes it with ``to_annotation`` and
every reader goes through ``from_annotation``.

The annotation is JSON with sorted keys and no whitespace, ASCII only. Reading tolerates
what a person or another tool may have done to it: keys it does not know are ignored, and
an annotation that is missing, empty or not a record of the right shape reads as ``None``
(the revision is then summarised from the spec, or from its pod template's image).
"""

from __future__ import annotations

import json

from pydantic import Field, ValidationError

from vllm_operator.api.base import APIModel


class LaunchRecord(APIModel):
    """The essentials of one revision's launch plan, as kept on its Deployment."""

    model_config = APIModel.model_config | {"extra": "ignore"}

    image: str = Field(description="vLLM image the pods run.")
    version: str = Field(description="vLLM version the flags were chosen for.")
    performance_mode: str = Field(description="Performance mode of the revision.")
    compiled: bool = Field(description="Whether the pods run torch.compile and CUDA graphs.")
    library_path_fix: str = Field(description="strip-cuda, unset or none.")
    key_flags: list[str] = Field(description="The flags that decide performance.")

    def to_annotation(self) -> str:
        """The annotation's value: canonical JSON (sorted keys, no whitespace, ASCII)."""
        return json.dumps(
            self.model_dump(mode="json", by_alias=True),
            sort_keys=True,
            separators=(",", ":"),
        )

    @classmethod
    def from_annotation(cls, text: object) -> LaunchRecord | None:
        """The record in an annotation's value, or None when there is none to read."""
        if not isinstance(text, str) or not text:
            return None
        try:
            raw = json.loads(text)
        except (ValueError, RecursionError):
            return None
        if not isinstance(raw, dict) or not raw:
            return None
        try:
            return cls.model_validate(raw)
        except ValidationError:
            return None
