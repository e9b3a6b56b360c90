"""service integrity: collections found by content hash; run lists that heartbeats leave cached

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01 22:50:00

The leaderboard has one entry per content hash, and the launch checks (one active run,
the cooldown) key on the challenge and the content hash, so that registering the same
tree again resets nothing. Those lookups go through an index.

Run lists: every change to a run still raises `data_version.runs`, and now also writes
which run changed into `run_changes`, under the counter value it raised `runs` to; a
change that can move a run between pages or filters (a new or deleted run, a new state,
challenge or collection) also raises `data_version.run_members`. A cached page of runs
stays valid while `run_members` is unchanged and none of its runs is in `run_changes`
since it was computed (readcache.py), so a heartbeat recomputes only the pages that
show that run. The counter row's lock orders the log: a counter value is visible only
after every smaller one is. The log keeps the last 100,000 changes.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

KEEP = 100_000
_MOVES = ("OLD.state IS DISTINCT FROM NEW.state OR OLD.challenge_id IS DISTINCT FROM "
          "NEW.challenge_id OR OLD.collection_id IS DISTINCT FROM NEW.collection_id")


def _pg_function(body: str) -> str:
    return ("CREATE OR REPLACE FUNCTION arena_bump_runs() RETURNS trigger LANGUAGE plpgsql "
            f"AS $$ {body} $$")


_PG_LOGGED = _pg_function(f"""
DECLARE v bigint; rid integer; moves integer := 1;
BEGIN
  IF TG_OP = 'DELETE' THEN rid := OLD.id; ELSE rid := NEW.id; END IF;
  IF TG_OP = 'UPDATE' AND NOT ({_MOVES}) THEN moves := 0; END IF;
  UPDATE data_version SET runs = runs + 1, run_members = run_members + moves
    WHERE id = 1 RETURNING runs INTO v;
  INSERT INTO run_changes (version, run_id) VALUES (v, rid);
  DELETE FROM run_changes WHERE version <= v - {KEEP};
  RETURN NULL;
END""")
_PG_PLAIN = _pg_function(
    "BEGIN UPDATE data_version SET runs = runs + 1 WHERE id = 1; RETURN NULL; END")


def _sqlite_trigger(event: str, rid: str, moves: str) -> str:
    return (
        f"CREATE TRIGGER runs_data_version_{event.lower()} AFTER {event} ON runs BEGIN "
        f"UPDATE data_version SET runs = runs + 1, run_members = run_members + ({moves}) "
        "WHERE id = 1; "
        f"INSERT INTO run_changes (version, run_id) SELECT runs, {rid} FROM data_version "
        "WHERE id = 1; "
        f"DELETE FROM run_changes WHERE version <= "
        f"(SELECT runs FROM data_version WHERE id = 1) - {KEEP}; END"
    )


def upgrade() -> None:
    op.create_index("ix_collections_content_hash", "collections", ["content_hash"])
    op.add_column("data_version", sa.Column("run_members", sa.BigInteger(), nullable=False,
                                            server_default="0"))
    op.create_table(
        "run_changes",
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("version"),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_PG_LOGGED)  # the trigger of 0002 calls this function
        return
    for event in ("insert", "update", "delete"):
        op.execute(f"DROP TRIGGER runs_data_version_{event}")
    op.execute(_sqlite_trigger("INSERT", "NEW.id", "1"))
    op.execute(_sqlite_trigger("UPDATE", "NEW.id",
                               _MOVES.replace("IS DISTINCT FROM", "IS NOT")))
    op.execute(_sqlite_trigger("DELETE", "OLD.id", "1"))


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_PG_PLAIN)
    else:
        for event in ("insert", "update", "delete"):
            op.execute(f"DROP TRIGGER runs_data_version_{event}")
            op.execute(f"CREATE TRIGGER runs_data_version_{event} AFTER {event.upper()} "
                       "ON runs BEGIN UPDATE data_version SET runs = runs + 1 WHERE id = 1; "
                       "END")
    op.drop_table("run_changes")
    with op.batch_alter_table("data_version") as batch:
        batch.drop_column("run_members")
    op.drop_index("ix_collections_content_hash", table_name="collections")
