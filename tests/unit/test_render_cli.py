"""`vllm-operator render`: YAML stream out, and every invalid spec named by its field.

Each invalid case is checked twice: through the CLI (exit 2, ``field: message (fix: ...)``
on stderr, nothing on stdout) and through the library (``SpecErrors`` naming the field).
"""

from __future__ import annotations

import copy
import io
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

import builders
from vllm_operator.api import parse_vllm_deployment
from vllm_operator.commands.render import run
from vllm_operator.errors import SpecErrors
from vllm_operator.render import render_all
from vllm_operator.render.labels import REVISION_LABEL, ROLE_LABEL
from vllm_operator.rollout import Create, Settings, observe, plan

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
PROG = "vllm-operator render"


def base() -> dict[str, Any]:
    return builders.resource(builders.minimal_spec(builders.MODEL_30B))


def cli(argv: list[str], stdin: str = "", now: datetime | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(argv, PROG, io.StringIO(stdin), out, err, now=now)
    return code, out.getvalue(), err.getvalue()


def edit(path: str, value: Any) -> dict[str, Any]:
    raw = base()
    node = raw
    *parents, leaf = path.split(".")
    for key in parents:
        node = node.setdefault(key, {})
    node[leaf] = value
    return raw


def engine(**fields: Any) -> dict[str, Any]:
    raw = base()
    raw["spec"]["engine"].update(fields)
    return raw


def tp_over_gpus() -> dict[str, Any]:
    raw = engine(tensorParallelSize=4)
    raw["spec"]["resources"] = {"gpus": 2}
    return raw


# (case id, resource, field the error must name, text the message or fix must contain)
INVALID: list[tuple[str, dict[str, Any], str, str]] = [
    ("unknown-mode", engine(performanceMode="fast"), "spec.engine.performanceMode", "throughput"),
    (
        "removed-flag",
        engine(image="vllm/vllm-openai:v0.16.0", extraArgs=["--task", "generate"]),
        "spec.engine.extraArgs[0]",
        "--runner",
    ),
    (
        "digest-without-version",
        engine(image="vllm/vllm-openai@sha256:" + "0" * 64),
        "spec.engine.version",
        "set spec.engine.version",
    ),
    (
        "unversioned-tag",
        engine(image="vllm/vllm-openai:latest"),
        "spec.engine.version",
        "set spec.engine.version",
    ),
    (
        "tp-exceeds-gpus",
        tp_over_gpus(),
        "spec.engine.tensorParallelSize",
        "spec.resources.gpus",
    ),
    ("negative-replicas", edit("spec.replicas", -1), "spec.replicas", "greater than or equal"),
    (
        "literal-token-env",
        engine(env=[{"name": "HF_TOKEN", "value": "secret"}]),
        "spec.engine.env[0].name",
        "hfTokenSecret",
    ),
    (
        "literal-token-field",
        edit("spec.model.hfToken", "hf_abc"),
        "spec.model.hfToken",
        "did you mean hfTokenSecret?",
    ),
    (
        "unknown-field",
        engine(performanceMod="throughput"),
        "spec.engine.performanceMod",
        "did you mean performanceMode?",
    ),
    (
        "performance-mode-on-0.16",
        engine(image="vllm/vllm-openai:v0.16.0", extraArgs=["--performance-mode", "throughput"]),
        "spec.engine.extraArgs[0]",
        "0.17.0",
    ),
    (
        "disable-log-requests-on-0.17",
        engine(extraArgs=["--disable-log-requests"]),
        "spec.engine.extraArgs[0]",
        "--enable-log-requests",
    ),
    (
        "vllm-port-env",
        engine(env=[{"name": "VLLM_PORT", "value": "8000"}]),
        "spec.engine.env[0].name",
        "spec.service.port",
    ),
    ("name-too-long", edit("metadata.name", "a" * 43), "metadata.name", "at most 42"),
    (
        "bad-quantity-suffix",
        edit("spec.resources", {"memory": "64GB"}),
        "spec.resources.memory",
        "pattern",
    ),
    ("bad-quantity-number", edit("spec.resources", {"cpu": "1.2.3"}), "spec.resources.cpu", "64Gi"),
    ("version-too-old", engine(image="vllm/vllm-openai:v0.9.2"), "spec.engine.image", "0.10.2"),
    ("version-contradicts-tag", engine(version="0.16.0"), "spec.engine.version", "agree"),
    ("zero-gpus", edit("spec.resources", {"gpus": 0}), "spec.resources.gpus", "at least 1"),
    (
        "port-in-extra-args",
        engine(extraArgs=["--port", "9000"]),
        "spec.engine.extraArgs[0]",
        "spec.service.port",
    ),
    (
        "eager-twice",
        engine(performanceMode="eager", extraArgs=["--enforce-eager"]),
        "spec.engine.extraArgs[0]",
        "remove it",
    ),
    (
        "ld-library-path-with-fix",
        engine(env=[{"name": "LD_LIBRARY_PATH", "value": "/x"}]),
        "spec.engine.env[0].name",
        "libraryPathFix: none",
    ),
    ("model-looks-like-option", edit("spec.model.name", "--help"), "spec.model.name", "option"),
    ("service-named-vllm", edit("metadata.name", "vllm"), "metadata.name", "VLLM_PORT"),
    ("name-starts-with-digit", edit("metadata.name", "7b"), "metadata.name", "letter"),
    ("missing-image", edit("spec.engine", {}), "spec.engine.image", "add it"),
    (
        "unknown-library-fix",
        engine(libraryPathFix="strip"),
        "spec.engine.libraryPathFix",
        "strip-cuda",
    ),
    ("wrong-api-version", edit("apiVersion", "v1"), "apiVersion", "vllm-operator.dev/v1alpha1"),
    (
        "toleration-exists-with-value",
        edit(
            "spec.scheduling", {"tolerations": [{"key": "a", "operator": "Exists", "value": "b"}]}
        ),
        "spec.scheduling.tolerations[0].value",
        "drop it",
    ),
]


def test_at_least_twelve_distinct_invalid_specs() -> None:
    assert len({case[0] for case in INVALID}) == len(INVALID) >= 12
    assert len({case[2] for case in INVALID}) >= 12


@pytest.mark.parametrize(
    ("resource", "field", "needle"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID]
)
def test_invalid_spec_via_library(resource: dict[str, Any], field: str, needle: str) -> None:
    with pytest.raises(SpecErrors) as info:
        render_all(parse_vllm_deployment(copy.deepcopy(resource)))
    matching = [e for e in info.value.errors if e.field == field]
    assert matching, f"no error names {field}: {info.value}"
    assert any(needle in f"{e.message} {e.fix}" for e in matching), str(info.value)


@pytest.mark.parametrize(
    ("resource", "field", "needle"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID]
)
def test_invalid_spec_via_cli(
    tmp_path: Path, resource: dict[str, Any], field: str, needle: str
) -> None:
    path = tmp_path / "cr.yaml"
    path.write_text(yaml.safe_dump(resource))
    code, out, err = cli(["-f", str(path)])
    assert code == 2
    assert out == ""
    lines = [line for line in err.splitlines() if line.startswith(f"{field}: ")]
    assert lines, err
    assert any(needle in line for line in lines), err


FIRST_REVISION = ["Service", "Deployment", "Job", "Service", "PodDisruptionBudget"]


def test_examples_render_as_a_yaml_stream() -> None:
    argv = [arg for path in EXAMPLES for arg in ("-f", str(path))]
    code, out, err = cli(argv)
    assert code == 0, err
    docs = list(yaml.safe_load_all(out))
    assert len(docs) == len(FIRST_REVISION) * len(EXAMPLES)
    assert out.count("\n---\n") == len(docs) - 1
    assert [d["kind"] for d in docs] == FIRST_REVISION * len(EXAMPLES)
    # The 0.16 example's mode has no effect there: a warning on stderr, not an error.
    assert "warning:" in err
    assert "no effect before vLLM 0.17.0" in err


def test_stdin_and_several_documents_per_file() -> None:
    second = base()
    second["metadata"]["name"] = "other"
    stream = yaml.safe_dump_all([base(), None, second])
    code, out, _ = cli(["-f", "-"], stdin=stream)
    assert code == 0
    names = [d["metadata"]["name"] for d in yaml.safe_load_all(out)]
    assert [names[0], names[3]] == ["qwen--candidate", "qwen"]
    assert [names[5], names[8]] == ["other--candidate", "other"]


def test_one_invalid_document_prints_no_manifest(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(yaml.safe_dump(base()))
    bad.write_text(
        yaml.safe_dump(engine(performanceMode="turbo", extraArgs=["--disable-log-requests"]))
    )
    code, out, err = cli(["-f", str(good), "-f", str(bad)])
    assert code == 2
    assert out == ""
    assert "bad.yaml" in err


def test_several_problems_are_all_listed() -> None:
    resource = engine(
        extraArgs=["--disable-log-requests", "--port", "1"],
        env=[{"name": "VLLM_PORT", "value": "1"}],
    )
    resource["metadata"]["name"] = "x" * 50
    code, _, err = cli(["-f", "-"], stdin=yaml.safe_dump(resource))
    assert code == 2
    assert "(4 problems)" in err
    for field in (
        "spec.engine.extraArgs[0]",
        "spec.engine.extraArgs[1]",
        "spec.engine.env[0].name",
        "metadata.name",
    ):
        assert f"\n{field}: " in err


@pytest.mark.parametrize(
    ("stdin", "argv", "needle"),
    [
        ("a: [", ["-f", "-"], "not valid YAML"),
        ("- 1\n", ["-f", "-"], "not a mapping"),
        ("", ["-f", "-"], "no documents"),
        ("", ["-f", "/nonexistent/cr.yaml"], "cannot read"),
    ],
)
def test_unreadable_input_exits_2(stdin: str, argv: list[str], needle: str) -> None:
    code, out, err = cli(argv, stdin=stdin)
    assert code == 2
    assert out == ""
    assert needle in err


def test_help_has_an_example_and_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        run(["--help"], PROG, io.StringIO(), io.StringIO(), io.StringIO())
    assert info.value.code == 0
    text = capsys.readouterr().out
    assert "-f examples/" in text
    assert "exit status" in text


def test_console_script_end_to_end() -> None:
    example = next(p for p in EXAMPLES if "v0.17" in p.name)
    proc = subprocess.run(
        [sys.executable, "-m", "vllm_operator.commands", "render", "-f", str(example)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    deployment = next(d for d in yaml.safe_load_all(proc.stdout) if d["kind"] == "Deployment")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--performance-mode") + 1] == "throughput"
    assert "--enforce-eager" not in args


NOW = datetime(2026, 5, 1, 9, 30, tzinfo=UTC)


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_render_starts_with_exactly_the_planners_first_pass(path: Path) -> None:
    resource = yaml.safe_load(path.read_text())
    code, out, err = cli(["-f", str(path), "--bench-image", "op:9"], now=NOW)
    assert code == 0, err
    docs = list(yaml.safe_load_all(out))
    first = plan(observe(resource), NOW, Settings(bench_image="op:9"))
    creates = [dict(a.manifest) for a in first.actions if isinstance(a, Create)]
    assert [a for a in first.actions if not isinstance(a, Create)] == []
    assert docs[: len(creates)] == creates
    deployment = creates[1]
    assert deployment["kind"] == "Deployment"
    assert deployment["spec"]["replicas"] == 1  # the candidate, not spec.replicas
    assert deployment["metadata"]["labels"][ROLE_LABEL] == "candidate"
    # The rest: the benchmark Job, the serving Service and its budget, of the same revision.
    revision = deployment["metadata"]["labels"][REVISION_LABEL]
    job, serving, budget = docs[len(creates) :]
    assert budget["metadata"]["name"] == f"{resource['metadata']['name']}--{revision}"
    assert job["metadata"]["name"] == f"{resource['metadata']['name']}--gate-{revision}-1"
    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == "op:9"
    assert serving["metadata"]["name"] == resource["metadata"]["name"]
    assert serving["spec"]["selector"][REVISION_LABEL] == revision


def test_render_without_gate_has_no_job() -> None:
    resource = base()
    resource["spec"]["gate"] = {"enabled": False}
    code, out, err = cli(["-f", "-"], stdin=yaml.safe_dump(resource), now=NOW)
    assert code == 0, err
    kinds = [d["kind"] for d in yaml.safe_load_all(out)]
    assert kinds == ["Service", "Deployment", "Service", "PodDisruptionBudget"]
