"""Random combinations of recorded forms: the policy's verdict equals vLLM's, per release.

Each committed table holds vLLM's verdict on every conformance form alone (parser, serve's
``validate``, the API server's checks, ``VllmConfig`` and ``create_engine_config``; see
test_flag_conformance). Forms that touch different settings do not interact in vLLM, so a
command line made of several of them is refused when one of them is, and otherwise runs
eager exactly when its one compilation-deciding form does. The property draws such
combinations at random, together with up to two names recorded through vLLM's own
registry lookups (``engine/flags/names``: valid names and near misses of the reasoning
parsers, tool call parsers, quantization methods, attention backends, load formats and KV
connectors, given as a flag or as a key of a JSON-valued option), up to two forms of keys
inside JSON-valued flags recorded through each option's own converter
(``engine/flags/keys``: defaults, near-miss keys, wrong-typed values, unknown keys; the
compilation config's are left out, it decides eager mode) and up to one setting given twice
(``engine/flags/pairs``: a dedicated flag with the same key in a JSON option, refused
together by vLLM or one of them winning), and asks the whole policy (``extra_args.check``,
the entry ``plan_launch`` uses) for accept/refuse and eager/compiled.

Two forms that give one setting twice (``--max-cudagraph-capture-size`` and a ``-cc``
form with that key) are expected refused where the release refuses that pair, as
recorded. What is kept out of a combination, and why: forms whose settings interact in vLLM
(an option another one requires, ``--max-num-seqs`` against ``--max-num-batched-tokens``,
the model, ``--config``), more than one form that decides compilation (an explicit mode
wins over a level), and forms the project refuses for its own reasons only (spec-owned
settings, no server on the probe port: they say nothing about vLLM). A form refused by the
parser goes first: what follows it cannot repair it (a stray value stays stray, a ``--``
turns the rest into stray values), except a dotted key, which vLLM merges with later ones
of the same option (kept out).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vllm_operator.engine import (
    argv,
    catalog,
    extra_args,
    flagdata,
    json_keys,
    registry_names,
    setting_pairs,
)
from vllm_operator.engine.flagdata import FlagTable, Form

# Releases recorded with every stage: the others' tables miss what vLLM does after argparse.
RELEASES = [r for r in flagdata.releases() if flagdata.table(r).records_engine]
_INTERACTING = {
    "enable_log_outputs",
    "enable_log_requests",
    "enable_auto_tool_choice",
    "tool_call_parser",
    "max_num_seqs",
    "max_num_batched_tokens",
    "model",
    "model_tag",
    "config",
    "data_parallel_size",
    "headless",
    "api_server_count",
    # a parser plugin may register the name a drawn --reasoning-parser/--tool-call-parser
    # gives: the names check is left out with one (test_registry_names)
    "reasoning_parser_plugin",
    "tool_parser_plugin",
}
_COMPILATION = {"optimization_level", "compilation_config", "enforce_eager"}


def _vllm(form: Form, table: FlagTable | None = None) -> str:
    """refused | eager | compiled, as recorded from vLLM (a refusal that depends on the
    model is vLLM's to make: the policy lets it through). A name vLLM's registry lookup
    refused (recorded on its own: test_registry_names) is refused whatever the stand-in's
    engine stage saw."""
    after = form.record.get("after") or {}
    if form.verdict != "accepted" or after.get("verdict") == "refused":
        return "refused"
    if table is not None:
        parsed = argv.parse(table, ["m", *form.argv])
        values = {d: parsed.value(d) for d in registry_names.dests() if parsed.last(d)}
        if registry_names.lookup_refused(table.version, values):
            return "refused"
    return "eager" if after.get("eager") else "compiled"


def _name_forms(table: FlagTable) -> list[Form]:
    """Each name recorded through vLLM's registry lookup, as the form that carries it."""
    out = []
    for registry in (registry_names.recorded(table.version) or {}).values():
        # every option that can carry this registry's name: two of them interact in vLLM
        # (--reasoning-parser overrides the JSON key; --attention-backend and the JSON
        # "backend" exclude each other), so a combination holds one
        claimed = {p.partition(".")[0] for p in registry.places}
        for place in registry.places:
            for named in registry.forms:
                extra = registry_names.argv_of(place, named.name)
                after = {"verdict": "ok" if named.accepted else "refused", "eager": False}
                dests = {a[2:].replace("-", "_") for a in extra if a.startswith("--")}
                record = {"set": sorted(dests | claimed), "after": after}
                out.append(Form(tuple(extra), "accepted", "", record))
    return out


def _key_forms(table: FlagTable) -> list[Form]:
    """Each keys form recorded through the JSON option's own converter
    (``engine/flags/keys``) that the policy models (test_json_keys), as a form: one vLLM
    refused stops argparse wherever it stands; an accepted one is kept where it leaves the
    compilation alone and draws no refusal of the project's or of a later stage alone."""
    record = json_keys.recorded(table.version)
    out = []
    for keyed in record.forms if record else ():
        value = json.loads(keyed.value)[keyed.key] if keyed.kind == "wrong_type" else None
        option = table.by_dest[keyed.option]
        left = value is not None and json_keys.decided_by_vllm(
            option, keyed.key, value, table.version
        )
        if keyed.option == "compilation_config" or left:
            continue
        argv_ = (keyed.flag, keyed.value)
        if keyed.accepted and _policy(table, list(argv_)) != "compiled":
            continue
        after = {"verdict": "ok", "eager": False}
        verdict = "accepted" if keyed.accepted else "error"
        out.append(Form(argv_, verdict, keyed.message, {"set": [keyed.option], "after": after}))
    return out


def _unregistered(table: FlagTable, extra: tuple[str, ...]) -> bool:
    """The form names a reasoning parser (attention backend, ...) the release does not
    register: vLLM's lookup refuses it at start, where the pairs stage's engine config
    (0.13-0.19: before the chat handler looks the parser up) could not see it."""
    parsed = argv.parse(table, ["m", *extra])
    for registry in (registry_names.recorded(table.version) or {}).values():
        value = parsed.value(registry_names.OPTIONS[registry.key][0])
        if isinstance(value, str) and value and not registry.accepts(value):
            return True
    return False


def _pair_forms(table: FlagTable) -> list[Form]:
    """Each recorded pair vLLM refuses or lets one spelling win, as its recorded form."""
    out = []
    for pair in (setting_pairs.recorded(table.version) or setting_pairs.Record((), ())).pairs:
        if pair.verdict not in ("refused", *setting_pairs.WINNERS):
            continue
        refused = pair.verdict == "refused" or _unregistered(table, pair.argv)
        after = {"verdict": "refused" if refused else "ok", "eager": False}
        record = {"set": sorted({pair.dest, pair.option}), "after": after}
        out.append(Form(pair.argv, "accepted", "", record))
    return out


def _own_refusal(table: FlagTable, form: Form) -> bool:
    """The project refuses the form for a reason of its own (not vLLM's)."""
    dests = set(form.record.get("set", ()))
    if dests & (set(catalog.OWNED) | set(catalog.NO_SERVER)):
        return True
    report = extra_args.check(["m"], list(form.argv), table, "balanced")
    says = ("would exit at start", "would stop at start")
    return any(not any(s in e.message for s in says) for e in report.errors)


def _pools(table: FlagTable) -> tuple[list[Form], list[Form], list[Form]]:
    """(accepted forms of independent settings, compilation forms, parser refusals)."""
    plain: list[Form] = []
    compiling: list[Form] = []
    broken: list[Form] = []
    for form in table.forms:
        if not form.argv or any(a.startswith("--config") or "model" in a for a in form.argv):
            continue
        if form.verdict != "accepted":
            if not any(_dotted(a) or _compiling(a) for a in form.argv):
                broken.append(form)
            continue
        dests = set(form.record["set"])
        if not dests or dests & _INTERACTING or _own_refusal(table, form):
            continue
        (compiling if dests & _COMPILATION else plain).append(form)
    return plain, compiling, broken


def _dotted(token: str) -> bool:
    """``-cc.mode=bogus``: vLLM merges every dotted key of an option into one JSON value
    before argparse, so a later ``-cc.mode=0`` repairs it; such forms do not stay broken."""
    return token.startswith("-") and "." in token.split("=", 1)[0]


def _compiling(token: str) -> bool:
    """``-O$(LEVEL)`` before ``-O0``: vLLM rewrites ``-O`` forms before argparse, so a later
    compilation form may replace a broken one; what the pair does was never recorded."""
    name = token.split("=", 1)[0]
    return name.startswith("-O") or name in {"--optimization-level", "-cc", "--compilation-config"}


def _policy(table: FlagTable, extra: list[str]) -> str:
    report = extra_args.check(["m"], extra, table, "balanced")
    says = ("would exit at start", "would stop at start")
    if any(any(s in e.message for s in says) for e in report.errors):
        return "refused"
    return "eager" if report.runs_eager else "compiled"


def _pair_refused(chosen: list[Form], table: FlagTable) -> bool:
    """Two chosen forms give one setting twice, a pair the release refuses (as recorded
    through vLLM's create_engine_config: ``engine/flags/pairs``)."""
    record = setting_pairs.recorded(table.version)
    parsed = argv.parse(table, ["m", *(a for f in chosen for a in f.argv)])
    values = {t.option.dest: t.value for t in parsed.taken}
    for pair in record.pairs if record is not None else ():
        config = values.get(pair.option)
        if pair.dest not in values or not isinstance(config, dict):
            continue
        if config.get(pair.key) is not None and pair.verdict_for(values[pair.dest]) == "refused":
            return True
    return False


def _expected(chosen: list[Form], table: FlagTable) -> str:
    verdicts = [_vllm(f, table) for f in chosen]
    if "refused" in verdicts or _pair_refused(chosen, table):
        return "refused"
    return "eager" if "eager" in verdicts else "compiled"


@pytest.mark.parametrize("release", RELEASES, ids=str)
def test_random_combinations_get_vllms_verdict(release: flagdata.Version) -> None:
    table = flagdata.table(release)
    plain, compiling, broken = _pools(table)
    named = _name_forms(table)
    keyed = _key_forms(table)
    paired = [f for f in _pair_forms(table) if not _own_refusal(table, f)]
    assert len(plain) >= 40
    assert compiling
    assert broken
    assert len(named) >= 20 or registry_names.recorded(release) is None
    assert len(keyed) >= 50 or json_keys.recorded(release) is None

    @settings(
        max_examples=40,
        deadline=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(
        others=st.lists(st.sampled_from(plain), min_size=1, max_size=4),
        drawn=st.tuples(  # up to one pair, two names and two keys forms (issue 43)
            st.tuples(
                st.lists(st.sampled_from(paired), max_size=1) if paired else st.just([]),
                st.lists(st.sampled_from(named), max_size=2) if named else st.just([]),
            ).map(lambda both: [*both[0], *both[1]]),
            st.lists(st.sampled_from(keyed), max_size=2) if keyed else st.just([]),
        ),
        compile_form=st.none() | st.sampled_from(compiling),
        first=st.none() | st.sampled_from(broken),
        data=st.data(),
    )
    def check(
        others: list[Form],
        drawn: tuple[list[Form], list[Form]],
        compile_form: Any,
        first: Any,
        data: st.DataObject,
    ) -> None:
        chosen: list[Form] = []
        seen: set[str] = set()
        names, keys = drawn
        for form in [*keys, *names, *others, *([compile_form] if compile_form else [])]:
            dests = set(form.record["set"])
            if dests & seen:
                continue
            seen |= dests
            chosen.append(form)
        chosen = data.draw(st.permutations(chosen))
        if first is not None:
            chosen = [first, *chosen]
        extra = [a for form in chosen for a in form.argv]
        got = _policy(table, extra)
        assert got == _expected(chosen, table), (extra, [_vllm(f, table) for f in chosen])

    check()
