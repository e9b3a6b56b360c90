"""data version: one counter raised by triggers on every change to the tables hot reads use

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01 17:10:00

The API caches its hottest reads (leaderboards, run lists) and reuses them while this
counter is unchanged. Triggers keep the counter exact whoever writes: the service, a
worker, or someone at a psql prompt.

PostgreSQL: a deferred constraint trigger raises the counter at commit, after every other
statement of the transaction. Each writer therefore takes the counter's row lock last and
holds no other lock it still waits on, so the counter adds no lock-order deadlocks to the
existing ones (budget row, run rows). SQLite has one writer at a time; plain row triggers.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

TABLES = ("challenges", "collections", "runs", "results", "reviews")
_BUMP = "UPDATE data_version SET version = version + 1 WHERE id = 1"


def upgrade() -> None:
    op.create_table(
        "data_version",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.execute("INSERT INTO data_version (id, version) VALUES (1, 0)")
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "CREATE FUNCTION arena_bump_data_version() RETURNS trigger LANGUAGE plpgsql AS "
            f"$$ BEGIN {_BUMP}; RETURN NULL; END $$"
        )
        for table in TABLES:
            op.execute(
                f"CREATE CONSTRAINT TRIGGER {table}_data_version "
                f"AFTER INSERT OR UPDATE OR DELETE ON {table} "
                "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW "
                "EXECUTE FUNCTION arena_bump_data_version()"
            )
        return
    for table in TABLES:
        for event in ("INSERT", "UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER {table}_data_version_{event.lower()} AFTER {event} "
                f"ON {table} BEGIN {_BUMP}; END"
            )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table in TABLES:
            op.execute(f"DROP TRIGGER {table}_data_version ON {table}")
        op.execute("DROP FUNCTION arena_bump_data_version()")
    else:
        for table in TABLES:
            for event in ("insert", "update", "delete"):
                op.execute(f"DROP TRIGGER {table}_data_version_{event}")
    op.drop_table("data_version")
