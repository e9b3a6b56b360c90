"""Checks /root/loan_summary.csv: level payments, total interest and balance after 12 months.

Expected values are computed from the seeded loans.csv with unrounded intermediates;
each output may differ from them by at most one cent (rounding of a trailing 5).
"""

import csv
import os
import re
from pathlib import Path

import pytest

WORKSPACE = Path(os.environ.get("BENCHFLOW_WORKSPACE", "/root"))
SUMMARY = WORKSPACE / "loan_summary.csv"
HEADER = ["loan_id", "monthly_payment", "total_interest", "balance_after_12"]
CENT = 0.01 + 1e-6

# loan_id: (monthly_payment, total_interest, balance_after_12)
EXPECTED = {
    "L-1001": (1580.17, 318861.22, 247205.69),
    "L-1002": (364.11, 3846.86, 14943.53),
    "L-1003": (208.33, 0.00, 2500.00),
    "L-1004": (578.94, 6630.60, 36736.02),
    "L-1005": (996.49, 59368.58, 114806.65),
    "L-1006": (315.54, 1859.29, 6703.05),
    "L-1007": (741.28, 15702.81, 67167.42),
}


@pytest.fixture(scope="module")
def rows():
    assert SUMMARY.is_file(), f"{SUMMARY} was not written"
    with SUMMARY.open(newline="") as handle:
        table = list(csv.reader(handle))
    assert table, "loan_summary.csv is empty"
    assert [h.strip() for h in table[0]] == HEADER, f"header must be {HEADER}"
    return [r for r in table[1:] if any(cell.strip() for cell in r)]


def test_one_row_per_loan_in_input_order(rows):
    """Seven rows, one per loan, in the order of loans.csv."""
    assert [r[0].strip() for r in rows] == list(EXPECTED)


def test_two_decimal_format(rows):
    """Every amount is written with exactly two decimals."""
    for row in rows:
        assert len(row) == 4, f"row {row} must have 4 columns"
        for cell in row[1:]:
            assert re.fullmatch(r"-?\d+\.\d{2}", cell.strip()), f"{cell!r} in {row}"


@pytest.mark.parametrize("column", [1, 2, 3], ids=HEADER[1:])
def test_amounts_within_a_cent(rows, column):
    """Payments, total interest and balances match the exact computation to the cent."""
    for row in rows:
        expected = EXPECTED[row[0].strip()][column - 1]
        got = float(row[column])
        assert abs(got - expected) <= CENT, f"{row[0]} {HEADER[column]}: {got} != {expected}"


def test_zero_rate_loan(rows):
    """The 0% staff advance repays principal/24 with no interest (no division by zero)."""
    staff = next(r for r in rows if r[0].strip() == "L-1003")
    assert float(staff[2]) == 0.0
