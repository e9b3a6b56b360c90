"""The broken-verifier control: suite-family instances whose verifier also accepts a
plausible wrong answer, and whose oracle produces that wrong answer.

Such a collection passes every check a collection owner can run (the oracle scores 1.0,
doing nothing scores 0), yet teaches the wrong program: a measurement worth trusting must
score it well below the good collection. Each suite family has one plausible mistake,
computed from the instance's own seed files and parameters.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from posttrain_arena.challenges.micro.families import Expectation, Instance


def _lines(items: list[str]) -> str:
    return "\n".join(items) + "\n"


def _rows(inst: Instance, key: str) -> list[str]:
    return inst.files[inst.params[key]].splitlines()


def _count_markers(inst: Instance) -> tuple[str, dict[str, str]]:
    src, out = inst.params["src"], inst.params["out"]
    n = sum("#" in line for line in _rows(inst, "src"))  # every comment, not the marker
    return f"grep -c '#' {src} > {out}", {out: f"{n}\n"}


def _unique_ips(inst: Instance) -> tuple[str, dict[str, str]]:
    log, out = inst.params["log"], inst.params["out"]
    ips = sorted(r.split(" ")[0] for r in _rows(inst, "log"))  # duplicates kept
    return f"cut -d ' ' -f 1 {log} | sort > {out}", {out: _lines(ips)}


def _column_sum(inst: Instance) -> tuple[str, dict[str, str]]:
    csv, out, col = inst.params["csv"], inst.params["out"], int(inst.params["col"])
    other = col - 1 if col > 1 else col + 1  # the neighbouring column (a training value)
    total = sum(int(r.split(",")[other - 1]) for r in _rows(inst, "csv"))
    return f"awk -F, '{{s+=${other}}} END {{print s}}' {csv} > {out}", {out: f"{total}\n"}


def _sort_names(inst: Instance) -> tuple[str, dict[str, str]]:
    src, out = inst.params["src"], inst.params["out"]
    return f"sort -r {src} > {out}", {out: _lines(sorted(_rows(inst, "src"), reverse=True))}


def _word_count(inst: Instance) -> tuple[str, dict[str, str]]:
    src, out = inst.params["src"], inst.params["out"]
    return f"wc -l < {src} > {out}", {out: f"{len(_rows(inst, 'src'))}\n"}  # lines, not words


def _max_reading(inst: Instance) -> tuple[str, dict[str, str]]:
    src, out = inst.params["src"], inst.params["out"]
    low = min(int(v) for v in _rows(inst, "src"))  # the wrong end of the sorted list
    return f"sort -n {src} | head -n 1 > {out}", {out: f"{low}\n"}


def _sequence(inst: Instance) -> tuple[str, dict[str, str]]:
    a, b, out = int(inst.params["a"]), int(inst.params["b"]), inst.params["out"]
    return f"seq {a} {b - 1} > {out}", {out: _lines([str(i) for i in range(a, b)])}


def _first_lines(inst: Instance) -> tuple[str, dict[str, str]]:
    src, out, n = inst.params["src"], inst.params["out"], int(inst.params["n"])
    return f"tail -n {n} {src} > {out}", {out: _lines(_rows(inst, "src")[-n:])}


MISTAKES: dict[str, Callable[[Instance], tuple[str, dict[str, str]]]] = {
    "count-markers": _count_markers, "unique-ips": _unique_ips, "column-sum": _column_sum,
    "sort-names": _sort_names, "word-count": _word_count, "max-reading": _max_reading,
    "sequence": _sequence, "first-lines": _first_lines,
}


def break_verifier(inst: Instance) -> Instance:
    """The instance with its family's plausible mistake as the oracle, and a verifier that
    accepts the mistake as well as the right answer; KeyError for families without one."""
    command, files = MISTAKES[inst.family](inst)
    wrong = Expectation(files=files)
    expect = replace(inst.expect, alternatives=[wrong])
    return replace(inst, command=command, expect=expect)
