"""ready_lot_counts: READY OUTPUT lots counted by ten consecutive lots, kept by triggers

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-26

A gap report over five years of five-minute lots read every READY row of the range (525,600 per
dataset) to find where runs of READY lots break. ``ready_lot_counts`` counts the READY OUTPUT rows
of each (dataset, job, lot id less its last character); a report reads those counts and only the
rows of the stretches that are neither complete nor empty (``services/gaps``, docs/lots.md).

The counts are kept by triggers on data_status, so every write path (the PostgreSQL claim
functions, the Python claim path, invalidation, the reaper, hold and release, clean, bulk loads)
keeps them right without knowing of them. The triggers only append deltas: a row per key a
statement changed, with no unique key, so two writers never lock, nor wait for, the same counter
row (a counter row per key, upserted, deadlocked concurrent ingests: each took the counters under
its data_status locks in its own order). A key's count is the sum of its rows; compaction merges
them (``store/queries/gaps.compact_ready_counts``).

- PostgreSQL: one statement-level trigger per event over its transition tables, so a bulk write
  (a year reopened, a seeded load) appends one row per key it changed. ``ENABLE ALWAYS``: they
  fire under ``session_replication_role = replica`` too (a bulk load that skips foreign-key checks
  still counts).
- SQLite: row-level triggers, only for rows that are or were READY OUTPUT rows, on the columns
  that decide it.

Filled from data_status as it is, one row per key.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

#: The net changes a statement made, one row per key: +1 per READY OUTPUT row it wrote, -1 per one
#: it removed or changed away (for an UPDATE both, netted; keys it left as they were get none).
#: plpgsql plans each statement when it first runs it, so a branch may name a transition table that
#: only its own event has.
COUNT_FUNCTION = """CREATE FUNCTION lotline_count_ready_lots() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO ready_lot_counts (dataset_id, lot_prefix, job_id, lots)
        SELECT dataset_id, left(lot, -1), job_id, count(*) FROM new_rows
        WHERE role = 'OUTPUT' AND status = 'READY'
        GROUP BY 1, 2, 3;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO ready_lot_counts (dataset_id, lot_prefix, job_id, lots)
        SELECT dataset_id, left(lot, -1), job_id, -count(*) FROM old_rows
        WHERE role = 'OUTPUT' AND status = 'READY'
        GROUP BY 1, 2, 3;
    ELSE
        INSERT INTO ready_lot_counts (dataset_id, lot_prefix, job_id, lots)
        SELECT dataset_id, lot_prefix, job_id, sum(change) FROM (
            SELECT dataset_id, left(lot, -1) AS lot_prefix, job_id, 1 AS change FROM new_rows
            WHERE role = 'OUTPUT' AND status = 'READY'
            UNION ALL
            SELECT dataset_id, left(lot, -1), job_id, -1 FROM old_rows
            WHERE role = 'OUTPUT' AND status = 'READY') AS changes
        GROUP BY 1, 2, 3 HAVING sum(change) <> 0;
    END IF;
    RETURN NULL;
END $$"""

POSTGRES_TRIGGERS = {
    "data_status_ready_inserted": "INSERT ON data_status REFERENCING NEW TABLE AS new_rows",
    "data_status_ready_updated": (
        "UPDATE ON data_status REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows"
    ),
    "data_status_ready_deleted": "DELETE ON data_status REFERENCING OLD TABLE AS old_rows",
}


def _append(row: str, change: int) -> str:
    return (
        "INSERT INTO ready_lot_counts (dataset_id, lot_prefix, job_id, lots) "
        f"VALUES ({row}.dataset_id, substr({row}.lot, 1, length({row}.lot) - 1), {row}.job_id, {change});"
    )


_DECIDING = "UPDATE OF dataset_id, lot, job_id, role, status"
_ADD, _REMOVE = _append("NEW", 1), _append("OLD", -1)
SQLITE_TRIGGERS = {
    "data_status_ready_inserted": f"AFTER INSERT ON data_status WHEN {{new}} BEGIN {_ADD} END",
    "data_status_ready_deleted": f"AFTER DELETE ON data_status WHEN {{old}} BEGIN {_REMOVE} END",
    "data_status_ready_left": f"AFTER {_DECIDING} ON data_status WHEN {{old}} BEGIN {_REMOVE} END",
    "data_status_ready_entered": f"AFTER {_DECIDING} ON data_status WHEN {{new}} BEGIN {_ADD} END",
}


def _ready(row: str) -> str:
    return f"{row}.role = 'OUTPUT' AND {row}.status = 'READY'"


def upgrade() -> None:
    op.create_table(
        "ready_lot_counts",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("dataset_id", sa.Uuid(), nullable=False),
        sa.Column("lot_prefix", sa.String(length=128), nullable=False),
        sa.Column("job_id", sa.Uuid(), nullable=False),
        sa.Column("lots", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_ready_lot_counts")),
    )
    op.create_index(
        op.f("ix_ready_lot_counts_dataset_id_lot_prefix_job_id_lots"),
        "ready_lot_counts",
        ["dataset_id", "lot_prefix", "job_id", "lots"],
        unique=False,
    )
    postgres = op.get_bind().dialect.name == "postgresql"
    prefix = "left(lot, -1)" if postgres else "substr(lot, 1, length(lot) - 1)"
    op.execute(
        "INSERT INTO ready_lot_counts (dataset_id, lot_prefix, job_id, lots) "
        f"SELECT dataset_id, {prefix}, job_id, count(*) FROM data_status "
        f"WHERE role = 'OUTPUT' AND status = 'READY' GROUP BY dataset_id, {prefix}, job_id"
    )
    if postgres:
        op.execute(COUNT_FUNCTION)
        for name, event in POSTGRES_TRIGGERS.items():
            op.execute(
                f"CREATE TRIGGER {name} AFTER {event} "
                "FOR EACH STATEMENT EXECUTE FUNCTION lotline_count_ready_lots()"
            )
            op.execute(f"ALTER TABLE data_status ENABLE ALWAYS TRIGGER {name}")
        return
    for name, body in SQLITE_TRIGGERS.items():
        op.execute(f"CREATE TRIGGER {name} " + body.format(new=_ready("NEW"), old=_ready("OLD")))


def downgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    for name in POSTGRES_TRIGGERS if postgres else SQLITE_TRIGGERS:
        op.execute(f"DROP TRIGGER {name}" + (" ON data_status" if postgres else ""))
    if postgres:
        op.execute("DROP FUNCTION lotline_count_ready_lots()")
    op.drop_index(
        op.f("ix_ready_lot_counts_dataset_id_lot_prefix_job_id_lots"), table_name="ready_lot_counts"
    )
    op.drop_table("ready_lot_counts")
