"""Accounts: approving and placing users (admins), and each user's own API tokens.

A token can carry an expiry and can be revoked by its owner or an admin; revoking takes
effect on the next request (tokens are checked on every request, never cached).
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from posttrain_arena.service.auth import Principal, Role, issue_token
from posttrain_arena.service.errors import BadRequest, Forbidden, NotFound
from posttrain_arena.service.models import ApiToken, User
from posttrain_arena.service.schemas import TokenCreated, TokenOut, UserUpdate


def get_user(session: Session, name: str) -> User:
    """A user by name; NotFound otherwise."""
    user = session.scalar(select(User).where(User.name == name))
    if user is None:
        raise NotFound(f"no user {name!r}")
    return user


def update_user(session: Session, principal: Principal, name: str, body: UserUpdate) -> User:
    """Approve (or hold back) a user's launches, set their team or role (admins)."""
    principal.require(Role.ADMIN, "changing a user")
    user = get_user(session, name)
    if body.approved is not None:
        user.approved = body.approved
    if body.team is not None:
        user.team = body.team or None
    if body.role is not None:
        try:
            user.role = Role(body.role).value
        except ValueError:
            raise BadRequest(f"unknown role {body.role!r}; use one of: "
                             f"{', '.join(r.value for r in Role)}") from None
    session.flush()
    return user


def list_tokens(session: Session, principal: Principal) -> list[TokenOut]:
    """The caller's tokens (never their secrets)."""
    principal.require(Role.PARTICIPANT, "listing your tokens")
    rows = session.scalars(select(ApiToken).where(ApiToken.user_id == principal.user_id)
                           .order_by(ApiToken.id))
    return [TokenOut.model_validate(r) for r in rows]


def create_token(session: Session, principal: Principal,
                 expires_in_days: float | None) -> TokenCreated:
    """A new token for the caller, expiring after `expires_in_days` (None: never)."""
    principal.require(Role.PARTICIPANT, "making a token")
    user = session.get(User, principal.user_id)
    if user is None:
        raise NotFound("your user no longer exists")
    token = issue_token(session, user, expires_in_days)
    row = session.scalar(select(ApiToken).where(ApiToken.prefix == token.split("_")[1]))
    assert row is not None
    return TokenCreated(token=token, **TokenOut.model_validate(row).model_dump())


def revoke_token(session: Session, principal: Principal, prefix: str) -> TokenOut:
    """Revoke a token by its prefix (its owner, or an admin)."""
    principal.require(Role.PARTICIPANT, "revoking a token")
    row = session.scalar(select(ApiToken).where(ApiToken.prefix == prefix))
    if row is None:
        raise NotFound(f"no token with prefix {prefix!r}; `arena token list` shows yours")
    if row.user_id != principal.user_id and not principal.at_least(Role.ADMIN):
        raise Forbidden("only its owner or an admin can revoke a token")
    row.revoked = True
    session.flush()
    return TokenOut.model_validate(row)
