"""Parse a Dockerfile into instructions (the subset the `local` backend can honour).

The parser understands the whole syntax (comments, line continuations, exec-form JSON,
`--flags`, variable expansion); deciding what a backend supports is the caller's job.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from posttrain_arena.sandbox.base import BuildError


@dataclass(frozen=True)
class Instruction:
    """One Dockerfile instruction, e.g. COPY with args ['a.txt', '/root/'] at line 3."""

    keyword: str  # upper case
    args: list[str]  # shell words (or the exec-form JSON list)
    raw: str  # the text after the keyword, continuations joined
    line: int  # 1-based line where it starts
    flags: dict[str, str] = field(default_factory=dict)  # --chown=..., --from=...
    exec_form: bool = False


_VAR = re.compile(
    r"\$(?:\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*))?\}"
    r"|(?P<plain>[A-Za-z_][A-Za-z0-9_]*))"
)


def expand(text: str, env: dict[str, str]) -> str:
    """Dockerfile variable expansion: $VAR, ${VAR}, ${VAR:-default}."""

    def repl(m: re.Match[str]) -> str:
        name = m.group("braced") or m.group("plain")
        value = env.get(name, "")
        if not value and m.group("default") is not None:
            return m.group("default")
        return value

    return _VAR.sub(repl, text)


def parse(text: str, where: str = "Dockerfile") -> list[Instruction]:
    """Instructions of a Dockerfile's text; BuildError (with line) on malformed lines."""
    out: list[Instruction] = []
    buf: list[str] = []
    start = 0
    lines = text.splitlines()
    for lineno, line in enumerate(lines, 1):
        stripped = line.strip()
        if not buf and (not stripped or stripped.startswith("#")):
            continue
        if buf and stripped.startswith("#"):
            continue  # comment lines inside a continuation are dropped, as docker does
        if not buf:
            start = lineno
        if stripped.endswith("\\"):
            buf.append(stripped[:-1].rstrip())
            continue
        buf.append(stripped)
        out.append(_instruction(" ".join(p for p in buf if p), start, where))
        buf = []
    if buf:
        out.append(_instruction(" ".join(buf), start, where))
    return out


def parse_file(path: Path) -> list[Instruction]:
    """Parse the Dockerfile at `path`."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BuildError(f"{path}: cannot read the Dockerfile ({exc})") from exc
    return parse(text, where=str(path))


def _instruction(text: str, line: int, where: str) -> Instruction:
    keyword, _, rest = text.partition(" ")
    keyword = keyword.upper()
    rest = rest.strip()
    if not re.fullmatch(r"[A-Z]+", keyword):
        raise BuildError(f"{where}:{line}: not a Dockerfile instruction: {text[:60]!r}")
    flags: dict[str, str] = {}
    body = rest
    if keyword in {"COPY", "ADD", "RUN", "FROM"}:
        while body.startswith("--"):
            flag, _, body = body.partition(" ")
            name, _, value = flag[2:].partition("=")
            flags[name] = value
            body = body.strip()
    if body.startswith("[") and keyword in {"RUN", "CMD", "ENTRYPOINT", "COPY", "ADD", "SHELL"}:
        try:
            words = json.loads(body)
        except json.JSONDecodeError:
            words = None
        if isinstance(words, list) and all(isinstance(w, str) for w in words):
            return Instruction(keyword, words, rest, line, flags, exec_form=True)
    if keyword == "RUN":
        args = [body]  # shell form: one string for /bin/sh -c
    else:
        try:
            args = shlex.split(body, posix=True)
        except ValueError as exc:
            raise BuildError(f"{where}:{line}: {keyword}: {exc}") from exc
    return Instruction(keyword, args, rest, line, flags)


def env_pairs(ins: Instruction, env: dict[str, str]) -> list[tuple[str, str]]:
    """The (name, value) pairs of an ENV or ARG instruction, expanded against `env`."""
    words = ins.args
    if ins.keyword == "ENV" and len(words) >= 2 and "=" not in words[0]:
        # legacy form: ENV NAME value with spaces
        value = ins.raw.split(None, 1)[1] if len(ins.raw.split(None, 1)) > 1 else ""
        return [(words[0], expand(value, env))]
    pairs = []
    for word in words:
        name, eq, value = word.partition("=")
        if ins.keyword == "ENV" and not eq:
            raise BuildError(f"Dockerfile:{ins.line}: ENV {word!r} has no value")
        pairs.append((name, expand(value, env) if eq else env.get(name, "")))
    return pairs
