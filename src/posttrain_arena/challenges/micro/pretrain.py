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

import functools
import json
import random
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from posttrain_arena.agents.model import TOOLS, format_output
from posttrain_arena.agents.teacher import oracle_conversation
from posttrain_arena.challenges.micro.families import HELD_OUT, TRAIN

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


@functools.cache
def _forbidden_names() -> frozenset[str]:
    """Held-out parameter values: never a name, word or pattern of the corpus."""
    return frozenset(v.lower() for v in (*HELD_OUT.stems, *HELD_OUT.markers))


@functools.cache
def _split_values() -> frozenset[str]:
    """The parameter values of both splits (stems, markers), none of which the corpus may
    use as a word: the base has seen neither the held-out names nor the training ones."""
    return frozenset(v.lower() for pools in (TRAIN, HELD_OUT)
                     for v in (*pools.stems, *pools.markers))


@functools.cache
def held_out_numbers() -> frozenset[int]:
    """Every number a held-out task asks for (columns, line counts, range ends): never a
    number of the corpus, so the base has not seen `head -n 7` or `seq 8 22` asked and
    done, for any challenge seed (the held-out pools do not depend on the seed)."""
    return frozenset((*HELD_OUT.columns, *HELD_OUT.heads, *HELD_OUT.starts, *HELD_OUT.ends))


def _number(rng: random.Random, low: int, high: int) -> int:
    """A number in [low, high] that no held-out task asks for."""
    while True:
        n = rng.randint(low, high)
        if n not in held_out_numbers():
            return n


def held_out_numbers_in(texts: Iterable[str]) -> list[int]:
    """Held-out numbers that occur as a run of digits anywhere in `texts` (the pretraining
    episodes hold no file data, so every number in them is a parameter of a request)."""
    pattern = re.compile(r"\d+")  # every run of digits, even inside a word
    found = {int(m) for text in texts for m in pattern.findall(text)}
    return sorted(found & held_out_numbers())


def _allowed(word: str) -> bool:
    """Not containing a held-out value, and not a training value (as a whole word)."""
    return not any(b in word for b in _forbidden_names()) and word not in _split_values()


def syllable_name(rng: random.Random) -> str:
    """A pronounceable made-up name of two or three syllables (no split's value)."""
    while True:
        name = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS)
                       for _ in range(rng.choice((2, 2, 3))))
        if _allowed(name):
            return name


_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def random_word(rng: random.Random, *, upper: bool = False) -> str:
    """A string of 2-9 random letters (no split's value): names with every letter
    pattern, which the model can only reproduce by copying them."""
    while True:
        word = "".join(rng.choice(_LETTERS) for _ in range(rng.randint(2, 9)))
        if _allowed(word):
            return word.upper() if upper else word


@functools.cache
def request_words() -> tuple[str, ...]:
    """Words the requests of the corpus are made of ("sorted", "lines", "first", ...),
    none a held-out value: real file names are often words of the request itself, and a
    name that is one word token has to be copied as such (measured: a base that had
    only seen made-up names wrote `to.txt` for "write them to sorted.txt")."""
    banned = _forbidden_names()
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
    return {**_src_out(rng), "n": _number(rng, 1, 30)}


def _src_out_word(rng: random.Random) -> dict[str, object]:
    return {**_src_out(rng), "w": rng.choice(_WORDS)}


def _range(rng: random.Random) -> dict[str, object]:
    a = _number(rng, 0, 40)
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
    return {**_src_out(rng), "n": _number(rng, 1, 12), "s": rng.choice((",", ":", ";"))}


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
            "echo {w} > {o}", lambda rng: {"w": rng.choice(_WORDS), "o": _file(rng)}),
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


def generic_episode(task: Generic, rng: random.Random, *, whole: bool = True
                    ) -> dict[str, Any]:
    """One pretraining row: the model agent's conversation for a generic task; without
    `whole`, only up to the assistant's command (the tool result and `submit` turns,
    the same in every episode, are left out)."""
    prompt, command = task.sample(rng)
    messages = oracle_conversation(prompt, command, format_output(0, "", ""), _TIME_LEFT,
                                   _TIME_LEFT)
    if not whole:
        messages = messages[:3]
    return {"messages": [m.model_dump(exclude_none=True) for m in messages], "tools": TOOLS,
            "task": task.name}


def pretraining_corpus(seed: int, episodes: int, copy_share: float = 0.5) -> list[dict[str, Any]]:
    """`episodes` generic episodes: about `copy_share` of them copy tasks, the rest drawn
    evenly over the generic tasks. Copy tasks end at the command (their signal is the
    names it repeats); generic tasks are whole episodes, which teach the turns after it."""
    rng = random.Random(f"pretrain:{seed}")
    rows = []
    for i in range(episodes):
        copy = rng.random() < copy_share
        pool = COPY if copy else GENERIC
        rows.append(generic_episode(pool[i % len(pool)], rng, whole=not copy))
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


def pool_values_in(texts: Sequence[str]) -> list[str]:
    """Parameter values of either split (stems, markers) that occur as words in `texts`."""
    blob = "\n".join(texts).lower()
    return sorted(v for v in _split_values() if re.search(rf"\b{re.escape(v)}\b", blob))
