"""Web sign-in sessions: signed, expiring cookies that signing out revokes.

Signing in on the web checks a token once (an Arena token, or an external one) and
starts a session of its own: the browser never keeps the token. The cookie reads
`<prefix>.<secret>.<expires>.<signature>`:

- the signature (HMAC-SHA256 under the server's session key) covers the rest, so a
  cookie the server did not make, or one with its expiry moved, is refused without a
  database read;
- `expires` (Unix seconds) ends it whatever the browser does;
- the row found by `prefix` holds only the sha256 of `secret` and is revoked at sign-out,
  so a copied cookie stops working then too.

The key is `ARENA_SESSION_SECRET`, or a random key made once in DATA_DIR/session.key
(read by every server process on that data directory).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import time
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import select

from posttrain_arena.service.auth import Principal, hash_token, principal_of
from posttrain_arena.service.config import Settings
from posttrain_arena.service.db import Database
from posttrain_arena.service.models import User, WebSession, utcnow

SESSION_COOKIE = "arena_session"


def session_key(settings: Settings) -> bytes:
    """The key that signs session cookies (made once per data directory if not set)."""
    if settings.session_secret:
        return settings.session_secret.encode()
    path = Path(settings.data_dir) / "session.key"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_bytes().strip()
    with os.fdopen(fd, "w") as fh:
        fh.write(secrets.token_hex(32))
    return path.read_bytes().strip()


class Sessions:
    """Start, read and end web sessions for one server."""

    def __init__(self, db: Database, key: bytes, ttl_sec: float):
        self.db, self.key, self.ttl_sec = db, key, ttl_sec

    def _sign(self, body: str) -> str:
        return hmac.new(self.key, body.encode(), hashlib.sha256).hexdigest()

    def start(self, principal: Principal) -> tuple[str, int]:
        """A new session for a signed-in principal: (cookie value, seconds it lasts)."""
        assert principal.user_id is not None
        prefix, secret = secrets.token_hex(6), secrets.token_urlsafe(24)
        expires = int(time.time() + self.ttl_sec)
        with self.db.write() as s:
            s.add(WebSession(user_id=principal.user_id, prefix=prefix,
                             secret_hash=hash_token(secret),
                             expires_at=datetime.fromtimestamp(expires, UTC)
                             .replace(tzinfo=None)))
        body = f"{prefix}.{secret}.{expires}"
        return f"{body}.{self._sign(body)}", int(self.ttl_sec)

    def _parse(self, cookie: str) -> tuple[str, str] | None:
        parts = cookie.split(".")
        if len(parts) != 4 or not parts[2].isdigit():
            return None
        body = ".".join(parts[:3])
        if not hmac.compare_digest(self._sign(body), parts[3]):
            return None
        if int(parts[2]) <= time.time():
            return None
        return parts[0], parts[1]

    def principal(self, cookie: str) -> Principal | None:
        """Who the session cookie signs in, or None when it is not a live session."""
        parsed = self._parse(cookie)
        if parsed is None:
            return None
        prefix, secret = parsed
        with self.db.read() as s:
            row = s.scalar(select(WebSession).where(WebSession.prefix == prefix))
            if (row is None or row.revoked or row.expires_at <= utcnow()
                    or not hmac.compare_digest(row.secret_hash, hash_token(secret))):
                return None
            user = s.get(User, row.user_id)
            return principal_of(user) if user is not None else None

    def end(self, cookie: str) -> None:
        """Revoke the session the cookie names (nothing when it names none)."""
        parsed = self._parse(cookie)
        if parsed is None:
            return
        with self.db.write() as s:
            row = s.scalar(select(WebSession).where(WebSession.prefix == parsed[0]))
            if row is not None and hmac.compare_digest(row.secret_hash,
                                                       hash_token(parsed[1])):
                row.revoked = True

    def end_all(self, user_id: int) -> int:
        """Revoke every live session of a user; how many."""
        with self.db.write() as s:
            rows = list(s.scalars(select(WebSession).where(
                WebSession.user_id == user_id, WebSession.revoked.is_(False),
                WebSession.expires_at > utcnow())))
            for row in rows:
                row.revoked = True
            return len(rows)

