"""Database engine and sessions: SQLite (WAL) by default, PostgreSQL by URL.

Two kinds of transaction:

- `Database.read()`: a plain session for queries.
- `Database.write()`: a session whose transaction takes the write lock up front on SQLite
  (`BEGIN IMMEDIATE`), so check-then-write sequences such as budget reservations are
  serialized; on PostgreSQL the code locks the rows it checks (`SELECT ... FOR UPDATE`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

_IMMEDIATE = "arena_immediate"


def make_engine(url: str, **kwargs: Any) -> Engine:
    """An engine for `url`; SQLite gets WAL, foreign keys, a busy timeout and explicit BEGIN."""
    if url.startswith("sqlite"):
        engine = create_engine(
            url, connect_args={"check_same_thread": False, "timeout": 30}, **kwargs
        )
        _configure_sqlite(engine)
        return engine
    kwargs.setdefault("pool_size", 10)
    kwargs.setdefault("max_overflow", 20)
    return create_engine(url, pool_pre_ping=True, **kwargs)


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Let SQLAlchemy emit BEGIN itself (pysqlite's implicit transactions would
        # defeat BEGIN IMMEDIATE).
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA busy_timeout=30000")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        immediate = conn.get_execution_options().get(_IMMEDIATE, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


class Database:
    """An engine plus session factories for reads and locked writes."""

    def __init__(self, url: str, **engine_kwargs: Any):
        self.url = url
        self.engine = make_engine(url, **engine_kwargs)
        self.is_sqlite = self.engine.dialect.name == "sqlite"
        self._read = sessionmaker(self.engine, expire_on_commit=False)
        self._write = sessionmaker(
            self.engine.execution_options(**{_IMMEDIATE: True}), expire_on_commit=False
        )

    @contextmanager
    def read(self) -> Iterator[Session]:
        """A session for queries; closed (its transaction rolled back) at the end.

        Objects read stay usable afterwards (detached, not expired)."""
        with self._read() as session:
            yield session

    @contextmanager
    def write(self) -> Iterator[Session]:
        """A session committed on success and rolled back on error."""
        with self._write() as session:
            try:
                yield session
                session.commit()
            except BaseException:
                session.rollback()
                raise

    def dispose(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()
