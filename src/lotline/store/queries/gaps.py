"""Reads of gap reports: a dataset's OUTPUT rows over a lot-id range, aggregated where they can be.

Every statement filters ``dataset_id, role = 'OUTPUT'`` and a lot-id range, and so reads the index
(dataset_id, role, status, lot) of data_status; READY rows, the bulk, are never returned one by one
for a report: only where their runs break (``ready_breaks``). ``pattern`` (a LIKE pattern
such as ``________PT5M___``) keeps lots of another interval out; None reads named lots too.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Integer, Text, cast, func, or_, select
from sqlalchemy.sql.elements import ColumnElement

from lotline.domain.coordination import OUTPUT_STATUSES, Role, Status
from lotline.domain.manifests import ManifestState
from lotline.domain.versions import VersionState
from lotline.store.schema import data_status as ds
from lotline.store.schema import dataset_versions, manifests

#: Spelled out, not ``!= 'READY'``: an IN list is a few short ranges of the status index.
_NOT_READY = [s.value for s in OUTPUT_STATUSES if s is not Status.READY]


@dataclass(frozen=True, slots=True)
class ReadyBreak:
    """A READY lot where a run of consecutive READY lots may start or end, with the READY lots
    before (``prv``) and after (``nxt``) it."""

    lot: str
    prv: str | None
    nxt: str | None


@dataclass(frozen=True, slots=True)
class UnreadyLot:
    """An OUTPUT row that is not READY: its status, its claims so far and the run of the last one."""

    lot: str
    status: str
    attempt: int
    run_id: uuid.UUID | None


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


def ready_breaks(
    connection: Connection, dataset_id: uuid.UUID, lot_from: str, lot_to: str, pattern: str, ordinal_at: int
) -> list[ReadyBreak]:
    """The READY interval lots in ``[lot_from, lot_to]`` where a run of consecutive READY lots may
    start or end: ``lot`` with the READY lots before (``prv``) and after (``nxt``) it, for the first
    and last lot, each day's last lot, and each lot followed by a gap (``ordinal_at``: 1-based
    position of the ordinal in the id). The window runs in the index's lot order, so the database
    reads the READY rows once and returns a few hundred rows for a year."""
    prv = func.lag(ds.c.lot).over(order_by=ds.c.lot).label("prv")
    nxt = func.lead(ds.c.lot).over(order_by=ds.c.lot).label("nxt")
    ready = (
        select(ds.c.lot, prv, nxt)
        .where(*_rows(dataset_id, lot_from, lot_to, pattern), ds.c.status == Status.READY.value)
        .subquery()
    )

    def ordinal(lot: Any) -> Any:
        return cast(func.substr(lot, ordinal_at), Integer)

    query = (
        select(ready.c.lot, ready.c.prv, ready.c.nxt)
        .where(
            or_(
                ready.c.prv.is_(None),
                ready.c.nxt.is_(None),
                func.substr(ready.c.nxt, 1, 8) != func.substr(ready.c.lot, 1, 8),
                ordinal(ready.c.nxt) != ordinal(ready.c.lot) + 1,
            )
        )
        .order_by(ready.c.lot)
    )
    return [ReadyBreak(*row) for row in connection.execute(query)]


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
) -> list[UnreadyLot]:
    """The OUTPUT rows in the range that are not READY (few, normally), in lot order."""
    query = (
        select(ds.c.lot, ds.c.status, ds.c.attempt, ds.c.run_id)
        .where(*_rows(dataset_id, lot_from, lot_to, pattern), ds.c.status.in_(_NOT_READY))
        .order_by(ds.c.lot)
    )
    return [UnreadyLot(*row) for row in connection.execute(query)]


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


def output_lot_bounds(connection: Connection, dataset_id: uuid.UUID, pattern: str) -> tuple[str, str] | None:
    """The smallest and greatest lot ids of one interval the dataset has OUTPUT rows for."""
    low, high = connection.execute(
        select(func.min(ds.c.lot), func.max(ds.c.lot)).where(*_rows(dataset_id, None, None, pattern))
    ).one()
    return None if low is None else (low, high)


def checked_versions(
    connection: Connection, dataset_id: uuid.UUID, lot_from: str, lot_to: str, pattern: str
) -> list[tuple[str, Any]]:
    """(lot, facets) of the current versions in ``[lot_from, lot_to]`` that carry check results
    (``dataQualityAssertions``): the lot grid marks those published with warnings."""
    query = (
        select(dataset_versions.c.lot, dataset_versions.c.facets)
        .where(
            dataset_versions.c.dataset_id == dataset_id,
            dataset_versions.c.lot >= lot_from,
            dataset_versions.c.lot <= lot_to,
            dataset_versions.c.lot.like(pattern),
            dataset_versions.c.state == VersionState.CURRENT.value,
            cast(dataset_versions.c.facets, Text).like("%dataQualityAssertions%"),
        )
        .order_by(dataset_versions.c.lot)
    )
    return [(row.lot, row.facets) for row in connection.execute(query)]


def empty_lots(
    connection: Connection, dataset_id: uuid.UUID, lot_from: str, lot_to: str, pattern: str
) -> list[str]:
    """The lots in ``[lot_from, lot_to]`` whose current version's manifest is empty (the lot grid
    tells them apart from complete ones); through the manifests' (dataset_id, lot, state) index."""
    query = (
        select(manifests.c.lot)
        .join(dataset_versions, dataset_versions.c.id == manifests.c.version_id)
        .where(
            manifests.c.dataset_id == dataset_id,
            manifests.c.lot >= lot_from,
            manifests.c.lot <= lot_to,
            manifests.c.lot.like(pattern),
            manifests.c.state == ManifestState.EMPTY.value,
            dataset_versions.c.state == VersionState.CURRENT.value,
        )
        .order_by(manifests.c.lot)
    )
    return list(connection.execute(query).scalars())
