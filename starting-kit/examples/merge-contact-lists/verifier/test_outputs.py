"""Checks /root/contacts_merged.csv against the merge rules applied to the seeded lists.

The expected table (verifier/data/expected_contacts.csv) is the rules applied by
hand to crm_contacts.csv and event_signups.csv; rows are compared as parsed CSV,
so quoting style and line endings do not matter, content does.
"""

import csv
import os
from pathlib import Path

import pytest

WORKSPACE = Path(os.environ.get("BENCHFLOW_WORKSPACE", "/root"))
MERGED = WORKSPACE / "contacts_merged.csv"
EXPECTED_FILE = Path(__file__).resolve().parent / "data" / "expected_contacts.csv"


def _read(path):
    with path.open(newline="", encoding="utf-8") as handle:
        return [row for row in csv.reader(handle) if row]


@pytest.fixture(scope="module")
def merged():
    assert MERGED.is_file(), f"{MERGED} was not written"
    try:
        return _read(MERGED)
    except UnicodeDecodeError as exc:
        pytest.fail(f"contacts_merged.csv is not UTF-8: {exc}")


@pytest.fixture(scope="module")
def expected():
    return _read(EXPECTED_FILE)


def test_header(merged):
    """The first row is exactly email,name,company."""
    assert merged[0] == ["email", "name", "company"]


def test_one_row_per_contact(merged, expected):
    """Every distinct normalised email appears once: no duplicates, none missing."""
    emails = [row[0] for row in merged[1:]]
    assert len(emails) == len(set(emails)), "duplicate emails in the output"
    assert set(emails) == {row[0] for row in expected[1:]}


def test_sorted_by_email(merged):
    """Rows are sorted by email."""
    emails = [row[0] for row in merged[1:]]
    assert emails == sorted(emails)


def test_names_and_companies(merged, expected):
    """Each contact's name and company follow the precedence rules, trimmed, accents kept."""
    got = {row[0]: row[1:] for row in merged[1:]}
    for email, name, company in expected[1:]:
        assert got.get(email) == [name, company], f"{email}: {got.get(email)} != {[name, company]}"
