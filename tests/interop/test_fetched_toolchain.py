"""Verifiers that fetch their tools (issue 25, item 10): a test.sh shaped as Terminal-Bench
2's (apt-get of curl, the uv install script, `uvx -p 3.13 -w pytest==8.4.1 -w
pytest-json-ctrf==0.3.5 pytest --ctrf ...`) runs offline with the harness's uvx; a
package the image lacks is refused by name, never passed."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from posttrain_arena.cli.main import app

from .real_shapes import TB2_TEST_SH, write_tb2_task

BACKENDS = [pytest.param("docker", marks=pytest.mark.docker),
            pytest.param("local", marks=pytest.mark.bwrap)]


def _run(root: Path, backend: str, records: Path, *extra: str):
    return CliRunner().invoke(app, ["task", "run", str(root), "--backend", backend,
                                    "--records", str(records), *extra])


@pytest.mark.parametrize("backend", BACKENDS)
def test_tb2_uvx_verifier_runs_offline(tmp_path: Path, backend: str) -> None:
    root = write_tb2_task(tmp_path / "add-numbers")
    assert "uvx" in TB2_TEST_SH and "astral.sh/uv" in TB2_TEST_SH
    oracle = _run(root, backend, tmp_path / "r")
    assert oracle.exit_code == 0 and "reward: 1.0" in oracle.output, oracle.output
    empty = _run(root, backend, tmp_path / "r", "--skip-oracle")
    assert empty.exit_code == 0 and "reward: 0.0" in empty.output, empty.output


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_package_the_image_lacks_is_refused_by_name(tmp_path: Path, backend: str) -> None:
    wants = TB2_TEST_SH.replace("-w pytest==8.4.1", "-w pytest==8.4.1 \\\n  "
                                "-w arena-not-a-real-package==1.0")
    root = write_tb2_task(tmp_path / "t", files={"tests/test.sh": wants})
    result = _run(root, backend, tmp_path / "r")
    assert result.exit_code == 1 and "reward: 0.0" in result.output
    assert "arena-not-a-real-package==1.0 not installed in the task image's Python" \
        in result.output
