"""Harbor / Terminal-Bench tasks written as they are published (for the interop tests)."""

from __future__ import annotations

from pathlib import Path

BASE_IMAGE = "posttrain-arena/python:bookworm"

TASK_TOML = """\
schema_version = "1.1"

[task]
name = "arena-tests/count-words"
description = "Count the words of a file"
keywords = ["text", "shell"]

[[task.authors]]
name = "Ada Harbor"
email = "ada@example.com"

[metadata]
difficulty = "easy"
category = "{category}"
tags = ["shell", "text"]
expert_time_estimate_min = 5

[agent]
timeout_sec = 120.0

[verifier]
timeout_sec = 60.0

[environment]
build_timeout_sec = 300.0
cpus = 1
memory_mb = 1024
storage_mb = 2048
network_mode = "no-network"
{extra}"""

TEST_SH = """\
#!/bin/bash
# Harbor uploads tests/ to /tests after the agent finished.
mkdir -p /logs/verifier
expected=$(cat /tests/expected.txt)
if [ -f /app/count.txt ] && [ "$(tr -d '[:space:]' < /app/count.txt)" = "$expected" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""

SOLVE_SH = """\
#!/bin/bash
set -e
bash "$(dirname "$0")/count.sh" > /app/count.txt
"""

SOLVE_SH_AT_SOLUTION = """\
#!/bin/bash
set -e
bash /solution/count.sh > /app/count.txt
"""


def write_harbor_task(root: Path, *, category: str = "software-engineering",
                      extra: str = "", files: dict[str, str] | None = None) -> Path:
    """A Harbor task: count the words of /app/words.txt into /app/count.txt."""
    content = {
        "task.toml": TASK_TOML.format(category=category, extra=extra),
        "instruction.md": "Count the words in /app/words.txt and write the number, alone, "
                          "to /app/count.txt.\n",
        "environment/Dockerfile": f"FROM {BASE_IMAGE}\nWORKDIR /app\nCOPY words.txt "
                                  "/app/words.txt\n",
        "environment/words.txt": "one two three\nfour five\n",
        "tests/test.sh": TEST_SH,
        "tests/expected.txt": "5\n",
        "solution/solve.sh": SOLVE_SH,
        "solution/count.sh": "wc -w < /app/words.txt\n",
        **(files or {}),
    }
    for rel, text in content.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


MULTI_TOML = """\
schema_version = "1.1"
multi_step_reward_strategy = "{strategy}"

[task]
name = "arena-tests/two-steps"

[metadata]
category = "software-engineering"

[agent]
timeout_sec = 120.0

[verifier]
timeout_sec = 60.0

[environment]
network_mode = "no-network"

[[steps]]
name = "write"

[[steps]]
name = "append"

[steps.agent]
timeout_sec = 60.0
"""

STEP_TEST = """\
#!/bin/bash
mkdir -p /logs/verifier
if [ "$(cat /app/log.txt 2>/dev/null)" = "$(cat /tests/expected.txt)" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""


def write_multistep_task(root: Path, *, strategy: str = "mean") -> Path:
    """Two steps in one environment: write a line, then append one (state carries over).
    The task-level tests/test.sh is layered under each step's expected.txt."""
    content = {
        "task.toml": MULTI_TOML.format(strategy=strategy),
        "environment/Dockerfile": f"FROM {BASE_IMAGE}\nWORKDIR /app\n",
        "tests/test.sh": STEP_TEST,
        "steps/write/instruction.md": "Write the line `one` to /app/log.txt.\n",
        "steps/write/tests/expected.txt": "one\n",
        "steps/write/solution/solve.sh": "#!/bin/bash\necho one > /app/log.txt\n",
        "steps/append/instruction.md": "Append the line `two` to /app/log.txt.\n",
        "steps/append/tests/expected.txt": "one\ntwo\n",
        "steps/append/solution/solve.sh": "#!/bin/bash\necho two >> /app/log.txt\n",
    }
    for rel, text in content.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root
