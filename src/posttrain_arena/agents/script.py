"""The script agent (`script:PATH`): runs an author's shell script as the agent.

Authors use it to probe their verifier with cheating attempts (write the reward file,
edit the tests, leave a process behind...) and see that none of them scores.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from posttrain_arena.agents._scripted import run_script
from posttrain_arena.agents.base import AgentContext, AgentRun, Shell


class ScriptAgent:
    """Copies a script into the session and runs it with bash in the workspace."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"agent script {self.path} does not exist")
        digest = hashlib.sha256(self.path.read_bytes()).hexdigest()[:8]
        # The content hash keeps two different probes with one file name apart in ids.
        self.name = f"script:{self.path.name}#{digest}"

    def run(self, shell: Shell, ctx: AgentContext) -> AgentRun:
        """Run the script until it exits or the deadline passes."""
        return run_script(shell, ctx, self.path, script_name="agent.sh", cleanup=False)
