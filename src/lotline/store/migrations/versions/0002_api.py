"""REST API and OpenLineage ingestion: tags, soft delete, job facets, event de-duplication

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

# Spelled out here, not imported from lotline.store.types (see 0001).
JSON_DOCUMENT = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    # Nullable columns without constraints: plain ALTER TABLE ADD COLUMN works on SQLite too.
    op.add_column("datasets", sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("jobs", sa.Column("facets", JSON_DOCUMENT, nullable=True))
    op.create_index(op.f("ix_jobs_current_version_id"), "jobs", ["current_version_id"], unique=False)
    op.add_column("lineage_events", sa.Column("event_key", sa.String(length=64), nullable=True))
    op.create_index("uq_lineage_events_event_key", "lineage_events", ["event_key"], unique=True)

    op.create_table(
        "tags",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(length=1024), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tags")),
        sa.UniqueConstraint("name", name=op.f("uq_tags_name")),
    )
    op.create_table(
        "dataset_tags",
        sa.Column("dataset_id", sa.Uuid(), nullable=False),
        sa.Column("tag_id", sa.Uuid(), nullable=False),
        sa.Column("tagged_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["dataset_id"],
            ["datasets.id"],
            name=op.f("fk_dataset_tags_dataset_id_datasets"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(["tag_id"], ["tags.id"], name=op.f("fk_dataset_tags_tag_id_tags")),
        sa.PrimaryKeyConstraint("dataset_id", "tag_id", name=op.f("pk_dataset_tags")),
    )
    op.create_index(op.f("ix_dataset_tags_tag_id"), "dataset_tags", ["tag_id"], unique=False)
    op.create_table(
        "dataset_field_tags",
        sa.Column("dataset_id", sa.Uuid(), nullable=False),
        sa.Column("field_name", sa.String(length=1024), nullable=False),
        sa.Column("tag_id", sa.Uuid(), nullable=False),
        sa.Column("tagged_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["dataset_id"],
            ["datasets.id"],
            name=op.f("fk_dataset_field_tags_dataset_id_datasets"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(["tag_id"], ["tags.id"], name=op.f("fk_dataset_field_tags_tag_id_tags")),
        sa.PrimaryKeyConstraint("dataset_id", "field_name", "tag_id", name=op.f("pk_dataset_field_tags")),
    )
    op.create_index(op.f("ix_dataset_field_tags_tag_id"), "dataset_field_tags", ["tag_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_dataset_field_tags_tag_id"), table_name="dataset_field_tags")
    op.drop_table("dataset_field_tags")
    op.drop_index(op.f("ix_dataset_tags_tag_id"), table_name="dataset_tags")
    op.drop_table("dataset_tags")
    op.drop_table("tags")
    op.drop_index("uq_lineage_events_event_key", table_name="lineage_events")
    op.drop_index(op.f("ix_jobs_current_version_id"), table_name="jobs")
    with op.batch_alter_table("lineage_events") as batch:
        batch.drop_column("event_key")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("facets")
    with op.batch_alter_table("datasets") as batch:
        batch.drop_column("deleted_at")
