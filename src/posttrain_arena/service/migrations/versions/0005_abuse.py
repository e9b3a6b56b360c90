"""abuse: near-duplicate families, quotas, approvals, sessions, token expiry, reason classes

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-04 20:00:00

- collections: `family_id` (the earliest collection a registration near-duplicates, its
  own id otherwise; the launch limits count runs per family), `near_duplicate_of` and
  `similarity`; `package_prints` (a MinHash signature per task package) and
  `package_bands` (its LSH band keys, indexed: how candidates are found). Existing
  collections start as one family per content hash (what the limits keyed on before).
- users: `approved` (external sign-ins wait for an admin unless allowlisted; existing
  accounts keep what they could do) and `team`; `quotas` per user and per team.
- api_tokens: `expires_at`; `web_sessions`: web sign-ins of their own, revoked at
  sign-out.
- runs: `reason_class`, the published class of a run's reason; the `reason` column
  keeps the full message, for editors. Existing reasons are published as `internal`
  (canceled and requeued runs as such): their text may name what it touched.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("collections", sa.Column("family_id", sa.Integer(), nullable=True))
    op.add_column("collections", sa.Column("near_duplicate_of", sa.Integer(), nullable=True))
    op.add_column("collections", sa.Column("similarity", sa.Float(), nullable=True))
    op.execute("UPDATE collections SET family_id = (SELECT MIN(c2.id) FROM collections c2 "
               "WHERE c2.content_hash = collections.content_hash)")
    op.create_index("ix_collections_family_id", "collections", ["family_id"])
    op.create_table(
        "package_prints",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("collection_id", sa.Integer(), nullable=False),
        sa.Column("package", sa.String(length=200), nullable=False),
        sa.Column("signature", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["collection_id"], ["collections.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_package_prints_collection_id", "package_prints", ["collection_id"])
    op.create_table(
        "package_bands",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("collection_id", sa.Integer(), nullable=False),
        sa.Column("band", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["collection_id"], ["collections.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_package_bands_band", "package_bands", ["band"])

    op.add_column("users", sa.Column("approved", sa.Boolean(), nullable=False,
                                     server_default=sa.true()))
    op.add_column("users", sa.Column("team", sa.String(length=100), nullable=True))
    op.create_index("ix_users_team", "users", ["team"])
    op.create_table(
        "quotas",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=10), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("cap", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("kind", "name", name="uq_quotas_kind_name"),
    )

    op.add_column("api_tokens", sa.Column("expires_at", sa.DateTime(), nullable=True))
    op.create_table(
        "web_sessions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column("secret_hash", sa.String(length=64), nullable=False),
        sa.Column("revoked", sa.Boolean(), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("prefix"),
    )
    op.create_index("ix_web_sessions_user_id", "web_sessions", ["user_id"])

    op.add_column("runs", sa.Column("reason_class", sa.String(length=30), nullable=True))
    op.execute("UPDATE runs SET reason_class = CASE WHEN state = 'canceled' THEN 'canceled' "
               "WHEN state = 'queued' THEN 'requeued' ELSE 'internal' END "
               "WHERE reason IS NOT NULL")


def downgrade() -> None:
    op.drop_column("runs", "reason_class")
    op.drop_index("ix_web_sessions_user_id", table_name="web_sessions")
    op.drop_table("web_sessions")
    op.drop_column("api_tokens", "expires_at")
    op.drop_table("quotas")
    op.drop_index("ix_users_team", table_name="users")
    op.drop_column("users", "team")
    op.drop_column("users", "approved")
    op.drop_index("ix_package_bands_band", table_name="package_bands")
    op.drop_table("package_bands")
    op.drop_index("ix_package_prints_collection_id", table_name="package_prints")
    op.drop_table("package_prints")
    op.drop_index("ix_collections_family_id", table_name="collections")
    op.drop_column("collections", "similarity")
    op.drop_column("collections", "near_duplicate_of")
    op.drop_column("collections", "family_id")

