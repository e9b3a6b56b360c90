"""The trial journal: an append-only JSON Lines file of TrialResults.

A batch that is interrupted resumes by trial identity: `done(trial_id)` returns the
last result of a trial whose outcome is final (scored, verifier error, agent timeout),
so only trials that never finished or failed on infrastructure run again. Each line is
written with one `write` call under a lock and flushed; a torn last line (a crash
mid-write) is skipped on load.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError

from posttrain_arena.trial.result import TrialResult


class Journal:
    """Append-only record of trial results, safe to share between threads."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._latest: dict[str, TrialResult] = {}
        self.skipped_lines = 0
        if self.path.exists():
            for result in self._read():
                self._latest[result.trial_id] = result
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)

    def _read(self) -> Iterator[TrialResult]:
        with self.path.open(encoding="utf-8") as fh:
            for line in fh:
                if not line.strip():
                    continue
                try:
                    yield TrialResult.model_validate(json.loads(line))
                except (ValueError, ValidationError):
                    self.skipped_lines += 1  # torn or foreign line: never fatal

    def append(self, result: TrialResult) -> None:
        """Record a result durably (flushed and fsynced)."""
        line = result.model_dump_json() + "\n"
        with self._lock:
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(line)
                fh.flush()
                os.fsync(fh.fileno())
            self._latest[result.trial_id] = result

    def latest(self, trial_id: str) -> TrialResult | None:
        """The most recent result recorded for a trial, whatever its outcome."""
        with self._lock:
            return self._latest.get(trial_id)

    def done(self, trial_id: str) -> TrialResult | None:
        """The trial's final result, or None when it must (re)run: never recorded, or
        its last attempt failed on infrastructure (build failed, infra error)."""
        result = self.latest(trial_id)
        if result is None or result.outcome.is_infrastructure:
            return None
        return result

    scored = done
    """Alias of `done`: a result resume may keep (the trial reached the verifier or
    timed out), else None."""

    def results(self) -> list[TrialResult]:
        """The latest result of every trial recorded."""
        with self._lock:
            return list(self._latest.values())

    def __len__(self) -> int:
        with self._lock:
            return len(self._latest)

    def __contains__(self, trial_id: object) -> bool:
        with self._lock:
            return trial_id in self._latest
