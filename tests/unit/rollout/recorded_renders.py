"""The recorded set of renders: every example and a fixed set of generated specs, rendered.

Refactors of the render and planner paths must not change a byte of what reaches the
cluster. ``renders()`` builds, for each case, everything the operator writes for it: the
objects of ``render_all`` (or the refusal text), the planner's first rollout
(``rollout.preview.first_revision``: Deployment, Services, Job, budget, in order) and, for
the examples, the resource's annotations and status once its first revision serves. The
digests of those documents are recorded in ``recorded_renders.json``;
``test_render_recorded.py`` compares.

Record again (only for a change meant to alter output, and say why in the commit)::

    python tests/unit/rollout/recorded_renders.py --write
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
import sys
from pathlib import Path
from typing import Any

import yaml

from vllm_operator.api import parse_vllm_deployment
from vllm_operator.errors import SpecErrors
from vllm_operator.render import render_all
from vllm_operator.rollout import Settings
from vllm_operator.rollout.preview import first_revision

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
RECORD = HERE / "recorded_renders.json"
SEED = 20261201
GENERATED = 48
# The benchmark image the set was recorded with: the planner's default until the defaults got
# one owner (rollout.Settings, issue 23), which now defaults to the image `vllm-operator run`
# and `render` always used (the operator's own version). Named here so the record holds.
RECORDED_SETTINGS = Settings(bench_image="ghcr.io/vllm-operator/vllm-operator:latest")

IMAGES = [
    "vllm/vllm-openai:v0.11.0",
    "vllm/vllm-openai:v0.16.0",
    "vllm/vllm-openai:v0.17.0",
    "vllm/vllm-openai:v0.22.0",
    "vllm/vllm-openai:v0.33.0",
]


def base_resource() -> dict[str, Any]:
    return {
        "apiVersion": "vllm-operator.dev/v1alpha1",
        "kind": "VLLMDeployment",
        "metadata": {"name": "qwen", "namespace": "ml"},
        "spec": {
            "model": {"name": "Qwen/Qwen3-30B-A3B-Instruct-2507-GPTQ-Int4"},
            "engine": {"image": "vllm/vllm-openai:v0.17.0", "performanceMode": "throughput"},
        },
    }


def generated(rng: random.Random) -> dict[str, Any]:
    """One resource drawn over the fields that shape pods, Services, Jobs and budgets."""
    raw = base_resource()
    spec = raw["spec"]
    engine = spec["engine"]
    engine["image"] = rng.choice(IMAGES)
    modes = ["throughput", "balanced", "eager", "interactivity"]
    # One draw in ten asks for a mode no release has, so refusals are recorded too.
    engine["performanceMode"] = "latency" if rng.random() < 0.1 else rng.choice(modes)
    if rng.random() < 0.5:
        engine["version"] = engine["image"].rsplit(":v", 1)[1]
    if rng.random() < 0.4:
        engine["env"] = [{"name": "A", "value": rng.choice(["1", "2", "$x"])}]
    if rng.random() < 0.4:
        engine["extraArgs"] = ["--max-num-seqs", rng.choice(["64", "128"])]
    if rng.random() < 0.3:
        engine["apiKeySecret"] = {"name": rng.choice(["k1", "k2"])}
    spec["resources"] = {"gpus": rng.randint(1, 4)}
    if rng.random() < 0.4:
        spec["resources"]["memory"] = rng.choice(["48Gi", "64Gi"])
    if rng.random() < 0.3:
        spec["scheduling"] = {"nodeSelector": {"gpu": rng.choice(["a", "b"])}}
    if rng.random() < 0.3:
        spec["probes"] = {"warmupBudgetSeconds": rng.choice([600, 900])}
    spec["service"] = {
        "port": rng.choice([8000, 9000]),
        "type": rng.choice(["ClusterIP", "NodePort"]),
    }
    spec["replicas"] = rng.randint(0, 4)
    gate: dict[str, Any] = {"iterations": rng.randint(1, 3)}
    if rng.random() < 0.2:
        gate["enabled"] = False
    if rng.random() < 0.3:
        gate["baseline"] = {"mode": rng.choice(["auto", "twin", "stored"])}
    if rng.random() < 0.3:
        gate["trials"] = rng.randint(1, 3)
    spec["gate"] = gate
    if rng.random() < 0.3:
        spec["rollout"] = {"candidateReplicas": rng.randint(1, 2)}
    return raw


def cases() -> dict[str, dict[str, Any]]:
    out = {
        f"example/{p.name}": yaml.safe_load(p.read_text())
        for p in sorted((ROOT / "examples").glob("*.yaml"))
    }
    out["base"] = base_resource()
    rng = random.Random(SEED)
    for i in range(GENERATED):
        out[f"generated/{i:02d}"] = generated(rng)
    return out


def render_case(resource: dict[str, Any], *, serve: bool) -> dict[str, Any]:
    """Everything the operator writes for ``resource`` (refusals as their text)."""
    doc: dict[str, Any] = {}
    try:
        doc["render_all"] = render_all(parse_vllm_deployment(copy.deepcopy(resource)))
    except SpecErrors as e:
        doc["render_all"] = {"refused": str(e)}
    try:
        doc["first_revision"] = first_revision(copy.deepcopy(resource), _t0(), RECORDED_SETTINGS)
    except SpecErrors as e:
        doc["first_revision"] = {"refused": str(e)}
    if serve and "refused" not in doc["first_revision"]:
        from rollout_world import serving_world

        world = serving_world(copy.deepcopy(resource["spec"]))
        doc["serving"] = {
            "annotations": world.body["metadata"].get("annotations", {}),
            "status": world.status,
        }
    return doc


def _t0() -> Any:
    from rollout_world import T0

    return T0


def canonical(doc: Any) -> str:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def renders() -> dict[str, str]:
    """Case name -> the canonical JSON of what is written for it."""
    return {
        name: canonical(render_case(resource, serve=name.startswith(("example/", "base"))))
        for name, resource in cases().items()
    }


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: recorded_renders.py --write")
    recorded = {name: digest(text) for name, text in renders().items()}
    RECORD.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
    print(f"recorded {len(recorded)} cases in {RECORD}")
