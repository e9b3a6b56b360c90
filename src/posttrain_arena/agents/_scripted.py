"""Shared by the oracle and script agents: copy a script in, run it, record the turn."""

from __future__ import annotations

import json
import secrets
import shutil
import tempfile
from pathlib import Path

from posttrain_arena.agents.base import AgentContext, AgentRun, Shell, ShellResult
from posttrain_arena.agents.transcript import Message, Transcript


def run_script(
    shell: Shell, ctx: AgentContext, source: Path, *, dest_dir: str | None = None,
    script_name: str, cleanup: bool = True,
) -> AgentRun:
    """Copy `source` (a file, or a directory holding `script_name`) into the session at a
    random path (or `dest_dir`), run it with bash in the workspace until the deadline,
    then delete it."""
    target = dest_dir or f"/tmp/.arena-{secrets.token_hex(8)}"
    with tempfile.TemporaryDirectory(prefix="arena-script-") as tree:
        if not source.is_dir():  # a lone script travels in a directory of its own
            shutil.copy2(source, Path(tree) / script_name)
            source = Path(tree)
        try:
            result = _copy_and_run(shell, source, target, script_name, cleanup)
        except Exception:
            if dest_dir is None:
                raise
            # e.g. the local backend cannot write /oracle: fall back to a random path
            target = f"/tmp/.arena-{secrets.token_hex(8)}"
            result = _copy_and_run(shell, source, target, script_name, cleanup)
    command = f"bash {target}/{script_name}"
    call = {"id": "call-0", "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": command})}}
    output = result.stdout + (f"\n[stderr]\n{result.stderr}" if result.stderr else "")
    transcript = Transcript(messages=[
        Message(role="user", content=ctx.prompt),
        Message(role="assistant", content="", tool_calls=[call]),
        Message(role="tool", tool_call_id="call-0",
                content=output[-20_000:] + f"\n[exit {result.exit_code}]"),
    ])
    info = {"commands": 1, "exit_code": result.exit_code, "timed_out": result.timed_out}
    return AgentRun(transcript=transcript, info=info)


def _copy_and_run(shell: Shell, source: Path, target: str, script_name: str,
                  cleanup: bool) -> ShellResult:
    """One step copies `source` to `target` and runs the script there with bash, then
    removes it (the deletion must happen even when the script fails; a timeout kills
    both, and the session is discarded then anyway)."""
    command = f"bash {target}/{script_name}"
    run = f"{command}; rc=$?; rm -rf {target}; exit $rc" if cleanup else command
    env = {"BENCHFLOW_WORKSPACE": shell.workdir, "ARENA_SCRIPT_DIR": target}
    return shell.run_with(source, target, run, env=env)
