"""The empty agent: does nothing. Its trial shows what an untouched environment scores;
a well-made verifier rejects it."""

from __future__ import annotations

from posttrain_arena.agents.base import AgentContext, AgentRun, Shell
from posttrain_arena.agents.transcript import Message, Transcript


class EmptyAgent:
    """Acts not at all."""

    name = "empty"

    def run(self, shell: Shell, ctx: AgentContext) -> AgentRun:
        """Return at once with an empty transcript (the prompt only)."""
        transcript = Transcript(messages=[Message(role="user", content=ctx.prompt)])
        return AgentRun(transcript=transcript, info={"commands": 0})
