"""Checks /root/episode.synced.srt: every cue 2.750 s earlier, clamped or dropped, renumbered.

The expected cues (verifier/data/expected.srt) are the seeded episode.srt with the
rules applied; files are compared cue by cue after parsing, so a trailing newline
or CRLF line endings do not matter, timing and text do.
"""

import os
import re
from pathlib import Path

import pytest

WORKSPACE = Path(os.environ.get("BENCHFLOW_WORKSPACE", "/root"))
SYNCED = WORKSPACE / "episode.synced.srt"
ORIGINAL = WORKSPACE / "episode.srt"
EXPECTED_FILE = Path(__file__).resolve().parent / "data" / "expected.srt"
TIMING = re.compile(r"^\d\d:\d\d:\d\d,\d{3} --> \d\d:\d\d:\d\d,\d{3}$")


def parse_srt(path):
    """[(index, timing line, [text lines])] of an SRT file; AssertionError if malformed."""
    text = path.read_text(encoding="utf-8-sig").replace("\r\n", "\n")
    cues = []
    for block in re.split(r"\n[ \t]*\n", text.strip()):
        lines = block.split("\n")
        assert len(lines) >= 3, f"cue without text or timing: {block!r}"
        assert lines[0].strip().isdigit(), f"cue number expected, got {lines[0]!r}"
        assert TIMING.match(lines[1].strip()), f"bad timing line {lines[1]!r}"
        cues.append((int(lines[0]), lines[1].strip(), lines[2:]))
    return cues


@pytest.fixture(scope="module")
def synced():
    assert SYNCED.is_file(), f"{SYNCED} was not written"
    return parse_srt(SYNCED)


@pytest.fixture(scope="module")
def expected():
    return parse_srt(EXPECTED_FILE)


def test_cue_count(synced, expected):
    """The cue that ends before zero is dropped, all others kept (13 cues)."""
    assert len(synced) == len(expected)


def test_numbering(synced):
    """Cues are numbered 1, 2, 3, ... in order."""
    assert [index for index, _, _ in synced] == list(range(1, len(synced) + 1))


def test_timings(synced, expected):
    """Every start and end is the original minus 2750 ms, starts clamped at zero."""
    assert len(synced) == len(expected), "cue count differs; see test_cue_count"
    for (index, got, _), (_, want, _) in zip(synced, expected, strict=True):
        assert got == want, f"cue {index}: {got} != {want}"


def test_text_unchanged(synced, expected):
    """Text lines are kept exactly, including tags and a line containing '-->'."""
    assert len(synced) == len(expected), "cue count differs; see test_cue_count"
    for (index, _, got), (_, _, want) in zip(synced, expected, strict=True):
        assert [line.rstrip() for line in got] == want, f"cue {index}: text changed"


def test_original_untouched():
    """The source episode.srt is left in place with its original first cue."""
    assert ORIGINAL.is_file(), "episode.srt was removed"
    first = parse_srt(ORIGINAL)[0]
    assert first[1] == "00:00:01,200 --> 00:00:02,500"
