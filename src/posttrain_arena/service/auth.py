"""Identity: API tokens (sha256 at rest, looked up by a per-token prefix) and roles.

A token reads `arena_<prefix>_<secret>`. The prefix is stored in clear to find the row;
only the sha256 of the whole token is stored, compared in constant time.

Roles: anonymous (no token: read only), participant (signed in: submit collections, post
on the board), editor (review results, launch any run), admin (everything). "Collection
author" is a participant acting on a collection they registered: launch, cancel and
collect belong to the author and to editors.
"""

from __future__ import annotations

import fnmatch
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from typing import Protocol

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from posttrain_arena.service.db import Database
from posttrain_arena.service.errors import BadRequest, Conflict, Forbidden, Unauthorized
from posttrain_arena.service.models import USER_NAME_MAX, ApiToken, User, utcnow

TOKEN_PREFIX = "arena_"


class Role(StrEnum):
    """A stored user role, in increasing order of power."""

    PARTICIPANT = "participant"
    EDITOR = "editor"
    ADMIN = "admin"


_RANK = {None: 0, Role.PARTICIPANT: 1, Role.EDITOR: 2, Role.ADMIN: 3}


@dataclass(frozen=True)
class Principal:
    """Who is calling: a user, or anonymous (user_id None)."""

    user_id: int | None = None
    name: str = "anonymous"
    role: Role | None = None
    #: may launch runs (external sign-ins wait for approval unless allowlisted)
    approved: bool = True

    @property
    def anonymous(self) -> bool:
        return self.role is None

    def at_least(self, role: Role) -> bool:
        """Whether this principal's role is `role` or more powerful."""
        return _RANK[self.role] >= _RANK[role]

    def require(self, role: Role, action: str) -> None:
        """Raise Unauthorized/Forbidden unless the principal holds `role`."""
        if self.anonymous:
            raise Unauthorized(f"{action} needs a token: pass 'Authorization: Bearer TOKEN' "
                               "(set ARENA_TOKEN for the CLI)")
        if not self.at_least(role):
            raise Forbidden(f"{action} needs the {role.value} role; you are {self.role}")

    def require_owner_or_editor(self, owner_id: int, action: str) -> None:
        """Raise unless the principal is the owner or an editor/admin."""
        self.require(Role.PARTICIPANT, action)
        if self.user_id != owner_id and not self.at_least(Role.EDITOR):
            raise Forbidden(f"{action} belongs to the collection's author and to editors")


ANONYMOUS = Principal()
#: The server's own administrative identity, for `arena admin` commands run on the host.
SYSTEM = Principal(user_id=None, name="system", role=Role.ADMIN)


def hash_token(token: str) -> str:
    """sha256 hex of a token, the form stored at rest."""
    return hashlib.sha256(token.encode()).hexdigest()


EXTERNAL_SEPARATOR = ":"
"""Between an external provider's prefix and its user name (`hf:alice`); local user names
never hold it, so no local user can take the name of an external one."""


def create_user(session: Session, name: str, role: Role | str,
                expires_in_days: float | None = None) -> tuple[User, str]:
    """Create a user with one fresh token; returns (user, token). The token is shown once."""
    try:
        role = Role(role)
    except ValueError:
        raise BadRequest(f"unknown role {role!r}; use one of: "
                         f"{', '.join(r.value for r in Role)}") from None
    if not name or len(name) > USER_NAME_MAX:
        raise BadRequest(f"user name must be 1-{USER_NAME_MAX} characters")
    if EXTERNAL_SEPARATOR in name:
        raise BadRequest(f"user name {name!r} holds {EXTERNAL_SEPARATOR!r}, which marks "
                         "accounts of an external provider (hf:NAME); choose one without it")
    if session.scalar(select(User).where(User.name == name)) is not None:
        raise Conflict(f"user {name!r} already exists")
    user = User(name=name, role=role.value)
    session.add(user)
    session.flush()
    return user, issue_token(session, user, expires_in_days)


def issue_token(session: Session, user: User, expires_in_days: float | None = None) -> str:
    """Add a new token for `user` and return it in clear (it is stored hashed); it
    expires after `expires_in_days` (never, with None)."""
    prefix = secrets.token_hex(6)
    token = f"{TOKEN_PREFIX}{prefix}_{secrets.token_urlsafe(24)}"
    expires = (utcnow() + timedelta(days=expires_in_days)
               if expires_in_days is not None else None)
    session.add(ApiToken(user_id=user.id, prefix=prefix, token_hash=hash_token(token),
                         expires_at=expires))
    session.flush()
    return token


@dataclass(frozen=True)
class ExternalIdentity:
    """Who an external provider says a token belongs to."""

    external_id: str
    name: str


class ExternalTokenChecker(Protocol):
    """Checks a token that is not an Arena token with an outside identity provider."""

    def check(self, token: str) -> ExternalIdentity | None:
        """The identity behind `token`, or None when the provider rejects it."""
        ...


def authenticate(
    session: Session, token: str | None, external: ExternalTokenChecker | None = None
) -> Principal | ExternalIdentity:
    """The principal for a bearer token; anonymous without one, Unauthorized if it is bad.
    Reads only: an external identity seen for the first time comes back as such, for
    `identify` to record in a transaction of its own."""
    if not token:
        return ANONYMOUS
    if token.startswith(TOKEN_PREFIX):
        parts = token[len(TOKEN_PREFIX):].split("_", 1)
        row = None
        if len(parts) == 2:
            row = session.scalar(select(ApiToken).where(ApiToken.prefix == parts[0]))
        if row is None or row.revoked or not hmac.compare_digest(
            row.token_hash, hash_token(token)
        ):
            raise Unauthorized("the token is not valid; ask an admin for a new one "
                               "(`arena admin create-user`)")
        if row.expires_at is not None and row.expires_at <= utcnow():
            raise Unauthorized("the token has expired; make a new one (`arena token create`) "
                               "or ask an admin")
        user = session.get(User, row.user_id)
        assert user is not None
        return principal_of(user)
    if external is not None:
        ident = external.check(token)
        if ident is not None:
            user = session.scalar(select(User).where(User.external_id == ident.external_id))
            if user is None:
                return ident
            return principal_of(user)
    raise Unauthorized("the token is not valid: Arena tokens start with 'arena_'")


def principal_of(user: User) -> Principal:
    """The principal a stored user acts as."""
    return Principal(user_id=user.id, name=user.name, role=Role(user.role),
                     approved=user.approved)


@dataclass(frozen=True)
class Identity:
    """Who a bearer token belongs to, for this server: its database, its external
    checker (None: off) and the allowlist of external names approved on sight."""

    db: Database
    external: ExternalTokenChecker | None = None
    allowlist: tuple[str, ...] = ()

    def identify(self, token: str | None) -> Principal:
        """Who `token` belongs to. A read transaction; only an external user's first
        visit writes (their user row), in a short transaction of its own."""
        with self.db.read() as session:
            found = authenticate(session, token, self.external)
        if isinstance(found, Principal):
            return found
        approved = any(fnmatch.fnmatchcase(found.name, p) for p in self.allowlist)
        try:
            with self.db.write() as session:
                return _external_principal(session, found, approved)
        except IntegrityError:  # the same user's first visit, recorded by another request
            with self.db.read() as session:
                return _external_principal(session, found, approved)


def _external_principal(session: Session, ident: ExternalIdentity,
                        approved: bool) -> Principal:
    user = session.scalar(select(User).where(User.external_id == ident.external_id))
    if user is None:
        if session.scalar(select(User).where(User.name == ident.name)) is not None:
            # A local user made before local names were kept free of the separator.
            raise Conflict(f"the user name {ident.name!r} is held by a local account; an "
                           "admin must rename it before this external account can sign in")
        # An account from an external sign-in may read, register and post at once, but
        # launches runs (spends the organizers' compute) only once approved.
        user = User(name=ident.name, role=Role.PARTICIPANT.value, external_id=ident.external_id,
                    approved=approved)
        session.add(user)
        session.flush()
    return principal_of(user)


__all__ = ["ANONYMOUS", "Forbidden", "Identity", "Principal", "Role", "authenticate",
           "create_user"]
