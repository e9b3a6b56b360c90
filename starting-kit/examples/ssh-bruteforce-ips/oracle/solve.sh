#!/bin/bash
# Reference solution: parse failures per IP, slide a 5-failure window, then look for
# an Accepted line after each flagged IP's first failure.
set -euo pipefail
cd "${BENCHFLOW_WORKSPACE:-/root}"
python3 - <<'PY'
import ipaddress
import json
import re
from collections import defaultdict
from datetime import datetime

LINE = re.compile(r"^(\w{3}\s+\d+ \d\d:\d\d:\d\d) \S+ sshd\[\d+\]: (.*)$")
FAILED = re.compile(r"Failed password for (?:invalid user )?\S+ from (\S+) port")
ACCEPTED = re.compile(r"Accepted \S+ for \S+ from (\S+) port")

failures = defaultdict(list)   # ip -> [(seconds, line number)]
accepted = defaultdict(list)   # ip -> [line number]
with open("auth.log") as log:
    for number, line in enumerate(log):
        match = LINE.match(line.rstrip("\n"))
        if not match:
            continue
        stamp = datetime.strptime("2026 " + match.group(1), "%Y %b %d %H:%M:%S")
        message = match.group(2)
        if failed := FAILED.search(message):
            failures[failed.group(1)].append((stamp.timestamp(), number))
        elif ok := ACCEPTED.search(message):
            accepted[ok.group(1)].append(number)

def is_burst(events):
    times = sorted(t for t, _ in events)
    return any(times[i + 4] - times[i] <= 60 for i in range(len(times) - 4))

numeric = lambda ip: ipaddress.ip_address(ip)
flagged = sorted((ip for ip, ev in failures.items() if is_burst(ev)), key=numeric)
first_failure = {ip: min(n for _, n in failures[ip]) for ip in flagged}
compromised = [ip for ip in flagged if any(n > first_failure[ip] for n in accepted[ip])]
with open("findings.json", "w") as out:
    json.dump({"bruteforce_ips": flagged, "compromised_ips": compromised}, out, indent=2)
PY
cat findings.json
