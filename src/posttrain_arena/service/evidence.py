"""Task evidence in the database: the organizer gates' records per task of a collection.

A gate stage of a run hands its TaskEvidence records to `store` (in the transaction that
records the stage as finished); each replaces that task's previous row. Reads give the
sortable per-task table the collection page, the run (review) page and the API show.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from posttrain_arena.gates.evidence import GateName, GateStatus, TaskEvidence
from posttrain_arena.service.collections import get_collection
from posttrain_arena.service.errors import BadRequest, NotFound
from posttrain_arena.service.models import TaskEvidenceRow

SORTS: dict[str, tuple[Any, bool]] = {
    "task": (TaskEvidenceRow.task, False),
    "eligible": (TaskEvidenceRow.eligible, True),
    "learnable": (TaskEvidenceRow.learnable, False),
    "flaky": (TaskEvidenceRow.flake_rate, True),
    "probes": (TaskEvidenceRow.probe_failures, True),
    "base": (TaskEvidenceRow.base_pass_rate, True),
}
"""Sort keys of the per-task table: column, and whether the worst come first (desc)."""


def store(session: Session, collection_id: int, run_id: int | None,
          records: list[dict[str, Any]]) -> int:
    """Replace the rows of the tasks in `records` (TaskEvidence as JSON); returns how
    many were stored. A record that is not TaskEvidence is refused (ValueError)."""
    parsed = []
    for i, raw in enumerate(records):
        try:
            parsed.append(TaskEvidence.model_validate(raw))
        except ValidationError as exc:
            raise ValueError(f"evidence record {i} is not TaskEvidence: {exc}") from None
    if not parsed:
        return 0
    session.execute(delete(TaskEvidenceRow).where(
        TaskEvidenceRow.collection_id == collection_id,
        TaskEvidenceRow.task.in_([e.task for e in parsed])))
    for ev in parsed:
        session.add(_row(collection_id, run_id, ev))
    session.flush()
    return len(parsed)


def _row(collection_id: int, run_id: int | None, ev: TaskEvidence) -> TaskEvidenceRow:
    status = {c.gate: c.status for c in ev.verdict.gates}
    probe_failures = 0
    for p in ev.probes:
        if p.applicable and p.trial is not None and p.trial.passed:
            probe_failures += 1
    return TaskEvidenceRow(
        collection_id=collection_id, run_id=run_id, task=ev.task,
        task_checksum=ev.task_checksum, evidence_key=ev.key,
        harness_version=ev.harness_version, eligible=ev.eligible,
        learnable=status.get(GateName.LEARNABLE, GateStatus.SKIPPED).value,
        flake_rate=ev.flake_rate, probe_failures=probe_failures,
        base_pass_rate=ev.base.pass_rate if ev.base is not None else None,
        reasons=list(ev.verdict.reasons), record=ev.model_dump(mode="json"))


def list_evidence(session: Session, collection_id: int, sort: str = "task"
                  ) -> list[TaskEvidenceRow]:
    """The collection's task evidence, sorted by `sort` (one of SORTS; the task name
    breaks ties). NotFound for an unknown collection, BadRequest for an unknown sort."""
    get_collection(session, collection_id)
    if sort not in SORTS:
        raise BadRequest(f"sort must be one of {', '.join(SORTS)} (got {sort!r})")
    column, desc = SORTS[sort]
    order = column.desc().nulls_last() if desc else column.asc().nulls_last()
    stmt = (select(TaskEvidenceRow).where(TaskEvidenceRow.collection_id == collection_id)
            .order_by(order, TaskEvidenceRow.task))
    return list(session.scalars(stmt))


def get_evidence(session: Session, collection_id: int, task: str) -> TaskEvidenceRow:
    """One task's evidence; NotFound when the collection or the record is missing."""
    get_collection(session, collection_id)
    row = session.scalars(select(TaskEvidenceRow).where(
        TaskEvidenceRow.collection_id == collection_id,
        TaskEvidenceRow.task == task)).first()
    if row is None:
        raise NotFound(f"no gate evidence for task {task!r} of collection {collection_id}; "
                       "a run of a challenge whose recipe enables [task_gates] records it")
    return row
