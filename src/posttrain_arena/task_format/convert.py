"""`arena task convert`: write a task package in the other layout, keeping its behaviour.

    PostTrain (task.md)                 Harbor (task.toml)
    task.md frontmatter           <->   task.toml tables
    task.md prompt                <->   instruction.md
    environment/                  <->   environment/            (copied as is)
    verifier/ (mounted /verifier) <->   tests/ (mounted /tests)  (copied as is)
    oracle/                       <->   solution/               (copied as is)

Behaviour is what a trial here sees: the same image, prompt, limits, verifier and
reference solution. Only a package that checks clean (`arena task check`) is
converted. The verifier folder keeps its mount point: a Harbor task becomes
a package with `verifier.mount: /tests`, so its test files that name /tests still find
themselves. A PostTrain verifier whose entry point is verifier.py or test_outputs.py
alone gets a `tests/test.sh` that runs it with the same rule (test_outputs.py: exit 0
is 1.0, exit 1 is 0.0, anything else no reward). Limits only this arena has
(pids_limit, state_paths) travel in task.toml's free-form `[metadata.arena]` table.
What the target cannot hold (scenes, roles, personas in Harbor) is reported, never
silently dropped. The source is loaded (and so checked) first; nothing is run.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field

from posttrain_arena.task_format.checks import check_task
from posttrain_arena.task_format.files import err
from posttrain_arena.task_format.findings import SpecError
from posttrain_arena.task_format.harbor import HARBOR_TESTS_MOUNT, INSTRUCTION_MD, TASK_TOML
from posttrain_arena.task_format.layout import TASK_MD, Layout
from posttrain_arena.task_format.package import TaskPackage, VerifierKind, load_task

TEST_SH_FOR = {
    VerifierKind.VERIFIER_PY: """\
#!/bin/bash
# Written by `arena task convert`: runs the package's verifier.py, which writes the reward.
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p /logs/verifier
exec python3 -I -B "$here/verifier.py"
""",
    VerifierKind.PYTEST: """\
#!/bin/bash
# Written by `arena task convert`: pytest exit 0 is reward 1, exit 1 is 0, else none.
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p /logs/verifier
"${BENCHFLOW_PYTEST_BIN:-pytest}" "$here/test_outputs.py" -rA
rc=$?
case $rc in
  0) echo 1.0 > /logs/verifier/reward.txt ;;
  1) echo 0.0 > /logs/verifier/reward.txt ;;
  *) exit $rc ;;
esac
""",
}


class Conversion(BaseModel):
    """What `convert` wrote, and what the target layout could not hold."""

    source: str
    target: str
    layout: Layout = Field(description="The layout written")
    notes: list[str] = Field(default_factory=list, description="What was not carried over")


def convert(source: Path, to: Layout, out: Path) -> Conversion:
    """Write the package at `source` to `out` in layout `to` (SpecError when the source
    does not check clean, `out` exists, or the package already is in that layout)."""
    report = check_task(source)
    if report.package is None:
        raise SpecError(report.errors)
    task = report.package
    if task.layout is to:
        raise SpecError([err("convert", str(source), f"the package already is in the {to} "
                             "layout; nothing to convert")])
    if task.steps:
        raise SpecError([err("convert", str(source), "multi-step tasks are not converted yet "
                             "(their steps/ folders are named differently in each layout); "
                             "both layouts run them as they are")])
    if out.exists() or out.is_symlink():
        raise SpecError([err("convert", str(out), "the output folder exists; give a new path")])
    out.mkdir(parents=True)
    if task.environment_dir.is_dir():  # a task with only a prebuilt image may have none
        shutil.copytree(task.environment_dir, out / "environment", symlinks=True)
    done = _to_harbor(task, out) if to is Layout.HARBOR else _to_posttrain(task, out)
    written = load_task(out)
    if behaviour(written) != behaviour(task):
        raise SpecError([err("convert", str(out), "the converted package would not behave "
                             f"as the source: {behaviour(written)} != {behaviour(task)}; "
                             "please report this")])
    return done


def behaviour(task: TaskPackage) -> dict[str, Any]:
    """What a trial of the package depends on, besides the copied folders."""
    fm = task.frontmatter
    env = fm.environment.model_dump(include={"build_timeout_sec", "cpus", "memory_mb",
                                             "storage_mb", "allow_internet", "pids_limit",
                                             "workdir"})
    return {"prompt": task.prompt, "domain": task.domain.value,
            "agent_timeout_sec": fm.agent.timeout_sec,
            "verifier_timeout_sec": fm.verifier.timeout_sec,
            "verifier_env": dict(fm.verifier.env), "prebuilt_image": task.prebuilt_image,
            "state_paths": list(fm.verifier.state_paths), "environment": env,
            "rubric": task.rubric.model_dump() if task.rubric else None,
            "steps": [st.model_dump(exclude={"verifier_dir", "oracle_dir"}) for st in task.steps],
            "step_strategy": task.step_strategy}


def _to_harbor(task: TaskPackage, out: Path) -> Conversion:
    fm = task.frontmatter
    notes: list[str] = []
    shutil.copytree(task.verifier_dir, out / "tests", symlinks=True)
    if task.verifier_kind in TEST_SH_FOR:
        if (out / "tests" / "test.sh").exists():
            notes.append("verifier/test.sh was replaced by a test.sh that runs "
                         f"{task.verifier_kind.value} (the entry point trials here use)")
        (out / "tests" / "test.sh").write_text(TEST_SH_FOR[task.verifier_kind])
    shutil.copytree(task.oracle_dir, out / "solution", symlinks=True)
    if fm.verifier.mount not in ("/verifier", HARBOR_TESTS_MOUNT):
        notes.append(f"verifier.mount {fm.verifier.mount} becomes /tests (Harbor's)")
    if fm.verifier.isolation.value != "fresh":
        notes.append("verifier.isolation: shared is not kept (Harbor tasks verify fresh here)")
    body = task.body
    dropped = [s for s in body.sections if s.kind in ("scene", "role", "persona")]
    if [s for s in dropped if s.kind == "scene"][1:] or any(s.kind != "scene" for s in dropped):
        notes.append("scenes after the first, roles and the user persona are not carried "
                     "(a Harbor task has one instruction)")
    (out / INSTRUCTION_MD).write_text(task.prompt.rstrip() + "\n", encoding="utf-8")
    meta = {k: v for k, v in fm.metadata.model_dump(mode="json").items()
            if v not in (None, [], {})}
    meta["category"] = fm.metadata.category.value
    arena: dict[str, Any] = {"pids_limit": fm.environment.pids_limit}
    if fm.verifier.state_paths:
        arena["state_paths"] = list(fm.verifier.state_paths)
    env = fm.environment
    tables: dict[str, Any] = {
        "schema_version": "1.1",
        "task": {"name": f"posttrain/{task.name}"},
        "metadata": {**meta, "arena": arena},
        "agent": {"timeout_sec": fm.agent.timeout_sec},
        "verifier": {"timeout_sec": fm.verifier.timeout_sec,
                     **({"env": dict(fm.verifier.env)} if fm.verifier.env else {})},
        "environment": {"build_timeout_sec": env.build_timeout_sec, "cpus": env.cpus,
                        "memory_mb": env.memory_mb, "storage_mb": env.storage_mb,
                        "network_mode": "public" if env.allow_internet else "no-network",
                        "workdir": env.workdir,
                        **({"docker_image": task.prebuilt_image} if task.prebuilt_image
                           else {})},
    }
    (out / TASK_TOML).write_text(dump_toml(tables), encoding="utf-8")
    return Conversion(source=str(task.root), target=str(out), layout=Layout.HARBOR, notes=notes)


def _to_posttrain(task: TaskPackage, out: Path) -> Conversion:
    shutil.copytree(task.verifier_dir, out / "verifier", symlinks=True)
    shutil.copytree(task.oracle_dir, out / "oracle", symlinks=True)
    data = task.frontmatter.model_dump(mode="json", exclude_defaults=False)
    data["version"] = "1.3"  # the body is the prompt, whatever headings instruction.md has
    data["metadata"] = {k: v for k, v in data["metadata"].items() if v not in (None, [], {})}
    origin = data["metadata"].get("origin")
    if origin == {"kind": "original", "source": None}:
        data["metadata"].pop("origin")
    text = ("---\n" + yaml.safe_dump(data, sort_keys=False, allow_unicode=True) + "---\n\n"
            + task.prompt.rstrip() + "\n")
    (out / TASK_MD).write_text(text, encoding="utf-8")
    return Conversion(source=str(task.root), target=str(out), layout=Layout.POSTTRAIN)


def dump_toml(tables: dict[str, Any]) -> str:
    """TOML for the plain data task.toml holds: scalars, lists of scalars, nested tables."""
    lines: list[str] = []
    scalars = {k: v for k, v in tables.items() if not isinstance(v, dict)}
    for key, value in scalars.items():
        lines.append(f"{key} = {_toml_value(value)}")
    _tables(lines, "", {k: v for k, v in tables.items() if isinstance(v, dict)})
    return "\n".join(lines).lstrip("\n") + "\n"


def _tables(lines: list[str], prefix: str, tables: dict[str, Any]) -> None:
    for name, table in tables.items():
        full = f"{prefix}{_toml_key(name)}"
        lines.extend(["", f"[{full}]"])
        nested = {k: v for k, v in table.items() if isinstance(v, dict)}
        for key, value in table.items():
            if not isinstance(value, dict):
                lines.append(f"{_toml_key(key)} = {_toml_value(value)}")
        _tables(lines, f"{full}.", nested)


def _toml_key(key: str) -> str:
    return key if key.replace("_", "").replace("-", "").isalnum() else _toml_value(key)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items()) \
            + "}"
    text = str(value)
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") \
        .replace("\t", "\\t").replace("\r", "\\r")
    escaped = "".join(c if ord(c) >= 32 or c in "\\" else f"\\u{ord(c):04x}" for c in escaped)
    return f'"{escaped}"'
