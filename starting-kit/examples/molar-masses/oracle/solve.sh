#!/bin/bash
# Reference solution: a small recursive-descent formula parser with exact decimals.
set -euo pipefail
cd "${BENCHFLOW_WORKSPACE:-/root}"
python3 - <<'PY'
import csv
import re
from decimal import Decimal

with open("atomic_weights.csv", newline="") as handle:
    weights = {row["symbol"]: Decimal(row["atomic_weight"]) for row in csv.DictReader(handle)}

TOKEN = re.compile(r"[A-Z][a-z]?|\d+|[()\[\]]")

def group_mass(tokens, pos):
    """Mass of tokens from pos up to a closing bracket (or the end); returns (mass, pos)."""
    total = Decimal(0)
    while pos < len(tokens) and tokens[pos] not in ")]":
        token = tokens[pos]
        if token in "([":
            mass, pos = group_mass(tokens, pos + 1)
            pos += 1  # the closing bracket
        else:
            mass, pos = weights[token], pos + 1
        count = 1
        if pos < len(tokens) and tokens[pos].isdigit():
            count, pos = int(tokens[pos]), pos + 1
        total += mass * count
    return total, pos

def molar_mass(formula):
    total = Decimal(0)
    for part in formula.split("·"):
        multiplier, body = re.fullmatch(r"(\d*)(.+)", part).groups()
        mass, _ = group_mass(TOKEN.findall(body), 0)
        total += int(multiplier or 1) * mass
    return total

with open("compounds.csv", newline="", encoding="utf-8") as src, \
        open("molar_masses.csv", "w", newline="", encoding="utf-8") as dst:
    out = csv.writer(dst)
    out.writerow(["name", "formula", "molar_mass"])
    for row in csv.DictReader(src):
        out.writerow([row["name"], row["formula"], f"{molar_mass(row['formula']):.3f}"])
PY
cat molar_masses.csv
