"""The oracle agent: runs the task's reference solution, `oracle/solve.sh`.

Only this agent is handed the oracle directory (on the host). It copies it into the
session at a random path (or at `/oracle` when solve.sh refers to that path, as packages
in the existing format do, or `/solution`, as Harbor tasks do), runs solve.sh with bash
in the workspace, and deletes it.
"""

from __future__ import annotations

from posttrain_arena.agents._scripted import run_script
from posttrain_arena.agents.base import AgentContext, AgentRun, Shell
from posttrain_arena.agents.transcript import Message, Transcript


class OracleAgent:
    """Replays the reference solution."""

    name = "oracle"

    def run(self, shell: Shell, ctx: AgentContext) -> AgentRun:
        """Copy oracle/ in, run solve.sh until the deadline, remove it."""
        if ctx.oracle_dir is None or not (ctx.oracle_dir / "solve.sh").is_file():
            transcript = Transcript(messages=[Message(role="user", content=ctx.prompt)])
            return AgentRun(transcript=transcript, error="the task has no oracle/solve.sh")
        text = (ctx.oracle_dir / "solve.sh").read_text(encoding="utf-8", errors="replace")
        dest = next((d for d in ("/oracle", "/solution") if d in text), None)
        return run_script(shell, ctx, ctx.oracle_dir, dest_dir=dest, script_name="solve.sh")

