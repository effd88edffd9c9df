"""Wider lot mappings and source intervals: an interval may name its zone

Revision ID: 0024_zoned_intervals
Revises: 0023_superseded_objects_removed
Create Date: 2026-11-28

Issue 40: an interval of a day or longer may be bounded by a time zone's local days, written
``P1D[America/New_York]``, so a lot mapping (``PT1H->P1D[America/Argentina/ComodRivadavia]``) no
longer fits 32 characters, nor a source's interval 16. Both columns are widened; nothing else
changes (calendar intervals ``P1W``, ``P1M``, ``P1Y`` fit as they were).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0024_zoned_intervals"
down_revision = "0023_superseded_objects_removed"
branch_labels = None
depends_on = None


def _widths(mapping: int, interval: int) -> None:
    # SQLite does not enforce VARCHAR lengths: only the declared type changes, in place, without
    # copying the tables (which other tables' foreign keys reference) — the procedure SQLite's
    # ALTER TABLE page gives for changes that leave the stored rows as they are.
    if op.get_bind().dialect.name == "sqlite":
        _sqlite_declared_type("lot_jobs", "lot_mapping", f"VARCHAR({mapping})")
        _sqlite_declared_type("arrival_policies", "lot_interval", f"VARCHAR({interval})")
        return
    op.alter_column("lot_jobs", "lot_mapping", type_=sa.String(mapping), existing_nullable=True)
    op.alter_column("arrival_policies", "lot_interval", type_=sa.String(interval), existing_nullable=False)


def _sqlite_declared_type(table: str, column: str, declared: str) -> None:
    bind = op.get_bind()
    sql = bind.execute(
        sa.text("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = :name"), {"name": table}
    ).scalar_one()
    head, found, tail = sql.partition(f"{column} VARCHAR(")
    if not found:
        raise RuntimeError(f"{table}.{column} is not a VARCHAR column")
    new_sql = head + f"{column} {declared}" + tail[tail.index(")") + 1 :]
    bind.execute(sa.text("PRAGMA writable_schema = ON"))
    bind.execute(
        sa.text("UPDATE sqlite_master SET sql = :sql WHERE type = 'table' AND name = :name"),
        {"sql": new_sql, "name": table},
    )
    version = bind.execute(sa.text("PRAGMA schema_version")).scalar_one()
    bind.execute(sa.text(f"PRAGMA schema_version = {int(version) + 1}"))
    bind.execute(sa.text("PRAGMA writable_schema = OFF"))


def upgrade() -> None:
    _widths(96, 64)


def downgrade() -> None:
    _widths(32, 16)
