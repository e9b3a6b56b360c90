"""Packages in the shapes real published corpora have, written here (never copied).

Each writer names the published package whose shape it reproduces; the texts are our
own. Sources (turn of 2026-12-04): Terminal-Bench 2 and SkillsBench as vendored in
yujianll/skill-usage (`terminal-bench-2/`, `tasks/`), BenchFlow's own tasks
(benchflow-ai/benchflow `tests/examples/hello-world-task`, `src/benchflow/demo_task`,
`benchmarks/clawsbench/tasks/*`), and the published PostTrain kit
(benchflow-ai/posttrainarena `starting-kit/`).
"""

from __future__ import annotations

from pathlib import Path

BASE_IMAGE = "posttrain-arena/python:bookworm"


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


# Terminal-Bench 2 (e.g. adaptive-rejection-sampler): `version = "1.0"`, a free-form
# [metadata] category, Harbor's older size strings, and `docker_image` naming the
# prebuilt copy of the environment/Dockerfile that every one of the 89 tasks also ships.
TB2_TOML = """\
version = "1.0"

[metadata]
author_name = "A. Porter"
author_email = "porter@example.com"
difficulty = "medium"
category = "{category}"
tags = [{tags}]
expert_time_estimate_min = 60.0

[verifier]
timeout_sec = 900.0

[agent]
timeout_sec = 900.0

[environment]
build_timeout_sec = 600.0
{image_line}cpus = 1
memory = "2G"
storage = "10G"
"""

# TB2's test.sh shape: apt-get of curl, the uv install script, uvx with pinned pytest and
# its CTRF plugin, the reward written from pytest's exit status.
TB2_TEST_SH = """\
#!/bin/bash
apt-get update
apt-get install -y curl
curl -LsSf https://astral.sh/uv/0.9.5/install.sh | sh
source $HOME/.local/bin/env
if [ "$PWD" = "/" ]; then
    echo "Error: No working directory set."
    exit 1
fi
uvx \\
  -p 3.13 \\
  -w pytest==8.4.1 \\
  -w pytest-json-ctrf==0.3.5 \\
  pytest --ctrf /logs/verifier/ctrf.json /tests/test_outputs.py -rA
if [ $? -eq 0 ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""

TB2_TEST_OUTPUTS = """\
from pathlib import Path


def test_sum_written():
    assert Path("/app/sum.txt").read_text().strip() == "42"
"""


def write_tb2_task(root: Path, *, category: str = "data-processing",
                   tags: str = '"shell", "arithmetic"', image: bool = True,
                   dockerfile: bool = True, files: dict[str, str] | None = None) -> Path:
    """A Terminal-Bench 2 task: add the numbers of /app/numbers.txt into /app/sum.txt."""
    name = root.name
    image_line = f'docker_image = "alexgshaw/{name}:20251031"\n' if image else ""
    content = {
        "task.toml": TB2_TOML.format(category=category, tags=tags, image_line=image_line),
        "instruction.md": "Add the numbers in /app/numbers.txt and write the sum, alone, "
                          "to /app/sum.txt.\n",
        "environment/numbers.txt": "40\n2\n",
        "tests/test.sh": TB2_TEST_SH,
        "tests/test_outputs.py": TB2_TEST_OUTPUTS,
        "solution/solve.sh": "#!/bin/bash\nawk '{s+=$1} END {print s}' /app/numbers.txt "
                             "> /app/sum.txt\n",
        **(files or {}),
    }
    if dockerfile:
        content.setdefault("environment/Dockerfile", f"FROM {BASE_IMAGE}\n\nWORKDIR /app\n\n"
                           "COPY numbers.txt /app/numbers.txt\n")
    return write(root, content)


# SkillsBench (e.g. pg-essay-to-audiobook, mhc-layer-impl): environment/docker-compose.yaml
# whose one service `main` builds the Dockerfile and passes API keys and a working_dir.
SKILLSBENCH_MAIN_COMPOSE = """\
services:
  main:
    build:
      context: ${CONTEXT_DIR}
    image: ${MAIN_IMAGE_NAME}
    command: [ "sh", "-c", "sleep infinity" ]
    environment:
      - OPENAI_API_KEY=${OPENAI_API_KEY}
"""

# SkillsBench fix-visual-stability: `main` plus an `api` service built from its own
# Dockerfile on a shared network: really several containers.
SKILLSBENCH_TWO_SERVICES = SKILLSBENCH_MAIN_COMPOSE + """\
  api:
    build:
      context: .
      dockerfile: Dockerfile.api
    expose:
      - "4000"
"""

# SkillsBench react-performance-debugging: a docker-compose.yml (a name neither Harbor nor
# BenchFlow reads) whose services' folders the one Dockerfile copies into its image.
SKILLSBENCH_INPUT_COMPOSE = """\
version: '3.8'
services:
  api-simulator:
    build: ./api-simulator
  website:
    build: ./website
"""


# BenchFlow hello-world-task / demo_task: task.md (schema_version, `sandbox:`, a free-form
# category such as "sanity", judge and hardening keys) beside a task.toml, with tests/ and
# solution/ as Harbor names them.
BENCHFLOW_TASK_MD = """\
---
schema_version: '1.0'
artifacts: []
metadata:
  author_name: benchflow
  difficulty: easy
  category: {category}
  tags:
  - sanity
  - hello-world
verifier:
  type: test-script
  timeout_sec: 60.0
  service: main
  hardening:
    cleanup_conftests: true
agent:
  timeout_sec: 300.0
sandbox:
  build_timeout_sec: 600.0
  cpus: 1
  memory_mb: 2048
  gpus: 0
---

{body}
"""

BENCHFLOW_TASK_TOML = """\
version = "1.0"

[metadata]
author_name = "benchflow"
difficulty = "easy"
category = "sanity"

[agent]
timeout_sec = 300

[verifier]
timeout_sec = 60
"""

BENCHFLOW_TEST_SH = """\
#!/bin/bash
REWARD=0
if [ "$(cat /app/hello.txt 2>/dev/null)" = "Hello, world!" ]; then
    REWARD=1
fi
echo "$REWARD" > /logs/verifier/reward.txt
"""


def write_benchflow_task(root: Path, *, category: str = "sanity", toml: bool = True,
                         body: str = "## prompt\n\nCreate /app/hello.txt containing "
                                     "exactly `Hello, world!`.",
                         files: dict[str, str] | None = None) -> Path:
    """A BenchFlow task: task.md (+ task.toml), environment/, tests/, solution/."""
    content = {
        "task.md": BENCHFLOW_TASK_MD.format(category=category, body=body),
        "environment/Dockerfile": f"FROM {BASE_IMAGE}\nWORKDIR /app\n",
        "tests/test.sh": BENCHFLOW_TEST_SH,
        "solution/solve.sh": "#!/bin/bash\nprintf 'Hello, world!' > /app/hello.txt\n",
        **(files or {}),
    }
    if toml:
        content["task.toml"] = BENCHFLOW_TASK_TOML
    return write(root, content)
