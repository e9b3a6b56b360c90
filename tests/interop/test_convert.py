"""`arena task convert`: either layout from the other, behaviour kept both ways."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from tests.interop.corpus import BASE
from tests.interop.harbor_kit import write_harbor_task
from tests.interop.test_rubric import _graded
from typer.testing import CliRunner

from posttrain_arena.agents.empty import EmptyAgent
from posttrain_arena.agents.oracle import OracleAgent
from posttrain_arena.cli.main import app
from posttrain_arena.task_format.checks import check_task
from posttrain_arena.task_format.convert import behaviour, convert, dump_toml
from posttrain_arena.task_format.findings import SpecError
from posttrain_arena.task_format.layout import Layout
from posttrain_arena.task_format.package import TaskPackage, load_task
from posttrain_arena.trial.runner import TrialRunner


def _replays(task: TaskPackage, runner: TrialRunner) -> tuple[float | None, float | None]:
    oracle = runner.run(task, OracleAgent())
    empty = runner.run(task, EmptyAgent())
    assert oracle.reason is None and empty.reason is None, (oracle.reason, empty.reason)
    return oracle.reward, empty.reward


@pytest.mark.bwrap
def test_posttrain_to_harbor_and_back_keeps_behaviour(tmp_path: Path) -> None:
    source = load_task(BASE)
    harbor_dir, back_dir = tmp_path / "harbor", tmp_path / "back"
    convert(BASE, Layout.HARBOR, harbor_dir)
    convert(harbor_dir, Layout.POSTTRAIN, back_dir)
    harbor, back = load_task(harbor_dir), load_task(back_dir)
    assert harbor.layout is Layout.HARBOR and back.layout is Layout.POSTTRAIN
    assert check_task(harbor_dir).ok and check_task(back_dir).ok
    assert behaviour(harbor) == behaviour(source) == behaviour(back)
    with TrialRunner("local", warm_pool=False) as runner:
        for task in (source, harbor, back):
            oracle, empty = _replays(task, runner)
            assert oracle == 1.0 and empty is not None and empty < 1.0, task.root


@pytest.mark.bwrap
def test_harbor_to_posttrain_and_back_keeps_behaviour(tmp_path: Path) -> None:
    source_dir = write_harbor_task(tmp_path / "count-words")
    convert(source_dir, Layout.POSTTRAIN, tmp_path / "pt")
    convert(tmp_path / "pt", Layout.HARBOR, tmp_path / "again")
    pt, again = load_task(tmp_path / "pt"), load_task(tmp_path / "again")
    assert pt.verifier_mount == "/tests"  # its test.sh names /tests
    assert (tmp_path / "again" / "tests" / "test.sh").read_text() == \
        (source_dir / "tests" / "test.sh").read_text()
    with TrialRunner("local", warm_pool=False) as runner:
        for task in (load_task(source_dir), pt, again):
            oracle, empty = _replays(task, runner)
            assert oracle == 1.0 and empty is not None and empty < 1.0, task.root


@pytest.mark.bwrap
@pytest.mark.parametrize("kind", ["py", "pytest"])
def test_other_entry_points_get_a_test_sh_with_the_same_rule(tmp_path: Path, kind: str) -> None:
    from tests.trial.taskkit import make_task

    source = make_task(tmp_path / "src", verifier=kind)
    convert(source.root, Layout.HARBOR, tmp_path / "h")
    harbor = load_task(tmp_path / "h")
    assert harbor.verifier_kind.value == "test.sh"
    with TrialRunner("local", warm_pool=False) as runner:
        assert _replays(source, runner) == _replays(harbor, runner) == (1.0, 0.0)


def test_rubric_and_arena_limits_travel(tmp_path: Path) -> None:
    src = _graded(tmp_path / "g", "echo 42 > answer.txt")
    text = (src / "task.md").read_text().replace(
        "sandbox:\n  cpus: 1\n", "sandbox:\n  cpus: 1\n  pids_limit: 99\n")
    (src / "task.md").write_text(text)
    convert(src, Layout.HARBOR, tmp_path / "h")
    toml = tomllib.loads((tmp_path / "h" / "task.toml").read_text())
    assert toml["metadata"]["arena"]["pids_limit"] == 99
    harbor = load_task(tmp_path / "h")
    assert harbor.frontmatter.environment.pids_limit == 99
    assert harbor.rubric is not None and set(harbor.rubric.dimensions) == {"correctness", "style"}


def test_headings_in_an_instruction_stay_in_the_prompt(tmp_path: Path) -> None:
    src = write_harbor_task(tmp_path / "t", files={
        "instruction.md": "Count the words.\n\n## Requirements\n\n- write /app/count.txt\n"})
    convert(src, Layout.POSTTRAIN, tmp_path / "p")
    assert load_task(tmp_path / "p").prompt == load_task(src).prompt


def test_refusals(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="already is"):
        convert(BASE, Layout.POSTTRAIN, tmp_path / "x")
    (tmp_path / "exists").mkdir()
    with pytest.raises(SpecError, match="exists"):
        convert(BASE, Layout.HARBOR, tmp_path / "exists")
    with pytest.raises(SpecError, match="not a task package"):
        convert(tmp_path / "exists", Layout.HARBOR, tmp_path / "y")
    leaky = write_harbor_task(tmp_path / "leaky", files={
        "environment/count.sh": "wc -w < /app/words.txt\n",  # = solution/count.sh
        "environment/Dockerfile": "FROM posttrain-arena/python:bookworm\nWORKDIR /app\n"
                                  "COPY words.txt count.sh /app/\n"})
    with pytest.raises(SpecError, match=r"identical to solution/count\.sh"):
        convert(leaky, Layout.POSTTRAIN, tmp_path / "z")
    assert not (tmp_path / "z").exists()


def test_dump_toml_is_read_back_by_tomllib() -> None:
    data = {"a": 1, "t": {"s": 'quote " back \\ slash\nnew\x01', "l": [1, "x", True],
                          "f": 1.5, "n": {"deep": {"k": "v"}}, "odd key": 2}}
    assert tomllib.loads(dump_toml(data)) == data


def test_cli_convert(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "h"
    result = runner.invoke(app, ["task", "convert", str(BASE), str(out), "--to", "harbor",
                                 "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["layout"] == "harbor"
    again = runner.invoke(app, ["task", "convert", str(BASE), str(out), "--to", "harbor"])
    assert again.exit_code == 1 and "exists" in again.output
    bad = runner.invoke(app, ["task", "convert", str(BASE), str(tmp_path / "z"), "--to", "x"])
    assert bad.exit_code == 2


def test_verifier_env_and_a_prebuilt_image_survive_conversion(tmp_path: Path) -> None:
    src = write_harbor_task(tmp_path / "h")
    text = (src / "task.toml").read_text().replace(
        'network_mode = "no-network"', 'network_mode = "no-network"\ndocker_image = "x/y:1"')
    (src / "task.toml").write_text(text + '\n[verifier.env]\nWORD_COUNT = "5"\n')
    (src / "environment" / "Dockerfile").unlink()
    (src / "environment" / "words.txt").unlink()
    (src / "environment").rmdir()
    convert(src, Layout.POSTTRAIN, tmp_path / "p")
    back = load_task(tmp_path / "p")
    assert back.frontmatter.verifier.env == {"WORD_COUNT": "5"}
    assert back.prebuilt_image == "x/y:1"
    convert(tmp_path / "p", Layout.HARBOR, tmp_path / "again")
    assert load_task(tmp_path / "again").frontmatter.verifier.env == {"WORD_COUNT": "5"}
