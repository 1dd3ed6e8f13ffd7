"""The demo's default report folders do not pile up: earlier runs beyond the last two go,
and a folder holding anything but pages is left alone."""

from __future__ import annotations

import os
from pathlib import Path

from vllm_operator_demo.demo_reports import KEEP_EARLIER, REPORTS_PREFIX, reports_dir


def test_earlier_runs_beyond_the_last_two_are_removed(tmp_path: Path) -> None:
    folders = []
    for n in range(4):
        folder = tmp_path / f"{REPORTS_PREFIX}{n}"
        folder.mkdir()
        (folder / "step1-abc.html").write_text("page")
        os.utime(folder, (1000 + n, 1000 + n))
        folders.append(folder)
    mine = tmp_path / f"{REPORTS_PREFIX}mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("not a page")
    os.utime(mine, (1, 1))  # oldest, but not only pages: kept
    new = reports_dir(None, temp=tmp_path)
    assert new.parent == tmp_path
    assert new.name.startswith(REPORTS_PREFIX)
    assert KEEP_EARLIER == 2
    kept = sorted(p.name for p in tmp_path.iterdir())
    assert kept == sorted([folders[2].name, folders[3].name, mine.name, new.name])


def test_a_given_folder_is_used_as_it_is(tmp_path: Path) -> None:
    given = tmp_path / "mine" / "reports"
    assert reports_dir(given) == given
    assert given.is_dir()
