"""Leakage gate: keep held-out tasks, their answers and near copies of them out of training.

What a model can carry from a training task to a held-out one is the task's question
(prompt), its answer (the oracle solution) and the data it works on (the environment's
files). The gate compares all three, exactly and as near duplicates, and a training
task is excluded when

* ``exact-copy``: its canonical content hash equals a held-out task's (any name);
* ``same-solution``: its oracle solution, normalised (comments, the shebang and blank
  lines dropped, whitespace collapsed), equals a held-out task's: replaying it would
  pass the held-out task;
* ``same-environment``: its environment data (every file under ``environment/`` but the
  Dockerfile, plus the Dockerfile's instructions other than FROM/WORKDIR/COPY/ADD) holds
  exactly the same contents as a held-out task's, under any file names;
* ``near-duplicate``: after normalising (lowercase, the task's own name removed,
  punctuation to spaces, numbers *kept*: a different number is a different question)
  the Jaccard similarity of word 3-shingles is at least the threshold (0.8) for the
  prompts, or for the solutions' tokens, or, when the prompts are at least half alike,
  for the environment data.

Instances of one task family that differ in their parameters (another file, column,
count) and their data ask a different question with a different answer: they pass, and
that is what a collection teaching a skill is made of. The verifier is not compared on
its own: generic harnesses (one verifier reading expected values from a data file) are
shared by unrelated tasks. Candidates are found through inverted indexes, so the gate
stays fast at thousands of tasks.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, Field

VERIFIER_TEXT_FILES = ("verifier.py", "test_outputs.py", "test.sh")
MAX_TEXT_BYTES = 256 * 1024  # per file read
MAX_TREE_BYTES = 1024 * 1024  # per oracle/ or environment/ folder
PROMPT_FLOOR = 0.5
_BOILERPLATE = ("from ", "workdir ", "copy ", "add ")

_WORD = re.compile(r"[a-z0-9_]+")


@dataclass(frozen=True)
class LeakageDoc:
    """What the gate compares about one task.

    `solution` is the text of the oracle (every file under oracle/, in path order);
    `environment` maps each environment file to its text (Dockerfile included).
    """

    name: str
    checksum: str
    prompt: str
    verifier: str = ""
    solution: str = ""
    environment: Mapping[str, str] = field(default_factory=dict)

    @property
    def solution_key(self) -> str:
        """The normalised solution ('' when the task has none)."""
        return normalise_solution(self.solution)

    @property
    def data(self) -> str:
        """The environment's data: its files but the Dockerfile, and the Dockerfile's
        instructions that can carry data (RUN, ENV, ...), in a name-free order."""
        parts = sorted(text for path, text in self.environment.items()
                       if Path(path).name != "Dockerfile")
        for path, text in sorted(self.environment.items()):
            if Path(path).name == "Dockerfile":
                parts += [line.strip() for line in text.splitlines()
                          if line.strip() and not line.strip().lower().startswith(_BOILERPLATE)
                          and not line.strip().startswith("#")]
        return "\n".join(parts)

    @property
    def data_key(self) -> str:
        """Hash of the environment data ('' when there is none)."""
        data = self.data
        return hashlib.sha256(data.encode()).hexdigest() if data.strip() else ""


class Exclusion(BaseModel):
    """One training task kept out of training, and why."""

    task: str = Field(description="Training task name")
    reason: str = Field(description="'exact-copy', 'same-solution', 'same-environment' or "
                        "'near-duplicate'")
    held_out_task: str = Field(description="The held-out task it duplicates")
    similarity: float = Field(description="Shingle Jaccard similarity (1.0 for exact matches)")
    detail: str = Field(description="Human-readable explanation")


def _read_tree(root: Path) -> dict[str, str]:
    """Text of the regular files under `root` (no symlinks followed, bounded reads)."""
    out: dict[str, str] = {}
    if not root.is_dir() or root.is_symlink():
        return out
    budget = MAX_TREE_BYTES
    for path in sorted(root.rglob("*")):
        if budget <= 0:
            break
        if path.is_symlink() or not path.is_file() or "__pycache__" in path.parts:
            continue
        with path.open("rb") as fh:
            raw = fh.read(min(MAX_TEXT_BYTES, budget))
        budget -= len(raw)
        out[path.relative_to(root).as_posix()] = raw.decode("utf-8", "replace")
    return out


def doc_for_task(name: str, checksum: str, prompt: str, root: Path) -> LeakageDoc:
    """Gather what the gate compares of a task directory (bounded reads, no execution)."""
    parts: list[str] = []
    verifier = root / "verifier"
    for fname in VERIFIER_TEXT_FILES:
        path = verifier / fname
        if path.is_file() and not path.is_symlink():
            with path.open("rb") as fh:
                parts.append(fh.read(MAX_TEXT_BYTES).decode("utf-8", "replace"))
    oracle = _read_tree(root / "oracle")
    return LeakageDoc(name=name, checksum=checksum, prompt=prompt, verifier="\n".join(parts),
                      solution="\n".join(oracle[p] for p in sorted(oracle)),
                      environment=_read_tree(root / "environment"))


def normalise_solution(text: str) -> str:
    """A solution with comments, the shebang and blank lines dropped, whitespace collapsed."""
    lines = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        lines.append(" ".join(line.split()))
    return "\n".join(lines)


def normalise(text: str, name: str = "") -> list[str]:
    """Lowercase words and numbers, punctuation and the task's own name removed."""
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
    """|a & b| / |a | b|; two empty sets are not alike (0.0): nothing was compared."""
    if not a or not b:
        return 0.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


def _views(doc: LeakageDoc, size: int) -> dict[str, set[str]]:
    return {
        "prompt": shingles(normalise(doc.prompt, doc.name), size),
        # Shell words, not prose words: `$4` and `-f 1` are what tells programs apart.
        "solution": shingles(doc.solution_key.split(), size),
        "data": shingles(normalise(doc.data), size),
    }


class LeakGate:
    """The held-out side of the gate, indexed once; `check` tests one training task."""

    def __init__(self, held_out: Sequence[LeakageDoc], *, threshold: float = 0.8,
                 shingle_size: int = 3) -> None:
        self.threshold = threshold
        self.size = shingle_size
        self.by_checksum = {d.checksum: d.name for d in held_out}
        self.by_solution = {d.solution_key: d.name for d in held_out if d.solution_key}
        self.by_data = {d.data_key: d.name for d in held_out if d.data_key}
        self.views = {d.name: _views(d, shingle_size) for d in held_out}
        self.index: dict[str, dict[str, list[str]]] = {
            v: defaultdict(list) for v in ("prompt", "solution", "data")}
        for name, views in self.views.items():
            for view, sh in views.items():
                for s in sh:
                    self.index[view][s].append(name)

    def check(self, doc: LeakageDoc) -> Exclusion | None:
        """Why `doc` must stay out of training, or None when it may be used."""
        exact = [("exact-copy", self.by_checksum.get(doc.checksum),
                  f"same canonical content hash {doc.checksum[:19]}..."),
                 ("same-solution", self.by_solution.get(doc.solution_key)
                  if doc.solution_key else None, "the same oracle solution (after dropping "
                  "comments and whitespace): replaying it would pass"),
                 ("same-environment", self.by_data.get(doc.data_key) if doc.data_key
                  else None, "the same environment data, under whatever file names")]
        for reason, twin, why in exact:
            if twin is not None:
                return Exclusion(task=doc.name, reason=reason, held_out_task=twin,
                                 similarity=1.0, detail=f"{why} as held-out task {twin}")
        mine = _views(doc, self.size)
        candidates: set[str] = set()
        for view, sh in mine.items():
            for s in sh:
                candidates.update(self.index[view].get(s, ()))
        best: tuple[float, str, str] | None = None
        for name in sorted(candidates):
            theirs = self.views[name]
            prompt = jaccard(mine["prompt"], theirs["prompt"])
            scored = [(prompt, "prompt"), (jaccard(mine["solution"], theirs["solution"]),
                                           "solution")]
            if prompt >= PROMPT_FLOOR:  # the same data asked a similar question
                scored.append((jaccard(mine["data"], theirs["data"]), "environment data"))
            score, what = max(scored)
            if score >= self.threshold and (best is None or score > best[0]):
                best = (score, name, what)
        if best is None:
            return None
        score, name, what = best
        return Exclusion(task=doc.name, reason="near-duplicate", held_out_task=name,
                         similarity=round(score, 4),
                         detail=f"{what} {score:.0%} similar (word {self.size}-shingles, "
                         f"threshold {self.threshold:.0%}) to held-out task {name}")


def find_leaks(
    training: Sequence[LeakageDoc],
    held_out: Sequence[LeakageDoc],
    *,
    threshold: float = 0.8,
    shingle_size: int = 3,
) -> list[Exclusion]:
    """Every training task that duplicates a held-out task, with the reason."""
    gate = LeakGate(held_out, threshold=threshold, shingle_size=shingle_size)
    return [e for e in map(gate.check, training) if e is not None]
