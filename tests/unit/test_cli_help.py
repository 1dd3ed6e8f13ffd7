"""What a newcomer reads first: `--help` of each command, exit codes, README's lists.

Each check runs the real entry point (``vllm_operator.commands.main``) with captured streams, so
a help text that drifts from the behaviour, or a README list that misses a command or a
document, fails here rather than in a newcomer's first ten minutes.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from vllm_operator.commands import COMMANDS, main

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _help(command: str, capsys: pytest.CaptureFixture[str]) -> str:
    try:
        code: object = main([command, "--help"])
    except SystemExit as stop:  # argparse's own --help
        code = stop.code
    assert code == 0
    return capsys.readouterr().out


def test_no_arguments_prints_usage_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("usage: vllm-operator COMMAND")
    for name in COMMANDS:
        assert f"\n  {name} " in captured.err


def test_help_is_a_success(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: vllm-operator COMMAND")


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_never_appends_default_none(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert "(default: None)" not in _help(command, capsys)


def test_run_help_has_no_appended_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    text = _help("run", capsys)
    assert "(default: " not in text
    assert "default 8080" in text  # the option's own wording stays
    assert "exit status" in text


def test_demo_time_scale_reads_the_right_way_round(capsys: pytest.CaptureFixture[str]) -> None:
    text = " ".join(_help("demo", capsys).split())
    assert "real seconds per simulated second" in text
    assert "a request that takes 30 s on a GPU takes 0.9 s here" in text
    assert "simulated time per real second" not in text


def test_demo_help_offers_the_multi_node_story(capsys: pytest.CaptureFixture[str]) -> None:
    text = " ".join(_help("demo", capsys).split())
    assert "--multi-node a model that spans nodes instead of the upgrade story" in text
    assert "gated against a twin of the stable group and promoted" in text
    assert "vllm-operator demo --multi-node" in text


def test_readme_lists_every_command() -> None:
    block = README.split("Commands (`vllm-operator COMMAND --help` for each):", 1)[1]
    listed = set(re.findall(r"^vllm-operator (\w+)", block.split("```")[1], re.MULTILINE))
    assert listed == set(COMMANDS)


def test_readme_lists_every_document() -> None:
    table = README.split("## Documentation", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"`(docs/[\w-]+\.md)`", table))
    present = {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")}
    assert present <= listed, sorted(present - listed)


def test_readme_says_how_long_the_tests_take() -> None:
    section = README.split("Run the tests", 1)[1].split("```sh", 1)[0]
    assert re.search(r"about \d+ minutes on a quiet", section), section
    assert re.search(r"about \d+ on a loaded", section), section


BAD_VALUES = """\
apiVersion: vllm-operator.dev/v1alpha1
kind: VLLMDeployment
metadata: {name: qwen3-30b-a3b}
spec:
  model: {}
  engine:
    image: vllm/vllm-openai:v0.17.0
    performanceMode: fastest
  resources: {gpus: two}
  replicas: -1
  gate:
    enabled: maybe
    thresholds:
      maxRegressionPercent: 1000
    workloads:
      concurrency: [1, 1]
  rollout:
    candidateReplicas: 0
    progressDeadlineSeconds: [1]
"""


def test_render_gives_every_pydantic_error_a_field_and_a_fix(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    cr = tmp_path / "bad.yaml"
    cr.write_text(BAD_VALUES)
    assert main(["render", "-f", str(cr)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    header, *problems = captured.err.strip().splitlines()
    assert "is invalid" in header
    fields = set()
    for line in problems:
        match = re.fullmatch(r"(spec\.[\w.\[\]]+): (.+) \(fix: (.+)\)", line)
        assert match, f"no field or no fix: {line}"
        fields.add(match[1])
    assert {
        "spec.model.name",
        "spec.engine.performanceMode",
        "spec.resources.gpus",
        "spec.replicas",
        "spec.gate.enabled",
        "spec.gate.thresholds.maxRegressionPercent",
        "spec.rollout.candidateReplicas",
        "spec.rollout.progressDeadlineSeconds",
    } <= fields, problems
    text = "\n".join(problems)
    assert "(fix: write a whole number, e.g. 1)" in text
    assert "(fix: use a value of at least 0)" in text
    assert "(fix: use a value of at most 100)" in text
    assert "(fix: write true or false)" in text
    # the unknown `workloads` key: "did you mean" from the fields of spec.gate
    assert (
        "spec.gate.workloads: Extra inputs are not permitted (fix: did you mean workload?" in text
    )


@pytest.mark.parametrize(
    "extra",
    [
        ["--trials", "99"],
        ["--warmup", "-1"],
        ["--concurrency", "0"],
        ["--request-timeout", "nan"],
        ["--thresholds-json", '{"maxRegressionPercent": "x"}'],
        ["--thresholds-json", '{"maxRegresionPercent": 5}'],
        ["--job-name", "j", "--revision", "0123456789", "--attempt", "0"],
    ],
)
def test_bench_usage_errors_name_the_option_and_a_fix(
    extra: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    summary = tmp_path / "summary.json"
    argv = ["bench", "--url", "http://127.0.0.1:9", "--model", "m", "--summary-path", str(summary)]
    assert main([*argv, *extra]) == 2
    err = capsys.readouterr().err
    assert re.search(r"error: --[\w-]+.*: .+ \(fix: .+\)$", err.strip()), err
