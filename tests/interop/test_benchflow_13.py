"""BenchFlow's schema 1.3 task.md: sandbox:, schema_version, body as prompt, sidecars."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.task_format.conftest import write_package

from posttrain_arena.agents.base import AgentContext, AgentRun, Shell
from posttrain_arena.agents.transcript import Message, Transcript
from posttrain_arena.task_format.checks import check_task
from posttrain_arena.task_format.package import load_task
from posttrain_arena.trial.runner import TrialRunner

NEW = """\
---
schema_version: "1.3"
metadata:
  author_name: Jane Doe
  author_email: jane@example.com
  category: software-engineering
  difficulty: medium
agent:
  timeout_sec: 600
verifier:
  timeout_sec: 120
sandbox:
  cpus: 2
  memory_mb: 1024
  allow_internet: false
---

# Fix the parser

The script `/root/app/parse.py` crashes on empty lines. Fix it.

## Notes for the agent

Keep the output format.

## role: reviewer

Reviewers only.
"""


def test_schema_13_loads_as_the_same_model(tmp_path: Path) -> None:
    task = load_task(write_package(tmp_path / "new", {"task.md": NEW}))
    fm = task.frontmatter
    assert fm.version == "1.3" and fm.environment.cpus == 2 and fm.environment.memory_mb == 1024
    assert task.prompt.startswith("# Fix the parser")
    assert "Keep the output format." in task.prompt  # other sections are the body too
    assert "Reviewers only" not in task.prompt  # roles are not the prompt
    assert [r.name for r in task.body.roles] == ["reviewer"]
    old = load_task(write_package(tmp_path / "old", {"task.md": NEW.replace(
        "schema_version", "version").replace("sandbox:", "environment:")}))
    assert old.frontmatter == fm


def test_both_spellings_are_a_located_conflict(tmp_path: Path) -> None:
    both = NEW.replace("sandbox:\n", "environment:\n  cpus: 1\nsandbox:\n")
    report = check_task(write_package(tmp_path / "p", {"task.md": both}))
    [error] = report.errors
    assert error.code == "conflict" and error.field == "sandbox" and "Keep one" in error.message
    assert both.splitlines()[error.line - 1] == "sandbox:"  # type: ignore[operator]
    versions = NEW.replace('schema_version: "1.3"', 'schema_version: "1.3"\nversion: "1.3"')
    [error] = check_task(write_package(tmp_path / "q", {"task.md": versions})).errors
    assert error.field == "schema_version"


def test_errors_in_a_sandbox_section_name_it_so(tmp_path: Path) -> None:
    bad = NEW.replace("memory_mb: 1024", "memory_mb: lots")
    [error] = check_task(write_package(tmp_path / "p", {"task.md": bad})).errors
    assert error.field == "sandbox.memory_mb"
    assert bad.splitlines()[error.line - 1].strip().startswith("memory_mb")  # type: ignore[operator]


@pytest.mark.parametrize(("version", "ok"), [("1.0", True), ("1.3", True), ("1.3.1", True),
                                             ("1.4", False), ("2", False), ("one", False)])
def test_versions_up_to_13(tmp_path: Path, version: str, ok: bool) -> None:
    text = NEW.replace('"1.3"', f'"{version}"')
    assert check_task(write_package(tmp_path / "p", {"task.md": text})).ok is ok


SIDECARS = {
    "prompts/scene.1-setup.md": "First, read the parser.",
    "prompts/scene.2-fix.md": "Now fix it.",
    "prompts/role.reviewer.md": "A strict reviewer.",
    "prompts/user-persona.md": "A hurried maintainer.",
}


def test_prompt_sidecars_are_read(tmp_path: Path) -> None:
    report = check_task(write_package(tmp_path / "p", {"task.md": NEW, **SIDECARS,
                                                        "prompts/README.txt": "hi"}))
    assert report.ok and report.package is not None
    body = report.package.body
    assert [s.text for s in body.scenes] == ["First, read the parser.", "Now fix it."]
    assert [s.path for s in body.scenes] == ["prompts/scene.1-setup.md",
                                             "prompts/scene.2-fix.md"]
    # the body's own role section first, then the sidecar's
    assert [(r.name, r.text, r.path) for r in body.roles] == [
        ("reviewer", "Reviewers only.", None),
        ("reviewer", "A strict reviewer.", "prompts/role.reviewer.md")]
    assert body.persona == "A hurried maintainer."
    [warn] = [f for f in report.warnings if f.code == "sidecar"]
    assert warn.path.endswith("README.txt")


def test_sidecars_must_be_plain_utf8_files(tmp_path: Path) -> None:
    root = write_package(tmp_path / "p", {"task.md": NEW})
    (root / "prompts").mkdir()
    (root / "prompts" / "scene.a.md").write_bytes(b"\xff\xfe bad")
    (root / "prompts" / "scene.b.md").symlink_to("/etc/passwd")
    codes = {(f.code, Path(f.path).name) for f in check_task(root).errors}
    assert ("encoding", "scene.a.md") in codes and ("missing", "scene.b.md") in codes


class _Recorder:
    """Records what the agent is handed; writes nothing."""

    name = "recorder"

    def __init__(self) -> None:
        self.ctx: AgentContext | None = None

    def run(self, shell: Shell, ctx: AgentContext) -> AgentRun:
        self.ctx = ctx
        return AgentRun(transcript=Transcript(messages=[Message(role="user",
                                                                content=ctx.prompt)]))


@pytest.mark.bwrap
def test_the_agent_gets_the_body_and_the_sidecar_scenes(tmp_path: Path) -> None:
    task = load_task(write_package(tmp_path / "p", {"task.md": NEW, **SIDECARS,
        "environment/Dockerfile": "FROM posttrain-arena/python:bookworm\nWORKDIR /root\n"}))
    agent = _Recorder()
    with TrialRunner("local", warm_pool=False) as runner:
        result = runner.run(task, agent)
    assert agent.ctx is not None, result.reason
    assert agent.ctx.prompt == task.prompt and agent.ctx.prompt.startswith("# Fix the parser")
    assert agent.ctx.scenes == ["First, read the parser.", "Now fix it."]
