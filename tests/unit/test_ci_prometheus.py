"""CI never skips the real-Prometheus tests: hack/ci-tools.sh installs Debian's
``prometheus``, .ci/run sets ``VLLMOP_REQUIRE_PROMETHEUS``, and with it set a missing binary
fails the tests instead of skipping them (tests/integration/prometheus_real)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _real_prometheus() -> object:
    path = ROOT / "tests" / "integration" / "prometheus_real" / "real_prometheus.py"
    spec = importlib.util.spec_from_file_location("real_prometheus_for_ci_check", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_ci_installs_prometheus_and_requires_it() -> None:
    tools = (ROOT / "hack" / "ci-tools.sh").read_text()
    loop = next(line for line in tools.splitlines() if line.startswith("for tool in "))
    assert "prometheus" in loop.removesuffix("; do").split()
    install = tools[tools.index("apt-get install") :]
    assert " prometheus" in install
    assert "export VLLMOP_REQUIRE_PROMETHEUS=1" in (ROOT / ".ci" / "run").read_text()


def test_a_missing_prometheus_fails_where_it_is_required(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = _real_prometheus()
    monkeypatch.setenv("PATH", str(tmp_path))  # no prometheus on it
    monkeypatch.setenv("VLLMOP_REQUIRE_PROMETHEUS", "1")
    required = pytest.raises(pytest.fail.Exception, match="VLLMOP_REQUIRE_PROMETHEUS is set")
    with required, module.start_prometheus(tmp_path):  # type: ignore[attr-defined]
        pass
    monkeypatch.delenv("VLLMOP_REQUIRE_PROMETHEUS")
    skipped = pytest.raises(pytest.skip.Exception, match=r"hack/ci-tools\.sh installs it")
    with skipped, module.start_prometheus(tmp_path):  # type: ignore[attr-defined]
        pass
