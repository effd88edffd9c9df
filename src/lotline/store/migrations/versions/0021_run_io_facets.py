"""run_inputs.facets, run_outputs.facets: the quality results a run reported for a dataset it read
or wrote

Revision ID: 0021_run_io_facets
Revises: 0020
Create Date: 2026-11-28

The quality results (``dataQualityAssertions``, ``dataQualityMetrics``) a run reported for one of
its inputs or outputs (an OpenLineage event's, wherever it put them; lotline's checks): a version
carries the results of the runs that wrote or tested that version, never its dataset's earlier
ones (issue 42, point 2). Answered as a run's ``inputDatasetVersions[].facets`` and
``outputDatasetVersions[].facets``, where Marquez answers them. Rows written before this
migration have none (NULL).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0021_run_io_facets"
down_revision = "0020"
branch_labels = None
depends_on = None

JSON_DOCUMENT = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    for table in ("run_inputs", "run_outputs"):
        op.add_column(table, sa.Column("facets", JSON_DOCUMENT, nullable=True))


def downgrade() -> None:
    for table in ("run_inputs", "run_outputs"):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("facets")
