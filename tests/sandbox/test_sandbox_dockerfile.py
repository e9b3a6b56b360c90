"""The Dockerfile parser (no backend needed)."""

from __future__ import annotations

import pytest

from posttrain_arena.sandbox import BuildError
from posttrain_arena.sandbox.dockerfile import env_pairs, expand, parse


def test_parse_continuations_comments_flags_and_exec_form() -> None:
    text = (
        "# syntax comment\n\nFROM debian:bookworm-slim AS base\n"
        "RUN echo a \\\n  # inner comment\n  && echo b\n"
        "COPY --chown=1000:1000 src/ /app/\n"
        'CMD ["python3", "-m", "http.server"]\n'
        'ENV A=1 B="two words"\n'
    )
    ins = parse(text)
    assert [i.keyword for i in ins] == ["FROM", "RUN", "COPY", "CMD", "ENV"]
    assert ins[0].line == 3 and ins[0].args == ["debian:bookworm-slim", "AS", "base"]
    assert ins[1].args == ["echo a && echo b"] and not ins[1].exec_form
    assert ins[2].flags == {"chown": "1000:1000"} and ins[2].args == ["src/", "/app/"]
    assert ins[3].exec_form and ins[3].args == ["python3", "-m", "http.server"]
    assert env_pairs(ins[4], {}) == [("A", "1"), ("B", "two words")]


def test_legacy_env_form_and_expansion() -> None:
    (ins,) = parse("ENV GREETING hello $WHO\n")
    assert env_pairs(ins, {"WHO": "you"}) == [("GREETING", "hello you")]
    assert expand("${MISSING:-fallback}/$X/${X}", {"X": "x"}) == "fallback/x/x"


def test_malformed_line_names_the_line() -> None:
    with pytest.raises(BuildError, match=r"Dockerfile:2"):
        parse("FROM x\n%%% nonsense\n")
