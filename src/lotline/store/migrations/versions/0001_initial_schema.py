"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

# Spelled out here, not imported from lotline.store.types: a migration must not change
# when application code does.
JSON_DOCUMENT = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "lineage_events",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("event_type", sa.String(length=16), nullable=True),
        sa.Column("event_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("run_id", sa.Uuid(), nullable=True),
        sa.Column("job_namespace", sa.String(length=1024), nullable=True),
        sa.Column("job_name", sa.String(length=1024), nullable=True),
        sa.Column("payload", JSON_DOCUMENT, nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_lineage_events")),
    )
    op.create_index(op.f("ix_lineage_events_event_time"), "lineage_events", ["event_time"], unique=False)
    op.create_index(op.f("ix_lineage_events_run_id"), "lineage_events", ["run_id"], unique=False)

    op.create_table(
        "namespaces",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(length=1024), nullable=False),
        sa.Column("owner_name", sa.String(length=1024), nullable=True),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_namespaces")),
        sa.UniqueConstraint("name", name=op.f("uq_namespaces_name")),
    )
    op.create_table(
        "sources",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(length=1024), nullable=False),
        sa.Column("type", sa.String(length=64), nullable=False),
        sa.Column("connection_url", sa.Text(), nullable=True),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sources")),
        sa.UniqueConstraint("name", name=op.f("uq_sources_name")),
    )
    op.create_table(
        "datasets",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("namespace_id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(length=1024), nullable=False),
        sa.Column("type", sa.String(length=32), nullable=False),
        sa.Column("physical_name", sa.String(length=1024), nullable=True),
        sa.Column("source_id", sa.Uuid(), nullable=True),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("facets", JSON_DOCUMENT, nullable=True),
        sa.Column("last_version_number", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["namespace_id"], ["namespaces.id"], name=op.f("fk_datasets_namespace_id_namespaces")
        ),
        sa.ForeignKeyConstraint(["source_id"], ["sources.id"], name=op.f("fk_datasets_source_id_sources")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_datasets")),
        sa.UniqueConstraint("namespace_id", "name", name=op.f("uq_datasets_namespace_id_name")),
    )
    op.create_table(
        "jobs",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("namespace_id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(length=1024), nullable=False),
        sa.Column("type", sa.String(length=32), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("current_version_id", sa.Uuid(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["namespace_id"], ["namespaces.id"], name=op.f("fk_jobs_namespace_id_namespaces")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
        sa.UniqueConstraint("namespace_id", "name", name=op.f("uq_jobs_namespace_id_name")),
    )
    op.create_table(
        "dataset_fields",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("dataset_id", sa.Uuid(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=1024), nullable=False),
        sa.Column("type", sa.String(length=255), nullable=True),
        sa.Column("description", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["dataset_id"],
            ["datasets.id"],
            name=op.f("fk_dataset_fields_dataset_id_datasets"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_dataset_fields")),
        sa.UniqueConstraint("dataset_id", "name", name=op.f("uq_dataset_fields_dataset_id_name")),
    )
    op.create_table(
        "job_versions",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("job_id", sa.Uuid(), nullable=False),
        sa.Column("location", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_job_versions_job_id_jobs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_versions")),
    )
    op.create_index(op.f("ix_job_versions_job_id"), "job_versions", ["job_id"], unique=False)

    op.create_table(
        "job_version_io",
        sa.Column("job_version_id", sa.Uuid(), nullable=False),
        sa.Column("dataset_id", sa.Uuid(), nullable=False),
        sa.Column("role", sa.String(length=8), nullable=False),
        sa.CheckConstraint("role IN ('INPUT', 'OUTPUT')", name=op.f("ck_job_version_io_role")),
        sa.ForeignKeyConstraint(
            ["dataset_id"], ["datasets.id"], name=op.f("fk_job_version_io_dataset_id_datasets")
        ),
        sa.ForeignKeyConstraint(
            ["job_version_id"],
            ["job_versions.id"],
            name=op.f("fk_job_version_io_job_version_id_job_versions"),
        ),
        sa.PrimaryKeyConstraint("job_version_id", "dataset_id", "role", name=op.f("pk_job_version_io")),
    )
    op.create_index(op.f("ix_job_version_io_dataset_id"), "job_version_io", ["dataset_id"], unique=False)

    op.create_table(
        "runs",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("job_id", sa.Uuid(), nullable=False),
        sa.Column("job_version_id", sa.Uuid(), nullable=True),
        sa.Column("parent_run_id", sa.Uuid(), nullable=True),
        sa.Column("lot", sa.String(length=128), server_default=sa.text("''"), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("nominal_start_time", sa.DateTime(timezone=True), nullable=True),
        sa.Column("nominal_end_time", sa.DateTime(timezone=True), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("args", JSON_DOCUMENT, nullable=True),
        sa.Column("facets", JSON_DOCUMENT, nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "state IN ('NEW', 'RUNNING', 'COMPLETED', 'FAILED', 'ABORTED')", name=op.f("ck_runs_state")
        ),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_runs_job_id_jobs")),
        sa.ForeignKeyConstraint(
            ["job_version_id"], ["job_versions.id"], name=op.f("fk_runs_job_version_id_job_versions")
        ),
        sa.ForeignKeyConstraint(["parent_run_id"], ["runs.id"], name=op.f("fk_runs_parent_run_id_runs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
    )
    op.create_index(op.f("ix_runs_job_id_created_at"), "runs", ["job_id", "created_at"], unique=False)
    op.create_index(op.f("ix_runs_parent_run_id"), "runs", ["parent_run_id"], unique=False)

    op.create_table(
        "dataset_versions",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("dataset_id", sa.Uuid(), nullable=False),
        sa.Column("version_number", sa.Integer(), nullable=False),
        sa.Column("lot", sa.String(length=128), server_default=sa.text("''"), nullable=False),
        sa.Column("run_id", sa.Uuid(), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("fields", JSON_DOCUMENT, nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "state IN ('current', 'failed', 'superseded')", name=op.f("ck_dataset_versions_state")
        ),
        sa.ForeignKeyConstraint(
            ["dataset_id"], ["datasets.id"], name=op.f("fk_dataset_versions_dataset_id_datasets")
        ),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_dataset_versions_run_id_runs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_dataset_versions")),
        sa.UniqueConstraint(
            "dataset_id", "version_number", name=op.f("uq_dataset_versions_dataset_id_version_number")
        ),
    )
    op.create_index(
        op.f("ix_dataset_versions_dataset_id_lot_state"),
        "dataset_versions",
        ["dataset_id", "lot", "state"],
        unique=False,
    )
    op.create_index(op.f("ix_dataset_versions_run_id"), "dataset_versions", ["run_id"], unique=False)
    op.create_index(
        "uq_dataset_versions_one_current",
        "dataset_versions",
        ["dataset_id", "lot"],
        unique=True,
        postgresql_where=sa.text("state = 'current'"),
        sqlite_where=sa.text("state = 'current'"),
    )

    op.create_table(
        "run_transitions",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("run_id", sa.Uuid(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("transitioned_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "state IN ('NEW', 'RUNNING', 'COMPLETED', 'FAILED', 'ABORTED')",
            name=op.f("ck_run_transitions_state"),
        ),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_run_transitions_run_id_runs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_run_transitions")),
    )
    op.create_index(op.f("ix_run_transitions_run_id"), "run_transitions", ["run_id"], unique=False)

    op.create_table(
        "run_inputs",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("run_id", sa.Uuid(), nullable=False),
        sa.Column("dataset_id", sa.Uuid(), nullable=False),
        sa.Column("lot", sa.String(length=128), server_default=sa.text("''"), nullable=False),
        sa.Column("dataset_version_id", sa.Uuid(), nullable=True),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["dataset_id"], ["datasets.id"], name=op.f("fk_run_inputs_dataset_id_datasets")
        ),
        sa.ForeignKeyConstraint(
            ["dataset_version_id"],
            ["dataset_versions.id"],
            name=op.f("fk_run_inputs_dataset_version_id_dataset_versions"),
        ),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_run_inputs_run_id_runs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_run_inputs")),
        sa.UniqueConstraint("run_id", "dataset_id", "lot", name=op.f("uq_run_inputs_run_id_dataset_id_lot")),
    )
    op.create_index(op.f("ix_run_inputs_dataset_id"), "run_inputs", ["dataset_id"], unique=False)
    op.create_index(
        op.f("ix_run_inputs_dataset_version_id"), "run_inputs", ["dataset_version_id"], unique=False
    )

    op.create_table(
        "run_outputs",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("run_id", sa.Uuid(), nullable=False),
        sa.Column("dataset_id", sa.Uuid(), nullable=False),
        sa.Column("lot", sa.String(length=128), server_default=sa.text("''"), nullable=False),
        sa.Column("dataset_version_id", sa.Uuid(), nullable=True),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["dataset_id"], ["datasets.id"], name=op.f("fk_run_outputs_dataset_id_datasets")
        ),
        sa.ForeignKeyConstraint(
            ["dataset_version_id"],
            ["dataset_versions.id"],
            name=op.f("fk_run_outputs_dataset_version_id_dataset_versions"),
        ),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_run_outputs_run_id_runs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_run_outputs")),
        sa.UniqueConstraint("run_id", "dataset_id", "lot", name=op.f("uq_run_outputs_run_id_dataset_id_lot")),
    )
    op.create_index(op.f("ix_run_outputs_dataset_id"), "run_outputs", ["dataset_id"], unique=False)
    op.create_index(
        op.f("ix_run_outputs_dataset_version_id"), "run_outputs", ["dataset_version_id"], unique=False
    )


def downgrade() -> None:
    op.drop_table("run_outputs")
    op.drop_table("run_inputs")
    op.drop_table("run_transitions")
    op.drop_table("dataset_versions")
    op.drop_table("runs")
    op.drop_table("job_version_io")
    op.drop_table("job_versions")
    op.drop_table("dataset_fields")
    op.drop_table("jobs")
    op.drop_table("datasets")
    op.drop_table("sources")
    op.drop_table("namespaces")
    op.drop_table("lineage_events")
