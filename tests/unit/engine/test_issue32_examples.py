"""Issue 32's examples through ``vllm-operator render``: refused with vLLM's reason, on the
releases the issue names (or accepted where vLLM accepts them).

Each verdict here is also in the recorded tables (``hack/vllm-flags``, the forms of
``forms.py``), which test_flag_conformance holds the policy to; this file reads them as a
user does: a resource in, exit 2 and one line per problem out.
"""

from __future__ import annotations

import io
from typing import Any

import pytest
import yaml

from builders import minimal_spec, resource
from vllm_operator.commands.render import run
from vllm_operator.engine import flagdata


def _render(version: str, extra: list[str]) -> tuple[int, str, str]:
    raw = resource(minimal_spec(image=f"vllm/vllm-openai:v{version}", extraArgs=extra))
    out, err = io.StringIO(), io.StringIO()
    code = run(["-f", "-"], "render", io.StringIO(yaml.safe_dump(raw)), out, err)
    return code, out.getvalue(), err.getvalue()


def _recorded(version: str) -> bool:
    release = flagdata.Version.parse(version)
    return release in flagdata.releases() and flagdata.table(release).records_engine


def _needs(version: str) -> Any:
    return pytest.mark.skipif(
        not _recorded(version), reason=f"vLLM {version} not recorded with the engine stage"
    )


REFUSED = [
    # 0.11.1/0.11.2: -O is the compilation level; vLLM's validator refuses these levels
    *[
        (v, args, "Invalid compilation mode")
        for v in ("0.11.1", "0.11.2")
        for args in (["-O00"], ["-O+0"], ["-O0_0"], ["-O=00"], ["-O$(LEVEL)"])
    ],
    ("0.11.1", ["--compilation-config.max_cudagraph_capture_size", "1k"], "valid integer"),
    ("0.11.2", ["--compilation-config.max_cudagraph_capture_size", "1k"], "valid integer"),
    ("0.11.2", ["-O4"], "mode: Input should be"),
    # 0.20.0: the optimization level is 0-3, and -cc's mode is a name or a number
    *[
        ("0.20.0", args, "Input should be 0, 1, 2 or 3")
        for args in (
            ["--optimization-level", "4"],
            ["--optimization-level", "O3"],
            ["--optimization-level", ""],
            ["-O.level=3"],
        )
    ],
    ("0.20.0", ["-cc", '{"mode": "0"}'], "Invalid compilation mode: 0"),
    # create_engine_config
    *[
        (v, ["--max-num-seqs", "-5"], "greater than or equal to 1")
        for v in ("0.11.2", "0.12.0", "0.17.0", "0.22.0", "0.33.0")
    ],
    *[
        (v, ["--hf-overrides", "-1"], "valid dictionary")
        for v in ("0.11.0", "0.11.1", "0.17.0", "0.22.0", "0.33.0")
    ],
    *[
        (v, ["--kv-transfer-config", '{"kv_connector": "X", "kv_role": "kv_both"}'], ": X")
        for v in ("0.22.0", "0.33.0")
    ],
    ("0.33.0", ["--kv-cache-dtype", "bogus"], "cache"),
    ("0.33.0", ["--kv-cache-dtype", ""], "cache"),
    *[
        (v, ["--quantization", "bogus"], "Unknown quantization method: bogus")
        for v in ("0.11.1", "0.12.0", "0.22.0")
    ],
    # the API server's checks
    *[
        (v, ["--enable-auto-tool-choice", "--tool-call-parser", "bogus"], "invalid tool call")
        for v in ("0.11.1", "0.12.0", "0.17.0", "0.22.0", "0.33.0")
    ],
]


@pytest.mark.parametrize(
    ("version", "args", "reason"),
    [pytest.param(v, a, r, marks=_needs(v), id=f"{v}-{' '.join(a)}") for v, a, r in REFUSED],
)
def test_refused_by_render_with_vllms_reason(version: str, args: list[str], reason: str) -> None:
    code, out, err = _render(version, args)
    assert code == 2, out
    lines = [ln for ln in err.splitlines() if ln.startswith("spec.engine.extraArgs")]
    assert lines, err
    assert any(f"vLLM {version} would" in ln and reason in ln for ln in lines), err


ACCEPTED = [
    ("0.11.1", ["-O0"]),
    ("0.11.1", ["--max-num-seqs", "1"]),
    ("0.22.0", ["--kv-transfer-config", '{"kv_connector": "NixlConnector", "kv_role": "kv_both"}']),
    ("0.22.0", ["--quantization", "awq"]),  # the checkpoint decides: vLLM's call
    # 0.11.0 in a fresh process (VLLM_USE_V1 unset, as in the image) warns and serves;
    # it refuses only where VLLM_USE_V1 is set (issue 32's check ran after another form's
    # create_engine_config had set it in the same process)
    ("0.11.0", ["--logits-processor-pattern", "x"]),
    ("0.10.2", ["--preemption-mode", "swap"]),
    ("0.22.0", ["-cc", '{"max_cudagraph_capture_size": 1k}']),
    ("0.17.0", ["--enable-auto-tool-choice", "--tool-call-parser", "hermes"]),
]


@pytest.mark.parametrize(
    ("version", "args"),
    [pytest.param(v, a, marks=_needs(v), id=f"{v}-{' '.join(a)}") for v, a in ACCEPTED],
)
def test_accepted_where_vllm_accepts(version: str, args: list[str]) -> None:
    code, _, err = _render(version, args)
    assert code == 0, err


@pytest.mark.parametrize("version", ["0.11.0"])
def test_model_option_names_what_vllm_does(version: str) -> None:
    """0.11.0 accepts ``--model=other/model`` and serves the positional model: refused,
    with that reason (the spec's model is the one served)."""
    code, _, err = _render(version, ["--model=other/model"])
    assert code == 2
    assert "would ignore it and serve" in err
    assert "positional model" in err


def test_level_in_compilation_config_warns_where_vllm_logs_it() -> None:
    code, out, err = _render("0.17.0", ["-cc", '{"level": 3}'])
    assert code == 0, err
    assert "Level is deprecated" in out + err
