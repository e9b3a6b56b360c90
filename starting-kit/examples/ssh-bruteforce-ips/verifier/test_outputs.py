"""Checks /root/findings.json against the brute-force sources of the seeded auth.log.

The expected lists below follow from the rules in the prompt applied to the seed
log shipped in the image (see verifier.md for how each IP is decided).
"""

import json
import os
from pathlib import Path

import pytest

WORKSPACE = Path(os.environ.get("BENCHFLOW_WORKSPACE", "/root"))
FINDINGS = WORKSPACE / "findings.json"

EXPECTED_BRUTEFORCE = ["45.155.205.10", "192.0.2.7", "198.51.100.7", "203.0.113.45"]
EXPECTED_COMPROMISED = ["45.155.205.10", "198.51.100.7"]


@pytest.fixture(scope="module")
def findings():
    assert FINDINGS.is_file(), f"{FINDINGS} was not written"
    data = json.loads(FINDINGS.read_text())
    assert isinstance(data, dict), "findings.json must hold a JSON object"
    return data


def test_keys_and_types(findings):
    """Both keys are present and hold lists of strings."""
    for key in ("bruteforce_ips", "compromised_ips"):
        assert key in findings, f"missing key {key!r}"
        assert isinstance(findings[key], list), f"{key} must be a list"
        assert all(isinstance(ip, str) for ip in findings[key]), f"{key} must list strings"


def test_bruteforce_set(findings):
    """Exactly the IPs with 5 password failures within 60 s are flagged, no others."""
    assert set(findings["bruteforce_ips"]) == set(EXPECTED_BRUTEFORCE)


def test_compromised_set(findings):
    """Exactly the flagged IPs with an Accepted login after their first failure."""
    assert set(findings["compromised_ips"]) == set(EXPECTED_COMPROMISED)


def test_numeric_order_without_duplicates(findings):
    """Lists are in numeric address order (45.x before 192.x) and have no duplicates."""
    assert findings["bruteforce_ips"] == EXPECTED_BRUTEFORCE
    assert findings["compromised_ips"] == EXPECTED_COMPROMISED
