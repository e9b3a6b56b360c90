"""Known-bad probes: the oracle's final state, perturbed, which the verifier must reject.

A probe is an ordinary trial whose agent is `ProbeAgent`: it lists the files of the
task's state roots (what the verifier will read), runs the oracle exactly as the oracle
agent does, finds the files the oracle created or changed (its outputs), perturbs all
of them one way, and ends. The verifier then scores that state like any other.

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

import secrets
import shlex
from dataclasses import dataclass

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
  find "$r" -type f ! -path "$d/*" -exec sha1sum -- {} + 2>/dev/null
done | sort
"""

SNAPSHOT_SCRIPT = r"""export LC_ALL=C
d=$1; shift
mkdir -p -- "$d" || exit 3
{ """ + _LIST + r""" } > "$d/before"
"""
"""Lists every file of the state roots with its checksum, before the oracle runs."""

PERTURB_SCRIPT = r"""export LC_ALL=C
d=$1; kind=$2; shift 2
[ -f "$d/before" ] || exit 3
{ """ + _LIST + r""" } > "$d/after"
comm -13 "$d/before" "$d/after" | grep -v '^\\' | cut -c43- \
  | grep -v -e '/__pycache__/' -e '\.pyc$' > "$d/changed"
while IFS= read -r f; do
  [ -f "$f" ] || continue
  case $kind in
    truncate)
      n=$(wc -c < "$f")
      [ "$n" -gt 0 ] || continue
      head -c $((n / 2)) -- "$f" > "$d/tmp" && cat "$d/tmp" > "$f" || continue ;;
    wrong)
      grep -Iq . -- "$f" || continue
      awk '{ s = $0; out = ""
             while (match(s, /[0-9]+/)) {
               out = out substr(s, 1, RSTART - 1) (substr(s, RSTART, RLENGTH) + 1)
               s = substr(s, RSTART + RLENGTH) }
             print out s }' "$f" > "$d/tmp" || continue
      if cmp -s "$d/tmp" "$f"; then tr 'a-yzA-YZ' 'b-zaB-ZA' < "$f" > "$d/tmp"; fi
      cmp -s "$d/tmp" "$f" && continue
      cat "$d/tmp" > "$f" || continue ;;
    remove)
      rm -f -- "$f" || continue ;;
    *) exit 4 ;;
  esac
  printf 'perturbed=%s\n' "$f"
done < "$d/changed"
rm -rf -- "$d"
"""
"""Finds the oracle's outputs (files new or changed since the snapshot) and perturbs
them; prints `perturbed=PATH` for each file it changed."""


class ProbeAgent(OracleAgent):
    """The oracle, then one perturbation of its outputs. It is an oracle agent (the
    harness hands it the oracle directory) whose name says which probe it is."""

    def __init__(self, kind: ProbeKind, task: TaskPackage) -> None:
        self.kind = kind
        fm = task.frontmatter
        self.roots = state_roots(fm.environment.workdir, list(fm.verifier.state_paths))
        self.name = f"probe:{kind.name}"

    def run(self, shell: Shell, ctx: AgentContext) -> AgentRun:
        """Snapshot the state roots, run the oracle, perturb what it wrote."""
        work = f"/tmp/.arena-probe-{secrets.token_hex(8)}"
        snap = shell.exec(_sh(SNAPSHOT_SCRIPT, work, *self.roots), timeout=120)
        if snap.exit_code != 0:
            return self._unmeasured(ctx, f"could not list the state roots: {snap.stderr[-300:]}")
        run = super().run(shell, ctx)
        info = dict(run.info)
        if run.error is not None or info.get("timed_out"):
            info.update(probe=self.kind.name, applicable=False, perturbed=[],
                        oracle_completed=False)
            return AgentRun(transcript=run.transcript, info=info, error=run.error)
        result = shell.exec(_sh(PERTURB_SCRIPT, work, self.kind.name, *self.roots),
                            timeout=300)
        perturbed = [line.removeprefix("perturbed=") for line in result.stdout.splitlines()
                     if line.startswith("perturbed=")]
        info.update(probe=self.kind.name, perturbed=perturbed, oracle_completed=True,
                    applicable=bool(perturbed) and result.exit_code == 0,
                    perturb_exit=result.exit_code)
        transcript = run.transcript.model_copy(update={"messages": [
            *run.transcript.messages,
            Message(role="tool", content=f"[probe {self.kind.name}] perturbed "
                                         f"{len(perturbed)} file(s)\n" + result.stderr[-2000:]),
        ]})
        return AgentRun(transcript=transcript, info=info)

    def _unmeasured(self, ctx: AgentContext, why: str) -> AgentRun:
        transcript = Transcript(messages=[Message(role="user", content=ctx.prompt)])
        return AgentRun(transcript=transcript, error=f"probe {self.kind.name}: {why}",
                        info={"probe": self.kind.name, "applicable": False, "perturbed": []})


def _sh(script: str, *args: str) -> str:
    """A `/bin/sh -c SCRIPT sh ARGS...` command line (the Shell takes a string)."""
    return " ".join(["/bin/sh", "-c", shlex.quote(script), "sh", *map(shlex.quote, args)])
