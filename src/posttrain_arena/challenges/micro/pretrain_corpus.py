"""The micro base model's pretraining corpus: generic shell use, disjoint from the suite.

A base model that has never seen a shell scores 0 on any suite, so neither control can
fail: nothing can lower a blank baseline, and a lucky collection cannot be told from a
good one. The micro base model is therefore *pretrained* during the build
(`basebuild.py`, with the loop in `basetrain.py`) on a broad corpus of generic shell
episodes, in the model agent's own conversation format:

- generic tasks (`generic_tasks.py`: copy, move, count lines, sort, keep the first
  lines, search, number ranges, checksums, ...), each in several wordings that are none
  of the families';
- file names and words from generated vocabularies (`vocabulary.py`: syllable names and
  random letter strings), so the model learns to *copy* an unseen name from the prompt
  into the command (the skill every held-out instance needs), not to recall a few names
  it has seen;
- copy tasks (`COPY`: print these words, create/remove/show these files, ...) whose
  command repeats several fresh random strings of the prompt: a dense signal that only
  in-context copying can predict, about half of the episodes;
- nothing of the held-out suite: no held-out parameter value (stem, marker) occurs as a
  name or word, no family's wording is used, and the build refuses a corpus in which a
  suite prompt or command occurs (`corpus_leaks.py`).

Some generic tasks are close to suite families in what they do (sort a file, count its
words, keep its first lines, write a range), as generic shell use is; others to the
off-topic families. So the base model solves some suite tasks some of the time (a
baseline above 0 that an off-topic collection can lower), and learning a family's own
wording and program is what a relevant collection adds.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from typing import Any

from posttrain_arena.agents.model import TOOLS, format_output
from posttrain_arena.agents.teacher import oracle_conversation
from posttrain_arena.challenges.micro.generic_tasks import COPY, GENERIC, Generic

# Seconds shown as "time left" in pretraining episodes: the micro tasks' agent limit,
# so the rendered notes look like the ones the agent sees at evaluation.
_TIME_LEFT = 120.0


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

