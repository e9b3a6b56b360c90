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
