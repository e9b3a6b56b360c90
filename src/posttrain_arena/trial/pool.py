"""A warm pool of pristine sessions, so a trial does not wait for a container.

When a trial takes a session for a given image, limits and mounts, the pool starts the
next one in the background; back-to-back trials of the same environment (replays,
evaluation with several samples, GRPO groups) then find one ready. Pooled sessions are
pristine: no agent has touched them (a verifier's one exec empties its state roots
itself, `fresh.py`). An idle session is stopped after
`idle_sec` without a taker, by `close()`, or at interpreter exit, so a runner that is
never closed leaks nothing for long; the docker backend's orphan reaper removes what a
crash leaves, as for any labelled container.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
import weakref
from collections.abc import Hashable
from concurrent.futures import Future, ThreadPoolExecutor

from posttrain_arena.sandbox.base import Backend, ImageRef, Limits, Mount, Session


class SessionPool:
    """At most one idle, pre-started session per (image, limits, mounts, role)."""

    def __init__(self, backend: Backend, *, max_idle: int = 8, idle_sec: float = 30.0) -> None:
        self.backend = backend
        self.max_idle = max_idle
        self.idle_sec = idle_sec
        self._lock = threading.Lock()
        self._ready: dict[Hashable, Future[Session]] = {}
        self._discarding: list[Future[None]] = []
        self._closed = False
        self._executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="pool")
        atexit.register(_close_ref, weakref.ref(self))

    def take(
        self, image: ImageRef, limits: Limits, labels: dict[str, str], *,
        mounts: list[Mount] | None = None, role: str = "agent",
        output_dir: str | None = None,
    ) -> Session:
        """A started session: the pooled one when ready, else a new one.
        Either way the next one for this key starts in the background. `output_dir`:
        as for Backend.start."""
        key = (image.tag, limits, tuple(mounts or ()), role, output_dir)
        with self._lock:
            pending = self._ready.pop(key, None)
            if not self._closed and len(self._ready) < self.max_idle:
                fut = self._executor.submit(self._start, image, limits, mounts, role,
                                            None, output_dir)
                self._ready[key] = fut
                timer = threading.Timer(self.idle_sec, self._expire, (key, fut))
                timer.daemon = True
                timer.start()
        if pending is not None and pending.done() and pending.exception() is None:
            return pending.result()
        if pending is not None:  # not ready yet (or failed): do not wait on it
            pending.add_done_callback(_stop_when_done)
        return self._start(image, limits, mounts, role, labels, output_dir)

    def _start(self, image: ImageRef, limits: Limits, mounts: list[Mount] | None, role: str,
               labels: dict[str, str] | None = None,
               output_dir: str | None = None) -> Session:
        return self.backend.start(
            image, limits=limits, mounts=mounts,
            labels=labels or {"posttrain-arena.role": f"pooled-{role}"},
            output_dir=output_dir)

    def _expire(self, key: Hashable, fut: Future[Session]) -> None:
        """Stop a pooled session nobody took in time."""
        with self._lock:
            if self._ready.get(key) is not fut:
                return
            del self._ready[key]
        fut.add_done_callback(_stop_when_done)

    def discard(self, session: Session) -> None:
        """Stop a session in the background (one no agent process ever ran in, such as
        a verifier's): the trial need not wait for the engine to remove it."""
        with self._lock:
            if not self._closed:
                self._discarding = [f for f in self._discarding if not f.done()]
                self._discarding.append(self._executor.submit(session.stop))
                return
        session.stop()

    def close(self) -> None:
        """Stop every idle session and finish background stops; later `take`s start
        sessions directly."""
        with self._lock:
            self._closed = True
            pending = list(self._ready.values())
            self._ready.clear()
            discarding = list(self._discarding)
        for fut in pending:
            with contextlib.suppress(Exception):
                fut.result(timeout=120).stop()
        for stop in discarding:
            with contextlib.suppress(Exception):
                stop.result(timeout=120)
        self._executor.shutdown(wait=False)


def _stop_when_done(fut: Future[Session]) -> None:
    if fut.exception() is None:
        with contextlib.suppress(Exception):
            fut.result().stop()


def _close_ref(ref: weakref.ref[SessionPool]) -> None:
    pool = ref()
    if pool is not None:
        pool.close()
