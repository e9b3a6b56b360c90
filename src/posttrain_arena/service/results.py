"""Results: stored as each run is scored (after a suite-coverage check), reviewed by editors.

Every scored run has its result, stored in the transaction that ends the run, so an
author cannot run again and show only the best score. Results and reviews are
append-only: collecting returns the stored result, and a result is reviewed once.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from posttrain_arena.service.auth import Principal, Role
from posttrain_arena.service.collections import get_collection
from posttrain_arena.service.errors import BadRequest, Conflict, NotFound
from posttrain_arena.service.models import Challenge, Result, Review, Run
from posttrain_arena.service.runs import get_run
from posttrain_arena.service.schemas import Decision, ResultOut, ReviewIn, RunState


class ScoreSummary(BaseModel):
    """The aggregate of a run's score.json that the service stores (no per-task data)."""

    base_pass_rate: float = Field(description="Held-out pass rate before training, in [0, 1]")
    final_pass_rate: float = Field(description="Held-out pass rate after training, in [0, 1]")
    change_pp: float = Field(description="final - base, in percentage points")
    ci_low: float | None = Field(default=None, description="Paired 95% interval, low (pp)")
    ci_high: float | None = Field(default=None, description="Paired 95% interval, high (pp)")
    per_domain: dict[str, Any] = Field(default_factory=dict, description="Per-domain rates")
    n_tasks: int = Field(description="Held-out tasks that were scored")
    n_trials: int | None = Field(default=None, description="Trials paired in the change "
                                 "(scored in both evaluations), when the score says")
    trials_attempted: int | None = Field(default=None, description="Trials the final "
                                         "evaluation set out to run (tasks x k)")
    samples_per_task: int | None = Field(default=None, description="k")
    suite_hash: str | None = Field(default=None, description="Hash of the suite evaluated")
    cost: float | None = Field(default=None, description="Compute used, if the pipeline knows")


def _first(data: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        cur: Any = data
        for part in key.split("."):
            cur = cur.get(part) if isinstance(cur, dict) else None
        if cur is not None:
            return cur
    return None


def summarize_score(data: dict[str, Any]) -> ScoreSummary:
    """The aggregate fields of a score.json (the pipeline's `train.score.Score`, or a flat
    form with the ScoreSummary field names). Per-task data is dropped: the suite is sealed.
    """
    if data.get("status") == "incomplete":
        raise Conflict("the run is incomplete (its evaluations lost too many trials): "
                       + "; ".join(str(x) for x in data.get("incomplete") or []))
    base = _first(data, "base_pass_rate", "base.pass_rate")
    final = _first(data, "final_pass_rate", "final.pass_rate")
    if not isinstance(base, int | float) or not isinstance(final, int | float):
        raise BadRequest("score.json has no base and final pass rates")
    change = _first(data, "change_pp", "change.delta_pp", "delta_pp")
    lo = _first(data, "ci_low", "change.ci95_low_pp")
    hi = _first(data, "ci_high", "change.ci95_high_pp")
    interval = _first(data, "interval")
    if isinstance(interval, list | tuple) and len(interval) == 2:
        lo, hi = interval
    n = _first(data, "n_tasks", "change.paired_tasks")
    per_domain = _first(data, "per_domain") or {}
    if isinstance(per_domain, list):  # the pipeline's list of DomainChange
        per_domain = {d["domain"]: {k: v for k, v in d.items() if k != "domain"}
                      for d in per_domain if isinstance(d, dict) and "domain" in d}
    return ScoreSummary(
        base_pass_rate=float(base), final_pass_rate=float(final),
        change_pp=float(change) if change is not None else 100.0 * (final - base),
        ci_low=lo, ci_high=hi, per_domain=per_domain, n_tasks=int(n or 0),
        suite_hash=_first(data, "suite_hash", "provenance.suite_hash"),
        cost=_first(data, "cost"),
        n_trials=_first(data, "n_trials", "change.paired_trials"),
        trials_attempted=_first(data, "trials_attempted", "coverage.final.attempted"),
        samples_per_task=_first(data, "samples_per_task", "final.samples_per_task"),
    )


def result_out(result: Result, review: Review | None) -> ResultOut:
    """A result with its review status."""
    out = ResultOut.model_validate(result)
    if review is not None:
        out.status = "accepted" if review.decision == Decision.ACCEPT.value else "rejected"
        out.review_note = review.note
    return out


def record_result(session: Session, run: Run) -> Result:
    """Store the result of a run being scored (lifecycle.finish calls this as the run
    ends, so every scored run counts: no author chooses which of their runs to show).

    Checks that the score covers the whole held-out suite (and, when the score names it,
    the same suite hash); Conflict or BadRequest otherwise, and the run fails instead."""
    ch = session.get(Challenge, run.challenge_id)
    assert ch is not None and run.score is not None
    s = summarize_score(run.score)
    if s.trials_attempted is not None and s.samples_per_task:
        # Trials, not tasks: a task with one trial of k left still "covers" it. How many
        # may be lost is the recipe's completeness; an incomplete score is refused above.
        expected = ch.suite_size * s.samples_per_task
        if s.trials_attempted != expected:
            raise Conflict(f"run {run.id} ran {s.trials_attempted} trials; the suite's "
                           f"{ch.suite_size} tasks x k={s.samples_per_task} are {expected}")
    if s.n_tasks != ch.suite_size:
        raise Conflict(f"run {run.id} scored {s.n_tasks} of the suite's {ch.suite_size} "
                       "tasks; a result must cover the whole held-out suite")
    if s.suite_hash is not None and s.suite_hash != ch.suite_hash:
        raise Conflict(f"run {run.id} evaluated suite {s.suite_hash}, not the challenge's "
                       f"{ch.suite_hash}")
    result = Result(
        run_id=run.id, challenge_id=run.challenge_id, collection_id=run.collection_id,
        base_pass_rate=s.base_pass_rate, final_pass_rate=s.final_pass_rate,
        change_pp=s.change_pp, ci_low=s.ci_low, ci_high=s.ci_high, per_domain=s.per_domain,
        n_tasks=s.n_tasks, suite_size=ch.suite_size, created_by=run.created_by,
    )
    session.add(result)
    session.flush()
    return result


def collect(session: Session, principal: Principal, run_id: int) -> tuple[Result, bool]:
    """The result of a scored run; returns (result, created). A run's result is stored
    when it is scored, so this returns it (created False); only a run scored before
    results were stored automatically gets its result stored now."""
    run = get_run(session, run_id)
    col = get_collection(session, run.collection_id)
    principal.require_owner_or_editor(col.owner_id, "collecting a result")
    existing = session.scalar(select(Result).where(Result.run_id == run_id))
    if existing is not None:
        return existing, False
    if run.state != RunState.SCORED.value or run.score is None:
        raise Conflict(f"run {run_id} is {run.state}; only scored runs have a result")
    return record_result(session, run), True


def result_for_run(session: Session, run_id: int) -> tuple[Result, Review | None]:
    """The run's result and its review; NotFound if it was not collected."""
    get_run(session, run_id)
    result = session.scalar(select(Result).where(Result.run_id == run_id))
    if result is None:
        raise NotFound(f"run {run_id} has no result yet; `arena result collect {run_id}`")
    return result, session.scalar(select(Review).where(Review.result_id == result.id))


def review(session: Session, principal: Principal, run_id: int, body: ReviewIn) -> Review:
    """An editor accepts or rejects a run's result, with a note; once per result."""
    principal.require(Role.EDITOR, "reviewing a result")
    assert principal.user_id is not None
    result, existing = result_for_run(session, run_id)
    if existing is not None:
        raise Conflict(f"run {run_id}'s result was already {existing.decision}ed; reviews "
                       "are final")
    if body.decision is Decision.REJECT and not body.note.strip():
        raise BadRequest("a rejection needs a note saying why")
    rev = Review(result_id=result.id, editor_id=principal.user_id,
                 decision=body.decision.value, note=body.note)
    session.add(rev)
    session.flush()
    return rev


def list_results(session: Session, challenge_id: int | None = None,
                 limit: int = 100) -> list[ResultOut]:
    """Results, newest first, with their review status."""
    q = select(Result, Review).outerjoin(Review, Review.result_id == Result.id)
    if challenge_id is not None:
        q = q.where(Result.challenge_id == challenge_id)
    rows = session.execute(q.order_by(Result.id.desc()).limit(limit))
    return [result_out(r, v) for r, v in rows]

