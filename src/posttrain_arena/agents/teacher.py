"""The oracle teacher: the oracle's commands, run and recorded as the model agent would.

For each training task it runs `oracle/solve.sh`'s *text* as one `bash` tool call, in a
real trial, and records the conversation the model agent would have had: system + user
(`initial_messages`), an assistant `bash` call with the oracle's commands, the tool
result (the real output, formatted as the agent formats it), and an assistant `submit`.
The trial's verifier then scores it; `train/teacher.py` keeps the verified ones for SFT.
"""

from __future__ import annotations

import time

from posttrain_arena.agents.base import AgentContext, AgentRun, Shell
from posttrain_arena.agents.model import (
    AgentSettings,
    bash_call_message,
    call_id,
    format_output,
    initial_messages,
    submit_call_message,
    tool_result_message,
)
from posttrain_arena.agents.transcript import Message, Transcript


def oracle_command(solve_text: str) -> str:
    """solve.sh as one shell command: its text, without the shebang line."""
    lines = solve_text.strip("\n").splitlines()
    if lines and lines[0].startswith("#!"):
        lines = lines[1:]
    return "\n".join(lines).strip()


def oracle_conversation(prompt: str, command: str, output: str, time_left_sec: float,
                        time_left_after_sec: float) -> list[Message]:
    """The model agent's conversation for one command: system + user, an assistant
    `bash` call of `command`, its formatted `output` as the tool result, then `submit`
    (time notes: before the call, after it)."""
    messages = initial_messages(prompt, time_left_sec)
    messages.append(bash_call_message(command, 0))
    messages.append(tool_result_message(output, time_left_after_sec, call_id(0)))
    messages.append(submit_call_message(1))
    return messages


class OracleTeacherAgent:
    """Runs the oracle's commands the way the model agent runs a command, and records
    the conversation in the model agent's format."""

    name = "teacher:oracle"

    def __init__(self, solve_text: str | None, settings: AgentSettings | None = None) -> None:
        self.command = oracle_command(solve_text) if solve_text else ""
        self.settings = settings or AgentSettings()

    def run(self, shell: Shell, ctx: AgentContext) -> AgentRun:
        """One episode: bash(solve.sh text), then submit."""
        start = time.monotonic()
        if not self.command:
            return AgentRun(transcript=Transcript(), error="the task has no oracle/solve.sh")
        time_left = ctx.deadline - start
        left = ctx.deadline - time.monotonic()
        result = shell.exec(self.command, timeout=max(1.0, left))
        output = format_output(result.exit_code, result.stdout, result.stderr,
                               timed_out=result.timed_out, limit=self.settings.output_chars)
        messages = oracle_conversation(ctx.prompt, self.command, output, time_left,
                                       ctx.deadline - time.monotonic())
        info = {"turns": 2, "commands": 1, "exit_code": result.exit_code,
                "exit": "submit", "agent_sec": time.monotonic() - start}
        return AgentRun(transcript=Transcript(messages=messages), info=info)
