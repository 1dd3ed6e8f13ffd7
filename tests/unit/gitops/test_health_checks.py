"""What Argo CD and Flux conclude from a VLLMDeployment's status, for every phase.

Argo CD runs the chart's ``files/health.lua`` (here in Lua 5.1 through lupa, in a sandbox
with only the libraries Argo CD's gopher-lua offers). Flux judges custom resources with
kstatus; ``kstatus()`` below implements its generic rules (cli-utils
``checkGenericProperties`` + ``Compute``) so the samples show what Flux will report.

The samples come from the operator's own status builder (``rollout.status.build_status``)
when it is importable, and from hand-written statuses that follow the same convention
(docs/gitops.md) otherwise, so a change in either the operator or the Lua that would turn a
rejected revision green fails here.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from lupa import lua51

from builders import minimal_spec, resource
from vllm_operator.api.status import Phase, VLLMDeploymentStatus

ROOT = Path(__file__).resolve().parents[3]
HEALTH_LUA = ROOT / "charts" / "vllm-operator" / "files" / "health.lua"
PHASES: tuple[str, ...] = Phase.__args__

# The contract, per phase: (Argo CD health, kstatus status).
EXPECTED: dict[str, tuple[str, str]] = {
    "Pending": ("Progressing", "InProgress"),
    "Progressing": ("Progressing", "InProgress"),
    "Benchmarking": ("Progressing", "InProgress"),
    "Promoting": ("Progressing", "InProgress"),
    "Canary": ("Progressing", "InProgress"),
    "Serving": ("Healthy", "Current"),
    "Holding": ("Suspended", "Failed"),
    "Degraded": ("Degraded", "Failed"),
    "Failed": ("Degraded", "Failed"),
}
WORKING = {"Pending", "Progressing", "Benchmarking", "Canary", "Promoting"}
NEEDS_PERSON = {"Holding", "Degraded", "Failed"}


def argocd_health(obj: dict[str, Any]) -> dict[str, str]:
    """Run health.lua the way Argo CD does: ``obj`` global, the chunk returns ``hs``."""
    lua = lua51.LuaRuntime(unpack_returned_tuples=True)
    sandbox = lua.eval(
        "function(src, obj) "
        "  local env = {obj = obj, ipairs = ipairs, pairs = pairs, tostring = tostring, "
        "               tonumber = tonumber, type = type, next = next, string = string, "
        "               table = table, math = math} "
        "  local chunk = assert(loadstring(src, 'health.lua')) "
        "  setfenv(chunk, env) "
        "  return chunk() "
        "end"
    )
    hs = sandbox(HEALTH_LUA.read_text(encoding="utf-8"), lua.table_from(obj, recursive=True))
    return {"status": str(hs["status"]), "message": str(hs["message"] or "")}


def kstatus(obj: dict[str, Any]) -> str:
    """kstatus' verdict on a custom resource without type-specific rules."""
    if obj.get("metadata", {}).get("deletionTimestamp"):
        return "Terminating"
    generation = obj.get("metadata", {}).get("generation")
    observed = obj.get("status", {}).get("observedGeneration")
    if generation is not None and observed is not None and observed != generation:
        return "InProgress"
    for condition in obj.get("status", {}).get("conditions", []):
        if condition["type"] == "Reconciling" and condition["status"] == "True":
            return "InProgress"
        if condition["type"] == "Stalled" and condition["status"] == "True":
            return "Failed"
    return "Current"


def _hand_written_status(phase: str) -> dict[str, Any]:
    def cond(kind: str, on: bool) -> dict[str, Any]:
        return {"type": kind, "status": "True" if on else "False", "reason": phase}

    status = VLLMDeploymentStatus.model_validate(
        {
            "observedGeneration": 7,
            "phase": phase,
            "message": f"sample in phase {phase}",
            "conditions": [
                cond("Ready", phase == "Serving"),
                cond("Reconciling", phase in WORKING),
                cond("Stalled", phase in NEEDS_PERSON),
            ],
        }
    )
    return status.to_wire()


def _operator_status(phase: str) -> dict[str, Any]:
    status_module = pytest.importorskip("vllm_operator.rollout.status")
    built = status_module.build_status(
        VLLMDeploymentStatus(),
        status_module.Outcome(phase=phase, message=f"operator in {phase}", reason="Sample"),
        generation=7,
        now=datetime(2026, 11, 29, 15, 0, tzinfo=UTC),
        stable=None,
        candidate=None,
        history=[],
        warnings=[],
        gate=("Unknown", "AwaitingVerdict", ""),
    )
    wire: dict[str, Any] = built.to_wire()
    return wire


def _resource(status: dict[str, Any] | None, generation: int = 7) -> dict[str, Any]:
    obj = resource(minimal_spec("m"), namespace="llm", generation=generation)
    if status is not None:
        obj["status"] = status
    return obj


def test_contract_covers_every_phase() -> None:
    assert set(EXPECTED) == set(PHASES)
    outcomes = {argo for argo, _ in EXPECTED.values()}
    assert {"Healthy", "Progressing", "Degraded"} <= outcomes


@pytest.mark.parametrize("phase", PHASES)
def test_hand_written_samples(phase: str) -> None:
    obj = _resource(_hand_written_status(phase))
    argo, flux = EXPECTED[phase]
    health = argocd_health(obj)
    assert health["status"] == argo
    assert health["message"]
    assert kstatus(obj) == flux


@pytest.mark.parametrize("phase", PHASES)
def test_statuses_the_operator_writes(phase: str) -> None:
    obj = _resource(_operator_status(phase))
    argo, flux = EXPECTED[phase]
    assert argocd_health(obj)["status"] == argo
    assert kstatus(obj) == flux


@pytest.mark.parametrize("phase", PHASES)
def test_unobserved_generation_is_progressing(phase: str) -> None:
    obj = _resource(_hand_written_status(phase), generation=8)
    health = argocd_health(obj)
    assert health["status"] == "Progressing"
    assert "generation 8" in health["message"]
    assert kstatus(obj) == "InProgress"


def test_no_status_yet_is_progressing_for_argo() -> None:
    assert argocd_health(_resource(None))["status"] == "Progressing"
    # kstatus calls a resource without status or conditions Current: documented gap
    # (docs/gitops.md gives Flux healthCheckExprs that close it).
    assert kstatus(_resource(None)) == "Current"


def test_stalled_message_is_shown_and_wins_over_phase() -> None:
    status = _hand_written_status("Serving")
    for condition in status["conditions"]:
        if condition["type"] == "Stalled":
            condition.update(status="True", message="image pull failed: not found")
    health = argocd_health(_resource(status))
    assert health == {"status": "Degraded", "message": "image pull failed: not found"}


def test_serving_but_not_ready_is_not_healthy() -> None:
    status = _hand_written_status("Serving")
    status["conditions"][0].update(status="False", message="1/2 replicas ready")
    health = argocd_health(_resource(status))
    assert health == {"status": "Progressing", "message": "1/2 replicas ready"}


def test_unknown_phase_is_never_healthy() -> None:
    obj = _resource({"observedGeneration": 7, "phase": "Exploring", "message": "new"})
    assert argocd_health(obj)["status"] == "Unknown"


def test_kstatus_helper_follows_its_rules() -> None:
    deleting = _resource(_hand_written_status("Serving"))
    deleting["metadata"]["deletionTimestamp"] = "2026-11-29T15:00:00Z"
    assert kstatus(deleting) == "Terminating"


def test_docs_carry_the_same_lua() -> None:
    docs = (ROOT / "docs" / "gitops.md").read_text(encoding="utf-8")
    body = HEALTH_LUA.read_text(encoding="utf-8")
    indented = "\n".join(("    " + line).rstrip() for line in body.splitlines())
    assert indented in docs, "docs/gitops.md must embed files/health.lua verbatim (indented)"
