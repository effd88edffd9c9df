"""coordination: data-status table and the lot-job registry (SPEC §4)

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

# Plain types only (see 0001): lotline.store.types.UtcDateTime is DateTime(timezone=True) here.
TIMESTAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "lot_jobs",
        sa.Column("job_id", sa.Uuid(), nullable=False),
        sa.Column("output_dataset_id", sa.Uuid(), nullable=False),
        sa.Column("lot_mapping", sa.String(length=32), nullable=True),
        sa.Column("held", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("updated_at", TIMESTAMP, nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_lot_jobs_job_id_jobs")),
        sa.ForeignKeyConstraint(
            ["output_dataset_id"], ["datasets.id"], name=op.f("fk_lot_jobs_output_dataset_id_datasets")
        ),
        sa.PrimaryKeyConstraint("job_id", name=op.f("pk_lot_jobs")),
        sa.UniqueConstraint("output_dataset_id", name=op.f("uq_lot_jobs_output_dataset_id")),
    )
    op.create_table(
        "lot_job_inputs",
        sa.Column("job_id", sa.Uuid(), nullable=False),
        sa.Column("dataset_id", sa.Uuid(), nullable=False),
        sa.ForeignKeyConstraint(
            ["dataset_id"], ["datasets.id"], name=op.f("fk_lot_job_inputs_dataset_id_datasets")
        ),
        sa.ForeignKeyConstraint(
            ["job_id"], ["lot_jobs.job_id"], name=op.f("fk_lot_job_inputs_job_id_lot_jobs")
        ),
        sa.PrimaryKeyConstraint("job_id", "dataset_id", name=op.f("pk_lot_job_inputs")),
    )
    op.create_index(op.f("ix_lot_job_inputs_dataset_id"), "lot_job_inputs", ["dataset_id"], unique=False)
    op.create_table(
        "data_status",
        sa.Column("dataset_id", sa.Uuid(), nullable=False),
        sa.Column("lot", sa.String(length=128), nullable=False),
        sa.Column("job_id", sa.Uuid(), nullable=False),
        sa.Column("role", sa.String(length=8), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("held_status", sa.String(length=16), nullable=True),
        sa.Column("attempt", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("owner", sa.String(length=200), nullable=True),
        sa.Column("lease_expires_at", TIMESTAMP, nullable=True),
        sa.Column("run_id", sa.Uuid(), nullable=True),
        sa.Column("data_removed_at", TIMESTAMP, nullable=True),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("updated_at", TIMESTAMP, nullable=False),
        sa.CheckConstraint("role IN ('INPUT', 'OUTPUT')", name=op.f("ck_data_status_role")),
        sa.CheckConstraint(
            "status IN ('RUNNING', 'READY', 'DONE', 'ERROR', 'RESUBMIT', 'PENDING', 'HOLD')",
            name=op.f("ck_data_status_status"),
        ),
        sa.ForeignKeyConstraint(
            ["dataset_id"], ["datasets.id"], name=op.f("fk_data_status_dataset_id_datasets")
        ),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_data_status_job_id_jobs")),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_data_status_run_id_runs")),
        sa.PrimaryKeyConstraint("dataset_id", "lot", "job_id", name=op.f("pk_data_status")),
    )
    op.create_index(
        op.f("ix_data_status_dataset_id_role_status_lot"),
        "data_status",
        ["dataset_id", "role", "status", "lot"],
        unique=False,
    )
    op.create_index(
        op.f("ix_data_status_job_id_role_status"), "data_status", ["job_id", "role", "status"], unique=False
    )
    op.create_index(op.f("ix_data_status_run_id"), "data_status", ["run_id"], unique=False)
    op.create_index(
        op.f("ix_data_status_status_lease_expires_at"),
        "data_status",
        ["status", "lease_expires_at"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_data_status_status_lease_expires_at"), table_name="data_status")
    op.drop_index(op.f("ix_data_status_run_id"), table_name="data_status")
    op.drop_index(op.f("ix_data_status_job_id_role_status"), table_name="data_status")
    op.drop_index(op.f("ix_data_status_dataset_id_role_status_lot"), table_name="data_status")
    op.drop_table("data_status")
    op.drop_index(op.f("ix_lot_job_inputs_dataset_id"), table_name="lot_job_inputs")
    op.drop_table("lot_job_inputs")
    op.drop_table("lot_jobs")
