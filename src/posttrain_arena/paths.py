"""Where the arena keeps what it builds once per machine (one place for the fact).

`$ARENA_CACHE_DIR`, default `~/.cache/posttrain-arena`: local images, packages unpacked
on Ray nodes, the micro challenge's pretrained base models and its default work
directory. Nothing here is a secret or a result; deleting it costs only time.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_home() -> Path:
    """$ARENA_CACHE_DIR, default ~/.cache/posttrain-arena (not created)."""
    base = os.environ.get("ARENA_CACHE_DIR") or str(Path.home() / ".cache" / "posttrain-arena")
    return Path(base).expanduser()
