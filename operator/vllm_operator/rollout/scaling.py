"""Replicas under an autoscaler, the autoscaler itself, and the disruption budgets.

Three rules, each a pure function of the observed state:

- With ``spec.autoscaling`` the autoscaler owns ``replicas`` of the serving Deployment (of
  a multi-node revision, its LeaderWorkerSet: groups, through the set's scale subresource): the
  operator creates it at ``replicas`` (clamped to min..max) and never writes the count again,
  so it does not fight the HPA. Promotion scales the candidate to the stable Deployment's
  *current* count (what the HPA chose, observed each pass, not the spec's) before the
  serving Service switches, so capacity never drops.
- The autoscaler targets the revision the serving Service selects after this pass
  (``Pass.serving``): it moves in the same plan as the Service, and the gate's candidate is
  never its target. Without ``spec.autoscaling`` (or with another engine) it is deleted.
- One PodDisruptionBudget per serving revision, none for a candidate; a budget whose
  revision no longer serves is deleted in the pass that notices it. A multi-node revision's
  budget counts whole groups of its set's current replicas (``render_pdb``).
"""

from __future__ import annotations

from vllm_operator.api.reasons import EventReason
from vllm_operator.api.resource import VLLMDeployment
from vllm_operator.errors import SpecError
from vllm_operator.render.autoscaling import TargetKind, render_autoscaler, render_pdb
from vllm_operator.render.names import autoscaler_name
from vllm_operator.rollout.actions import Kind, Patch
from vllm_operator.rollout.context import Pass, Settings
from vllm_operator.rollout.scaling_view import differs

AUTOSCALER_KINDS: dict[str, Kind] = {"hpa": "HorizontalPodAutoscaler", "keda": "ScaledObject"}


def _kind(text: str) -> Kind:
    return "ScaledObject" if text == "ScaledObject" else "HorizontalPodAutoscaler"


def engine_problems(vd: VLLMDeployment, settings: Settings) -> list[SpecError]:
    """A SpecError when the spec asks for an autoscaler this operator may not manage."""
    spec = vd.spec.autoscaling
    if spec is None or spec.engine in settings.autoscaling_engines:
        return []
    enabled = ", ".join(settings.autoscaling_engines) or "none"
    flag = "autoscaling.keda=true" if spec.engine == "keda" else "autoscaling.enabled=true"
    return [
        SpecError(
            "spec.autoscaling.engine",
            f"{spec.engine} is not enabled in this operator (enabled: {enabled})",
            f"install the chart with {flag} (operator flag --autoscaling-engines), or "
            "remove spec.autoscaling",
        )
    ]


def serving_replicas(vd: VLLMDeployment, current: int | None) -> int:
    """The replicas the operator wants of the serving Deployment.

    Without autoscaling: ``spec.replicas``. With it: the count the autoscaler set
    (``current``), or ``spec.replicas`` clamped to min..max for a Deployment not yet created.
    """
    spec = vd.spec.autoscaling
    if spec is None:
        return vd.spec.replicas
    return spec.clamp(vd.spec.replicas) if current is None else current


def promotion_target(state: Pass, vd: VLLMDeployment, stable: str | None) -> int:
    """Replicas a passed candidate is scaled to before it serves.

    Under autoscaling, the stable revision's current count (the load it carries now),
    within the new spec's min..max; otherwise ``spec.replicas``.
    """
    spec = vd.spec.autoscaling
    if spec is None:
        return vd.spec.replicas
    dep = state.observed.deployment_of(stable) if stable is not None else None
    if dep is None or dep.deleting:
        return spec.clamp(vd.spec.replicas)
    return spec.clamp(dep.replicas)


def follow(state: Pass, vd: VLLMDeployment) -> None:
    """The autoscaler and the budgets follow ``state.serving``; everything else goes."""
    serving = state.serving
    _autoscaler(state, vd, serving)
    _budgets(state, vd, serving)


def _autoscaler(state: Pass, vd: VLLMDeployment, serving: str | None) -> None:
    spec = vd.spec.autoscaling
    wanted_kind = AUTOSCALER_KINDS[spec.engine] if spec is not None else None
    name = autoscaler_name(state.name)
    for other in state.observed.autoscalers:
        if other.deleting:
            continue
        if other.kind != wanted_kind or other.name != name or serving is None:
            state.delete(_kind(other.kind), other.name)
            state.event(
                "Normal", EventReason.AutoscalerRemoved, f"{other.kind} {other.name} deleted"
            )
    if spec is None or serving is None or wanted_kind is None:
        return
    target = state.observed.deployment_of(serving)
    if target is None:
        return  # never point an autoscaler at a Deployment that does not exist (yet)
    # A multi-node revision's LeaderWorkerSet: the autoscaler scales whole groups.
    kind: TargetKind = "LeaderWorkerSet" if target.kind == "LeaderWorkerSet" else "Deployment"
    manifest = render_autoscaler(vd, serving, kind)
    current = next(
        (
            a
            for a in state.observed.autoscalers
            if a.kind == wanted_kind and a.name == name and not a.deleting
        ),
        None,
    )
    if current is None:
        state.create(manifest)
        state.event(
            "Normal",
            EventReason.AutoscalerCreated,
            f"{wanted_kind} {name}: revision {serving}, {spec.min_replicas}..{spec.max_replicas} "
            "replicas",
        )
        return
    if differs(manifest["spec"], current.spec):
        state.actions.append(
            Patch(
                wanted_kind,
                name,
                {"metadata": {"annotations": manifest["metadata"]["annotations"]}}
                | {"spec": manifest["spec"]},
            )
        )
        if current.target != manifest["spec"]["scaleTargetRef"]["name"]:
            state.event(
                "Normal",
                EventReason.AutoscalerMoved,
                f"{wanted_kind} {name} now scales revision {serving}",
            )


def _budgets(state: Pass, vd: VLLMDeployment, serving: str | None) -> None:
    kept = False
    current = state.observed.deployment_of(serving) if serving is not None else None
    groups = current.replicas if current is not None else None
    for budget in state.observed.budgets:
        if budget.deleting:
            continue
        if serving is not None and budget.revision == serving:
            kept = True
            wanted = render_pdb(vd, serving, groups)
            if differs(wanted["spec"], budget.spec):
                state.actions.append(
                    Patch("PodDisruptionBudget", budget.name, {"spec": _replacing(wanted["spec"])})
                )
            continue
        state.delete("PodDisruptionBudget", budget.name)
    if serving is not None and not kept and current is not None:
        state.create(render_pdb(vd, serving, groups))


def _replacing(wanted: dict[str, object]) -> dict[str, object]:
    """The spec patch: the wanted fields, and null for the other of the two exclusive ones."""
    spec = dict(wanted)
    for key in ("maxUnavailable", "minAvailable"):
        spec.setdefault(key, None)
    return spec
