"""`arena task new`: write a package that checks clean and that an empty trial fails.

The package is a small real task (sum the numbers in a file) so that every part of the
format is shown working: task.md, the image's Dockerfile and seed data, an oracle, and
a pytest verifier behind the `test.sh` entry point.
"""

from __future__ import annotations

import re
from pathlib import Path

from posttrain_arena.task_format.domains import Domain, parse_domain
from posttrain_arena.task_format.scaffold_files import FILES

_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


class ScaffoldError(ValueError):
    """The package cannot be written as asked; the message says what to change."""


def validate_task_name(name: str) -> str:
    """Return `name` if it is a safe task id, else raise ScaffoldError saying why."""
    if "/" in name or "\\" in name or ".." in name:
        raise ScaffoldError(f"task name {name!r} must be a plain folder name, without "
                            "'/', '\\' or '..'; use --dir to choose where it goes")
    if not _NAME.match(name):
        raise ScaffoldError(f"task name {name!r} must be 1-64 characters of a-z, 0-9, '.', "
                            "'_' or '-', starting with a letter or digit")
    return name


def render_files(name: str, category: Domain) -> dict[str, tuple[str, bool]]:
    """The package's files as {relative path: (text, executable)}."""
    return {
        rel: (text.replace("__TASK_NAME__", name).replace("__CATEGORY__", category.value), ex)
        for rel, (text, ex) in FILES.items()
    }


def new_task(name: str, category: Domain | str, parent: Path | str = ".") -> Path:
    """Write a new package `parent/name`; return its path.

    Raises ScaffoldError for an unsafe name, an unknown category, or an existing target.
    """
    validate_task_name(name)
    try:
        domain = parse_domain(str(category.value if isinstance(category, Domain) else category))
    except ValueError as exc:
        raise ScaffoldError(str(exc)) from None
    target = Path(parent) / name
    if target.exists() or target.is_symlink():
        raise ScaffoldError(f"{target} already exists; choose another name or remove it")
    for rel, (text, executable) in render_files(name, domain).items():
        path = target / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        if executable:
            path.chmod(0o755)
    return target
