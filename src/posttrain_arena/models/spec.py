"""Model specs on the command line: `openai:MODEL`, `hf:PATH`, `scripted:FILE`."""

from __future__ import annotations

from pathlib import Path

from posttrain_arena.models.base import ChatModel, ModelError

SPEC_FORMS = "openai:MODEL, hf:PATH or scripted:FILE"


def load_model(
    spec: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    device: str | None = None,
) -> ChatModel:
    """Build the chat model a spec names; ModelError says what a valid spec looks like.

    `base_url` and `api_key` override OPENAI_BASE_URL and OPENAI_API_KEY for `openai:`;
    `device` picks where an `hf:` model is loaded (default: cuda when present, else cpu).
    """
    kind, sep, rest = spec.partition(":")
    if not sep or not rest:
        raise ModelError(f"model spec {spec!r} is not understood; use {SPEC_FORMS}")
    if kind == "openai":
        from posttrain_arena.models.openai import OpenAIChatModel

        return OpenAIChatModel(rest, base_url=base_url, api_key=api_key)
    if kind == "hf":
        from posttrain_arena.models.transformers_local import TransformersChatModel

        return TransformersChatModel.from_pretrained(Path(rest), device=device)
    if kind == "scripted":
        from posttrain_arena.models.scripted import ScriptedModel

        return ScriptedModel.from_file(Path(rest))
    raise ModelError(f"unknown model kind {kind!r} in {spec!r}; use {SPEC_FORMS}")
