"""docs/architecture.md is the map, and the tree keeps to it.

The doc's package table says which packages exist, their layer and what each may import;
this reads every import in src/ (module-level, function-local, under TYPE_CHECKING, and
`importlib` calls naming a module) and holds them to it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import posttrain_arena

SRC = Path(posttrain_arena.__file__).parent
DOC = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"
ROOT = "posttrain_arena"


@dataclass(frozen=True)
class Row:
    layer: int
    may_import: frozenset[str]


def _table(text: str, header: str) -> list[list[str]]:
    """The cells of the rows of the Markdown table whose header line starts `header`."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(header)), None)
    assert start is not None, f"{DOC}: no table starting {header!r}"
    rows = []
    for line in lines[start + 2:]:  # skip the header and its |---| line
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def _names(cell: str) -> frozenset[str]:
    return frozenset(re.findall(r"`([^`]+)`", cell))


def _packages(text: str) -> dict[str, Row]:
    rows = {}
    for cells in _table(text, "| package | layer |"):
        (name,) = _names(cells[0])
        rows[name] = Row(int(cells[1]), _names(cells[3]))
    return rows


def _libraries(text: str) -> dict[str, frozenset[str]]:
    return {next(iter(_names(cells[0]))): _names(cells[1])
            for cells in _table(text, "| library | imported only in |")}


def _unit(parts: list[str]) -> str:
    """The table row a module of posttrain_arena belongs to: `pkg/` or `module.py`."""
    if not parts:
        return "__init__.py"
    if (SRC / parts[0]).is_dir():
        return f"{parts[0]}/"
    return f"{parts[0]}.py"


def _module_of(path: Path) -> list[str]:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def _is_module(parts: list[str]) -> bool:
    base = SRC.joinpath(*parts)
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _imports(path: Path) -> Iterator[tuple[int, str]]:
    """(line, dotted module) for every import the file can make, wherever it is written."""
    here = _module_of(path)
    package = here if path.name == "__init__.py" else here[:-1]
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = [ROOT, *package[:len(package) - (node.level - 1)]]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            yield node.lineno, module
            for alias in node.names:  # `from pkg import submodule` imports the submodule
                inner = [*module.split(".")[1:], alias.name]
                if module.split(".")[0] == ROOT and _is_module(inner):
                    yield node.lineno, f"{module}.{alias.name}"
        elif (isinstance(node, ast.Call) and node.args
              and getattr(node.func, "attr", getattr(node.func, "id", None))
              in {"import_module", "find_spec", "__import__"}):
            arg = node.args[0]
            if isinstance(arg, ast.JoinedStr) and arg.values:
                arg = arg.values[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                yield node.lineno, arg.value.rstrip(".")


def _sources() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


@pytest.fixture(scope="module")
def doc() -> str:
    return DOC.read_text("utf-8")


def test_the_readme_links_the_map() -> None:
    readme = (DOC.parents[1] / "README.md").read_text("utf-8")
    assert "(docs/architecture.md)" in readme


def test_every_package_is_on_the_map_and_every_name_on_it_exists(doc: str) -> None:
    rows = _packages(doc)
    on_disk = {_unit(_module_of(path)) for path in _sources()}
    assert sorted(on_disk - set(rows)) == [], "packages missing from docs/architecture.md"
    assert sorted(set(rows) - on_disk) == [], "docs/architecture.md names what is not there"
    for name, row in rows.items():
        assert row.may_import <= set(rows), f"{name} may import unknown {row.may_import}"


def test_every_path_the_map_names_exists(doc: str) -> None:
    """A map that sends a newcomer to a file that moved is worse than none: every
    `dir/file` it names is in src/posttrain_arena or, failing that, in the repository."""
    repo = DOC.parents[1]
    named = {name for name in re.findall(r"`([\w./-]+)`", doc)
             if "/" in name and not name.startswith("/")}
    gone = sorted(name for name in named
                  if not (SRC / name).exists() and not (repo / name).exists())
    assert gone == [], "docs/architecture.md names paths that are not there"


def test_the_stated_layering_is_a_layering(doc: str) -> None:
    rows = _packages(doc)
    upward = [f"{name} (layer {row.layer}) may import {other} (layer {rows[other].layer})"
              for name, row in rows.items() for other in row.may_import
              if rows[other].layer >= row.layer]
    assert upward == []


def _against(rows: dict[str, Row]) -> list[str]:
    """Every import of a posttrain_arena module that its file's row does not allow."""
    against = []
    for path in _sources():
        unit = _unit(_module_of(path))
        for line, module in _imports(path):
            parts = module.split(".")
            if parts[0] != ROOT:
                continue
            target = _unit(parts[1:])
            if target != unit and target not in rows[unit].may_import:
                against.append(f"{path.relative_to(SRC)}:{line}: {unit} imports {module}")
    return against


def test_no_import_runs_against_the_layering(doc: str) -> None:
    assert _against(_packages(doc)) == [], (
        "imports that docs/architecture.md does not allow; move the code down a layer, or "
        "change the map if the layering should change")


def test_the_check_sees_local_and_dynamic_imports(doc: str) -> None:
    """The check can fail: with `sandbox/` taken out of trial/'s row, trial's imports of
    it are reported; imports written inside functions are read, and a module named to
    importlib counts as an import of it."""
    rows = _packages(doc)
    trial = rows["trial/"]
    narrowed = {**rows, "trial/": Row(trial.layer, trial.may_import - {"sandbox/"})}
    assert any(line.startswith("trial/") and "posttrain_arena.sandbox" in line
               for line in _against(narrowed))
    local = [m for _l, m in _imports(SRC / "sandbox" / "registry.py")]
    assert "posttrain_arena.sandbox.docker" in local  # written inside a function
    dynamic = [m for _l, m in _imports(SRC / "service" / "stage_plan.py")]
    assert "posttrain_arena.train.pipeline" in dynamic  # importlib.util.find_spec("...")


def test_kept_libraries_are_imported_only_where_the_map_says(doc: str) -> None:
    allowed = _libraries(doc)
    stray = [f"{path.relative_to(SRC)}:{line}: {module}"
             for path in _sources()
             for line, module in _imports(path)
             if module.split(".")[0] in allowed
             and _unit(_module_of(path)) not in allowed[module.split(".")[0]]]
    assert stray == []


def _module_circles() -> list[frozenset[str]]:
    """Strongly connected sets of modules (more than one), importing each other.
    Importing a submodule runs its package's __init__, so that edge is not a circle."""
    modules = {".".join(_module_of(path)): path for path in _sources()}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for _line, module in _imports(path):
            inner = module.removeprefix(f"{ROOT}.")
            if inner in modules and inner != name and not name.startswith(f"{inner}."):
                graph[name].add(inner)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(v: str) -> None:  # Tarjan
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            members = set()
            while True:
                w = stack.pop()
                members.add(w)
                if w == v:
                    break
            if len(members) > 1:
                circles.append(frozenset(members))

    for v in graph:
        if v not in index:
            visit(v)
    return circles


def test_no_module_circles() -> None:
    assert [sorted(c) for c in _module_circles()] == [], (
        "modules that import each other (function-local imports included)")
