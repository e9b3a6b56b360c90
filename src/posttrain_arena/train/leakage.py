"""Leakage gate: keep held-out tasks (and near copies of them) out of training.

A training task is excluded when

* its canonical content hash equals a held-out task's (an exact copy, under any name), or
* its prompt and verifier text nearly duplicate a held-out task's: after normalising
  (lowercase; the task's own name and numbers removed; punctuation to spaces), the
  Jaccard similarity of the word 3-shingles of prompt + verifier is at least the
  threshold (0.8 by default) *and* the prompts alone are at least half alike.

The second condition keeps apart tasks that share a generic verifier (one harness that
reads expected values from data files) but ask for different things; a copy that was
renamed and lightly reworded still matches both. Candidates are found through an
inverted index, so the gate stays fast at thousands of tasks.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field

VERIFIER_TEXT_FILES = ("verifier.py", "test_outputs.py", "test.sh")
MAX_TEXT_BYTES = 256 * 1024
PROMPT_FLOOR = 0.5

_WORD = re.compile(r"[a-z_]+")


@dataclass(frozen=True)
class LeakageDoc:
    """What the gate compares about one task."""

    name: str
    checksum: str
    prompt: str
    verifier: str

    @property
    def text(self) -> str:
        return f"{self.prompt}\n{self.verifier}"


class Exclusion(BaseModel):
    """One training task kept out of training, and why."""

    task: str = Field(description="Training task name")
    reason: str = Field(description="'exact-copy' or 'near-duplicate'")
    held_out_task: str = Field(description="The held-out task it duplicates")
    similarity: float = Field(description="Shingle Jaccard similarity (1.0 for exact copies)")
    detail: str = Field(description="Human-readable explanation")


def doc_for_task(name: str, checksum: str, prompt: str, root: Path) -> LeakageDoc:
    """Gather prompt + verifier text of a task directory (bounded reads, no execution)."""
    parts: list[str] = []
    verifier = root / "verifier"
    for fname in VERIFIER_TEXT_FILES:
        path = verifier / fname
        if path.is_file() and not path.is_symlink():
            with path.open("rb") as fh:
                parts.append(fh.read(MAX_TEXT_BYTES).decode("utf-8", "replace"))
    return LeakageDoc(name=name, checksum=checksum, prompt=prompt, verifier="\n".join(parts))


def normalise(text: str, name: str = "") -> list[str]:
    """Lowercase words with numbers, punctuation and the task's own name removed."""
    lowered = text.lower()
    for variant in _name_variants(name):
        lowered = lowered.replace(variant, " ")
    return _WORD.findall(lowered.replace("_", " "))


def _name_variants(name: str) -> list[str]:
    if not name:
        return []
    base = name.lower()
    words = [w for w in re.split(r"[-_\s.]+", base) if w]
    variants = {base, "-".join(words), "_".join(words), " ".join(words), "".join(words)}
    return sorted((v for v in variants if len(v) >= 3), key=len, reverse=True)


def shingles(words: Sequence[str], size: int = 3) -> set[str]:
    """Word n-grams; a text shorter than `size` words is one shingle."""
    if len(words) < size:
        return {" ".join(words)} if words else set()
    return {" ".join(words[i : i + size]) for i in range(len(words) - size + 1)}


def jaccard(a: set[str], b: set[str]) -> float:
    if not a and not b:
        return 1.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


def find_leaks(
    training: Sequence[LeakageDoc],
    held_out: Sequence[LeakageDoc],
    *,
    threshold: float = 0.8,
    shingle_size: int = 3,
) -> list[Exclusion]:
    """Every training task that duplicates a held-out task, with the reason."""
    by_checksum = {doc.checksum: doc.name for doc in held_out}
    train_sh = {d.name: shingles(normalise(d.text, d.name), shingle_size) for d in training}
    held_sh = {d.name: shingles(normalise(d.text, d.name), shingle_size) for d in held_out}
    held_by_name = {d.name: d for d in held_out}
    index: dict[str, list[str]] = defaultdict(list)
    for name, sh in held_sh.items():
        for s in sh:
            index[s].append(name)

    out: list[Exclusion] = []
    for doc in training:
        twin = by_checksum.get(doc.checksum)
        if twin is not None:
            out.append(Exclusion(task=doc.name, reason="exact-copy", held_out_task=twin,
                                 similarity=1.0, detail=f"same canonical content hash "
                                 f"{doc.checksum[:19]}... as held-out task {twin}"))
            continue
        mine = train_sh[doc.name]
        shared: Counter[str] = Counter()
        for s in mine:
            for name in index.get(s, ()):
                shared[name] += 1
        best_name, best = "", 0.0
        for name, inter in sorted(shared.items()):
            score = inter / (len(mine) + len(held_sh[name]) - inter)
            if score >= threshold and score > best and _prompt_similarity(
                    doc, held_by_name[name], shingle_size) >= PROMPT_FLOOR:
                best_name, best = name, score
        if best_name:
            out.append(Exclusion(task=doc.name, reason="near-duplicate", held_out_task=best_name,
                                 similarity=round(best, 4),
                                 detail=f"prompt+verifier text {best:.0%} similar (word "
                                 f"{shingle_size}-shingles, threshold {threshold:.0%}) to "
                                 f"held-out task {best_name}"))
    return out


def _prompt_similarity(a: LeakageDoc, b: LeakageDoc, size: int) -> float:
    return jaccard(shingles(normalise(a.prompt, a.name), size),
                   shingles(normalise(b.prompt, b.name), size))
