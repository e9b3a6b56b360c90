#!/bin/bash
# Reference solution: parse cue blocks, shift in integer milliseconds, clamp or drop,
# renumber, write back.
set -euo pipefail
cd "${BENCHFLOW_WORKSPACE:-/root}"
python3 - <<'PY'
import re

SHIFT_MS = 2750
TIMING = re.compile(r"^(\d\d):(\d\d):(\d\d),(\d{3}) --> (\d\d):(\d\d):(\d\d),(\d{3})$")

def to_ms(h, m, s, ms):
    return ((int(h) * 60 + int(m)) * 60 + int(s)) * 1000 + int(ms)

def fmt(ms):
    h, rest = divmod(ms, 3_600_000)
    m, rest = divmod(rest, 60_000)
    s, ms = divmod(rest, 1000)
    return f"{h:02d}:{m:02d}:{s:02d},{ms:03d}"

text = open("episode.srt", encoding="utf-8-sig").read().replace("\r\n", "\n")
out = []
for block in re.split(r"\n\s*\n", text.strip()):
    lines = block.split("\n")
    t = TIMING.match(lines[1])
    start = to_ms(*t.groups()[:4]) - SHIFT_MS
    end = to_ms(*t.groups()[4:]) - SHIFT_MS
    if end <= 0:
        continue
    out.append(f"{len(out) + 1}\n{fmt(max(start, 0))} --> {fmt(end)}\n" + "\n".join(lines[2:]) + "\n")
open("episode.synced.srt", "w", encoding="utf-8").write("\n".join(out))
PY
head -8 episode.synced.srt
