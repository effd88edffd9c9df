"""version facets: the facets a dataset version was made with; a stream's schema location

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

JSON_DOCUMENT = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.add_column("dataset_versions", sa.Column("facets", JSON_DOCUMENT, nullable=True))
    op.add_column("datasets", sa.Column("schema_location", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("datasets") as batch:
        batch.drop_column("schema_location")
    with op.batch_alter_table("dataset_versions") as batch:
        batch.drop_column("facets")
