"""The per-metric regression floors (issue 40) are bounded the same in the CRD the API server
enforces and in the model the operator and ``judge`` validate with."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from vllm_operator.api.gate_spec import Thresholds

ROOT = Path(__file__).resolve().parents[3]


def _slo_schema() -> dict[str, Any]:
    crd = yaml.safe_load((ROOT / "crds" / "vllm-operator.dev_vllmdeployments.yaml").read_text())
    root = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    gate = root["properties"]["spec"]["properties"]["gate"]
    slo: dict[str, Any] = gate["properties"]["thresholds"]["properties"]["slo"]
    return slo


@pytest.mark.parametrize(
    "where",
    [(), ("ttftMs",), ("itlMs",), ("tpotMs",), ("e2eMs",), ("levels", "itlMs")],
)
def test_every_floor_is_a_percentage_in_the_crd_and_in_the_model(where: tuple[str, ...]) -> None:
    node = _slo_schema()
    for key in where:
        node = node["properties"][key]
        if node.get("type") == "array":
            node = node["items"]
    field = node["properties"]["regressionFloorPercent"]
    assert (field["minimum"], field["maximum"]) == (0, 100)

    def doc(value: float) -> dict[str, Any]:
        slo: dict[str, Any] = {"itlMs": {"p99": 100}}
        target = slo
        if where[:1] == ("levels",):
            target = {"at": 8, "itlMs": {"p99": 100}}
            slo["levels"] = [target]
        inner = (
            target
            if not where or where == ("levels",)
            else target.setdefault(where[-1], {"p99": 100})
        )
        inner["regressionFloorPercent"] = value
        return {"slo": slo}

    for value in (0, 100):
        Thresholds.model_validate(doc(value))
    for value in (-0.001, 100.001):
        with pytest.raises(ValueError, match=r"regression_floor_percent|regressionFloorPercent"):
            Thresholds.model_validate(doc(value))
