"""Procedural task families of the micro challenge.

Each family turns a random generator into one task *instance*: a prompt, the seed files
the environment starts with, the one short shell command that solves it (the oracle) and
the final state the verifier expects. Every parameter the command needs (file names,
column numbers, words, counts) is stated in the prompt, so a model that learned a family
solves fresh instances by copying parameters from the prompt into the command.

Sixteen families, two per domain. The first eight (`SUITE_FAMILIES`) make the held-out
suite and the relevant collection; the other eight (`OFFTOPIC_FAMILIES`) make the
off-topic collection. The two groups use disjoint commands, so training on one teaches
nothing the other's verifier rewards.

Split hygiene: every parameter a command copies from the prompt (file stem, column,
marker, count, range ends) is drawn from one of two disjoint pools. `TRAIN` instances
(the collections) never use a `HELD_OUT` value and the other way round, so no held-out
task's solution can be a training task's, and a model only passes a held-out task by
reading its prompt. The tokenizer's corpus uses a third pool, `COMMON`, of names neither
split uses. Prompts carry no filler: two instances differ
exactly where their parameters and data do.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from posttrain_arena.task_format.domains import Domain


@dataclass(frozen=True)
class Expectation:
    """The final state a verifier checks, relative to the workdir."""

    files: dict[str, str] = field(default_factory=dict)  # path -> exact text (ws-normalised)
    absent: list[str] = field(default_factory=list)  # paths that must no longer exist
    executable: list[str] = field(default_factory=list)  # files that must be executable
    dirs: list[str] = field(default_factory=list)  # directories that must exist
    # Other final states the verifier also accepts (only the broken-verifier control has any)
    alternatives: list[Expectation] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"files": self.files, "absent": self.absent,
                                  "executable": self.executable, "dirs": self.dirs}
        if self.alternatives:
            out["alternatives"] = [a.to_json() for a in self.alternatives]
        return out


@dataclass(frozen=True)
class Instance:
    """One generated task: what the package is made of.

    `params` are the values the command copies from the prompt; `key` (the instance's
    identity) covers them and the seed files, not the wording around them.
    """

    family: str
    domain: Domain
    title: str
    prompt: str
    files: dict[str, str]
    command: str
    expect: Expectation
    params: dict[str, str]

    @property
    def key(self) -> str:
        """Identity of the instance: family, parameters and seed files (12 hex digits)."""
        blob = json.dumps([self.family, self.params, self.files], sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    @property
    def name(self) -> str:
        """Package directory name."""
        return f"{self.family}-{self.key[:8]}"


@dataclass(frozen=True)
class Pools:
    """The values a command's parameters are drawn from (one split's share of each)."""

    name: str
    stems: tuple[str, ...]  # file stems, shared by every family of the split
    markers: tuple[str, ...]  # count-markers: the marker to count
    columns: tuple[int, ...]  # column-sum: the column to total
    heads: tuple[int, ...]  # first-lines: how many lines to keep
    starts: tuple[int, ...]  # sequence: first integer
    ends: tuple[int, ...]  # sequence: last integer


# Disjoint halves of every parameter. File stems are one pool shared by the families of
# a split, so that "copy the file name from the prompt" is one skill a tiny model sees
# many times over. The training pools are wide on purpose: with a handful of values a
# tiny model memorises them and never learns to copy (measured: 0% on held-out values
# with five stems; with columns 1-6 and heads 2-6 only, SFT answered "column 7" with $2
# and "the first 8 lines" with head -n 5).
# Both splits' names are equally foreign to the base model: its tokenizer learns the
# families' words from instances that use `COMMON` names, which neither split uses, so
# every stem and marker of either split is several tokens (tests check it; the build
# refuses a tokenizer or pretraining corpus that holds any split's name). When the
# training stems were the tokenizer's own one-token words and the held-out ones were not,
# SFT taught copying one token and mangled the held-out names (measured, same base and
# trajectories, greedy: 28 of 40 held-out tasks with several-token training stems, 20
# without).
TRAIN = Pools(
    name="train",
    stems=("harvest", "journal", "inventory", "budget", "payroll", "forecast", "catalog",
           "roster", "invoice", "receipt", "schedule", "profile", "summary", "readings",
           "entries", "accounts", "vendors", "clients", "patients", "sensors", "devices",
           "meters", "bridges", "routes", "flights", "stations", "branches", "regions",
           "markets", "parcels", "rentals", "tenants", "members", "donors", "visits",
           "claims", "permits", "cargo", "fleet", "guests"),
    markers=("OPTIMIZE", "REFACTOR", "UNDONE", "WIP", "TBD", "PERF", "CLEANUP", "KLUDGE",
             "DEPRECATED", "SECURITY", "QUESTION", "IDEA", "STUB", "UNSAFE", "FLAKY",
             "MAGIC", "SLOW", "PENDING", "BLOCKED", "RACE"),
    columns=(*range(1, 7), *range(10, 31)), heads=(*range(2, 7), *range(10, 31)),
    starts=(*range(1, 7), *range(25, 36)), ends=(*range(10, 20), *range(40, 60)))
HELD_OUT = Pools(name="held-out", stems=("ledger", "survey", "sample", "batch", "archive",
                                         "metrics"),
                 markers=("HACK", "BUG", "XXX"), columns=(7, 8, 9), heads=(7, 8, 9),
                 starts=(7, 8, 9), ends=(20, 21, 22, 23, 24))
# Common names the tokenizer learns the families' words with (`tokenizer.tokenizer_corpus`):
# no split's parameter, so the base knows these as words and neither split's names.
COMMON = Pools(
    name="common",
    stems=("data", "notes", "report", "input", "records", "items", "values", "events",
           "orders", "prices", "users", "hosts", "files", "lines", "tasks", "jobs", "logs",
           "sales", "stock", "tickets", "scores", "grades", "names", "cities", "colors",
           "books", "songs", "votes", "trips", "loans", "parts", "tools", "cards", "rooms",
           "teams", "units", "zones", "weeks", "plans", "codes"),
    markers=("TODO", "FIXME", "NOTE", "REVIEW", "TEMP", "DEBT", "CHECK", "LATER"),
    columns=(1, 2, 3, 4, 5, 6), heads=(2, 3, 4, 5, 6),
    starts=(1, 2, 3, 4, 5, 6), ends=tuple(range(10, 20)))
NCOLS = 9  # column-sum: columns per row at least (more when the column asked is further)
# Markers that tag lines of count-markers files besides the one asked for: data, never a
# parameter, and no split's marker (a held-out marker in the tokenizer's files made it one
# token while the training markers were several).
DATA_MARKERS = COMMON.markers
# count-markers: how many times more likely the asked marker tags a line than each other
# marker. With the line count below, the counts asked spread over 1-9, so no constant
# answer passes many tasks (with weight 4 and 8-16 lines, "1" matched about half); no
# count is 0, which `grep -c` of any absent marker also writes.
MARKER_WEIGHT = 6


@dataclass(frozen=True)
class Family:
    """A task family: a name, a domain and a generator of instances."""

    name: str
    domain: Domain
    title: str
    make: Callable[[random.Random, Pools], Instance]

    def generate(self, rng: random.Random, pools: Pools = TRAIN) -> Instance:
        """A fresh instance whose parameters come from `pools` (training values unless
        the held-out split is asked for)."""
        return self.make(rng, pools)


# Data vocabulary (file contents, never a command's parameter).
_PEOPLE = ["Alice", "Bruno", "Chen", "Dana", "Emil", "Farah", "Gita", "Hugo", "Ines",
           "Jonas", "Kemal", "Lena", "Mateo", "Nora", "Omar", "Priya", "Quinn", "Rosa",
           "Sven", "Tara", "Umar", "Vera", "Wen", "Yara", "Zane"]
_WORDS = ["alpha", "beta", "gamma", "delta", "river", "stone", "cloud", "light", "paper",
          "green", "quick", "silver", "north", "ocean", "metal", "plain", "field", "spark"]
_LEVELS = ["INFO", "WARN", "DEBUG"]


def _fname(rng: random.Random, pools: Pools, ext: str) -> str:
    return f"{rng.choice(pools.stems)}.{ext}"


def _lines(items: list[str]) -> str:
    return "\n".join(items) + "\n"


def _inst(family: str, domain: Domain, title: str, prompt: str, files: dict[str, str],
          command: str, expect: Expectation, **params: object) -> Instance:
    return Instance(family=family, domain=domain, title=title, prompt=prompt, files=files,
                    command=command, expect=expect,
                    params={k: str(v) for k, v in params.items()})


# ---------------------------------------------------------------- suite families (A-H)

def _count_markers(rng: random.Random, pools: Pools) -> Instance:
    src = _fname(rng, pools, "py")
    out = "count.txt"
    marker = rng.choice(pools.markers)
    body = []
    tags = [marker] * MARKER_WEIGHT + list(DATA_MARKERS)
    for i in range(rng.randint(10, 24)):
        tag = rng.choice(tags) if rng.random() < 0.6 else ""
        body.append(f"x{i} = {rng.randint(0, 99)}" + (f"  # {tag}: tidy up" if tag else ""))
    n = sum(marker in line for line in body)
    if n == 0:
        body[0], n = body[0].split("  #")[0] + f"  # {marker}: tidy up", 1
    return _inst(
        "count-markers", Domain.SOFTWARE_ENGINEERING, "Count code markers",
        f"Count the lines of {src} that contain {marker} and write the number to {out}.",
        {src: _lines(body)}, f"grep -c {marker} {src} > {out}",
        Expectation(files={out: f"{n}\n"}), src=src, out=out, marker=marker)


def _unique_ips(rng: random.Random, pools: Pools) -> Instance:
    log = _fname(rng, pools, "log")
    out = "ips.txt"
    # Fixed-width addresses sort the same in every locale.
    ips = [f"10.0.{rng.randint(0, 9)}.{rng.randint(100, 254)}" for _ in range(rng.randint(3, 6))]
    rows = [f"{rng.choice(ips)} {rng.choice(['login', 'denied', 'probe'])} "
            f"user={rng.choice(_PEOPLE).lower()}" for _ in range(rng.randint(8, 14))]
    seen = sorted({r.split(" ")[0] for r in rows})
    return _inst(
        "unique-ips", Domain.CYBERSECURITY, "List source addresses",
        f"Write the unique IP addresses of the first field of {log}, sorted, to {out}.",
        {log: _lines(rows)}, f"cut -d ' ' -f 1 {log} | sort -u > {out}",
        Expectation(files={out: _lines(seen)}), log=log, out=out)


def _column_sum(rng: random.Random, pools: Pools) -> Instance:
    csv = _fname(rng, pools, "csv")
    out = "total.txt"
    col = rng.choice(pools.columns)
    ncols = max(NCOLS, col)
    rows = [[rng.randint(1, 500) for _ in range(ncols)] for _ in range(rng.randint(4, 10))]
    total = sum(r[col - 1] for r in rows)
    return _inst(
        "column-sum", Domain.FINANCE_ECONOMICS, "Total a ledger column",
        f"Sum column {col} of {csv} (comma-separated, no header) and write the total to {out}.",
        {csv: _lines([",".join(map(str, r)) for r in rows])},
        f"awk -F, '{{s+=${col}}} END {{print s}}' {csv} > {out}",
        Expectation(files={out: f"{total}\n"}), csv=csv, out=out, col=col)


def _sort_names(rng: random.Random, pools: Pools) -> Instance:
    src = _fname(rng, pools, "txt")
    out = "sorted.txt"
    names = rng.sample(_PEOPLE, rng.randint(5, 10))
    return _inst(
        "sort-names", Domain.OFFICE_WHITE_COLLAR, "Sort a name list",
        f"Sort the lines of {src} alphabetically and write them to {out}.",
        {src: _lines(names)}, f"sort {src} > {out}",
        Expectation(files={out: _lines(sorted(names))}), src=src, out=out)


def _word_count(rng: random.Random, pools: Pools) -> Instance:
    src = _fname(rng, pools, "txt")
    out = "words.txt"
    text = [" ".join(rng.choice(_WORDS) for _ in range(rng.randint(3, 9)))
            for _ in range(rng.randint(2, 6))]
    n = sum(len(t.split()) for t in text)
    return _inst(
        "word-count", Domain.MEDIA_CONTENT_PRODUCTION, "Count words of a draft",
        f"Write the number of words in {src} to {out}.",
        {src: _lines(text)}, f"wc -w < {src} > {out}",
        Expectation(files={out: f"{n}\n"}), src=src, out=out)


def _max_reading(rng: random.Random, pools: Pools) -> Instance:
    src = _fname(rng, pools, "dat")
    out = "max.txt"
    values = [rng.randint(1, 999) for _ in range(rng.randint(5, 12))]
    return _inst(
        "max-reading", Domain.NATURAL_SCIENCE, "Find the peak reading",
        f"Write the largest number in {src} (one number per line) to {out}.",
        {src: _lines([str(v) for v in values])}, f"sort -n {src} | tail -n 1 > {out}",
        Expectation(files={out: f"{max(values)}\n"}), src=src, out=out)


def _sequence(rng: random.Random, pools: Pools) -> Instance:
    out = "numbers.txt"
    a = rng.choice(pools.starts)
    b = rng.choice([e for e in pools.ends if e > a + 2])
    return _inst(
        "sequence", Domain.MATHEMATICS_FORMAL_REASONING, "Write an integer range",
        f"Write the integers from {a} to {b}, one per line, to {out}.",
        {}, f"seq {a} {b} > {out}",
        Expectation(files={out: _lines([str(i) for i in range(a, b + 1)])}), a=a, b=b, out=out)


def _first_lines(rng: random.Random, pools: Pools) -> Instance:
    src = _fname(rng, pools, "log")
    out = "top.txt"
    rows = [f"t={i} {rng.choice(_LEVELS)} rpm={rng.randint(100, 3000)}"
            for i in range(rng.randint(8, 14))]
    n = rng.choice(pools.heads)
    # The file is longer than the lines asked for (a longer head would copy it whole).
    rows += [f"t={i} {rng.choice(_LEVELS)} rpm={rng.randint(100, 3000)}"
             for i in range(len(rows), n + 2)]
    return _inst(
        "first-lines", Domain.INDUSTRIAL_PHYSICAL_SYSTEMS, "Keep the first log lines",
        f"Copy the first {n} lines of {src} to {out}.",
        {src: _lines(rows)}, f"head -n {n} {src} > {out}",
        Expectation(files={out: _lines(rows[:n])}), src=src, out=out, n=n)


# ------------------------------------------------------------- off-topic families (I-P)

def _make_executable(rng: random.Random, pools: Pools) -> Instance:
    src = _fname(rng, pools, "sh")
    body = f"#!/bin/sh\necho {rng.choice(_WORDS)}\n"
    return _inst(
        "make-executable", Domain.SOFTWARE_ENGINEERING, "Make a script executable",
        f"Make the script {src} executable.",
        {src: body}, f"chmod +x {src}",
        Expectation(files={src: body}, executable=[src]), src=src)


def _checksum(rng: random.Random, pools: Pools) -> Instance:
    src = _fname(rng, pools, "bin")
    out = "checksum.txt"
    body = _lines([rng.choice(_WORDS) + str(rng.randint(0, 999)) for _ in range(4)])
    digest = hashlib.sha256(body.encode()).hexdigest()
    return _inst(
        "checksum", Domain.CYBERSECURITY, "Record a checksum",
        f"Write the SHA-256 checksum line of {src} to {out}.",
        {src: body}, f"sha256sum {src} > {out}",
        Expectation(files={out: f"{digest}  {src}\n"}), src=src, out=out)


def _reverse_ledger(rng: random.Random, pools: Pools) -> Instance:
    src = _fname(rng, pools, "txt")
    out = "reversed.txt"
    rows = [f"{rng.choice(_PEOPLE)} {rng.randint(5, 900)}.00" for _ in range(rng.randint(4, 9))]
    return _inst(
        "reverse-ledger", Domain.FINANCE_ECONOMICS, "Newest entries first",
        f"Write the lines of {src} in reverse order to {out}.",
        {src: _lines(rows)}, f"tac {src} > {out}",
        Expectation(files={out: _lines(rows[::-1])}), src=src, out=out)


def _uppercase(rng: random.Random, pools: Pools) -> Instance:
    src = _fname(rng, pools, "txt")
    out = "upper.txt"
    text = [" ".join(rng.choice(_WORDS) for _ in range(rng.randint(2, 6))) for _ in range(3)]
    return _inst(
        "uppercase", Domain.OFFICE_WHITE_COLLAR, "Shout a memo",
        f"Convert {src} to upper case and write the result to {out}.",
        {src: _lines(text)}, f"tr a-z A-Z < {src} > {out}",
        Expectation(files={out: _lines([t.upper() for t in text])}), src=src, out=out)


def _make_folder(rng: random.Random, pools: Pools) -> Instance:
    top = rng.choice(["media", "assets", "footage", "episodes"])
    sub = rng.choice(pools.stems)
    return _inst(
        "make-folder", Domain.MEDIA_CONTENT_PRODUCTION, "Create a media folder",
        f"Create the directory {top}/{sub}, with its parents.",
        {}, f"mkdir -p {top}/{sub}",
        Expectation(dirs=[f"{top}/{sub}"]), top=top, sub=sub)


def _backup_copy(rng: random.Random, pools: Pools) -> Instance:
    src = _fname(rng, pools, "dat")
    dst = f"{src}.bak"
    body = _lines([f"{rng.randint(1, 99)} {rng.randint(1, 99)}" for _ in range(4)])
    return _inst(
        "backup-copy", Domain.NATURAL_SCIENCE, "Back up a measurement file",
        f"Copy {src} to {dst}.",
        {src: body}, f"cp {src} {dst}",
        Expectation(files={src: body, dst: body}), src=src, dst=dst)


def _number_lines(rng: random.Random, pools: Pools) -> Instance:
    src = _fname(rng, pools, "txt")
    out = "numbered.txt"
    rows = [f"{rng.choice(_WORDS)} implies {rng.choice(_WORDS)}" for _ in range(rng.randint(3, 7))]
    numbered = [f"{i:6d}\t{row}" for i, row in enumerate(rows, 1)]
    return _inst(
        "number-lines", Domain.MATHEMATICS_FORMAL_REASONING, "Number proof steps",
        f"Write {src} with numbered lines to {out}.",
        {src: _lines(rows)}, f"cat -n {src} > {out}",
        Expectation(files={out: _lines(numbered)}), src=src, out=out)


def _rename(rng: random.Random, pools: Pools) -> Instance:
    src, dst = (f"{stem}.cfg" for stem in rng.sample(pools.stems, 2))
    body = _lines([f"set {rng.choice(_WORDS)} {rng.randint(0, 9)}" for _ in range(3)])
    return _inst(
        "rename-config", Domain.INDUSTRIAL_PHYSICAL_SYSTEMS, "Rename a controller config",
        f"Rename {src} to {dst}.",
        {src: body}, f"mv {src} {dst}",
        Expectation(files={dst: body}, absent=[src]), src=src, dst=dst)


SUITE_FAMILIES: tuple[Family, ...] = tuple(
    Family(name, domain, title, make) for name, domain, title, make in [
        ("count-markers", Domain.SOFTWARE_ENGINEERING, "Count code markers", _count_markers),
        ("unique-ips", Domain.CYBERSECURITY, "List source addresses", _unique_ips),
        ("column-sum", Domain.FINANCE_ECONOMICS, "Total a ledger column", _column_sum),
        ("sort-names", Domain.OFFICE_WHITE_COLLAR, "Sort a name list", _sort_names),
        ("word-count", Domain.MEDIA_CONTENT_PRODUCTION, "Count words of a draft", _word_count),
        ("max-reading", Domain.NATURAL_SCIENCE, "Find the peak reading", _max_reading),
        ("sequence", Domain.MATHEMATICS_FORMAL_REASONING, "Write an integer range", _sequence),
        ("first-lines", Domain.INDUSTRIAL_PHYSICAL_SYSTEMS, "Keep the first log lines",
         _first_lines),
    ]
)

OFFTOPIC_FAMILIES: tuple[Family, ...] = tuple(
    Family(name, domain, title, make) for name, domain, title, make in [
        ("make-executable", Domain.SOFTWARE_ENGINEERING, "Make a script executable",
         _make_executable),
        ("checksum", Domain.CYBERSECURITY, "Record a checksum", _checksum),
        ("reverse-ledger", Domain.FINANCE_ECONOMICS, "Newest entries first", _reverse_ledger),
        ("uppercase", Domain.OFFICE_WHITE_COLLAR, "Shout a memo", _uppercase),
        ("make-folder", Domain.MEDIA_CONTENT_PRODUCTION, "Create a media folder", _make_folder),
        ("backup-copy", Domain.NATURAL_SCIENCE, "Back up a measurement file", _backup_copy),
        ("number-lines", Domain.MATHEMATICS_FORMAL_REASONING, "Number proof steps",
         _number_lines),
        ("rename-config", Domain.INDUSTRIAL_PHYSICAL_SYSTEMS, "Rename a controller config",
         _rename),
    ]
)

ALL_FAMILIES: tuple[Family, ...] = SUITE_FAMILIES + OFFTOPIC_FAMILIES


def family(name: str) -> Family:
    """The family called `name`; KeyError lists the known names."""
    for fam in ALL_FAMILIES:
        if fam.name == name:
            return fam
    raise KeyError(f"no family {name!r}; known: {', '.join(f.name for f in ALL_FAMILIES)}")
