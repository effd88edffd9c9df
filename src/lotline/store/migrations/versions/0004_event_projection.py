"""OpenLineage events are journaled, then projected: applied_at, projection_error, partial indexes

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

PENDING = sa.text("applied_at IS NULL")
FAILED = sa.text("projection_error IS NOT NULL")


def upgrade() -> None:
    # Nullable columns without constraints: plain ALTER TABLE ADD COLUMN works on SQLite too.
    op.add_column("lineage_events", sa.Column("applied_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("lineage_events", sa.Column("projection_error", sa.Text(), nullable=True))
    # Events stored before this revision were applied in the request that received them.
    op.execute("UPDATE lineage_events SET applied_at = received_at")
    op.create_index(
        "ix_lineage_events_pending", "lineage_events", ["id"], postgresql_where=PENDING, sqlite_where=PENDING
    )
    op.create_index(
        "ix_lineage_events_failed", "lineage_events", ["id"], postgresql_where=FAILED, sqlite_where=FAILED
    )


def downgrade() -> None:
    op.drop_index("ix_lineage_events_failed", table_name="lineage_events")
    op.drop_index("ix_lineage_events_pending", table_name="lineage_events")
    op.drop_column("lineage_events", "projection_error")
    op.drop_column("lineage_events", "applied_at")
