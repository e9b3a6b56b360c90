"""Pieces of running a command through the engine's exec API (docker_session.py runs
them): the script that kills every process carrying an exec's marker, what the engine
answers for a missing program, and an exec's standard input over its hijacked
connection."""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Any

KILL_MARKED = (
    'for d in /proc/[0-9]*; do p=${d#/proc/}; [ "$p" = 1 ] && continue; '
    '[ "$p" = "$$" ] && continue; '
    'if tr "\\000" "\\n" < "$d/environ" 2>/dev/null | grep -qx "ARENA_EXEC_ID=$1"; '
    'then kill -9 "$p" 2>/dev/null; fi; done; true'
)
"""Run as root in the container with the marker as $1: SIGKILLs every process whose
environment holds ARENA_EXEC_ID=<marker> (setsid, double forks, re-parenting keep it)."""

NOT_FOUND = "executable file not found"
"""What the engine answers when an exec's program does not exist in the image."""


class StdinStream:
    """An exec's hijacked connection: feeds `data` to the command's stdin from a thread
    (then half-closes it, so the command sees end of file) and yields (stdout, stderr)
    chunks as the demultiplexed stream of `exec_start(stream=True, demux=True)` does."""

    def __init__(self, sock: Any, data: bytes) -> None:
        self.sock = sock
        self.raw = getattr(sock, "_sock", sock)
        self.writer = threading.Thread(target=self._write, args=(data,), daemon=True,
                                       name="exec-stdin")
        self.writer.start()

    def _write(self, data: bytes) -> None:
        with contextlib.suppress(OSError):  # the command may exit without reading it all
            self.raw.sendall(data)
            self.raw.shutdown(socket.SHUT_WR)

    def __iter__(self) -> Any:
        from docker.utils.socket import STDOUT, frames_iter

        try:
            for stream_id, chunk in frames_iter(self.sock, tty=False):
                yield (chunk, None) if stream_id == STDOUT else (None, chunk)
        finally:
            self.close()

    def close(self) -> None:
        self.close_socket(self.sock)

    @staticmethod
    def close_socket(sock: Any) -> None:
        """Close an exec's hijacked connection and its raw socket."""
        for handle in (sock, getattr(sock, "_sock", sock)):
            with contextlib.suppress(Exception):
                handle.close()
