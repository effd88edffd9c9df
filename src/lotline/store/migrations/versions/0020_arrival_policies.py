"""arrival policies: a lot never delivered is missing, overdue lots are pushed, empty lots say who

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-28

- ``arrival_policies``: a source dataset's lateness window and what absence means (missing or
  empty), where it was declared, and how far the arrival pass has noticed its due lots
  (domain/arrival.py, services/arrival.py).
- ``manifests.declared_by``: who declared an empty lot empty (a marker, an operator, the policy).
  Empty lots registered before this migration say nothing (NULL): they were closed by an ingest
  range, which no longer declares anything.
- ``lot_events``: kind ``OVERDUE``, one per source lot that became due with nothing delivered.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "arrival_policies",
        sa.Column("dataset_id", sa.Uuid(), nullable=False),
        sa.Column("lot_interval", sa.String(length=16), nullable=False),
        sa.Column("late_after_seconds", sa.Integer(), nullable=False),
        sa.Column("absent", sa.String(length=16), nullable=False),
        sa.Column("declared_in", sa.Text(), nullable=False),
        sa.Column("noticed_through", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("absent IN ('missing', 'empty')", name=op.f("ck_arrival_policies_absent")),
        sa.CheckConstraint("late_after_seconds >= 0", name=op.f("ck_arrival_policies_late_after_seconds")),
        sa.ForeignKeyConstraint(
            ["dataset_id"], ["datasets.id"], name=op.f("fk_arrival_policies_dataset_id_datasets")
        ),
        sa.PrimaryKeyConstraint("dataset_id", name=op.f("pk_arrival_policies")),
    )
    op.create_index(
        op.f("ix_arrival_policies_noticed_through"), "arrival_policies", ["noticed_through"], unique=False
    )
    op.add_column("manifests", sa.Column("declared_by", sa.Text(), nullable=True))
    with op.batch_alter_table("lot_events") as batch:
        batch.drop_constraint(op.f("ck_lot_events_kind"), type_="check")
        batch.create_check_constraint(
            op.f("ck_lot_events_kind"), "kind IN ('READY', 'REOPENED', 'FAILED', 'OVERDUE')"
        )


def downgrade() -> None:
    op.execute("DELETE FROM lot_events WHERE kind = 'OVERDUE'")
    with op.batch_alter_table("lot_events") as batch:
        batch.drop_constraint(op.f("ck_lot_events_kind"), type_="check")
        batch.create_check_constraint(op.f("ck_lot_events_kind"), "kind IN ('READY', 'REOPENED', 'FAILED')")
    with op.batch_alter_table("manifests") as batch:
        batch.drop_column("declared_by")
    op.drop_index(op.f("ix_arrival_policies_noticed_through"), table_name="arrival_policies")
    op.drop_table("arrival_policies")
