"""``hack/chromium_page.py`` (the DevTools driver people run too) and the hand-made reports.

Chromium is a Debian package (``hack/ci-tools.sh`` installs it); where it is missing these
tests skip, saying so, unless ``VLLMOP_REQUIRE_CHROMIUM`` is set (CI), where they fail.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


chromium_page = _load("chromium_page", ROOT / "hack" / "chromium_page.py")
report_fixtures = _load("report_fixtures", ROOT / "tests" / "unit" / "bench" / "report_fixtures.py")


def require_chromium() -> None:
    if chromium_page.find_chromium() is None:
        if os.environ.get("VLLMOP_REQUIRE_CHROMIUM"):
            pytest.fail("chromium is required here (VLLMOP_REQUIRE_CHROMIUM is set)")
        pytest.skip("chromium not installed (hack/ci-tools.sh installs it)")
