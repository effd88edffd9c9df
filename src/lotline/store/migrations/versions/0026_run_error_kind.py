"""runs.error_kind: a failed run's kind of failure, as data

Revision ID: 0026_run_error_kind
Revises: 0025_runs_by_job_version
Create Date: 2026-11-28

A failed run records its kind of failure next to its one-line reason: the code of the lotline
error it failed with (``check_failed``: a failing check), NULL for any other error. The gap
report counts the lots failed by a check by it; it read the kind from the reason's text before
(issue 43, point 4). Rows written before this migration whose reason a failing check wrote
(``check … failed: …``, or ``output …: check … failed: …`` for several outputs) get
``check_failed``, so that their count does not change; the others stay NULL.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0026_run_error_kind"
down_revision = "0025_runs_by_job_version"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("error_kind", sa.String(64), nullable=True))
    runs = sa.table("runs", sa.column("error", sa.Text), sa.column("error_kind", sa.String(64)))
    by_check = sa.or_(runs.c.error.like("check % failed: %"), runs.c.error.like("%: check % failed: %"))
    op.execute(runs.update().where(by_check).values(error_kind="check_failed"))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("error_kind")
