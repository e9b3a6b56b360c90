"""The cache directory is one fact in one place: `paths.cache_home()`."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import posttrain_arena
from posttrain_arena.challenges.micro.demo import default_workdir
from posttrain_arena.paths import cache_home

SRC = Path(posttrain_arena.__file__).parent

# What a module that works the cache directory out for itself has to write: the
# variable's name, or the default's pieces (`Path.home() / ".cache"`, "~/.cache/...").
_TELLTALES = ("ARENA_CACHE_DIR", ".cache")


def _computes_cache_dir(tree: ast.AST) -> list[int]:
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                       ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)}
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docstrings
            and (node.value in _TELLTALES or node.value.startswith("~/.cache/"))]


def test_only_paths_computes_the_cache_directory() -> None:
    where = [f"{path.relative_to(SRC)}:{line}"
             for path in sorted(SRC.rglob("*.py")) if path.name != "paths.py"
             for line in _computes_cache_dir(ast.parse(path.read_text("utf-8")))]
    assert where == [], ("these compute the cache directory again; call "
                         f"posttrain_arena.paths.cache_home() instead: {where}")


def test_the_demo_builds_under_arena_cache_dir(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARENA_CACHE_DIR", str(tmp_path / "cache"))
    assert cache_home() == tmp_path / "cache"
    assert default_workdir() == tmp_path / "cache" / "micro"
