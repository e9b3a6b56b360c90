"""A corpus of packages in the published PostTrain layout, in the forms real ones use.

Each descriptive metadata field appears in every form seen in published packages (and
a few more a porter plausibly writes): a word where a number was expected, one string
where a list was, a comma-separated string, numbers among tags, mappings, nulls, keys
from other benchmarks, keys nobody knows. Every package is otherwise the fixture
`sales-region-totals` (task.md, environment/, verifier/test.sh + test_outputs.py +
verifier.md + rubrics/, verifier/data/ seed copies, oracle/solve.sh).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
BASE = REPO / "tests" / "fixtures" / "posttrain_format" / "sales-region-totals"

#: field -> the forms it takes in published packages (and plausible ports of them).
DESCRIPTIVE_FORMS: dict[str, list[object]] = {
    "subcategory": ["reporting", "Data Cleaning", 3, ["reporting", "csv"], None,
                    {"primary": "reporting"}],
    "category_confidence": [0.92, 1, "high", "medium", "0.8", None, 1.5],
    "task_type": [["calculation"], "calculation", "calculation, reporting", [1, "x"], None,
                  [{"kind": "calc"}]],
    "modality": [["tabular"], "tabular", "text,tabular", None, []],
    "interface": [["terminal"], "terminal", "terminal, files", None],
    "skill_type": [["data-analysis"], "data-analysis", None, ["a", 2.5, True]],
    "legacy_category": ["Software Engineering", "data-science", 7, None],
    "secondary_category": ["cybersecurity", ["office-white-collar", "media"], None],
    "difficulty": ["easy", "Medium", "HARD", "expert", 3, None],
    "tags": [["csv", "sales"], "csv", "csv, sales", [2024, "csv"], None, []],
    "license": ["MIT", None, 2.0],
    "origin": ["original", "adapted-from: https://example.com/x", "terminal-bench",
               {"adapted-from": "https://example.com/y"}, None,
               {"kind": "adapted-from", "source": "https://example.com/z"}],
    "author_name": ["Dana Whitfield", None, 42],
    "author_email": ["dana@example.com", "Dana <dana at example>", None],
    "source_benchmark": ["terminal-bench", {"name": "tb", "version": 2}],
    "notes": [["free", "text"], "anything"],
}

#: Keys outside metadata that published packages carry.
OTHER_FORMS: list[tuple[str, object]] = [
    ("version", 1.0),
    ("version", "1.3"),
    ("schema_version", "1.3"),
    ("environment.gpus", 0),
    ("environment.allow_internet", True),
    ("environment.network_mode", "no-network"),
    ("evidence", {"oracle_runs": 3, "required_reward": 1.0, "noop_ceiling": 0.0}),
]


def base_frontmatter() -> dict[str, object]:
    text = (BASE / "task.md").read_text(encoding="utf-8")
    return yaml.safe_load(text.split("---\n")[1])


def body() -> str:
    text = (BASE / "task.md").read_text(encoding="utf-8")
    return text.split("---\n", 2)[2]


def write(dest: Path, frontmatter: dict[str, object]) -> Path:
    """The base package at `dest` with this frontmatter."""
    shutil.copytree(BASE, dest)
    data = dest / "verifier" / "data"
    data.mkdir()
    shutil.copy(BASE / "environment" / "sales.csv", data / "sales.csv")  # pristine seed copy
    text = "---\n" + yaml.safe_dump(frontmatter, sort_keys=False) + "---\n" + body()
    (dest / "task.md").write_text(text, encoding="utf-8")
    return dest


def variants() -> list[tuple[str, dict[str, object]]]:
    """(name, frontmatter): one package per descriptive form, and one per other key."""
    out: list[tuple[str, dict[str, object]]] = []
    for field, forms in DESCRIPTIVE_FORMS.items():
        for i, form in enumerate(forms):
            fm = base_frontmatter()
            meta = dict(fm["metadata"])  # type: ignore[arg-type]
            meta[field] = form
            fm["metadata"] = meta
            out.append((f"{field}-{i}", fm))
    for i, (dotted, value) in enumerate(OTHER_FORMS):
        fm = base_frontmatter()
        if dotted == "schema_version":
            fm.pop("version")
        top, _, key = dotted.partition(".")
        if key:
            fm[top] = {**fm[top], key: value}  # type: ignore[dict-item]
        else:
            fm[top] = value
        out.append((f"other-{i}", fm))
    return out


def write_corpus(root: Path) -> list[Path]:
    """Every variant as a package under `root`."""
    return [write(root / name, fm) for name, fm in variants()]
