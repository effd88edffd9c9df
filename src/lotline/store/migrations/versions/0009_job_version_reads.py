"""job version reads: datasets a job version's runs read without declaring them (dynamic lineage)

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "job_version_reads",
        sa.Column("job_version_id", sa.Uuid(), nullable=False),
        sa.Column("dataset_id", sa.Uuid(), nullable=False),
        sa.Column("run_id", sa.Uuid(), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["dataset_id"], ["datasets.id"], name=op.f("fk_job_version_reads_dataset_id_datasets")
        ),
        sa.ForeignKeyConstraint(
            ["job_version_id"],
            ["job_versions.id"],
            name=op.f("fk_job_version_reads_job_version_id_job_versions"),
        ),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_job_version_reads_run_id_runs")),
        sa.PrimaryKeyConstraint("job_version_id", "dataset_id", name=op.f("pk_job_version_reads")),
    )
    op.create_index(
        op.f("ix_job_version_reads_dataset_id"), "job_version_reads", ["dataset_id"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_job_version_reads_dataset_id"), table_name="job_version_reads")
    op.drop_table("job_version_reads")
