"""The revision is the pod template: no change of a rendered template escapes the revision.

Three angles. Every leaf of a real rendered template, changed or removed, changes the
revision (the hash covers the whole template, not a hand-picked part of it). For generated
specs, the Deployment's template stripped of its identity is exactly what was hashed (nothing
is added to the pods after hashing), and two specs get the same revision exactly when they
render the same template. The identity stamping is undone exactly.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from render_cases import EXAMPLES, base_resource, load_example

from vllm_operator.api import parse_vllm_deployment
from vllm_operator.engine.policy import plan_launch
from vllm_operator.errors import SpecErrors
from vllm_operator.render import labels, render_deployment, revision_hash
from vllm_operator.render.deployment import pod_template
from vllm_operator.render.identity import with_identity, without_identity
from vllm_operator.render.revision import spec_digest, template_revision

Path = tuple[str | int, ...]


def leaves(value: Any, path: Path = ()) -> Iterator[tuple[Path, Any]]:
    """Every (path, scalar) of a JSON-like value."""
    if isinstance(value, dict):
        for key, child in value.items():
            yield from leaves(child, (*path, key))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            yield from leaves(child, (*path, i))
    else:
        yield path, value


def at(value: Any, path: Path) -> Any:
    for step in path:
        value = value[step]
    return value


def changed(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if value is None:
        return "x"
    return f"{value}x"


def deployment_of(raw: dict[str, Any]) -> dict[str, Any]:
    vd = parse_vllm_deployment(raw)
    launch = plan_launch(vd.spec)
    return render_deployment(vd, launch, revision_hash(vd.spec, launch), 2)


def rich_resource() -> dict[str, Any]:
    raw = base_resource()
    raw["spec"]["model"]["hfTokenSecret"] = {"name": "hf", "key": "token"}
    raw["spec"]["engine"]["env"] = [{"name": "A", "value": "1"}]
    raw["spec"]["engine"]["apiKeySecret"] = {"name": "key", "key": "k"}
    raw["spec"]["resources"] = {"gpus": 1, "cpu": "8", "memory": "48Gi"}
    raw["spec"]["scheduling"] = {
        "nodeSelector": {"gpu": "h100"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
        "runtimeClassName": "nvidia",
        "priorityClassName": "high",
    }
    return raw


@pytest.mark.parametrize("raw", [rich_resource(), *map(load_example, EXAMPLES)])
def test_every_leaf_of_the_template_is_in_the_revision(raw: dict[str, Any]) -> None:
    template = deployment_of(raw)["spec"]["template"]
    revision = template["metadata"]["labels"][labels.REVISION_LABEL]
    bare = without_identity(template)
    paths = [path for path, _ in leaves(bare)]
    assert len(paths) > 50  # the whole template, not a few sections
    for path in paths:
        mutated = copy.deepcopy(template)
        *parent, last = path
        at(mutated, tuple(parent))[last] = changed(at(mutated, path))
        assert template_revision(mutated) != revision, f"changing {path} kept the revision"
        removed = copy.deepcopy(template)
        del at(removed, tuple(parent))[last]  # type: ignore[arg-type]
        assert template_revision(removed) != revision, f"removing {path} kept the revision"


def test_identity_is_not_in_the_revision_and_is_restored_exactly() -> None:
    vd = parse_vllm_deployment(base_resource())
    bare = pod_template(vd.spec, plan_launch(vd.spec))
    one = with_identity(bare, "alpha", "r1")
    two = with_identity(bare, "beta", "r2")
    assert template_revision(one) == template_revision(two) == template_revision(bare)
    assert without_identity(one) == bare
    assert one["metadata"]["labels"][labels.REVISION_LABEL] == "r1"
    assert one["metadata"]["annotations"] == {labels.REVISION_ANNOTATION: "r1"}


IMAGES = ["vllm/vllm-openai:v0.16.0", "vllm/vllm-openai:v0.17.0", "vllm/vllm-openai:v0.17.1"]


@st.composite
def resources(draw: st.DrawFn) -> dict[str, Any]:
    """Valid resources that differ in pod-shaping and in non-pod fields."""
    raw = base_resource()
    spec = raw["spec"]
    engine = spec["engine"]
    engine["image"] = draw(st.sampled_from(IMAGES))
    engine["performanceMode"] = draw(st.sampled_from(["throughput", "balanced", "eager"]))
    if draw(st.booleans()):
        engine["version"] = engine["image"].rsplit(":v", 1)[1]
    if draw(st.booleans()):
        engine["env"] = [{"name": "A", "value": draw(st.sampled_from(["1", "2", "$x"]))}]
    if draw(st.booleans()):
        engine["extraArgs"] = ["--max-num-seqs", draw(st.sampled_from(["64", "128"]))]
    if draw(st.booleans()):
        engine["apiKeySecret"] = {"name": draw(st.sampled_from(["k1", "k2"]))}
    spec["resources"] = {"gpus": draw(st.integers(1, 2))}
    if draw(st.booleans()):
        spec["resources"]["memory"] = draw(st.sampled_from(["48Gi", "64Gi"]))
    if draw(st.booleans()):
        spec["scheduling"] = {"nodeSelector": {"gpu": draw(st.sampled_from(["a", "b"]))}}
    if draw(st.booleans()):
        spec["probes"] = {"warmupBudgetSeconds": draw(st.sampled_from([600, 900]))}
    spec["service"] = {
        "port": draw(st.sampled_from([8000, 9000])),
        "type": draw(st.sampled_from(["ClusterIP", "NodePort"])),
    }
    spec["replicas"] = draw(st.integers(0, 4))
    spec["gate"] = {"iterations": draw(st.integers(1, 3))}
    return raw


def rendered(raw: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    try:
        deployment = deployment_of(raw)
    except SpecErrors:
        return None  # a combination the engine policy refuses
    return deployment["metadata"]["labels"][labels.REVISION_LABEL], deployment["spec"]["template"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(resources())
def test_the_deployment_template_is_exactly_what_was_hashed(raw: dict[str, Any]) -> None:
    result = rendered(raw)
    if result is None:
        return
    revision, template = result
    vd = parse_vllm_deployment(raw)
    assert without_identity(template) == pod_template(vd.spec, plan_launch(vd.spec))
    assert template_revision(template) == revision


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(resources(), resources())
def test_same_revision_exactly_when_same_template(
    first: dict[str, Any], second: dict[str, Any]
) -> None:
    a, b = rendered(first), rendered(second)
    if a is None or b is None:
        return
    assert (a[0] == b[0]) == (without_identity(a[1]) == without_identity(b[1]))


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("replicas", 5),
        ("gate", {"iterations": 9}),
        ("rollout", {"candidateReplicas": 2}),
        ("service", {"type": "LoadBalancer"}),
    ],
)
def test_spec_digest_ignores_what_never_reaches_a_pod(path: str, value: Any) -> None:
    raw = base_resource()
    changed_raw = copy.deepcopy(raw)
    changed_raw["spec"][path] = value
    digest = spec_digest(parse_vllm_deployment(raw).spec)
    assert spec_digest(parse_vllm_deployment(changed_raw).spec) == digest


@pytest.mark.parametrize(
    ("section", "field", "value"),
    [
        ("model", "name", "Qwen/Qwen3-8B"),
        ("engine", "env", [{"name": "A", "value": "1"}]),
        ("engine", "version", "0.17.0"),  # same pods: the template decides, not the digest
        ("resources", "gpus", 2),
        ("scheduling", "nodeSelector", {"a": "b"}),
        ("service", "port", 9000),
        ("probes", "warmupBudgetSeconds", 600),
    ],
)
def test_spec_digest_follows_every_other_field(section: str, field: str, value: Any) -> None:
    raw = base_resource()
    changed_raw = copy.deepcopy(raw)
    changed_raw["spec"].setdefault(section, {})[field] = value
    digest = spec_digest(parse_vllm_deployment(raw).spec)
    assert spec_digest(parse_vllm_deployment(changed_raw).spec) != digest


def test_spec_digest_ignores_defaults_written_out() -> None:
    raw = base_resource()
    explicit = copy.deepcopy(raw)
    explicit["spec"]["engine"]["tensorParallelSize"] = 1
    explicit["spec"]["scheduling"] = {"nodeSelector": {}, "tolerations": []}
    digest = spec_digest(parse_vllm_deployment(raw).spec)
    assert spec_digest(parse_vllm_deployment(explicit).spec) == digest
