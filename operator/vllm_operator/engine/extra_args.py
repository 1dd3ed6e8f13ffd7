"""Checking ``spec.engine.extraArgs`` against the vLLM release before any GPU is spent.

vLLM's argparse exits 2 on anything it does not accept, and the pod crash-loops only after
minutes of image pull and scheduling. So the whole command line the operator would run
(its own arguments, then the extra args) is read here the way that release's parser reads
it (``argv.parse`` over the table recorded from vLLM), and:

- anything the parser refuses is refused, with argparse's reason, the release where a
  flag went or came, the hand-written replacement (``catalog.NOTES``) and the closest
  valid spellings;
- settings the spec owns are refused in every spelling vLLM accepts (``--tensor_parallel_size=2``
  is ``tensor_parallel_size`` like ``-tp 2``): one place per setting;
- what vLLM refuses after argparse (``config_time``: an optimization level its
  ``VllmConfig`` cannot convert, an option another one requires) is refused with vLLM's
  own reason;
- options that leave no HTTP server where the probes look, or read flags from a file
  (``catalog.NO_SERVER``: ``--uds``, ``--headless``, ``--grpc``, TLS, ``--config``) are
  refused; ``--data-parallel-size`` counts towards the GPUs;
- eager mode is derived the way vLLM derives it (``config_time``), from the values vLLM
  would end up with after its own conversions, not from spellings.
"""

from __future__ import annotations

from dataclasses import dataclass

from vllm_operator.engine import argv, catalog, config_time, flagdata, setting_pairs
from vllm_operator.engine.flagdata import FlagTable
from vllm_operator.engine.tables import EAGER_COST
from vllm_operator.engine.version import Version
from vllm_operator.errors import SpecError

FIELD = "spec.engine.extraArgs"


@dataclass(frozen=True)
class ExtraArgsReport:
    """What the extra args mean for the launch."""

    errors: tuple[SpecError, ...]
    warnings: tuple[str, ...]
    parsed: argv.Parsed
    runs_eager: bool
    pipeline_parallel_size: int
    table: FlagTable
    extra_start: int  # index of extraArgs[0] in the full argv
    data_parallel_size: int = 1

    def extra_taken(self) -> tuple[argv.Taken, ...]:
        """Options that came from the extra args (not from the operator's own)."""
        return tuple(
            t for t in self.parsed.taken if t.index is not None and t.index >= self.extra_start
        )


def _field(index: int | None, start: int) -> str:
    if index is None or index < start:
        return FIELD
    return f"{FIELD}[{index - start}]"


def suggestions(table: FlagTable, written: str) -> list[str]:
    """The closest valid spellings of ``written`` (``api.text``), best first."""
    # Imported on this error path only: ``vllm_operator.api`` builds every pydantic model
    # (about 0.25 CPU s), which the simulator's start (every simulated pod) never needs.
    from vllm_operator.api.text import close_to  # noqa: PLC0415

    name = argv.long_name(written)
    longs = [s for s in table.by_spelling if s.startswith("--")]
    return close_to(name, longs, n=3)


def _unknown_errors(
    table: FlagTable, failure: argv.ParseFailure, extra: list[str], start: int
) -> list[SpecError]:
    version = table.version
    errors: list[SpecError] = []
    prefix = f'vLLM {version} would exit at start ("{failure.prog}: error: {failure.message}")'
    for i, token in enumerate(extra):
        if not token.startswith("-") or token == "--":
            continue
        parsed_kind = _known(table, token)
        if parsed_kind:
            continue
        long = argv.long_name(token)
        why = catalog.why_missing(long, version) if long.startswith("--") else ""
        note = catalog.note_for(long)
        fixes = []
        if note is not None:
            fixes.append(note.replacement)
        close = suggestions(table, token)
        if close:
            fixes.append("did you mean " + " or ".join(close) + "?")
        if not fixes:
            fixes.append("drop it; `vllm serve --help` of this release lists its options")
        what = f"{long} is not an option of vLLM {version}" + (f" ({why})" if why else "")
        errors.append(
            SpecError(
                f"{FIELD}[{i}]", f"{what}: {prefix}; the pod would crash-loop", "; ".join(fixes)
            )
        )
    if not errors and "--" in extra:
        errors.append(
            SpecError(
                f"{FIELD}[{extra.index('--')}]",
                f"{prefix}; the pod would crash-loop",
                "remove the --: vLLM's argparse does not drop it here, and reads everything "
                "after it as stray values",
            )
        )
    if not errors:
        errors.append(
            SpecError(
                FIELD,
                f"{prefix}; the pod would crash-loop",
                "remove the stray value (every value belongs right after its flag)",
            )
        )
    return errors


def _known(table: FlagTable, token: str) -> bool:
    """Whether ``token`` alone is an option string vLLM's parser would match."""
    try:
        items, _ = argv.rewrite(table, [token])
    except (ValueError, IndexError):
        return False
    for item in items:
        if not item.startswith("-"):
            continue
        try:
            kind = argv._classify(table, item, None)
        except argv.ParseFailure:
            return True  # ambiguous: a known-prefix problem, reported by argparse's text
        if kind is not None and kind[0] is None:
            return False
    return True


def _failure_errors(
    table: FlagTable, failure: argv.ParseFailure, extra: list[str], start: int
) -> list[SpecError]:
    if failure.message.startswith("unrecognized arguments:"):
        return _unknown_errors(table, failure, extra, start)
    fix = "fix the value or drop the flag"
    if "ignored explicit argument" in failure.message:
        fix = "on/off flags take no value: write the flag alone (or its --no- form)"
    elif "ambiguous option" in failure.message:
        fix = "write the option's full name"
    elif "expected" in failure.message:
        fix = "give the flag its value as the next list item, or write --flag=VALUE"
    return [
        SpecError(
            _field(failure.index, start),
            f'vLLM {table.version} would exit at start ("{failure.prog}: error: '
            f'{failure.message}"); the pod would crash-loop',
            fix,
        )
    ]


def compile_mode(parsed: argv.Parsed, table: FlagTable) -> int | None:
    """The compilation mode the parsed compilation config sets explicitly, if any."""
    return config_time.compile_mode(table, parsed.value("compilation_config"))


def after_parse(parsed: argv.Parsed, table: FlagTable) -> config_time.AfterParse:
    """What vLLM does with an accepted command line before loading a model."""
    values = {t.option.dest: t.value for t in parsed.taken}
    return config_time.read(table, values, set(values))


def eager_reasons(parsed: argv.Parsed, table: FlagTable) -> list[str]:
    """Every setting in the parsed command line that makes vLLM run eager."""
    return list(after_parse(parsed, table).eager_reasons)


def _no_server_errors(
    taken: tuple[argv.Taken, ...], start: int, table: FlagTable
) -> list[SpecError]:
    errors = []
    for t in taken:
        row = catalog.NO_SERVER.get(t.option.dest)
        if row is None or t.value in (False, None, ""):
            continue
        if t.option.dest == "config" and "=" in t.written:
            # vLLM's rewrite reads the file only for "--config FILE" (two items); with "="
            # argparse takes the path and nothing reads it
            row = catalog.ignored_config(table.version)
        errors.append(SpecError(_field(t.index, start), f"{t.written} {row.why}", row.fix))
    return errors


def _owned_errors(
    report_taken: tuple[argv.Taken, ...],
    start: int,
    performance_mode: str,
    parsed: argv.Parsed,
    table: FlagTable,
) -> list[SpecError]:
    errors: list[SpecError] = []
    for t in report_taken:
        field = _field(t.index, start)
        dest = t.option.dest
        if dest == "enforce_eager" and performance_mode == "eager":
            errors.append(
                SpecError(
                    field,
                    f"{t.written} contradicts or repeats performanceMode eager, which already "
                    "adds --enforce-eager",
                    "remove it from extraArgs",
                )
            )
            continue
        owner = catalog.OWNED.get(dest)
        if dest == "model" and parsed.model is not None:
            errors.append(
                SpecError(
                    field,
                    f"{t.written}: vLLM {table.version} would ignore it and serve "
                    f"{parsed.model} (the positional model, spec.model.name, wins); "
                    "a second model name in extraArgs only misleads",
                    "remove it; the model is spec.model.name",
                )
            )
        elif owner == "(operator-managed)":
            errors.append(
                SpecError(
                    field,
                    f"{t.written} ({t.option.long_name}) is managed by the operator (probes and "
                    "Services need vLLM on all interfaces)",
                    "remove it",
                )
            )
        elif owner is not None:
            errors.append(
                SpecError(
                    field,
                    f"{t.written} sets {t.option.long_name}, which is controlled by {owner}; "
                    "setting it in extraArgs as well contradicts the spec",
                    f"set it only in {owner}",
                )
            )
    return errors


def _field_order(error: SpecError) -> int:
    """extraArgs errors in argument order (a bare ``extraArgs`` first)."""
    head, _, rest = error.field.partition("[")
    return int(rest.rstrip("]")) if head == FIELD and rest.rstrip("]").isdigit() else -1


def check(
    operator_args: list[str],
    extra: list[str],
    table: FlagTable,
    performance_mode: str,
    requested: Version | None = None,
) -> ExtraArgsReport:
    """Read ``operator_args + extra`` like vLLM ``table.version``; errors name extraArgs[i].

    ``requested``: the release the pods run, where ``table`` is the nearest older one: a
    name that release's registries lack is then a warning (it may have added the name)."""
    start = len(operator_args)
    parsed = argv.parse(table, [*operator_args, *extra])
    errors = _parse_errors(parsed, table, extra, start)
    taken = tuple(t for t in parsed.taken if t.index is not None and t.index >= start)
    errors += _owned_errors(taken, start, performance_mode, parsed, table)
    errors += _no_server_errors(taken, start, table)
    per_option = _per_option(taken, start, table)
    errors += per_option.errors
    warnings = list(per_option.warnings)
    reasons: list[str] = []
    if parsed.accepted:
        after = after_parse(parsed, table)
        reasons = list(after.eager_reasons)
        newer = requested is not None and requested != table.version
        errors += [_after_error(table, r) for r in after.refusals if not (newer and r.name)]
        warnings += [
            config_time.newer_name_note(requested, table.version, r.reason)
            for r in after.refusals
            if newer and r.name and requested is not None
        ]
        warnings += _deprecated_level(parsed, table)
    twice = setting_pairs.check(table, parsed, start, FIELD)  # one setting, two spellings
    errors, warnings = [*errors, *twice.errors], [*warnings, *twice.warnings]
    errors.sort(key=_field_order)
    runs_eager = bool(reasons)
    if runs_eager and performance_mode != "eager":
        warnings.append(
            f"extraArgs make the pods run eager ({', '.join(reasons)}), overriding "
            f"performanceMode {performance_mode}. {EAGER_COST}. Remove it unless you need eager "
            "(e.g. to debug a compile failure); performanceMode eager says so explicitly"
        )
    return ExtraArgsReport(
        tuple(errors),
        tuple(warnings),
        parsed,
        runs_eager,
        per_option.pipeline_parallel_size,
        table,
        start,
        data_parallel_size=per_option.data_parallel_size,
    )


def _parse_errors(
    parsed: argv.Parsed, table: FlagTable, extra: list[str], start: int
) -> list[SpecError]:
    """What vLLM's rewrite or argparse refuses (``--config FILE`` is the project's own)."""
    if parsed.exception is not None and parsed.exception.startswith("ConfigFile:"):
        row = catalog.NO_SERVER["config"]
        where = next((i for i, a in enumerate(extra) if a == "--config"), None)
        field = _field(None if where is None else start + where, start)
        return [SpecError(field, f"--config {row.why}", row.fix)]
    if parsed.exception is not None:
        fix = (
            "pass the model only as spec.model.name"
            if "--model" in parsed.exception
            else "flatten the value (write it as JSON)"
        )
        return [
            SpecError(FIELD, f"vLLM {table.version} would stop at start: {parsed.exception}", fix)
        ]
    if parsed.failure is not None:
        return _failure_errors(table, parsed.failure, extra, start)
    return []


@dataclass(frozen=True)
class _PerOption:
    errors: list[SpecError]
    warnings: list[str]
    pipeline_parallel_size: int
    data_parallel_size: int


def _at_least_one(t: argv.Taken, start: int) -> SpecError | None:
    if isinstance(t.value, int) and t.value < 1:
        return SpecError(_field(t.index, start), f"{t.written} must be at least 1", "")
    return None


def _per_option(taken: tuple[argv.Taken, ...], start: int, table: FlagTable) -> _PerOption:
    """Checks of single options: print-and-exit ones, deprecation, the parallel sizes that
    count towards the GPUs, a literal API key."""
    out = _PerOption([], [], 1, 1)
    sizes = {"pipeline_parallel_size": 1, "data_parallel_size": 1}
    for t in taken:
        if t.option.action in ("help", "version"):
            out.errors.append(
                SpecError(
                    _field(t.index, start),
                    f"{t.written} makes vLLM print and exit instead of serving; the pod would "
                    "restart forever",
                    "remove it",
                )
            )
        if t.option.deprecated:
            out.warnings.append(f"extraArgs {t.written}: vLLM {table.version} marks it deprecated")
        if t.option.dest in sizes and isinstance(t.value, int):
            error = _at_least_one(t, start)
            if error is not None:
                out.errors.append(error)
            else:
                sizes[t.option.dest] = t.value
        if t.option.dest == "api_key":
            out.warnings.append(
                "extraArgs --api-key puts the key into the pod spec, readable by anyone who "
                "can read Deployments in the namespace, and the benchmark Job does not get it "
                "(the gate cannot measure); use spec.engine.apiKeySecret"
            )
    return _PerOption(
        out.errors, out.warnings, sizes["pipeline_parallel_size"], sizes["data_parallel_size"]
    )


_WHERE = {
    "validate": "after parsing its arguments",
    "config": "after parsing its arguments",
    "api_server": "after parsing its arguments, in its API server's checks before binding the port",
    "engine": "after parsing its arguments, building its engine config (before loading the model)",
    "names": "after parsing its arguments, looking a name up in its registry (before serving)",
}


def _after_error(table: FlagTable, refusal: config_time.Refusal) -> SpecError:
    where = _WHERE.get(refusal.stage, "after parsing its arguments")
    return SpecError(
        FIELD,
        f'vLLM {table.version} would stop at start, {where} ("{refusal.reason}"); the pod '
        "would crash-loop",
        _AFTER_FIX.get(refusal.stage, "fix the value or drop the flag"),
    )


def _deprecated_level(parsed: argv.Parsed, table: FlagTable) -> list[str]:
    """``level`` inside ``-cc`` where the release's parser takes both keys and ``level``
    takes effect (recorded ``config_values``/``config_effective``): vLLM 0.17.0 logs
    "Level is deprecated" and reads it as ``mode`` (issue 32, checked against vLLM)."""
    config = parsed.value("compilation_config")
    option = table.by_dest.get("compilation_config")
    if not isinstance(config, dict) or "level" not in config or option is None:
        return []
    both = bool(option.config_values.get("mode")) and bool(option.config_values.get("level"))
    if not both or not {"level", "mode"} <= option.config_effective:
        return []
    return [
        f'extraArgs -cc {{"level": ...}}: vLLM {table.version} logs "Level is deprecated" '
        'and reads it as mode; write "mode" instead'
    ]


_AFTER_FIX = {
    "config": "give a value vLLM converts (the optimization level is 0, 1, 2 or 3)",
    "validate": "add the option it requires, or drop it",
    "api_server": "name a parser this vLLM release registers, or drop the flag",
    "engine": "give a value vLLM's engine config accepts, or drop the flag",
    "names": "use a name this vLLM release registers (listed above), or drop the flag",
}


def scan_without_version(extra: list[str]) -> argv.Parsed:
    """Best-effort reading when the release is unknown (for sizing and key checks only)."""
    return argv.parse(flagdata.table(flagdata.newest()), ["model", *extra])


def unknown_version_note(version: Version, checked_against: Version) -> str:
    """The warning for a release without its own table (newer than the data, or a patch
    release that was never on PyPI)."""
    return (
        f"vLLM {version} has no recorded flag table: its flags were checked against the "
        f"parser of vLLM {checked_against}, the nearest older recorded release; a flag "
        "removed or renamed since will only show when the pod starts"
    )
