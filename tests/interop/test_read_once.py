"""`check_task` reads each file of a package once (audited opens, not a mock)."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest
from tests.interop.corpus import base_frontmatter, write
from tests.interop.harbor_kit import write_harbor_task

from posttrain_arena.task_format.checks import check_task

_OPENS: Counter[str] = Counter()
_WATCH: list[str] = []


def _audit(event: str, args: tuple[object, ...]) -> None:
    if event == "open" and _WATCH and isinstance(args[0], str) \
            and args[0].startswith(_WATCH[0]):
        _OPENS[args[0]] += 1


sys.addaudithook(_audit)


@pytest.mark.parametrize("layout", ["posttrain", "harbor"])
def test_every_file_is_opened_at_most_once(tmp_path: Path, layout: str) -> None:
    if layout == "posttrain":
        root = write(tmp_path / "pkg", base_frontmatter())
        for name in ("scene.a.md", "role.r.md", "user-persona.md"):
            (root / "prompts").mkdir(exist_ok=True)
            (root / "prompts" / name).write_text("text\n")
    else:
        root = write_harbor_task(tmp_path / "pkg")
    check_task(root)  # warm: imports done
    _OPENS.clear()
    _WATCH.append(str(root) + "/")
    try:
        report = check_task(root)
    finally:
        _WATCH.clear()
    assert report.ok
    files = {str(p) for p in root.rglob("*") if p.is_file()}
    assert set(_OPENS) == files  # every file is read (hashed) ...
    assert max(_OPENS.values()) == 1, {k: v for k, v in _OPENS.items() if v > 1}  # ... once
