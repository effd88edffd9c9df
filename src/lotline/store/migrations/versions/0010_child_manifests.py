"""child manifests: the part of a lot a child run's manifest holds

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("manifests", sa.Column("part", sa.String(length=512), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("manifests") as batch:
        batch.drop_column("part")
