"""No user string ever reaches a shell: property-based, over every user-controlled field.

Whatever a user writes into model name, revision, served name, extra args, env values or
image, the rendered container runs the constant entrypoint script, and the string arrives
as exactly one argv item (or env value) after the kubelet's ``$(VAR)`` expansion, which is
simulated here with the same rules as the kubelet.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st
from render_cases import base_resource

from vllm_operator.api import parse_vllm_deployment
from vllm_operator.engine import entrypoint
from vllm_operator.errors import SpecErrors
from vllm_operator.render import render_all

PAYLOADS = [
    "$(reboot)",
    "`id`",
    '"; rm -rf / #',
    "'; exec sh '",
    "a\nb",
    "$HOME",
    "${IFS}",
    "$$",
    "$(HF_HOME)",
    "--",
    "\\",
    "exec vllm serve",
    'case "$fix" in',
]
STRINGS = st.one_of(
    st.sampled_from(PAYLOADS),
    st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=30),
)


def kubelet_expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion of command, args and env values."""
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] == "$" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "$":
                out.append("$")
                i += 2
                continue
            if nxt == "(":
                end = text.find(")", i + 2)
                if end != -1 and text[i + 2 : end] in env:
                    out.append(env[text[i + 2 : end]])
                    i = end + 1
                    continue
        out.append(text[i])
        i += 1
    return "".join(out)


FIELDS = ["model.name", "model.revision", "model.servedModelName", "extraArg", "env", "image"]


def place(field: str, value: str) -> dict[str, Any]:
    raw = copy.deepcopy(base_resource())
    spec = raw["spec"]
    if field == "extraArg":
        spec["engine"]["extraArgs"] = ["--some-new-flag", value, value]
    elif field == "env":
        spec["engine"]["env"] = [{"name": "USER_VALUE", "value": value}]
    elif field == "image":
        spec["engine"]["image"] = value
        spec["engine"]["version"] = "0.17.0"
    else:
        section, key = field.split(".")
        spec[section][key] = value
    return raw


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(FIELDS), STRINGS)
def test_user_strings_never_reach_the_script(field: str, value: str) -> None:
    try:
        manifests = render_all(parse_vllm_deployment(place(field, value)))
    except SpecErrors:
        assume(False)  # refused specs run nothing, which is also safe
        return
    (container,) = manifests[0]["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value", "<secret>") for e in container["env"]}
    # The script is the constant, byte for byte, and kubelet expansion leaves it so.
    assert container["command"] == ["/bin/sh", "-c", entrypoint.SCRIPT, entrypoint.ARGV0]
    assert kubelet_expand(container["command"][2], env) == entrypoint.SCRIPT
    args = [kubelet_expand(a, env) for a in container["args"]]
    expanded_env = {k: kubelet_expand(v, env) for k, v in env.items()}
    if field == "env":
        assert expanded_env["USER_VALUE"] == value
    elif field == "image":
        assert container["image"] == value
    elif field == "extraArg":
        assert args[-3:] == ["--some-new-flag", value, value]
    elif field == "model.name":
        assert args[0] == value
    elif field == "model.revision":
        assert args[args.index("--revision") + 1] == value
    else:
        assert args[args.index("--served-model-name") + 1] == value
