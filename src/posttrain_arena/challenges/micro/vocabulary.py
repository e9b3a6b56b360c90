"""The words the micro base's pretraining corpus is made of: made-up names, random letter
strings, content words and numbers, none of them a value the held-out suite uses
(`corpus_leaks.py`), so the model learns to copy an unseen name from the prompt, not to
recall a few it has seen."""

from __future__ import annotations

import random

from posttrain_arena.challenges.micro.corpus_leaks import (
    held_out_numbers,
    held_out_values,
    split_values,
)

_ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z",
           "br", "dr", "kl", "pl", "st", "tr")
_VOWELS = ("a", "e", "i", "o", "u")
_LETTERS = "abcdefghijklmnopqrstuvwxyz"
# Words of file contents and search patterns (never a held-out marker or stem).
WORDS = ("apple", "berry", "cedar", "dune", "ember", "frost", "grove", "harbor", "iris",
         "juniper", "kettle", "lemon", "maple", "nectar", "olive", "pepper", "quartz",
         "raven", "sage", "thistle", "umber", "velvet", "willow", "yarrow", "zephyr")


def number(rng: random.Random, low: int, high: int) -> int:
    """A number in [low, high] that no held-out task asks for."""
    while True:
        n = rng.randint(low, high)
        if n not in held_out_numbers():
            return n


def allowed(word: str) -> bool:
    """Not containing a held-out value, and not a training value (as a whole word)."""
    return not any(b in word for b in held_out_values()) and word not in split_values()


def syllable_name(rng: random.Random) -> str:
    """A pronounceable made-up name of two or three syllables (no split's value)."""
    while True:
        name = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS)
                       for _ in range(rng.choice((2, 2, 3))))
        if allowed(name):
            return name


def random_word(rng: random.Random, *, upper: bool = False) -> str:
    """A string of 2-9 random letters (no split's value): names with every letter
    pattern, which the model can only reproduce by copying them."""
    while True:
        word = "".join(rng.choice(_LETTERS) for _ in range(rng.randint(2, 9)))
        if allowed(word):
            return word.upper() if upper else word

