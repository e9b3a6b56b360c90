"""The micro challenge's base model, built from nothing with this package's code, or copied.

The tokenizer is trained (`tokenizer.py`), the model randomly initialised
(`tinymodel.py`) and, when its spec asks for pretraining episodes, pretrained on
generic shell episodes disjoint from the suite (`pretrain_corpus.py`) with the
project's own loop (`basetrain.py`), so that the base model is not blank; a corpus
that holds anything of the held-out suite is refused (`corpus_leaks.py`). Nothing is
downloaded. The default base ships with the package (`shipped.py`) and is copied when
this code would build the same (same KEY, the hash of everything it is made from); any
other is built once per machine and cached under `$ARENA_CACHE_DIR/micro-base/KEY`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from filelock import FileLock

from posttrain_arena.challenges.micro.basetrain import StepCallback, pretrain_base
from posttrain_arena.challenges.micro.corpus_leaks import refuse_leaks
from posttrain_arena.challenges.micro.pretrain_corpus import corpus_texts, pretraining_corpus
from posttrain_arena.challenges.micro.shipped import shipped_base
from posttrain_arena.challenges.micro.tinymodel import TinyModelSpec, build_model
from posttrain_arena.challenges.micro.tokenizer import build_tokenizer, tokenizer_corpus
from posttrain_arena.paths import cache_home

PRETRAIN_FORMAT = 4  # bump when the pretraining corpus or procedure changes


def base_model_key(spec: TinyModelSpec, corpus: Sequence[str], device: str = "cpu") -> str:
    """Identity of a built base model: its spec, the tokenizer corpus, the format, and the
    device it is pretrained on when that is not the CPU (the shipped base's is)."""
    h = hashlib.sha256()
    h.update(json.dumps([PRETRAIN_FORMAT, spec.model_dump(mode="json")],
                        sort_keys=True).encode())
    if device != "cpu":
        h.update(device.encode())
    for text in corpus:
        h.update(hashlib.sha256(text.encode()).digest())
    return h.hexdigest()[:24]


def write_tiny_model(out_dir: Path, spec: TinyModelSpec | None = None,
                     corpus: Sequence[str] | None = None,
                     forbidden: Iterable[str] = (), *, cache: bool = True,
                     on_step: StepCallback | None = None, device: str = "cpu") -> Path:
    """Train the tokenizer, initialise the model, pretrain it on `device` and save both to
    `out_dir`.

    `forbidden` (the held-out suite's prompts and commands) must not occur in the
    tokenizer's corpus nor in the pretraining corpus, no parameter value of either split
    (stem, marker) may be a word of either, and no number a held-out task asks for may
    occur in the pretraining corpus: RuntimeError if one does. With `cache`, a base made
    from the same spec and corpus is copied instead of trained again: the one shipped with
    the package (`shipped.py`) when its key is this one, else one this machine built
    before; a build holds a file lock, so two processes never pretrain one base at once
    (the second waits and copies the first's). `on_step` hears how far pretraining is
    (every 10 steps and at the end).
    """
    spec = spec or TinyModelSpec()
    rows = pretraining_corpus(spec.seed, spec.pretrain_episodes)
    pre_texts = corpus_texts(rows)
    corpus = list(corpus or tokenizer_corpus(spec.seed)) + pre_texts
    refuse_leaks(corpus, pre_texts, forbidden)
    key = base_model_key(spec, corpus, device)
    if not cache:
        _build(out_dir, key, spec, corpus, rows, on_step, device)
        return out_dir
    shipped = shipped_base(key)
    if shipped is not None:
        _copy_model(shipped, out_dir)
        return out_dir
    cached = cache_home() / "micro-base" / key
    cached.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(cached) + ".lock"):
        if not (cached / "micro_model.json").is_file():
            _build(cached, key, spec, corpus, rows, on_step, device)
    _copy_model(cached, out_dir)
    return out_dir


def _build(out_dir: Path, key: str, spec: TinyModelSpec, corpus: Sequence[str],
           rows: list[dict[str, Any]], on_step: StepCallback | None, device: str) -> None:
    """Build the base from nothing into `out_dir` (replaced atomically)."""
    import torch

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".micro-base-", dir=out_dir.parent))
    try:
        tokenizer = build_tokenizer(corpus, spec.vocab_size)
        model = build_model(tokenizer, spec)
        init = work / "init"
        init.mkdir()
        tokenizer.save_pretrained(init)
        model.save_pretrained(init, safe_serialization=True)
        report: dict[str, Any] = {"key": key, "episodes": len(rows), "device": device,
                                  "torch": torch.__version__}
        built = init
        if rows:
            report.update(pretrain_base(init, rows, spec, work / "pretrain", on_step, device))
            built = work / "pretrain" / "policy"
        (built / "micro_model.json").write_text(spec.model_dump_json(indent=2) + "\n")
        (built / "pretraining.json").write_text(json.dumps(report, indent=2) + "\n")
        _copy_model(built, out_dir)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _copy_model(src: Path, dest: Path) -> None:
    """Replace `dest` with a copy of the model directory `src` (atomically renamed)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}-", dir=dest.parent))
    shutil.copytree(src, tmp, dirs_exist_ok=True)
    if dest.exists():
        shutil.rmtree(dest)
    os.replace(tmp, dest)
