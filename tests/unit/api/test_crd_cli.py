"""`vllm-operator crds`: writes both copies, and --check fails exactly when one is stale."""

from __future__ import annotations

from pathlib import Path

import pytest

from vllm_operator.api.crd import CRD_FILENAME, render_crd_yaml
from vllm_operator.commands import main as top_main
from vllm_operator.commands.crds import main


def _args(tmp_path: Path, *extra: str) -> list[str]:
    return ["--out-dir", str(tmp_path / "crds"), "--chart-dir", str(tmp_path / "chart"), *extra]


def test_writes_byte_identical_copies_then_check_passes(tmp_path: Path) -> None:
    assert main(_args(tmp_path), "crds") == 0
    top = (tmp_path / "crds" / CRD_FILENAME).read_bytes()
    assert top == (tmp_path / "chart" / CRD_FILENAME).read_bytes()
    assert top.decode() == render_crd_yaml()
    assert main(_args(tmp_path, "--check"), "crds") == 0


def test_check_fails_when_missing_or_stale_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_args(tmp_path, "--check"), "crds") == 1
    assert not (tmp_path / "crds").exists()
    assert main(_args(tmp_path), "crds") == 0
    chart_copy = tmp_path / "chart" / CRD_FILENAME
    chart_copy.write_text(chart_copy.read_text() + "# edited by hand\n")
    capsys.readouterr()
    assert main(_args(tmp_path, "--check"), "crds") == 1
    err = capsys.readouterr().err
    assert "chart" in err
    assert "crds/" + CRD_FILENAME not in err.replace(str(tmp_path) + "/", "")


def test_no_chart_and_stdout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_args(tmp_path, "--no-chart"), "crds") == 0
    assert not (tmp_path / "chart").exists()
    capsys.readouterr()
    assert main(["--stdout"], "crds") == 0
    assert capsys.readouterr().out == render_crd_yaml()


def test_dispatched_from_the_top_level_cli(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        top_main(["crds", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "--check" in out
    assert "--chart-dir" in out
