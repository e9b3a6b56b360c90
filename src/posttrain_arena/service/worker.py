"""`arena worker`: takes queued runs and drives them through their stages.

Each stage runs with a heartbeat thread beside it. The run's finished stages are stored
in the database, so when a worker dies mid-stage the watchdog (run by every worker's
loop) requeues the run and the next worker resumes after the last finished stage; after
`max_attempts` lost workers the run fails with a reason and its reservation is released.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path

from posttrain_arena.service import lifecycle
from posttrain_arena.service.config import Settings
from posttrain_arena.service.db import Database
from posttrain_arena.service.models import Challenge, Collection, Run
from posttrain_arena.service.reasons import RunReason
from posttrain_arena.service.stage_plan import RunContext, Stage, StageError, default_plan

log = logging.getLogger(__name__)


class StepOutcome(StrEnum):
    """What one `run_stage` call ended with."""

    STAGE_DONE = "stage_done"
    FINISHED = "finished"
    FAILED = "failed"
    LOST = "lost"


class _Heartbeat:
    """Sends heartbeats for a run every interval until stopped; notes when the run is lost."""

    def __init__(self, worker: Worker, run_id: int):
        self.worker, self.run_id = worker, run_id
        self.stop_event = threading.Event()
        self.lost = False
        self.thread = threading.Thread(target=self._loop, daemon=True,
                                       name=f"heartbeat-{run_id}")

    def beat(self) -> bool:
        if self.lost:
            return False
        with self.worker.db.write() as s:
            ok = lifecycle.heartbeat(s, self.run_id, self.worker.worker_id)
        self.lost = not ok
        return ok

    def _loop(self) -> None:
        while not self.stop_event.wait(self.worker.settings.heartbeat_interval_sec):
            try:
                if not self.beat():
                    return
            except Exception:  # a database hiccup: try again next interval
                log.exception("heartbeat for run %s failed", self.run_id)

    def __enter__(self) -> _Heartbeat:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_event.set()
        self.thread.join()


class Worker:
    """Polls for queued runs and runs their stages."""

    def __init__(self, db: Database, settings: Settings, stages: Sequence[Stage] | None = None,
                 worker_id: str | None = None):
        self.db = db
        self.settings = settings
        self.stages = list(stages) if stages is not None else list(default_plan())
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"

    def watchdog(self) -> list[lifecycle.WatchdogAction]:
        """Requeue or fail runs whose worker went silent."""
        with self.db.write() as s:
            return lifecycle.watchdog(s, self.settings)

    def claim(self) -> int | None:
        """Take the oldest queued run; its id, or None."""
        with self.db.write() as s:
            run = lifecycle.claim(s, self.worker_id)
            return run.id if run is not None else None

    def _context(self, run_id: int, hb: _Heartbeat) -> tuple[RunContext, list[str]]:
        with self.db.read() as s:
            run = s.get(Run, run_id)
            assert run is not None
            col = s.get(Collection, run.collection_id)
            ch = s.get(Challenge, run.challenge_id)
            assert col is not None and ch is not None
            challenge = {c.name: getattr(ch, c.name) for c in Challenge.__table__.columns}
            ctx = RunContext(run_id=run_id, run_dir=self.settings.runs_dir / str(run_id),
                             collection_dir=Path(col.storage_path),
                             collection_hash=col.content_hash, challenge=challenge,
                             heartbeat=hb.beat,
                             log=lambda msg: log.info("run %s: %s", run_id, msg),
                             substage=lambda name: self._substage(run_id, name),
                             ray_address=self.settings.ray_address)
            return ctx, list(run.stages_done)

    def _substage(self, run_id: int, name: str) -> None:
        """Show progress inside a stage (e.g. `pipeline/sft`) as the run's stage."""
        with self.db.write() as s:
            run = lifecycle.held(s, run_id, self.worker_id)
            if run is not None and run.stage:
                run.stage = f"{run.stage.split('/')[0]}/{name}"

    def run_stage(self, run_id: int) -> StepOutcome:
        """Run the next unfinished stage of a run this worker holds."""
        hb = _Heartbeat(self, run_id)
        ctx, done = self._context(run_id, hb)
        todo = [st for st in self.stages if st.name not in done]
        if not todo:
            with self.db.write() as s:
                ok = lifecycle.finish(s, run_id, self.worker_id)
            return StepOutcome.FINISHED if ok else StepOutcome.LOST
        stage = todo[0]
        with self.db.write() as s:
            if not lifecycle.begin_stage(s, run_id, self.worker_id, stage.name):
                return StepOutcome.LOST
        ctx.run_dir.mkdir(parents=True, exist_ok=True)
        try:
            with hb:
                output = stage(ctx)
        except Exception as exc:
            # Any other exception is the organizers' side (the suite, the pipeline, the
            # host): its text names what it touched, so it is published only as a class.
            why = exc.reason if isinstance(exc, StageError) else RunReason.INTERNAL
            detail = str(exc) if isinstance(exc, StageError) else f"{type(exc).__name__}: {exc}"
            log.warning("run %s stage %s failed: %s", run_id, stage.name, detail)
            with self.db.write() as s:
                ok = lifecycle.fail(s, run_id, self.worker_id, stage.name, why, detail)
            return StepOutcome.FAILED if ok else StepOutcome.LOST
        with self.db.write() as s:
            if not lifecycle.end_stage(s, run_id, self.worker_id, stage.name, output):
                return StepOutcome.LOST
        return StepOutcome.STAGE_DONE

    def process(self, run_id: int) -> StepOutcome:
        """Run every remaining stage of a held run; the final outcome."""
        while True:
            outcome = self.run_stage(run_id)
            if outcome is not StepOutcome.STAGE_DONE:
                return outcome

    def poll_once(self) -> int | None:
        """Watchdog, then claim and process one run; the run id, or None if idle."""
        for action in self.watchdog():
            log.warning("watchdog: run %s %s: %s", action.run_id, action.action, action.reason)
        run_id = self.claim()
        if run_id is not None:
            outcome = self.process(run_id)
            log.info("run %s: %s", run_id, outcome.value)
        return run_id

    def serve(self, stop: threading.Event | None = None, once: bool = False) -> None:
        """Poll until `stop` is set (or the queue is empty, with `once`)."""
        stop = stop or threading.Event()
        while not stop.is_set():
            run_id = self.poll_once()
            if run_id is None:
                if once:
                    return
                stop.wait(self.settings.poll_interval_sec)
