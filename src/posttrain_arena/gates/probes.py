"""Known-bad probes: the oracle's final state, perturbed, which the verifier must reject.

A probe is an ordinary trial whose agent is `ProbeAgent`: in one command it lists the
files of the task's state roots (what the verifier will read), runs the oracle's
solve.sh as the oracle agent does, finds the files the oracle created or changed (its
outputs), perturbs all of them one way, and ends. The verifier then scores that state
like any other.

* `truncate`: each output cut to the first half of its bytes (a truncated answer file);
* `wrong`: each text output with every number off by one (letters shifted by one where
  there are no digits), the layout kept: the output of a wrong but plausible command;
* `remove`: each output removed (a removed file).

Every output is perturbed at once, so a verifier that checks any one of them rejects
the probe: a task is never failed because its oracle also writes a log the verifier
rightly ignores. The perturbation runs inside the session the oracle ran in, with the
oracle's own user, so the probe's state is the oracle's state but for the perturbed
files (no copy of the state in or out can make it differ). A probe with no output to
perturb says so (`applicable` false) and counts for nothing.
"""

from __future__ import annotations

import json
import secrets
import shlex
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from posttrain_arena.agents.base import AgentContext, AgentRun, Shell
from posttrain_arena.agents.oracle import OracleAgent
from posttrain_arena.agents.transcript import Message, Transcript
from posttrain_arena.spec.package import TaskPackage
from posttrain_arena.trial.state import state_roots


@dataclass(frozen=True)
class ProbeKind:
    """One perturbation: its name and what it does, in words."""

    name: str
    description: str


PROBES = (
    ProbeKind("truncate", "each file the oracle wrote cut to its first half"),
    ProbeKind("wrong", "each file the oracle wrote with every number off by one "
                       "(letters shifted where there are none), layout kept"),
    ProbeKind("remove", "each file the oracle wrote removed"),
)

_LIST = r"""
for r in "$@"; do
  [ -e "$r" ] || continue
  find "$r" -type f ! -path "$d/*" ! -path "$src/*" -exec sha1sum -- {} + 2>/dev/null
done | LC_ALL=C sort
"""

PROBE_SCRIPT = r"""# arena probe: list the state roots, run the oracle, perturb what it wrote.
d=$1; kind=$2; src=$3; mark=$4; shift 4
mkdir -p -- "$d" || exit 3
{ """ + _LIST + r""" } > "$d/before"
bash "$src/solve.sh"
rc=$?
printf '\n'  # the oracle's output may not end its last line; the markers start theirs
rm -rf -- "$src"
{ """ + _LIST + r""" } > "$d/after"
LC_ALL=C comm -13 "$d/before" "$d/after" | grep -v '^\\' | cut -c43- \
  | grep -v -e '/__pycache__/' -e '\.pyc$' > "$d/changed"
while IFS= read -r f; do
  [ -f "$f" ] || continue
  case $kind in
    truncate)
      n=$(wc -c < "$f")
      [ "$n" -gt 0 ] || continue
      head -c $((n / 2)) -- "$f" > "$d/tmp" && cat "$d/tmp" > "$f" || continue ;;
    wrong)
      LC_ALL=C grep -Iq . -- "$f" || continue
      LC_ALL=C awk '{ s = $0; out = ""
             while (match(s, /[0-9]+/)) {
               out = out substr(s, 1, RSTART - 1) (substr(s, RSTART, RLENGTH) + 1)
               s = substr(s, RSTART + RLENGTH) }
             print out s }' "$f" > "$d/tmp" || continue
      if cmp -s "$d/tmp" "$f"; then LC_ALL=C tr 'a-yzA-YZ' 'b-zaB-ZA' < "$f" > "$d/tmp"; fi
      cmp -s "$d/tmp" "$f" && continue
      cat "$d/tmp" > "$f" || continue ;;
    remove)
      rm -f -- "$f" || continue ;;
    *) exit 4 ;;
  esac
  printf '%s perturbed=%s\n' "$mark" "$f"
done < "$d/changed"
rm -rf -- "$d"
printf '%s oracle-exit=%s\n' "$mark" "$rc"
"""
"""One exec: lists every file of the state roots with its checksum, runs the oracle's
solve.sh as the oracle agent would (bash, in the workspace), finds the files new or
changed since the listing and perturbs them; reports each with a per-run marker."""


class ProbeAgent(OracleAgent):
    """The oracle, then one perturbation of its outputs. It is an oracle agent (the
    harness hands it the oracle directory) whose name says which probe it is."""

    def __init__(self, kind: ProbeKind, task: TaskPackage) -> None:
        self.kind = kind
        fm = task.frontmatter
        self.roots = state_roots(fm.environment.workdir, list(fm.verifier.state_paths))
        self.name = f"probe:{kind.name}"

    def run(self, shell: Shell, ctx: AgentContext) -> AgentRun:
        """Copy the oracle (and the probe script) in, run both in one exec."""
        transcript = Transcript(messages=[Message(role="user", content=ctx.prompt)])
        solve = ctx.oracle_dir / "solve.sh" if ctx.oracle_dir is not None else None
        if solve is None or not solve.is_file():
            return AgentRun(transcript=transcript, error="the task has no oracle/solve.sh",
                            info=self._info([], applicable=False))
        text = solve.read_text(encoding="utf-8", errors="replace")
        with tempfile.TemporaryDirectory(prefix="arena-probe-") as tmp:
            bundle = Path(tmp) / "oracle"
            shutil.copytree(solve.parent, bundle, symlinks=True)
            (bundle / ".arena-probe.sh").write_text(PROBE_SCRIPT, encoding="utf-8")
            # where the oracle agent would put it: /oracle when solve.sh names it
            dest = "/oracle" if "/oracle" in text else f"/tmp/.arena-{secrets.token_hex(8)}"
            try:
                shell.copy_in(bundle, dest)
            except Exception:
                if dest != "/oracle":
                    raise
                dest = f"/tmp/.arena-{secrets.token_hex(8)}"
                shell.copy_in(bundle, dest)
        mark = f"ARENA-PROBE-{secrets.token_hex(8)}"
        work = f"/tmp/.arena-probe-{secrets.token_hex(8)}"
        result = shell.exec(_sh(f"{dest}/.arena-probe.sh", work, self.kind.name, dest, mark,
                                *self.roots),
                            env={"BENCHFLOW_WORKSPACE": shell.workdir,
                                 "ARENA_SCRIPT_DIR": dest})
        found = [line.split(" ", 1)[1] for line in result.stdout.splitlines()
                 if line.startswith(mark + " ")]
        perturbed = [f.removeprefix("perturbed=") for f in found if f.startswith("perturbed=")]
        finished = any(f.startswith("oracle-exit=") for f in found)
        call = {"id": "call-0", "type": "function", "function": {
            "name": "bash", "arguments": json.dumps({"command": f"probe {self.kind.name}"})}}
        output = result.stdout + (f"\n[stderr]\n{result.stderr}" if result.stderr else "")
        transcript.messages += [
            Message(role="assistant", content="", tool_calls=[call]),
            Message(role="tool", tool_call_id="call-0",
                    content=output[-20_000:] + f"\n[exit {result.exit_code}]")]
        info = self._info(perturbed, applicable=finished and bool(perturbed))
        info.update(commands=1, exit_code=result.exit_code, timed_out=result.timed_out,
                    oracle_completed=finished)
        # Without the script's last word the state is unknown: unmeasured, never "n/a".
        error = None if finished or result.timed_out else (
            f"probe {self.kind.name}: the probe script did not finish (exit "
            f"{result.exit_code}): {result.stderr[-300:]}")
        return AgentRun(transcript=transcript, info=info, error=error)

    def _info(self, perturbed: list[str], *, applicable: bool) -> dict[str, Any]:
        return {"probe": self.kind.name, "perturbed": perturbed, "applicable": applicable}


def _sh(script_path: str, *args: str) -> str:
    """A `/bin/sh SCRIPT ARGS...` command line, quoted (the Shell takes a string)."""
    return " ".join(["/bin/sh", *map(shlex.quote, [script_path, *args])])
