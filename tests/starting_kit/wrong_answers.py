"""Plausible wrong answers, one per starting-kit example, applied to a solved workspace.

Each function turns the oracle's correct final state into what a hurried or sloppy
agent would plausibly leave behind; the example's verifier must reject it.
"""

from __future__ import annotations

import csv
import json
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path


def _partial_interval_fix(ws: Path) -> None:
    # Sorting added, but touching and contained intervals still handled wrongly.
    path = ws / "project" / "intervals.py"
    text = path.read_text()
    text = text.replace("start <= merged[-1][1]", "start < merged[-1][1]")
    text = text.replace("max(merged[-1][1], end)", "end")
    path.write_text(text)


def _count_not_window(ws: Path) -> None:
    # Flags every IP with >= 5 failures overall (no 60 s window) and sorts as text.
    text = (ws / "auth.log").read_text()
    counts = Counter(re.findall(r"Failed password for (?:invalid user )?\S+ from (\S+)", text))
    flagged = sorted(ip for ip, n in counts.items() if n >= 5)
    compromised = sorted(
        ip for ip in flagged if re.search(rf"Accepted \S+ for \S+ from {re.escape(ip)} ", text)
    )
    (ws / "findings.json").write_text(
        json.dumps({"bruteforce_ips": flagged, "compromised_ips": compromised})
    )


def _rounded_payment_first(ws: Path) -> None:
    # Rounds the payment to cents first, then walks the schedule month by month.
    rows = [["loan_id", "monthly_payment", "total_interest", "balance_after_12"]]
    with (ws / "loans.csv").open(newline="") as handle:
        for loan in csv.DictReader(handle):
            principal, months = float(loan["principal"]), int(loan["term_months"])
            rate = float(loan["annual_rate_pct"]) / 1200
            exact = (
                principal / months if rate == 0 else principal * rate / (1 - (1 + rate) ** -months)
            )
            payment = round(exact, 2)
            balance = principal
            for _ in range(12):
                balance += balance * rate - payment
            rows.append(
                [
                    loan["loan_id"],
                    f"{payment:.2f}",
                    f"{payment * months - principal:.2f}",
                    f"{balance:.2f}",
                ]
            )
    with (ws / "loan_summary.csv").open("w", newline="") as handle:
        csv.writer(handle).writerows(rows)


def _signups_override_crm(ws: Path) -> None:
    # dict.update style merge: the later file (and later rows) overwrite earlier ones.
    merged: dict[str, tuple[str, str]] = {}
    sources = (
        ("crm_contacts.csv", ",", "Email", "Full Name", "Company"),
        ("event_signups.csv", ";", "email", "name", "organisation"),
    )
    for name, delimiter, email_key, name_key, company_key in sources:
        with (ws / name).open(newline="", encoding="utf-8") as handle:
            for row in csv.DictReader(handle, delimiter=delimiter):
                email = row[email_key].strip().lower()
                if email:
                    merged[email] = (row[name_key].strip(), row[company_key].strip())
    with (ws / "contacts_merged.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["email", "name", "company"])
        writer.writerows([email, *merged[email]] for email in sorted(merged))


def _clamp_instead_of_drop(ws: Path) -> None:
    # Keeps the cue that ends before zero, clamped to a zero-length cue.
    path = ws / "episode.synced.srt"
    blocks = path.read_text().strip().split("\n\n")
    blocks.insert(0, "0\n00:00:00,000 --> 00:00:00,000\n[waves crashing]")
    renumbered = [f"{i}\n" + block.split("\n", 1)[1] for i, block in enumerate(blocks, 1)]
    path.write_text("\n\n".join(renumbered) + "\n")


def _hydrate_multiplier_ignored(ws: Path) -> None:
    # Parses `CuSO4·5H2O` as CuSO4 + H2O: the hydrate's leading count is dropped.
    path = ws / "molar_masses.csv"
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    for row in rows[1:]:
        hydrate = re.search(r"·(\d+)H2O$", row[1])
        if hydrate:
            row[2] = f"{float(row[2]) - (int(hydrate.group(1)) - 1) * 18.015:.3f}"
    with path.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)


def _swapped_cells(ws: Path) -> None:
    # A hand-solving slip: two blank cells of the first row swapped (rows still valid).
    path = ws / "solution.txt"
    lines = path.read_text().split()
    first = list(lines[0])
    first[0], first[1] = first[1], first[0]  # both blanks in the seeded puzzle
    lines[0] = "".join(first)
    path.write_text("\n".join(lines) + "\n")


def _file_order_not_time_order(ws: Path) -> None:
    # Scans rows in file order: late rows break two events and change a peak.
    per_machine: dict[str, list[tuple[str, str, float | None]]] = {}
    with (ws / "line_sensors.csv").open(newline="") as handle:
        for row in csv.DictReader(handle):
            temp = float(row["temp_c"]) if row["temp_c"] else None
            per_machine.setdefault(row["machine"], []).append(
                (row["timestamp"], row["state"], temp)
            )
    report = {}
    for machine, rows in per_machine.items():
        events, run = [], []
        for stamp, _, temp in [*rows, ("", "", None)]:
            if temp is not None and temp > 85.0:
                run.append((stamp, temp))
                continue
            if len(run) >= 3:
                events.append(
                    {"start": run[0][0], "end": run[-1][0], "peak_c": max(t for _, t in run)}
                )
            run = []
        uptime = 100 * sum(state == "RUN" for _, state, _ in rows) / len(rows)
        report[machine] = {"uptime_pct": round(uptime, 2), "overheat_events": events}
    (ws / "report.json").write_text(json.dumps(report))


WRONG_ANSWERS: dict[str, Callable[[Path], None]] = {
    "fix-interval-merge": _partial_interval_fix,
    "ssh-bruteforce-ips": _count_not_window,
    "loan-amortization": _rounded_payment_first,
    "merge-contact-lists": _signups_override_crm,
    "shift-subtitles": _clamp_instead_of_drop,
    "molar-masses": _hydrate_multiplier_ignored,
    "sudoku-solve": _swapped_cells,
    "sensor-overheat-uptime": _file_order_not_time_order,
}
