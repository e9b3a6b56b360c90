"""Which published format a task directory is written in, and where its parts are.

PostTrain (task.md, verifier/, oracle/), Harbor / Terminal-Bench (task.toml,
instruction.md, tests/, solution/) and BenchFlow's own tasks (task.md read first, a
task.toml beside it unread, tests/, solution/). `detect_layout` decides, before any
file is parsed.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

from posttrain_arena.task_format.files import err as _err
from posttrain_arena.task_format.findings import Finding, Severity, SpecError
from posttrain_arena.task_format.harbor import TASK_TOML, is_harbor

TASK_MD = "task.md"


class Layout(StrEnum):
    """Which published format the package directory is written in."""

    POSTTRAIN = "posttrain"
    """task.md, environment/, verifier/, oracle/"""
    HARBOR = "harbor"
    """task.toml, instruction.md, environment/, tests/, solution/ (Harbor, Terminal-Bench)"""
    BENCHFLOW = "benchflow"
    """task.md (read first; a task.toml beside it is not read), environment/, tests/,
    solution/ (BenchFlow's own tasks)"""


#: Per layout: (verifier folder, oracle folder).
LAYOUT_DIRS: dict[Layout, tuple[str, str]] = {
    Layout.POSTTRAIN: ("verifier", "oracle"),
    Layout.HARBOR: ("tests", "solution"),
    Layout.BENCHFLOW: ("tests", "solution"),
}
#: Where a BenchFlow task's tests/ appear to its test.sh (as Harbor's: /tests).
BENCHFLOW_TESTS_MOUNT = "/tests"


def detect_layout(root: Path) -> Layout:
    """The format `root` is written in; SpecError when it is none of them, or two that
    conflict.

    task.md is read first, as BenchFlow does: with verifier/ or oracle/ it is a
    PostTrain package, with tests/ or solution/ (and neither of those) a BenchFlow task,
    and a task.toml beside it is not read (`task_toml_note`). task.toml alone is a
    Harbor task. verifier/ and tests/ both beside task.md really conflict: which one
    scores the task cannot be told.
    """
    posttrain = (root / TASK_MD).exists() or (root / TASK_MD).is_symlink()
    if posttrain:
        ours = [d for d in ("verifier", "oracle") if (root / d).is_dir()]
        theirs = [d for d in ("tests", "solution") if (root / d).is_dir()]
        if "verifier" in ours and "tests" in theirs:
            raise SpecError([_err("layout", str(root), "both verifier/ (the PostTrain "
                                  "layout) and tests/ (the BenchFlow layout) beside task.md: "
                                  "which one scores the task cannot be told. Keep one (move "
                                  "tests/ into verifier/, or remove verifier/)")])
        return Layout.BENCHFLOW if theirs and not ours else Layout.POSTTRAIN
    if is_harbor(root):
        return Layout.HARBOR
    hint = (" It has envs/: check it as a collection (`arena collection check`)."
            if (root / "envs").is_dir() else "")
    raise SpecError([_err("layout", str(root), f"not a task package: no {TASK_MD} (the "
                          f"PostTrain / BenchFlow layout) and no {TASK_TOML} (the Harbor "
                          "layout). Point at the folder that holds one, or start one with "
                          f"`arena task new`.{hint}")])


def task_toml_note(root: Path) -> Finding | None:
    """The warning for a task.toml that task.md makes unread (BenchFlow writes both)."""
    if not is_harbor(root):
        return None
    return Finding(severity=Severity.WARNING, code="layout", path=str(root / TASK_TOML),
                   message="task.md is read and this task.toml is not (BenchFlow reads "
                   "task.md first); keep the limits you mean in task.md")
