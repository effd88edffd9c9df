"""The lot availability log: append (in the transaction that changes the lot) and read from a position.

Positions are ids from a sequence, and a sequence hands out ids at insert, not at commit: two
transactions could commit ids 8 and 7 in that order, and a reader that saw 8 would never see 7.
So every append first takes one exclusive lock (``APPEND_LOCK``, an advisory transaction lock on
PostgreSQL, the write lock itself on SQLite), held until commit: appends, which come last in
their transaction, commit in position order. The claim-finishing function of migration 0008
takes the same lock.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, Select, func, select

from lotline.domain.manifests import LotEvent, LotEventKind
from lotline.store.dialect import insert_rows, notify, try_exclusive_lock
from lotline.store.schema import datasets, jobs, lot_events, lot_job_outputs, namespaces

APPEND_LOCK = 7810735312196363877
#: NOTIFY channel on PostgreSQL: subscribers wake up on it instead of polling.
CHANNEL = "lotline_lots"


def append(
    connection: Connection,
    kind: LotEventKind,
    entries: Sequence[tuple[uuid.UUID, str, uuid.UUID | None, uuid.UUID | None, uuid.UUID | None]],
    now: datetime,
    *,
    attempt: int | None = None,
    reason: str | None = None,
) -> None:
    """Append (dataset, lot, manifest, version, run) events, each with ``attempt`` and ``reason``,
    in one statement (a backfill appends tens of thousands); call last in the transaction."""
    if not entries:
        return
    try_exclusive_lock(connection, APPEND_LOCK, wait=True)
    insert_rows(
        connection,
        lot_events,
        [
            {
                "dataset_id": d,
                "lot": lot,
                "kind": kind.value,
                "manifest_id": m,
                "version_id": v,
                "run_id": r,
                "created_at": now,
                "attempt": attempt,
                "reason": reason,
            }
            for d, lot, m, v, r in entries
        ],
    )
    notify(connection, CHANNEL)


def _selected() -> Select[Any]:
    return (
        select(
            lot_events,
            namespaces.c.name.label("namespace_name"),
            datasets.c.name.label("dataset_name"),
            jobs.c.name.label("job_name"),
        )
        .join(datasets, datasets.c.id == lot_events.c.dataset_id)
        .join(namespaces, namespaces.c.id == datasets.c.namespace_id)
        # The dataset's one producer (``lot_job_outputs.dataset_id`` is unique): the event's job.
        .outerjoin(lot_job_outputs, lot_job_outputs.c.dataset_id == lot_events.c.dataset_id)
        .outerjoin(jobs, jobs.c.id == lot_job_outputs.c.job_id)
    )


def _event(r: Row[Any]) -> LotEvent:
    return LotEvent(
        position=r.id,
        kind=LotEventKind(r.kind),
        namespace=r.namespace_name,
        dataset=r.dataset_name,
        lot=r.lot,
        manifest_id=r.manifest_id,
        version_id=r.version_id,
        run_id=r.run_id,
        created_at=r.created_at,
        job=r.job_name,
        attempt=r.attempt,
        reason=r.reason,
    )


def after(
    connection: Connection,
    position: int,
    limit: int,
    dataset_ids: Sequence[uuid.UUID] | None = None,
    namespace_id: uuid.UUID | None = None,
) -> list[LotEvent]:
    """Events after ``position`` in order, optionally of some datasets, or of one namespace, only."""
    query = _selected().where(lot_events.c.id > position).order_by(lot_events.c.id).limit(limit)
    if dataset_ids is not None:
        query = query.where(lot_events.c.dataset_id.in_(list(dataset_ids)))
    if namespace_id is not None:
        query = query.where(datasets.c.namespace_id == namespace_id)
    return [_event(r) for r in connection.execute(query)]


def of_lot(connection: Connection, dataset_id: uuid.UUID, lot: str, limit: int) -> list[LotEvent]:
    """One lot's events, newest first (through the ``(dataset_id, id)`` index)."""
    query = (
        _selected()
        .where(lot_events.c.dataset_id == dataset_id, lot_events.c.lot == lot)
        .order_by(lot_events.c.id.desc())
        .limit(limit)
    )
    return [_event(r) for r in connection.execute(query)]


def last_position(connection: Connection) -> int:
    found: int | None = connection.execute(select(func.max(lot_events.c.id))).scalar()
    return found or 0
