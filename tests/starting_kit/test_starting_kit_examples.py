"""The starting kit's worked examples and the existing-format fixture: load, check, replay.

Fast and sandbox-free: the replay here runs each oracle on the host against a
workspace seeded from the Dockerfile's COPY lines. Sandboxed replays are the trial
area's tests.
"""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import pytest

from posttrain_arena.task_format.checks import check_task
from posttrain_arena.task_format.domains import KNOWN_DOMAINS
from posttrain_arena.task_format.package import TaskPackage, load_task

from . import replay
from .wrong_answers import WRONG_ANSWERS

REPO = Path(__file__).resolve().parents[2]
EXAMPLES_DIR = REPO / "starting-kit" / "examples"
FIXTURES_DIR = REPO / "tests" / "fixtures" / "posttrain_format"
EXAMPLES = sorted(p for p in EXAMPLES_DIR.iterdir() if (p / "task.md").is_file())
FIXTURES = sorted(p for p in FIXTURES_DIR.iterdir() if (p / "task.md").is_file())
PACKAGES = EXAMPLES + FIXTURES
MAX_PACKAGE_BYTES = 50 * 1024

package_param = pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
_SOLVED: dict[str, Path] = {}


def _solved_copy(package: Path, factory: pytest.TempPathFactory, dest: Path) -> Path:
    """A copy of the workspace after the oracle ran (the oracle runs once per package)."""
    if package.name not in _SOLVED:
        workspace = factory.mktemp(f"solved-{package.name}") / "root"
        env = replay.seed_workspace(package, workspace)
        solved = replay.run_oracle(package, workspace, env)
        assert solved.returncode == 0, solved.stdout + solved.stderr
        _SOLVED[package.name] = workspace
    shutil.copytree(_SOLVED[package.name], dest, symlinks=True)
    return dest


def test_one_example_per_domain() -> None:
    """Every one of the eight domains has exactly one worked example."""
    domains = [load_task(p).domain for p in EXAMPLES]
    assert sorted(domains) == sorted(KNOWN_DOMAINS)


def test_fixture_is_in_the_published_format() -> None:
    """The fixture keeps the published layout: no fields of our own, all published files."""
    assert FIXTURES, "tests/fixtures/posttrain_format has no package"
    for root in FIXTURES:
        for rel in (
            "environment/Dockerfile",
            "verifier/test.sh",
            "verifier/test_outputs.py",
            "verifier/verifier.md",
            "oracle/solve.sh",
        ):
            assert (root / rel).is_file(), f"{root.name}: {rel} missing"
        assert list((root / "verifier" / "rubrics").glob("*.md"))
        meta = load_task(root).frontmatter.metadata
        assert "license" not in meta.model_fields_set and "origin" not in meta.model_fields_set
        assert "BENCHFLOW_SKIP_VERIFIER_DEPS" in (root / "verifier" / "test.sh").read_text()


@pytest.mark.parametrize("package", EXAMPLES, ids=lambda p: p.name)
def test_every_check_says_what_it_checks(package: Path) -> None:
    """Each test in an example's test_outputs.py has a docstring (reviewers read them)."""
    tree = ast.parse((package / "verifier" / "test_outputs.py").read_text())
    tests = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    tests = [n for n in tests if n.name.startswith("test_")]
    assert tests
    assert not [n.name for n in tests if not ast.get_docstring(n)]


@package_param
def test_package_loads(package: Path) -> None:
    """load_task accepts the package, finds a prompt and test.sh as the entry point."""
    task = load_task(package)
    assert isinstance(task, TaskPackage)
    assert task.prompt.strip()
    assert task.verifier_kind.value == "test.sh"
    assert (package / "oracle" / "solve.sh").is_file()


@package_param
def test_package_checks_without_errors(package: Path) -> None:
    """The structural checks report no error and no warning for the package."""
    report = check_task(package)
    assert not report.findings, "\n".join(f.render() for f in report.findings)


@package_param
def test_package_is_small(package: Path) -> None:
    """Each package stays under 50 KB, seed data included."""
    size = sum(
        p.stat().st_size for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts
    )
    assert size < MAX_PACKAGE_BYTES, f"{package.name} is {size} bytes"


@package_param
def test_dockerfile_needs_no_network(package: Path) -> None:
    """Images build offline from the local Debian base with no package installs."""
    text = (package / "environment" / "Dockerfile").read_text()
    first = next(line for line in text.splitlines() if line.strip() and not line.startswith("#"))
    assert first.split()[0].upper() == "FROM"
    assert first.split()[1].startswith(("posttrain-arena/python:bookworm", "debian:bookworm"))
    for word in ("apt-get", "pip", "curl", "wget"):
        assert word not in text, f"{package.name}: Dockerfile uses {word}"


@package_param
def test_oracle_replay_passes(
    package: Path, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """oracle/solve.sh on a freshly seeded workspace makes every verifier check pass."""
    workspace = _solved_copy(package, tmp_path_factory, tmp_path / "root")
    verifier = replay.copy_verifier(package, tmp_path)
    verdict = replay.run_verifier(verifier, workspace)
    assert verdict.returncode == 0, verdict.stdout + verdict.stderr


@package_param
def test_empty_trial_fails(package: Path, tmp_path: Path) -> None:
    """Doing nothing (the seeded workspace as built) fails the verifier."""
    workspace = tmp_path / "root"
    replay.seed_workspace(package, workspace)
    verifier = replay.copy_verifier(package, tmp_path)
    verdict = replay.run_verifier(verifier, workspace)
    assert verdict.returncode == 1, verdict.stdout + verdict.stderr


@pytest.mark.parametrize("package", EXAMPLES, ids=lambda p: p.name)
def test_plausible_wrong_answer_fails(
    package: Path, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A plausible but wrong solution (a typical slip, applied after the oracle) fails."""
    assert package.name in WRONG_ANSWERS, f"add a wrong answer for {package.name}"
    workspace = _solved_copy(package, tmp_path_factory, tmp_path / "root")
    WRONG_ANSWERS[package.name](workspace)
    verifier = replay.copy_verifier(package, tmp_path)
    verdict = replay.run_verifier(verifier, workspace)
    assert verdict.returncode == 1, verdict.stdout + verdict.stderr


@package_param
def test_test_sh_writes_the_reward(
    package: Path, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """verifier/test.sh exits 0 and writes 1.0 after the oracle, 0.0 for an empty trial."""
    for solve, expected in ((False, 0.0), (True, 1.0)):
        case = tmp_path / ("oracle" if solve else "empty")
        workspace = case / "root"
        if solve:
            _solved_copy(package, tmp_path_factory, workspace)
        else:
            replay.seed_workspace(package, workspace)
        verifier = replay.copy_verifier(package, case)
        logs = case / "logs" / "verifier"
        done = replay.run_test_sh(verifier, workspace, logs)
        assert done.returncode == 0, done.stdout + done.stderr
        assert float((logs / "reward.txt").read_text()) == expected, done.stdout
        assert json.loads((logs / "reward.json").read_text()) == {"reward": expected}
        assert json.loads((logs / "ctrf.json").read_text())["results"]["summary"]["tests"] > 0
