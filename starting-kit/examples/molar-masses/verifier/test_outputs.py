"""Checks /root/molar_masses.csv against molar masses from the task's atomic-weight table.

The expected masses are exact sums of the table's weights (IUPAC conventional
values), so the tolerance is half a unit of the third decimal.
"""

import csv
import os
import re
from pathlib import Path

import pytest

WORKSPACE = Path(os.environ.get("BENCHFLOW_WORKSPACE", "/root"))
RESULT = WORKSPACE / "molar_masses.csv"
TOLERANCE = 0.0005 + 1e-9

EXPECTED = [
    ("water", "H2O", 18.015),
    ("carbon monoxide", "CO", 28.010),
    ("cobalt(II) chloride", "CoCl2", 129.833),
    ("glucose", "C6H12O6", 180.156),
    ("calcium hydroxide", "Ca(OH)2", 74.092),
    ("aluminium sulfate", "Al2(SO4)3", 342.132),
    ("ammonium sulfate", "(NH4)2SO4", 132.134),
    ("calcium phosphate", "Ca3(PO4)2", 310.174),
    ("copper(II) sulfate pentahydrate", "CuSO4·5H2O", 249.677),
    ("potassium permanganate", "KMnO4", 158.032),
    ("potassium dichromate", "K2Cr2O7", 294.181),
    ("potassium ferrocyanide", "K4[Fe(CN)6]", 368.345),
    ("magnesium chloride hexahydrate", "MgCl2·6H2O", 203.295),
    ("silver nitrate", "AgNO3", 169.874),
    ("sodium hydrogen carbonate", "NaHCO3", 84.006),
    ("zinc bromide", "ZnBr2", 225.188),
    ("barium iodide", "BaI2", 391.130),
    ("tetraamminecopper(II) sulfate monohydrate", "[Cu(NH3)4]SO4·H2O", 245.741),
]


@pytest.fixture(scope="module")
def rows():
    assert RESULT.is_file(), f"{RESULT} was not written"
    with RESULT.open(newline="", encoding="utf-8") as handle:
        table = [row for row in csv.reader(handle) if row]
    assert table and table[0] == ["name", "formula", "molar_mass"], "wrong or missing header"
    return table[1:]


def test_rows_in_input_order(rows):
    """One row per compound, names and formulas copied in the input order."""
    assert [(r[0], r[1]) for r in rows] == [(name, formula) for name, formula, _ in EXPECTED]


def test_three_decimals(rows):
    """molar_mass is written with exactly three decimals."""
    for row in rows:
        assert re.fullmatch(r"\d+\.\d{3}", row[2].strip()), f"{row[0]}: {row[2]!r}"


@pytest.mark.parametrize("name, formula, mass", EXPECTED, ids=[e[1] for e in EXPECTED])
def test_molar_mass(rows, name, formula, mass):
    """Each compound's molar mass equals the table-weighted sum of its atoms."""
    got = {r[1]: r[2] for r in rows}.get(formula)
    assert got is not None, f"{formula} missing"
    assert abs(float(got) - mass) <= TOLERANCE, f"{name} ({formula}): {got} != {mass:.3f}"
