"""The one reading of a boolean environment variable, for every command.

``vllm-operator run`` (``VLLM_OPERATOR_ALL_NAMESPACES``, ``VLLM_OPERATOR_LEADER_ELECTION``)
and the simulator (``VLLMOP_SIM_DEGRADED``, ...) used to accept different words, so the
same chart value meant "on" to one and an error, or "off", to another. Every boolean
variable now goes through ``parse_bool``; the caller names the variable in its error. It
imports nothing, so the tools (bench, sim) and the operator's shell can all use it.
"""

from __future__ import annotations

TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")
ACCEPTED = "/".join(TRUE_WORDS) + " or " + "/".join(FALSE_WORDS) + ", any case"


def parse_bool(text: str) -> bool:
    """True or False for one of the accepted words (surrounding blanks ignored).

    Raises ``ValueError`` saying what is accepted for anything else, the empty string too:
    whether a blank variable counts as unset is the caller's rule, said once there.
    """
    word = text.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise ValueError(f"not a boolean: {text[:64]!r} (use {ACCEPTED})")
