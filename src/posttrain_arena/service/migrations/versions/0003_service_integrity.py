"""service integrity: collections are found by content hash

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01 22:50:00

The leaderboard has one entry per content hash, and the launch checks (one active run,
the cooldown) key on the challenge and the content hash, so that registering the same
tree again resets nothing. Those lookups go through this index.
"""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_collections_content_hash", "collections", ["content_hash"])


def downgrade() -> None:
    op.drop_index("ix_collections_content_hash", table_name="collections")
