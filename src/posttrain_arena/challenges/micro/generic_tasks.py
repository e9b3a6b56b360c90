"""The generic shell tasks the micro base is pretrained on (`pretrain_corpus.py`).

Generic tasks (copy, move, count lines, sort, keep the first lines, search, number
ranges, checksums, ...) each come in several wordings that are none of the families';
copy tasks (`COPY`: print these words, create/remove/show these files, ...) repeat
several fresh random strings of the prompt in their command. Names and words come from
`vocabulary.py` and the requests' own words, never a split's value.
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Callable
from dataclasses import dataclass

from posttrain_arena.challenges.micro.corpus_leaks import held_out_numbers, held_out_values
from posttrain_arena.challenges.micro.vocabulary import (
    WORDS,
    number,
    random_word,
    syllable_name,
)

_EXTENSIONS = ("txt", "log", "csv", "dat", "md", "cfg", "tsv", "out", "lst", "py", "sh")


@functools.cache
def request_words() -> tuple[str, ...]:
    """Words the requests of the corpus are made of ("sorted", "lines", "first", ...),
    none a held-out value: real file names are often words of the request itself, and a
    name that is one word token has to be copied as such (measured: a base that had
    only seen made-up names wrote `to.txt` for "write them to sorted.txt")."""
    banned = held_out_values()
    words = {w.lower() for g in (*GENERIC, *COPY) for text in g.wordings
             for w in re.findall(r"[A-Za-z]+", text)}
    placeholders = {w for g in (*GENERIC, *COPY) for text in g.wordings
                    for w in re.findall(r"\{(\w+)\}", text)}
    return tuple(sorted(w for w in words - placeholders
                        if len(w) >= 3 and not any(b in w for b in banned)))


def _stem(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.35:
        return syllable_name(rng)
    if roll < 0.7:
        return random_word(rng)
    return rng.choice(request_words())


def _file(rng: random.Random) -> str:
    return f"{_stem(rng)}.{rng.choice(_EXTENSIONS)}"


def _two_files(rng: random.Random) -> tuple[str, str]:
    a = _file(rng)
    b = _file(rng)
    while b == a:
        b = _file(rng)
    return a, b


# Many wordings per generic task, composed from a verb, what to write and where: a tiny
# model only learns to map a request's meaning (not one memorised sentence) to a program
# when it has seen it asked in many ways. A composed wording that shares five words in a
# row with any family's prompt (names and numbers aside) is dropped (`family_grams`), so
# the families' own wordings stay what a collection teaches.
_VERBS = ("Write", "Save", "Put", "Store", "Place")
_DESTS = ("to {o}", "into {o}", "in {o}", "as {o}")
_GRAM = 5


def _skeleton(text: str) -> list[str]:
    """`text`'s words, lower-cased, with file names, placeholders and numbers as one mark."""
    words = [w.rstrip(".") for w in re.findall(r"[\w./{}-]+", text.split("\n\n[time left")[0])]
    return ["\u00b7" if re.fullmatch(r"\{\w+\}|[\w-]+\.\w+|\d+", w) or "{" in w
            else w.lower() for w in words]


def grams(text: str, n: int = _GRAM) -> set[tuple[str, ...]]:
    """The `n`-word runs of `text`'s skeleton."""
    words = _skeleton(text)
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


@functools.cache
def family_grams() -> frozenset[tuple[str, ...]]:
    """Five-word runs of every family's prompts (training-pool instances; the held-out
    ones are worded the same)."""
    from posttrain_arena.challenges.micro.families import ALL_FAMILIES, TRAIN

    rng = random.Random("family-grams")
    out: set[tuple[str, ...]] = set()
    for fam in ALL_FAMILIES:
        for _ in range(30):
            inst = fam.generate(rng, TRAIN)
            out |= grams(inst.prompt.replace(".", " . "))
            out |= grams(inst.prompt)
    return frozenset(out)


def _composed(*objects: str) -> tuple[str, ...]:
    """Wordings "VERB OBJECT DEST." and "Take OBJECT and VERB it DEST." for each object,
    minus those that share a five-word run with a family's prompt."""
    out = []
    for obj in objects:
        for verb in _VERBS:
            for dest in _DESTS:
                out.append(f"{verb} {obj} {dest}.")
            out.append(f"Take {obj} and {verb.lower()} it {_DESTS[0]}.")
    banned = family_grams()
    return tuple(w for w in out if not grams(w) & banned)


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
    return {**_src_out(rng), "n": number(rng, 1, 30)}


def _src_out_word(rng: random.Random) -> dict[str, object]:
    return {**_src_out(rng), "w": rng.choice(WORDS)}


def _range(rng: random.Random) -> dict[str, object]:
    a = number(rng, 0, 40)
    b = a + rng.randint(1, 30)
    while b in held_out_numbers():
        b = a + rng.randint(1, 30)
    return {"a": a, "b": b, "o": _file(rng)}


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
    return {**_src_out(rng), "n": number(rng, 1, 12), "s": rng.choice((",", ":", ";"))}


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
                      *_composed("the number of lines in {a}", "the line count of {a}",
                                 "how many lines {a} has")), "wc -l < {a} > {o}", _src_out),
    Generic("words", ("How many words are in {a}? Save the count as {o}.",
                      *_composed("the number of words in {a}", "the word count of {a}",
                                 "how many words {a} has", "the count of words of {a}")),
            "wc -w < {a} > {o}", _src_out),
    Generic("chars", ("How many bytes is {a}? Save the number in {o}.",
                      *_composed("the number of bytes in {a}", "the byte count of {a}")),
            "wc -c < {a} > {o}", _src_out),
    Generic("sort", ("Order the rows of {a} from A to Z into {o}.",
                     "Order {a} from A to Z and save the result as {o}.",
                     *_composed("the lines of {a} sorted", "the sorted lines of {a}",
                                "the rows of {a} in alphabetical order",
                                "{a} sorted from A to Z", "{a}, sorted alphabetically")),
            "sort {a} > {o}", _src_out),
    Generic("sort-r", ("Order the rows of {a} from Z to A into {o}.",
                       *_composed("the lines of {a} sorted in reverse",
                                  "{a} sorted from Z to A")),
            "sort -r {a} > {o}", _src_out),
    Generic("sort-n", ("Order the numbers in {a} from small to large into {o}.",
                       *_composed("the numbers in {a} sorted from small to large",
                                  "{a} sorted numerically", "the numbers of {a} in order")),
            "sort -n {a} > {o}", _src_out),
    Generic("uniq", ("Save each distinct line of {a} once, in order, to {o}.",
                     *_composed("each distinct line of {a} once, sorted",
                                "the unique lines of {a}, sorted",
                                "the sorted distinct lines of {a}")),
            "sort -u {a} > {o}", _src_out),
    Generic("head", ("Keep only the top {n} lines of {a} in {o}.",
                     *_composed("the first {n} lines of {a}", "the top {n} lines of {a}",
                                "the opening {n} lines of {a}", "the first {n} rows of {a}")),
            "head -n {n} {a} > {o}", _src_out_n),
    Generic("tail", ("Keep only the bottom {n} lines of {a} in {o}.",
                     *_composed("the last {n} lines of {a}", "the bottom {n} lines of {a}",
                                "the closing {n} lines of {a}", "the final {n} rows of {a}")),
            "tail -n {n} {a} > {o}", _src_out_n),
    Generic("grep", ("Find {w} in {a} and put the matching lines in {o}.",
                     *_composed("every line of {a} that contains {w}",
                                "the lines of {a} mentioning {w}",
                                "the rows of {a} with {w} in them")),
            "grep {w} {a} > {o}", _src_out_word),
    Generic("grep-v", ("Save every row of {a} not mentioning {w} to {o}.",
                       *_composed("every line of {a} without {w}",
                                  "the lines of {a} that lack {w}")),
            "grep -v {w} {a} > {o}", _src_out_word),
    Generic("echo", ("Write the word {w} into {o}.", "Put {w} in the file {o}."),
            "echo {w} > {o}", lambda rng: {"w": rng.choice(WORDS), "o": _file(rng)}),
    Generic("seq", ("List every whole number from {a} up to {b} in {o}.",
                    *_composed("the numbers {a} through {b}, one on each line",
                               "every integer from {a} to {b}, each on its own line",
                               "the whole numbers from {a} up to {b}")),
            "seq {a} {b} > {o}", _range),
    Generic("upper", ("Save {a} in capital letters as {o}.",
                      *_composed("{a} in capital letters", "{a} turned to upper case")),
            "tr a-z A-Z < {a} > {o}", _src_out),
    Generic("lower", ("Save {a} in small letters as {o}.",
                      *_composed("{a} in small letters", "{a} turned to lower case")),
            "tr A-Z a-z < {a} > {o}", _src_out),
    Generic("tac", ("Save {a} with its last line first as {o}.",
                    *_composed("{a} with its last line first", "{a} upside down, line by line",
                               "the lines of {a} from last to first")),
            "tac {a} > {o}", _src_out),
    Generic("cat-n", ("Save {a} with a number before each line as {o}.",
                      *_composed("{a} with a number before each line",
                                 "{a} with its lines numbered")),
            "cat -n {a} > {o}", _src_out),
    Generic("concat", ("Join {a} and {b} into {o}.", "Put {a} followed by {b} in {o}."),
            "cat {a} {b} > {o}", _three),
    Generic("chmod", ("Let {a} be run as a program.", "Give {a} execute permission."),
            "chmod +x {a}", _one),
    Generic("sha256", ("Save the SHA-256 sum of {a} in {o}.",
                       *_composed("the SHA-256 sum of {a}", "the SHA-256 hash of {a}")),
            "sha256sum {a} > {o}",
            _src_out),
    Generic("md5", ("Save the MD5 sum of {a} in {o}.",
                    *_composed("the MD5 sum of {a}", "the MD5 hash of {a}")),
            "md5sum {a} > {o}", _src_out),
    Generic("cut", ("Save field {n} of each line of {a} (separator {s}) to {o}.",
                    *_composed("field {n} of each line of {a} (separator {s})",
                               "column {n} of {a}, split on {s}")),
            "cut -d '{s}' -f {n} {a} > {o}", _cut),
    Generic("ls", ("Save the names of the files here in {o}.",), "ls > {o}",
            lambda rng: {"o": _file(rng)}),
)
