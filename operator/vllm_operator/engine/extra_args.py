"""Checking ``spec.engine.extraArgs`` against the vLLM version before any GPU is spent.

An unknown or removed flag makes vLLM's argparse exit, and the pod crash-loops only after
minutes of image pull and scheduling. So every catalogued flag in the extra args is checked
here: it must exist in the version, must not duplicate a spec field (one place per
setting, so status, printer columns and the revision hash see it), and must carry a valid
value. Flags the catalogue does not know pass through: vLLM is the judge of its own CLI.
"""

from __future__ import annotations

from dataclasses import dataclass

from vllm_operator.engine import catalog
from vllm_operator.engine.catalog import Flag
from vllm_operator.engine.tables import EAGER_COST, REMOVED_FLAG_FAMILIES
from vllm_operator.engine.version import Version
from vllm_operator.errors import SpecError

FIELD = "spec.engine.extraArgs"


@dataclass(frozen=True)
class Occurrence:
    """One catalogued flag found in the extra args."""

    index: int
    spelling: str
    flag: Flag
    value: str | None


@dataclass(frozen=True)
class ExtraArgsReport:
    """What the extra args mean for the launch."""

    errors: tuple[SpecError, ...]
    warnings: tuple[str, ...]
    occurrences: tuple[Occurrence, ...]
    runs_eager: bool
    pipeline_parallel_size: int


def scan(extra_args: list[str]) -> tuple[list[Occurrence], list[SpecError]]:
    """Find the catalogued flags and their values; report value-less value flags."""
    found: list[Occurrence] = []
    errors: list[SpecError] = []
    i = 0
    while i < len(extra_args):
        token = extra_args[i]
        flag = catalog.lookup(token) if token.startswith("-") and token != "--" else None
        if flag is None:
            i += 1
            continue
        start = i
        spelling, _, glued = token.partition("=")
        value: str | None = None
        if "=" in token:
            value = glued
        elif flag.name == "--optimization-level" and spelling.startswith("-O") and spelling != "-O":
            value = spelling[2:]  # -O3
            spelling = "-O"
        elif flag.takes_value:
            if i + 1 < len(extra_args):
                value = extra_args[i + 1]
                i += 1
            else:
                errors.append(
                    SpecError(
                        f"{FIELD}[{i}]",
                        f"{spelling} needs a value",
                        f"add the value as the next list item, or write {spelling}=VALUE",
                    )
                )
        found.append(Occurrence(start, spelling, flag, value))
        i += 1
    return found, errors


def _exists_error(occ: Occurrence, version: Version) -> SpecError | None:
    flag = occ.flag
    if flag.exists_in(version):
        return None
    field = f"{FIELD}[{occ.index}]"
    if flag.removed_in is not None and version >= flag.removed_in:
        return SpecError(
            field,
            f"{occ.spelling} does not exist in vLLM {version} (removed in {flag.removed_in}); "
            "vLLM would exit at start and the pod would crash-loop",
            flag.replacement or "drop it",
        )
    since = flag.since
    if flag.name == "--performance-mode":
        fix = (
            "drop it: vLLM before 0.17.0 has no performance modes (use "
            "spec.engine.performanceMode, which emits the flag only where it exists), or "
            "upgrade to vLLM >= 0.17.0"
        )
    else:
        fix = f"drop it, or use vLLM >= {since}"
    return SpecError(
        field,
        f"{occ.spelling} does not exist before vLLM {since} (this is {version}); vLLM would "
        "exit at start and the pod would crash-loop",
        fix,
    )


def _is_optimization_zero(occ: Occurrence) -> bool:
    return occ.flag.name == "--optimization-level" and occ.value == "0"


def _family_errors(extra_args: list[str], version: Version) -> list[SpecError]:
    errors: list[SpecError] = []
    for i, token in enumerate(extra_args):
        if catalog.lookup(token) is not None:
            continue  # catalogued members are judged by their own row
        for family in REMOVED_FLAG_FAMILIES:
            if token.startswith(family.prefix) and version >= family.removed_in:
                errors.append(
                    SpecError(
                        f"{FIELD}[{i}]",
                        f"{token.split('=', 1)[0]} does not exist in vLLM {version} "
                        f"({family.prefix}* removed in {family.removed_in})",
                        f"use {family.replacement}",
                    )
                )
    return errors


def check(extra_args: list[str], version: Version, performance_mode: str) -> ExtraArgsReport:
    """Check the extra args for ``version``; errors name ``spec.engine.extraArgs[i]``."""
    occurrences, errors = scan(extra_args)
    errors += _family_errors(extra_args, version)
    warnings: list[str] = []
    runs_eager = False
    pp = 1
    for occ in occurrences:
        field = f"{FIELD}[{occ.index}]"
        missing = _exists_error(occ, version)
        if missing is not None:
            errors.append(missing)
            continue
        name = occ.flag.name
        if name == "--enforce-eager":
            if performance_mode == "eager":
                errors.append(
                    SpecError(
                        field,
                        "--enforce-eager is already added by performanceMode eager",
                        "remove it from extraArgs",
                    )
                )
            else:
                runs_eager = True
                warnings.append(
                    f"extraArgs --enforce-eager overrides performanceMode {performance_mode}: "
                    f"the pods run eager. {EAGER_COST}. Remove it unless you need eager (e.g. "
                    "to debug a compile failure); performanceMode eager says so explicitly"
                )
            continue
        if occ.flag.conflicts == "(operator-managed)":
            errors.append(
                SpecError(
                    field,
                    f"{occ.spelling} is managed by the operator (probes and Services need vLLM "
                    "on all interfaces)",
                    "remove it",
                )
            )
            continue
        if occ.flag.conflicts:
            errors.append(
                SpecError(
                    field,
                    f"{occ.spelling} is controlled by {occ.flag.conflicts}; setting it in "
                    "extraArgs as well contradicts the spec",
                    f"set it only in {occ.flag.conflicts}",
                )
            )
            continue
        if occ.flag.choices and occ.value is not None and occ.value not in occ.flag.choices:
            errors.append(
                SpecError(
                    field,
                    f"{occ.spelling} {occ.value!r} is not one of {', '.join(occ.flag.choices)}",
                    f"use one of: {', '.join(occ.flag.choices)}",
                )
            )
            continue
        if _is_optimization_zero(occ):
            runs_eager = True
            warnings.append(
                f"extraArgs {occ.spelling} 0 turns compilation and CUDA graphs off like "
                f"--enforce-eager. {EAGER_COST}"
            )
        if name == "--pipeline-parallel-size" and occ.value is not None:
            try:
                pp = int(occ.value)
            except ValueError:
                errors.append(
                    SpecError(field, f"{occ.spelling} {occ.value!r} is not a whole number", "")
                )
                continue
            if pp < 1:
                errors.append(SpecError(field, f"{occ.spelling} must be at least 1", ""))
                pp = 1
        if name == "--api-key":
            warnings.append(
                "extraArgs --api-key puts the key into the pod spec, readable by anyone who "
                "can read Deployments in the namespace, and the benchmark Job does not get it "
                "(the gate cannot measure); use spec.engine.apiKeySecret"
            )
    return ExtraArgsReport(tuple(errors), tuple(warnings), tuple(occurrences), runs_eager, pp)
