"""An index of manifests by (dataset, state, lot, version): the lot grid's empty lots of a range

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-27

The grid of five years of PT5M lots reads the lots whose current manifest is empty (one in 20, in
the bench). Through (dataset_id, lot, state) it read every manifest of the range (525,600) to keep
26,206: on PostgreSQL a scan of the whole table, 210 to 430 ms of the grid. Through (dataset_id,
state, lot, version_id) it reads only the EMPTY entries, from the index alone (docs/benchmarks.md,
"bench.grid").
"""

from __future__ import annotations

from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

NAME = "ix_manifests_dataset_id_state_lot_version_id"


def upgrade() -> None:
    op.create_index(op.f(NAME), "manifests", ["dataset_id", "state", "lot", "version_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f(NAME), table_name="manifests")
