"""A shallow key-presence check of the existing format: the reference the deep check is
measured against (`bench_check.py` runs it as a whole process).

What such a check does, and no more: for each package under envs/, read task.md, load its
YAML frontmatter (with libyaml when PyYAML has it), see that the required keys are
present, that the body has a `## prompt` heading, that environment/Dockerfile starts with
FROM, and that verifier/test.sh and oracle/solve.sh exist. No types, no line numbers, no
tree walk, no hashing.

    python benchmarks/shallow_check.py [--pure] COLLECTION_DIR

--pure loads YAML with PyYAML's pure-Python SafeLoader, which is what `yaml.safe_load`
uses: the call such scripts usually make.
"""

from __future__ import annotations

import os
import sys

import yaml

REQUIRED = {
    "version": (),
    "metadata": ("author_name", "author_email", "category", "difficulty", "tags"),
    "agent": ("timeout_sec",),
    "verifier": ("timeout_sec",),
    "environment": ("build_timeout_sec", "cpus", "memory_mb", "storage_mb", "allow_internet"),
}
LOADER = yaml.SafeLoader if "--pure" in sys.argv else getattr(yaml, "CSafeLoader",
                                                                yaml.SafeLoader)


def problems(task: str) -> list[str]:
    out = []
    try:
        with open(os.path.join(task, "task.md"), encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        return [f"task.md: {exc}"]
    parts = text.split("---", 2)
    if not text.startswith("---") or len(parts) < 3:
        return ["task.md: no frontmatter"]
    meta = yaml.load(parts[1], Loader=LOADER) or {}
    for key, subkeys in REQUIRED.items():
        if key not in meta:
            out.append(f"missing {key}")
        out += [f"missing {key}.{sub}" for sub in subkeys if sub not in (meta.get(key) or {})]
    if "## prompt" not in parts[2]:
        out.append("no ## prompt section")
    try:
        with open(os.path.join(task, "environment", "Dockerfile"), encoding="utf-8") as fh:
            lines = [ln.strip() for ln in fh if ln.strip() and not ln.lstrip().startswith("#")]
        if not lines or not lines[0].upper().startswith("FROM"):
            out.append("Dockerfile does not start with FROM")
    except OSError:
        out.append("no environment/Dockerfile")
    for rel in ("verifier/test.sh", "oracle/solve.sh"):
        if not os.path.isfile(os.path.join(task, rel)):
            out.append(f"no {rel}")
    return out


def main() -> int:
    envs = os.path.join(next(a for a in sys.argv[1:] if a != "--pure"), "envs")
    bad = 0
    for name in sorted(os.listdir(envs)):
        if name.startswith("_"):
            continue
        found = problems(os.path.join(envs, name))
        bad += bool(found)
        for p in found:
            print(f"{name}: {p}")
    print(f"{bad} package(s) with problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
