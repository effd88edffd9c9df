"""Reads of gap reports: a dataset's OUTPUT rows over a lot-id range, aggregated where they can be.

Every statement filters ``dataset_id, role = 'OUTPUT'`` and a lot-id range, and so reads the index
(dataset_id, role, status, lot) of data_status; READY rows, the bulk, are only counted per day
(an index-only scan on PostgreSQL) unless a day is partly missing. ``pattern`` (a LIKE pattern
such as ``________PT5M___``) keeps lots of another interval out; None reads named lots too.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import Connection, func, select
from sqlalchemy.sql.elements import ColumnElement

from lotline.domain.coordination import Role, Status
from lotline.store.schema import data_status as ds


def _rows(
    dataset_id: uuid.UUID, lot_from: str | None, lot_to: str | None, pattern: str | None
) -> list[ColumnElement[bool]]:
    where: list[ColumnElement[bool]] = [ds.c.dataset_id == dataset_id, ds.c.role == Role.OUTPUT.value]
    if lot_from is not None:
        where.append(ds.c.lot >= lot_from)
    if lot_to is not None:
        where.append(ds.c.lot <= lot_to)
    if pattern is not None:
        where.append(ds.c.lot.like(pattern))
    return where


def ready_per_day(
    connection: Connection, dataset_id: uuid.UUID, lot_from: str, lot_to: str, pattern: str
) -> dict[str, int]:
    """READY lots per day (``yyyyMMdd`` -> count) of interval lots in ``[lot_from, lot_to]``."""
    day = func.substr(ds.c.lot, 1, 8).label("day")
    query = (
        select(day, func.count())
        .where(*_rows(dataset_id, lot_from, lot_to, pattern), ds.c.status == Status.READY.value)
        .group_by(day)
    )
    return {d: n for d, n in connection.execute(query).all()}


def count_ready(connection: Connection, dataset_id: uuid.UUID) -> int:
    """READY lots of a dataset (of named lots: the report counts what exists)."""
    query = select(func.count()).where(
        *_rows(dataset_id, None, None, None), ds.c.status == Status.READY.value
    )
    found: int = connection.execute(query).scalar_one()
    return found


def unready_rows(
    connection: Connection,
    dataset_id: uuid.UUID,
    lot_from: str | None = None,
    lot_to: str | None = None,
    pattern: str | None = None,
) -> list[Any]:
    """The OUTPUT rows in the range that are not READY (few, normally), in lot order."""
    query = (
        select(ds.c.lot, ds.c.status, ds.c.held_status, ds.c.data_removed_at)
        .where(*_rows(dataset_id, lot_from, lot_to, pattern), ds.c.status != Status.READY.value)
        .order_by(ds.c.lot)
    )
    return list(connection.execute(query).all())


def ready_lots(
    connection: Connection, dataset_id: uuid.UUID, lot_from: str, lot_to: str, pattern: str
) -> list[str]:
    """The READY lot ids in ``[lot_from, lot_to]``, in lot order."""
    query = (
        select(ds.c.lot)
        .where(*_rows(dataset_id, lot_from, lot_to, pattern), ds.c.status == Status.READY.value)
        .order_by(ds.c.lot)
    )
    return list(connection.execute(query).scalars())


def last_output_lot(connection: Connection, dataset_id: uuid.UUID) -> str | None:
    """The greatest lot id the dataset has an OUTPUT row for: its lots' shape when nothing else says."""
    found: str | None = connection.execute(
        select(func.max(ds.c.lot)).where(*_rows(dataset_id, None, None, None))
    ).scalar()
    return found
