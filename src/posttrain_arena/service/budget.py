"""The global compute budget: one cap that never resets.

A launch reserves the run's allowance (price x timeout) and a finished, failed or
canceled run is reconciled to what it actually used. Every change happens with the
budget row locked: `SELECT ... FOR UPDATE` on PostgreSQL, and on SQLite the write
session's `BEGIN IMMEDIATE` (see db.py), so racing launches cannot overdraw the cap.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from posttrain_arena.service.auth import Principal, Role
from posttrain_arena.service.models import Budget, Run, utcnow
from posttrain_arena.service.quotas import usage, visible_quotas
from posttrain_arena.service.schemas import BudgetOut

BUDGET_ID = 1
_EPS = 1e-9


def ensure_budget(session: Session, cap: float) -> Budget:
    """The budget row, created with `cap` on first start (later starts keep the stored cap)."""
    budget = session.get(Budget, BUDGET_ID)
    if budget is None:
        budget = Budget(id=BUDGET_ID, cap=cap, reserved=0.0, spent=0.0)
        session.add(budget)
        session.flush()
    return budget


def lock_budget(session: Session) -> Budget:
    """The budget row, freshly read and locked until the transaction ends."""
    budget = session.scalar(
        select(Budget).where(Budget.id == BUDGET_ID).with_for_update()
        .execution_options(populate_existing=True)
    )
    if budget is None:
        raise RuntimeError("the budget row is missing; start the service once to create it")
    return budget


def left(budget: Budget) -> float:
    """What is still available: cap - reserved - spent."""
    return budget.cap - budget.reserved - budget.spent


def covers(budget: Budget, amount: float) -> bool:
    """Whether the budget can reserve `amount` now."""
    return amount <= left(budget) + _EPS


def reserve(budget: Budget, run: Run, amount: float) -> None:
    """Hold `amount` for `run` (the caller holds the lock and checked `covers`)."""
    budget.reserved += amount
    budget.updated_at = utcnow()
    run.reserved = amount


def reconcile(session: Session, run: Run, actual: float) -> None:
    """Release the run's reservation and charge what it used (once per run)."""
    if run.cost is not None:
        return
    budget = lock_budget(session)
    actual = max(0.0, min(actual, run.reserved)) if run.reserved else max(0.0, actual)
    budget.reserved = max(0.0, budget.reserved - run.reserved)
    budget.spent += actual
    budget.updated_at = utcnow()
    run.cost = actual


def to_out(budget: Budget) -> BudgetOut:
    """The budget as the API shows it."""
    return BudgetOut(cap=budget.cap, reserved=budget.reserved, spent=budget.spent,
                     left=left(budget))


def get_budget_row(session: Session) -> Budget:
    """The budget row, unlocked."""
    budget = session.get(Budget, BUDGET_ID)
    if budget is None:
        raise RuntimeError("the budget row is missing; start the service once to create it")
    return budget


def get_budget(session: Session, principal: Principal) -> BudgetOut:
    """Cap, reserved, spent and left (public), with the per-user and per-team quotas and
    the use that `principal` may see (quotas.visible_quotas, quotas.usage)."""
    out = to_out(get_budget_row(session))
    out.quotas = visible_quotas(session, principal)
    out.you = usage(session, principal)
    return out


def set_cap(session: Session, principal: Principal, cap: float) -> BudgetOut:
    """Change the global cap (admins)."""
    principal.require(Role.ADMIN, "changing the budget cap")
    budget = lock_budget(session)
    budget.cap = cap
    budget.updated_at = utcnow()
    return to_out(budget)
