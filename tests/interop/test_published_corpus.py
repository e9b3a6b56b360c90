"""Published PostTrain packages check clean: descriptive metadata in any observed form
is at most a warning; what the harness acts on stays strict."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from tests.interop.corpus import DESCRIPTIVE_FORMS, base_frontmatter, variants, write

from posttrain_arena.task_format.checks import check_task
from posttrain_arena.task_format.collection import check_collection
from posttrain_arena.task_format.findings import Severity
from posttrain_arena.task_format.package import load_task

VARIANTS = variants()


@pytest.mark.parametrize(("name", "frontmatter"), VARIANTS, ids=[n for n, _ in VARIANTS])
def test_every_observed_form_checks_clean(tmp_path: Path, name: str,
                                          frontmatter: dict[str, object]) -> None:
    report = check_task(write(tmp_path / name, frontmatter))
    assert report.errors == [], [f.render() for f in report.errors]
    assert report.package is not None
    assert report.package.domain.value == "finance-economics"
    # load_task (what evaluation uses) agrees with the check.
    assert load_task(report.path).checksum == report.checksum


def test_all_odd_forms_at_once_in_a_collection(tmp_path: Path) -> None:
    root = tmp_path / "coll"
    (root / "envs").mkdir(parents=True)
    (root / "submission.yaml").write_text(
        "team_name: t\ncontact_email: t@example.com\ntrack: environments\n")
    for i in range(3):
        fm = base_frontmatter()
        meta = dict(fm["metadata"])  # type: ignore[arg-type]
        for field, forms in DESCRIPTIVE_FORMS.items():
            meta[field] = forms[(i + 2) % len(forms)]
        fm["metadata"] = meta
        write(root / "envs" / f"t{i}", fm)
        with (root / "envs" / f"t{i}" / "task.md").open("a") as fh:
            fh.write(f"\n<!-- {i} -->\n")
    report = check_collection(root)
    assert report.ok, [f.render() for f in report.errors]
    assert report.collection is not None and len(report.collection.tasks) == 3


def test_descriptive_forms_are_normalised_not_lost(tmp_path: Path) -> None:
    fm = base_frontmatter()
    fm["metadata"] = {**fm["metadata"], "task_type": "calculation, reporting",  # type: ignore[dict-item]
                      "category_confidence": "high", "tags": [2024, "csv"],
                      "legacy_category": "Software Engineering", "difficulty": "expert"}
    report = check_task(write(tmp_path / "p", fm))
    assert report.package is not None
    meta = report.package.frontmatter.metadata
    assert meta.task_type == ["calculation", "reporting"]
    assert meta.category_confidence == "high"
    assert meta.tags == ["2024", "csv"]
    assert meta.legacy_category == "Software Engineering"
    # an unusual value of a descriptive field is a warning that names the field and line
    [warn] = [f for f in report.warnings if f.field == "metadata.difficulty"]
    text = (tmp_path / "p" / "task.md").read_text().splitlines()
    assert text[warn.line - 1].strip().startswith("difficulty:")


def _with(tmp_path: Path, name: str, edit: dict[str, object]) -> list[str]:
    fm = base_frontmatter()
    for dotted, value in edit.items():
        top, _, key = dotted.partition(".")
        if key:
            fm[top] = {**fm[top], key: value}  # type: ignore[dict-item]
        else:
            fm[top] = value
    report = check_task(write(tmp_path / name, fm))
    return [f"{f.field}|{f.message}|{f.line}" for f in report.errors]


@pytest.mark.parametrize(("edit", "field"), [
    ({"agent.timeout_sec": "ten minutes"}, "agent.timeout_sec"),
    ({"verifier.timeout_sec": -1}, "verifier.timeout_sec"),
    ({"verifier.isolation": "none"}, "verifier.isolation"),
    ({"environment.memory_mb": "2GB"}, "environment.memory_mb"),
    ({"environment.allow_internet": "sometimes"}, "environment.allow_internet"),
    ({"environment.gpus": 1}, "environment.gpus"),
    ({"version": "2.0"}, "version"),
    ({"version": "latest"}, "version"),
])
def test_what_the_harness_acts_on_stays_strict(tmp_path: Path, edit: dict[str, object],
                                               field: str) -> None:
    errors = _with(tmp_path, "p", edit)
    assert any(e.startswith(field + "|") for e in errors), errors
    # located: every error carries the task.md line of its key
    assert all(not e.endswith("|None") for e in errors), errors


def test_category_spelled_as_a_title_is_the_domain(tmp_path: Path) -> None:
    assert _with(tmp_path, "p", {"metadata.category": "Finance Economics"}) == []


def test_yaml_round_trip_of_the_base_is_the_fixture() -> None:
    # the corpus rewrites task.md through PyYAML: the base must survive unchanged
    text = (Path(__file__).resolve().parents[1] / "fixtures" / "posttrain_format"
            / "sales-region-totals" / "task.md").read_text()
    assert yaml.safe_load(text.split("---\n")[1]) == base_frontmatter()


def test_warnings_never_block(tmp_path: Path) -> None:
    fm = base_frontmatter()
    fm["metadata"] = {**fm["metadata"], "author_email": None, "whatever": {"x": 1}}  # type: ignore[dict-item]
    report = check_task(write(tmp_path / "p", fm))
    assert report.ok
    assert {f.severity for f in report.findings} == {Severity.WARNING}
