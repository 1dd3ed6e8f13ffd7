"""The chart grants exactly the API calls the operator makes: no more, no less.

The source of truth is ``vllm_operator.kube.permissions.PERMISSIONS``: the kube layer
refuses any call not declared there, and kopf's own calls are declared there too
(``by="kopf"``). The chart's rules are rendered by Helm and flattened to
(apiGroup, resource, verb) triples; the two sets must be equal in both scopes, so a new
call in the code without a chart rule (a 403 in production) or a chart rule nothing uses
(a wider blast radius) fails here.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import helm_python
import pytest
import yaml

import builders
from vllm_operator.kube.permissions import PERMISSIONS
from vllm_operator.rollout import Settings, observe, plan
from vllm_operator.rollout.actions import Create

CHART = Path(__file__).resolve().parents[3] / "charts" / "vllm-operator"

# What kopf needs beyond PERMISSIONS, with the operator run as the chart runs it: standalone
# (no peering objects: no kopf.dev/*kopfpeerings rules), resource and namespace scanning off
# (no namespaces list/watch; customresourcedefinitions list/watch only with --multi-node,
# declared in PERMISSIONS, feature "lws"), exact namespaces (no globs).
# API discovery (/apis) is a non-resource URL every authenticated user may read.
# Nothing left: kopf's watches and Event posting are declared in PERMISSIONS (by="kopf").
KOPF_FRAMEWORK: frozenset[tuple[str, str, str]] = frozenset()

Triple = tuple[str, str, str]
USER_ROLE_LABEL = "vllm-operator.dev/user-role"
AGGREGATE = "rbac.authorization.k8s.io/aggregate-to-"


def _rules(values: dict[str, Any]) -> dict[str, set[Triple]]:
    rendered = helm_python.Chart.load(CHART).render(values, name="vo", namespace="vllm-system")
    by_role: dict[str, set[Triple]] = {}
    for path, text in rendered.items():
        if not path.endswith(".yaml"):
            continue
        for doc in yaml.safe_load_all(text):
            if not doc or doc.get("kind") not in ("ClusterRole", "Role"):
                continue
            if doc["metadata"].get("labels", {}).get(USER_ROLE_LABEL) == "true":
                continue  # roles for people (test_user_roles_*), not the operator's
            key = f"{doc['kind']}/{doc['metadata'].get('namespace', '')}/{doc['metadata']['name']}"
            triples: set[Triple] = set()
            for rule in doc["rules"]:
                assert not rule.get("resourceNames"), "resourceNames would need its own check"
                assert not rule.get("nonResourceURLs")
                for group in rule["apiGroups"]:
                    for resource in rule["resources"]:
                        for verb in rule["verbs"]:
                            triples.add((group, resource, verb))
            by_role[key] = triples
    return by_role


def _declared(features: frozenset[str] = frozenset({"hpa"})) -> set[Triple]:
    """Declared calls with the chart's default features (HPA on, KEDA off) or ``features``."""
    return {
        (p.api_group, p.resource, p.verb)
        for p in PERMISSIONS
        if p.feature is None or p.feature in features
    } | KOPF_FRAMEWORK


def _cluster_scoped(features: frozenset[str] = frozenset({"hpa"})) -> set[Triple]:
    return {
        (p.api_group, p.resource, p.verb)
        for p in PERMISSIONS
        if p.cluster_scoped and (p.feature is None or p.feature in features)
    }


def _own_namespace() -> set[Triple]:
    return {(p.api_group, p.resource, p.verb) for p in PERMISSIONS if p.own_namespace}


LEADER_ROLE = "Role/vllm-system/vo-vllm-operator-leader-election"


SCOPES = {
    "cluster": {},
    "namespaces": {"operator": {"scope": "namespaces", "namespaces": ["a", "b"]}},
}


@pytest.mark.parametrize("scope", sorted(SCOPES))
def test_chart_rules_equal_declared_calls(scope: str) -> None:
    roles = _rules(SCOPES[scope])
    assert roles, "no Role or ClusterRole rendered"
    assert _cluster_scoped(), "nodes get is declared cluster-scoped"
    assert _own_namespace(), "leases are declared for the operator's own namespace"
    assert roles.pop(LEADER_ROLE) == _own_namespace()  # leader election: the release namespace
    for role, granted in roles.items():
        kind = role.split("/")[0]
        if scope == "cluster":
            declared = _declared() - _own_namespace()  # one ClusterRole holds the rest
        elif kind == "Role":
            declared = _declared() - _cluster_scoped() - _own_namespace()  # no nodes, no leases
        else:
            declared = _cluster_scoped()  # the only ClusterRole: nothing namespaced
        missing = sorted(declared - granted)
        extra = sorted(granted - declared)
        assert not missing, f"{role} lacks calls the operator makes: {missing}"
        assert not extra, f"{role} grants calls nothing makes: {extra}"


def test_kinds_follow_scope() -> None:
    cluster = _rules(SCOPES["cluster"])
    assert {k.split("/")[0] for k in cluster if k != LEADER_ROLE} == {"ClusterRole"}
    namespaced = _rules(SCOPES["namespaces"])
    namespaced.pop(LEADER_ROLE)
    roles = sorted(k for k in namespaced if k.startswith("Role/"))
    assert sorted(k.split("/")[1] for k in roles) == ["a", "b"]
    (cluster,) = [k for k in namespaced if k.startswith("ClusterRole/")]
    assert namespaced[cluster] == {("", "nodes", "get")}  # read-only, one resource


def test_no_wildcards_no_secrets_events_only_create_or_patch() -> None:
    for granted in _rules({}).values():
        for group, resource, verb in granted:
            assert "*" not in (group, resource, verb)
            assert resource not in ("secrets", "configmaps"), resource
            if resource == "events":
                assert verb in ("create", "patch")
            assert verb not in ("escalate", "bind", "impersonate", "deletecollection")


def test_declared_list_has_no_forbidden_calls() -> None:
    for group, resource, verb in _declared(frozenset({"hpa", "keda"})):
        assert "*" not in (group, resource, verb)
        assert resource != "secrets"


@pytest.mark.parametrize("scope", sorted(SCOPES))
@pytest.mark.parametrize("enabled", [False, True])
def test_leaderworkerset_rules_and_flag_only_with_multi_node(scope: str, enabled: bool) -> None:
    """LeaderWorkerSet rights are exactly the declared "lws" ones, granted and passed to the
    operator (--multi-node) only when the chart enables multi-node."""
    rendered = {**SCOPES[scope], "multiNode": {"enabled": enabled}}
    granted = set().union(*_rules(rendered).values())
    features = frozenset({"hpa", "lws"} if enabled else {"hpa"})
    assert granted == _declared(features)
    lws = {(g, r, v) for g, r, v in granted if r == "leaderworkersets"}
    verbs = {"get", "list", "watch", "create", "patch", "delete"}
    wanted = {("leaderworkerset.x-k8s.io", "leaderworkersets", v) for v in verbs}
    assert lws == (wanted if enabled else set())
    docs = helm_python.Chart.load(CHART).render(rendered, name="vo", namespace="vllm-system")
    (deployment,) = [
        d
        for path, text in docs.items()
        if path.endswith(".yaml")
        for d in yaml.safe_load_all(text)
        if d and d.get("kind") == "Deployment"
    ]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert ("--multi-node" in args) is enabled


@pytest.mark.parametrize("scope", sorted(SCOPES))
def test_nodes_false_grants_everything_but_nodes(scope: str) -> None:
    values = {**SCOPES[scope], "rbac": {"nodes": False}}
    granted = set().union(*_rules(values).values())
    assert granted == _declared() - _cluster_scoped()


@pytest.mark.parametrize("scope", sorted(SCOPES))
def test_leader_election_off_grants_no_leases(scope: str) -> None:
    values = {**SCOPES[scope], "leaderElection": {"enabled": False}, "replicaCount": 1}
    roles = _rules(values)
    assert LEADER_ROLE not in roles
    assert set().union(*roles.values()) == _declared() - _own_namespace()


def test_rbac_create_false_renders_no_rules() -> None:
    assert _rules({"rbac": {"create": False}}) == {}


def test_children_with_block_owner_deletion_come_with_finalizers_update() -> None:
    """OwnerReferencesPermissionEnforcement (OpenShift's default) refuses to create an object
    whose ownerReference sets blockOwnerDeletion unless the creator may update the owner's
    finalizers: the operator's children set it, so both scopes must grant it."""
    body = builders.resource(
        builders.minimal_spec("m"), name="q", namespace="ml", uid="u1", generation=1
    )
    creates = [
        a
        for a in plan(observe(body), datetime(2026, 1, 1, tzinfo=UTC), Settings()).actions
        if isinstance(a, Create)
    ]
    assert creates
    for action in creates:
        (ref,) = action.manifest["metadata"]["ownerReferences"]
        assert ref["blockOwnerDeletion"] is True
    needed = ("vllm-operator.dev", "vllmdeployments/finalizers", "update")
    assert needed in _declared()
    for scope in SCOPES.values():
        creators = {
            role: granted
            for role, granted in _rules(scope).items()
            if ("apps", "deployments", "create") in granted
        }
        assert creators, scope
        for role, granted in creators.items():  # the role that creates children
            assert needed in granted, role


def _user_roles(values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    rendered = helm_python.Chart.load(CHART).render(values, name="vo", namespace="vllm-system")
    return {
        doc["metadata"]["name"]: doc
        for path, text in rendered.items()
        if path.endswith(".yaml")
        for doc in yaml.safe_load_all(text)
        if doc and doc["metadata"].get("labels", {}).get(USER_ROLE_LABEL) == "true"
    }


def test_user_roles_give_vllmdeployment_writes_only_to_roles_that_create_pods() -> None:
    """Creating a VLLMDeployment is creating pods with Secrets of the namespace: write access
    aggregates into admin and edit (which hold pods create and secrets get), never view."""
    roles = _user_roles({})
    assert set(roles) == {"vo-vllm-operator-edit", "vo-vllm-operator-view"}
    for doc in roles.values():
        assert doc["kind"] == "ClusterRole"
    edit, view = roles["vo-vllm-operator-edit"], roles["vo-vllm-operator-view"]
    aggregates = {
        role: {
            k[len(AGGREGATE) :]
            for k, v in doc["metadata"]["labels"].items()
            if k.startswith(AGGREGATE) and v == "true"
        }
        for role, doc in (("edit", edit), ("view", view))
    }
    assert aggregates == {"edit": {"admin", "edit"}, "view": {"view"}}
    write = {"create", "update", "patch", "delete", "deletecollection"}
    view_verbs = {v for rule in view["rules"] for v in rule["verbs"]}
    assert view_verbs == {"get", "list", "watch"}
    edit_verbs = {v for rule in edit["rules"] for v in rule["verbs"]}
    assert write <= edit_verbs
    for doc in roles.values():
        for rule in doc["rules"]:
            assert rule["apiGroups"] == ["vllm-operator.dev"]
            assert all(r.startswith("vllmdeployments") for r in rule["resources"])
            # status is the operator's: people read it, never write it
            if "vllmdeployments/status" in rule["resources"]:
                assert not set(rule["verbs"]) & write


def test_user_roles_can_be_left_out_and_are_cluster_scope_only() -> None:
    assert _user_roles({"rbac": {"aggregateToDefaultRoles": False}}) == {}
    assert _user_roles(SCOPES["namespaces"]) == {}


FEATURES = {
    "none": ({"autoscaling": {"enabled": False}}, frozenset[str]()),
    "hpa": ({}, frozenset({"hpa"})),
    "keda": ({"autoscaling": {"enabled": False, "keda": True}}, frozenset({"keda"})),
    "both": ({"autoscaling": {"keda": True}}, frozenset({"hpa", "keda"})),
}


@pytest.mark.parametrize("scope", sorted(SCOPES))
@pytest.mark.parametrize("feature", sorted(FEATURES))
def test_autoscaler_rules_only_when_enabled(scope: str, feature: str) -> None:
    """HPA and KEDA rights are granted exactly when the chart enables them, and the operator
    is told the same (--autoscaling-engines), so it never calls what it may not."""
    values, features = FEATURES[feature]
    rendered = {**SCOPES[scope], **values}
    granted = set().union(*_rules(rendered).values())
    assert granted == _declared(features), feature
    scalers = {r for _, r, _ in granted} & {"horizontalpodautoscalers", "scaledobjects"}
    wanted = {"hpa": "horizontalpodautoscalers", "keda": "scaledobjects"}
    assert scalers == {wanted[f] for f in features}
    docs = helm_python.Chart.load(CHART).render(rendered, name="vo", namespace="vllm-system")
    (deployment,) = [
        d
        for path, text in docs.items()
        if path.endswith(".yaml")
        for d in yaml.safe_load_all(text)
        if d and d.get("kind") == "Deployment"
    ]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    expected = ",".join(sorted(features)) or "none"
    assert f"--autoscaling-engines={expected}" in args


@pytest.mark.parametrize("scope", sorted(SCOPES))
def test_multi_node_lets_kopf_watch_crds_from_a_cluster_role(scope: str) -> None:
    """With multiNode.enabled kopf watches CRDs (a LeaderWorkerSet CRD installed after start-up
    is then watched without a restart): list and watch, from a ClusterRole, even without the
    nodes rule."""
    crds = {("apiextensions.k8s.io", "customresourcedefinitions", v) for v in ("list", "watch")}
    for nodes in (True, False):
        values = {**SCOPES[scope], "multiNode": {"enabled": True}, "rbac": {"nodes": nodes}}
        roles = _rules(values)
        holders = [k for k, granted in roles.items() if crds <= granted]
        assert [k.split("/")[0] for k in holders] == ["ClusterRole"], holders
    assert not any(crds & granted for granted in _rules(SCOPES[scope]).values())
