"""The micro challenge: procedurally generated task families, a sealed held-out suite,
a relevant and an off-topic collection, and a tiny model built from nothing.

`build_micro(workdir, seed)` writes it all; `run_demo(...)` runs the recipe on it.
"""

from posttrain_arena.challenges.micro.build import (
    COLLECTIONS,
    OFFTOPIC,
    RELEVANT,
    MicroChallenge,
    MicroSizes,
    build_micro,
    load_micro,
)

__all__ = [
    "COLLECTIONS",
    "OFFTOPIC",
    "RELEVANT",
    "MicroChallenge",
    "MicroSizes",
    "build_micro",
    "load_micro",
]
