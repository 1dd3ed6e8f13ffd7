"""The plan for a resource the planner could not handle: say so in status, touch nothing.

``parse_vllm_deployment`` refuses what it knows to be unmanageable (too deep, numbers out
of range, unknown fields), and the planner reports that as ``InvalidSpec``. Anything it
does not foresee (a value the API accepted that makes rendering or hashing raise) would
otherwise escape the reconcile as an exception: the resource kept an empty status, no
Event said why, and the work queue retried it forever. ``unhandled`` turns such an
exception into the same ``InvalidSpec`` status and one Warning Event per generation, with
no action and no requeue: the stable revision keeps serving untouched, and the next spec
change (or the periodic resync) tries again.
"""

from __future__ import annotations

from datetime import datetime

from vllm_operator.errors import SpecError, SpecErrors
from vllm_operator.render import names
from vllm_operator.rollout import held
from vllm_operator.rollout.actions import Plan
from vllm_operator.rollout.context import Pass, Settings
from vllm_operator.rollout.observed import Observed

MESSAGE_LIMIT = 300
FIX = (
    "simplify the spec until `vllm-operator render -f <file>` accepts it; "
    "the stable revision keeps serving meanwhile"
)


def unhandled(
    observed: Observed, now: datetime, error: BaseException, settings: Settings | None = None
) -> Plan:
    """An ``InvalidSpec`` status (and Event) for ``error``, raised while planning."""
    state = Pass.begin(observed, now, settings)
    serving = observed.service(names.serving_service_name(observed.name))
    stable = serving.revision if serving is not None else None
    detail = f"{type(error).__name__}: {error}"
    if len(detail) > MESSAGE_LIMIT:
        detail = detail[:MESSAGE_LIMIT] + "..."
    problem = SpecError("spec", f"the operator cannot handle this resource ({detail})", FIX)
    status = held.invalid_spec(state, SpecErrors([problem]), stable)
    return Plan(status=status, events=tuple(state.events))
