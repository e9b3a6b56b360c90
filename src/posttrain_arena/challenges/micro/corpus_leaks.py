"""What no corpus of the micro base may hold, and the check that refuses one that does.

The base must have seen nothing of the held-out suite: no suite prompt or command
(`suite_text_in`), no parameter value of either split (stem, marker) as a word
(`pool_values_in`: the base knows neither the held-out names nor the training ones),
and, in its pretraining corpus, no number a held-out task asks for
(`held_out_numbers_in`). `refuse_leaks` raises on any of them; the corpora's
vocabulary (`vocabulary.py`) draws around the same facts.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence

from posttrain_arena.challenges.micro.families import HELD_OUT, TRAIN


@functools.cache
def held_out_values() -> frozenset[str]:
    """Held-out parameter values: never a name, word or pattern of the corpus."""
    return frozenset(v.lower() for v in (*HELD_OUT.stems, *HELD_OUT.markers))


@functools.cache
def split_values() -> frozenset[str]:
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



def held_out_numbers_in(texts: Iterable[str]) -> list[int]:
    """Held-out numbers that occur as a run of digits anywhere in `texts` (the pretraining
    episodes hold no file data, so every number in them is a parameter of a request)."""
    pattern = re.compile(r"\d+")  # every run of digits, even inside a word
    found = {int(m) for text in texts for m in pattern.findall(text)}
    return sorted(found & held_out_numbers())



def pool_values_in(texts: Sequence[str]) -> list[str]:
    """Parameter values of either split (stems, markers) that occur as words in `texts`."""
    blob = "\n".join(texts).lower()
    return sorted(v for v in split_values() if re.search(rf"\b{re.escape(v)}\b", blob))


def suite_text_in(corpus: Sequence[str], forbidden: Iterable[str]) -> list[str]:
    """The `forbidden` texts (held-out prompts, commands) that occur in `corpus`."""
    blob = "\x00".join(corpus)
    return [text for text in forbidden if text and text in blob]



def refuse_leaks(corpus: Sequence[str], pre_texts: Sequence[str],
                  forbidden: Iterable[str]) -> None:
    leaked = suite_text_in(corpus, forbidden)
    if leaked:
        raise RuntimeError(f"the tokenizer or pretraining corpus holds {len(leaked)} "
                           f"held-out text(s), e.g. {leaked[0]!r}; build them from "
                           "COMMON-pool and generic text only")
    values = pool_values_in(corpus)
    if values:
        raise RuntimeError(f"the tokenizer or pretraining corpus uses the families' "
                           f"parameter values as words: {values}; the base must have seen "
                           "neither split's")
    numbers = held_out_numbers_in(pre_texts)
    if numbers:
        raise RuntimeError(f"the pretraining corpus holds numbers that held-out tasks ask "
                           f"for: {numbers}; draw its parameters with pretrain._number")

