"""The files `arena task new` writes (and `starting-kit/template/` holds).

Kept as strings in a module so they ship inside the wheel without package-data rules
for extension-less names such as `Dockerfile`. `__TASK_NAME__` and `__CATEGORY__` are
replaced on writing. A test keeps `starting-kit/template/` identical to this.
"""

from __future__ import annotations

TASK_MD = """\
---
version: "1.0"
metadata:
  author_name: Your Name
  author_email: you@example.com
  category: __CATEGORY__
  difficulty: easy
  tags: [template]
  license: Apache-2.0
  origin: original
agent:
  timeout_sec: 300
verifier:
  timeout_sec: 60
  isolation: fresh
environment:
  build_timeout_sec: 600
  cpus: 1
  memory_mb: 1024
  storage_mb: 1024
  allow_internet: false
---

# __TASK_NAME__

Replace this placeholder task with your own: edit the prompt, put the starting state in
environment/, the reference solution in oracle/solve.sh and the checks of the final
state in verifier/test_outputs.py. Then run `arena task check .` and `arena task run .`
(the oracle must score 1.0) and `arena task run . --skip-oracle` (doing nothing must not).

## prompt

The file `/root/input.txt` holds one integer per line. Write their sum, as a single
integer, to `/root/answer.txt`.
"""

DOCKERFILE = """\
# The task image. Its build context is this folder (environment/): nothing here may
# give the answer away, and oracle/ and verifier/ are never copied in.
# posttrain-arena/python:bookworm is Debian bookworm with python3 and pytest; build it
# offline with `arena images bootstrap`.
FROM posttrain-arena/python:bookworm
WORKDIR /root
COPY input.txt /root/input.txt
"""

INPUT_TXT = """\
17
-4
250
33
8
"""

SOLVE_SH = """\
#!/usr/bin/env bash
# Reference solution. Runs inside the task image, in the workspace, like an agent would.
set -euo pipefail
cd "${BENCHFLOW_WORKSPACE:-/root}"
python3 -c 'import sys; print(sum(int(x) for x in sys.stdin if x.strip()))' \\
  < input.txt > answer.txt
"""

TEST_SH = """\
#!/usr/bin/env bash
# Verifier entry point: run the pytest checks of the final state and write the reward,
# 1.0 when every check passes and 0.0 otherwise. Always exits 0: the reward file is the
# verdict. Needs no network: python3 and pytest are baked into the image, and the
# harness passes BENCHFLOW_PYTEST_BIN, a pytest that writes per-test details (--ctrf).
set -u
VERIFIER_DIR="${BENCHFLOW_VERIFIER_DIR:-$(cd "$(dirname "$0")" && pwd)}"
REWARD_TEXT="${BENCHFLOW_REWARD_TEXT:-/logs/verifier/reward.txt}"
REWARD_JSON="${BENCHFLOW_REWARD_JSON:-/logs/verifier/reward.json}"
CTRF_JSON="${BENCHFLOW_CTRF_JSON:-/logs/verifier/ctrf.json}"
mkdir -p "$(dirname "$REWARD_TEXT")" "$(dirname "$REWARD_JSON")" "$(dirname "$CTRF_JSON")"
# The verifier folder is read-only: keep pytest from caching there.
if [ -n "${BENCHFLOW_PYTEST_BIN:-}" ]; then
  # shellcheck disable=SC2086  # the variable may hold a command with arguments
  $BENCHFLOW_PYTEST_BIN --ctrf "$CTRF_JSON" "$VERIFIER_DIR/test_outputs.py" -rA -v \\
    -p no:cacheprovider
else
  python3 -m pytest "$VERIFIER_DIR/test_outputs.py" -rA -v -p no:cacheprovider
fi
if [ $? -eq 0 ]; then
  reward=1.0
else
  reward=0.0
fi
printf '%s\\n' "$reward" > "$REWARD_TEXT"
printf '{"reward": %s}\\n' "$reward" > "$REWARD_JSON"
exit 0
"""

TEST_OUTPUTS_PY = '''\
"""Checks of the final state. The agent never sees this file."""

import os
from pathlib import Path

WORKSPACE = Path(os.environ.get("BENCHFLOW_WORKSPACE", "/root"))

# The answer is fixed here, not recomputed from input.txt, which the agent could edit.
EXPECTED = 304


def test_answer_file_exists():
    assert (WORKSPACE / "answer.txt").is_file(), "answer.txt was not written"


def test_answer_is_the_sum():
    text = (WORKSPACE / "answer.txt").read_text().strip()
    assert text == str(EXPECTED), f"expected {EXPECTED}, got {text!r}"
'''

VERIFIER_MD = """\
---
document_version: "1.0"
verifier:
  name: __TASK_NAME__
  default_strategy: pytest
  strategies:
    pytest:
      type: script
      command: ./test.sh
  rubric:
    combine: weighted_sum
    dimensions:
      correctness:
        weight: 1.0
        source: pytest
  outputs:
    reward_text: /logs/verifier/reward.txt
    reward_json: /logs/verifier/reward.json
---

## role:reviewer

Check that the reward depends only on the final content of `/root/answer.txt`, and that
an empty trial and a wrong sum both score 0.0.
"""

RUBRIC_MD = """\
# Correctness

Full credit when `/root/answer.txt` holds exactly the sum of the integers in the
original `/root/input.txt`; no credit otherwise.
"""

#: relative path -> (content, executable)
FILES: dict[str, tuple[str, bool]] = {
    "task.md": (TASK_MD, False),
    "environment/Dockerfile": (DOCKERFILE, False),
    "environment/input.txt": (INPUT_TXT, False),
    "oracle/solve.sh": (SOLVE_SH, True),
    "verifier/test.sh": (TEST_SH, True),
    "verifier/test_outputs.py": (TEST_OUTPUTS_PY, False),
    "verifier/verifier.md": (VERIFIER_MD, False),
    "verifier/rubrics/correctness.md": (RUBRIC_MD, False),
}
