"""An index of runs by job version: the stale lots of a job whose version changed

Revision ID: 0025_runs_by_job_version
Revises: 0024_zoned_intervals
Create Date: 2026-11-28

A lot is stale when the run that made it ran an older version of its job than the job's current
one (issue 40, point 3). Gap reports, grids and ``lotline status`` find them from the runs of
the job's older versions (store/queries/gaps.stale_lots), not from every READY lot of the range:
a job that never changed reads nothing, one that did reads what its older versions made.
"""

from __future__ import annotations

from alembic import op

revision = "0025_runs_by_job_version"
down_revision = "0024_zoned_intervals"
branch_labels = None
depends_on = None

NAME = "ix_runs_job_version_id"


def upgrade() -> None:
    op.create_index(op.f(NAME), "runs", ["job_version_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f(NAME), table_name="runs")
