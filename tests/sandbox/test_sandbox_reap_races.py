"""A reap walks a folder that other processes change under it: trials empty their trash
and remove their sessions while `arena sandbox reap` (or a backend connecting) looks.
An entry whose stat fails is one that vanished, and never an error of the reap (the suite
failed on this: `arena sandbox reap --json` exited 1 with FileNotFoundError while the
other worker's trials emptied their trash)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from posttrain_arena.sandbox.localfs import TRASH_PREFIX, sessions_dir
from posttrain_arena.sandbox.reaper import reap_local


def test_a_reap_survives_entries_that_vanish_under_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARENA_LOCAL_SESSIONS", str(tmp_path / "sessions-base"))
    folder = sessions_dir()
    # A link to nothing stats the way an entry removed after the listing does (ENOENT),
    # deterministically; the reap must neither follow it nor fail on it.
    young = folder / f"{TRASH_PREFIX}young"
    young.symlink_to(tmp_path / "removed-meanwhile")
    old = folder / f"{TRASH_PREFIX}old"
    old.symlink_to(tmp_path / "removed-long-ago")
    long_ago = time.time() - 3600
    os.utime(old, (long_ago, long_ago), follow_symlinks=False)

    reap_local(max_age_sec=6 * 3600)

    assert young.is_symlink(), "a fresh trash entry is its owner's to empty"
    assert not old.is_symlink(), "trash left for an hour is removed (unlinked, not followed)"
