"""`vllm-operator demo` as a person sees it in a terminal: the live line never goes quiet.

The demo's story prints into a real terminal (a tmux pane; tmux is a Debian package,
hack/ci-tools.sh installs it) and the screen is read every half second while it runs. While
a benchmark runs, the live line at the bottom must show where it is (phase, prompt class or
streams, trial k of n) and change at least every 5 seconds; the time stamp in front of it
does not count as a change. The run is test_story's (story_run.py: one demo for both).
"""

from __future__ import annotations

import os

import pytest

from .story_run import StoryRun

# The whole stack judging measured latency: in the timing phase, alone (conftest.py).
pytestmark = [pytest.mark.slow, pytest.mark.timing]

MAX_SILENCE = 5.0


def test_live_line_changes_at_least_every_five_seconds(story_run: StoryRun) -> None:
    screen = story_run.screen
    if screen is None:
        if os.environ.get("VLLMOP_REQUIRE_TMUX"):
            pytest.fail("tmux is required here (VLLMOP_REQUIRE_TMUX is set)")
        pytest.skip("tmux not installed (hack/ci-tools.sh installs it)")
    history = screen.history  # the whole scrollback, for the messages below
    dump = os.environ.get("VLLMOP_SCREEN_DUMP")  # where to keep the screen, to look at
    if dump:
        with open(dump, "w") as kept:
            kept.write(history)
    assert story_run.code in (0, 1), history  # the verdicts are test_story's (issue 19's)
    # Silence: from a change of the live text to the next change, or to the moment the
    # live line gave way to a new line (the verdict).
    silences: list[float] = []
    changes: list[str] = []
    last: tuple[float, str] | None = None
    for when, text in screen.samples:
        if text is None or last is None or text != last[1]:
            if last is not None:
                silences.append(when - last[0])
            last = None if text is None else (when, text)
            if text is not None:
                changes.append(text)
    texts = changes
    assert len(set(texts)) >= 20, (texts, history)
    assert any("trial 3 of 10" in t for t in texts), texts  # 3 first, up to gate.maxTrials
    assert any("streams" in t for t in texts), texts
    assert any("prompts" in t for t in texts), texts
    assert max(silences) <= MAX_SILENCE, (max(silences), screen.samples, history)
