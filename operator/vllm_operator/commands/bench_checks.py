"""What `bench` refuses before it sends a request, and the workload file it reads.

A run that cannot end well should end at once: the CRD refuses SLO limits without a
workload (and the workload model itself load levels its mode does not use), and a gated
quality suite whose code checks have no sandbox to run in can only end in Error, so `bench`
refuses the same with exit 2 and the fix in the
message, instead of measuring for minutes and ending in Error. The workload file is the
``gate.workload`` block as the README shows it, with or without its ``workload:`` key;
``--dataset`` stands for the dataset's ConfigMap or claim; a misspelt field gets a "did you
mean" from the schema (``api.fixes``).
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping

from pydantic import BaseModel, ValidationError

from vllm_operator.api.fixes import field_location, first_error, model_in
from vllm_operator.api.gate_spec import Thresholds
from vllm_operator.api.workload import WorkloadSpec
from vllm_operator.bench.quality.suite import Not, PythonTests, Suite
from vllm_operator.errors import SpecError

WORKLOAD_HELP = "`vllm-operator bench --help-workload`"
"""Where every workload field is documented: the fallback fix of a workload error."""

LOCAL_DATASET = "local-dataset-file"
"""The ConfigMap name that stands for ``--dataset``'s file (the Job mounts a real one)."""


def workload_from_document(document: object, *, dataset_given: bool) -> WorkloadSpec:
    """The WorkloadSpec of one YAML/JSON document: ``gate.workload``'s block, with or without
    the ``workload:`` key; a dataset without a ConfigMap or claim reads ``--dataset``."""
    if isinstance(document, Mapping) and set(document) == {"workload"}:
        document = document["workload"]
    if isinstance(document, Mapping) and dataset_given:
        dataset = document.get("dataset")
        if isinstance(dataset, Mapping) and not (
            "configMap" in dataset or "persistentVolumeClaim" in dataset
        ):
            document = {**document, "dataset": {**dataset, "configMap": LOCAL_DATASET}}
    try:
        return WorkloadSpec.model_validate(document)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = field_location(first["loc"])
        fix = None
        if dataset_given is False and loc[:1] == ("dataset",) and "configMap" in str(first["msg"]):
            fix = "give the file with --dataset FILE (or a configMap / persistentVolumeClaim)"
        raise first_error(
            exc, "--workload", docs=WORKLOAD_HELP, fix=fix, model=WorkloadSpec
        ) from exc


def refuse_early(
    *,
    thresholds: Thresholds | None,
    workload: WorkloadSpec,
    suite: Suite,
    gated: bool,
    runs_code: bool,
) -> None:
    """Raise ``SpecError`` for what the CRD refuses and a run could only end in Error."""
    if thresholds is not None and thresholds.slo is not None and workload.is_study:
        raise SpecError(
            "--thresholds-json: slo",
            "SLO limits are held at load levels, and the study's classes have none",
            "add --workload FILE with a synthetic or dataset workload (README, 'Gate on your "
            "own traffic'), or remove slo",
        )
    code = code_tests(suite)
    if gated and code and not runs_code:
        raise SpecError(
            "--suite",
            f"{', '.join(code[:3])} check(s) answer code, and nothing here may run it, so the "
            "gate could only end in Error",
            "add --allow-code-execution (a local sandbox process), --sandbox-dir DIR (a "
            "sandbox container), or --suite builtin:none (no quality suite)",
        )


def code_tests(suite: Suite) -> list[str]:
    """Ids of the suite's tests with a python-tests check (wrapped in ``not`` or not)."""
    found = []
    for test in suite.tests:
        for outer in test.assert_:
            check = outer
            while isinstance(check, Not):
                check = check.assert_
            if isinstance(check, PythonTests):
                found.append(test.id)
                break
    return found


WORKLOAD_EXAMPLE = """\
The file --workload reads is the gate.workload block of a VLLMDeployment, e.g.

  workload:                      # this key is optional
    dataset: {format: chat-jsonl, maxOutputTokens: 512}   # the file: --dataset prompts.jsonl
    seed: 7
    load: {mode: rate, rates: [5, 10, 20], secondsPerLevel: 60}

or a synthetic one: synthetic: {inputTokens: {distribution: lognormal, mean: 800,
spread: 400}, outputTokens: {mean: 200}}. In a cluster the dataset names a configMap (with
key) or a persistentVolumeClaim (with path); on a laptop --dataset gives the file. Formats
and sampling: docs/workloads.md. Every field:

"""


def workload_help() -> str:
    """Every field of ``WorkloadSpec``, dotted path and description, after an example."""
    lines: list[str] = []
    _fields(WorkloadSpec, "", lines)
    return WORKLOAD_EXAMPLE + "\n".join(lines) + "\n"


def _fields(model: type[BaseModel], prefix: str, out: list[str]) -> None:
    for name, field in model.model_fields.items():
        path = f"{prefix}{field.alias or name}"
        inner = model_in(field.annotation)
        described = field.description or ""
        if field.is_required():
            described += " (required)"
        elif inner is None:
            default = field.get_default(call_default_factory=True)
            if default is not None:
                described += f" (default {default})"
        out.append(f"  {path}")
        out += textwrap.wrap(described, 92, initial_indent="      ", subsequent_indent="      ")
        if inner is not None:
            _fields(inner, f"{path}.", out)
