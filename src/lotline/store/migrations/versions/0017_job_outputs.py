"""lot_job_outputs: a coordinated job's outputs, so that one job may have several

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-25

Every output of a coordinated job, the first included (``lot_jobs.output_dataset_id`` stays: it is
the output that carries the claim, and the PostgreSQL claim functions read it). ``dataset_id`` is
unique: a dataset has exactly one producing job, whichever of its outputs it is. Filled from
``lot_jobs`` (each existing job has its one output at position 0).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "lot_job_outputs",
        sa.Column("job_id", sa.Uuid(), nullable=False),
        sa.Column("dataset_id", sa.Uuid(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["dataset_id"], ["datasets.id"], name=op.f("fk_lot_job_outputs_dataset_id_datasets")
        ),
        sa.ForeignKeyConstraint(
            ["job_id"], ["lot_jobs.job_id"], name=op.f("fk_lot_job_outputs_job_id_lot_jobs")
        ),
        sa.PrimaryKeyConstraint("job_id", "dataset_id", name=op.f("pk_lot_job_outputs")),
        sa.UniqueConstraint("dataset_id", name=op.f("uq_lot_job_outputs_dataset_id")),
    )
    op.execute(
        "INSERT INTO lot_job_outputs (job_id, dataset_id, position) "
        "SELECT job_id, output_dataset_id, 0 FROM lot_jobs"
    )


def downgrade() -> None:
    op.drop_table("lot_job_outputs")
