"""The micro base model's pretraining: generic shell use, disjoint from the suite.

A base model that has never seen a shell scores 0 on any suite, so neither control can
fail: nothing can lower a blank baseline, and a lucky collection cannot be told from a
good one. The micro base model is therefore *pretrained* during the build on a broad
corpus of generic shell episodes, in the model agent's own conversation format:

- generic tasks (copy, move, count lines, sort, keep the first lines, search, number
  ranges, checksums, ...), each in several wordings that are none of the families';
- file names and words from generated vocabularies (syllable names and random letter
  strings), so the model learns to *copy* an unseen name from the prompt into the
  command (the skill every held-out instance needs), not to recall a few names it has
  seen;
- copy tasks (`COPY`: print these words, create/remove/show these files, ...) whose
  command repeats several fresh random strings of the prompt: a dense signal that only
  in-context copying can predict, about half of the episodes;
- nothing of the held-out suite: no held-out parameter value (stem, marker) occurs as a
  name or word, no family's wording is used, and the build refuses a corpus in which a
  suite prompt or command occurs (`suite_text_in`).

Some generic tasks are close to suite families in what they do (sort a file, count its
words, keep its first lines, write a range), as generic shell use is; others to the
off-topic families. So the base model solves some suite tasks some of the time (a
baseline above 0 that an off-topic collection can lower), and learning a family's own
wording and program is what a relevant collection adds.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from posttrain_arena.agents.model import TOOLS, format_output
from posttrain_arena.agents.teacher import oracle_conversation
from posttrain_arena.challenges.micro.families import HELD_OUT

# Seconds shown as "time left" in pretraining episodes: the micro tasks' agent limit,
# so the rendered notes look like the ones the agent sees at evaluation.
_TIME_LEFT = 120.0
_ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z",
           "br", "dr", "kl", "pl", "st", "tr")
_VOWELS = ("a", "e", "i", "o", "u")
_EXTENSIONS = ("txt", "log", "csv", "dat", "md", "cfg", "tsv", "out", "lst", "py", "sh")
# Words of file contents and search patterns (never a held-out marker or stem).
_WORDS = ("apple", "berry", "cedar", "dune", "ember", "frost", "grove", "harbor", "iris",
          "juniper", "kettle", "lemon", "maple", "nectar", "olive", "pepper", "quartz",
          "raven", "sage", "thistle", "umber", "velvet", "willow", "yarrow", "zephyr")


def _forbidden_names() -> set[str]:
    """Held-out parameter values: never a name, word or pattern of the corpus."""
    return {v.lower() for v in (*HELD_OUT.stems, *HELD_OUT.markers)}


def syllable_name(rng: random.Random) -> str:
    """A pronounceable made-up name of two or three syllables (not a held-out value)."""
    banned = _forbidden_names()
    while True:
        name = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS)
                       for _ in range(rng.choice((2, 2, 3))))
        if not any(b in name for b in banned):
            return name


_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def random_word(rng: random.Random, *, upper: bool = False) -> str:
    """A string of 2-9 random letters (not containing a held-out value): names with
    every letter pattern, which the model can only reproduce by copying them."""
    banned = _forbidden_names()
    while True:
        word = "".join(rng.choice(_LETTERS) for _ in range(rng.randint(2, 9)))
        if not any(b in word for b in banned):
            return word.upper() if upper else word


def _stem(rng: random.Random) -> str:
    return syllable_name(rng) if rng.random() < 0.5 else random_word(rng)


def _file(rng: random.Random) -> str:
    return f"{_stem(rng)}.{rng.choice(_EXTENSIONS)}"


def _two_files(rng: random.Random) -> tuple[str, str]:
    a = _file(rng)
    b = _file(rng)
    while b == a:
        b = _file(rng)
    return a, b


@dataclass(frozen=True)
class Generic:
    """One generic shell task: wordings (format strings) and the command that does it."""

    name: str
    wordings: tuple[str, ...]
    command: str
    params: Callable[[random.Random], dict[str, object]]

    def sample(self, rng: random.Random) -> tuple[str, str]:
        """(prompt, command) of one instance."""
        p = self.params(rng)
        return rng.choice(self.wordings).format(**p), self.command.format(**p)


def _src_out(rng: random.Random) -> dict[str, object]:
    a, b = _two_files(rng)
    return {"a": a, "o": b}


def _src_out_n(rng: random.Random) -> dict[str, object]:
    return {**_src_out(rng), "n": rng.randint(1, 30)}


def _src_out_word(rng: random.Random) -> dict[str, object]:
    return {**_src_out(rng), "w": rng.choice(_WORDS)}


def _range(rng: random.Random) -> dict[str, object]:
    a = rng.randint(0, 40)
    return {"a": a, "b": a + rng.randint(1, 30), "o": _file(rng)}


def _dir(rng: random.Random) -> dict[str, object]:
    return {"d": syllable_name(rng), "e": syllable_name(rng)}


def _one(rng: random.Random) -> dict[str, object]:
    return {"a": _file(rng)}


def _three(rng: random.Random) -> dict[str, object]:
    a, b = _two_files(rng)
    o = _file(rng)
    while o in (a, b):
        o = _file(rng)
    return {"a": a, "b": b, "o": o}


def _cut(rng: random.Random) -> dict[str, object]:
    return {**_src_out(rng), "n": rng.randint(1, 12), "s": rng.choice((",", ":", ";"))}


def _distinct(make: Callable[[random.Random], str], rng: random.Random, n: int) -> list[str]:
    out: list[str] = []
    while len(out) < n:
        item = make(rng)
        if item not in out:
            out.append(item)
    return out


def _prose(items: list[str]) -> str:
    return ", ".join(items[:-1]) + " and " + items[-1]


def _many(make: Callable[[random.Random], str]) -> Callable[[random.Random], dict[str, object]]:
    def params(rng: random.Random) -> dict[str, object]:
        items = _distinct(make, rng, rng.randint(2, 5))
        return {"xs": " ".join(items), "xl": _prose(items)}
    return params


def _word_any(rng: random.Random) -> str:
    return random_word(rng, upper=rng.random() < 0.3)


def _words_to_file(rng: random.Random) -> dict[str, object]:
    return {**_many(_word_any)(rng), "o": _file(rng)}


def _pattern_in_file(rng: random.Random) -> dict[str, object]:
    return {"w": _word_any(rng), "a": _file(rng)}


# Tasks whose command repeats several names or words of the prompt: a dense signal for
# copying from the prompt, the skill every held-out instance needs.
COPY: tuple[Generic, ...] = (
    Generic("echo-words", ("Print the words {xs}.", "Say {xl}.", "Show the text {xs}."),
            "echo {xs}", _many(_word_any)),
    Generic("touch-many", ("Create the empty files {xl}.", "Make new files: {xs}"),
            "touch {xs}", _many(_file)),
    Generic("rm-many", ("Delete the files {xl}.", "Remove these files: {xs}"),
            "rm {xs}", _many(_file)),
    Generic("mkdir-many", ("Create the folders {xl}.", "Make these directories: {xs}"),
            "mkdir {xs}", _many(_stem)),
    Generic("cat-many", ("Show what is in {xl}.", "Print the contents of these files: {xs}"),
            "cat {xs}", _many(_file)),
    Generic("echo-file", ("Store the text {xs} in {o}.", "Save {xl} into {o}."),
            "echo {xs} > {o}", _words_to_file),
    Generic("grep-show", ("Show the rows of {a} that mention {w}.",
                          "Which lines of {a} include {w}?"), "grep {w} {a}", _pattern_in_file),
)

GENERIC: tuple[Generic, ...] = (
    Generic("copy", ("Make a copy of {a} called {o}.", "Duplicate {a} as {o}.",
                     "I need {a} copied to {o}."), "cp {a} {o}", _src_out),
    Generic("move", ("Move {a} to {o}.", "Give {a} the new name {o}.",
                     "{a} should be called {o} from now on."), "mv {a} {o}", _src_out),
    Generic("delete", ("Delete {a}.", "Remove the file {a}.", "Get rid of {a}."),
            "rm {a}", _one),
    Generic("touch", ("Create an empty file {a}.", "Make a new empty file named {a}."),
            "touch {a}", _one),
    Generic("mkdir", ("Make a folder {d}.", "Create a directory named {d}."),
            "mkdir {d}", _dir),
    Generic("mkdir-p", ("Make the nested folders {d}/{e}.", "Create {d}/{e} and its parent."),
            "mkdir -p {d}/{e}", _dir),
    Generic("lines", ("How many lines does {a} have? Put the number in {o}.",
                      "Save the line count of {a} to {o}."), "wc -l < {a} > {o}", _src_out),
    Generic("words", ("How many words are in {a}? Save the count as {o}.",
                      "Put the word count of {a} into {o}."), "wc -w < {a} > {o}", _src_out),
    Generic("chars", ("How many bytes is {a}? Save the number in {o}.",),
            "wc -c < {a} > {o}", _src_out),
    Generic("sort", ("Order the rows of {a} from A to Z into {o}.",
                     "Order {a} from A to Z and save the result as {o}."),
            "sort {a} > {o}", _src_out),
    Generic("sort-r", ("Order the rows of {a} from Z to A into {o}.",),
            "sort -r {a} > {o}", _src_out),
    Generic("sort-n", ("Order the numbers in {a} from small to large into {o}.",),
            "sort -n {a} > {o}", _src_out),
    Generic("uniq", ("Save each distinct line of {a} once, in order, to {o}.",),
            "sort -u {a} > {o}", _src_out),
    Generic("head", ("Keep only the top {n} lines of {a} in {o}.",
                     "Save the opening {n} lines of {a} as {o}."),
            "head -n {n} {a} > {o}", _src_out_n),
    Generic("tail", ("Keep only the bottom {n} lines of {a} in {o}.",
                     "Save the closing {n} lines of {a} as {o}."),
            "tail -n {n} {a} > {o}", _src_out_n),
    Generic("grep", ("Save every row of {a} mentioning {w} to {o}.",
                     "Find {w} in {a} and put the matching lines in {o}."),
            "grep {w} {a} > {o}", _src_out_word),
    Generic("grep-v", ("Save every row of {a} not mentioning {w} to {o}.",),
            "grep -v {w} {a} > {o}", _src_out_word),
    Generic("echo", ("Write the word {w} into {o}.", "Put {w} in the file {o}."),
            "echo {w} > {o}", lambda rng: {"w": rng.choice(_WORDS), "o": _file(rng)}),
    Generic("seq", ("Put the numbers {a} through {b} in {o}, one on each line.",
                    "List every whole number from {a} up to {b} in {o}."),
            "seq {a} {b} > {o}", _range),
    Generic("upper", ("Save {a} in capital letters as {o}.",),
            "tr a-z A-Z < {a} > {o}", _src_out),
    Generic("lower", ("Save {a} in small letters as {o}.",),
            "tr A-Z a-z < {a} > {o}", _src_out),
    Generic("tac", ("Save {a} with its last line first as {o}.",), "tac {a} > {o}", _src_out),
    Generic("cat-n", ("Save {a} with a number before each line as {o}.",),
            "cat -n {a} > {o}", _src_out),
    Generic("concat", ("Join {a} and {b} into {o}.", "Put {a} followed by {b} in {o}."),
            "cat {a} {b} > {o}", _three),
    Generic("chmod", ("Let {a} be run as a program.", "Give {a} execute permission."),
            "chmod +x {a}", _one),
    Generic("sha256", ("Save the SHA-256 sum of {a} in {o}.",), "sha256sum {a} > {o}",
            _src_out),
    Generic("md5", ("Save the MD5 sum of {a} in {o}.",), "md5sum {a} > {o}", _src_out),
    Generic("cut", ("Save field {n} of each line of {a} (separator {s}) to {o}.",),
            "cut -d '{s}' -f {n} {a} > {o}", _cut),
    Generic("ls", ("Save the names of the files here in {o}.",), "ls > {o}",
            lambda rng: {"o": _file(rng)}),
)


def generic_episode(task: Generic, rng: random.Random) -> dict[str, Any]:
    """One pretraining row: the model agent's conversation for a generic task."""
    prompt, command = task.sample(rng)
    messages = oracle_conversation(prompt, command, format_output(0, "", ""), _TIME_LEFT,
                                   _TIME_LEFT)
    return {"messages": [m.model_dump(exclude_none=True) for m in messages], "tools": TOOLS,
            "task": task.name}


def pretraining_corpus(seed: int, episodes: int, copy_share: float = 0.5) -> list[dict[str, Any]]:
    """`episodes` generic episodes: about `copy_share` of them copy tasks, the rest drawn
    evenly over the generic tasks."""
    rng = random.Random(f"pretrain:{seed}")
    rows = []
    for i in range(episodes):
        pool = COPY if rng.random() < copy_share else GENERIC
        rows.append(generic_episode(pool[i % len(pool)], rng))
    return rows


def corpus_texts(rows: Iterable[dict[str, Any]]) -> list[str]:
    """The text of the rows' messages (for the tokenizer and the leakage check)."""
    out: list[str] = []
    for row in rows:
        for m in row["messages"]:
            if m.get("content"):
                out.append(m["content"])
            for call in m.get("tool_calls") or []:
                args = call["function"].get("arguments", {})
                out.append(args if isinstance(args, str) else json.dumps(args))
    return out


def held_out_values_in(texts: Sequence[str]) -> list[str]:
    """Held-out parameter values (stems, markers) that occur as words in `texts`."""
    blob = "\n".join(texts).lower()
    return sorted(v for v in _forbidden_names() if re.search(rf"\b{re.escape(v)}\b", blob))
