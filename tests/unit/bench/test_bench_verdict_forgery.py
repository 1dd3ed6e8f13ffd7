"""Issue 38: a wrong answer cannot make its own python-tests check pass, whatever it reads.

On 953c1d3 the child that ran the answer also ran the tests and printed a per-run marker
when they passed; the forgeries in ``forgeries`` (pure Python through ``_ctypes`` reached
with a ``str`` subclass, and a native extension) read the marker out of the runner's frame,
printed it, exited 0, and their checks passed. Now the process that runs the answer gets
only the function's name and arguments; bench compares what came back. Each forgery is run
against the built-in suite's code-1 and a custom suite, through the laptop executor
(``LocalSandbox``) and the Job's (``ExchangeSandbox`` and ``sandbox serve``), and started
by root and by an unprivileged user, with every wall and with the kernel's alone (the audit
hook off): the check fails every time, and it is a failure, not "not run".
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError
from sandbox_identities import CallRunner, as_nobody, in_process, new_base

from forgeries import PYTHON_FORGERY, WRONG, build_native, native_forgery
from vllm_operator.bench.quality import cases
from vllm_operator.bench.quality.assertions import check
from vllm_operator.bench.quality.suite import Assertion, PythonTests, load_suite, parse_suite
from vllm_operator.bench.sandbox import kernel as sandbox_kernel
from vllm_operator.bench.sandbox.executors import ExchangeSandbox, Executor, LocalSandbox
from vllm_operator.bench.sandbox.run import OUTCOMES_BYTES, Outcome, parse_outcomes
from vllm_operator.errors import SpecError

pytestmark = [
    pytest.mark.skipif(
        sandbox_kernel.landlock_abi() < 1, reason="the kernel has no Landlock: nothing runs"
    ),
    # code run as nobody, forking and counted against its uid: with the other sandbox modules,
    # one at a time (conftest.py)
    pytest.mark.xdist_group("sandbox"),
]
CUSTOM = """
name: custom
tests:
  - id: pal
    category: code
    prompt: Write is_palindrome(text).
    assert:
      - type: python-tests
        function: is_palindrome
        cases:
          - {args: ["Step on no pets"], expect: true}
          - {args: ["xy"], expect: false}
          - {args: [], kwargs: {text: "abca"}, expect: false}
"""
GOOD = (
    "def is_palindrome(text):\n"
    "    kept = [c.lower() for c in text if c.isalnum()]\n"
    "    return kept == kept[::-1]\n"
)


def _unavailable(reason: str) -> None:
    if os.environ.get("VLLMOP_REQUIRE_SANDBOX_TOOLS"):
        pytest.fail(f"{reason} (VLLMOP_REQUIRE_SANDBOX_TOOLS is set)")
    pytest.skip(reason)


def _check_of(suite: str) -> PythonTests:
    loaded = load_suite("builtin:default") if suite == "builtin" else parse_suite(CUSTOM, "x")
    (test,) = [t for t in loaded.tests if t.id in ("code-1", "pal")]
    (assertion,) = test.assert_
    assert isinstance(assertion, PythonTests)
    return assertion


@pytest.fixture(scope="module")
def native_so(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    built = build_native(tmp_path_factory.mktemp("forge") / "forge.so")
    if isinstance(built, str):
        _unavailable(built)
    assert isinstance(built, bytes)
    return built


@pytest.fixture(params=["python", "native"])
def forgery(request: pytest.FixtureRequest) -> str:
    if request.param == "python":
        return PYTHON_FORGERY
    return native_forgery(request.getfixturevalue("native_so"))


@pytest.fixture
def sidecar(tmp_path: Path) -> Iterator[Path]:
    """``vllm-operator sandbox serve`` as the Job's sandbox container runs it (one per
    test: ``run_one`` in this process kills every process this process started)."""
    base = tmp_path
    base.chmod(0o711)
    exchange = base / "exchange"
    proc = subprocess.Popen(
        [
            *(sys.executable, "-I", "-m", "vllm_operator.commands", "sandbox", "serve"),
            *("--exchange", str(exchange), "--scratch", str(base / "scratch")),
        ],
        env={"PATH": os.defpath},
    )
    yield exchange
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0


@pytest.fixture(params=["laptop", "job"])
def executor(request: pytest.FixtureRequest) -> Executor:
    if request.param == "laptop":
        return LocalSandbox()
    return ExchangeSandbox(request.getfixturevalue("sidecar"), ready_wait=30)


@pytest.mark.parametrize("suite", ["builtin", "custom"])
async def test_a_forged_pass_is_a_failed_check(
    suite: str, forgery: str, executor: Executor
) -> None:
    assertion = _check_of(suite)
    honest = await check(assertion, f"```python\n{GOOD}```", executor)
    assert honest.passed, honest.detail  # the control: this check can pass
    result = await check(assertion, f"```python\n{forgery}```", executor)
    assert not result.passed, result.detail
    assert not result.refused, result.detail
    assert "cases failed" in result.detail


@pytest.fixture(scope="module", params=["root", "user"])
def started_by(request: pytest.FixtureRequest) -> Iterator[CallRunner]:
    """``run_one`` started by root (the child drops to nobody) and by an unprivileged
    user (``nobody`` itself, through ``setpriv``, when the tests run as root)."""
    base = new_base()
    base.chmod(0o711)
    try:
        if request.param == "root":
            if os.geteuid() != 0:
                pytest.skip("started as an unprivileged user: there is no root to drop")
            yield in_process(base)
        elif os.geteuid() != 0:
            yield in_process(base)
        else:
            runner = as_nobody(base)
            if isinstance(runner, str):
                _unavailable(runner)
            assert not isinstance(runner, str)
            yield runner
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize(
    "walls", [pytest.param({}, id="all-walls"), pytest.param({"guard": False}, id="kernel-alone")]
)
def test_forgeries_fail_whoever_starts_the_sandbox(
    started_by: CallRunner, forgery: str, walls: dict[str, Any]
) -> None:
    """The forgery finds no marker and no expected value (the hook off: it reads every
    frame), forges "returned true" for every call, and still fails: bench compares."""
    for suite in ("builtin", "custom"):
        assertion = _check_of(suite)
        run = started_by(forgery, cases.calls(assertion), walls)
        assert run.ran, run.detail
        passed, detail = cases.judge(assertion, run)
        assert not passed, detail
        honest = started_by(GOOD, cases.calls(assertion), walls)
        assert cases.judge(assertion, honest) == (True, f"all {len(assertion.cases)} cases passed")


ADAPTER: TypeAdapter[Any] = TypeAdapter(Assertion)
REFUSAL = (
    "print('sandbox: not run: kernel limits unavailable: Landlock ABI is 0', flush=True)\n"
    "import os, sys\n"
    "sys.stderr.write('sandbox: not run: kernel limits unavailable\\n')\n"
    "os._exit(4)\n"
)


@pytest.mark.parametrize("where", ["module", "call"])
async def test_answer_claiming_the_kernel_refused_is_failed_not_not_run(
    where: str, executor: Executor
) -> None:
    """Hole 5: the refusal line and exit 4, printed by the answer itself (at load or from
    the function), was "not run" on 953c1d3 (a gate Error instead of Failed)."""
    body = REFUSAL if where == "module" else f"def is_palindrome(text):\n    exec({REFUSAL!r})\n"
    result = await check(_check_of("builtin"), body, executor)
    assert (result.passed, result.refused) == (False, False), result.detail
    assert "cases failed" in result.detail


def test_a_str_subclass_cannot_disguise_ctypes_from_the_hook(tmp_path: Path) -> None:
    """The audit hook alone (kernel limits off): on 953c1d3 ``_ctypes`` loaded."""
    from vllm_operator.bench.sandbox.run import Call, run_one

    code = (
        "class Name(str):\n"
        "    def __str__(self):\n        return 'json'\n"
        "    def split(self, *a, **k):\n        return ['json']\n"
        "def probe():\n"
        "    try:\n        __import__(Name('_ctypes'))\n    except ImportError as exc:\n"
        "        return str(exc)\n"
        "    return 'loaded'\n"
    )
    result = run_one(code, [Call("probe")], limit_seconds=10, scratch_root=tmp_path, kernel=False)
    assert result.ran, result.detail
    (outcome,) = result.outcomes
    assert outcome.value == "sandbox: module '_ctypes' is not allowed", outcome


def test_wrong_answer_alone_fails_with_the_case_named() -> None:
    """The control of the forgeries: the same wrong function, no forgery."""
    import asyncio

    result = asyncio.run(check(_check_of("builtin"), WRONG, LocalSandbox()))
    assert not result.passed
    assert 'case 1 is_palindrome("racecar"): returned false, expected true' in result.detail


def test_a_suite_in_the_old_form_is_refused_with_how_to_rewrite_it() -> None:
    old = CUSTOM.replace(
        "        function: is_palindrome\n        cases:\n"
        '          - {args: ["Step on no pets"], expect: true}\n'
        '          - {args: ["xy"], expect: false}\n'
        '          - {args: [], kwargs: {text: "abca"}, expect: false}\n',
        "        tests: assert is_palindrome('xy') is False\n",
    )
    assert "tests: assert" in old
    with pytest.raises(SpecError) as caught:
        parse_suite(old, "mine.yaml")
    text = str(caught.value)
    assert "mine.yaml: tests.0.assert.0" in text
    assert "the field 'tests'" in text
    assert "'function'" in text
    assert "'cases'" in text
    assert "{args: [2], expect: 4}" in text


@pytest.mark.parametrize(
    ("case", "error"),
    [
        ({"args": [1]}, "exactly one of 'expect'"),
        ({"args": [1], "expect": 1, "raises": "ValueError"}, "exactly one of 'expect'"),
        ({"args": ["2026-03-14"], "expect": {"a": {1, 2}}}, "expect"),
        ({"args": [1], "raises": "not a name"}, "raises"),
    ],
)
def test_a_case_says_what_is_wrong(case: dict[str, Any], error: str) -> None:
    spec = {"type": "python-tests", "function": "f", "cases": [case]}
    with pytest.raises(ValidationError, match=error):
        ADAPTER.validate_python(spec)


def test_outputs_compare_as_json_and_bool_is_not_a_number() -> None:
    assert cases.same_json([1, {"a": None}], [1.0, {"a": None}])
    assert not cases.same_json(True, 1)
    assert not cases.same_json(0, False)
    assert not cases.same_json([1, 2], [1, 2, 3])
    assert not cases.same_json({"a": 1}, {"a": 1, "b": 2})
    assert not cases.same_json("1", 1)
    assert not cases.same_json(None, False)


def test_the_result_file_is_read_strictly() -> None:
    line = b'{"i": 0, "returned": [1]}\n'
    assert parse_outcomes(line, 1) == (Outcome([1]),)
    assert parse_outcomes(line + b'{"i": 1, "ret', 2) == (Outcome([1]),)  # cut by the kill
    assert parse_outcomes(line + line, 2) == "an output that is not the next call's outcome"
    assert parse_outcomes(line + line, 1) == "more outputs than calls"
    assert parse_outcomes(b'{"i": true, "returned": 1}\n', 1) != (Outcome(1),)
    assert parse_outcomes(b"ALL TESTS PASSED\n", 1) == "an output that is not JSON"
    deep = b'{"i": 0, "returned": ' + b"[" * 100 + b"]" * 100 + b"}\n"
    assert isinstance(parse_outcomes(deep, 1), str)
    assert isinstance(parse_outcomes(b"x" * (OUTCOMES_BYTES + 1), 1), str)


def test_a_huge_or_foreign_return_value_is_an_error_of_that_call(tmp_path: Path) -> None:
    from vllm_operator.bench.sandbox.run import Call, run_one

    code = "def big():\n    return 'x' * 100000\ndef odd():\n    return {1, 2}\n"
    result = run_one(code, [Call("big"), Call("odd")], limit_seconds=10, scratch_root=tmp_path)
    assert result.ran, result.detail
    big, odd = result.outcomes
    assert big.raised == "ValueError: over 16384 bytes as JSON"
    assert str(odd.raised).startswith("TypeError: Object of type set")
