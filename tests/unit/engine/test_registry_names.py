"""Names vLLM looks up in a registry at start: the policy's verdict equals vLLM's lookup's.

``engine/flags/names/vllm-X.Y.Z.json`` holds, per release, each registry's names and the
verdict of vLLM's own lookup function (``hack/vllm-flags/classes_stage.py``) on valid
names and near misses (another case, ``-`` for ``_``, one character less or more, ``auto``,
``bogus``) and the places where a command line gives each registry a name (a flag, or a
key of a JSON-valued option such as ``--kv-transfer-config``'s ``kv_connector``). Each
recorded name goes through the policy's whole entry (``extra_args.check``) at each place of
its registry; a name the lookup refused must be refused with vLLM's stage, the flag, the
release and "did you mean"; a name it accepted must draw no refusal in vLLM's name.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from vllm_operator.api import VLLMDeploymentSpec
from vllm_operator.engine import extra_args, flagdata, registry_names
from vllm_operator.engine.flagdata import Version
from vllm_operator.engine.policy import plan_launch
from vllm_operator.errors import SpecErrors

RECORDED = [r for r in flagdata.releases() if registry_names.recorded(r) is not None]
_SAYS = ("would exit at start", "would stop at start")


def test_every_release_with_an_engine_record_has_its_names_recorded() -> None:
    engine = [r for r in flagdata.releases() if flagdata.table(r).records_engine]
    assert engine == RECORDED
    assert len(RECORDED) == 36


def _disagreements(release: Version) -> tuple[list[str], int]:
    table = flagdata.table(release)
    registries = registry_names.recorded(release) or {}
    wrong: list[str] = []
    count = 0
    for registry in registries.values():
        for place in registry.places:
            for form in registry.forms:
                count += 1
                extra = registry_names.argv_of(place, form.name)
                report = extra_args.check(["m"], extra, table, "balanced")
                vllm_says = [e.message for e in report.errors if any(s in e.message for s in _SAYS)]
                if form.accepted and vllm_says:
                    wrong.append(f"{extra}: vLLM's lookup accepts it, the policy says {vllm_says}")
                if not form.accepted and not vllm_says:
                    wrong.append(f"{extra}: vLLM refuses it ({form.message}), the policy accepts")
    return wrong, count


@pytest.mark.parametrize("release", RECORDED, ids=str)
def test_policy_refuses_exactly_the_names_vllm_refuses(release: Version) -> None:
    wrong, count = _disagreements(release)
    assert count >= 20
    assert wrong == []


@pytest.mark.parametrize("release", RECORDED, ids=str)
def test_a_refused_name_says_flag_release_and_did_you_mean(release: Version) -> None:
    table = flagdata.table(release)
    for registry in (registry_names.recorded(release) or {}).values():
        near = [
            f
            for f in registry.forms
            if not f.accepted and f.name != "bogus" and f.name[:-1] in registry.names
        ]
        for form, place in ((f, p) for f in near for p in registry.places):
            # one character more: the valid name is the closest
            extra = registry_names.argv_of(place, form.name)
            report = extra_args.check(["m"], extra, table, "balanced")
            text = " ".join(e.message for e in report.errors)
            assert f"vLLM {release}" in text, (extra, text)
            if "error: argument" in text:
                continue  # argparse's own choices refused it first (0.10.2, 0.11.0)
            assert registry_names.flag_of(place) in text, (extra, text)
            assert f"did you mean {form.name[:-1]!r}" in text, (extra, text)
            assert "valid names in this release:" in text, (extra, text)


def test_case_folding_and_extra_names_come_from_the_recorded_verdicts() -> None:
    """A registry whose lookup accepted the other case of a valid name folds case; one
    that refused it does not; an accepted name that is not registered is an extra."""
    doc = {
        "registries": {
            "attention_backend": {"names": ["FLASH_ATTN"], "check": "x"},
            "reasoning_parser": {"names": ["qwen3"], "check": "y"},
        },
        "forms": [
            {"registry": "attention_backend", "name": "flash_attn", "verdict": "accepted"},
            {"registry": "attention_backend", "name": "auto", "verdict": "accepted"},
            {"registry": "reasoning_parser", "name": "QWEN3", "verdict": "refused"},
            {"registry": "reasoning_parser", "name": "auto", "verdict": "refused"},
        ],
    }
    found = registry_names.parse(doc)
    backend, parser = found["attention_backend"], found["reasoning_parser"]
    assert backend.fold_case
    assert backend.accepts("Flash_Attn")
    assert backend.accepts("auto")
    assert not backend.accepts("FLASH_ATT")
    assert not parser.fold_case
    assert not parser.accepts("Qwen3")
    assert not parser.accepts("auto")
    assert parser.accepts("qwen3")


def test_a_parser_plugin_may_register_the_name() -> None:
    """With ``--reasoning-parser-plugin`` vLLM imports the file at start, and the file may
    register the name: only the names check is left out (the file's presence is vLLM's)."""
    release = Version.parse("0.13.0")
    table = flagdata.table(release)
    alone = extra_args.check(["m"], ["--reasoning-parser", "mine"], table, "balanced")
    assert any("registers no reasoning parser of that name" in e.message for e in alone.errors)
    with_plugin = ["--reasoning-parser", "mine", "--reasoning-parser-plugin", "/p/mine.py"]
    report = extra_args.check(["m"], with_plugin, table, "balanced")
    assert not any("'mine'" in e.message for e in report.errors), report.errors


def _refusals(release: str, extra: list[str]) -> list[str]:
    table = flagdata.table(Version.parse(release))
    report = extra_args.check(["m"], extra, table, "balanced")
    return [e.message for e in report.errors if any(s in e.message for s in _SAYS)]


def test_names_the_stand_in_missed_are_refused_with_did_you_mean() -> None:
    """0.13.0's engine stage let these through (a worker looks the load format up when it
    loads the weights, the scheduler the KV connector when the engine core starts); vLLM
    stops the pod there. The old policy accepted all three."""
    (load,) = _refusals("0.13.0", ["--load-format", "safetensorsx"])
    assert "--load-format 'safetensorsx': vLLM 0.13.0 registers no load format" in load
    assert "did you mean 'safetensors'" in load
    (load,) = _refusals("0.13.0", ["--load-format", "SafeTensorsX"])
    assert "Load format `safetensorsx` is not supported" in load  # LoadConfig lower-cased it
    assert _refusals("0.13.0", ["--load-format", "SafeTensors"]) == []
    kv = json.dumps({"kv_connector": "NixlConnectorx", "kv_role": "kv_both"})
    (connector,) = _refusals("0.13.0", ["--kv-transfer-config", kv])
    assert "--kv-transfer-config's \"kv_connector\" 'NixlConnectorx'" in connector
    assert "did you mean 'NixlConnector'" in connector
    assert "Unsupported connector type: NixlConnectorx" in connector  # vLLM's own words
    # a module path: vLLM imports the class from there, nothing to check
    external = json.dumps({"kv_connector": "Mine", "kv_role": "kv_both",
                           "kv_connector_module_path": "my.mod"})  # fmt: skip
    assert _refusals("0.13.0", ["--kv-transfer-config", external]) == []


def test_a_name_inside_a_json_option_is_looked_up_like_the_flag() -> None:
    parser = json.dumps({"reasoning_parser": "deepseek-r1"})
    (refusal,) = _refusals("0.13.0", ["--structured-outputs-config", parser])
    assert "--structured-outputs-config's \"reasoning_parser\" 'deepseek-r1'" in refusal
    assert "did you mean 'deepseek_r1'" in refusal
    # create_engine_config copies --reasoning-parser over the key: the key is not looked up
    assert _refusals("0.13.0", ["--structured-outputs-config", parser,
                                "--reasoning-parser", "deepseek_r1"]) == []  # fmt: skip
    backend = json.dumps({"backend": "FLASH_ATTNX"})
    (refusal,) = _refusals("0.13.0", ["--attention-config", backend])
    assert "did you mean 'FLASH_ATTN'" in refusal
    assert _refusals("0.13.0", ["--attention-config", json.dumps({"backend": "flash_attn"})]) == []


def test_places_come_from_the_release() -> None:
    """``--attention-config`` exists from 0.13.0, ``--structured-outputs-config``'s
    ``reasoning_parser`` from 0.11.1 (recorded from each release's code)."""
    old = registry_names.recorded(Version.parse("0.11.0")) or {}
    new = registry_names.recorded(Version.parse("0.13.0")) or {}
    assert "attention_backend" not in old
    assert old["reasoning_parser"].places == ("reasoning_parser",)
    assert new["attention_backend"].places == ("attention_backend", "attention_config.backend")
    assert "structured_outputs_config.reasoning_parser" in new["reasoning_parser"].places
    assert new["kv_connector"].places == ("kv_transfer_config.kv_connector",)


def test_a_release_newer_than_the_data_gets_a_warning_for_a_missing_name(
    make_spec: Callable[..., VLLMDeploymentSpec],
) -> None:
    """The nearest older table lacks names a newer release may have added: a warning that
    says so, not a refusal; the exact release still refuses."""
    newest = flagdata.newest()
    newer = f"{newest.major}.{newest.minor + 7}.0"
    extra = ["--reasoning-parser", "added_later", "--load-format", "added_later_too"]
    extra += ["--quantization", "added_q"]  # refused by an engine check: the same
    plan = plan_launch(make_spec(f"vllm/vllm-openai:v{newer}", extraArgs=extra))
    notes = [w for w in plan.warnings if "may have added it" in w]
    assert len(notes) == 3, plan.warnings
    assert all(f"vLLM {newest}, the nearest older recorded release" in w for w in notes)
    assert any("'added_later'" in w and f"vLLM {newer} may have added it" in w for w in notes)
    with pytest.raises(SpecErrors) as info:
        plan_launch(make_spec(f"vllm/vllm-openai:v{newest}", extraArgs=extra))
    named = [e for e in info.value.errors if "valid names in this release" in e.message]
    assert len(named) == 3, info.value.errors
