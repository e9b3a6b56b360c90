"""Shared-mode verification: the verifier runs in the agent's own session, hardened.

After every agent process has ended (`kill_all`), the harness:

* removes and recreates the verifier's output directory (`/logs/verifier`) itself;
* copies `verifier/` and the harness runtime into a new root-owned directory at a
  random path, so nothing the agent wrote can stand in for them;
* drops symbolic links in the state roots that lead outside them (resolved in the
  session, as the verifier would follow them);
* runs the entry point through `env -i` with PATH pinned to the system directories,
  no PYTHON* variables, Python isolated (`-I`) and without the site module's side
  effects (`-S`: no .pth files, no sitecustomize), bytecode read from a fresh cache
  prefix (planted `__pycache__` files are ignored), pytest with plugin autoloading off
  and conftest.py files outside the verifier's directory ignored;
* where the backend can say what changed in the session from outside it (docker's
  container diff), refuses to verify when the agent changed the verifier's runtime
  (interpreters, shells, the Python library, the dynamic loader): a verifier error.
  The local backend binds the system directories read-only, so they cannot change.

Fresh isolation remains the stronger mode: here the interpreter itself is the one the
agent had access to.
"""

from __future__ import annotations

import secrets

from posttrain_arena.sandbox.base import Session
from posttrain_arena.task_format.trust import DEFAULT_PATH
from posttrain_arena.trial import verification
from posttrain_arena.trial.harness import harness_bundle
from posttrain_arena.trial.plan import HARNESS_CWD, TrialPlan
from posttrain_arena.trial.verification import Reading
from posttrain_arena.trial.verifier import LOGS_DIR, build_command

RUNTIME_PREFIXES = (
    "/usr/bin/", "/usr/sbin/", "/usr/local/bin/", "/usr/local/sbin/", "/bin/", "/sbin/",
    "/usr/lib/python3", "/usr/local/lib/python3", "/usr/lib/x86_64-linux-gnu/",
    "/usr/lib/aarch64-linux-gnu/", "/lib/", "/lib64/", "/usr/lib64/", "/usr/libexec/",
    "/etc/ld.so.",
)
"""Where the verifier's runtime lives: a change there voids shared-mode verification."""

_PREPARE = r"""
vroot=$1; logs=$2; workdir=$3; shift 3
[ -d "$workdir" ] || mkdir -p -- "$workdir" 2>/dev/null
rm -rf -- "$logs" 2>/dev/null
parent=${logs%/*}
if [ -L "$parent" ] || { [ -e "$parent" ] && [ ! -d "$parent" ]; }; then rm -f -- "$parent"; fi
if mkdir -p -m 0755 -- "$logs" 2>/dev/null; then echo "logs=$logs"; else
  echo "logs=$vroot/logs"; fi
mkdir -m 0700 -- "$vroot" || exit 3
for root in "$@"; do
  [ -d "$root" ] || continue
  find "$root" -type l 2>/dev/null | while IFS= read -r link; do
    target=$(readlink -f -- "$link" 2>/dev/null) || target=/
    inside=0
    for r in "$@"; do case "$target" in "$r"|"$r"/*) inside=1;; esac; done
    if [ "$inside" = 0 ]; then rm -f -- "$link"; echo "dropped=$link"; fi
  done
done
"""


def verify_shared(plan: TrialPlan, session: Session, roots: list[str]) -> Reading:
    """Harden the agent's session and run the verifier in it (then halt it)."""
    tampered = runtime_changes(session)
    if tampered:
        shown = ", ".join(tampered[:5]) + (" ..." if len(tampered) > 5 else "")
        return Reading(None, f"the agent changed the verifier's runtime ({shown}); shared "
                             "isolation cannot trust it, so nothing was verified (use "
                             "isolation: fresh, or keep the agent out of system paths)")
    vroot = f"/tmp/.arena-verify-{secrets.token_hex(8)}"
    prep = session.exec(["/bin/sh", "-c", _PREPARE, "sh", vroot, LOGS_DIR, plan.workdir,
                         *roots],
                        timeout=120, user="root", workdir=HARNESS_CWD,
                        env={"PATH": DEFAULT_PATH})
    if prep.exit_code != 0:
        # The same session ran the agent a moment ago: if it cannot run this now, the
        # agent wrecked it. That is the agent's result, not an infrastructure failure.
        return Reading(0.0, "the agent's session can no longer run the verifier "
                             f"(exit {prep.exit_code}: {(prep.stderr or prep.stdout)[-300:]})")
    logs = LOGS_DIR
    dropped = []
    for line in prep.stdout.splitlines():
        key, _, value = line.partition("=")
        if key == "logs":
            logs = value
        elif key == "dropped":
            dropped.append(value)
    if logs != LOGS_DIR:
        session.exec(["mkdir", "-p", "-m", "0755", logs], timeout=30, user="root",
                     workdir=HARNESS_CWD, env={"PATH": DEFAULT_PATH})
    if dropped:
        plan.record.write_text("dropped_links.txt", "\n".join(dropped) + "\n")
    session.copy_in(plan.task.verifier_dir, f"{vroot}/verifier")
    session.copy_in(harness_bundle(), f"{vroot}/harness")
    command = build_command(plan.task.verifier_kind, verifier_dir=f"{vroot}/verifier",
                            harness_dir=f"{vroot}/harness", workdir=plan.workdir,
                            base_env=None, isolate_site=True, logs_dir=logs,
                            task_env=plan.task.frontmatter.verifier.env,
                            pycache_prefix=f"{vroot}/pycache")
    reading = verification.run(plan, session, command)
    assert reading is not None  # no prefix: the verifier always ran
    return reading


def runtime_changes(session: Session) -> list[str]:
    """Runtime paths the agent changed, as the backend sees them from outside."""
    return sorted(p for p in session.changed_paths()
                  if p.startswith(RUNTIME_PREFIXES) and "/__pycache__/" not in p)
