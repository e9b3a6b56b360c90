"""Budget quotas per user and per team, on top of the global cap (budget.py).

An organizer sets a cap for a user (by name) or a team (users carry a team name; `arena
admin set-user NAME --team T`). What a user has used is what their runs hold: the
reservation of a queued or running run, the reconciled cost of a finished one; a team's
is its members' together. A launch whose allowance would pass any cap that applies to
its caller fails the `quota` check; launch evaluates it with the budget row locked (as
every launch check), so racing launches cannot pass a quota together.

Who sees what (`visible_quotas`, `usage`): the global cap and its totals are public. A
user's or a team's figures are not: organizers (editors and admins) see every quota; a
signed-in participant sees their own use, their team's, and the quotas that cap them;
an anonymous reader sees no quota and no one's use.
"""

from __future__ import annotations

from enum import StrEnum

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from posttrain_arena.service.auth import Principal, Role
from posttrain_arena.service.errors import BadRequest, NotFound
from posttrain_arena.service.models import Quota, Run, User, utcnow
from posttrain_arena.service.schemas import QuotaOut, UsageOut

_EPS = 1e-9


class QuotaKind(StrEnum):
    """Who a quota caps."""

    USER = "user"
    TEAM = "team"


def _used(session: Session, user_ids: list[int]) -> float:
    if not user_ids:
        return 0.0
    total = session.scalar(select(func.sum(func.coalesce(Run.cost, Run.reserved)))
                           .where(Run.created_by.in_(user_ids)))
    return float(total or 0.0)


def _members(session: Session, kind: QuotaKind, name: str) -> list[int]:
    if kind is QuotaKind.USER:
        return list(session.scalars(select(User.id).where(User.name == name)))
    return list(session.scalars(select(User.id).where(User.team == name)))


def _out(session: Session, q: Quota) -> QuotaOut:
    used = _used(session, _members(session, QuotaKind(q.kind), q.name))
    return QuotaOut(kind=q.kind, name=q.name, cap=q.cap, used=used, left=q.cap - used)


def list_quotas(session: Session) -> list[QuotaOut]:
    """Every quota with what its user or team has used."""
    return [_out(session, q) for q in session.scalars(select(Quota).order_by(Quota.kind,
                                                                              Quota.name))]


def _applying(session: Session, user: User) -> list[Quota]:
    """The quotas that cap `user`: their own, then their team's."""
    wanted = [(QuotaKind.USER, user.name)] + ([(QuotaKind.TEAM, user.team)] if user.team
                                              else [])
    rows = (session.scalar(select(Quota).where(Quota.kind == kind.value, Quota.name == name))
            for kind, name in wanted)
    return [row for row in rows if row is not None]


def visible_quotas(session: Session, principal: Principal) -> list[QuotaOut]:
    """The quotas `principal` may read: every one for organizers (editors and admins),
    the caller's own user and team quotas for a participant, none for anonymous."""
    if principal.at_least(Role.EDITOR):
        return list_quotas(session)
    user = session.get(User, principal.user_id) if principal.user_id is not None else None
    if user is None:
        return []
    return [_out(session, q) for q in _applying(session, user)]


def usage(session: Session, principal: Principal) -> UsageOut | None:
    """What the signed-in caller's runs (and their team's) hold and spent, whether or not
    a quota caps them; None for anonymous callers and the server's own identity."""
    user = session.get(User, principal.user_id) if principal.user_id is not None else None
    if user is None:
        return None
    return UsageOut(user=user.name, used=_used(session, [user.id]), team=user.team,
                    team_used=(_used(session, _members(session, QuotaKind.TEAM, user.team))
                               if user.team else None))


def set_quota(session: Session, principal: Principal, kind: str, name: str,
              cap: float | None) -> list[QuotaOut]:
    """Set (or, with cap None, remove) the quota of a user or a team (admins)."""
    principal.require(Role.ADMIN, "setting a budget quota")
    try:
        k = QuotaKind(kind)
    except ValueError:
        raise BadRequest(f"unknown quota kind {kind!r}; use 'user' or 'team'") from None
    if k is QuotaKind.USER and not _members(session, k, name):
        raise NotFound(f"no user {name!r}; `arena admin create-user` makes one")
    row = session.scalar(select(Quota).where(Quota.kind == k.value, Quota.name == name))
    if cap is None:
        if row is not None:
            session.delete(row)
    elif row is None:
        session.add(Quota(kind=k.value, name=name, cap=cap))
    else:
        row.cap, row.updated_at = cap, utcnow()
    session.flush()
    return list_quotas(session)


def quota_problems(session: Session, principal: Principal, need: float) -> list[str]:
    """Why reserving `need` more for `principal` would pass a quota (empty: it would
    not), one line per quota passed."""
    if principal.user_id is None:
        return []
    user = session.get(User, principal.user_id)
    if user is None:
        return []
    problems = []
    for row in _applying(session, user):
        used = _used(session, _members(session, QuotaKind(row.kind), row.name))
        if used + need > row.cap + _EPS:
            problems.append(f"the {row.kind} quota of {row.name!r} is {row.cap:.3g}: "
                            f"{used:.3g} used, {need:.3g} more needed")
    return problems
