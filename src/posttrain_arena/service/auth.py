"""Identity: API tokens (sha256 at rest, looked up by a per-token prefix) and roles.

A token reads `arena_<prefix>_<secret>`. The prefix is stored in clear to find the row;
only the sha256 of the whole token is stored, compared in constant time.

Roles: anonymous (no token: read only), participant (signed in: submit collections, post
on the board), editor (review results, launch any run), admin (everything). "Collection
author" is a participant acting on a collection they registered: launch, cancel and
collect belong to the author and to editors.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

import httpx
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from posttrain_arena.service.db import Database
from posttrain_arena.service.errors import BadRequest, Conflict, Forbidden, Unauthorized
from posttrain_arena.service.models import USER_NAME_MAX, ApiToken, User

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


def create_user(session: Session, name: str, role: Role | str) -> tuple[User, str]:
    """Create a user with one fresh token; returns (user, token). The token is shown once."""
    try:
        role = Role(role)
    except ValueError:
        raise BadRequest(f"unknown role {role!r}; use one of: "
                         f"{', '.join(r.value for r in Role)}") from None
    if not name or len(name) > 100:
        raise BadRequest("user name must be 1-100 characters")
    if EXTERNAL_SEPARATOR in name:
        raise BadRequest(f"user name {name!r} holds {EXTERNAL_SEPARATOR!r}, which marks "
                         "accounts of an external provider (hf:NAME); choose one without it")
    if session.scalar(select(User).where(User.name == name)) is not None:
        raise Conflict(f"user {name!r} already exists")
    user = User(name=name, role=role.value)
    session.add(user)
    session.flush()
    return user, issue_token(session, user)


def issue_token(session: Session, user: User) -> str:
    """Add a new token for `user` and return it in clear (it is stored hashed)."""
    prefix = secrets.token_hex(6)
    token = f"{TOKEN_PREFIX}{prefix}_{secrets.token_urlsafe(24)}"
    session.add(ApiToken(user_id=user.id, prefix=prefix, token_hash=hash_token(token)))
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


class HuggingFaceWhoami:
    """External checker calling a Hugging Face style `whoami` endpoint.

    Answers (a name, or a refusal) are kept for `cache_sec`, keyed by the token's sha256,
    so that a busy client costs the provider one call per token per period, not one per
    request; a revoked external token therefore still works for up to that long."""

    def __init__(self, url: str = "https://huggingface.co/api/whoami-v2", timeout: float = 10,
                 cache_sec: float = 60.0, max_cached: int = 10_000):
        self.url = url
        self.timeout = timeout
        self.cache_sec = cache_sec
        self.max_cached = max_cached
        self.calls = 0
        self._cache: OrderedDict[str, tuple[float, ExternalIdentity | None]] = OrderedDict()
        self._lock = threading.Lock()

    def check(self, token: str) -> ExternalIdentity | None:
        key, now = hash_token(token), time.monotonic()
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None and hit[0] > now:
                return hit[1]
        ident = self._ask(token)
        with self._lock:
            self._cache[key] = (now + self.cache_sec, ident)
            self._cache.move_to_end(key)
            while len(self._cache) > self.max_cached:
                self._cache.popitem(last=False)
        return ident

    def _ask(self, token: str) -> ExternalIdentity | None:
        self.calls += 1
        try:
            resp = httpx.get(self.url, headers={"Authorization": f"Bearer {token}"},
                             timeout=self.timeout)
        except httpx.HTTPError:
            return None
        if resp.status_code != 200:
            return None
        try:
            body = resp.json()
        except ValueError:  # not JSON: no identity, as for any other bad answer
            return None
        name = body.get("name") if isinstance(body, dict) else None
        if not isinstance(name, str) or not name:
            return None
        ident = f"hf{EXTERNAL_SEPARATOR}{name}"
        if len(ident) > USER_NAME_MAX:  # longer than a user name may be: not a 500
            return None
        return ExternalIdentity(external_id=ident, name=ident)


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
        user = session.get(User, row.user_id)
        assert user is not None
        return Principal(user_id=user.id, name=user.name, role=Role(user.role))
    if external is not None:
        ident = external.check(token)
        if ident is not None:
            user = session.scalar(select(User).where(User.external_id == ident.external_id))
            if user is None:
                return ident
            return Principal(user_id=user.id, name=user.name, role=Role(user.role))
    raise Unauthorized("the token is not valid: Arena tokens start with 'arena_'")


def identify(db: Database, token: str | None,
             external: ExternalTokenChecker | None = None) -> Principal:
    """Who `token` belongs to. A read transaction; only an external user's first visit
    writes (their user row), in a short transaction of its own."""
    with db.read() as session:
        found = authenticate(session, token, external)
    if isinstance(found, Principal):
        return found
    try:
        with db.write() as session:
            return _external_principal(session, found)
    except IntegrityError:  # the same user's first visit, recorded by another request
        with db.read() as session:
            return _external_principal(session, found)


def _external_principal(session: Session, ident: ExternalIdentity) -> Principal:
    user = session.scalar(select(User).where(User.external_id == ident.external_id))
    if user is None:
        if session.scalar(select(User).where(User.name == ident.name)) is not None:
            # A local user made before local names were kept free of the separator.
            raise Conflict(f"the user name {ident.name!r} is held by a local account; an "
                           "admin must rename it before this external account can sign in")
        user = User(name=ident.name, role=Role.PARTICIPANT.value, external_id=ident.external_id)
        session.add(user)
        session.flush()
    return Principal(user_id=user.id, name=user.name, role=Role(user.role))


def external_checker(kind: str | None, url: str,
                     cache_sec: float = 60.0) -> ExternalTokenChecker | None:
    """The configured external checker (None when off, the default)."""
    if kind is None:
        return None
    if kind == "huggingface":
        return HuggingFaceWhoami(url, cache_sec=cache_sec)
    raise ValueError(f"unknown external_auth {kind!r}; use 'huggingface' or leave it unset")


__all__ = ["ANONYMOUS", "Forbidden", "Principal", "Role", "authenticate", "create_user",
           "identify"]
