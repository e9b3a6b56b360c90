#!/bin/bash
# Reference solution: read both files with the csv module, key on the normalised
# email, let the CRM win field by field, write sorted.
set -euo pipefail
cd "${BENCHFLOW_WORKSPACE:-/root}"
python3 - <<'PY'
import csv

def first_rows(path, delimiter, email_key, name_key, company_key):
    rows = {}
    with open(path, newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle, delimiter=delimiter):
            email = (row[email_key] or "").strip().lower()
            if email and email not in rows:
                rows[email] = {"name": (row[name_key] or "").strip(),
                               "company": (row[company_key] or "").strip()}
    return rows

crm = first_rows("crm_contacts.csv", ",", "Email", "Full Name", "Company")
signups = first_rows("event_signups.csv", ";", "email", "name", "organisation")
with open("contacts_merged.csv", "w", newline="", encoding="utf-8") as out:
    writer = csv.writer(out)
    writer.writerow(["email", "name", "company"])
    for email in sorted(crm.keys() | signups.keys()):
        primary, fallback = crm.get(email, {}), signups.get(email, {})
        writer.writerow([email] + [primary.get(f) or fallback.get(f, "") for f in ("name", "company")])
PY
cat contacts_merged.csv
