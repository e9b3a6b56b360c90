"""`arena task new`: the package checks clean, matches the starting kit, and its verifier
rejects an empty trial while the oracle passes (run here on the host, as the image would)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from posttrain_arena.task_format.checks import check_task
from posttrain_arena.task_format.domains import KNOWN_DOMAINS, Domain
from posttrain_arena.task_format.scaffold import ScaffoldError, new_task, render_files

TEMPLATE = Path(__file__).resolve().parents[2] / "starting-kit" / "template"


def test_starting_kit_template_is_what_the_scaffold_writes() -> None:
    expected = render_files("template", Domain.SOFTWARE_ENGINEERING)
    on_disk = {p.relative_to(TEMPLATE).as_posix(): p for p in TEMPLATE.rglob("*") if p.is_file()}
    assert set(on_disk) == set(expected)
    for rel, (text, executable) in expected.items():
        assert on_disk[rel].read_text(encoding="utf-8") == text, rel
        assert bool(on_disk[rel].stat().st_mode & 0o100) == executable, rel


@pytest.mark.parametrize("domain", KNOWN_DOMAINS)
def test_scaffold_checks_clean_in_every_domain(tmp_path: Path, domain: Domain) -> None:
    report = check_task(new_task(f"t-{domain.value}", domain, tmp_path))
    assert report.findings == [] and report.domain == domain.value


def test_scaffold_refuses_the_unknown_domain(tmp_path: Path) -> None:
    # "unknown" is where an unmappable category lands; no author chooses it
    with pytest.raises(ScaffoldError, match="unknown domain"):
        new_task("t-unknown", Domain.UNKNOWN, tmp_path)


def test_scaffold_refuses_bad_names_and_existing_targets(tmp_path: Path) -> None:
    for name in ("../x", "a/b", "..", "x" * 65, "Caps"):
        with pytest.raises(ScaffoldError):
            new_task(name, "natural-science", tmp_path)
    with pytest.raises(ScaffoldError, match="unknown domain"):
        new_task("ok", "astrology", tmp_path)
    new_task("ok", "natural-science", tmp_path)
    with pytest.raises(ScaffoldError, match="already exists"):
        new_task("ok", "natural-science", tmp_path)


def _run(script: Path, workspace: Path, logs: Path) -> None:
    env = {
        **os.environ,
        # python3 must be one with pytest, as the image's is.
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "BENCHFLOW_WORKSPACE": str(workspace),
        "BENCHFLOW_VERIFIER_DIR": str(script.parent),
        "BENCHFLOW_REWARD_TEXT": str(logs / "reward.txt"),
        "BENCHFLOW_REWARD_JSON": str(logs / "reward.json"),
        "BENCHFLOW_CTRF_JSON": str(logs / "ctrf.json"),
    }
    env.pop("BENCHFLOW_PYTEST_BIN", None)
    subprocess.run(["bash", str(script)], env=env, check=True, capture_output=True,
                   timeout=120)


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize(("action", "reward"), [("empty", "0.0"), ("wrong", "0.0"),
                                                 ("oracle", "1.0")])
def test_placeholder_verifier(tmp_path: Path, action: str, reward: str) -> None:
    pkg = new_task("sum-it", "mathematics-or-formal-reasoning", tmp_path)
    workspace, logs = tmp_path / "ws", tmp_path / "logs"
    workspace.mkdir()
    shutil.copy(pkg / "environment" / "input.txt", workspace / "input.txt")
    if action == "wrong":
        (workspace / "answer.txt").write_text("303\n")
    elif action == "oracle":
        _run(pkg / "oracle" / "solve.sh", workspace, logs)
    _run(pkg / "verifier" / "test.sh", workspace, logs)
    assert (logs / "reward.txt").read_text().strip() == reward
    assert (logs / "reward.json").read_text().strip() == f'{{"reward": {reward}}}'
