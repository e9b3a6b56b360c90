"""Task sets from folders and from git at a pinned commit."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from posttrain_arena.evaluate.suite import load_suite
from posttrain_arena.train.sources import (
    SourceError,
    count_tasks,
    fetch,
    load_taskset,
    taskset_hash,
)

from .taskkit import make_word_task


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_git_source_is_pinned_to_its_commit(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    make_word_task(repo / "envs" / "one", word="a", prompt="Write a into answer.txt.")
    _git(repo, "init", "-q")
    _git(repo, "-c", "user.email=t@example.org", "-c", "user.name=t", "add", ".")
    _git(repo, "-c", "user.email=t@example.org", "-c", "user.name=t", "commit", "-qm", "one")
    first = _git(repo, "rev-parse", "HEAD")
    make_word_task(repo / "envs" / "two", word="b", prompt="Write b into answer.txt.")
    _git(repo, "-c", "user.email=t@example.org", "-c", "user.name=t", "add", ".")
    _git(repo, "-c", "user.email=t@example.org", "-c", "user.name=t", "commit", "-qm", "two")

    folder, commit = fetch(f"file://{repo}", first, tmp_path / "clone")
    assert commit == first
    assert count_tasks(folder) == 1  # the later commit's task is not there
    with pytest.raises(SourceError, match="pinned commit"):
        fetch(f"file://{repo}", None, tmp_path / "other")


def test_taskset_hash_is_the_suite_hash(tmp_path: Path) -> None:
    for name, word in (("x", "one"), ("y", "two")):
        make_word_task(tmp_path / "suite" / name, word=word, prompt=f"Write {word}.")
    assert taskset_hash(tmp_path / "suite") == load_suite(tmp_path / "suite").hash
    assert [t.name for t in load_taskset(tmp_path / "suite", max_tasks=1).tasks] == ["x"]
    with pytest.raises(SourceError, match="no task packages"):
        load_taskset(tmp_path / "suite" / "x" / "verifier")
