"""Autoscaling and disruption budgets in the planner, pass after pass (in-memory cluster).

The HPA is played by the test: it writes ``spec.replicas`` of the Deployment it targets, as
the real controller does through the scale subresource.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rollout_world import World, merge, serving_world, spec, summary

from vllm_operator.config import config_from_args
from vllm_operator.render import labels
from vllm_operator.rollout import Settings
from vllm_operator.rollout.actions import Create, Patch

AUTO = {"autoscaling": {"minReplicas": 1, "maxReplicas": 8}}
V17 = spec(mode="throughput", **AUTO)
V17_BALANCED = spec(mode="balanced", **AUTO)
KEDA = {"engine": "keda", "prometheus": {"serverAddress": "http://prom.monitoring:9090"}}


def deployed(spec_doc: dict[str, Any], settings: Settings | None = None) -> World:
    """A world where ``spec_doc`` passed its gate and serves."""
    return serving_world(spec_doc, settings)


def hpa(w: World) -> dict[str, Any]:
    return w.objects[("HorizontalPodAutoscaler", "qwen")]


def hpa_scales(w: World, revision: str, replicas: int) -> None:
    """The HPA controller: set the target's replicas (and the kubelet makes them Ready)."""
    assert hpa(w)["spec"]["scaleTargetRef"]["name"] == f"qwen--{revision}"
    dep = w.deployment(revision)
    assert dep is not None
    dep["spec"]["replicas"] = replicas
    dep["status"] = {"readyReplicas": replicas}


def budgets(w: World) -> dict[str, dict[str, Any]]:
    return {n: w.objects[("PodDisruptionBudget", n)] for n in w.kinds("PodDisruptionBudget")}


def test_first_revision_gets_its_autoscaler_and_budget_only_when_it_serves() -> None:
    w = World(V17)
    w.step()
    rev = w.revisions()[0]
    assert w.kinds("HorizontalPodAutoscaler") == []  # the candidate is outside the autoscaler
    assert w.kinds("PodDisruptionBudget") == []  # and has no budget
    w.ready_all()
    w.step()
    w.finish_job(summary())
    w.step()
    assert w.deployment(rev)["spec"]["replicas"] == 2  # spec.replicas: the initial count
    assert w.kinds("HorizontalPodAutoscaler") == []
    w.ready_all()
    p = w.step()
    kinds = p.kinds()
    assert kinds.index("create Service qwen") < kinds.index("create HorizontalPodAutoscaler qwen")
    assert f"create PodDisruptionBudget qwen--{rev}" in kinds
    w.settle()
    scaler = hpa(w)
    assert scaler["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": f"qwen--{rev}",
    }
    assert (scaler["spec"]["minReplicas"], scaler["spec"]["maxReplicas"]) == (1, 8)
    assert scaler["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    (pdb,) = budgets(w).values()
    assert pdb["spec"]["selector"]["matchLabels"] == labels.server_selector("qwen", rev)
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["metadata"]["ownerReferences"][0]["uid"] == "uid-1"


def test_initial_count_is_clamped_into_the_autoscaling_range() -> None:
    w = deployed(spec(replicas=1, autoscaling={"minReplicas": 3, "maxReplicas": 4}))
    assert w.deployment(w.serving() or "")["spec"]["replicas"] == 3


def test_operator_does_not_fight_the_hpa_over_replicas() -> None:
    w = deployed(V17)
    rev = w.serving()
    assert rev is not None
    hpa_scales(w, rev, 5)
    p = w.settle()
    assert w.deployment(rev)["spec"]["replicas"] == 5
    assert "serves (5/5 Ready)" in w.status["message"]
    assert not p.actions
    # Without autoscaling the same state is scaled back to spec.replicas, and the HPA goes.
    w.set_spec(spec(mode="throughput"))
    p = w.step()
    assert "delete HorizontalPodAutoscaler qwen" in p.kinds()
    assert w.deployment(rev)["spec"]["replicas"] == 2
    assert w.kinds("HorizontalPodAutoscaler") == []


def test_promotion_scales_the_candidate_to_the_stables_current_count_then_moves_both() -> None:
    w = deployed(V17)
    stable = w.serving()
    assert stable is not None
    hpa_scales(w, stable, 5)
    w.settle()
    w.set_spec(V17_BALANCED)
    w.step()
    new = next(r for r in w.revisions() if r != stable)
    assert w.deployment(new)["spec"]["replicas"] == 1  # the gate's candidate: candidateReplicas
    assert hpa(w)["spec"]["scaleTargetRef"]["name"] == f"qwen--{stable}"
    assert list(budgets(w)) == [f"qwen--{stable}"]  # none for the candidate
    w.ready_all()
    w.step()
    assert w.twins() == [stable]
    w.twin_pod(stable, "twin-pod")
    w.ready_all()
    w.step()
    w.finish_job(summary())
    w.step()
    assert w.status["lastGate"]["outcome"] == "Passed"
    assert w.deployment(new)["spec"]["replicas"] == 5  # the stable's count, not spec's 2
    # The HPA keeps scaling the stable meanwhile: the candidate follows what it does now.
    hpa_scales(w, stable, 6)
    w.ready(new, 5)
    w.step()
    assert w.deployment(new)["spec"]["replicas"] == 6
    assert w.serving() == stable
    w.ready(new, 5)
    w.step()
    assert w.serving() == stable  # 5 of 6 Ready is less than the stable carries
    w.ready(new, 6)
    p = w.step()
    kinds = p.kinds()
    switch = kinds.index("patch Service qwen")
    move = kinds.index("patch HorizontalPodAutoscaler qwen")
    assert switch < move  # the same plan, Service first
    assert f"delete PodDisruptionBudget qwen--{stable}" in kinds
    assert f"create PodDisruptionBudget qwen--{new}" in kinds
    patch = next(a for a in p.actions if isinstance(a, Patch) and a.kind.endswith("Autoscaler"))
    assert patch.patch["spec"]["scaleTargetRef"]["name"] == f"qwen--{new}"
    assert w.selector_changes[-1] == (new, 6)
    w.settle()
    assert w.revisions() == [new]
    assert list(budgets(w)) == [f"qwen--{new}"]
    assert w.deployment(new)["spec"]["replicas"] == 6
    assert "AutoscalerMoved" in w.events()


def test_rejected_candidate_never_touches_the_autoscaler_or_budget() -> None:
    w = deployed(V17)
    stable = w.serving()
    hpa_scales(w, stable or "", 4)
    w.settle()
    before = (hpa(w), budgets(w))
    w.set_spec(merge(V17_BALANCED, {"gate": {"thresholds": {"quality": {"minPassed": 12}}}}))
    w.step()
    w.ready_all()
    w.step()
    w.twin_pod(stable or "", "twin-pod")
    w.ready_all()
    w.step()
    w.finish_job(summary(passed=2))
    w.settle()
    assert w.status["lastGate"]["outcome"] == "Failed"
    assert w.serving() == stable
    assert (hpa(w), budgets(w)) == before


def test_keda_engine_needs_the_operator_to_allow_it() -> None:
    keda = spec(autoscaling={**AUTO["autoscaling"], **KEDA})
    w = World(keda)
    w.step()
    assert w.status["phase"] == "Failed"
    assert "spec.autoscaling.engine: keda is not enabled" in w.status["message"]
    assert "autoscaling.keda=true" in w.status["message"]
    assert w.kinds("Deployment") == []


def test_switching_engines_replaces_the_autoscaler() -> None:
    settings = Settings(bench_image="op:1", autoscaling_engines=("hpa", "keda"))
    w = deployed(V17, settings)
    rev = w.serving()
    w.set_spec(merge(V17, {"autoscaling": KEDA}))
    p = w.step()
    assert "delete HorizontalPodAutoscaler qwen" in p.kinds()
    created = next(a for a in p.actions if isinstance(a, Create) and a.kind == "ScaledObject")
    spec_ = created.manifest["spec"]
    assert spec_["scaleTargetRef"]["name"] == f"qwen--{rev}"
    (trigger,) = spec_["triggers"]
    assert trigger["type"] == "prometheus"
    assert f'vllm_operator_dev_revision="{rev}"' in trigger["metadata"]["query"]
    assert trigger["metadata"]["threshold"] == "5"
    assert w.settle().actions == ()


def test_disruption_budget_follows_the_spec() -> None:
    w = deployed(spec(mode="throughput"))  # no autoscaling: a budget all the same
    rev = w.serving()
    (name,) = budgets(w)
    w.set_spec(spec(mode="throughput", disruption={"minAvailable": "50%"}))
    p = w.step()
    assert p.kinds() == [f"patch PodDisruptionBudget {name}"]
    assert budgets(w)[name]["spec"].get("maxUnavailable") is None
    assert budgets(w)[name]["spec"]["minAvailable"] == "50%"
    assert w.settle().actions == ()
    assert rev is not None


@pytest.mark.parametrize(
    ("autoscaling", "needle"),
    [
        ({"minReplicas": 5, "maxReplicas": 2}, "spec.autoscaling: "),
        ({"minReplicas": 0, "maxReplicas": 2}, "spec.autoscaling.minReplicas"),
        ({"minReplicas": 1}, "spec.autoscaling.maxReplicas"),
        ({"maxReplicas": 2, "engine": "keda"}, "prometheus.serverAddress"),
        ({"maxReplicas": 2, "targets": {"kvCacheUsagePercent": 120}}, "kvCacheUsagePercent"),
    ],
)
def test_bad_autoscaling_is_an_invalid_spec_naming_the_field(
    autoscaling: dict[str, Any], needle: str
) -> None:
    w = World(spec(autoscaling=autoscaling))
    p = w.step()
    assert w.status["phase"] == "Failed"
    assert needle in w.status["message"], w.status["message"]
    assert not p.actions


@pytest.mark.parametrize(
    ("disruption", "needle"),
    [
        ({"maxUnavailable": 1, "minAvailable": 1}, "not both"),
        ({"maxUnavailable": "lots"}, "percentage"),
        ({"minAvailable": "150%"}, "percentage"),
        ({"maxUnavailable": -1}, "between 0"),
    ],
)
def test_bad_disruption_is_an_invalid_spec(disruption: dict[str, Any], needle: str) -> None:
    w = World(spec(disruption=disruption))
    w.step()
    assert "spec.disruption" in w.status["message"]
    assert needle in w.status["message"], w.status["message"]


def test_autoscaling_engines_flag_then_environment_then_default(
    capsys: pytest.CaptureFixture[str],
) -> None:
    env = {"VLLM_OPERATOR_AUTOSCALING_ENGINES": "keda,hpa"}
    assert config_from_args([], {}, "run").autoscaling_engines == ("hpa",)
    assert config_from_args([], env, "run").autoscaling_engines == ("hpa", "keda")
    flag = ["--autoscaling-engines", "none"]
    assert config_from_args(flag, env, "run").autoscaling_engines == ()
    assert isinstance(config_from_args(flag, env, "run"), Settings)  # the planner's, as is
    with pytest.raises(SystemExit):
        config_from_args(["--autoscaling-engines", "hpa,vpa"], {}, "run")
    assert "'hpa,vpa': list of hpa, keda" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        config_from_args([], {"VLLM_OPERATOR_AUTOSCALING_ENGINES": "kedah"}, "run")
    assert "VLLM_OPERATOR_AUTOSCALING_ENGINES" in capsys.readouterr().err


def test_someone_elses_hpa_at_the_name_stalls_and_is_left_alone() -> None:
    w = World(V17)
    w.squat("HorizontalPodAutoscaler", "qwen")
    w.step()
    rev = w.revisions()[0]
    w.ready_all()
    w.step()
    w.finish_job(summary())
    w.step()
    w.ready_all()
    w.settle()
    assert w.condition("Stalled")["status"] == "True"
    assert "HorizontalPodAutoscaler qwen" in w.status["message"]
    squatter = w.objects[("HorizontalPodAutoscaler", "qwen")]
    assert squatter["metadata"]["uid"] == "uid-foreign-qwen"  # untouched
    assert "ownerReferences" not in squatter["metadata"]
    assert rev in w.revisions()


def test_autoscaler_is_removed_with_autoscaling_and_its_events_say_so() -> None:
    w = deployed(V17)
    rev = w.serving()
    w.set_spec(spec(mode="throughput"))
    w.settle()
    assert w.kinds("HorizontalPodAutoscaler") == []
    assert w.kinds("PodDisruptionBudget") == [f"qwen--{rev}"]  # the budget stays
    assert {"AutoscalerCreated", "AutoscalerRemoved"} <= set(w.events())


AUTO_SPECS = [
    V17,
    V17_BALANCED,
    spec(mode="interactivity"),  # autoscaling off
    spec(mode="throughput", autoscaling={"minReplicas": 2, "maxReplicas": 3}),
]
AUTO_MOVES = st.one_of(
    st.just(("ready",)),
    st.tuples(st.just("finish"), st.booleans()),
    st.tuples(st.just("spec"), st.integers(0, len(AUTO_SPECS) - 1)),
    st.tuples(st.just("hpa"), st.integers(1, 8)),
    st.tuples(st.just("time"), st.sampled_from([1.0, 4000.0])),
)


@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
@given(st.integers(0, len(AUTO_SPECS) - 1), st.lists(AUTO_MOVES, min_size=1, max_size=20))
def test_autoscaler_and_budget_always_follow_the_serving_revision(
    first: int, moves: list[Any]
) -> None:
    """Whatever happens, after every plan: the autoscaler exists only with spec.autoscaling
    and a serving revision, and targets exactly that revision; the only budget is the
    serving revision's; the operator never writes replicas of a Deployment the autoscaler
    targets."""
    w = deployed(AUTO_SPECS[first])
    for move in moves:
        kind = move[0]
        if kind == "ready":
            w.ready_all()
        elif kind == "finish" and len(w.kinds("Job")) == 1 and not w.job().get("status"):
            w.finish_job(summary(passed=13 if move[1] else 2), exit_code=0 if move[1] else 1)
        elif kind == "spec":
            w.set_spec(
                merge(AUTO_SPECS[move[1]], {"gate": {"thresholds": {"quality": {"minPassed": 12}}}})
            )
        elif kind == "hpa" and ("HorizontalPodAutoscaler", "qwen") in w.objects:
            target = hpa(w)["spec"]["scaleTargetRef"]["name"]
            if ("Deployment", target) in w.objects:
                w.objects[("Deployment", target)]["spec"]["replicas"] = move[1]
        elif kind == "time":
            w.advance(move[1])
        p = w.plan()
        targeted = (
            hpa(w)["spec"]["scaleTargetRef"]["name"] if w.kinds("HorizontalPodAutoscaler") else None
        )
        for action in p.actions:
            if (
                isinstance(action, Patch)
                and action.kind == "Deployment"
                and action.name == targeted
            ):
                assert "spec" not in action.patch or w.body["spec"].get("autoscaling") is None, (
                    "wrote replicas under the autoscaler"
                )
        w.apply(p)
        serving = w.serving()
        scalers = w.kinds("HorizontalPodAutoscaler")
        if w.body["spec"].get("autoscaling") is None or serving is None:
            assert scalers == [], scalers
        elif scalers:
            assert hpa(w)["spec"]["scaleTargetRef"]["name"] == f"qwen--{serving}"
        assert w.kinds("PodDisruptionBudget") in ([], [f"qwen--{serving}"])
