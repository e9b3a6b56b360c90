"""The micro challenge: procedurally generated task families, a sealed held-out suite,
the collections of the protocol of controls, and a tiny model built from nothing.

`build_micro(workdir, seed)` writes it all; `run_demo(...)` runs the recipe on it.
"""

from posttrain_arena.challenges.micro.build import (
    BROKEN,
    COLLECTIONS,
    CONTROLS,
    OFFTOPIC,
    PARTIAL,
    RELEVANT,
    RELEVANT_SEED1,
    MicroChallenge,
    MicroSizes,
    build_micro,
    load_micro,
)

__all__ = [
    "BROKEN",
    "COLLECTIONS",
    "CONTROLS",
    "OFFTOPIC",
    "PARTIAL",
    "RELEVANT",
    "RELEVANT_SEED1",
    "MicroChallenge",
    "MicroSizes",
    "build_micro",
    "load_micro",
]
