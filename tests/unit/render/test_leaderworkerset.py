"""Multi-node revisions: the LeaderWorkerSet, its leader and worker commands, per release."""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from builders import minimal_spec, resource
from devcluster.kubelet_launch import expand_vars
from vllm_operator.api import parse_vllm_deployment
from vllm_operator.engine import argv, extra_args, flagdata, multinode, ray_group
from vllm_operator.engine.policy import plan_launch
from vllm_operator.engine.version import Version
from vllm_operator.errors import SpecErrors
from vllm_operator.render import labels, render_all, revision_hash
from vllm_operator.render.identity import without_identity
from vllm_operator.render.leaderworkerset import (
    EXCLUSIVE_TOPOLOGY_ANNOTATION as EXCLUSIVE,
)
from vllm_operator.render.leaderworkerset import render_leaderworkerset

CRD = Path(__file__).parent / "crds" / "leaderworkerset.x-k8s.io_leaderworkersets.yaml"
NATIVE = ["0.11.1", "0.16.0", "0.17.0", "0.22.0", "0.33.0"]
RAY_ONLY = ["0.10.2", "0.11.0"]
# What LeaderWorkerSet puts in a pod's environment, as the kubelet substitutes it.
LEADER = "qwen--0123456789-0.qwen--0123456789.default"


def two_nodes(version: str, **resources: Any) -> dict[str, Any]:
    spec = minimal_spec(image=f"vllm/vllm-openai:v{version}", tensorParallelSize=8)
    spec["engine"]["extraArgs"] = ["--pipeline-parallel-size", "2"]
    spec["resources"] = {"gpus": 8, "nodes": 2, **resources}
    return spec


def lws_of(spec: dict[str, Any], replicas: int = 1) -> dict[str, Any]:
    vd = parse_vllm_deployment(resource(spec))
    launch = plan_launch(vd.spec)
    return render_leaderworkerset(vd, launch, revision_hash(vd.spec, launch), replicas)


def container(lws: dict[str, Any], role: str) -> dict[str, Any]:
    (found,) = lws["spec"]["leaderWorkerTemplate"][role]["spec"]["containers"]
    assert isinstance(found, dict)
    return found


def as_kubelet_runs(args: list[str], index: int) -> list[str]:
    """The arguments after the kubelet's $(VAR) expansion (the embedded kubelet's rule)."""
    env = {"LWS_LEADER_ADDRESS": LEADER, "LWS_WORKER_INDEX": str(index)}
    return [expand_vars(arg, env) for arg in args]


@pytest.mark.parametrize("version", NATIVE)
def test_leader_and_worker_commands_are_accepted_by_the_releases_own_parser(
    version: str,
) -> None:
    lws = lws_of(two_nodes(version))
    table = flagdata.table(Version.parse(version))
    for role, index in (("leaderTemplate", 0), ("workerTemplate", 1)):
        args = as_kubelet_runs(container(lws, role)["args"], index)
        parsed = argv.parse(table, args)
        assert parsed.accepted, (role, parsed.failure, parsed.exception)
        assert not extra_args.after_parse(parsed, table).refusals, role
        assert parsed.value("nnodes") == 2
        assert parsed.value("node_rank") == index
        assert parsed.value("master_addr") == LEADER
        assert parsed.value("master_port") == multinode.MASTER_PORT
        assert parsed.value("tensor_parallel_size") * parsed.value("pipeline_parallel_size") == 16
        assert bool(parsed.value("headless")) is (index > 0)


@pytest.mark.parametrize("version", RAY_ONLY)
def test_a_ray_group_is_rendered_as_vllms_lws_example_does(version: str) -> None:
    """Leader: the Ray head, then `vllm serve ... --distributed-executor-backend ray`, whose
    arguments the release's recorded parser accepts; workers: join the head, no vLLM."""
    lws = lws_of(two_nodes(version))
    table = flagdata.table(Version.parse(version))
    leader, worker = container(lws, "leaderTemplate"), container(lws, "workerTemplate")
    assert leader["command"] == ray_group.leader_command()
    assert worker["command"] == ray_group.worker_command()
    parsed = argv.parse(table, as_kubelet_runs(leader["args"], 0))
    assert parsed.accepted, (parsed.failure, parsed.exception)
    assert not extra_args.after_parse(parsed, table).refusals
    assert parsed.value("distributed_executor_backend") == "ray"
    assert parsed.value("tensor_parallel_size") * parsed.value("pipeline_parallel_size") == 16
    assert table.by_dest.get("nnodes") is None
    assert as_kubelet_runs(worker["args"], 1) == [LEADER]
    env = {e["name"]: e.get("value") for e in leader["env"]}
    assert env[ray_group.NODES_ENV] == "2"
    assert {"ports", "startupProbe", "readinessProbe", "livenessProbe"} <= set(leader)
    assert not {"ports", "startupProbe", "readinessProbe", "livenessProbe"} & set(worker)
    for key in ("image", "env", "volumeMounts", "resources", "securityContext"):
        assert worker[key] == leader[key], key


@pytest.mark.parametrize("version", NATIVE)
def test_a_native_group_runs_no_ray(version: str) -> None:
    lws = lws_of(two_nodes(version))
    for role in ("leaderTemplate", "workerTemplate"):
        found = container(lws, role)
        assert "--distributed-executor-backend" not in found["args"]
        assert ray_group.NODES_ENV not in {e["name"] for e in found["env"]}


def _without(table: flagdata.FlagTable, drop: Callable[[flagdata.Option], bool]) -> Any:
    options = tuple(o for o in table.options if not drop(o))
    return dataclasses.replace(
        table,
        options=options,
        by_dest={o.dest: o for o in options},
        by_spelling={s: o for o in options for s in o.spellings},
    )


def _group_errors(table: flagdata.FlagTable) -> list[Any]:
    return multinode.group_errors(
        nodes=2, gpus=8, tensor_parallel=8, pipeline_parallel=2, data_parallel=1, table=table
    )


@pytest.mark.parametrize("version", ["0.11.0", "0.22.0"])
def test_a_release_that_can_span_nodes_neither_way_is_refused_by_name(version: str) -> None:
    """The backend is read from the table: take away what the release has (the native
    flags, then the ray choice) and the spec is refused, naming the field and the fix."""
    table = flagdata.table(Version.parse(version))
    assert not _group_errors(table)
    no_native = _without(table, lambda o: bool(set(o.spellings) & set(multinode.NATIVE_FLAGS)))
    assert multinode.group_backend(no_native) == multinode.RAY
    missing = _without(no_native, lambda o: o.dest == "distributed_executor_backend")
    assert multinode.group_backend(missing) is None
    (error,) = _group_errors(missing)
    assert error.field == "spec.resources.nodes"
    assert "--distributed-executor-backend" in error.message
    assert "0.11.1" in error.fix


def test_a_backend_without_a_ray_choice_is_no_ray_backend() -> None:
    table = flagdata.table(Version.parse("0.11.0"))
    option = table.by_dest["distributed_executor_backend"]
    schema = json.loads(json.dumps(option.engine_field).replace('"ray"', '"other"'))
    changed = dataclasses.replace(option, engine_field=schema)
    replaced = _without(table, lambda o: o is option)
    replaced = dataclasses.replace(
        replaced,
        options=(*replaced.options, changed),
        by_dest={**replaced.by_dest, changed.dest: changed},
    )
    assert multinode.has_ray_backend(table)
    assert not multinode.has_ray_backend(replaced)
    assert multinode.group_backend(replaced) is None


@pytest.mark.parametrize("version", RAY_ONLY)
def test_a_ray_group_is_sized_like_a_native_one(version: str) -> None:
    spec = two_nodes(version)
    spec["engine"]["extraArgs"] = ["--pipeline-parallel-size", "3"]
    vd = parse_vllm_deployment(resource(spec))
    with pytest.raises(SpecErrors) as caught:
        plan_launch(vd.spec)
    (error,) = caught.value.errors
    assert error.field == "spec.engine.tensorParallelSize"
    assert "one worker per GPU" in error.message


@pytest.mark.parametrize("version", RAY_ONLY)
def test_the_ray_backend_is_the_operators_on_a_group(version: str) -> None:
    spec = two_nodes(version)
    spec["engine"]["extraArgs"] += ["--distributed-executor-backend", "mp"]
    vd = parse_vllm_deployment(resource(spec))
    with pytest.raises(SpecErrors) as caught:
        plan_launch(vd.spec)
    assert [e.field for e in caught.value.errors] == ["spec.engine.extraArgs[2]"]


def test_native_flags_are_read_from_the_tables_not_assumed() -> None:
    native = {
        str(v) for v in flagdata.releases() if multinode.has_native_multinode(flagdata.table(v))
    }
    assert set(NATIVE) <= native
    assert not native & set(RAY_ONLY)
    assert all(
        multinode.group_backend(flagdata.table(Version.parse(v))) == multinode.RAY for v in RAY_ONLY
    )
    assert min(Version.parse(v) for v in native) == Version(0, 11, 1)


@pytest.mark.parametrize(
    ("tp", "pp", "gpus", "nodes", "ok"),
    [
        (8, 2, 8, 2, True),
        (4, 2, 4, 2, True),
        (8, 1, 4, 2, True),  # tensor parallel across nodes: vLLM allows it (slow, but valid)
        (8, 2, 8, 3, False),
        (8, 1, 8, 2, False),
        (4, 4, 8, 2, True),
        (4, 3, 8, 2, False),
    ],
)
def test_the_group_must_hold_exactly_the_world_size(
    tp: int, pp: int, gpus: int, nodes: int, ok: bool
) -> None:
    spec = minimal_spec(image="vllm/vllm-openai:v0.22.0", tensorParallelSize=tp)
    spec["engine"]["extraArgs"] = ["--pipeline-parallel-size", str(pp)]
    spec["resources"] = {"gpus": gpus, "nodes": nodes}
    vd = parse_vllm_deployment(resource(spec))
    if ok:
        assert plan_launch(vd.spec).group is not None
        return
    with pytest.raises(SpecErrors) as caught:
        plan_launch(vd.spec)
    (error,) = caught.value.errors
    assert error.field == "spec.engine.tensorParallelSize"
    assert f"= {tp * pp} GPUs" in error.message
    assert f"{nodes} x spec.resources.gpus {gpus} = {nodes * gpus}" in error.message


@pytest.mark.parametrize(
    "flag", ["--nnodes=2", "--node-rank=1", "--master-addr=x", "--master-port=1234"]
)
@pytest.mark.parametrize("nodes", [1, 2])
def test_the_group_flags_are_the_operators(flag: str, nodes: int) -> None:
    spec = two_nodes("0.22.0") if nodes == 2 else minimal_spec(image="vllm/vllm-openai:v0.22.0")
    spec["engine"].setdefault("extraArgs", []).append(flag)
    vd = parse_vllm_deployment(resource(spec))
    with pytest.raises(SpecErrors) as caught:
        plan_launch(vd.spec)
    fields = [e.field for e in caught.value.errors]
    assert fields == [f"spec.engine.extraArgs[{len(vd.spec.engine.extra_args) - 1}]"]
    assert "spec.resources.nodes" in caught.value.errors[0].fix


def test_data_parallel_across_nodes_is_refused() -> None:
    spec = two_nodes("0.22.0")
    spec["engine"]["extraArgs"] += ["--data-parallel-size", "2"]
    vd = parse_vllm_deployment(resource(spec))
    with pytest.raises(SpecErrors) as caught:
        plan_launch(vd.spec)
    assert [e.field for e in caught.value.errors] == ["spec.engine.extraArgs"]


def test_workers_serve_no_http_and_no_service_selects_them() -> None:
    lws = lws_of(two_nodes("0.22.0"))
    group = lws["spec"]["leaderWorkerTemplate"]
    worker, leader = container(lws, "workerTemplate"), container(lws, "leaderTemplate")
    assert not {"ports", "startupProbe", "readinessProbe", "livenessProbe"} & set(worker)
    assert {"ports", "startupProbe", "readinessProbe", "livenessProbe"} <= set(leader)
    selector = labels.server_selector("qwen", lws["metadata"]["labels"][labels.REVISION_LABEL])
    leader_labels = group["leaderTemplate"]["metadata"]["labels"]
    worker_labels = group["workerTemplate"]["metadata"]["labels"]
    assert selector.items() <= leader_labels.items()
    assert not selector.items() <= worker_labels.items()
    assert not labels.canary_selector("qwen").items() <= worker_labels.items()
    # everything else a pod runs is the same on both: image, entrypoint, env, volumes
    for key in ("image", "command", "env", "volumeMounts", "resources", "securityContext"):
        assert worker[key] == leader[key], key


def test_the_leader_waits_for_its_workers_within_its_startup_probe() -> None:
    one = render_all(
        parse_vllm_deployment(resource(minimal_spec(image="vllm/vllm-openai:v0.22.0")))
    )
    single = one[0]["spec"]["template"]["spec"]["containers"][0]["startupProbe"]
    leader = container(lws_of(two_nodes("0.22.0")), "leaderTemplate")["startupProbe"]

    def budget(probe: dict[str, Any]) -> int:
        return int(probe["periodSeconds"] * probe["failureThreshold"])

    assert budget(leader) >= budget(single) + multinode.GROUP_JOIN_SECONDS


def test_group_settings() -> None:
    lws = lws_of(two_nodes("0.22.0"), replicas=3)
    assert lws["spec"]["replicas"] == 3
    assert lws["spec"]["startupPolicy"] == "LeaderCreated"
    group = lws["spec"]["leaderWorkerTemplate"]
    assert group["size"] == 2
    assert group["restartPolicy"] == "RecreateGroupOnPodRestart"


def test_user_strings_stay_literal_and_only_the_operators_references_expand() -> None:
    spec = two_nodes("0.22.0")
    spec["model"]["servedModelName"] = "a$(LWS_WORKER_INDEX)b"
    args = container(lws_of(spec), "workerTemplate")["args"]
    ran = as_kubelet_runs(args, 5)
    assert "a$(LWS_WORKER_INDEX)b" in ran
    assert ran[ran.index("--node-rank") + 1] == "5"


@functools.cache
def _crd_schema() -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all(CRD.read_text()) if d]
    (crd,) = docs
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    schema = version["schema"]["openAPIV3Schema"]
    assert isinstance(schema, dict)
    return schema


@pytest.mark.parametrize("version", NATIVE + RAY_ONLY)
def test_the_set_validates_against_the_vendored_crd(version: str) -> None:
    lws = lws_of(two_nodes(version), replicas=2)
    jsonschema.validate(lws, _crd_schema())
    broken = copy.deepcopy(lws)
    broken["spec"]["leaderWorkerTemplate"]["restartPolicy"] = "Sometimes"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, _crd_schema())


@pytest.mark.parametrize("version", ["0.22.0", "0.11.0"])
def test_each_template_is_a_valid_pod_for_kubernetes(version: str) -> None:
    lws = lws_of(two_nodes(version))
    for role in ("leaderTemplate", "workerTemplate"):
        template = lws["spec"]["leaderWorkerTemplate"][role]
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, **template}
        pod["metadata"] = {**template["metadata"], "name": "p"}
        kubernetes_validate.validate(pod, kubernetes_validate.latest_version(), strict=True)


def test_the_revision_covers_both_templates() -> None:
    base = two_nodes("0.22.0")
    vd = parse_vllm_deployment(resource(base))
    launch = plan_launch(vd.spec)
    revision = revision_hash(vd.spec, launch)
    lws = render_leaderworkerset(vd, launch, revision, 1)
    templates = lws["spec"]["leaderWorkerTemplate"]
    for role in ("leaderTemplate", "workerTemplate"):
        assert templates[role]["metadata"]["labels"][labels.REVISION_LABEL] == revision
        assert without_identity(templates[role]) != templates[role]
    three = parse_vllm_deployment(resource(two_nodes("0.22.0", nodes=4, gpus=4)))
    assert revision_hash(three.spec, plan_launch(three.spec)) != revision
    one_node = parse_vllm_deployment(resource(minimal_spec(image="vllm/vllm-openai:v0.22.0")))
    assert plan_launch(one_node.spec).group is None


def test_render_all_gives_a_leaderworkerset_for_a_group_and_a_deployment_for_one_node() -> None:
    kinds = [o["kind"] for o in render_all(parse_vllm_deployment(resource(two_nodes("0.22.0"))))]
    assert kinds == ["LeaderWorkerSet", "Service", "Service"]
    one = render_all(
        parse_vllm_deployment(resource(minimal_spec(image="vllm/vllm-openai:v0.22.0")))
    )
    assert [o["kind"] for o in one] == ["Deployment", "Service", "Service"]


def test_a_group_topology_key_places_each_group_in_one_domain() -> None:
    spec = two_nodes("0.22.0", groupTopologyKey="cloud.google.com/gce-topology-block")
    lws = lws_of(spec, replicas=2)
    annotations = lws["metadata"]["annotations"]
    assert annotations[EXCLUSIVE] == "cloud.google.com/gce-topology-block"
    jsonschema.validate(lws, _crd_schema())
    plain = lws_of(two_nodes("0.22.0"), replicas=2)
    assert EXCLUSIVE not in plain["metadata"]["annotations"]
    # LWS reads it when it creates pods and a revision's set is never changed in place:
    # another key (or none) is another revision
    other = lws_of(two_nodes("0.22.0", groupTopologyKey="kubernetes.io/hostname"))
    revisions = {o["metadata"]["labels"][labels.REVISION_LABEL] for o in (lws, plain, other)}
    assert len(revisions) == 3


def test_a_group_topology_key_without_a_group_is_refused() -> None:
    spec = minimal_spec(image="vllm/vllm-openai:v0.22.0")
    spec["resources"] = {"groupTopologyKey": "kubernetes.io/hostname"}
    vd = parse_vllm_deployment(resource(spec))
    with pytest.raises(SpecErrors) as caught:
        plan_launch(vd.spec)
    assert [e.field for e in caught.value.errors] == ["spec.resources.groupTopologyKey"]
    assert "spec.resources.nodes" in caught.value.errors[0].fix


@pytest.mark.parametrize("key", ["", "Rack/x", "x/", "-rack", "a" * 64, "a/b/c"])
def test_a_group_topology_key_must_be_a_label_key(key: str) -> None:
    with pytest.raises(SpecErrors) as caught:
        parse_vllm_deployment(resource(two_nodes("0.22.0", groupTopologyKey=key)))
    assert [e.field for e in caught.value.errors] == ["spec.resources.groupTopologyKey"]
