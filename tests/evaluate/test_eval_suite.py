"""Suites: directories, list files, hashes and the held-out composition rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.tasks import write_task
from posttrain_arena.evaluate.suite import SuiteError, load_suite

DOMAINS = ["software-engineering", "cybersecurity", "finance-economics", "office-white-collar",
           "media-content-production"]


def test_directory_and_list_file_agree(tmp_path: Path) -> None:
    for i, d in enumerate(DOMAINS):
        write_task(tmp_path / "suite", f"t{i}", domain=d)
    by_dir = load_suite(tmp_path / "suite")
    listing = tmp_path / "suite.txt"
    listing.write_text("# held-out\n" + "\n".join(f"suite/t{i}" for i in reversed(range(5))))
    by_list = load_suite(listing)
    assert [t.name for t in by_dir.tasks] == [f"t{i}" for i in range(5)]
    assert by_dir.hash == by_list.hash
    by_dir.check_heldout()


def test_hash_follows_content(tmp_path: Path) -> None:
    write_task(tmp_path / "a", "t0")
    write_task(tmp_path / "b", "t0", word="other")
    assert load_suite(tmp_path / "a").hash != load_suite(tmp_path / "b").hash


def test_collection_layout_uses_envs(tmp_path: Path) -> None:
    write_task(tmp_path / "envs", "one")
    write_task(tmp_path / "envs", "_draft")
    (tmp_path / "submission.yaml").write_text("team_name: x\n")
    assert [t.name for t in load_suite(tmp_path).tasks] == ["one"]


def test_heldout_rule(tmp_path: Path) -> None:
    for i in range(4):
        write_task(tmp_path, f"se{i}")
    write_task(tmp_path, "cy", domain="cybersecurity")
    suite = load_suite(tmp_path)
    assert suite.composition_violations()
    with pytest.raises(SuiteError, match="software-engineering"):
        suite.check_heldout()


def test_errors_name_the_problem(tmp_path: Path) -> None:
    with pytest.raises(SuiteError, match="no such suite"):
        load_suite(tmp_path / "missing")
    listing = tmp_path / "list.txt"
    listing.write_text("nowhere\n")
    with pytest.raises(SuiteError, match=r"list.txt:1"):
        load_suite(listing)
    bad = write_task(tmp_path / "s", "broken")
    (bad / "task.md").write_text("---\nversion: 1\n---\n")
    with pytest.raises(SuiteError, match="broken"):
        load_suite(tmp_path / "s")
    first, second = write_task(tmp_path / "x", "dup"), write_task(tmp_path / "y", "dup")
    listing.write_text(f"{first}\n{second}\n")
    with pytest.raises(SuiteError, match="unique"):
        load_suite(listing)


def _tag(task: Path, *tags: str) -> None:
    md = task / "task.md"
    md.write_text(md.read_text().replace("  difficulty: easy\n",
                                         f"  difficulty: easy\n  tags: [{', '.join(tags)}]\n"))


def test_cluster_is_the_declared_tag_else_the_task(tmp_path: Path) -> None:
    for i in range(3):
        write_task(tmp_path / "s", f"t{i}")
    _tag(tmp_path / "s" / "t0", "shell", "cluster:fam-a")
    _tag(tmp_path / "s" / "t1", "cluster:fam-a")
    plain = load_suite(tmp_path / "s")
    assert plain.clusters() == {"t0": "cluster:fam-a", "t1": "cluster:fam-a", "t2": "task:t2"}
    # The tag is part of the package, so declaring clusters changes the sealed hash.
    write_task(tmp_path / "u", "t0")
    assert load_suite(tmp_path / "u").tasks[0].checksum != plain.tasks[0].checksum


def test_two_clusters_for_one_task_are_refused(tmp_path: Path) -> None:
    task = write_task(tmp_path / "s", "t0")
    _tag(task, "cluster:a", "cluster:b")
    with pytest.raises(SuiteError, match=r"task.md: metadata.tags declares 2 clusters"):
        load_suite(tmp_path / "s").clusters()
