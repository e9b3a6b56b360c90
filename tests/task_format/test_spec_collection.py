"""Collections: manifest, bounds, duplicates, content hash, per-domain counts."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from posttrain_arena.task_format.collection import (
    MAX_TASKS,
    Submission,
    Track,
    check_collection,
    load_collection,
    load_submission,
)
from posttrain_arena.task_format.findings import Severity, SpecError

from .conftest import EXISTING_TASK_MD, SUBMISSION, write_collection, write_package


def error_codes(report) -> set[str]:
    return {f.code for f in report.errors}


def test_valid_collection_loads(tmp_path: Path) -> None:
    root = write_collection(tmp_path / "c", 3)
    write_package(root / "envs" / "_draft")  # ignored: leading underscore
    (root / "envs" / "_draft" / "task.md").write_text("broken")
    report = check_collection(root)
    assert report.ok, [f.render() for f in report.errors]
    assert [t.name for t in report.tasks] == ["task-000", "task-001", "task-002"]
    assert report.domain_counts == {"software-engineering": 3}
    coll = load_collection(root)
    assert coll.manifest.track is Track.ENVIRONMENTS
    assert [t.name for t in coll.tasks] == ["task-000", "task-001", "task-002"]
    assert coll.content_hash == report.content_hash
    assert coll.domain_counts() == {"software-engineering": 3}
    assert coll.task("task-001").checksum == report.tasks[1].checksum


def test_content_hash_is_stable_and_sensitive(tmp_path: Path) -> None:
    a = write_collection(tmp_path / "a", 2)
    b = tmp_path / "elsewhere" / "b"
    shutil.copytree(a, b)
    (b / "submission.yaml").write_text(SUBMISSION + "title: Renamed\n")
    first, moved = check_collection(a).content_hash, check_collection(b).content_hash
    assert first is not None and first == moved  # location and manifest wording don't pin
    (b / "envs" / "task-001" / "environment" / "data" / "input.txt").write_text("changed\n")
    assert check_collection(b).content_hash != first
    shutil.move(b / "envs" / "task-001", b / "envs" / "task-009")
    assert check_collection(b).content_hash not in (first, None)


def test_duplicate_packages_are_reported(tmp_path: Path) -> None:
    root = write_collection(tmp_path / "c", 2)
    shutil.copytree(root / "envs" / "task-000", root / "envs" / "zz-copy")
    report = check_collection(root)
    [dup] = [f for f in report.errors if f.code == "duplicate"]
    assert dup.path.endswith("zz-copy") and "task-000" in dup.message


def test_empty_collection_is_an_error(tmp_path: Path) -> None:
    root = write_collection(tmp_path / "c", 0)
    assert "too-few-tasks" in error_codes(check_collection(root))
    with pytest.raises(SpecError):
        load_collection(root)


def test_more_than_200_tasks_is_an_error(tmp_path: Path) -> None:
    root = write_collection(tmp_path / "c", 1)
    src = root / "envs" / "task-000"
    for i in range(1, MAX_TASKS + 1):
        dst = root / "envs" / f"task-{i:03d}"
        shutil.copytree(src, dst)
        (dst / "environment" / "data" / "input.txt").write_text(f"{i}\n")
    report = check_collection(root)
    assert len(report.tasks) == MAX_TASKS + 1
    assert error_codes(report) == {"too-many-tasks"}


def test_missing_submission_and_envs(tmp_path: Path) -> None:
    root = write_collection(tmp_path / "c", 1, submission=None)
    assert "missing" in error_codes(check_collection(root))
    (tmp_path / "bare").mkdir()
    assert {"missing", "envs"} <= error_codes(check_collection(tmp_path / "bare"))
    assert error_codes(check_collection(tmp_path / "nowhere")) == {"not-a-directory"}


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("team_name: t\ncontact_email: nope\ntrack: environments\n", "contact_email"),
        ("team_name: t\ncontact_email: a@b.c\ntrack: games\n", "track"),
        ("contact_email: a@b.c\ntrack: environments\n", "team_name"),
        ("team_name: [1, 2]\ncontact_email: a@b.c\ntrack: environments\n", "team_name"),
    ],
)
def test_manifest_schema_errors_are_located(tmp_path: Path, text: str, field: str) -> None:
    (tmp_path / "submission.yaml").write_text(text)
    manifest, findings = load_submission(tmp_path / "submission.yaml")
    assert manifest is None
    [f] = findings
    assert f.field == field and f.severity is Severity.ERROR
    if field != "team_name" or "team_name" in text:
        assert f.line == next(i for i, ln in enumerate(text.splitlines(), 1)
                              if ln.startswith(field))


@pytest.mark.parametrize(
    "text",
    ["a: &x 1\nb: *x\n", "team_name: [unclosed\n", "- just\n- a list\n", "\x00\x01"],
)
def test_malformed_manifest(tmp_path: Path, text: str) -> None:
    (tmp_path / "submission.yaml").write_text(text)
    manifest, findings = load_submission(tmp_path / "submission.yaml")
    assert manifest is None and findings and findings[0].severity is Severity.ERROR


def test_manifest_unknown_keys_warn(tmp_path: Path) -> None:
    root = write_collection(tmp_path / "c", 1, submission=SUBMISSION + "website: x\n")
    report = check_collection(root)
    assert report.ok
    [w] = [f for f in report.warnings if f.code == "unknown-key"]
    assert (w.field, w.line) == ("website", 4)
    full = Submission(team_name="t", contact_email="a@b.c", track=Track.SKILLS,
                      title="T", license="MIT", description="d")
    assert full.track is Track.SKILLS


def test_per_domain_counts_and_bad_packages(tmp_path: Path) -> None:
    root = write_collection(tmp_path / "c", 2)
    write_package(root / "envs" / "fin", {
        "task.md": EXISTING_TASK_MD.replace("software-engineering", "finance-economics")})
    write_package(root / "envs" / "broken", drop=("oracle/solve.sh",))
    (root / "envs" / "README.md").write_text("not a package")
    report = check_collection(root)
    assert report.domain_counts == {"finance-economics": 1, "software-engineering": 3}
    assert {f.code for f in report.errors} == {"oracle"}
    assert any(f.code == "envs" for f in report.warnings)
    data = report.to_json()
    assert data["ok"] is False and len(data["tasks"]) == 4


def test_symlinked_package_is_refused(tmp_path: Path) -> None:
    root = write_collection(tmp_path / "c", 1)
    outside = write_package(tmp_path / "outside")
    (root / "envs" / "linked").symlink_to(outside)
    assert "symlink-outside" in error_codes(check_collection(root))


def test_manifest_symlink_and_huge_manifest_are_refused(tmp_path: Path) -> None:
    secret = tmp_path / "secret.yaml"
    secret.write_text("team_name: [leaked-secret-value\n")
    root = write_collection(tmp_path / "c", 1, submission=None)
    (root / "submission.yaml").symlink_to(secret)
    report = check_collection(root)
    assert "missing" in error_codes(report)
    assert "leaked-secret-value" not in report.model_dump_json()
    (root / "submission.yaml").unlink()
    with (root / "submission.yaml").open("wb") as fh:
        fh.truncate(64 * 1024 * 1024)  # sparse; must not be read
    assert "too-large" in error_codes(check_collection(root))


def test_task_md_symlink_is_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "secret.md"
    secret.write_text("---\nversion: [leaked-secret-value\n---\n")
    pkg = write_package(tmp_path / "p", drop=("task.md",))
    (pkg / "task.md").symlink_to(secret)
    from posttrain_arena.task_format.checks import check_task

    report = check_task(pkg)
    assert not report.ok and "leaked-secret-value" not in report.model_dump_json()


def test_odd_task_folder_names(tmp_path: Path) -> None:
    root = write_collection(tmp_path / "c", 1)
    write_package(root / "envs" / "with space", {"environment/data/input.txt": "1\n"})
    write_package(root / "envs" / "bell\x07", {"environment/data/input.txt": "2\n"})
    report = check_collection(root)
    got = {(Path(f.path).name, f.severity.value) for f in report.findings
           if f.code == "task-name"}
    assert got == {("with space", "warning"), ("bell\x07", "error")}


def _with_problems(root: Path) -> Path:
    """Spread errors and warnings over the collection so the reports differ per task."""
    envs = root / "envs"
    (envs / "task-003" / "oracle" / "solve.sh").unlink()
    (envs / "task-031" / "task.md").write_text("---\nversion: [\n---\n", encoding="utf-8")
    shutil.copytree(envs / "task-010", envs / "task-099-copy")
    return root


@pytest.mark.parametrize("jobs", [2, 3])
def test_checking_in_several_processes_reports_the_same(tmp_path: Path, jobs: int) -> None:
    root = _with_problems(write_collection(tmp_path / "c", 80))
    one = check_collection(root, jobs=1)
    many = check_collection(root, jobs=jobs)
    assert not one.ok and {"oracle", "yaml", "duplicate"} <= error_codes(one)
    assert many.to_json() == one.to_json()
    assert [t.name for t in many.tasks] == [t.name for t in one.tasks]


def test_a_worker_that_fails_costs_time_not_reports(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A child that cannot send its reports exits non-zero; the parent redoes its share."""
    import pickle

    import posttrain_arena.task_format.collection as module

    root = _with_problems(write_collection(tmp_path / "c", 60))
    expected = check_collection(root, jobs=1).to_json()

    class BrokenPickle:
        UnpicklingError = pickle.UnpicklingError
        HIGHEST_PROTOCOL = pickle.HIGHEST_PROTOCOL
        loads = staticmethod(pickle.loads)

        @staticmethod
        def dumps(*_args: object, **_kwargs: object) -> bytes:
            raise RuntimeError("cannot send")

    monkeypatch.setattr(module, "pickle", BrokenPickle)
    assert check_collection(root, jobs=2).to_json() == expected
