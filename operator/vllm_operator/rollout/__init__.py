"""The rollout core: observed cluster state -> the next actions, status and Events.

Pure (no I/O): ``handlers`` reads the cluster through ``kube``, calls ``plan`` and applies
the result. Start at ``planner`` for the flow of one revision.
"""

from vllm_operator.rollout.actions import Create, Delete, Event, Patch, Plan
from vllm_operator.rollout.context import Settings
from vllm_operator.rollout.observed import Observed, finished_jobs_needing_logs, observe
from vllm_operator.rollout.planner import plan

__all__ = [
    "Create",
    "Delete",
    "Event",
    "Observed",
    "Patch",
    "Plan",
    "Settings",
    "finished_jobs_needing_logs",
    "observe",
    "plan",
]
