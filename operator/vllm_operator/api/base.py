"""Base model for every API type: camelCase on the wire, strict about unknown fields.

Kubernetes objects use camelCase; Python code uses snake_case. ``extra="forbid"`` turns a
misspelt field (``performanceMod``) into an error that names it instead of a silently
ignored setting, which is the most expensive kind of typo on a GPU cluster.
``allow_inf_nan=False``: JSON has no infinity, and a summary that says ``Infinity`` tok/s
(Python's json reads it) is not a measurement: every float of the API is finite.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class APIModel(BaseModel):
    """A spec or status fragment of the VLLMDeployment API."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        use_enum_values=True,
        allow_inf_nan=False,
    )

    def to_wire(self) -> dict[str, object]:
        """The JSON-compatible, camelCase form, without unset optional fields."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)
