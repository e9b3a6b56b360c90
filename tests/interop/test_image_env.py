"""The image's environment is the task's environment (issue 25, item 6): what the
Dockerfile sets with ENV is what the agent's and the verifier's commands see, on both
backends. SkillsBench writes `ENV PATH=/opt/<tool>/bin:$PATH` for tools called by name
(12 of its Dockerfiles); Terminal-Bench's Python images put a venv first the same way."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from posttrain_arena.cli.main import app

from .real_shapes import write_tb2_task

TOOL = "#!/bin/sh\nawk '{s+=$1} END {print s}' \"$@\"\n"

DOCKERFILE = """\
FROM posttrain-arena/python:bookworm
WORKDIR /app
COPY numbers.txt /app/numbers.txt
COPY addup /opt/addtools/bin/addup
ENV PATH=/opt/addtools/bin:$PATH
ENV ADD_MODE=sum
"""

# the oracle and the verifier call the image's tool by name and read its ENV
SOLVE = """\
#!/bin/bash
set -e
[ "$ADD_MODE" = sum ] || { echo "ADD_MODE not set: $ADD_MODE"; exit 1; }
addup /app/numbers.txt > /app/sum.txt
"""

TEST_SH = """\
#!/bin/bash
echo "PATH=$PATH"
if [ "$(addup /app/numbers.txt)" = "$(cat /app/sum.txt)" ] && command -v ls >/dev/null \\
   && [ "$ADD_MODE" = sum ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""


def _task(root: Path) -> Path:
    path = write_tb2_task(root, files={"environment/Dockerfile": DOCKERFILE,
                                       "environment/addup": TOOL, "solution/solve.sh": SOLVE,
                                       "tests/test.sh": TEST_SH})
    (path / "environment" / "addup").chmod(0o755)
    return path


@pytest.mark.parametrize("backend", [
    pytest.param("docker", marks=pytest.mark.docker),
    pytest.param("local", marks=pytest.mark.bwrap),
])
def test_image_env_reaches_agent_and_verifier(tmp_path: Path, backend: str) -> None:
    root = _task(tmp_path / "env-path")
    result = CliRunner().invoke(app, ["task", "run", str(root), "--backend", backend,
                                      "--records", str(tmp_path / "records")])
    assert result.exit_code == 0, result.output
    assert "reward: 1.0" in result.output
