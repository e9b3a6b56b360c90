"""Run one host process with streamed output, a deadline and a whole-tree kill.

Used by the `local` backend around each bubblewrap invocation. The child starts in its
own session; on timeout its process group is SIGKILLed and `kill_extra` (the session's
cgroup) is asked to finish off anything that escaped, before the pipes are drained.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from typing import IO

from posttrain_arena.sandbox.base import ExecResult, Stdin

MAX_CAPTURE = 8 << 20  # bytes kept per stream; the rest is dropped with a marker
_TRUNCATED = "\n[... output truncated by posttrain-arena ...]\n"


class OutputCapture:
    """Collects a stream's bytes (up to MAX_CAPTURE) and forwards decoded text."""

    def __init__(self, on_output: Callable[[str], None] | None) -> None:
        self.parts: list[bytes] = []
        self.size = 0
        self.dropped = False
        self.on_output = on_output
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, data: bytes) -> None:
        if self.on_output is not None:
            text = self.decoder.decode(data)
            if text:
                self.on_output(text)
        room = MAX_CAPTURE - self.size
        if room <= 0:
            self.dropped = True
            return
        if len(data) > room:
            data, self.dropped = data[:room], True
        self.parts.append(data)
        self.size += len(data)

    def text(self) -> str:
        out = b"".join(self.parts).decode("utf-8", errors="replace")
        return out + _TRUNCATED if self.dropped else out


def run_with_deadline(
    argv: Sequence[str],
    *,
    timeout: float | None,
    env: dict[str, str] | None = None,
    on_output: Callable[[str], None] | None = None,
    kill_extra: Callable[[], None] | None = None,
    register: Callable[[subprocess.Popen[bytes], bool], None] | None = None,
    pass_fds: tuple[int, ...] = (),
    after_start: Callable[[], None] | None = None,
    stdin: Stdin | None = None,
) -> ExecResult:
    """Run argv; on timeout kill its process group (and `kill_extra`) and return
    timed_out=True with exit code 137. `stdin` is fed to the process (then closed); a
    callable is called once the process runs, and the timeout counts from its return
    (when it raises, the process group is killed and the exception goes on)."""
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,
            close_fds=True,
            pass_fds=pass_fds,
        )
    finally:
        if after_start is not None:
            after_start()
    if register is not None:
        register(proc, True)
    out, err = OutputCapture(on_output), OutputCapture(on_output)
    sel = selectors.DefaultSelector()
    assert proc.stdout is not None and proc.stderr is not None
    sel.register(proc.stdout, selectors.EVENT_READ, out)
    sel.register(proc.stderr, selectors.EVENT_READ, err)
    timed_out = fed = False
    try:
        if stdin is not None:
            assert proc.stdin is not None
            if callable(stdin):
                try:  # the process runs and waits on its input meanwhile
                    payload = stdin()
                except BaseException:
                    if kill_extra is not None:
                        kill_extra()
                    raise  # the finally kills the group
                t0 = time.monotonic()
            else:
                payload = stdin
            threading.Thread(target=_feed, args=(proc.stdin, payload), daemon=True,
                             name="exec-stdin").start()
            fed = True
        deadline = None if timeout is None else t0 + timeout
        while sel.get_map():
            wait = None if deadline is None else deadline - time.monotonic()
            if wait is not None and wait <= 0:
                timed_out = True
                _kill_group(proc)
                if kill_extra is not None:
                    kill_extra()
                deadline = None  # drain what is left; the writers are dead
                continue
            for key, _ in sel.select(wait):
                data = os.read(key.fd, 65536)
                if not data:
                    sel.unregister(key.fileobj)
                    continue
                key.data.feed(data)
        code = proc.wait()
    finally:
        sel.close()
        if proc.poll() is None:
            _kill_group(proc)
            proc.wait()
        if proc.stdin is not None and not fed:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        if proc.stdout:
            proc.stdout.close()
        if proc.stderr:
            proc.stderr.close()
        if register is not None:
            register(proc, False)
    return ExecResult(
        exit_code=137 if timed_out else _exit_code(code),
        stdout=out.text(),
        stderr=err.text(),
        timed_out=timed_out,
        duration_sec=time.monotonic() - t0,
    )


def _feed(pipe: IO[bytes], data: bytes) -> None:
    """Write `data` and close (the command may exit without reading all of it)."""
    with contextlib.suppress(OSError):
        pipe.write(data)
    with contextlib.suppress(OSError):
        pipe.close()


def _exit_code(code: int) -> int:
    return 128 - code if code < 0 else code


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
