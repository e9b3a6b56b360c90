"""The ChatModel protocol: one chat turn in, one assistant message (and its tokens) out.

Messages and tools are plain OpenAI chat-completions dicts, so this layer imports
nothing else of the project:

* message: ``{"role": "system"|"user"|"assistant"|"tool", "content": str,
  "tool_calls": [{"id", "type": "function", "function": {"name", "arguments": JSON str}}],
  "tool_call_id": str}``
* tool: ``{"type": "function", "function": {"name", "description", "parameters"}}``

Clients report token ids and logprobs whenever their backend can (token-in/token-out):
the local transformers client always, an OpenAI-compatible server when it offers vLLM's
token-id options, the scripted client never.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field


class ModelError(Exception):
    """A model client could not be built or used (bad spec, unreadable model dir)."""


class ProviderError(ModelError):
    """The model provider failed (unreachable, overloaded, 5xx, its own timeouts) and
    retries ran out, or the client is misconfigured (bad key, unknown model).

    An agent turns this into an infrastructure error: the trial is not scored.
    """


class RequestRejected(ModelError):
    """The provider refused this request as it stood, and asking again cannot help
    (HTTP 400, 413 or 422): something in the conversation it cannot take, such as a
    tool call the model wrote that the server cannot render.

    Not the provider's failure: once the conversation holds what the model wrote, the
    model agent ends the episode and the trial is scored on what it left (the agent's
    0, never an infrastructure error that would drop the trial from the denominator).
    """


class ContextOverflow(RequestRejected):
    """The conversation no longer fits the model's context (`ChatModel.context_limit`):
    the episode has run as long as this model can follow it. The agent's failure."""


class ToolCall(BaseModel):
    """One function call requested by the model."""

    model_config = ConfigDict(frozen=True)

    id: str = Field(description="Call id; tool results refer to it")
    name: str = Field(description="Function name, e.g. 'bash'")
    arguments: dict[str, Any] = Field(
        default_factory=dict, description="Decoded JSON arguments of the call"
    )
    raw_arguments: str | None = Field(
        default=None, description="The arguments text as sent, when it was not valid JSON"
    )

    def to_openai(self) -> dict[str, Any]:
        """The OpenAI wire form (arguments as a JSON string)."""
        args = self.raw_arguments if self.raw_arguments is not None else json.dumps(self.arguments)
        return {"id": self.id, "type": "function", "function": {"name": self.name,
                                                                 "arguments": args}}


class Usage(BaseModel):
    """Token counts of one request."""

    prompt_tokens: int = Field(default=0, description="Tokens of the rendered prompt")
    completion_tokens: int = Field(default=0, description="Tokens the model generated")


class ChatResponse(BaseModel):
    """One assistant turn as the model produced it."""

    content: str = Field(default="", description="Assistant text (tool-call markup removed)")
    tool_calls: list[ToolCall] = Field(default_factory=list, description="Requested calls")
    prompt_token_ids: list[int] | None = Field(
        default=None, description="Exact ids the model was conditioned on, when known"
    )
    completion_token_ids: list[int] | None = Field(
        default=None, description="Exact ids the model generated (incl. end token), when known"
    )
    completion_logprobs: list[float] | None = Field(
        default=None, description="Log-probability of each completion id under the sampler"
    )
    finish_reason: str = Field(
        default="stop", description="stop, tool_calls, length or error, as the provider says"
    )
    usage: Usage = Field(default_factory=Usage, description="Token counts")
    raw_text: str | None = Field(
        default=None, description="Decoded completion before tool calls were parsed out"
    )

    @property
    def text(self) -> str:
        """The assistant's message text (alias of `content`)."""
        return self.content

    def message(self) -> dict[str, Any]:
        """The assistant message to append to the conversation (OpenAI form)."""
        msg: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            msg["tool_calls"] = [c.to_openai() for c in self.tool_calls]
        return msg

    @property
    def has_tokens(self) -> bool:
        """Whether exact prompt and completion ids (with logprobs) were reported."""
        return (
            self.prompt_token_ids is not None
            and self.completion_token_ids is not None
            and self.completion_logprobs is not None
            and len(self.completion_logprobs) == len(self.completion_token_ids)
        )


class SamplingParams(BaseModel):
    """How to sample one turn."""

    model_config = ConfigDict(frozen=True)

    temperature: float = Field(default=1.0, ge=0, description="0 means greedy")
    top_p: float = Field(default=1.0, gt=0, le=1, description="Nucleus sampling mass")
    max_new_tokens: int = Field(default=512, gt=0, description="Cap on generated tokens")
    seed: int | None = Field(default=None, description="Sampling seed, where supported")
    max_time_sec: float | None = Field(
        default=None, gt=0, description="Stop generating after this long, where supported "
        "(local models); the turn then ends as if cut by max_new_tokens"
    )


@runtime_checkable
class ChatModel(Protocol):
    """A chat model: what the model agent talks to."""

    name: str

    @property
    def context_limit(self) -> int | None:
        """Most tokens one request may hold, prompt and completion together, as the
        model (or the server serving it, vLLM's `max_model_len`) allows; None when the
        backend does not say. The model agent stops an episode before a request would
        pass it."""
        ...

    def chat(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        sampling: SamplingParams | None = None,
        prefix_ids: Sequence[int] | None = None,
    ) -> ChatResponse:
        """Produce the next assistant message.

        `prefix_ids` are the exact ids of the conversation so far up to and including the
        last assistant completion (previous prompt + completion). Clients that tokenise
        themselves continue from them, so a multi-turn episode is one exact token
        sequence; others ignore it. Raises ContextOverflow when the conversation does not
        fit `context_limit`, RequestRejected when the backend refuses the request as it
        stands, ProviderError when the backend fails for good.
        """
        ...
