"""Packages in the shapes Terminal-Bench 2, SkillsBench, BenchFlow and the PostTrain kit
publish (tests/interop/real_shapes.py) check and load as those harnesses read them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from posttrain_arena.task_format.checks import check_task
from posttrain_arena.task_format.domain_map import map_domain
from posttrain_arena.task_format.domains import Domain, composition_violations
from posttrain_arena.task_format.findings import SpecError
from posttrain_arena.task_format.layout import Layout
from posttrain_arena.task_format.package import load_task

from .corpus import BASE
from .real_shapes import (
    SKILLSBENCH_INPUT_COMPOSE,
    SKILLSBENCH_MAIN_COMPOSE,
    SKILLSBENCH_TWO_SERVICES,
    TB2_TEST_OUTPUTS,
    write_benchflow_task,
    write_tb2_task,
)


def _codes(report, severity: str) -> list[str]:
    return [f.code for f in report.findings if f.severity.value == severity]


# --- item 1: Terminal-Bench 2 tasks as published ------------------------------------------


def test_tb2_docker_image_beside_a_dockerfile_builds_the_dockerfile(tmp_path: Path) -> None:
    report = check_task(write_tb2_task(tmp_path / "add-numbers"))
    assert report.ok, [f.render() for f in report.errors]
    [note] = [f for f in report.warnings if f.field == "environment.docker_image"]
    assert "alexgshaw/add-numbers:20251031" in note.message and "built" in note.message
    task = load_task(tmp_path / "add-numbers")
    # the Dockerfile is what trials build; the prebuilt name is not carried into the model
    assert task.frontmatter.environment.docker_image is None
    assert task.dockerfile.is_file() and task.layout is Layout.HARBOR
    assert task.frontmatter.environment.memory_mb == 2048  # "2G", Harbor's size string


def test_tb2_docker_image_alone_runs_that_image(tmp_path: Path) -> None:
    report = check_task(write_tb2_task(tmp_path / "t", dockerfile=False))
    assert report.ok, [f.render() for f in report.errors]
    [warn] = [f for f in report.warnings if f.field == "environment.docker_image"]
    assert "alexgshaw/t:20251031" in warn.message and "prebuilt" in warn.message
    task = load_task(tmp_path / "t")
    assert task.prebuilt_image == "alexgshaw/t:20251031"
    # beside a Dockerfile the prebuilt name is not used
    assert load_task(write_tb2_task(tmp_path / "d")).prebuilt_image is None


def test_skillsbench_compose_of_one_main_service_is_a_warning(tmp_path: Path) -> None:
    root = write_tb2_task(tmp_path / "t", files={
        "environment/docker-compose.yaml": SKILLSBENCH_MAIN_COMPOSE})
    report = check_task(root)
    assert report.ok, [f.render() for f in report.errors]
    [warn] = [f for f in report.warnings if f.code == "compose"]
    assert "environment" in warn.message and "not applied" in warn.message
    load_task(root)


def test_skillsbench_compose_with_a_second_service_is_an_error(tmp_path: Path) -> None:
    root = write_tb2_task(tmp_path / "t", files={
        "environment/docker-compose.yaml": SKILLSBENCH_TWO_SERVICES})
    report = check_task(root)
    [error] = [f for f in report.errors if f.code == "compose-multi-container"]
    assert "api" in error.message and error.path.endswith("docker-compose.yaml")
    assert error.line is not None
    with pytest.raises(SpecError, match="multi-container"):
        load_task(root)


def test_compose_file_that_is_task_input_is_not_an_environment(tmp_path: Path) -> None:
    root = write_tb2_task(tmp_path / "t", files={
        "environment/docker-compose.yml": SKILLSBENCH_INPUT_COMPOSE,
        "environment/Dockerfile": "FROM posttrain-arena/python:bookworm\nWORKDIR /app\n"
                                  "COPY numbers.txt docker-compose.yml /app/\n"})
    report = check_task(root)
    assert report.ok and not [f for f in report.findings if "compose" in f.code]


# --- item 2: BenchFlow layouts ------------------------------------------------------------


def test_benchflow_task_md_with_task_toml_tests_and_solution(tmp_path: Path) -> None:
    root = write_benchflow_task(tmp_path / "hello-world-task")
    report = check_task(root)
    assert report.ok, [f.render() for f in report.errors]
    assert report.layout is Layout.BENCHFLOW
    assert any(f.path.endswith("task.toml") and f.code == "layout" for f in report.warnings)
    task = load_task(root)
    assert task.verifier_dir == root / "tests" and task.oracle_dir == root / "solution"
    assert task.verifier_mount == "/tests"  # as Harbor mounts tests/, which test.sh names
    assert task.frontmatter.agent.timeout_sec == 300  # task.md's, read first


def test_benchflow_task_md_alone_with_tests_is_benchflow(tmp_path: Path) -> None:
    task = load_task(write_benchflow_task(tmp_path / "t", toml=False))
    assert task.layout is Layout.BENCHFLOW and task.verifier_kind.value == "test.sh"


def test_free_form_category_in_task_md_is_a_warning_never_fatal(tmp_path: Path) -> None:
    # clawsbench writes `category: tool-use`; demo_task `category: demo`
    mapped = check_task(write_benchflow_task(tmp_path / "a", category="tool-use"))
    assert mapped.ok and mapped.domain == "office-white-collar"
    unknown = check_task(write_benchflow_task(tmp_path / "b", category="demo"))
    assert unknown.ok and unknown.domain == "unknown"
    [warn] = [f for f in unknown.warnings if f.field == "metadata.category"]
    assert "'demo'" in warn.message and "unknown" in warn.message and warn.line == 7


def test_verifier_and_tests_beside_task_md_really_conflict(tmp_path: Path) -> None:
    root = write_benchflow_task(tmp_path / "t", files={"verifier/test.sh": "exit 0\n"})
    report = check_task(root)
    [error] = [f for f in report.errors if f.code == "layout"]
    assert "verifier/" in error.message and "tests/" in error.message


# --- item 3: domains that mean something --------------------------------------------------


@pytest.mark.parametrize(("category", "tags", "domain"), [
    # SkillsBench categories that were all filed under software-engineering before
    ("energy", [], Domain.INDUSTRIAL_PHYSICAL_SYSTEMS),
    ("manufacturing", [], Domain.INDUSTRIAL_PHYSICAL_SYSTEMS),
    ("financial modeling", [], Domain.FINANCE_ECONOMICS),
    ("astronomy", [], Domain.NATURAL_SCIENCE),
    ("Security & CTF", [], Domain.CYBERSECURITY),
    ("speech-synthesis", [], Domain.MEDIA_CONTENT_PRODUCTION),
    ("formal method", [], Domain.MATHEMATICS_FORMAL_REASONING),
    ("Office Operation", [], Domain.OFFICE_WHITE_COLLAR),
    # TB2
    ("system-administration", [], Domain.SOFTWARE_ENGINEERING),
    ("scientific-computing", [], Domain.NATURAL_SCIENCE),
    # no category word, the tags decide
    ("research", ["seismology", "signal"], Domain.NATURAL_SCIENCE),
    # nothing to go on: unknown, never software-engineering by default
    ("games", [], Domain.UNKNOWN),
    ("data-science", [], Domain.UNKNOWN),
    (None, [], Domain.UNKNOWN),
])
def test_domain_rule(category: str | None, tags: list[str], domain: Domain) -> None:
    mapping = map_domain(category, tags)
    assert mapping.domain is domain, mapping
    assert (mapping.confidence == 0.0) == (domain is Domain.UNKNOWN)
    assert mapping.confidence < 1.0  # only a slug is certain


def test_prompt_alone_needs_several_words_and_says_so() -> None:
    weak = map_domain("misc", [], "Write the portfolio to /app/out.txt")
    assert weak.domain is Domain.UNKNOWN
    strong = map_domain("misc", [], "Price the bond portfolio, compute the loan's credit "
                        "spread and the budget's tax")
    assert strong.domain is Domain.FINANCE_ECONOMICS and strong.confidence <= 0.5


def test_tb2_category_lands_in_its_domain_with_confidence(tmp_path: Path) -> None:
    report = check_task(write_tb2_task(tmp_path / "t", category="seismology", tags=""))
    assert report.domain == "natural-science"
    task = load_task(tmp_path / "t")
    assert task.frontmatter.metadata.legacy_category == "seismology"
    assert task.frontmatter.metadata.category_confidence == 0.9
    # a tag of another domain ("shell": software) lowers the confidence, not the domain
    mixed = load_task(write_tb2_task(tmp_path / "m", category="seismology", tags='"shell"'))
    assert mixed.domain is Domain.NATURAL_SCIENCE
    assert mixed.frontmatter.metadata.category_confidence == round(3 / 4 * 0.9, 2)


def test_the_20_percent_rule_counts_unknown_as_its_own_group() -> None:
    counts = {d: 2 for d in Domain if d is not Domain.UNKNOWN}
    assert composition_violations(counts) == []
    problems = composition_violations({**counts, Domain.UNKNOWN: 6})
    assert problems and problems[0].startswith("unknown:")


# --- item 8: PostTrain format fidelity ----------------------------------------------------


def test_posttrain_1_0_without_prompt_section_warns(tmp_path: Path) -> None:
    root = tmp_path / "p"
    shutil.copytree(BASE, root)
    text = (root / "task.md").read_text()
    assert "## prompt" in text and 'version: "1.0"' in text
    (root / "task.md").write_text(text.replace("## prompt\n", "", 1))
    report = check_task(root)
    assert report.ok
    [warn] = [f for f in report.warnings if f.code == "posttrain-prompt"]
    assert "published PostTrain Arena" in warn.message
    # the published kit's own packages keep their section and get no such warning
    assert not [f for f in check_task(BASE).warnings if f.code == "posttrain-prompt"]


# --- item 4: answer leaks -----------------------------------------------------------------


def _leaks(report) -> dict[str, str]:
    return {f.path.rpartition("/environment/")[2]: f.severity.value
            for f in report.findings if f.code == "answer-leak"}


def test_inputs_both_sides_keep_are_not_leaks(tmp_path: Path) -> None:
    data = "1 2 3\n"
    root = write_tb2_task(tmp_path / "t", files={
        # TB2 write-compressor: data.txt shipped, tests/original-data.txt its pristine copy
        "environment/data.txt": data, "tests/original-data.txt": data,
        # SkillsBench dialogue-parser: script.txt shipped, solution/ keeps a copy the
        # oracle only reads, and the tests read /app/script.txt
        "environment/script.txt": "A: hi\n", "solution/script.txt": "A: hi\n",
        "tests/test_outputs.py": TB2_TEST_OUTPUTS + "# reads /app/script.txt\n",
        # TB2 break-filter-js-from-html: the tests given to the agent on purpose
        "environment/tests/test_outputs.py": TB2_TEST_OUTPUTS + "# reads /app/script.txt\n",
        "environment/Dockerfile": "FROM python:3.13-slim\nWORKDIR /app\n"
                                  "COPY numbers.txt data.txt script.txt /app/\n"
                                  "COPY tests/test_outputs.py /app\n"})
    report = check_task(root)
    assert report.ok, [f.render() for f in report.errors]
    assert _leaks(report) == {"data.txt": "warning", "script.txt": "warning",
                              "tests/test_outputs.py": "warning"}


def test_made_leaks_are_still_caught(tmp_path: Path) -> None:
    answer = '{"sum": 42}\n'
    root = write_tb2_task(tmp_path / "t", files={
        # the expected answer, shipped by `COPY . /app`
        "environment/expected_output.json": answer, "tests/expected_output.json": answer,
        # the oracle's output: solve.sh writes result.json (the tests name it too)
        "environment/sum.json": "42\n", "solution/sum.json": "42\n",
        "solution/solve.sh": "#!/bin/bash\ncp /solution/sum.json /app/sum.json\n",
        # the oracle's code under another name
        "environment/helper.awk": "{s+=$1} END {print s}\n",
        "solution/add.awk": "{s+=$1} END {print s}\n",
        "environment/Dockerfile": "FROM python:3.13-slim\nWORKDIR /app\nCOPY . /app\n"})
    assert _leaks(check_task(root)) == {"expected_output.json": "error", "sum.json": "error",
                                        "helper.awk": "error"}


def test_leaks_not_in_the_image_or_removed_are_not_errors(tmp_path: Path) -> None:
    answer = "42\n"
    never = write_tb2_task(tmp_path / "a", files={
        "environment/expected.txt": answer, "tests/expected.txt": answer})
    assert check_task(never).ok and _leaks(check_task(never)) == {}
    removed = write_tb2_task(tmp_path / "b", files={
        "environment/expected.txt": answer, "tests/expected.txt": answer,
        "environment/Dockerfile": "FROM python:3.13-slim\nWORKDIR /app\nCOPY . /app\n"
                                  "RUN python3 -c 'print(1)' && rm /app/expected.txt\n"})
    assert _leaks(check_task(removed)) == {"expected.txt": "warning"}


# --- bad input: each a clear error naming the file and the fix ---------------------------


def test_bad_input_names_the_file_and_the_fix(tmp_path: Path) -> None:
    # BenchFlow's harbor-parity example asks for a GPU in task.md's sandbox section
    gpu = write_benchflow_task(tmp_path / "gpu", toml=False)
    text = (gpu / "task.md").read_text().replace("gpus: 0", "gpus: 1")
    (gpu / "task.md").write_text(text)
    [error] = [f for f in check_task(gpu).errors if f.field == "sandbox.gpus"]
    assert error.path.endswith("task.md") and error.line is not None
    assert "without GPUs" in error.message and "gpus: 0" in error.message
    # a folder of none of the formats
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "README.md").write_text("not a task\n")
    [layout] = check_task(tmp_path / "notes").errors
    assert "task.md" in layout.message and "task.toml" in layout.message
    assert "arena task new" in layout.message
