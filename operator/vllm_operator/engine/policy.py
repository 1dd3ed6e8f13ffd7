"""From a spec to the exact `vllm serve` arguments, or every reason it cannot run.

The policy is pure and table-driven: which flags a release accepts is read from vLLM's own
parser (``flagdata``, replayed by ``argv``; hand-written notes in ``catalog``), what a
performance mode becomes and which images need the library-path fix is ``tables``.
It runs before anything is created, so a spec that would crash-loop a GPU pod after
minutes of image pull is refused at once, with every problem named in one ``SpecErrors``
(users fix them all in one edit). Warnings are for specs that run but cost something the
user may not have meant (eager mode, ``unset`` on GKE, an unchecked vLLM version).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from vllm_operator.api.launch import LaunchRecord
from vllm_operator.api.spec import VLLMDeploymentSpec
from vllm_operator.engine import argv, catalog, extra_args, flagdata, multinode, tables
from vllm_operator.engine.version import Version, version_from_image
from vllm_operator.errors import SpecError, SpecErrors

# Something that looks like a literal Hugging Face access token (hf_ + 30 or more letters).
_HF_TOKEN_RE = re.compile(r"\bhf_[A-Za-z0-9]{30,}\b")
# An image reference has no whitespace or control characters (the kubelet refuses them).
_IMAGE_RE = re.compile(r"^[^\s\x00-\x1f\x7f]+$")


@dataclass(frozen=True)
class LaunchPlan:
    """How one revision's vLLM is started.

    Computed once per pass (by the planner, or by ``render`` for a preview) and passed to
    everything that needs it: the revision hash, the Deployment, the status and its Events.
    """

    image: str
    version: Version
    args: tuple[str, ...]  # everything after `vllm serve`, the model first
    warnings: tuple[str, ...]
    library_path_fix: str  # strip-cuda | unset | none (never auto)
    key_flags: tuple[str, ...]
    compiled: bool = True  # whether the pods run torch.compile + CUDA graphs
    performance_mode: str = "balanced"
    # The release whose recorded parser judged the flags: the version itself, or the
    # nearest older recorded release when the version is newer than the data.
    flags_checked_against: Version | None = None
    # A model that spans nodes (spec.resources.nodes > 1): the leader's and the workers'
    # arguments; None on one node, where ``args`` is the whole command line.
    group: multinode.GroupLaunch | None = None

    @property
    def flags_from_older_release(self) -> bool:
        return self.flags_checked_against is not None and self.flags_checked_against != self.version

    def record(self) -> LaunchRecord:
        """The essentials kept on the revision's Deployment (``api/launch.py``)."""
        return LaunchRecord(
            image=self.image,
            version=str(self.version),
            performance_mode=self.performance_mode,
            compiled=self.compiled,
            library_path_fix=self.library_path_fix,
            key_flags=list(self.key_flags),
        )


def resolve_version(spec: VLLMDeploymentSpec) -> tuple[Version | None, list[SpecError]]:
    """The vLLM version of the image: ``spec.engine.version``, else the image's vX.Y.Z tag."""
    engine = spec.engine
    from_tag = version_from_image(engine.image)
    if engine.version is None:
        if from_tag is None:
            return None, [
                SpecError(
                    "spec.engine.version",
                    f"is required: the image {engine.image!r} is a digest or has no vX.Y.Z tag, "
                    "and the flags vLLM accepts depend on its version",
                    "set spec.engine.version to the vLLM version in the image, e.g. 0.17.0",
                )
            ]
        version = from_tag
        field = "spec.engine.image"
    else:
        version = Version.parse(engine.version)
        field = "spec.engine.version"
        if from_tag is not None and from_tag != version:
            return None, [
                SpecError(
                    "spec.engine.version",
                    f"is {version} but the image tag says {from_tag}",
                    "make them agree, or omit spec.engine.version to take it from the tag",
                )
            ]
    oldest = flagdata.oldest()
    if version < oldest:
        return None, [
            SpecError(
                field,
                f"vLLM {version} is older than {oldest}, the oldest release whose flags this "
                "operator checks",
                f"use vLLM >= {oldest}",
            )
        ]
    return version, []


def resolve_library_path_fix(requested: str, version: Version) -> str:
    """``auto`` becomes the table's fix for ``version`` (``none`` outside every row)."""
    if requested != "auto":
        return requested
    for row in tables.LIBRARY_PATH_FIX_BY_VERSION:
        if row.covers(version):
            return row.fix
    return "none"


def _nul_errors(spec: VLLMDeploymentSpec) -> list[SpecError]:
    """A NUL cannot be passed in argv or env (execve ends the string there)."""
    values: list[tuple[str, str | None]] = [
        ("spec.model.name", spec.model.name),
        ("spec.model.revision", spec.model.revision),
        ("spec.model.servedModelName", spec.model.served_model_name),
    ]
    values += [(f"spec.engine.extraArgs[{i}]", a) for i, a in enumerate(spec.engine.extra_args)]
    values += [(f"spec.engine.env[{i}].value", e.value) for i, e in enumerate(spec.engine.env)]
    errors = [
        SpecError(field, "contains a NUL character, which no process argument can carry", "")
        for field, value in values
        if value is not None and "\x00" in value
    ]
    if not _IMAGE_RE.match(spec.engine.image):
        errors.append(
            SpecError(
                "spec.engine.image",
                f"{spec.engine.image!r} is not an image reference (whitespace or control "
                "characters)",
                "write it like vllm/vllm-openai:v0.17.0 or registry/name@sha256:...",
            )
        )
    return errors


def _argv_value_errors(spec: VLLMDeploymentSpec) -> list[SpecError]:
    """Values placed as their own argv items must not look like options to argparse."""
    errors: list[SpecError] = _nul_errors(spec)
    for field, value in (
        ("spec.model.name", spec.model.name),
        ("spec.model.revision", spec.model.revision),
        ("spec.model.servedModelName", spec.model.served_model_name),
    ):
        if value is not None and (value.startswith("-") or not value.strip()):
            errors.append(
                SpecError(
                    field,
                    f"{value!r} is not a model reference: vLLM would read it as an option",
                    "use a Hugging Face id (org/name) or a path",
                )
            )
    return errors


def _env_errors(spec: VLLMDeploymentSpec, fix: str) -> list[SpecError]:
    errors: list[SpecError] = []
    seen: set[str] = set()
    for i, var in enumerate(spec.engine.env):
        field = f"spec.engine.env[{i}]"
        owned = tables.OWNED_ENV.get(var.name)
        if owned is not None:
            errors.append(SpecError(f"{field}.name", f"{var.name}: {owned.message}", owned.fix))
        elif var.name == "LD_LIBRARY_PATH" and fix != "none":
            errors.append(
                SpecError(
                    f"{field}.name",
                    f"LD_LIBRARY_PATH would be rewritten by libraryPathFix ({fix})",
                    "set spec.engine.libraryPathFix: none to use LD_LIBRARY_PATH as written",
                )
            )
        elif _HF_TOKEN_RE.search(var.value):
            errors.append(
                SpecError(
                    f"{field}.value",
                    "looks like a literal Hugging Face token",
                    "put the token in a Secret and reference it with spec.model.hfTokenSecret",
                )
            )
        if var.name in seen:
            errors.append(SpecError(f"{field}.name", f"{var.name} is set twice", "keep one entry"))
        seen.add(var.name)
    for i, arg in enumerate(spec.engine.extra_args):
        if _HF_TOKEN_RE.search(arg):
            errors.append(
                SpecError(
                    f"spec.engine.extraArgs[{i}]",
                    "looks like a literal Hugging Face token",
                    "put the token in a Secret and reference it with spec.model.hfTokenSecret",
                )
            )
    return errors


def _api_key_errors(
    spec: VLLMDeploymentSpec, taken: Iterable[argv.Taken], start: int
) -> list[SpecError]:
    """``--api-key`` in extraArgs next to ``apiKeySecret``: two keys, one of them literal.

    vLLM reads ``VLLM_API_KEY`` as the default of ``--api-key`` (see render/deployment.py
    for the source); which one wins differs by release, so both together are refused.
    """
    if spec.engine.api_key_secret is None:
        return []
    return [
        SpecError(
            f"{extra_args.FIELD}[{t.index - start}]" if t.index is not None else extra_args.FIELD,
            f"{t.written} contradicts spec.engine.apiKeySecret: vLLM would get two keys, "
            "one of them written into the pod spec",
            "drop it; the key comes from spec.engine.apiKeySecret",
        )
        for t in taken
        if t.option.dest == "api_key"
    ]


def _sizing_errors(
    spec: VLLMDeploymentSpec, pipeline_parallel: int, data_parallel: int = 1
) -> list[SpecError]:
    gpus = spec.resources.gpus
    if spec.resources.nodes > 1 and gpus > 0:
        return []  # a group is sized by multinode.group_errors, against its release
    tp = spec.engine.tensor_parallel_size
    world = tp * pipeline_parallel * data_parallel
    if gpus == 0:
        return [
            SpecError(
                "spec.resources.gpus",
                "is 0: this operator runs vLLM on GPUs (its CPU build is another image and "
                "product)",
                f"set spec.resources.gpus to at least {world}",
            )
        ]
    if world > gpus:
        what = f"tensorParallelSize {tp}"
        if pipeline_parallel > 1:
            what += f" x --pipeline-parallel-size {pipeline_parallel}"
        if data_parallel > 1:
            what += f" x --data-parallel-size {data_parallel}"
        return [
            SpecError(
                "spec.engine.tensorParallelSize",
                f"{what} needs {world} GPUs but spec.resources.gpus is {gpus}",
                f"set spec.resources.gpus to {world} or lower the parallel size",
            )
        ]
    return []


def _group_errors(
    spec: VLLMDeploymentSpec, report: extra_args.ExtraArgsReport, table: flagdata.FlagTable
) -> list[SpecError]:
    """A group's shape against the release, and the group's own flags kept out of extraArgs.

    On one node the node flags are refused too: ``--nnodes 2`` in one pod makes vLLM wait
    for a second node that never comes, until the startup probe kills it.
    """
    nodes = spec.resources.nodes
    errors: list[SpecError] = []
    if nodes > 1 and spec.resources.gpus > 0:
        errors = multinode.group_errors(
            nodes=nodes,
            gpus=spec.resources.gpus,
            tensor_parallel=spec.engine.tensor_parallel_size,
            pipeline_parallel=report.pipeline_parallel_size,
            data_parallel=report.data_parallel_size,
            table=table,
        )
    if nodes == 1 and spec.resources.group_topology_key is not None:
        errors.append(
            SpecError(
                "spec.resources.groupTopologyKey",
                "places the pods of a multi-node group in one topology domain, but "
                "spec.resources.nodes is 1: there is no group to place",
                "remove spec.resources.groupTopologyKey, or set spec.resources.nodes above 1",
            )
        )
    owned = multinode.GROUP_DESTS if nodes > 1 else multinode.NODE_DESTS
    for t in report.extra_taken():
        if t.option.dest not in owned:
            continue
        where = extra_args.FIELD
        if t.index is not None:
            where += f"[{t.index - report.extra_start}]"
        errors.append(
            SpecError(
                where,
                f"{t.written} ({t.option.long_name}) is the operator's to set, on every pod "
                "of a multi-node group (spec.resources.nodes)",
                "remove it; for a model that spans nodes set spec.resources.nodes",
            )
        )
    return errors


def _group_launch(nodes: int, table: flagdata.FlagTable) -> multinode.GroupLaunch | None:
    """The group's launch on ``nodes`` > 1 (its backend was checked by ``_group_errors``)."""
    if nodes == 1:
        return None
    return multinode.group_launch(nodes, multinode.group_backend(table) or multinode.NATIVE)


def _key_flags(report: extra_args.ExtraArgsReport, final: tuple[str, ...]) -> tuple[str, ...]:
    """The performance-deciding options as written, in command-line order."""
    found: list[str] = []
    for t in report.parsed.taken:
        if t.option.dest not in catalog.KEY_DESTS or t.index is None:
            continue
        if t.value_inline:
            found.append(t.written)
        else:
            found.append(" ".join(final[t.index : t.index + 1 + len(t.values)]))
    return tuple(found)


def plan_launch(spec: VLLMDeploymentSpec) -> LaunchPlan:
    """The `vllm serve` arguments for ``spec``; raises ``SpecErrors`` with every problem."""
    version, errors = resolve_version(spec)
    errors += _argv_value_errors(spec)
    engine = spec.engine
    if version is None:
        # Without a version the flags cannot be judged; report everything else we know.
        scanned = extra_args.scan_without_version(list(engine.extra_args))
        pp_value = scanned.value("pipeline_parallel_size")
        pp = pp_value if isinstance(pp_value, int) else 1
        dp_value = scanned.value("data_parallel_size")
        dp = dp_value if isinstance(dp_value, int) else 1
        requested = engine.library_path_fix
        errors += _env_errors(spec, requested if requested != "auto" else "none")
        errors += _api_key_errors(spec, scanned.taken, 1)
        errors += _sizing_errors(spec, max(pp, 1), max(dp, 1))
        raise SpecErrors(errors)
    mode = tables.MODES[engine.performance_mode]
    modern = version >= tables.PERFORMANCE_MODE_SINCE
    fix = resolve_library_path_fix(engine.library_path_fix, version)
    warnings: list[str] = []
    table = flagdata.table_for(version)
    assert table is not None  # resolve_version refused anything older than the data
    if table.version != version:
        warnings.append(extra_args.unknown_version_note(version, table.version))
    if not modern and mode.legacy_note:
        warnings.append(mode.legacy_note)
    if fix == "unset":
        warnings.append(tables.UNSET_RISK)

    model = spec.model
    args: list[str] = [model.name, "--port", str(spec.service.port)]
    args += ["--served-model-name", model.served_model_name or model.name]
    if model.revision is not None:
        args += ["--revision", model.revision]
    args += ["--tensor-parallel-size", str(engine.tensor_parallel_size)]
    if engine.max_model_len is not None:
        args += ["--max-model-len", str(engine.max_model_len)]
    if engine.gpu_memory_utilization is not None:
        args += ["--gpu-memory-utilization", repr(engine.gpu_memory_utilization)]
    args += mode.modern if modern else mode.legacy
    report = extra_args.check(
        args, list(engine.extra_args), table, engine.performance_mode, requested=version
    )
    errors += report.errors
    warnings += report.warnings
    errors += _env_errors(spec, fix)
    errors += _api_key_errors(spec, report.extra_taken(), report.extra_start)
    errors += _sizing_errors(spec, report.pipeline_parallel_size, report.data_parallel_size)
    errors += _group_errors(spec, report, table)
    if errors:
        raise SpecErrors(errors)
    used = engine.tensor_parallel_size * report.pipeline_parallel_size
    used *= report.data_parallel_size
    if spec.resources.gpus > used:
        warnings.append(
            f"spec.resources.gpus is {spec.resources.gpus} but vLLM uses {used} "
            "(tensorParallelSize x pipeline x data parallel size): the rest stay idle"
        )

    final = (*args, *engine.extra_args)
    nodes = spec.resources.nodes
    return LaunchPlan(
        image=engine.image,
        version=version,
        args=final,
        warnings=tuple(warnings),
        library_path_fix=fix,
        key_flags=_key_flags(report, final),
        compiled=mode.compiled and not report.runs_eager,
        performance_mode=engine.performance_mode,
        flags_checked_against=table.version,
        group=_group_launch(nodes, table),
    )
