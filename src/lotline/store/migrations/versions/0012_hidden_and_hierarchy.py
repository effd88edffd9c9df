"""hidden namespaces and jobs, job tags, the job hierarchy (Marquez conformance)

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("namespaces", sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("jobs", sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("jobs", sa.Column("parent_job_id", sa.Uuid(), nullable=True))
    op.create_table(
        "job_tags",
        sa.Column("job_id", sa.Uuid(), nullable=False),
        sa.Column("tag_id", sa.Uuid(), nullable=False),
        sa.Column("tagged_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_job_tags_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(["tag_id"], ["tags.id"], name=op.f("fk_job_tags_tag_id_tags")),
        sa.PrimaryKeyConstraint("job_id", "tag_id", name=op.f("pk_job_tags")),
    )
    op.create_index(op.f("ix_job_tags_tag_id"), "job_tags", ["tag_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_job_tags_tag_id"), table_name="job_tags")
    op.drop_table("job_tags")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("parent_job_id")
        batch.drop_column("deleted_at")
    with op.batch_alter_table("namespaces") as batch:
        batch.drop_column("deleted_at")
