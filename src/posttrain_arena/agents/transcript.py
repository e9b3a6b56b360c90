"""Transcripts: every message of an agent phase, plus the token-level record of each
assistant turn that GRPO needs (prompt ids, completion ids, logprobs, mask)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class Message(BaseModel):
    role: str = Field(description="system, user, assistant or tool")
    content: str = ""
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    tool_call_id: str | None = None


class TurnTokens(BaseModel):
    """Exact tokens of one assistant turn, when the model client can report them."""

    prompt_ids: list[int] = Field(default_factory=list)
    completion_ids: list[int] = Field(default_factory=list)
    logprobs: list[float] = Field(default_factory=list)


class Transcript(BaseModel):
    messages: list[Message] = Field(default_factory=list)
    turns: list[TurnTokens] = Field(default_factory=list)
    # Whole-episode token view: ids of the final conversation, with mask 1 on model
    # tokens and 0 on prompt/environment tokens, and logprobs aligned (0.0 where masked).
    token_ids: list[int] = Field(default_factory=list)
    token_mask: list[int] = Field(default_factory=list)
    token_logprobs: list[float] = Field(default_factory=list)
