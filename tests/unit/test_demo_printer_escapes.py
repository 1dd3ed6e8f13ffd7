"""The demo prints verdict reasons that quote the measured side (failed test ids, a server's
error text): its printer escapes control characters like bench and judge do (issue 38 hole
4), keeping the line breaks of its own tables."""

from __future__ import annotations

import io

from vllm_operator_demo.demo_session import Printer


def test_the_demo_printer_escapes_terminal_codes_and_keeps_its_lines() -> None:
    out = io.StringIO()
    say = Printer(out, live=True)
    say("verdict FAILED\n  - must-pass \x1b[32mcode-1\x1b[8m failed\r\u202e", stamp=False)
    say.live("trial 1 \x1b[2J\u202e")
    text = out.getvalue()
    assert "\x1b" not in text
    assert "\u202e" not in text
    assert text.startswith("verdict FAILED\n  - must-pass \\x1b[32mcode-1\\x1b[8m failed\\x0d")
    assert "trial 1 \\x1b[2J\\u202e" in text
