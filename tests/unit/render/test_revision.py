"""The revision hash: stable across runs and dict order, sensitive only to pod inputs."""

from __future__ import annotations

import copy
import random
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_operator.api import parse_spec
from vllm_operator.engine.policy import plan_launch
from vllm_operator.render import revision_hash

BASE: dict[str, Any] = {
    "model": {"name": "Qwen/Qwen3-30B-A3B-Instruct-2507-GPTQ-Int4", "servedModelName": "qwen"},
    "engine": {
        "image": "vllm/vllm-openai:v0.17.0",
        "performanceMode": "throughput",
        "extraArgs": ["--max-num-seqs", "64"],
        "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
    },
    "resources": {"gpus": 1, "cpu": "8", "memory": "48Gi"},
    "scheduling": {"nodeSelector": {"a": "1", "b": "2", "c": "3"}},
    "gate": {"thresholds": {"latencyMs": {"medium": 1500}}},
}


def h(raw: dict[str, Any]) -> str:
    spec = parse_spec(raw)
    return revision_hash(spec, plan_launch(spec))


def shuffled(value: Any, rng: random.Random) -> Any:
    """The same data with every mapping's keys in a random order (lists keep theirs)."""
    if isinstance(value, dict):
        keys = list(value)
        rng.shuffle(keys)
        return {k: shuffled(value[k], rng) for k in keys}
    if isinstance(value, list):
        return [shuffled(x, rng) for x in value]
    return value


def test_format_and_known_value_is_stable_across_runs() -> None:
    first = h(BASE)
    assert re.fullmatch(r"[0-9a-f]{10}", first)
    assert h(copy.deepcopy(BASE)) == first


@settings(max_examples=30, deadline=None)
@given(st.randoms(use_true_random=False))
def test_dict_order_does_not_matter(rng: random.Random) -> None:
    assert h(shuffled(BASE, rng)) == h(BASE)


@settings(max_examples=30, deadline=None)
@given(
    st.dictionaries(
        st.from_regex(r"[a-z][a-z0-9.-]{0,10}", fullmatch=True),
        st.text(max_size=8),
        max_size=6,
    ),
    st.randoms(use_true_random=False),
)
def test_node_selector_order_never_matters(selector: dict[str, str], rng: random.Random) -> None:
    raw = copy.deepcopy(BASE)
    raw["scheduling"]["nodeSelector"] = selector
    again = copy.deepcopy(raw)
    again["scheduling"]["nodeSelector"] = shuffled(selector, rng)
    assert h(again) == h(raw)


def with_change(path: str, value: Any) -> dict[str, Any]:
    raw = copy.deepcopy(BASE)
    node = raw
    *parents, leaf = path.split(".")
    for key in parents:
        node = node.setdefault(key, {})
    node[leaf] = value
    return raw


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("engine.image", "vllm/vllm-openai:v0.17.1"),
        ("engine.performanceMode", "balanced"),
        ("engine.extraArgs", ["--max-num-seqs", "128"]),
        ("engine.env", [{"name": "A", "value": "1"}, {"name": "B", "value": "3"}]),
        ("engine.libraryPathFix", "none"),
        ("model.name", "Qwen/Qwen3-8B"),
        ("model.revision", "main"),
        ("model.servedModelName", "other"),
        ("resources.gpus", 2),
        ("resources.memory", "64Gi"),
        ("resources.sharedMemory", "8Gi"),
        ("scheduling.tolerations", [{"operator": "Exists"}]),
        ("service.port", 9000),
        ("probes.warmupBudgetSeconds", 600),
        ("engine.apiKeySecret", {"name": "vllm-key"}),
    ],
)
def test_pod_changes_make_a_new_revision(path: str, value: Any) -> None:
    assert h(with_change(path, value)) != h(BASE)


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("gate.thresholds", {"latencyMs": {"medium": 900}}),
        ("gate.iterations", 9),
        ("gate.enabled", False),
        ("replicas", 7),
        ("rollout.candidateReplicas", 2),
        ("rollout.onInconclusive", "reject"),
        ("rollout.progressDeadlineSeconds", 600),
        ("service.type", "LoadBalancer"),
    ],
)
def test_non_pod_changes_keep_the_revision(path: str, value: Any) -> None:
    assert h(with_change(path, value)) == h(BASE)


def test_defaults_written_out_or_omitted_are_the_same_revision() -> None:
    explicit = with_change("engine.libraryPathFix", "auto")
    explicit["engine"]["tensorParallelSize"] = 1
    explicit["engine"]["version"] = "0.17.0"
    explicit["service"] = {"port": 8000}
    assert h(explicit) == h(BASE)


def test_api_key_secret_reference_is_part_of_the_revision() -> None:
    keyed = h(with_change("engine.apiKeySecret", {"name": "vllm-key", "key": "k"}))
    assert keyed != h(with_change("engine.apiKeySecret", {"name": "other", "key": "k"}))
    assert keyed != h(with_change("engine.apiKeySecret", {"name": "vllm-key", "key": "j"}))
    # Leaving it out (or null) keeps the revisions made before the field existed.
    assert h(with_change("engine.apiKeySecret", None)) == h(BASE)
