"""manifests.objects_removed_at: when cleanup deleted a superseded version's objects

Revision ID: 0023_superseded_objects_removed
Revises: 0022_claims_never_wait
Create Date: 2026-11-28

``lotline cleanup`` deletes the objects of a complete manifest whose version was superseded by a
newer current version of its lot longer ago than ``LOTLINE_SUPERSEDED_GRACE`` (issue 39, point 9).
The manifest stays (the lot's history), keeps its state and its list of objects, and records
when they were deleted, so that the lot page does not offer them as if they were there. Rows
written before this migration have NULL: their objects are kept.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023_superseded_objects_removed"
down_revision = "0022_claims_never_wait"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("manifests", sa.Column("objects_removed_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("manifests") as batch:
        batch.drop_column("objects_removed_at")
