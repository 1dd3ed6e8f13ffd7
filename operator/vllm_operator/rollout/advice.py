"""What decides a held candidate, written as the commands a person runs.

A candidate in Holding waits for a person, and a person who has never seen the operator
does not know the annotations. The Holding message (status, the Stalled condition, so
``kubectl describe``), the GateHolding Event and the demo all carry the same text from
here: promote, abort, or measure again with more trials, each as an exact ``kubectl``
command for this resource, and the spec field that decides future inconclusive verdicts
without a person.
"""

from __future__ import annotations

import json

from vllm_operator.api.gate_spec import GateSpec
from vllm_operator.api.resource import VLLMDeployment
from vllm_operator.render.labels import ABORT_ANNOTATION, PROMOTE_ANNOTATION, RERUN_ANNOTATION


def _max_trials() -> int:
    for bound in GateSpec.model_fields["trials"].metadata:
        le = getattr(bound, "le", None)
        if isinstance(le, int):
            return le
    return 10


def annotate_command(vd: VLLMDeployment, key: str, value: str) -> str:
    """``kubectl annotate`` of this resource, overwriting an earlier value of ``key``."""
    meta = vd.metadata
    return f"kubectl -n {meta.namespace} annotate vllmd {meta.name} {key}={value} --overwrite"


def patch_trials_command(vd: VLLMDeployment, trials: int) -> str:
    """``kubectl patch`` setting ``spec.gate.trials`` (GitOps users edit their YAML)."""
    meta = vd.metadata
    body = json.dumps({"spec": {"gate": {"trials": trials}}}, separators=(",", ":"))
    return f"kubectl -n {meta.namespace} patch vllmd {meta.name} --type merge -p '{body}'"


def holding_advice(vd: VLLMDeployment, candidate: str) -> list[str]:
    """The choices a person has for a held ``candidate``, one per line."""
    trials = vd.spec.gate.trials
    more = min(trials * 2, _max_trials())
    rerun_token = "$(date +%s)"
    lines = [
        f"promote it: {annotate_command(vd, PROMOTE_ANNOTATION, candidate)}",
        f"reject it: {annotate_command(vd, ABORT_ANNOTATION, candidate)}",
    ]
    if trials < _max_trials():
        lines.append(
            f"measure again with more trials: set spec.gate.trials to {more} (now {trials}, "
            f"no new revision): {patch_trials_command(vd, more)}, then "
            f"{annotate_command(vd, RERUN_ANNOTATION, rerun_token)}"
        )
    else:
        lines.append(f"measure again: {annotate_command(vd, RERUN_ANNOTATION, rerun_token)}")
    lines.append(
        f"or let spec.rollout.onInconclusive decide without a person (now "
        f"{vd.spec.rollout.on_inconclusive}): reject removes such a candidate, rerun measures "
        "again up to spec.rollout.maxReruns times"
    )
    return lines


HELD = "held for a person. "
"""Ends the why of a Holding message; the choices follow, separated by ``CHOICES``."""
CHOICES = "; "


def holding_message(vd: VLLMDeployment, candidate: str, why: str) -> str:
    """The one-line Holding message: why the gate could not tell, then the choices."""
    choices = CHOICES.join(holding_advice(vd, candidate))
    return f"gate inconclusive on revision {candidate} ({why}); {HELD}{choices}"


def split_holding(message: str) -> tuple[str, list[str]]:
    """A Holding message as (why, choices), for a display with one choice per line."""
    why, held, choices = message.partition(HELD)
    if not held:
        return message, []
    return why + held.strip(), choices.split(CHOICES)
