"""`vllm-operator demo` without the embedded-cluster distribution says what to install.

The operator's distribution does not carry the demo (it lives in ``embedded-cluster/``);
the CLI names it by string, so without it the command must fail with exit 2 and the
install line, not a traceback.
"""

from __future__ import annotations

import subprocess
import sys

# A fresh interpreter without the embedded-cluster distribution's import paths (its
# editable finder or path entry), as when only the operator is installed.
PROGRAM = """
import sys
sys.meta_path[:] = [f for f in sys.meta_path if "devcluster" not in repr(f)]
sys.path[:] = [p for p in sys.path if "embedded-cluster" not in p]
from vllm_operator.commands import main
sys.exit(main(["demo"]))
"""


def test_demo_without_its_distribution_names_the_install() -> None:
    result = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, check=False, timeout=60
    )
    assert result.returncode == 2, result.stderr
    assert "pip install -e ./embedded-cluster" in result.stderr
    assert "Traceback" not in result.stderr
