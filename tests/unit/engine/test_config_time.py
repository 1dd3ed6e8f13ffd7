"""vLLM's reading of values after argparse, held to what each release's own code did.

The oracle is recorded, per release, by ``hack/vllm-flags`` from vLLM itself: its
conversion of a corpus of optimization levels and compilation modes (``conversions``: the
integer ``VllmConfig``/``CompilationConfig`` end up with, or their error), its ``k``/``m``/
``g`` expansion inside JSON values, and, for every accepted conformance form, whether it
stops after argparse and whether it runs eager (``after``; test_flag_conformance). Here:
the converters value by value, and a property test that spells random recorded values in
every way the release accepts and asks the whole policy for its eager verdict.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vllm_operator.engine import argv, argv_values, config_time, extra_args, flagdata
from vllm_operator.engine.config_schema import lax_int
from vllm_operator.engine.flagdata import FlagTable

RECORDED = [r for r in flagdata.releases() if flagdata.table(r).records_after_parse]
WITH_LEVEL = [r for r in RECORDED if "optimization_level" in flagdata.table(r).conversions]
WITH_MODE_NAMES = [r for r in RECORDED if config_time._mode_names(flagdata.table(r))]
_NEGATIVE = argv._NEGATIVE_NUMBER


def test_the_issue_releases_are_recorded() -> None:
    assert {str(r) for r in RECORDED} >= {"0.11.0", "0.17.0", "0.22.0", "0.33.0"}
    assert {str(r) for r in WITH_LEVEL} >= {"0.17.0", "0.22.0", "0.33.0"}


@pytest.mark.parametrize("release", WITH_LEVEL, ids=str)
def test_optimization_level_converts_like_vllm(release: flagdata.Version) -> None:
    table = flagdata.table(release)
    for text, result in table.conversions["optimization_level"]:
        got = config_time.optimization_level(table, text)
        if isinstance(result, int):
            assert got == result, (text, got)
        else:
            assert isinstance(got, config_time.Refusal), (text, got)
            assert "Input should be 0, 1, 2 or 3" in got.reason
            assert "VllmConfig" in got.reason


@pytest.mark.parametrize("release", RECORDED, ids=str)
@pytest.mark.parametrize("key", ["mode", "level"])
def test_compilation_mode_converts_like_vllm(release: flagdata.Version, key: str) -> None:
    table = flagdata.table(release)
    for value, result in table.conversions[f"compilation_{key}"]:
        got = config_time.compilation_value(table, key, value)
        if isinstance(result, dict):
            assert isinstance(got, config_time.Refusal), (key, value, got, result)
        else:
            assert got == result, (key, value, got, result)


def test_mode_names_and_the_level_key_per_release() -> None:
    """0.17 maps ``level`` to ``mode``, 0.22 refuses it; mode names from 0.17 (recorded)."""
    t17 = flagdata.table(flagdata.Version.parse("0.17.0"))
    t22 = flagdata.table(flagdata.Version.parse("0.22.0"))
    assert config_time._mode_names(t17)["NONE"] == 0
    assert config_time.compilation_value(t17, "level", 0) == 0
    assert isinstance(config_time.compilation_value(t22, "level", 0), config_time.Refusal)
    assert config_time.compilation_value(t22, "mode", "none") == 0
    assert config_time.compilation_value(t22, "mode", False) == 0


@pytest.mark.parametrize("release", [r for r in RECORDED if flagdata.table(r).suffix_probes],
                         ids=str)  # fmt: skip
def test_json_number_suffixes_expand_like_vllm(release: flagdata.Version) -> None:
    table = flagdata.table(release)
    assert table.by_dest["compilation_config"].json_suffixes
    for text, expanded in table.suffix_probes:
        try:
            got = argv_values.expand_number_suffixes(text)
        except argv_values.TypeMessage:
            got = "error"
        if expanded.startswith(("ArgumentTypeError", "ValueError")):
            assert got == "error", text
        else:
            assert got == expanded, text


def test_suffix_expansion_is_read_from_the_recorded_probes() -> None:
    """A release expands ``1k`` inside JSON exactly when its recorded probes show vLLM's
    expansion (0.17.0 has none; the issue saw 0.20.0 expand); once it starts, it stays."""
    t17 = flagdata.table(flagdata.Version.parse("0.17.0"))
    assert not t17.suffix_probes
    assert not t17.by_dest["compilation_config"].json_suffixes
    expanding = [r for r in RECORDED if flagdata.table(r).suffix_probes]
    assert expanding
    assert all(r in expanding for r in RECORDED if r >= expanding[0])


# -- random text: the verdict never crashes and agrees with the converted value ------------

_TEXT = st.text(alphabet="0123456789+-._ \t\nexXbo٠Nn", max_size=8)


@pytest.mark.parametrize("release", WITH_LEVEL, ids=str)
def test_any_level_text_is_a_level_or_vllms_refusal(release: flagdata.Version) -> None:
    """Whatever the text, the policy either plans with the level pydantic reads (eager
    exactly at 0) or refuses with vLLM's reason; it never crashes."""
    table = flagdata.table(release)

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(_TEXT)
    def check(text: str) -> None:
        level = lax_int(text)
        want = "refused" if level not in (0, 1, 2, 3) else ("eager" if level == 0 else "compiled")
        assert _verdict(table, [f"--optimization-level={text}"]) == want, text

    check()


# -- the property: random values, every spelling, the policy's eager verdict ---------------


def _level_spellings(text: str) -> list[list[str]]:
    joined = [[f"--optimization-level={text}"], [f"--optimization_level={text}"]]
    # vLLM's rewrite reads an item that starts with "-" and holds a "." as a dotted key
    # (and fails without a value after it): such a level exists only after "="
    separate = not text.startswith("-") or (_NEGATIVE.match(text) and "." not in text)
    if separate and text:
        joined += [["-O", text]] if text in {"0", "1", "2", "3"} else []
        joined += [["--optimization-level", text]]
        if not text.startswith(("=", ".")):
            joined.append([f"-O{text}"])
    return joined


def _mode_spellings(table: FlagTable, value: Any) -> list[list[str]]:
    doc = json.dumps({"mode": value})
    forms = [["-cc", doc], [f"--compilation-config={doc}"], ["--compilation_config", doc]]
    text = value if isinstance(value, str) else json.dumps(value)
    dotted = argv.dotted_value(text, argv.dotted_suffixes(table))
    if dotted == value and type(dotted) is type(value):
        forms.append([f"-cc.mode={text}"])
    return forms


def _verdict(table: FlagTable, extra: list[str]) -> str:
    """refused | eager | compiled, through the policy's own entry."""
    report = extra_args.check(["m"], extra, table, "balanced")
    if any("would exit at start" in e.message or "would stop at start" in e.message
           for e in report.errors):  # fmt: skip
        return "refused"
    return "eager" if report.runs_eager else "compiled"


def _expected(level: Any, mode: Any) -> str:
    """vLLM's verdict from its recorded conversions: an explicit mode decides, else the
    optimization level (VllmConfig.__post_init__, 0.17-0.33); errors stop the server."""
    if isinstance(level, dict) or isinstance(mode, dict):
        return "refused"
    if mode is not None:
        return "eager" if mode == 0 else "compiled"
    return "eager" if level == 0 else "compiled"


@pytest.mark.parametrize("release", [r for r in WITH_LEVEL if r in WITH_MODE_NAMES], ids=str)
def test_eager_verdict_equals_vllms_conversion(release: flagdata.Version) -> None:
    table = flagdata.table(release)
    levels = [(t, r) for t, r in table.conversions["optimization_level"]]
    modes = [(v, r) for v, r in table.conversions["compilation_mode"]]

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(
        level=st.none() | st.sampled_from(levels),
        mode=st.none() | st.sampled_from(modes),
        data=st.data(),
    )
    def check(level: Any, mode: Any, data: st.DataObject) -> None:
        extra: list[str] = []
        if level is not None:
            spellings = _level_spellings(level[0])
            if not spellings:
                return
            extra += data.draw(st.sampled_from(spellings))
        if mode is not None:
            extra += data.draw(st.sampled_from(_mode_spellings(table, mode[0])))
        want = _expected(2 if level is None else level[1], None if mode is None else mode[1])
        assert _verdict(table, extra) == want, (extra, level, mode)

    check()


@pytest.mark.parametrize(
    "release", [r for r in RECORDED if "optimization_level" not in flagdata.table(r).by_dest],
    ids=str,
)  # fmt: skip
def test_eager_verdict_equals_vllms_conversion_where_o_is_the_compilation_level(
    release: flagdata.Version,
) -> None:
    """0.10/0.11: ``-O`` is ``--compilation-config``; ``-O3`` its level (0.10.2-0.11.0) or
    its mode (0.11.1, 0.11.2: recorded rewrite); unset, a model compiles."""
    table = flagdata.table(release)
    levels = list(table.conversions["compilation_level"])
    glued_is_level = '"level"' in str(table.rewrite_of(("-O3",)))

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(level=st.sampled_from(levels), data=st.data())
    def check(level: tuple[Any, Any], data: st.DataObject) -> None:
        value, result = level
        doc = json.dumps({"level": value})
        spellings = [["--compilation-config", doc], [f"--compilation-config={doc}"], ["-O", doc]]
        text = value if isinstance(value, str) else json.dumps(value)
        if argv.dotted_value(text) == value and type(argv.dotted_value(text)) is type(value):
            spellings.append([f"-O.level={text}"])
            if glued_is_level and text and not text.startswith(("-", "=", ".")):
                spellings.append([f"-O{text}"])
        extra = data.draw(st.sampled_from(spellings))
        want = _expected(2, None if result is None else result)
        assert _verdict(table, extra) == want, (extra, level)

    check()
