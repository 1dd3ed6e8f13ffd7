"""rollout.canary.route: a step splits only the serving backend's weight of the user's route,
and the route is given back exactly as it was."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from vllm_operator.rollout.canary.route import (
    ORIGINAL_ANNOTATION,
    candidate_share,
    restore_patch,
    shift_patch,
)
from vllm_operator.rollout.preview import apply_merge_patch

SERVING, CANDIDATE = "qwen", "qwen--candidate"


def route(rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "web", "namespace": "ml", "resourceVersion": "1"},
        "spec": {"parentRefs": [{"name": "gw"}], "rules": rules},
    }


def defaults(obj: dict[str, Any]) -> dict[str, Any]:
    """What Gateway API's CRD fills in on every backendRef (the API server stores it)."""
    for rule in obj["spec"]["rules"]:
        rule["backendRefs"] = [
            {"group": "", "kind": "Service", "weight": 1, **r} for r in rule["backendRefs"]
        ]
    return obj


class Api:
    """One HTTPRoute as an API server holds it: merge patches, optimistic concurrency, the
    CRD's defaults."""

    def __init__(self, obj: dict[str, Any]) -> None:
        self.obj = defaults(copy.deepcopy(obj))
        self.created = copy.deepcopy(self.obj)

    def patch(self, body: Any) -> None:
        assert isinstance(body, dict), body
        version = body.get("metadata", {}).get("resourceVersion")
        if version is not None and version != self.obj["metadata"]["resourceVersion"]:
            raise RuntimeError("409 Conflict")
        self.obj = defaults(apply_merge_patch(self.obj, body))
        self.obj["metadata"]["resourceVersion"] = str(
            int(self.obj["metadata"]["resourceVersion"]) + 1
        )

    def shift(self, weight: int, chosen: list[int] | None = None) -> Any:
        patch = shift_patch(
            self.obj, serving=SERVING, candidate=CANDIDATE, weight=weight, port=8000, chosen=chosen
        )
        if isinstance(patch, dict):
            self.patch(patch)
            again = shift_patch(
                self.obj, serving=SERVING, candidate=CANDIDATE, weight=weight, port=8000,
                chosen=chosen,
            )  # fmt: skip
            assert again is None, "the route as stored is the step's split: nothing to write"
        return patch

    def restore(self) -> None:
        self.patch(restore_patch(self.obj, SERVING, CANDIDATE))

    def weights(self, rule: int = 0) -> list[tuple[str, int]]:
        return [
            (r["name"], r.get("weight", 1)) for r in self.obj["spec"]["rules"][rule]["backendRefs"]
        ]


def shares(weights: list[tuple[str, int]]) -> dict[str, float]:
    total = sum(w for _, w in weights)
    return {name: 100 * w / total for name, w in weights}


SHARED = [
    {"backendRefs": [{"name": "other-model", "port": 80, "weight": 50},
                     {"name": SERVING, "port": 8000, "weight": 50}]},
]  # fmt: skip


def test_a_shared_route_keeps_the_other_backends_share() -> None:
    api = Api(route(SHARED))
    api.shift(10)
    assert shares(api.weights()) == pytest.approx(
        {"other-model": 50.0, SERVING: 45.0, CANDIDATE: 5.0}
    )
    assert candidate_share(api.obj, CANDIDATE) == 5.0  # of the route's traffic, in effect
    api.shift(50)
    assert shares(api.weights()) == pytest.approx(
        {"other-model": 50.0, SERVING: 25.0, CANDIDATE: 25.0}
    )
    api.restore()
    assert json.dumps(api.obj["spec"]["rules"]) == json.dumps(api.created["spec"]["rules"])
    assert ORIGINAL_ANNOTATION not in api.obj["metadata"]["annotations"]


FILTERED = [
    {"backendRefs": [{"name": SERVING, "port": 8000, "weight": 3, "filters": [
        {"type": "RequestHeaderModifier",
         "requestHeaderModifier": {"set": [{"name": "x-tenant", "value": "a"}]}}]}]},
]  # fmt: skip


def test_filters_on_the_serving_backend_are_kept_copied_and_restored() -> None:
    api = Api(route(FILTERED))
    api.shift(20)
    refs = api.obj["spec"]["rules"][0]["backendRefs"]
    assert [r["name"] for r in refs] == [SERVING, CANDIDATE]
    assert refs[0]["filters"] == refs[1]["filters"] == FILTERED[0]["backendRefs"][0]["filters"]
    assert shares(api.weights()) == pytest.approx({SERVING: 80.0, CANDIDATE: 20.0})
    api.restore()
    assert json.dumps(api.obj["spec"]["rules"]) == json.dumps(api.created["spec"]["rules"])


PINNED = [
    {"matches": [{"headers": [{"name": "x-pin", "value": "stable"}]}],
     "backendRefs": [{"name": SERVING, "port": 8000}]},
    {"matches": [{"path": {"type": "PathPrefix", "value": "/v1"}}],
     "backendRefs": [{"name": SERVING, "port": 8000}]},
]  # fmt: skip


def test_a_header_pinned_rule_is_untouched_unless_chosen() -> None:
    api = Api(route(PINNED))
    api.shift(10)
    assert api.obj["spec"]["rules"][0] == api.created["spec"]["rules"][0]
    assert api.weights(1) == [(SERVING, 90), (CANDIDATE, 10)]
    api.restore()
    assert json.dumps(api.obj["spec"]["rules"]) == json.dumps(api.created["spec"]["rules"])
    chosen = Api(route(PINNED))
    chosen.shift(10, chosen=[0])
    assert chosen.weights(0) == [(SERVING, 90), (CANDIDATE, 10)]
    assert chosen.obj["spec"]["rules"][1] == chosen.created["spec"]["rules"][1]
    only_pinned = Api(route(PINNED[:1]))
    assert "no rule without header or query matches names" in only_pinned.shift(10)


def test_a_concurrent_edit_is_refused_then_split_again_and_kept_after_restore() -> None:
    api = Api(route(SHARED))
    read = copy.deepcopy(api.obj)  # the operator read the route ...
    # ... then a person adds a backend before the operator writes:
    api.patch({"spec": {"rules": [{"backendRefs": [
        *SHARED[0]["backendRefs"], {"name": "fallback", "port": 80, "weight": 10}]}]}})  # fmt: skip
    stale = shift_patch(
        read, serving=SERVING, candidate=CANDIDATE, weight=10, port=8000, chosen=None
    )
    with pytest.raises(RuntimeError, match="409"):
        api.patch(stale)
    api.shift(10)  # the retried pass reads the route as it is now
    assert shares(api.weights()) == pytest.approx(
        {"other-model": 500 / 11, SERVING: 450 / 11, CANDIDATE: 50 / 11, "fallback": 100 / 11}
    )
    # An edit during the step (not by the operator): giving back keeps it, minus the canary.
    rules = copy.deepcopy(api.obj["spec"]["rules"])
    rules[0]["backendRefs"][0]["weight"] = 6000  # other-model raised
    api.patch({"spec": {"rules": rules}})
    api.restore()
    assert shares(api.weights()) == pytest.approx(
        {"other-model": 6000 / 12000 * 100, SERVING: 5000 / 12000 * 100,
         "fallback": 1000 / 12000 * 100}
    )  # fmt: skip


def test_weights_too_large_to_split_are_refused_with_a_message() -> None:
    big = [{"backendRefs": [{"name": SERVING, "port": 8000, "weight": 999_999},
                            {"name": "x", "port": 80, "weight": 999_998}]}]  # fmt: skip
    message = Api(route(big)).shift(10)
    assert isinstance(message, str)
    assert "too large to split" in message
