#!/bin/bash
# Reference solution: annuity payment, closed-form remaining balance, round at the end.
set -euo pipefail
cd "${BENCHFLOW_WORKSPACE:-/root}"
python3 - <<'PY'
import csv

with open("loans.csv", newline="") as src, open("loan_summary.csv", "w", newline="") as dst:
    out = csv.writer(dst)
    out.writerow(["loan_id", "monthly_payment", "total_interest", "balance_after_12"])
    for row in csv.DictReader(src):
        principal = float(row["principal"])
        months = int(row["term_months"])
        rate = float(row["annual_rate_pct"]) / 1200
        if rate == 0:
            payment = principal / months
            balance = principal - 12 * payment
        else:
            payment = principal * rate / (1 - (1 + rate) ** -months)
            growth = (1 + rate) ** 12
            balance = principal * growth - payment * (growth - 1) / rate
        interest = payment * months - principal
        out.writerow([row["loan_id"], f"{payment:.2f}", f"{interest:.2f}", f"{balance:.2f}"])
PY
cat loan_summary.csv
