"""Clean-up after a session stops, off the caller's thread, finished before the process
exits.

Removing a session's files (unmounting its disk: ext4 writes back what is dirty; or
unlinking a tree) takes tens to hundreds of milliseconds that a trial need not wait
for. `later(fn)` runs it on one background thread; at exit the process runs what is
still queued and waits for the one running (a minute at most), so a short-lived
process (`arena task run`) leaves nothing behind. What a crash leaves, the reaper
removes.
"""

from __future__ import annotations

import atexit
import contextlib
import queue
import threading
import time
from collections.abc import Callable

_todo: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
_guard = threading.Lock()
_worker: threading.Thread | None = None
_open = 0
"""Jobs submitted and not finished."""


def later(job: Callable[[], None]) -> None:
    """Run `job` (which must not raise to matter: errors are swallowed) soon, on the
    janitor's thread."""
    global _worker, _open
    with _guard:
        _open += 1
        if _worker is None or not _worker.is_alive():
            _worker = threading.Thread(target=_work, name="arena-janitor", daemon=True)
            _worker.start()
    _todo.put(job)


def _run(job: Callable[[], None]) -> None:
    global _open
    try:
        with contextlib.suppress(Exception):
            job()
    finally:
        with _guard:
            _open -= 1


def _work() -> None:
    while True:
        _run(_todo.get())


def wait(patience: float = 60.0) -> bool:
    """Run what is queued here and wait for the job running; True when all are done."""
    while True:
        try:
            job = _todo.get_nowait()
        except queue.Empty:
            break
        _run(job)
    deadline = time.monotonic() + patience
    while time.monotonic() < deadline:
        with _guard:
            if _open == 0:
                return True
        time.sleep(0.01)
    return False


atexit.register(wait)
