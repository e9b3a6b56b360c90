"""An OpenAI-compatible chat-completions client (vLLM, SGLang, any provider), over httpx.

Base URL and key come from OPENAI_BASE_URL and OPENAI_API_KEY, as the OpenAI SDK reads
them, unless given. It always asks for logprobs, and by default also for vLLM's token-id
options (`return_tokens_as_token_ids`, `return_token_ids`), so that a vLLM server hands
back exact prompt and completion ids; a server that rejects those options is asked again
without them, once, and the client remembers. Transient failures (429, 5xx, connection
errors, timeouts) are retried with exponential backoff; when they persist the client
raises ProviderError, which the agent reports as an infrastructure error. A request the
server refuses as it stands (400, 413, 422) is not retried: ContextOverflow when the
conversation no longer fits the model's context, RequestRejected otherwise; once the
conversation holds what the model wrote, these are the agent's failure, not the
provider's (agents/model.py).

`context_limit` is the served model's `max_model_len`, read once from the server's
`/models` listing (vLLM's; a provider that does not list it gives None), unless given.

`tool_choice` is sent with every request that declares tools: "auto", "required",
"none", or the name of one tool, which forces a call of that tool: sent in the named
form `{"type": "function", "function": {"name": ...}}`, with that tool marked
`strict: true` in the request, because vLLM (0.32, `--tool-strict-level auto`) pins the
arguments to a tool's JSON schema only for strict tools and otherwise lets any JSON
value through (a provider with strict-schema rules of its own, as OpenAI's, which wants
`additionalProperties: false`, may refuse such a tool: a ProviderError that says so).
A forced call is what the server made the model write, not what it would have chosen,
and its tokens need not be what the chat template renders for it (the episode's token
view is then flagged, not trained on): use it to evaluate a model that cannot call
tools on its own or to exercise the tool path.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

import httpx

from posttrain_arena.models.base import (
    ChatResponse,
    ContextOverflow,
    ModelError,
    ProviderError,
    RequestRejected,
    SamplingParams,
    ToolCall,
    Usage,
)
from posttrain_arena.models.toolcalls import decode_arguments

DEFAULT_BASE_URL = "https://api.openai.com/v1"
TRANSIENT_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
_VLLM_OPTIONS = {"return_tokens_as_token_ids": True, "return_token_ids": True}
TOOL_CHOICE_MODES = ("auto", "required", "none")
REJECTED_STATUS = frozenset({400, 413, 422})  # the request as it stands: retrying cannot help
# How servers say a conversation is longer than the model's context: vLLM ("This model's
# maximum context length is N tokens"), OpenAI (code context_length_exceeded), SGLang and
# TGI ("Input validation error: ... must be <= N", "too many tokens").
_OVERFLOW_MARKERS = ("maximum context length", "context_length_exceeded", "context length",
                     "max_model_len", "too many tokens", "prompt is too long")


class OpenAIChatModel:
    """Chat completions against an OpenAI-compatible endpoint."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        token_ids: bool = True,
        max_retries: int = 6,
        backoff_sec: float = 0.5,
        max_backoff_sec: float = 20.0,
        timeout_sec: float = 600.0,
        tool_choice: str | None = None,
        context_limit: int | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """`tool_choice`: None leaves it to the server (auto where tools are given);
        one of TOOL_CHOICE_MODES, or a tool's name to force a call of that tool.
        `context_limit`: the model's context in tokens; None reads the server's."""
        if tool_choice is not None and not tool_choice.strip():
            raise ModelError("tool_choice is empty; give auto, required, none or a tool name")
        self.model = model
        self.tool_choice = tool_choice
        self.name = f"openai:{model}"
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL)
        self.base_url = self.base_url.rstrip("/")
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", "")
        self._token_ids = token_ids
        self._limit_key = "max_tokens"
        self.max_retries = max_retries
        self.backoff_sec = backoff_sec
        self.max_backoff_sec = max_backoff_sec
        self._sleep = sleep
        self._context_limit = context_limit
        self._context_read = context_limit is not None
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.Client(base_url=self.base_url, headers=headers,
                                    timeout=httpx.Timeout(timeout_sec, connect=30.0))

    @property
    def context_limit(self) -> int | None:
        """The served model's context (`max_model_len` in the server's `/models`
        listing), asked once; None when the server does not say."""
        if not self._context_read:
            self._context_read = True
            self._context_limit = self._served_context()
        return self._context_limit

    def _served_context(self) -> int | None:
        try:
            resp = self._client.get("/models")
            listing = resp.json().get("data") if resp.status_code == 200 else None
        except (httpx.HTTPError, ValueError, AttributeError):
            return None  # no listing: the server's own 400 still tells an overflow
        for entry in listing if isinstance(listing, list) else []:
            if isinstance(entry, dict) and entry.get("id") == self.model:
                value = entry.get("max_model_len")
                return value if isinstance(value, int) and value > 0 else None
        return None

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()

    def chat(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        sampling: SamplingParams | None = None,
        prefix_ids: Sequence[int] | None = None,
    ) -> ChatResponse:
        """One chat-completions request; ProviderError when the provider keeps failing."""
        sampling = sampling or SamplingParams()
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [_wire_message(m) for m in messages],
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            self._limit_key: sampling.max_new_tokens,
            "logprobs": True,
        }
        if tools:
            body["tools"] = list(tools)
            if self.tool_choice is not None:
                body["tool_choice"] = _tool_choice(self.tool_choice, tools)
                if isinstance(body["tool_choice"], dict):
                    body["tools"] = [_strict(t) if _tool_name(t) == self.tool_choice else t
                                     for t in tools]
        if sampling.seed is not None:
            body["seed"] = sampling.seed
        if self._token_ids:
            body.update(_VLLM_OPTIONS)
        data = self._post(body)
        return _parse_response(data)

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        last, hint = "", 0.0
        for attempt in range(self.max_retries + 1):
            if attempt:
                self._sleep(self._delay(attempt, hint))
                hint = 0.0
            try:
                resp = self._client.post("/chat/completions", json=body)
            except httpx.TransportError as exc:
                last = f"{type(exc).__name__}: {exc}"
                continue
            if resp.status_code == 200:
                try:
                    data = resp.json()
                except ValueError:
                    raise ProviderError(f"{self.base_url}: response is not JSON: "
                                        f"{resp.text[:200]!r}") from None
                if not isinstance(data, dict) or not data.get("choices"):
                    raise ProviderError(f"{self.base_url}: response has no choices: "
                                        f"{resp.text[:200]!r}")
                return data
            if resp.status_code == 400 and self._token_ids and _rejects_options(resp.text):
                # Not vLLM: ask again without its token-id options, and from now on.
                self._token_ids = False
                for key in _VLLM_OPTIONS:
                    body.pop(key, None)
                return self._post(body)
            if resp.status_code == 400 and "max_tokens" in body and \
                    "max_completion_tokens" in resp.text:
                # Newer OpenAI models only take the newer name of the same limit.
                self._limit_key = "max_completion_tokens"
                body["max_completion_tokens"] = body.pop("max_tokens")
                return self._post(body)
            last = f"HTTP {resp.status_code}: {resp.text[:300]}"
            if resp.status_code in REJECTED_STATUS:
                lowered = resp.text.lower()
                if any(marker in lowered for marker in _OVERFLOW_MARKERS):
                    raise ContextOverflow(f"{self.base_url}: the conversation does not fit "
                                          f"the model's context ({last})")
                raise RequestRejected(f"{self.base_url}/chat/completions refused the "
                                      f"request ({last})")
            if resp.status_code not in TRANSIENT_STATUS:
                raise ProviderError(f"{self.base_url}/chat/completions failed with {last}; "
                                    "check the model name, OPENAI_BASE_URL and OPENAI_API_KEY")
            hint = _seconds(resp.headers.get("retry-after"))
        raise ProviderError(f"{self.base_url}/chat/completions still failing after "
                            f"{self.max_retries + 1} attempts; last error: {last}")

    def _delay(self, attempt: int, retry_after: float) -> float:
        """Exponential backoff with jitter, at least what the server asked for."""
        delay = self.backoff_sec * 2 ** (attempt - 1) * (1 + 0.1 * random.random())
        return min(self.max_backoff_sec, max(delay, retry_after))


def _seconds(value: str | None) -> float:
    try:
        return max(0.0, float(value)) if value else 0.0
    except ValueError:
        return 0.0  # an HTTP date: fall back to our own backoff


def _tool_choice(choice: str, tools: Sequence[dict[str, Any]]) -> str | dict[str, Any]:
    """The wire form of `choice` for these tools (ModelError for a name none of them has)."""
    if choice in TOOL_CHOICE_MODES:
        return choice
    names = [_tool_name(t) for t in tools]
    if choice not in names:
        raise ModelError(f"tool_choice {choice!r} names no tool of the request (tools: "
                         f"{', '.join(names)}); give one of them or {', '.join(TOOL_CHOICE_MODES)}")
    return {"type": "function", "function": {"name": choice}}


def _tool_name(tool: dict[str, Any]) -> str:
    return str((tool.get("function") or {}).get("name"))


def _strict(tool: dict[str, Any]) -> dict[str, Any]:
    """The tool with its arguments pinned to its schema (`strict`), unless it says."""
    function = dict(tool.get("function") or {})
    function.setdefault("strict", True)
    return {**tool, "function": function}


def _rejects_options(text: str) -> bool:
    lowered = text.lower()
    return any(k in lowered for k in _VLLM_OPTIONS) or ("unrecognized" in lowered and (
        "return_token" in lowered))


def _wire_message(message: dict[str, Any]) -> dict[str, Any]:
    """Drop empty optional keys that strict providers reject."""
    out: dict[str, Any] = {"role": message["role"], "content": message.get("content") or ""}
    if message.get("tool_calls"):
        out["tool_calls"] = message["tool_calls"]
    if message.get("tool_call_id"):
        out["tool_call_id"] = message["tool_call_id"]
    return out


def _parse_response(data: dict[str, Any]) -> ChatResponse:
    choice = data["choices"][0]
    msg = choice.get("message") or {}
    calls = []
    for i, raw in enumerate(msg.get("tool_calls") or []):
        fn = raw.get("function") or {}
        args = decode_arguments(fn.get("arguments"))
        calls.append(ToolCall(
            id=str(raw.get("id") or f"call_{i}"),
            name=str(fn.get("name") or ""),
            arguments=args or {},
            raw_arguments=None if args is not None else str(fn.get("arguments")),
        ))
    logprobs, ids_from_lp = _logprobs(choice.get("logprobs"))
    completion_ids = choice.get("token_ids") or ids_from_lp
    prompt_ids = data.get("prompt_token_ids") or choice.get("prompt_token_ids")
    usage = data.get("usage") or {}
    return ChatResponse(
        content=msg.get("content") or "",
        tool_calls=calls,
        prompt_token_ids=list(prompt_ids) if prompt_ids else None,
        completion_token_ids=list(completion_ids) if completion_ids else None,
        completion_logprobs=logprobs,
        finish_reason=str(choice.get("finish_reason") or "stop"),
        usage=Usage(prompt_tokens=int(usage.get("prompt_tokens") or 0),
                    completion_tokens=int(usage.get("completion_tokens") or 0)),
    )


def _logprobs(block: Any) -> tuple[list[float] | None, list[int] | None]:
    """(logprobs, ids) from a choice's logprobs; ids only when sent as 'token_id:N'."""
    if not isinstance(block, dict) or not isinstance(block.get("content"), list):
        return None, None
    values: list[float] = []
    ids: list[int] | None = []
    for item in block["content"]:
        values.append(float(item.get("logprob", 0.0)))
        token = str(item.get("token", ""))
        if ids is not None and token.startswith("token_id:"):
            try:
                ids.append(int(token.split(":", 1)[1]))
            except ValueError:
                ids = None
        else:
            ids = None
    return values, ids
