"""The model agent: a bash-tool loop around a ChatModel.

Each turn the model issues one shell command through the `bash` tool and sees its
(truncated) output with the time left; it ends the episode with `submit`. Limits on
turns, generated tokens, context length and wall-clock come from task.md (`agent:`
`timeout_sec`, and optionally `max_turns`, `max_tokens`) and the run's AgentSettings.
The context limit is the smaller of the settings' and the model's own
(`ChatModel.context_limit`, the server's `max_model_len`), and is enforced before a
request is sent: a turn asks for no more tokens than fit, and an episode whose
conversation no longer fits ends ("max_context").

Who caused a failed request decides what the trial is. A conversation too long for the
model (ContextOverflow) or one the server refuses after the model wrote into it
(RequestRejected) ends the episode as the agent's doing: the trial is verified and
scored on the state left, like any episode that ran out of turns. Only what the provider
or harness did (ProviderError: transport, 5xx, the server's timeouts, a misconfigured
client; a refusal before the model wrote anything; any other exception) is an error,
which the trial reports as infra_error.

The transcript keeps every message and, per assistant turn, the exact prompt ids,
completion ids and logprobs; the whole episode is one token sequence with mask 1 on
model tokens and 0 on prompt and environment tokens, which is what GRPO trains on.
The message builders below are public so that training can turn oracle runs into
trajectories in exactly this format.
"""

from __future__ import annotations

import math
import time
from typing import Any

from pydantic import BaseModel, Field

from posttrain_arena.agents.base import AgentContext, AgentRun, Shell
from posttrain_arena.agents.transcript import Message, Transcript, TurnTokens
from posttrain_arena.models.base import (
    ChatModel,
    ChatResponse,
    ContextOverflow,
    ProviderError,
    RequestRejected,
    SamplingParams,
    ToolCall,
)

SYSTEM_PROMPT = (
    "You are in a Linux shell. Run one command per turn with the bash tool. "
    "Call submit when the task is done."
)

BASH_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run one shell command and see its output.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string", "description": "The command"}},
            "required": ["command"],
        },
    },
}
SUBMIT_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "submit",
        "description": "Finish the task.",
        "parameters": {"type": "object", "properties": {}},
    },
}
TOOLS: list[dict[str, Any]] = [BASH_TOOL, SUBMIT_TOOL]
PROVIDER_FAILED = "the model provider failed"  # begins an episode's error when it did


class AgentSettings(BaseModel):
    """The run's limits and sampling for the model agent."""

    max_turns: int = Field(default=30, gt=0, description="Assistant turns per episode")
    max_tokens: int = Field(
        default=16_384, gt=0, description="Tokens the model may generate over the episode"
    )
    max_context_tokens: int = Field(
        default=32_768, gt=0, description="Most tokens of one request, prompt and completion "
        "together; the model's own context limit applies too, whichever is smaller"
    )
    max_new_tokens: int = Field(default=512, gt=0, description="Tokens per assistant turn")
    output_chars: int = Field(
        default=4000, gt=80, description="Command output shown to the model (head + tail)"
    )
    command_timeout_sec: float = Field(default=120, gt=0, description="Limit per command")
    max_wall_sec: float | None = Field(
        default=None, gt=0, description="Extra wall-clock cap on top of task.md's timeout"
    )
    temperature: float = Field(default=1.0, ge=0, description="Sampling temperature")
    top_p: float = Field(default=1.0, gt=0, le=1, description="Nucleus sampling mass")
    max_idle_turns: int = Field(
        default=2, gt=0, description="Consecutive replies without a tool call before giving up"
    )

    def for_task(self, agent_section: Any) -> AgentSettings:
        """These settings tightened by a task.md `agent:` section's max_turns/max_tokens."""
        extra = dict(getattr(agent_section, "model_extra", None) or {})
        update: dict[str, Any] = {}
        for key in ("max_turns", "max_tokens"):
            value = extra.get(key)
            if isinstance(value, int) and value > 0:
                update[key] = min(value, getattr(self, key))
        return self.model_copy(update=update)


def call_id(turn: int, index: int = 0) -> str:
    """Tool-call id of the `index`-th call in assistant turn `turn` (0-based)."""
    return f"call_{turn}_{index}"


TIME_NOTE_STEP_SEC = 10


def time_note(time_left_sec: float) -> str:
    """How the remaining deadline is shown to the model.

    Rounded up to a 10 s step: a model needs the order of magnitude, and exact seconds
    would make the same episode render differently with machine load, which breaks
    seeded reproducibility (and teaches a small model noise).
    """
    step = TIME_NOTE_STEP_SEC
    shown = max(0, math.ceil(max(0.0, time_left_sec) / step) * step)
    return f"[time left: {shown}s]"


def initial_messages(prompt: str, time_left_sec: float) -> list[Message]:
    """System and first user message of an episode."""
    return [
        Message(role="system", content=SYSTEM_PROMPT),
        Message(role="user", content=f"{prompt.strip()}\n\n{time_note(time_left_sec)}"),
    ]


def scene_message(text: str, time_left_sec: float) -> Message:
    """The next scene of a multi-part task, given after the model submits the previous one."""
    return Message(role="user", content=f"{text.strip()}\n\n{time_note(time_left_sec)}")


def bash_call_message(command: str, turn: int, content: str = "") -> Message:
    """An assistant turn that runs `command` (what the model would emit)."""
    return Message(role="assistant", content=content, tool_calls=[
        ToolCall(id=call_id(turn), name="bash", arguments={"command": command}).to_openai()])


def submit_call_message(turn: int, content: str = "") -> Message:
    """An assistant turn that submits."""
    return Message(role="assistant", content=content,
                   tool_calls=[ToolCall(id=call_id(turn), name="submit").to_openai()])


def format_output(exit_code: int, stdout: str, stderr: str, *, timed_out: bool = False,
                  limit: int = 4000) -> str:
    """Command output as the model sees it: stdout, stderr, exit code; head+tail cut."""
    text = stdout
    if stderr:
        text = f"{text}\n{stderr}" if text and not text.endswith("\n") else text + stderr
    text = truncate(text.rstrip("\n"), limit)
    status = "timed out" if timed_out else f"exit code {exit_code}"
    return f"{text}\n[{status}]" if text else f"[{status}]"


def truncate(text: str, limit: int) -> str:
    """Keep the head and tail of `text` within about `limit` characters."""
    if len(text) <= limit:
        return text
    half = limit // 2
    omitted = len(text) - 2 * half
    return f"{text[:half]}\n[... {omitted} characters omitted ...]\n{text[-half:]}"


def tool_result_message(output: str, time_left_sec: float,
                        tool_call_id: str | None = None) -> Message:
    """The environment's answer to a tool call, with the time left."""
    return Message(role="tool", content=f"{output}\n{time_note(time_left_sec)}",
                   tool_call_id=tool_call_id)


NO_CALL_REPLY = "No tool call found. Call bash with a command, or submit."


class EpisodeTokens:
    """Builds the whole-episode token view turn by turn, and says whether it is exact."""

    def __init__(self) -> None:
        self.ids: list[int] = []
        self.mask: list[int] = []
        self.logprobs: list[float] = []
        self.status = "exact"

    def add(self, response: ChatResponse) -> TurnTokens | None:
        """Record one turn; the episode stays exact while each prompt extends it."""
        if not response.has_tokens:
            self.status = "unavailable"
            return None
        prompt = list(response.prompt_token_ids or [])
        completion = list(response.completion_token_ids or [])
        logprobs = list(response.completion_logprobs or [])
        if self.status == "exact":
            if prompt[: len(self.ids)] == self.ids:
                added = prompt[len(self.ids):]
                self.ids += added + completion
                self.mask += [0] * len(added) + [1] * len(completion)
                self.logprobs += [0.0] * len(added) + logprobs
            else:
                self.status = "inconsistent"  # the server re-tokenised earlier turns
        return TurnTokens(prompt_ids=prompt, completion_ids=completion, logprobs=logprobs)

    def prefix(self) -> list[int] | None:
        return self.ids if self.status == "exact" and self.ids else None

    def fill(self, transcript: Transcript) -> None:
        if self.status == "exact":
            transcript.token_ids = self.ids
            transcript.token_mask = self.mask
            transcript.token_logprobs = self.logprobs


class ModelAgent:
    """Runs a chat model as a bash-tool agent."""

    def __init__(self, model: ChatModel, settings: AgentSettings | None = None,
                 *, name: str | None = None) -> None:
        self.model = model
        self.settings = settings or AgentSettings()
        self.name = name or f"model:{model.name}"

    def run(self, shell: Shell, ctx: AgentContext) -> AgentRun:
        """One episode: turns until submit or a limit; provider failures -> run.error."""
        s = self.settings
        start = time.monotonic()
        deadline = ctx.deadline if s.max_wall_sec is None else min(
            ctx.deadline, start + s.max_wall_sec)
        transcript = Transcript(messages=initial_messages(ctx.prompt, deadline - start))
        wire = [_wire(m) for m in transcript.messages]
        episode = EpisodeTokens()
        info: dict[str, Any] = {"model": self.model.name, "turns": 0, "prompt_tokens": 0,
                                "completion_tokens": 0, "commands": 0, "model_sec": 0.0,
                                "env_sec": 0.0}
        exit_reason, error, idle = "max_turns", None, 0
        # Scenes after the first are handed over one by one, each time the model submits.
        pending = [sc for sc in ctx.scenes if sc.strip()]
        if pending and pending[0].strip() == ctx.prompt.strip():
            pending.pop(0)

        def add(message: Message) -> None:
            transcript.messages.append(message)
            wire.append(_wire(message))

        limit = min(s.max_context_tokens, self.model.context_limit or s.max_context_tokens)
        info["context_limit"] = limit
        held = 0  # tokens the last request held: the next prompt is at least as long
        for turn in range(s.max_turns):
            if time.monotonic() >= deadline:
                exit_reason = "deadline"
                break
            budget = s.max_tokens - info["completion_tokens"]
            if budget <= 0:
                exit_reason = "max_tokens"
                break
            if held >= limit:  # the next request cannot fit: it is not sent
                exit_reason = "max_context"
                break
            sampling = SamplingParams(temperature=s.temperature, top_p=s.top_p,
                                      max_new_tokens=min(s.max_new_tokens, budget, limit - held),
                                      seed=(ctx.seed * 1_000_003 + turn) % 2**31,
                                      max_time_sec=max(0.1, deadline - time.monotonic()))
            t0 = time.monotonic()
            try:
                response = self.model.chat(wire, tools=TOOLS, sampling=sampling,
                                           prefix_ids=episode.prefix())
            except ContextOverflow as exc:  # the episode outgrew the model: the agent's
                exit_reason = "max_context"
                info["rejected"] = str(exc)[:500]
                break
            except RequestRejected as exc:
                if turn == 0:  # refused before the model wrote a word: the harness's request
                    error = f"{self.model.name} refused the episode's first request: {exc}"
                    exit_reason = "error"
                else:  # refused for what the model wrote into the conversation
                    exit_reason = "rejected"
                    info["rejected"] = str(exc)[:500]
                break
            except ProviderError as exc:  # unreachable, 5xx, its timeouts: not reward 0
                error = f"{PROVIDER_FAILED} ({self.model.name}, turn {turn}): {exc}"
                exit_reason = "error"
                break
            except Exception as exc:  # the client itself broke (OOM, a bug): the harness's
                error = f"{self.model.name} raised on turn {turn}: {type(exc).__name__}: {exc}"
                exit_reason = "error"
                break
            finally:
                info["model_sec"] += time.monotonic() - t0
            info["turns"] = turn + 1
            info["prompt_tokens"] += response.usage.prompt_tokens
            info["completion_tokens"] += response.usage.completion_tokens
            held = response.usage.prompt_tokens + response.usage.completion_tokens
            tokens = episode.add(response)
            if tokens is not None:
                transcript.turns.append(tokens)
            add(Message(role="assistant", content=response.content,
                        tool_calls=[c.to_openai() for c in response.tool_calls]))
            if not response.tool_calls:
                idle += 1
                if idle >= s.max_idle_turns:
                    exit_reason = "no_tool_call"
                    break
                add(Message(role="user", content=f"{NO_CALL_REPLY}\n"
                            f"{time_note(deadline - time.monotonic())}"))
                continue
            idle = 0
            if self._act(shell, response.tool_calls, deadline, info, add):
                if pending:
                    add(scene_message(pending.pop(0), deadline - time.monotonic()))
                    info["scenes_done"] = info.get("scenes_done", 0) + 1
                    continue
                exit_reason = "submit"
                break
        episode.fill(transcript)
        info.update(exit=exit_reason, token_episode=episode.status,
                    agent_sec=time.monotonic() - start)
        return AgentRun(transcript=transcript, info=info, error=error)

    def _act(self, shell: Shell, calls: list[ToolCall], deadline: float,
             info: dict[str, Any], add: Any) -> bool:
        """Answer every call of a turn (only the first runs); True when it submits."""
        submitted = False
        for i, call in enumerate(calls):
            if i > 0:
                output = "[ignored: one tool call per turn]"
            elif call.name == "submit":
                submitted = True
                output = "[submitted]"
            elif call.name == "bash":
                command = call.arguments.get("command")
                if not isinstance(command, str) or not command.strip():
                    output = 'error: bash needs {"command": "<shell command>"}'
                    if call.raw_arguments is not None:
                        output += f"; arguments were not JSON: {call.raw_arguments[:200]}"
                else:
                    output = self._exec(shell, command, deadline, info)
            else:
                output = f"error: unknown tool {call.name!r}; use bash or submit"
            add(tool_result_message(output, deadline - time.monotonic(), call.id))
        return submitted

    def _exec(self, shell: Shell, command: str, deadline: float, info: dict[str, Any]) -> str:
        left = deadline - time.monotonic()
        if left <= 0:
            return "[not run: the time is up]"
        t0 = time.monotonic()
        result = shell.exec(command, timeout=min(self.settings.command_timeout_sec, left))
        info["env_sec"] += time.monotonic() - t0
        info["commands"] += 1
        return format_output(result.exit_code, result.stdout, result.stderr,
                             timed_out=result.timed_out, limit=self.settings.output_chars)


def _wire(message: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = message.tool_calls
    if message.tool_call_id:
        out["tool_call_id"] = message.tool_call_id
    return out

