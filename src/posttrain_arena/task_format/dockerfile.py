"""Just enough Dockerfile parsing to check a task image statically.

The checks need the first instruction (it must be FROM, after parser directives,
comments, blank lines and ARGs) and the sources of COPY/ADD (they must stay inside the
build context and, for plain names, exist there). Nothing here builds or runs anything.
"""

from __future__ import annotations

import posixpath
import re
from typing import NamedTuple

_DIRECTIVE = re.compile(r"^#\s*([A-Za-z]+)\s*=\s*(\S+)\s*$")
_GLOB_OR_VAR = re.compile(r"[*?\[$]")


LOCAL_BASE_IMAGES = ("debian:bookworm-slim", "posttrain-arena/python:bookworm")
"""The base images `arena images bootstrap` builds on a machine without a registry
(sandbox/images.py builds these names); every other FROM must be pulled, loaded or
mapped (docs/task-format.md, "Base images")."""


class Instruction(NamedTuple):
    """One logical instruction, continuation lines joined."""

    keyword: str
    args: str
    line: int


def parse_dockerfile(text: str) -> list[Instruction]:
    """Logical instructions of a Dockerfile, with the 1-based line each starts on."""
    lines = text.splitlines()
    escape = "\\"
    i = 0
    # Parser directives are comments of the form `# key=value` at the very top.
    while i < len(lines):
        match = _DIRECTIVE.match(lines[i].strip())
        if not match:
            break
        if match.group(1).lower() == "escape" and match.group(2) in ("\\", "`"):
            escape = match.group(2)
        i += 1
    out: list[Instruction] = []
    while i < len(lines):
        raw = lines[i].strip()
        start = i + 1
        i += 1
        if not raw or raw.startswith("#"):
            continue
        parts = [raw]
        while parts[-1].endswith(escape) and i < len(lines):
            parts[-1] = parts[-1][: -len(escape)]
            nxt = lines[i].strip()
            i += 1
            if nxt.startswith("#"):
                parts.append(escape)  # comments inside a continuation are dropped
                continue
            parts.append(nxt)
        if parts[-1].endswith(escape):
            parts[-1] = parts[-1][: -len(escape)]
        logical = " ".join(p for p in parts if p != escape).strip()
        keyword, _, args = logical.partition(" ")
        if "\t" in keyword:
            keyword, _, rest = keyword.partition("\t")
            args = f"{rest} {args}".strip()
        out.append(Instruction(keyword.upper(), args.strip(), start))
    return out


def first_instruction(instructions: list[Instruction]) -> Instruction | None:
    """The first instruction that is not an ARG (ARG may precede FROM)."""
    for ins in instructions:
        if ins.keyword != "ARG":
            return ins
    return None


class CopySource(NamedTuple):
    """A source operand of COPY or ADD from the build context."""

    source: str
    instruction: Instruction


def copy_sources(instructions: list[Instruction]) -> list[CopySource]:
    """Sources that COPY/ADD read from the build context (not `--from` stages)."""
    out: list[CopySource] = []
    for ins in instructions:
        if ins.keyword not in ("COPY", "ADD"):
            continue
        operands = _operands(ins.args)
        if operands is None or any(o.startswith("--from") for o in operands):
            continue
        files = [o for o in operands if not o.startswith("--")]
        out.extend(CopySource(src, ins) for src in files[:-1])
    return out


def _operands(args: str) -> list[str] | None:
    flags: list[str] = []
    rest = args
    while rest.startswith("--"):
        flag, _, rest = rest.partition(" ")
        flags.append(flag)
        rest = rest.lstrip()
    if rest.startswith("["):
        import json  # only exec-form COPY needs it; keep `arena` start-up lean

        try:
            value = json.loads(rest)
        except ValueError:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            return None
        return flags + value
    if "<<" in rest:  # heredoc: the content is inline, not read from the context
        return None
    return flags + rest.split()


def is_remote(source: str) -> bool:
    """ADD from a URL or git: downloads while building."""
    return source.startswith(("http://", "https://", "git@", "git://"))


def escapes_context(source: str) -> bool:
    """Whether a source path names something outside the build context."""
    normalized = posixpath.normpath(source.lstrip("/") or ".")
    return normalized == ".." or normalized.startswith("../")


def literal_path(source: str) -> str | None:
    """The context-relative path a source names, or None when it has globs or variables."""
    if _GLOB_OR_VAR.search(source) or is_remote(source):
        return None
    normalized = posixpath.normpath(source.lstrip("/") or ".")
    return normalized


class BaseImage(NamedTuple):
    """An image a FROM line starts from (not an earlier stage, not `scratch`)."""

    image: str
    line: int


def base_images(instructions: list[Instruction]) -> list[BaseImage]:
    """The registry images the Dockerfile's stages start FROM, in order. Names with
    variables (`FROM $BASE`) are left out: which image they name is known only at build."""
    stages: set[str] = set()
    out: list[BaseImage] = []
    for ins in instructions:
        if ins.keyword != "FROM":
            continue
        words = [w for w in ins.args.split() if not w.startswith("--")]
        if not words:
            continue
        image = words[0]
        if len(words) >= 3 and words[1].lower() == "as":
            stages.add(words[2].lower())
        if image.lower() in stages or image == "scratch" or "$" in image:
            continue
        out.append(BaseImage(image, ins.line))
    return out
