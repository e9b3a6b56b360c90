"""The micro challenge's protocol seeds, declared in `challenge.toml` before any control
ran on them (see the comment there), and what `arena demo` uses them for.

The protocol of controls runs on `declared().seed` (the challenge seed) with the A/A
control on `declared().aa_seed`; `arena demo` and `arena admin create-micro-challenge`
build that seed unless told otherwise, so the controls measured for it (the shipped
`controls.json`) describe the challenge a user runs. On any other challenge seed the
A/A control's runtime seed keeps the same distance from the challenge seed.
"""

from __future__ import annotations

import tomllib
from functools import cache
from importlib import resources

from pydantic import BaseModel, ConfigDict, Field

DEFINITION = "challenge.toml"


class Protocol(BaseModel):
    """The declared seeds of the protocol of controls."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    seed: int = Field(ge=0, description="Challenge seed: the generator's, and the runtime "
                      "seed of every control but the A/A rerun")
    aa_seed: int = Field(ge=0, description="Runtime seed of the A/A rerun")

    def aa_seed_for(self, challenge_seed: int) -> int:
        """The A/A rerun's runtime seed for a challenge built from `challenge_seed`: the
        declared one on the declared seed, the same distance from it on any other."""
        return challenge_seed + (self.aa_seed - self.seed)

    def seeds(self) -> dict[str, int]:
        """The declared seeds by what they seed (recorded with the controls)."""
        return {"challenge": self.seed, "runtime": self.seed, "aa_runtime": self.aa_seed}


@cache
def declared() -> Protocol:
    """The protocol seeds declared in the challenge definition shipped with the package."""
    text = resources.files("posttrain_arena.challenges.micro").joinpath(DEFINITION)
    data = tomllib.loads(text.read_text(encoding="utf-8"))
    proto = Protocol.model_validate(data["protocol"])
    if proto.aa_seed == proto.seed:
        raise ValueError(f"{DEFINITION}: the A/A rerun needs a runtime seed of its own")
    return proto
