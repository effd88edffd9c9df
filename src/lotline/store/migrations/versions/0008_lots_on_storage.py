"""lots on storage: manifests, the lot event log, webhook delivery positions

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-23

On PostgreSQL the claim-finishing function of 0007 is kept as it is, renamed
``lotline_finish_claim_0007``, and wrapped by a new ``lotline_finish_claim`` with the same
signature that also appends the lot's READY event (SPEC §5: in the transaction that makes the lot
READY), exactly as the Python path does (``store/queries/lot_events.append``).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

JSON_DOCUMENT = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
PARTIAL = sa.text("state = 'partial'")

FINISH_ARGS = "uuid, uuid, text, integer, boolean, timestamptz, uuid, text, uuid"

# The lock key is store/queries/lot_events.APPEND_LOCK (positions in commit order).
FINISH_CLAIM = """CREATE OR REPLACE FUNCTION lotline_finish_claim(
    p_job uuid, p_run uuid, p_owner text, p_attempt integer, p_success boolean,
    p_at timestamptz, p_output uuid, p_lot text, p_version uuid)
RETURNS void
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    PERFORM lotline_finish_claim_0007(p_job, p_run, p_owner, p_attempt, p_success, p_at, p_output,
                                      p_lot, p_version);
    IF p_success THEN
        PERFORM pg_advisory_xact_lock(7810735312196363877);
        INSERT INTO lot_events (dataset_id, lot, kind, manifest_id, version_id, run_id, created_at)
        VALUES (p_output, p_lot, 'READY', NULL, p_version, p_run, clock_timestamp());
        PERFORM pg_notify('lotline_lots', '');
    END IF;
END $$
"""


def upgrade() -> None:
    op.create_table(
        "manifests",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("dataset_id", sa.Uuid(), nullable=False),
        sa.Column("lot", sa.String(length=128), nullable=False),
        sa.Column("run_id", sa.Uuid(), nullable=True),
        sa.Column("version_id", sa.Uuid(), nullable=True),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("uri_type", sa.String(length=16), nullable=False),
        sa.Column("location", sa.Text(), nullable=False),
        sa.Column("objects", JSON_DOCUMENT, nullable=False),
        sa.Column("object_count", sa.Integer(), nullable=False),
        sa.Column("total_bytes", sa.BigInteger(), nullable=False),
        sa.Column("row_count", sa.BigInteger(), nullable=True),
        sa.Column("comment", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "state IN ('complete', 'empty', 'partial', 'removed')", name=op.f("ck_manifests_state")
        ),
        sa.ForeignKeyConstraint(
            ["dataset_id"], ["datasets.id"], name=op.f("fk_manifests_dataset_id_datasets")
        ),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_manifests_run_id_runs")),
        sa.ForeignKeyConstraint(
            ["version_id"], ["dataset_versions.id"], name=op.f("fk_manifests_version_id_dataset_versions")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_manifests")),
        sa.UniqueConstraint("version_id", name=op.f("uq_manifests_version_id")),
    )
    op.create_index(op.f("ix_manifests_run_id"), "manifests", ["run_id"], unique=False)
    op.create_index(
        op.f("ix_manifests_dataset_id_lot_state"), "manifests", ["dataset_id", "lot", "state"], unique=False
    )
    op.create_index(
        "ix_manifests_partial", "manifests", ["created_at"], postgresql_where=PARTIAL, sqlite_where=PARTIAL
    )
    op.create_table(
        "lot_events",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("dataset_id", sa.Uuid(), nullable=False),
        sa.Column("lot", sa.String(length=128), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("manifest_id", sa.Uuid(), nullable=True),
        sa.Column("version_id", sa.Uuid(), nullable=True),
        sa.Column("run_id", sa.Uuid(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("kind IN ('READY', 'REOPENED')", name=op.f("ck_lot_events_kind")),
        sa.ForeignKeyConstraint(
            ["dataset_id"], ["datasets.id"], name=op.f("fk_lot_events_dataset_id_datasets")
        ),
        sa.ForeignKeyConstraint(
            ["manifest_id"], ["manifests.id"], name=op.f("fk_lot_events_manifest_id_manifests")
        ),
        sa.ForeignKeyConstraint(
            ["version_id"], ["dataset_versions.id"], name=op.f("fk_lot_events_version_id_dataset_versions")
        ),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_lot_events_run_id_runs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_lot_events")),
    )
    op.create_index(op.f("ix_lot_events_dataset_id_id"), "lot_events", ["dataset_id", "id"], unique=False)
    op.create_table(
        "webhook_deliveries",
        sa.Column("url", sa.String(length=1024), nullable=False),
        sa.Column("position", sa.BigInteger(), server_default=sa.text("0"), nullable=False),
        sa.Column("failures", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("url", name=op.f("pk_webhook_deliveries")),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"ALTER FUNCTION lotline_finish_claim({FINISH_ARGS}) RENAME TO lotline_finish_claim_0007")
        op.execute(FINISH_CLAIM)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"DROP FUNCTION lotline_finish_claim({FINISH_ARGS})")
        op.execute(f"ALTER FUNCTION lotline_finish_claim_0007({FINISH_ARGS}) RENAME TO lotline_finish_claim")
    op.drop_table("webhook_deliveries")
    op.drop_index(op.f("ix_lot_events_dataset_id_id"), table_name="lot_events")
    op.drop_table("lot_events")
    op.drop_index("ix_manifests_partial", table_name="manifests")
    op.drop_index(op.f("ix_manifests_dataset_id_lot_state"), table_name="manifests")
    op.drop_index(op.f("ix_manifests_run_id"), table_name="manifests")
    op.drop_table("manifests")
