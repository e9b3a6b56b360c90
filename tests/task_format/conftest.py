"""Builders for task packages and collections written the way authors write them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

EXISTING_TASK_MD = """\
---
version: "1.0"
metadata:
  author_name: Jane Doe
  author_email: jane@example.com
  category: software-engineering
  subcategory: debugging
  category_confidence: 0.92
  difficulty: medium
  tags:
    - python
    - debugging
  task_type: [debugging]
  modality: [text]
  interface: [terminal]
  skill_type: [code-repair]
agent:
  timeout_sec: 600
verifier:
  timeout_sec: 120
environment:
  build_timeout_sec: 600
  cpus: 1
  memory_mb: 2048
  storage_mb: 10240
  allow_internet: false
---

# Fix the parser

## prompt

The script `/root/app/parse.py` crashes on empty lines. Fix it so that
`python3 /root/app/parse.py /root/data/input.txt` prints the record count.
"""

EXISTING_TEST_SH = """\
#!/bin/bash
VERIFIER_DIR="${BENCHFLOW_VERIFIER_DIR:-/verifier}"
if [ ! -d "$VERIFIER_DIR" ] && [ -d /tests ]; then VERIFIER_DIR=/tests; fi
REWARD_TEXT="${BENCHFLOW_REWARD_TEXT:-/logs/verifier/reward.txt}"
if [ "${BENCHFLOW_SKIP_VERIFIER_DEPS:-0}" != "1" ]; then
  apt-get update && apt-get install -y curl
  curl -LsSf https://astral.sh/uv/install.sh | sh
fi
pytest --ctrf /logs/verifier/ctrf.json "$VERIFIER_DIR/test_outputs.py" -rA -v
if [ $? -eq 0 ]; then echo 1.0 > "$REWARD_TEXT"; else echo 0.0 > "$REWARD_TEXT"; fi
exit 0
"""

EXISTING_VERIFIER_MD = """\
---
document_version: "1.0"
verifier:
  name: fix-the-parser
  default_strategy: pytest
  strategies:
    pytest: {type: script, command: ./test.sh}
  rubric:
    combine: weighted_sum
    dimensions:
      correctness: {weight: 1.0, source: pytest}
  outputs:
    reward_text: /logs/verifier/reward.txt
    reward_json: /logs/verifier/reward.json
    details_json: /logs/verifier/ctrf.json
---

## role:reviewer

Check that the fix handles empty lines without changing the count.
"""

EXISTING_FILES = {
    "task.md": EXISTING_TASK_MD,
    "environment/Dockerfile": (
        "# syntax=docker/dockerfile:1\n"
        "ARG BASE=ubuntu:24.04\n"
        "FROM ubuntu:24.04\n"
        "RUN apt-get update && apt-get install -y python3 && rm -rf /var/lib/apt/lists/*\n"
        "WORKDIR /root\n"
        "COPY app/ /root/app/\n"
        "COPY data /root/data\n"
    ),
    "environment/app/parse.py": "import sys\nprint(len(open(sys.argv[1]).read().split()))\n",
    "environment/data/input.txt": "a\nb\n\nc\n",
    "verifier/test.sh": EXISTING_TEST_SH,
    "verifier/test_outputs.py": (
        "import subprocess\n\n\ndef test_count():\n"
        "    out = subprocess.run(['python3', '/root/app/parse.py', '/root/data/input.txt'],\n"
        "                         capture_output=True, text=True)\n"
        "    assert out.stdout.strip() == '3'\n"
    ),
    "verifier/verifier.md": EXISTING_VERIFIER_MD,
    "verifier/rubrics/correctness.md": "# Correctness\n\nThe count is right.\n",
    "oracle/solve.sh": "#!/bin/bash\nsed -i 's/split()/split(\"\\\\n\")/' /root/app/parse.py\n",
}

SUBMISSION = "team_name: Team Rocket\ncontact_email: team@example.com\ntrack: environments\n"

PackageFactory = Callable[..., Path]


def write_package(root: Path, files: dict[str, str | bytes] | None = None,
                  drop: tuple[str, ...] = ()) -> Path:
    """Write an existing-format package at `root`; `files` overrides, `drop` removes."""
    content: dict[str, str | bytes] = {**EXISTING_FILES, **(files or {})}
    for rel, text in content.items():
        if rel in drop:
            continue
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, encoding="utf-8")
    return root


def write_collection(root: Path, n_tasks: int, submission: str | None = SUBMISSION) -> Path:
    """A collection of `n_tasks` distinct existing-format packages."""
    root.mkdir(parents=True, exist_ok=True)
    if submission is not None:
        (root / "submission.yaml").write_text(submission, encoding="utf-8")
    (root / "envs").mkdir(exist_ok=True)
    for i in range(n_tasks):
        write_package(root / "envs" / f"task-{i:03d}",
                      {"environment/data/input.txt": f"a\nb\n\nc\n{i}\n"})
    return root


@pytest.fixture
def make_package(tmp_path: Path) -> PackageFactory:
    """Factory: make_package(name="t", files={...}, drop=(...)) -> package dir."""

    def make(name: str = "pkg", files: dict[str, str | bytes] | None = None,
             drop: tuple[str, ...] = ()) -> Path:
        return write_package(tmp_path / name, files, drop)

    return make
