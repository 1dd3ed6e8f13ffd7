"""One setting given twice (issue 43, class 3): the policy agrees with vLLM on every recorded form.

``hack/vllm-flags/pairs_stage.py`` recorded, per release and from vLLM's own code, the
pairs of a dedicated flag and a key of a JSON option that set one field (run through
vLLM's parser and ``create_engine_config`` on the stand-in model: refused together, or
which value ended in the config), and each option with two spellings given twice
(through vLLM's parser: the value it ended with). Here the policy's whole entry
(``extra_args.check``, what ``plan_launch`` and ``render`` use) must refuse exactly the
pairs vLLM refuses, naming both spellings, the release and the fix, and warn, naming the
winner, exactly where vLLM lets one of them win; and the operator's reading of an option
given twice must end with vLLM's value.
"""

from __future__ import annotations

import io
import json
from importlib import resources
from typing import Any

import pytest
import yaml

from builders import minimal_spec, resource
from vllm_operator.commands.render import run
from vllm_operator.engine import argv, extra_args, flagdata
from vllm_operator.engine.flagdata import FlagTable
from vllm_operator.engine.version import Version

RELEASES = [r for r in flagdata.releases() if flagdata.table(r).records_engine]
_TWICE = "set one setting twice"


def _raw(release: Version) -> dict[str, Any] | None:
    name = f"vllm-{release.major}.{release.minor}.{release.patch}.json"
    where = resources.files("vllm_operator.engine.flags.pairs").joinpath(name)
    return json.loads(where.read_text("utf-8")) if where.is_file() else None


RECORDED = [r for r in RELEASES if _raw(r) is not None]


def _check(table: FlagTable, extra: list[str]) -> extra_args.ExtraArgsReport:
    return extra_args.check(["m"], extra, table, "balanced")


def _pair_cases(doc: dict[str, Any]) -> list[tuple[list[str], str, dict[str, Any]]]:
    """(argv, vLLM's verdict, form) for each flag-and-key form, at the flag's own value and
    (where recorded) at its default."""
    out = []
    for form in doc["forms"]:
        if form["kind"] != "flag_and_key":
            continue
        out.append((form["argv"], form["verdict"], form))
        at = form.get("at_default") or {}
        if at.get("argv"):
            out.append((at["argv"], at["verdict"], form))
    return out


def _disagreement(table: FlagTable, extra: list[str], verdict: str, form: dict[str, Any]) -> str:
    """Why the policy's reading of ``extra`` differs from vLLM's ``verdict`` ("" if not)."""
    report = _check(table, extra)
    flag = table.by_dest[form["dest"]].long_name
    option = table.by_dest[form["option"]].long_name
    refused = [e for e in report.errors if _TWICE in e.message]
    warned = [w for w in report.warnings if _TWICE in w]
    if verdict == "refused":
        ok = len(refused) == 1 and not warned
        said = refused[0].message + refused[0].fix if refused else ""
        words = (form["both"]["message"].split(": ", 1)[-1], flag, option, str(table.version))
        if ok and not all(w in said for w in words):
            return f"refused without naming {words}: {said}"
        return "" if ok else f"vLLM refuses the pair; policy: {refused} {warned}"
    if verdict in ("flag", "key"):
        kept = flag if verdict == "flag" else f'"{form["key"]}" in {option}'
        ok = not refused and len(warned) == 1 and f"keeps {kept} and ignores" in warned[0]
        return "" if ok else f"vLLM keeps the {verdict}'s value; policy: {refused} {warned}"
    ok = not refused and not warned  # neither, other: no pair for vLLM
    return "" if ok else f"vLLM sees no pair ({verdict}); policy: {refused} {warned}"


# Releases whose pairs are not recorded (the policy makes no class-3 check there): record
# them with hack/vllm-flags/pairs_stage.py and drop them here. Session 4 recorded all 36.
NOT_RECORDED: frozenset[str] = frozenset()


def test_every_release_with_an_engine_record_has_its_pairs_recorded() -> None:
    missing = {str(r) for r in RELEASES if _raw(r) is None}
    news, lost = sorted(NOT_RECORDED - missing), sorted(missing - NOT_RECORDED)
    assert not news, f"now recorded, drop them from NOT_RECORDED: {news}"
    assert not lost, f"no pairs recorded for {lost}: hack/vllm-flags/pairs_stage.py"


@pytest.mark.parametrize("release", RECORDED, ids=str)
def test_flag_and_key_pairs_get_vllms_verdict(release: Version) -> None:
    table = flagdata.table(release)
    doc = _raw(release)
    assert doc is not None
    cases = _pair_cases(doc)
    wrong = [
        (extra, verdict, why)
        for extra, verdict, form in cases
        if (why := _disagreement(table, extra, verdict, form))
    ]
    assert not wrong, f"{len(wrong)} of {len(cases)} disagree: {wrong[:3]}"


def _kept(value: Any, given: list[dict[str, Any]]) -> str:
    """Which given JSON values the operator's final value keeps (as pairs_stage says it)."""
    has = [isinstance(value, dict) and all(value.get(k) == v for k, v in d.items()) for d in given]
    return {(True, True): "both", (True, False): "first", (False, True): "second"}.get(
        (has[0], has[1]), "neither"
    )


def _given(form_argv: list[str]) -> list[dict[str, Any]]:
    first = json.loads(form_argv[1])
    if "." in form_argv[2]:
        return [first, {form_argv[2].rsplit(".", 1)[1]: json.loads(form_argv[3])}]
    return [first, json.loads(form_argv[3])]


@pytest.mark.parametrize("release", RECORDED, ids=str)
def test_an_option_given_twice_ends_with_vllms_value_and_is_said(release: Version) -> None:
    table = flagdata.table(release)
    doc = _raw(release)
    assert doc is not None
    wrong = []
    forms = [f for f in doc["forms"] if f["kind"] == "spellings"]
    for form in forms:
        parsed = argv.parse(table, ["m", *form["argv"]])
        if parsed.accepted != (form["verdict"] == "accepted"):
            wrong.append((form["argv"], "verdict", form["verdict"]))
            continue
        if not parsed.accepted:
            continue
        value = parsed.value(form["dest"])
        if "kept" in form:
            # which JSON survived; a key vLLM's config class then overwrites itself (0.10.2's
            # bs_to_padded_graph_size: "neither") says nothing about the two spellings
            ours = _kept(value, _given(form["argv"]))
            first = (ours in ("first", "both"), form["kept"] in ("first", "both"))
            second = form["kept"] not in ("second", "both") or ours in ("second", "both")
            if first[0] != first[1] or not second:
                wrong.append((form["argv"], ours, form["kept"]))
        elif json.dumps(value) != json.dumps(form["value"]) and str(value) != str(form["value"]):
            wrong.append((form["argv"], value, form["value"]))
        warned = [w for w in _check(table, form["argv"]).warnings if "more than once" in w]
        if len(warned) != 1 or table.by_dest[form["dest"]].long_name not in warned[0]:
            wrong.append((form["argv"], "not warned", warned))
    assert forms
    assert not wrong, f"{len(wrong)} of {len(forms)} disagree: {wrong[:3]}"


def _version(text: str) -> Version:
    return Version.parse(text)


def _needs(version: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(
        _version(version) not in RECORDED, reason=f"vLLM {version} has no pairs record"
    )


@_needs("0.13.0")
def test_attention_backend_twice_is_refused_naming_both_and_the_fix() -> None:
    table = flagdata.table(_version("0.13.0"))
    extra = ["--attention-backend", "FLASH_ATTN", "-ac", '{"backend": "TRITON_ATTN"}']
    errors = [e for e in _check(table, extra).errors if _TWICE in e.message]
    assert len(errors) == 1, _check(table, extra).errors
    message, fix = errors[0].message, errors[0].fix
    assert "vLLM 0.13.0 would stop at start" in message
    assert "--attention-backend 'FLASH_ATTN'" in message
    assert '--attention-config {"backend": "TRITON_ATTN"}' in message
    assert "mutually exclusive" in message
    assert fix.startswith('give it once: keep --attention-backend and drop "backend"')
    # a null key is no second value: vLLM checks ``attention_config.backend is not None``
    alone = ["--attention-backend", "FLASH_ATTN", "-ac", '{"backend": null}']
    assert not [e for e in _check(table, alone).errors if _TWICE in e.message]


def _render(version: str, extra: list[str]) -> tuple[int, str]:
    raw = resource(minimal_spec(image=f"vllm/vllm-openai:v{version}", extraArgs=extra))
    out, err = io.StringIO(), io.StringIO()
    code = run(["-f", "-"], "render", io.StringIO(yaml.safe_dump(raw)), out, err)
    return code, out.getvalue() + err.getvalue()


@_needs("0.33.0")
def test_render_warns_which_spelling_wins() -> None:
    code, said = _render("0.33.0", ["--moe-backend", "triton", "--kernel-config",
                                    '{"moe_backend": "auto"}'])  # fmt: skip
    assert code == 0, said
    assert 'keeps --moe-backend and ignores "moe_backend" in --kernel-config' in said
    code, said = _render("0.33.0", ["-pp", "2", "--pipeline-parallel-size", "1"])
    assert code == 0, said
    assert "vLLM keeps only --pipeline-parallel-size 1" in said


@_needs("0.33.0")
def test_render_refuses_a_pair_vllm_refuses() -> None:
    code, said = _render("0.33.0", ["--max-cudagraph-capture-size", "16", "-cc",
                                    '{"max_cudagraph_capture_size": 32}'])  # fmt: skip
    assert code != 0
    assert "max_cudagraph_capture_size are mutually exclusive" in said


@_needs("0.13.0")
def test_a_hostile_value_in_a_pair_stays_short_in_the_message() -> None:
    table = flagdata.table(_version("0.13.0"))
    extra = ["--attention-backend", "FLASH_ATTN", "-ac", json.dumps({"backend": "X" * 50_000})]
    errors = [e for e in _check(table, extra).errors if _TWICE in e.message]
    assert len(errors) == 1
    assert len(errors[0].message) < 1_000
