"""One table of kinds (``api/kinds.py``): what the planner creates, the client's paths and
the permissions all come from it, so a child kind cannot be half added.
"""

from __future__ import annotations

from typing import get_args

from rollout_world import World, spec, summary

from vllm_operator.api.kinds import BY_KIND, CHILD_KINDS, KINDS
from vllm_operator.kube import client
from vllm_operator.kube.permissions import PERMISSIONS, is_declared
from vllm_operator.rollout.actions import Create, Delete, Kind, Patch


def test_the_planners_kinds_are_the_tables_children() -> None:
    assert set(get_args(Kind)) == set(CHILD_KINDS) == {k.kind for k in KINDS if k.child}


def test_client_paths_and_permissions_come_from_the_table() -> None:
    for info in KINDS:
        res = client.RESOURCES[info.kind]
        assert (res.api_version, res.plural) == (info.api_version, info.plural)
        for right in info.rights:
            resource = f"{info.plural}/{right.subresource}" if right.subresource else info.plural
            assert is_declared(info.group, resource, right.verb)
    assert len(PERMISSIONS) == sum(len(k.rights) for k in KINDS)


def test_every_action_of_a_whole_rollout_is_on_a_declared_child_kind() -> None:
    w = World(spec(image="vllm/vllm-openai:v0.17.0"))
    plans = [w.step()]
    w.ready_all()
    plans.append(w.step())
    w.finish_job(summary())
    plans.append(w.step())
    w.ready_all()
    plans.append(w.settle())
    w.set_spec(spec(image="vllm/vllm-openai:v0.17.1"))
    plans.append(w.step())
    actions = [a for p in plans for a in p.actions]
    assert {type(a) for a in actions} == {Create, Patch, Delete}
    for action in actions:
        info = BY_KIND[action.kind]
        assert info.child, action
        verb = {Create: "create", Patch: "patch", Delete: "delete"}[type(action)]
        assert is_declared(info.group, info.plural, verb), action
        if isinstance(action, Create):
            assert action.manifest["apiVersion"] == info.api_version
