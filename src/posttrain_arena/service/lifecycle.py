"""Run lifecycle as workers drive it: claim, stages, heartbeats, end, and the watchdog.

Every transition checks that the run is still `running` and still held by the calling
worker (its `worker_id`), so a worker the watchdog gave up on cannot overwrite a run
that was requeued or canceled meanwhile.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from posttrain_arena.service import budget as budget_mod
from posttrain_arena.service import evidence
from posttrain_arena.service.config import Settings
from posttrain_arena.service.errors import ServiceError
from posttrain_arena.service.models import Challenge, Run, utcnow
from posttrain_arena.service.reasons import RunReason
from posttrain_arena.service.results import record_result
from posttrain_arena.service.runs import end_run
from posttrain_arena.service.schemas import RunState


def claim(session: Session, worker_id: str, now: datetime | None = None) -> Run | None:
    """Take the oldest queued run for `worker_id`, or None when the queue is empty."""
    now = now or utcnow()
    run = session.scalar(
        select(Run).where(Run.state == RunState.QUEUED.value).order_by(Run.id).limit(1)
        .with_for_update(skip_locked=True)
    )
    if run is None:
        return None
    run.state = RunState.RUNNING.value
    run.worker_id = worker_id
    run.attempts += 1
    run.started_at = run.started_at or now
    run.heartbeat_at = now
    run.reason_class = run.detail = None
    return run


def held(session: Session, run_id: int, worker_id: str) -> Run | None:
    """The run if it is still running under `worker_id`, locked; else None."""
    run = session.scalar(select(Run).where(Run.id == run_id).with_for_update()
                         .execution_options(populate_existing=True))
    if run is None or run.state != RunState.RUNNING.value or run.worker_id != worker_id:
        return None
    return run


def heartbeat(session: Session, run_id: int, worker_id: str, now: datetime | None = None) -> bool:
    """Record that the run is alive (and its running time); False if it is no longer ours."""
    now = now or utcnow()
    run = held(session, run_id, worker_id)
    if run is None:
        return False
    if run.heartbeat_at is not None:
        run.run_seconds += max(0.0, (now - run.heartbeat_at).total_seconds())
    run.heartbeat_at = now
    return True


def begin_stage(session: Session, run_id: int, worker_id: str, stage: str) -> bool:
    """Mark `stage` as current; False if the run is no longer ours."""
    run = held(session, run_id, worker_id)
    if run is None:
        return False
    run.stage = stage
    return True


def end_stage(
    session: Session, run_id: int, worker_id: str, stage: str, output: dict[str, Any] | None
) -> bool:
    """Record `stage` as finished (a resumed run skips it); False if no longer ours."""
    heartbeat(session, run_id, worker_id)
    run = held(session, run_id, worker_id)
    if run is None:
        return False
    run.stages_done = [*run.stages_done, stage]
    if output and "score" in output:
        run.score = output["score"]
    if output and output.get("evidence"):
        # the gate stage's records, stored with the stage's completion or not at all
        evidence.store(session, run.collection_id, run.id, output["evidence"])
    return True


def finish(session: Session, run_id: int, worker_id: str) -> bool:
    """End a run whose stages all finished: scored, with its result stored, when its
    score covers the suite; else failed with the reason."""
    heartbeat(session, run_id, worker_id)
    run = held(session, run_id, worker_id)
    if run is None:
        return False
    if run.score is None:
        end_run(session, run, RunState.FAILED, RunReason.NO_SCORE, "every stage finished but "
                "none produced a score; is the training pipeline installed "
                "(posttrain_arena.train.pipeline)?")
        return True
    try:  # refuses before it writes anything
        record_result(session, run)
    except ServiceError as exc:  # a score that cannot count is no score
        end_run(session, run, RunState.FAILED, RunReason.SCORE_INCOMPLETE,
                f"the score cannot count: {exc.message}")
        return True
    end_run(session, run, RunState.SCORED, None)
    return True


def fail(session: Session, run_id: int, worker_id: str, stage: str | None,
         reason: RunReason, detail: str) -> bool:
    """Fail a run with a reason class (published) and its detail (for editors), and
    release its reservation; False if no longer ours."""
    heartbeat(session, run_id, worker_id)
    run = held(session, run_id, worker_id)
    if run is None:
        return False
    end_run(session, run, RunState.FAILED, reason,
            f"stage {stage}: {detail}" if stage else detail)
    return True


@dataclass(frozen=True)
class WatchdogAction:
    """What the watchdog did to one run."""

    run_id: int
    action: str
    reason: str


def watchdog(session: Session, settings: Settings, now: datetime | None = None
             ) -> list[WatchdogAction]:
    """Requeue or fail running runs whose worker stopped sending heartbeats.

    A stuck run is requeued (it resumes after its last finished stage) until it has had
    `max_attempts` workers; then it is failed and its reservation released. A run past
    its challenge's timeout is failed.
    """
    now = now or utcnow()
    stale_before = now - timedelta(seconds=settings.heartbeat_timeout_sec)
    budget_mod.lock_budget(session)
    actions = []
    rows = session.scalars(select(Run).where(Run.state == RunState.RUNNING.value)
                           .with_for_update().execution_options(populate_existing=True))
    for run in rows:
        ch = session.get(Challenge, run.challenge_id)
        assert ch is not None
        if run.run_seconds > ch.timeout_sec:
            reason = f"timed out after {run.run_seconds:.0f}s (limit {ch.timeout_sec}s)"
            end_run(session, run, RunState.FAILED, RunReason.TIMED_OUT, reason)
            actions.append(WatchdogAction(run.id, "failed", reason))
            continue
        if run.heartbeat_at is not None and run.heartbeat_at >= stale_before:
            continue
        last = run.stages_done[-1] if run.stages_done else None
        lost = (f"worker {run.worker_id} lost during stage {run.stage or 'setup'} "
                f"(no heartbeat for {settings.heartbeat_timeout_sec:.0f}s)")
        if run.attempts >= settings.max_attempts:
            reason = f"{lost}; gave up after {run.attempts} attempts"
            end_run(session, run, RunState.FAILED, RunReason.WORKER_LOST, reason)
            actions.append(WatchdogAction(run.id, "failed", reason))
        else:
            reason = f"{lost}; requeued to resume after {last or 'the start'}"
            run.state = RunState.QUEUED.value
            run.worker_id = None
            run.reason_class, run.detail = RunReason.REQUEUED.value, reason
            actions.append(WatchdogAction(run.id, "requeued", reason))
    return actions
