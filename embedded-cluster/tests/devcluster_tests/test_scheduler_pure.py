"""``devcluster.kubelet_scheduler``: nodeSelector and required node affinity, as kube-scheduler."""

from __future__ import annotations

from typing import Any

import pytest

from devcluster.kubelet_scheduler import MISMATCH, fits, unschedulable_reason

NODE = {"kubernetes.io/hostname": "devcluster", "nvidia.com/gpu.product": "H200", "n": "4"}


def _pod(selector: dict[str, str] | None = None, terms: list[Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if selector is not None:
        spec["nodeSelector"] = selector
    if terms is not None:
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
            }
        }
    return {"spec": spec}


def _expr(key: str, op: str, *values: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": key, "operator": op, "values": list(values)}]}


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        (_pod(), True),
        (_pod({"nvidia.com/gpu.product": "H200"}), True),
        (_pod({"nvidia.com/gpu.product": "H100"}), False),
        (_pod({"absent": "x"}), False),
        (_pod(terms=[_expr("nvidia.com/gpu.product", "In", "H100", "H200")]), True),
        (_pod(terms=[_expr("nvidia.com/gpu.product", "NotIn", "H200")]), False),
        (_pod(terms=[_expr("absent", "Exists")]), False),
        (_pod(terms=[_expr("absent", "DoesNotExist")]), True),
        (_pod(terms=[_expr("n", "Gt", "2")]), True),
        (_pod(terms=[_expr("n", "Lt", "2")]), False),
        # Terms are ORed, expressions within a term ANDed.
        (_pod(terms=[_expr("absent", "Exists"), _expr("n", "In", "4")]), True),
    ],
)
def test_fits(pod: dict[str, Any], expected: bool) -> None:
    assert fits(pod, NODE) is expected
    assert unschedulable_reason(pod, NODE) == (None if expected else MISMATCH)
