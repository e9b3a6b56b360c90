"""Checks /root/solution.txt: a complete, valid Sudoku grid that keeps the seeded givens.

The givens are held here (not read from the workspace) so that editing puzzle.txt
cannot change what is checked.
"""

import os
from pathlib import Path

import pytest

WORKSPACE = Path(os.environ.get("BENCHFLOW_WORKSPACE", "/root"))
SOLUTION = WORKSPACE / "solution.txt"

PUZZLE = [
    "..7..18..",
    ".3....6..",
    "....35.1.",
    "1..853...",
    "..3.4...9",
    "2..9....4",
    ".8...9.32",
    "6.93.2.7.",
    ".1.5....8",
]
DIGITS = set("123456789")


@pytest.fixture(scope="module")
def grid():
    assert SOLUTION.is_file(), f"{SOLUTION} was not written"
    lines = [line.strip() for line in SOLUTION.read_text().splitlines() if line.strip()]
    assert len(lines) == 9, f"expected 9 lines, got {len(lines)}"
    for number, line in enumerate(lines, 1):
        assert len(line) == 9 and set(line) <= DIGITS, f"line {number} is not 9 digits: {line!r}"
    return lines


def test_givens_kept(grid):
    """Every given digit of the puzzle is in its place."""
    for r, row in enumerate(PUZZLE):
        for c, given in enumerate(row):
            if given != ".":
                assert grid[r][c] == given, f"row {r + 1}, column {c + 1}: given {given}"


def test_rows(grid):
    """Each row holds the digits 1-9 once."""
    for r, row in enumerate(grid):
        assert set(row) == DIGITS, f"row {r + 1} repeats a digit: {row}"


def test_columns(grid):
    """Each column holds the digits 1-9 once."""
    for c in range(9):
        column = "".join(row[c] for row in grid)
        assert set(column) == DIGITS, f"column {c + 1} repeats a digit: {column}"


def test_boxes(grid):
    """Each 3x3 box holds the digits 1-9 once."""
    for br in range(0, 9, 3):
        for bc in range(0, 9, 3):
            box = "".join(grid[r][c] for r in range(br, br + 3) for c in range(bc, bc + 3))
            assert set(box) == DIGITS, f"box at row {br + 1}, column {bc + 1}: {box}"
