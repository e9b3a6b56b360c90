"""Answer leaks: a build-context file that gives the agent the answer in its image.

A file of environment/ leaks when both hold:

- it is in the image: a COPY/ADD of the Dockerfile covers it (its path, a folder above
  it, a glob matching it, or the whole context) and no later RUN removes it by name. A
  file the Dockerfile never copies is not in the image (no finding); one copied and
  removed is a warning (the agent's container does not show it, the image's layers do).
- it holds the answer: its content is the same as a file of the oracle's or the
  verifier's folder, and that file is the answer, not an input:
    * its name, or the context file's, says answer (expected, answer, golden, truth,
      solution, ...), or it is the oracle's entry point (solve.sh): an error;
    * an oracle file that the oracle's scripts write (`> name`, `cp ... name`, ...): the
      oracle's output, an error;
    * an oracle file the verifier's files never name: the oracle's own code or data, an
      error;
    * anything else is an input both sides keep a copy of (Terminal-Bench's
      write-compressor keeps `tests/original-data.txt` beside the `data.txt` it ships,
      SkillsBench's dialogue-parser ships `script.txt` that solution/ also holds, the
      tests read and the oracle only reads): a warning that says why it is not an error.

The verifier's own test file copied into the image (Terminal-Bench's
break-filter-js-from-html gives the agent `tests/test_outputs.py` on purpose) is a
warning; the oracle's solve.sh is an error wherever it lies.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from collections.abc import Callable
from pathlib import Path

from posttrain_arena.task_format import dockerfile as df
from posttrain_arena.task_format.findings import Finding, Severity
from posttrain_arena.task_format.inventory import Inventory

ANSWER_WORDS = re.compile(r"expected|answer|golden|gold[_.-]|truth|solution|solved|correct"
                          r"|oracle|output|result", re.IGNORECASE)
ORACLE_ENTRY = "solve.sh"
TEST_NAMES = frozenset({"test_outputs.py"})
_MAX_READ = 1024 * 1024


def leak_findings(root: Path, inv: Inventory, verifier: str, oracle: str,
                  dockerfile: str | None, extra: tuple[str, ...] = ()) -> list[Finding]:
    """Findings for environment/ files in the image that hold an answer (module docstring).
    `verifier`, `oracle`: the layout's folders; `extra`: more secret folders (steps/)."""
    twins: dict[tuple[int, str], str] = {}
    for top in (oracle, verifier, *extra):
        for e in inv.under(top):
            if e.kind == "file" and e.digest and e.size > 0:
                twins.setdefault((e.size, e.digest), e.rel)
    instructions = df.parse_dockerfile(dockerfile) if dockerfile is not None else []
    in_image = _copied(instructions)
    named = _Texts(root, inv, verifier)
    writes = _Texts(root, inv, oracle)
    out: list[Finding] = []
    for e in inv.under("environment"):
        if e.kind != "file":
            continue
        rel = e.rel[len("environment/"):]
        base = rel.rpartition("/")[2]
        twin = twins.get((e.size, e.digest or ""))
        if twin is None and base != ORACLE_ENTRY and base not in TEST_NAMES:
            continue
        if not in_image(rel):
            continue
        where = str(root / e.rel)
        severity, why = _judge(base, twin, oracle, named, writes)
        if severity == "error" and _removed(instructions, base):
            severity, why = "warning", why + "; a later RUN removes it, so the agent's " \
                "container does not show it (the image's layers still hold it)"
        out.append(Finding(severity=Severity(severity), code="answer-leak", path=where,
                           message=why))
    return out


def _judge(base: str, twin: str | None, oracle: str, named: _Texts,
           writes: _Texts) -> tuple[str, str]:
    if base == ORACLE_ENTRY or (twin or "").endswith("/" + ORACLE_ENTRY):
        what = f"identical to {twin}" if twin else "named solve.sh"
        return "error", f"{what}: the oracle's entry point in the image, where the agent " \
            "can read the solution. Keep it in the oracle's folder only"
    if twin is None:
        return "warning", "the verifier's tests in the image: the agent can read them " \
            "(fine if the task gives them on purpose)"
    twin_base = twin.rpartition("/")[2]
    if twin_base not in TEST_NAMES and (ANSWER_WORDS.search(base)
                                        or ANSWER_WORDS.search(twin_base)):
        return "error", f"identical to {twin}, which holds the expected answer, and the " \
            "Dockerfile puts it in the image. Keep it out of environment/"
    if twin.startswith(oracle + "/"):
        if writes.writes(base, twin_base):
            return "error", f"identical to {twin}, which the oracle writes (its output), " \
                "and the Dockerfile puts it in the image. Keep it out of environment/"
        if not named.names(base, twin_base):
            return "error", f"identical to {twin}, the oracle's own file (the verifier " \
                "never names it as an input), and the Dockerfile puts it in the image. " \
                "Keep it out of environment/"
    return "warning", f"identical to {twin}; read as an input both sides keep a copy of " \
        "(the verifier reads it by name, or keeps it as a pristine copy), not an answer. " \
        "If it is the answer, keep it out of environment/"


class _Texts:
    """The text of one secret folder's files (read lazily: only packages with a twin pay
    for it), to ask whether they name a file or write one."""

    def __init__(self, root: Path, inv: Inventory, top: str) -> None:
        self.root, self.inv, self.top = root, inv, top
        self._text: str | None = None

    @property
    def text(self) -> str:
        if self._text is None:
            parts = []
            for e in self.inv.under(self.top):
                if e.kind == "file" and e.size <= _MAX_READ:
                    try:
                        parts.append((self.root / e.rel).read_text(errors="replace"))
                    except OSError:
                        continue
            self._text = "\n".join(parts)
        return self._text

    def names(self, *names: str) -> bool:
        return any(n in self.text for n in names)

    def writes(self, *names: str) -> bool:
        """Whether a script here writes a file of one of these names: a redirection,
        cp/mv/tee/install to it, or a Python open(..., "w")."""
        for name in names:
            n = re.escape(name)
            if re.search(rf"(>>?|\b(?:cp|mv|tee|install)\b[^\n;|&]*)\s*[\"']?[^\s\"';|&]*"
                         rf"\b{n}\b|open\([^)]*{n}[^)]*['\"][wa]", self.text):
                return True
        return False


def _copied(instructions: list[df.Instruction]) -> Callable[[str], bool]:
    """Whether a context path is put into the image by some COPY/ADD."""
    sources = [s.source for s in df.copy_sources(instructions)
               if not df.is_remote(s.source) and not df.escapes_context(s.source)]
    patterns = [posixpath.normpath(s.lstrip("/") or ".") for s in sources]

    def covered(rel: str) -> bool:
        for p in patterns:
            if p == "." or rel == p or rel.startswith(p + "/"):
                return True
            if any(c in p for c in "*?[") and (fnmatch.fnmatch(rel, p) or any(
                    fnmatch.fnmatch(rel[:i], p) for i in range(len(rel))
                    if rel[i] == "/")):
                return True
        return False

    return covered


def _removed(instructions: list[df.Instruction], base: str) -> bool:
    """Whether a RUN removes a file of that name (after the COPY: any RUN will do, as
    the Dockerfile's order puts RUNs that name a copied file after it)."""
    return any(ins.keyword == "RUN" and re.search(r"\brm\b", ins.args)
               and base in ins.args for ins in instructions)
