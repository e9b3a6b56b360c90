"""The micro base model shipped with the package, so that no one pretrains it again.

Pretraining the default base takes 15-25 minutes on two CPU cores; `arena demo` on a fresh
machine would spend most of its first run there. The base does not depend on the
challenge's seed (the held-out pools are the same for every seed, and no base ever sees
a value of them), so one base, built once by `scripts/micro_base.py build` from this
package's own code, is checked in here as data: `model.safetensors` (float32), the
tokenizer, `micro_model.json` (its spec) and `pretraining.json` (its key: the hash of
the spec, the tokenizer and pretraining corpora and the pretraining format; with the
torch version, the threads and the losses it was made with).

It is used only when the key that the current code computes for the asked spec is the
one recorded: any change to the corpus, the spec or the procedure makes a different key,
and the base is then built (and cached per machine) as before, until it is rebuilt and
checked in again. `scripts/micro_base.py check` rebuilds it from nothing and compares.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

WEIGHTS = "model.safetensors"
REPORT = "pretraining.json"


def shipped_dir() -> Path:
    """Where the shipped base lives inside the package (it may be absent or stale)."""
    return Path(str(resources.files("posttrain_arena.challenges.micro").joinpath("base")))


def shipped_key() -> str | None:
    """The key the shipped base was built from, or None when there is none."""
    report = shipped_dir() / REPORT
    weights = shipped_dir() / WEIGHTS
    # A checkout without its large files (an LFS pointer, a partial copy) has no base.
    if not report.is_file() or not weights.is_file() or weights.stat().st_size < 1 << 20:
        return None
    try:
        key = json.loads(report.read_text(encoding="utf-8")).get("key")
    except ValueError:
        return None
    return key if isinstance(key, str) else None


def shipped_base(key: str) -> Path | None:
    """The shipped base's directory when it was built from `key`, else None."""
    return shipped_dir() if shipped_key() == key else None
