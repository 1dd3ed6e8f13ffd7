"""The policy reads every recorded argv form exactly as vLLM's own parser did.

Each committed ``engine/flags/vllm-X.Y.Z.json`` holds the verdicts the real `vllm serve`
parser of that release gave on a table of forms (recorded by ``hack/vllm-flags``, no vLLM
needed here). For every release and every form, ``engine.argv`` and the policy must give
the same verdict, the same argparse message, the same options taken and the same settings
that decide eager mode; where the release was recorded with what vLLM does after argparse
(``after``: its serve ``validate`` and ``VllmConfig``), the same refusal there and the same
eager verdict.
"""

from __future__ import annotations

from typing import Any

import pytest

from vllm_operator.engine import argv, extra_args, flagdata, registry_names
from vllm_operator.engine.flagdata import FlagTable, Form

RELEASES = flagdata.releases()
# Releases recorded with the API-server and engine-config stages (hack/vllm-flags).
ENGINE = [r for r in RELEASES if flagdata.table(r).records_engine]


def _mismatch(table: FlagTable, form: Form) -> str | None:
    parsed = argv.parse(table, ["m", *form.argv])
    rec: dict[str, Any] = form.record
    if "--config" in form.argv and "config" in table.by_dest:
        # vLLM reads the file before argparse (the recorded path does not exist); the
        # project refuses --config whatever the file holds
        ok = parsed.exception is not None and parsed.exception.startswith("ConfigFile:")
        return None if ok else f"{form.argv}: --config not refused ({parsed})"
    if parsed.exception is not None:
        got = "exception"
    elif parsed.failure is not None:
        got = "error"
    else:
        got = "accepted"
    if got != form.verdict:
        detail = parsed.failure.message if parsed.failure else parsed.exception
        return f"{form.argv}: vLLM {form.verdict} ({form.message}), policy {got} ({detail})"
    if parsed.failure is not None:
        line = f"{parsed.failure.prog}: error: {parsed.failure.message}"
        if parsed.failure.exact:
            if line != form.message:
                return f"{form.argv}: vLLM said {form.message!r}, policy {line!r}"
        else:
            # vLLM's own converters word these (pydantic's reprs): the argument must match
            head = line.split(": ", 3)
            if not form.message.startswith(": ".join(head[:3]) + ":"):
                return f"{form.argv}: vLLM said {form.message!r}, policy {line!r}"
        if rec.get("exit") != 2:
            return f"{form.argv}: recorded exit {rec.get('exit')}"
        return None
    if got == "exception":
        return None if parsed.exception == form.message else f"{form.argv}: {parsed.exception}"
    taken = sorted({t.option.dest for t in parsed.taken})
    if taken != rec["set"]:
        return f"{form.argv}: vLLM set {rec['set']}, policy {taken}"
    if parsed.model != rec["model"]:
        return f"{form.argv}: model {rec['model']} vs {parsed.model}"
    # Only settings the form took are compared: the rest are vLLM's defaults.
    eager = parsed.value("enforce_eager")
    if parsed.last("enforce_eager") is not None and eager != rec["enforce_eager"]:
        return f"{form.argv}: enforce_eager {rec['enforce_eager']} vs {eager}"
    level = parsed.value("optimization_level")
    if parsed.last("optimization_level") is not None and str(level) != str(
        rec["optimization_level"]
    ):
        return f"{form.argv}: optimization level {rec['optimization_level']} vs {level}"
    after = rec.get("after")
    if after is not None and not _refused_by_the_project(table, form):
        got_after = extra_args.after_parse(parsed, table)
        if _names_refused(table, parsed) and after["verdict"] != "refused":
            after = {**after, "verdict": "refused", "stage": "names"}
        if (after["verdict"] == "refused") != bool(got_after.refusals):
            return f"{form.argv}: after argparse vLLM {after}, policy {got_after}"
        stages = {r.stage for r in got_after.refusals}
        if after["verdict"] == "refused" and after["stage"] not in stages:
            return f"{form.argv}: vLLM stops at {after['stage']}, the policy at {stages}"
        if after["verdict"] == "ok" and after["eager"] != got_after.eager:
            return f"{form.argv}: vLLM eager {after['eager']}, policy {got_after.eager_reasons}"
    if parsed.last("compilation_config") is None:
        return None
    mode = extra_args.compile_mode(parsed, table)
    recorded_mode = rec["compilation_level"]
    if isinstance(recorded_mode, str):  # a mode name, recorded as written
        recorded_mode = (after or {}).get("compilation_mode") if after else mode
    if recorded_mode is not None and not isinstance(recorded_mode, int):
        recorded_mode = None
    if mode != recorded_mode:
        return f"{form.argv}: compilation mode {rec['compilation_level']} vs {mode}"
    return None


def _names_refused(table: FlagTable, parsed: argv.Parsed) -> bool:
    """vLLM's registry lookup, recorded on its own (test_registry_names), refuses a name
    this form gives: the stand-in's engine stage could not see it (0.13-0.19 look a
    reasoning parser up only in the API server's chat handler, 0.20+ after loading the
    tokenizer the stand-in lacks), so that record decides."""
    values = {d: parsed.value(d) for d in registry_names.dests() if parsed.last(d) is not None}
    return registry_names.lookup_refused(table.version, values)


def _refused_by_the_project(table: FlagTable, form: Form) -> bool:
    """The project refuses the form for its own reasons (a spec-owned setting such as
    --tensor-parallel-size, a parallel size below 1, no server on the probe port): vLLM's
    own verdict after argparse on it cannot reach a pod (test below: either reason)."""
    report = extra_args.check(["m"], list(form.argv), table, "balanced")
    says = ("would exit at start", "would stop at start")
    return any(not any(s in e.message for s in says) for e in report.errors)


def test_every_release_from_0_10_2_to_the_newest_is_recorded() -> None:
    assert RELEASES[0] == flagdata.oldest()
    assert str(RELEASES[0]) == "0.10.2"
    names = {str(r) for r in RELEASES}
    for needed in ("0.11.0", "0.12.0", "0.13.0", "0.14.0", "0.15.0", "0.16.0", "0.17.0",
                   "0.18.0", "0.19.0", "0.22.0", "0.33.0"):  # fmt: skip
        assert needed in names


@pytest.mark.parametrize("release", RELEASES, ids=str)
def test_parser_verdicts_equal_vllms(release: flagdata.Version) -> None:
    table = flagdata.table(release)
    assert len(table.forms) >= 100
    assert len(table.wheel_sha256) == 64
    mismatches = [m for f in table.forms if (m := _mismatch(table, f)) is not None]
    assert mismatches == []


@pytest.mark.parametrize("release", RELEASES, ids=str)
def test_rewrites_equal_vllms(release: flagdata.Version) -> None:
    table = flagdata.table(release)
    for seen, to in table.rewrites:
        try:
            got: tuple[str, ...] | str = tuple(argv.rewrite(table, ["m", *seen])[0][1:])
        except (ValueError, IndexError) as e:
            got = f"{type(e).__name__}: {e}"
        if isinstance(to, str):
            assert isinstance(got, str), (seen, got)
            assert to.split(":")[0] == got.split(":")[0], (seen, to, got)
        else:
            assert got == to, seen


@pytest.mark.parametrize("release", RELEASES, ids=str)
def test_policy_refuses_exactly_what_vllm_refuses(release: flagdata.Version) -> None:
    """Through the policy's own entry (operator args first, then the form as extraArgs):
    a form vLLM refuses (argparse, serve's validate, the API server's checks, VllmConfig or
    create_engine_config) is refused; a form it accepts draws no error in vLLM's name.
    The project refuses some forms for its own reasons (spec-owned settings, no server on
    the probe port, --config): where vLLM refuses those too, either reason stops the pod."""
    table = flagdata.table(release)
    for form in table.forms:
        report = extra_args.check(["m"], list(form.argv), table, "balanced")
        says = ("would exit at start", "would stop at start")
        vllm_says = [e for e in report.errors if any(s in e.message for s in says)]
        own = [e for e in report.errors if e not in vllm_says]
        after = form.record.get("after") or {}
        refuses = form.verdict != "accepted" or after.get("verdict") == "refused"
        named = not refuses and _names_refused(table, argv.parse(table, ["m", *form.argv]))
        if named:
            refuses, after = True, {**after, "verdict": "refused", "stage": "names"}
        if not table.records_engine:
            # recorded before the engine stage: what vLLM does there is unknown, and the
            # checks of the stages after argparse are read leniently
            vllm_says = [e for e in vllm_says if "after parsing" not in e.message]
            if not table.records_after_parse or not refuses:
                own = [e for e in own if e.message.startswith("--config")]
        if refuses:
            assert vllm_says or own, (form.argv, form.message, after)
            if not own:
                stage = after.get("stage", "parser")
                assert any(_STAGE_WORDS[stage] in e.message for e in vllm_says), (form.argv, stage)
        else:
            assert not vllm_says, (form.argv, after, vllm_says)


_STAGE_WORDS = {
    "parser": "at start",
    "validate": "after parsing its arguments",
    "config": "after parsing its arguments",
    "api_server": "API server's checks",
    "engine": "building its engine config",
    "names": "looking a name up in its registry",
}


@pytest.mark.parametrize("release", ENGINE, ids=str)
def test_every_stage_is_recorded_for_every_release(release: flagdata.Version) -> None:
    """Every release carries vLLM's verdict after argparse for every accepted form: serve's
    ``validate``, the API server's checks, ``VllmConfig`` and ``create_engine_config``."""
    table = flagdata.table(release)
    assert table.records_after_parse
    assert table.records_engine
    assert table.registries.get("quantization")
    accepted = [f for f in table.forms if f.verdict == "accepted"]
    assert len(accepted) >= 150
    assert all("after" in f.record for f in accepted)
    stages = {f.record["after"].get("stage") for f in accepted}
    assert {"validate", "engine"} <= stages, stages


def test_model_dependent_refusals_are_left_to_vllm() -> None:
    """A --max-model-len beyond the stand-in's context is refused by vLLM on that model
    only: recorded as depending on the model, and the policy lets it through."""
    assert ENGINE
    for release in ENGINE:
        table = flagdata.table(release)
        form = table.form(("--max-model-len", "100000"))
        assert form is not None, release
        assert form.verdict == "accepted", release
        after = form.record["after"]
        assert after["verdict"] == "ok", release
        assert after["left_to_vllm"]["depends_on"] == "model", release
        assert "max_model_len" in after["left_to_vllm"]["message"], release
