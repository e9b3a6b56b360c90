"""duplicate owners: a family belongs to its first collection's owner (or team)

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-04 21:00:00

- collections: `duplicate_cleared_at` and `duplicate_cleared_by`: when, and by whom, an
  editor let a family started by another account's near-duplicate launch (families.py).
- Existing collections that joined the family of another owner's collection (not a
  teammate's) start a held family of their own, as they would be registered now: their
  runs stop counting against the family they copied, and they launch once cleared.
  (0005 put every copy of a tree in one family without a `near_duplicate_of`: such a
  copy names its old family's first collection, with similarity 1.)
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("collections", sa.Column("duplicate_cleared_at", sa.DateTime(),
                                           nullable=True))
    op.add_column("collections", sa.Column("duplicate_cleared_by", sa.String(length=100),
                                           nullable=True))
    op.execute(
        # (the right-hand sides read the row as it was: family_id is the old family)
        "UPDATE collections SET near_duplicate_of = COALESCE(near_duplicate_of, family_id),"
        " similarity = COALESCE(similarity, 1.0), family_id = id "
        "WHERE family_id IS NOT NULL AND family_id <> id AND NOT EXISTS ("
        " SELECT 1 FROM collections f"
        " JOIN users fu ON fu.id = f.owner_id"
        " JOIN users u ON u.id = collections.owner_id"
        " WHERE f.id = collections.family_id"
        " AND (f.owner_id = collections.owner_id"
        "  OR (fu.team IS NOT NULL AND fu.team = u.team)))")


def downgrade() -> None:
    op.drop_column("collections", "duplicate_cleared_by")
    op.drop_column("collections", "duplicate_cleared_at")
