"""``argv.long_name``: the one reading of "which option does this token name" outside parse.

The policy's error messages, its suggestions and the simulator's notes all name the option a
user wrote; they share this function with ``argv``'s rewrite so a spelling vLLM accepts
(``--max_model_len=8``) is never reported under another name.
"""

from __future__ import annotations

import pytest

from vllm_operator.engine import argv


@pytest.mark.parametrize(
    ("token", "name"),
    [
        ("--max-model-len", "--max-model-len"),
        ("--max_model_len=8", "--max-model-len"),
        ("--hf_overrides.rope_scaling.type=x", "--hf-overrides"),
        ("--a=b=c", "--a"),
        ("-cc.mode=0", "-cc"),
        ("-O3", "-O3"),
        ("-tp", "-tp"),
        ("--", "--"),
    ],
)
def test_long_name(token: str, name: str) -> None:
    assert argv.long_name(token) == name
