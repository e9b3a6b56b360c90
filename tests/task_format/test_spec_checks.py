"""check_task: the existing format checks clean; each broken package gets a clear finding."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from posttrain_arena.task_format.checks import CheckLimits, check_task
from posttrain_arena.task_format.findings import Severity, SpecError
from posttrain_arena.task_format.hashing import tree_hash
from posttrain_arena.task_format.package import VerifierKind, load_task

from .conftest import EXISTING_TASK_MD, PackageFactory


def codes(report, severity: Severity | None = None) -> set[str]:
    return {f.code for f in report.findings if severity is None or f.severity is severity}


def test_existing_format_package_checks_clean(make_package: PackageFactory) -> None:
    root = make_package("fix-the-parser")
    report = check_task(root)
    # the published format starts FROM ubuntu:24.04, which must be pulled: one warning
    assert [f.code for f in report.findings] == ["base-image"], \
        [f.render() for f in report.findings]
    assert report.ok and report.package is not None
    assert report.package.verifier_kind is VerifierKind.TEST_SH
    assert report.domain == "software-engineering"
    # The single walk's checksum is the canonical tree hash, and load_task agrees.
    assert report.checksum == tree_hash(root) == load_task(root).checksum


def test_starting_kit_template_checks_clean() -> None:
    template = Path(__file__).resolve().parents[2] / "starting-kit" / "template"
    report = check_task(template)
    assert report.findings == [], [f.render() for f in report.findings]


@pytest.mark.parametrize(
    ("drop", "code"),
    [
        (("task.md",), "layout"),
        (("environment/Dockerfile",), "dockerfile"),
        (("oracle/solve.sh",), "oracle"),
        (("verifier/test.sh", "verifier/test_outputs.py"), "verifier"),
    ],
)
def test_missing_parts_are_errors(make_package: PackageFactory, drop, code) -> None:
    report = check_task(make_package(drop=drop))
    assert not report.ok and report.package is None
    assert code in codes(report, Severity.ERROR)


def test_any_verifier_entry_point_is_enough(make_package: PackageFactory) -> None:
    only_pytest = check_task(make_package("a", drop=("verifier/test.sh",)))
    assert only_pytest.ok and only_pytest.package is not None
    assert only_pytest.package.verifier_kind is VerifierKind.PYTEST
    py = make_package("b", files={"verifier/verifier.py": "print(1)\n"})
    assert check_task(py).package.verifier_kind is VerifierKind.VERIFIER_PY


def test_wrong_type_is_located_with_the_value(make_package: PackageFactory) -> None:
    text = EXISTING_TASK_MD.replace("memory_mb: 2048", 'memory_mb: "2GB"')
    report = check_task(make_package(files={"task.md": text}))
    [finding] = [f for f in report.findings if f.field == "environment.memory_mb"]
    line = text.splitlines().index('  memory_mb: "2GB"') + 1
    assert finding.line == line and "2GB" in finding.message
    assert finding.render().startswith(f"{report.path}/task.md:{line}: error: "
                                       "environment.memory_mb: ")


def test_unknown_keys_are_warnings_with_lines(make_package: PackageFactory) -> None:
    text = EXISTING_TASK_MD.replace("agent:\n", "agent:\n  timout_sec: 5\n", 1)
    text = text.replace('version: "1.0"\n', 'version: "1.0"\nflavour: mint\n')
    report = check_task(make_package(files={"task.md": text}))
    assert report.ok
    warned = {f.field: f.line for f in report.warnings if f.code == "unknown-key"}
    lines = text.splitlines()
    assert warned == {"flavour": lines.index("flavour: mint") + 1,
                      "agent.timout_sec": lines.index("  timout_sec: 5") + 1}


@pytest.mark.parametrize(
    "task_md",
    [
        "no frontmatter at all\n## prompt\nx\n",
        "---\nversion: [unclosed\n---\n## prompt\nx\n",
        "---\nversion: '1.0'\n",
        "---\n- a list\n---\n## prompt\nx\n",
        "---\na: &x [1, 2]\nb: *x\n---\n## prompt\nx\n",
        "---\n" + "".join(f"k{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9 if i else ["1"] * 9)
                          + "]\n" for i in range(9)) + "---\n## prompt\nx\n",
        "---\nversion: !!python/object/apply:os.system ['true']\n---\n## prompt\nx\n",
        "---\na: 1\na: 2\n---\n## prompt\nx\n",
    ],
    ids=["no-frontmatter", "malformed", "unclosed", "not-mapping", "alias", "alias-bomb",
         "python-tag", "duplicate-key"],
)
def test_bad_frontmatter_is_an_error_not_a_crash(make_package: PackageFactory,
                                                 task_md: str) -> None:
    report = check_task(make_package(files={"task.md": task_md}))
    assert not report.ok
    assert all(f.path.endswith("task.md") for f in report.errors if f.code != "prompt")
    with pytest.raises(SpecError):
        load_task(report.path)


def test_without_a_prompt_heading_the_body_is_the_prompt(make_package: PackageFactory) -> None:
    text = EXISTING_TASK_MD.replace("## prompt", "## notes")
    report = check_task(make_package(files={"task.md": text}))
    assert report.ok and report.package is not None
    assert "crashes on empty lines" in report.package.prompt
    assert report.package.body.prompt_from_body


def test_a_body_with_only_roles_has_no_prompt(make_package: PackageFactory) -> None:
    head = EXISTING_TASK_MD.split("# Fix the parser")[0]
    text = head + "## role: reviewer\n\nBe strict.\n\n## user-persona\n\nA busy user.\n"
    report = check_task(make_package(files={"task.md": text}))
    assert "prompt" in codes(report, Severity.ERROR)


def test_binary_and_non_utf8_task_md(make_package: PackageFactory) -> None:
    binary = check_task(make_package("a", files={"task.md": b"---\n\x00\x01\x02"}))
    latin1 = check_task(make_package("b", files={
        "task.md": EXISTING_TASK_MD.replace("Fix", "Caf\xe9").encode("latin-1")}))
    assert "binary" in codes(binary, Severity.ERROR)
    [enc] = [f for f in latin1.errors if f.code == "encoding"]
    assert enc.line == EXISTING_TASK_MD.splitlines().index("# Fix the parser") + 1


def test_huge_files_are_refused_without_reading_them(make_package: PackageFactory) -> None:
    root = make_package()
    with (root / "environment" / "data" / "big.bin").open("wb") as fh:
        fh.truncate(11 * 1024 * 1024)  # sparse: nothing is written
    with (root / "task.md").open("ab") as fh:
        fh.truncate(2 * 1024 * 1024)
    report = check_task(root)
    assert {"file-too-large", "too-large"} <= codes(report, Severity.ERROR)
    assert report.checksum is None  # nothing hashed past the limits
    small = check_task(make_package("b"), CheckLimits(max_package_bytes=100))
    assert "package-too-large" in codes(small, Severity.ERROR)
    few = check_task(make_package("c"), CheckLimits(max_entries=3))
    assert "too-many-files" in codes(few, Severity.ERROR)


def test_symlinks_outside_the_package_and_loops(make_package: PackageFactory,
                                                tmp_path: Path) -> None:
    root = make_package()
    (tmp_path / "secret.txt").write_text("x")
    os.symlink("../../secret.txt", root / "environment" / "escape.txt")
    os.symlink("/etc/passwd", root / "environment" / "abs.txt")
    os.symlink("loop-b", root / "environment" / "loop-a")
    os.symlink("loop-a", root / "environment" / "loop-b")
    os.symlink("data", root / "environment" / "data-link")  # fine: stays inside
    report = check_task(root)
    by_name = {Path(f.path).name: f.code for f in report.findings}
    assert by_name["escape.txt"] == "symlink-outside"
    assert by_name["abs.txt"] == "symlink-outside"
    assert by_name["loop-a"] == by_name["loop-b"] == "symlink-loop"
    assert "data-link" not in by_name


def test_answer_leaks_into_the_build_context(make_package: PackageFactory) -> None:
    solve = "#!/bin/bash\necho 42 > /root/answer.txt\n"
    # app/ is copied into the image (COPY app/ /root/app/), hints/ is not
    copied = check_task(make_package("a", files={"oracle/solve.sh": solve,
                                                 "environment/app/notes.sh": solve,
                                                 "environment/hints/notes.sh": solve}))
    [leak] = [f for f in copied.errors if f.code == "answer-leak"]
    assert leak.path.endswith("environment/app/notes.sh") and "oracle/solve.sh" in leak.message
    assert not [f for f in copied.findings if f.path.endswith("hints/notes.sh")]
    named = check_task(make_package("b", files={"environment/app/solve.sh": "exit 0\n"}))
    assert "answer-leak" in codes(named, Severity.ERROR)
    # the verifier's tests given to the agent: a warning (Terminal-Bench does it on purpose)
    tests = check_task(make_package("e", files={"environment/app/test_outputs.py": "pass\n"}))
    assert tests.ok and "answer-leak" in codes(tests, Severity.WARNING)
    root = make_package("c")
    os.symlink("../oracle/solve.sh", root / "environment" / "s")
    assert "answer-leak" in codes(check_task(root), Severity.ERROR)
    # An input kept in verifier/data for comparison is only a warning.
    data = check_task(make_package("d", files={"verifier/data/input.txt": "a\nb\n\nc\n"}))
    assert data.ok and "answer-leak" in codes(data, Severity.WARNING)


@pytest.mark.parametrize(
    ("dockerfile", "ok"),
    [
        ("# comment\n\nARG V=1\nFROM debian:bookworm-slim\n", True),
        ("# syntax=docker/dockerfile:1\n# escape=`\nFROM x\nRUN a `\n  b\n", True),
        ("RUN echo hi\nFROM debian\n", False),
        ("# only comments\n", False),
        ("FROM x\nCOPY ../oracle/solve.sh /s\n", False),
        ("FROM x\nCOPY missing.txt /m\n", False),
        ("FROM x\nCOPY --from=builder /a /b\nCOPY data/*.txt /d/\n", True),
    ],
)
def test_dockerfile_rules(make_package: PackageFactory, dockerfile: str, ok: bool) -> None:
    report = check_task(make_package(files={"environment/Dockerfile": dockerfile}))
    assert report.ok is ok, [f.render() for f in report.findings]
    if not ok:
        assert "dockerfile" in codes(report, Severity.ERROR)


def test_remote_add_is_a_warning(make_package: PackageFactory) -> None:
    text = "FROM x\nADD https://example.com/data.csv /d.csv\n"
    report = check_task(make_package(files={"environment/Dockerfile": text}))
    assert report.ok and [f.line for f in report.warnings if f.code == "dockerfile"] == [2]


def test_odd_names_and_special_files(make_package: PackageFactory) -> None:
    root = make_package()
    (root / "environment" / "tab\there").write_text("x")
    (root / "environment" / "what?").write_text("x")
    os.mkfifo(root / "environment" / "pipe")
    report = check_task(root)  # must not hang on the pipe
    got = {(Path(f.path).name, f.code, f.severity.value) for f in report.findings}
    assert ("tab\there", "path-name", "error") in got
    assert ("what?", "path-name", "warning") in got
    assert ("pipe", "special-file", "error") in got


def test_undecodable_file_name_is_reported_printably(make_package: PackageFactory) -> None:
    root = make_package()
    os.close(os.open(os.fsencode(root / "environment") + b"/bad\xff", os.O_CREAT | os.O_WRONLY))
    report = check_task(root)
    [f] = [f for f in report.findings if f.code == "path-name"]
    assert "\\udcff" in f.path
    assert report.model_dump_json()  # serialisable


def test_not_a_directory(tmp_path: Path) -> None:
    report = check_task(tmp_path / "nowhere")
    assert codes(report) == {"not-a-directory"}


def test_checks_never_execute_package_code(make_package: PackageFactory,
                                           tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    payload = f"import pathlib; pathlib.Path({str(marker)!r}).write_text('x')\n"
    root = make_package(files={"verifier/conftest.py": payload, "verifier/verifier.py": payload,
                               "oracle/solve.sh": f"touch {marker}\n"})
    check_task(root)
    load_task(root)
    assert not marker.exists()


def test_a_collection_passed_as_a_task_gets_a_hint(tmp_path: Path) -> None:
    from .conftest import write_collection

    report = check_task(write_collection(tmp_path / "c", 1))
    [error] = report.errors
    assert error.code == "layout" and "arena collection check" in error.message
