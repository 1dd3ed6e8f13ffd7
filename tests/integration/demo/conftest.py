"""The demo's story run once for the tests of this folder that look at it (story_run.py)."""

from __future__ import annotations

import pytest

from .story_run import StoryRun, run_story


@pytest.fixture(scope="session")
def story_run(tmp_path_factory: pytest.TempPathFactory) -> StoryRun:
    """One run for test_story and test_screen (both in the timing phase, one process: under
    xdist both are in the ``timing`` group, so one worker runs it once too)."""
    return run_story(tmp_path_factory.mktemp("story"))
