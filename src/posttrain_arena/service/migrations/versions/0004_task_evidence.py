"""task evidence: the organizer gates' latest record per task of a collection

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01 22:20:00

One row per (collection, task): sortable summary columns (eligible, learnable, flake
rate, probe failures, base pass rate) and the whole TaskEvidence record as JSON. A new
gate run of the collection replaces the rows of the tasks it measured.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "task_evidence",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("collection_id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=True),
        sa.Column("task", sa.String(length=200), nullable=False),
        sa.Column("task_checksum", sa.String(length=80), nullable=False),
        sa.Column("evidence_key", sa.String(length=64), nullable=False),
        sa.Column("harness_version", sa.String(length=100), nullable=False),
        sa.Column("eligible", sa.Boolean(), nullable=False),
        sa.Column("learnable", sa.String(length=20), nullable=False),
        sa.Column("flake_rate", sa.Float(), nullable=True),
        sa.Column("probe_failures", sa.Integer(), nullable=False),
        sa.Column("base_pass_rate", sa.Float(), nullable=True),
        sa.Column("reasons", sa.JSON(), nullable=False),
        sa.Column("record", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["collection_id"], ["collections.id"]),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("collection_id", "task", name="uq_task_evidence"),
    )
    op.create_index("ix_task_evidence_collection_id", "task_evidence", ["collection_id"])


def downgrade() -> None:
    op.drop_index("ix_task_evidence_collection_id", table_name="task_evidence")
    op.drop_table("task_evidence")
