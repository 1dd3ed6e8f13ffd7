"""Each hand-stated vLLM fact agrees with what vLLM's recorded parsers say.

``engine/tables.py`` states a fact once (the first release with ``--performance-mode``, the
releases hit by the CUDA library-path bug) and everything else reads it from there; where
the recorded flag tables can confirm a fact, this test holds the statement to them.
"""

from __future__ import annotations

from vllm_operator.engine import flagdata, tables
from vllm_operator.engine.version import v
from vllm_operator.sim import startup


def test_performance_mode_since_is_the_first_recorded_release_with_the_flag() -> None:
    having = [r for r in flagdata.releases() if "--performance-mode" in flagdata.spellings(r)]
    assert having, "no recorded release has --performance-mode"
    assert having[0] == tables.PERFORMANCE_MODE_SINCE
    # ...and every later release keeps it (the policy emits it on all of them).
    assert having == [r for r in flagdata.releases() if r >= tables.PERFORMANCE_MODE_SINCE]


def test_legacy_warnings_quote_the_stated_release() -> None:
    notes = [row.legacy_note for row in tables.MODES.values() if row.legacy_note]
    assert notes
    assert all(f"before vLLM {tables.PERFORMANCE_MODE_SINCE} " in note for note in notes)


def test_the_cuda_path_bug_range_has_one_statement() -> None:
    bug = tables.CUBLAS_PATH_BUG
    assert bug in tables.LIBRARY_PATH_FIX_BY_VERSION
    toolkit = "/usr/local/nvidia/lib64:/usr/local/cuda/lib64"
    cases = ((v("0.15.1"), False), (v("0.16.0"), True), (v("0.17.1"), True), (v("0.18.0"), False))
    for version, hit in cases:
        assert bug.covers(version) is hit
        # The simulator fails the start on exactly those releases (it reads the same row).
        try:
            startup.check_cublas(version, toolkit)
        except startup.StartupFailure:
            failed = True
        else:
            failed = False
        assert failed is hit, version
