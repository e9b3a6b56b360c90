"""Property tests of the frontmatter parser: it only ever reports findings, and valid
frontmatter survives a round trip through YAML text."""

from __future__ import annotations

import contextlib
import string
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from posttrain_arena.task_format.domains import SLUGS
from posttrain_arena.task_format.findings import Finding, SpecError
from posttrain_arena.task_format.package import parse_frontmatter, parse_task_md, split_frontmatter
from posttrain_arena.task_format.task import TaskFrontmatter
from posttrain_arena.task_format.yamlsafe import YamlProblem, load_yaml

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])

yaml_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=20),
                         st.floats(allow_nan=False, allow_infinity=False))
yaml_values = st.recursive(
    yaml_scalars,
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids,
                                                              max_size=4),
    max_leaves=20,
)
yaml_fragments = st.lists(st.sampled_from(
    ["a:", " b:", "  - x", "&x", "*x", "[", "]", "{", "}", ":", "'", '"', "!!str", "!!python/",
     "<<:", "---", "...", "#", "\t", "\n", "1.0", "version:", "metadata:", " 2GB", "\x00"]),
    max_size=30).map("".join)


def _only_findings(text: str) -> None:
    model, _lines, findings = parse_frontmatter(text, "task.md")
    assert (model is None) == bool(findings)
    assert all(isinstance(f, Finding) for f in findings)
    for f in findings:
        f.render()


@SETTINGS
@given(st.text(max_size=400))
def test_any_text_gives_findings_not_exceptions(text: str) -> None:
    _only_findings(text)


@SETTINGS
@given(yaml_fragments)
def test_yaml_like_noise_gives_findings_not_exceptions(text: str) -> None:
    _only_findings(text)


@SETTINGS
@given(yaml_values)
def test_any_yaml_document_gives_findings_not_exceptions(value: object) -> None:
    _only_findings(yaml.safe_dump(value))
    _only_findings(yaml.safe_dump({"version": "1.0", "metadata": value, "agent": value}))


@SETTINGS
@given(st.binary(max_size=300))
def test_any_task_md_bytes_are_handled(tmp_path_factory, data: bytes) -> None:
    root = tmp_path_factory.mktemp("pkg")
    (root / "task.md").write_bytes(data)
    parsed = parse_task_md(root)
    assert parsed.frontmatter is None or not parsed.findings or parsed.body is not None
    with contextlib.suppress(SpecError):
        split_frontmatter(data.decode("utf-8", "replace"), "task.md")


words = st.text(alphabet=string.ascii_letters + string.digits + " -_.", min_size=1,
                max_size=20).filter(lambda s: s.strip() == s and s)
valid_frontmatter = st.fixed_dictionaries(
    {
        "version": st.sampled_from(["1.0", "1.1", "1.3", "1"]),
        "metadata": st.fixed_dictionaries(
            {
                "author_name": words,
                "author_email": st.from_regex(r"[a-z]{1,8}@[a-z]{1,8}\.[a-z]{2,3}",
                                              fullmatch=True),
                "category": st.sampled_from(list(SLUGS)),
                "difficulty": st.sampled_from(["easy", "medium", "hard"]),
                "tags": st.lists(words, max_size=4),
            },
            optional={
                "license": st.sampled_from(["MIT", "Apache-2.0"]),
                "subcategory": words,
                "task_type": st.lists(words, max_size=3),
                "category_confidence": st.floats(0, 1) | st.sampled_from(["high", "low"]),
                "modality": words | st.lists(words, max_size=3),
                "legacy_category": words,
            },
        ),
        "agent": st.fixed_dictionaries({"timeout_sec": st.integers(1, 3600)}),
        "verifier": st.fixed_dictionaries(
            {"timeout_sec": st.integers(1, 3600)},
            optional={"isolation": st.sampled_from(["fresh", "shared"])},
        ),
    },
    optional={
        "environment": st.fixed_dictionaries(
            {},
            optional={
                "cpus": st.integers(1, 8),
                "memory_mb": st.integers(64, 65536),
                "allow_internet": st.booleans(),
            },
        )
    },
)


@SETTINGS
@given(valid_frontmatter)
def test_valid_frontmatter_round_trips(data: dict) -> None:
    text = yaml.safe_dump(data, sort_keys=False)
    model, lines, findings = parse_frontmatter(text, "task.md")
    assert findings == [] and model is not None
    assert model == TaskFrontmatter.model_validate(data)
    # model -> YAML -> model is the identity, and every top-level key has its line.
    again, _, more = parse_frontmatter(yaml.safe_dump(model.model_dump(mode="json")), "t")
    assert more == [] and again == model
    for key in data:
        row = next(i for i, ln in enumerate(text.splitlines()) if ln.startswith(f"{key}:"))
        assert lines[key] == row + 2  # task.md lines: the frontmatter starts on line 2


@SETTINGS
@given(yaml_values)
def test_load_yaml_agrees_with_pyyaml_when_it_accepts(value: object) -> None:
    text = yaml.safe_dump(value)
    try:
        data, _ = load_yaml(text)
    except YamlProblem:
        return
    assert data == _stringify_keys(yaml.safe_load(text))


def _stringify_keys(value: object) -> object:
    if isinstance(value, dict):
        return {str(k): _stringify_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_stringify_keys(v) for v in value]
    return value


def test_template_frontmatter_is_in_the_property_space() -> None:
    text = (Path(__file__).resolve().parents[2] / "starting-kit/template/task.md").read_text()
    yaml_text, _, _ = split_frontmatter(text, "task.md")
    model, _, findings = parse_frontmatter(yaml_text, "task.md")
    assert findings == [] and model is not None

