"""data version: counters raised by triggers on every change to the tables hot reads use

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01 17:10:00

The API caches its hottest reads (leaderboards, run lists) and reuses them while the
counters of the tables they read are unchanged. Triggers keep the counters exact whoever
writes: the service, a worker, or someone at a psql prompt. One column per table, all in
one row, so that a worker's heartbeats (runs) leave cached leaderboards valid.

PostgreSQL: deferred constraint triggers raise the counters at commit, after every other
statement of the transaction. Each writer therefore takes the one counter row's lock last
and holds no other lock it still waits on, so the counters add no lock-order deadlocks to
the existing ones (budget row, run rows). SQLite has one writer at a time; plain triggers.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

TABLES = ("challenges", "collections", "runs", "results", "reviews")


def _bump(table: str) -> str:
    return f"UPDATE data_version SET {table} = {table} + 1 WHERE id = 1"


def upgrade() -> None:
    op.create_table(
        "data_version",
        sa.Column("id", sa.Integer(), nullable=False),
        *(sa.Column(table, sa.BigInteger(), nullable=False, server_default="0")
          for table in TABLES),
        sa.PrimaryKeyConstraint("id"),
    )
    op.execute("INSERT INTO data_version (id) VALUES (1)")
    if op.get_bind().dialect.name == "postgresql":
        for table in TABLES:
            op.execute(
                f"CREATE FUNCTION arena_bump_{table}() RETURNS trigger LANGUAGE plpgsql AS "
                f"$$ BEGIN {_bump(table)}; RETURN NULL; END $$"
            )
            op.execute(
                f"CREATE CONSTRAINT TRIGGER {table}_data_version "
                f"AFTER INSERT OR UPDATE OR DELETE ON {table} "
                "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW "
                f"EXECUTE FUNCTION arena_bump_{table}()"
            )
        return
    for table in TABLES:
        for event in ("INSERT", "UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER {table}_data_version_{event.lower()} AFTER {event} "
                f"ON {table} BEGIN {_bump(table)}; END"
            )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table in TABLES:
            op.execute(f"DROP TRIGGER {table}_data_version ON {table}")
            op.execute(f"DROP FUNCTION arena_bump_{table}()")
    else:
        for table in TABLES:
            for event in ("insert", "update", "delete"):
                op.execute(f"DROP TRIGGER {table}_data_version_{event}")
    op.drop_table("data_version")
