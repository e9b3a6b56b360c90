"""Alembic migrations, run programmatically (`upgrade(engine)`) when the service starts."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, text

HERE = Path(__file__).resolve().parent
_PG_LOCK = 724_311  # advisory lock id: one migrator at a time across processes


def alembic_config() -> Config:
    """An Alembic config pointing at this package's scripts (no alembic.ini needed)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(HERE))
    return cfg


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the database to `revision`; safe to call from several processes at once."""
    cfg = alembic_config()
    # On SQLite, BEGIN IMMEDIATE (see db.py) makes a second migrator wait for the first.
    with engine.execution_options(arena_immediate=True).begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_LOCK})
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)
