"""Runs: preflight (reserves nothing), idempotent launch, cancel, and queries.

Launch and preflight evaluate the same checks; launch does so with the budget row
locked, so the checks and the reservation form one atomic step.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

from posttrain_arena.service import budget as budget_mod
from posttrain_arena.service import families
from posttrain_arena.service.auth import Principal, Role
from posttrain_arena.service.challenges import allowance, get_challenge
from posttrain_arena.service.collections import get_collection
from posttrain_arena.service.config import Settings
from posttrain_arena.service.errors import Conflict, NotFound
from posttrain_arena.service.models import Budget, Challenge, Collection, Run, utcnow
from posttrain_arena.service.quotas import quota_problems
from posttrain_arena.service.reasons import RunReason, public_text
from posttrain_arena.service.schemas import (
    ACTIVE_STATES,
    CheckStatus,
    Preflight,
    PreflightCheck,
    RunFailure,
    RunRequest,
    RunState,
)


def _check(name: str, ok: bool, reason: str) -> PreflightCheck:
    return PreflightCheck(name=name, status=CheckStatus.OK if ok else CheckStatus.FAIL,
                          reason=reason)


def evaluate_checks(
    session: Session, principal: Principal, ch: Challenge, col: Collection, budget: Budget,
    settings: Settings,
) -> list[PreflightCheck]:
    """Every launch check, in order, each ok, FAIL or skip with its reason. The slot,
    cooldown and run count are the collection's family's, and a family started by
    another account's near-duplicate launches only once an editor clears it
    (families.py)."""
    checks = [
        _check("challenge_open", ch.health == "open",
               "the challenge takes runs" if ch.health == "open"
               else f"the challenge is paused: {ch.health_reason or 'no reason given'}"),
    ]
    allowed = principal.user_id == col.owner_id or principal.at_least(Role.EDITOR)
    checks.append(_check(
        "caller_allowed", allowed and not principal.anonymous and principal.approved,
        "your account waits for an organizer's approval (accounts from an external "
        "sign-in do, unless allowlisted); ask an admin to run `arena admin set-user "
        f"{principal.name} --approve`" if allowed and not principal.approved
        else f"{principal.name} may launch runs of collection {col.id}" if allowed
        else "launching belongs to the collection's author and to editors"))
    # whether (and what) it copies is told to its author and editors only (families.py)
    checks.append(families.near_duplicate_check(session, col) if allowed else PreflightCheck(
        name="near_duplicate", status=CheckStatus.SKIP,
        reason="shown to the collection's author and to editors"))
    active = session.scalar(_same_family(select(Run.id), ch, col).where(
        Run.state.in_(ACTIVE_STATES)).limit(1))
    checks.append(_check("no_active_run", active is None,
                         "no other run of this collection's family is queued or running on "
                         "this challenge" if active is None
                         else f"run {active} of the same family is active on this challenge"))
    checks.append(_cooldown(session, ch, col))
    checks.append(_run_count(session, ch, col, settings.runs_per_family))
    need = allowance(ch)
    checks.append(_check(
        "budget", budget_mod.covers(budget, need),
        f"reserving {need:.3g} of {budget_mod.left(budget):.3g} left"
        if budget_mod.covers(budget, need)
        else f"needs {need:.3g} but only {budget_mod.left(budget):.3g} of the cap is left"))
    over = quota_problems(session, principal, need)
    checks.append(_check("quota", not over, "; ".join(over) or
                         "within every quota that applies to you"))
    checks.append(_check(
        "eligible_tasks", col.eligible_count >= 1,
        f"{col.eligible_count} eligible task(s)" if col.eligible_count
        else "no task passed the structural checks; run `arena validate DIR`"))
    return checks


def _family(col: Collection) -> int:
    return col.family_id if col.family_id is not None else col.id


def _same_family(q: Select[Any], ch: Challenge, col: Collection) -> Select[Any]:
    """`q` narrowed to runs on `ch` of any collection of `col`'s family: registering the
    same tree again, or its owner's near-copy of it, resets no limit."""
    return q.join(Collection, Collection.id == Run.collection_id).where(
        Run.challenge_id == ch.id,
        func.coalesce(Collection.family_id, Collection.id) == _family(col))


def _run_count(session: Session, ch: Challenge, col: Collection,
               limit: int) -> PreflightCheck:
    if limit <= 0:
        return PreflightCheck(name="run_count", status=CheckStatus.SKIP,
                              reason="the server sets no limit on runs per collection")
    # Runs that can reveal a score count: active and scored ones (not a canceled run,
    # nor one that failed, which shows no score and may have failed on the organizers' side).
    n = session.scalar(_same_family(select(func.count(Run.id)), ch, col).where(
        Run.state.in_((*ACTIVE_STATES, RunState.SCORED.value)))) or 0
    return _check("run_count", n < limit,
                  f"{n} of {limit} runs of this collection's family on this challenge"
                  if n < limit else f"this collection's family already had {n} runs on "
                  f"this challenge (the limit is {limit})")


def _cooldown(session: Session, ch: Challenge, col: Collection) -> PreflightCheck:
    if ch.cooldown_sec <= 0:
        return PreflightCheck(name="cooldown", status=CheckStatus.SKIP,
                              reason="the challenge has no cooldown")
    last = session.scalar(_same_family(select(func.max(Run.finished_at)), ch, col).where(
        Run.state == RunState.SCORED.value))
    if last is None:
        return PreflightCheck(name="cooldown", status=CheckStatus.SKIP,
                              reason="no counted run of this collection yet")
    ready = last + timedelta(seconds=ch.cooldown_sec)
    wait = (ready - utcnow()).total_seconds()
    return _check("cooldown", wait <= 0, "the cooldown has passed" if wait <= 0
                  else f"wait {wait:.0f}s more after the last counted run")


def preflight(session: Session, principal: Principal, req: RunRequest,
              settings: Settings) -> Preflight:
    """The launch checks for `req`, evaluated now; reserves nothing."""
    principal.require(Role.PARTICIPANT, "a preflight")
    ch = get_challenge(session, req.challenge)
    col = get_collection(session, req.collection_id)
    budget = budget_mod.get_budget_row(session)
    checks = evaluate_checks(session, principal, ch, col, budget, settings)
    return Preflight(ok=all(c.status is not CheckStatus.FAIL for c in checks), checks=checks,
                     reservation=allowance(ch))


def launch(session: Session, principal: Principal, req: RunRequest,
           settings: Settings) -> tuple[Run, bool]:
    """Queue a run and reserve its allowance; returns (run, created).

    With a `request_id` the call is idempotent: a retry returns the run already created,
    whatever the checks would say now. Raises Conflict (with the checks) if one fails.
    """
    principal.require(Role.PARTICIPANT, "launching a run")
    assert principal.user_id is not None
    budget = budget_mod.lock_budget(session)
    if req.request_id:
        existing = session.scalar(select(Run).where(
            Run.created_by == principal.user_id, Run.request_id == req.request_id))
        if existing is not None:
            return existing, False
    ch = get_challenge(session, req.challenge)
    col = get_collection(session, req.collection_id)
    principal.require_owner_or_editor(col.owner_id, "launching a run")
    checks = evaluate_checks(session, principal, ch, col, budget, settings)
    failed = [c for c in checks if c.status is CheckStatus.FAIL]
    if failed:
        raise Conflict("the run cannot start: " + "; ".join(f"{c.name}: {c.reason}"
                                                           for c in failed),
                       detail=[c.model_dump(mode="json") for c in checks])
    run = Run(challenge_id=ch.id, collection_id=col.id, created_by=principal.user_id,
              request_id=req.request_id or uuid.uuid4().hex, state=RunState.QUEUED.value,
              stages_done=[], attempts=0)
    budget_mod.reserve(budget, run, allowance(ch))
    session.add(run)
    session.flush()
    return run, True


def get_run(session: Session, run_id: int) -> Run:
    """A run by id; NotFound otherwise."""
    run = session.get(Run, run_id)
    if run is None:
        raise NotFound(f"no run {run_id}; `arena runs` lists them")
    return run


def failure(session: Session, principal: Principal, run_id: int) -> RunFailure:
    """A run's reason in full: its class and the message behind it (editors only: the
    message may name held-out tasks and server paths)."""
    principal.require(Role.EDITOR, "reading a run's full failure message")
    run = get_run(session, run_id)
    return RunFailure(run_id=run.id, reason_class=run.reason_class,
                      reason=public_text(run.reason_class), detail=run.detail)


def _filtered(session: Session, challenge: str | None, collection_id: int | None,
              state: RunState | None) -> Select[Any]:
    q = select(Run)
    if challenge is not None:
        q = q.where(Run.challenge_id == get_challenge(session, challenge).id)
    if collection_id is not None:
        q = q.where(Run.collection_id == collection_id)
    if state is not None:
        q = q.where(Run.state == state.value)
    return q


def page_of_runs(
    session: Session, challenge: str | None = None, collection_id: int | None = None,
    state: RunState | None = None, limit: int = 50, offset: int = 0,
) -> list[Run]:
    """Runs, newest first, filtered: one page."""
    q = _filtered(session, challenge, collection_id, state)
    return list(session.scalars(q.order_by(Run.id.desc()).limit(limit).offset(offset)))


def runs_by_id(session: Session, ids: frozenset[int]) -> list[Run]:
    """The runs among `ids` that exist."""
    return list(session.scalars(select(Run).where(Run.id.in_(ids)))) if ids else []


def count_runs(session: Session, challenge: str | None = None,
               collection_id: int | None = None, state: RunState | None = None) -> int:
    """How many runs match the filter."""
    q = _filtered(session, challenge, collection_id, state)
    return session.scalar(q.with_only_columns(func.count(Run.id)).order_by(None)) or 0


def list_runs(
    session: Session, challenge: str | None = None, collection_id: int | None = None,
    state: RunState | None = None, limit: int = 50, offset: int = 0,
) -> tuple[list[Run], int]:
    """Runs, newest first, filtered; with the total count."""
    return (page_of_runs(session, challenge, collection_id, state, limit, offset),
            count_runs(session, challenge, collection_id, state))


def run_cost(ch: Challenge, run: Run) -> float:
    """What the run used: the pipeline's reported cost, else price x running time."""
    if run.score and isinstance(run.score.get("cost"), int | float):
        return float(run.score["cost"])
    return ch.price_per_hour * run.run_seconds / 3600.0


def end_run(session: Session, run: Run, state: RunState, reason: RunReason | None,
            detail: str | None = None) -> None:
    """Move a run to a final state and reconcile its reservation. `reason` is published,
    as its fixed text; `detail` (the full message) only to editors (reasons.py)."""
    run.state = state.value
    run.reason_class = reason.value if reason is not None else None
    run.detail = detail
    run.finished_at = utcnow()
    run.worker_id = None
    ch = session.get(Challenge, run.challenge_id)
    assert ch is not None
    budget_mod.reconcile(session, run, run_cost(ch, run))


def cancel(session: Session, principal: Principal, run_id: int) -> Run:
    """Cancel a queued or running run (its author or an editor); releases the reservation."""
    run = get_run(session, run_id)
    col = get_collection(session, run.collection_id)
    principal.require_owner_or_editor(col.owner_id, "canceling a run")
    budget_mod.lock_budget(session)
    session.refresh(run)
    if run.state not in ACTIVE_STATES:
        raise Conflict(f"run {run_id} is already {run.state}; only queued or running runs "
                       "can be canceled")
    if run.score is not None:  # canceling now would be choosing not to show the score
        raise Conflict(f"run {run_id} already has its score; it ends scored and counts")
    end_run(session, run, RunState.CANCELED, RunReason.CANCELED, f"canceled by {principal.name}")
    return run
