"""The verifier's supervisor: runs inside the verifier's session, standalone (stdlib only).

    python3 -I -S -B supervise.py STATUS_DIR [--untar DIR] -- ARGV...

It is the verifier's top process. It makes itself the *child subreaper* of everything
it starts, so every process of the verifier's tree that outlives its parent (a
`setsid`, a double fork, a daemon the agent's code leaves behind) is re-parented to
it instead of escaping to PID 1. Every orphan that exits while the verifier runs is
reaped by it and recorded; when the verifier's command exits, every remaining
descendant is recorded (if orphaned), killed and reaped. Only then does it write its status
(`supervisor.json`: the command's exit status and the orphans seen) into STATUS_DIR
and exit with the command's status.

Why orphans void the verdict: a process that outlives the one that started it is the
only way code the verifier ran on the agent's behalf can keep acting after the
verifier last wrote its reward. A verifier that leaves none cannot have been raced;
one that leaves any gets no reward (the harness reports it as a verifier error).

The supervisor ignores every catchable signal and is not dumpable (no other process
may read its memory or descriptors without CAP_SYS_PTRACE), so the only ways to stop
it are SIGKILL or SIGSTOP, which end the exec with 137 or a timeout: never a reward.
With `--untar DIR`, before the command it restores an uncompressed tar read from its
stdin under DIR with the system's `tar` (the agent's state, in fresh verification: the
supervisor starts before the state exists and waits for it); when that fails it exits
with RESTORE_FAILED and writes no status (the command never ran).
This file is copied into the harness bundle; it must not import posttrain_arena.
"""

import os
import sys
import time

try:  # the C module: `signal` imports enum, which costs more than this whole program
    import _signal as signal
except ImportError:  # pragma: no cover - other Pythons
    import signal  # type: ignore[no-redef]

PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
STATUS_NAME = "supervisor.json"
STATUS_WRITE_FAILED = 87
RESTORE_FAILED = 86


def _prctl(option, value):
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl failed")


def _children_of(parent):
    """Pids whose parent is `parent`: from /proc/PID/task/*/children where the kernel
    has it (one small read per thread), else from every /proc/*/stat."""
    try:
        tasks = os.listdir(f"/proc/{parent}/task")
        out: list[int] = []
        for tid in tasks:
            with open(f"/proc/{parent}/task/{tid}/children", "rb") as fh:
                out.extend(int(p) for p in fh.read().split())
        return out
    except OSError:
        out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 1 and int(fields[1]) == parent:
            out.append(int(name))
    return out


def _tree(root):
    """`root` and all its descendants, parents first."""
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(_children_of(pid))
    return found


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read(300).replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return ""


def _kill_tree(root):
    for pid in _tree(root):
        try:  # noqa: SIM105 (contextlib's import would cost more than this program)
            os.kill(pid, signal.SIGKILL)
        except (OSError):
            pass


def _reap():
    """Reap every exited child; [(pid, status)]."""
    done: list[tuple[int, int]] = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return done
        if pid == 0:
            return done
        done.append((pid, status))


def _code(status):
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    return 128 + os.WTERMSIG(status)


def _start(argv):
    """Fork and exec argv (PATH resolved) with default signal handling; its pid."""
    pid = os.fork()
    if pid == 0:
        for sig in range(1, signal.NSIG):
            try:  # noqa: SIM105 (contextlib's import would cost more than this program)
                signal.signal(sig, signal.SIG_DFL)
            except (OSError, ValueError):
                pass
        try:
            os.execvp(argv[0], argv)
        except OSError as exc:
            print(f"supervise: cannot run {argv[0]}: {exc}", file=sys.stderr)
        os._exit(127)
    return pid


def _wait_for(child, orphans, seen):
    """Wait until `child` exits (its exit code, or None if it cannot be waited for);
    every other process reaped on the way is recorded as an orphan."""
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            return None
        except InterruptedError:
            continue
        if pid == child:
            return _code(status)
        if pid not in seen:
            seen.add(pid)
            orphans.append({"pid": pid, "command": "(exited)"})


def main(argv):
    untar = None
    if len(argv) >= 3 and argv[1] == "--untar":
        untar, argv = argv[2], [argv[0], *argv[3:]]
    if len(argv) < 3 or argv[1] != "--":
        print("usage: supervise.py STATUS_DIR [--untar DIR] -- ARGV...", file=sys.stderr)
        return 2
    status_dir, command = argv[0], argv[2:]
    for sig in range(1, signal.NSIG):
        if sig in (signal.SIGKILL, signal.SIGSTOP, signal.SIGCHLD):
            continue
        try:  # noqa: SIM105 (contextlib's import would cost more than this program)
            signal.signal(sig, signal.SIG_IGN)
        except (OSError, ValueError):
            pass
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_DUMPABLE, 0)
    me = os.getpid()
    orphans: list[dict[str, object]] = []
    seen: set[int] = set()
    if untar is not None:  # nothing of the state has run yet: only tar runs here
        restored = _wait_for(_start(["tar", "--numeric-owner", "-xpf", "-", "-C", untar]),
                             orphans, seen)
        if restored != 0:
            print(f"supervise: cannot restore the state (tar exit {restored})",
                  file=sys.stderr)
            return RESTORE_FAILED
    # Block until the command ends; every other child reaped on the way is an orphan
    # that already exited. (One still running is found below; either voids the verdict,
    # so there is no need to watch for them while the command runs.)
    exit_code = _wait_for(_start(command), orphans, seen)
    if exit_code is None:
        exit_code = 125  # cannot happen: the command is our child until reaped
    # The verifier's command is done: nothing it started may outlive it.
    while True:
        left = _children_of(me)
        for pid in left:
            if pid not in seen:
                seen.add(pid)
                orphans.append({"pid": pid, "command": _cmdline(pid)})
            _kill_tree(pid)
        for pid, _status in _reap():
            if pid not in seen:
                seen.add(pid)
                orphans.append({"pid": pid, "command": "(exited)"})
        if not left:
            try:
                os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break  # no child left, not even one still being created
        time.sleep(0.002)
    try:
        _write_status(status_dir, {"exit_code": exit_code, "orphans": orphans[:20],
                                   "orphan_count": len(orphans)})
    except OSError as exc:
        print(f"supervise: cannot write the status: {exc}", file=sys.stderr)
        return STATUS_WRITE_FAILED
    return exit_code


def _write_status(status_dir, status):
    """Replace STATUS_DIR/supervisor.json without following a link planted there."""
    if os.path.islink(status_dir) or not os.path.isdir(status_dir):
        if os.path.lexists(status_dir):
            os.unlink(status_dir)
        os.makedirs(status_dir, mode=0o755)
    path = os.path.join(status_dir, STATUS_NAME)
    tmp = os.path.join(status_dir, f".{STATUS_NAME}.{os.getpid()}")
    if os.path.lexists(tmp):
        os.unlink(tmp)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w") as fh:
        fh.write(_json(status))
    os.replace(tmp, path)


def _json(value):
    """JSON for the status (ints, lists, dicts, strings): json's import costs more than
    this whole program's work, and the verifier's time is the trial's."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_json(str(k))}: {_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_json(v) for v in value) + "]"
    if isinstance(value, int):
        return str(value)
    text = "".join(c if c.isprintable() and c not in '"\\' else "?" for c in str(value))
    return f'"{text}"'



if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
