"""lot frontier: the claim search's work list (pending (job, lot) hints), filled from data_status

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

# Every READY lot of a registered job's inputs that the job holds no read lock on (INPUT RUNNING or
# DONE) is pending work for the job: the same rows lotline's registration writes.
BACKFILL = """
INSERT INTO lot_frontier (job_id, lot, touched_at)
SELECT DISTINCT li.job_id, produced.lot, CURRENT_TIMESTAMP
FROM lot_job_inputs AS li
JOIN data_status AS produced
  ON produced.dataset_id = li.dataset_id AND produced.role = 'OUTPUT' AND produced.status = 'READY'
WHERE NOT EXISTS (
  SELECT 1 FROM data_status AS mine
  WHERE mine.dataset_id = produced.dataset_id AND mine.lot = produced.lot AND mine.job_id = li.job_id
    AND mine.status IN ('RUNNING', 'DONE')
)
"""


def upgrade() -> None:
    op.create_table(
        "lot_frontier",
        sa.Column("job_id", sa.Uuid(), nullable=False),
        sa.Column("lot", sa.String(length=128), nullable=False),
        sa.Column("touched_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["lot_jobs.job_id"], name=op.f("fk_lot_frontier_job_id_lot_jobs")
        ),
        sa.PrimaryKeyConstraint("job_id", "lot", name=op.f("pk_lot_frontier")),
    )
    op.execute(BACKFILL)


def downgrade() -> None:
    op.drop_table("lot_frontier")
