"""The OpenLineage journal: raw events as received, stored once each, projected in id order."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Connection, and_, bindparam, func, select, true, update
from sqlalchemy.engine.interfaces import Dialect

from lotline.domain.model import JsonObject, Page
from lotline.domain.openlineage import JournalStatus
from lotline.store.dialect import (
    EncodedJson,
    insert_new_rows,
    new_rows_statement,
    notify,
    try_exclusive_lock,
)
from lotline.store.schema import lineage_events

#: Key of the advisory lock that lets one projector at a time apply the journal (PostgreSQL).
PROJECTOR_LOCK = 0x6C6F746C696E65  # "lotline"
#: Channel on which a process tells projectors that events are waiting (PostgreSQL).
CHANNEL = "lotline_lineage_events"
#: Most rows ``append`` sends as one statement (SQLAlchemy's "insertmanyvalues" page).
MAX_ROWS = 1000


@dataclass(frozen=True)
class JournalEntry:
    event_key: str
    event_type: str | None
    event_time: datetime
    run_id: uuid.UUID | None
    job_namespace: str | None
    job_name: str | None
    payload: JsonObject
    #: ``payload`` as JSON text, encoded once for the event key (``canonical_json``): PostgreSQL
    #: stores this text, so that a group's rows need not encode the payloads again.
    payload_json: str


@dataclass(frozen=True)
class PendingEvent:
    id: int
    payload: JsonObject


def append(
    connection: Connection, entries: Sequence[JournalEntry], now: datetime, *, applied: bool = False
) -> set[str]:
    """Journal the events in one statement, in the order given; returns the keys of those that
    were new (an event identical to one already journaled, or to an earlier one of ``entries``,
    is stored once). ``applied``: stored as already applied, never projected (lotline's own runs,
    which it recorded directly)."""
    rows = _rows(entries, now)
    if applied:
        rows = [{**row, "applied_at": now} for row in rows]
    return set(insert_new_rows(connection, lineage_events, rows, _KEYS, "event_key"))


def append_statement(dialect: Dialect, entries: Sequence[JournalEntry], now: datetime) -> tuple[Any, Any]:
    """``append``'s statement and parameters, for a connection outside SQLAlchemy (the server's
    journal writer on PostgreSQL): it returns the ``event_key`` of each new event."""
    return new_rows_statement(dialect, lineage_events, _rows(entries, now), _KEYS, "event_key")


_KEYS = ("event_key",)


def _rows(entries: Sequence[JournalEntry], now: datetime) -> list[dict[str, object]]:
    return [
        {
            "event_key": e.event_key,
            "event_type": e.event_type,
            "event_time": e.event_time,
            "run_id": e.run_id,
            "job_namespace": e.job_namespace,
            "job_name": e.job_name,
            "payload": EncodedJson(e.payload, e.payload_json),
            "received_at": now,
        }
        for e in entries
    ]


def _pending() -> ColumnElement[bool]:
    return lineage_events.c.applied_at.is_(None)


def lock_projection(connection: Connection, *, wait: bool) -> bool:
    """The projector's lock for this transaction; False if another holds it and ``wait`` is False."""
    return try_exclusive_lock(connection, PROJECTOR_LOCK, wait=wait)


def wake_projectors(connection: Connection) -> None:
    notify(connection, CHANNEL)


_PENDING = (
    select(lineage_events.c.id, lineage_events.c.payload)
    .where(_pending(), lineage_events.c.id > bindparam("b_after"))
    .order_by(lineage_events.c.id)
    .limit(bindparam("b_limit"))
)
_PENDING_UPTO = _PENDING.where(lineage_events.c.id <= bindparam("b_upto"))
_BACKLOG = select(func.count(), func.max(lineage_events.c.id)).where(_pending())


def pending(
    connection: Connection, limit: int, upto: int | None = None, after: int = 0
) -> list[PendingEvent]:
    """The oldest events not projected yet, in journal order (those after id ``after``, up to id
    ``upto``)."""
    if upto is None:
        rows = connection.execute(_PENDING, {"b_limit": limit, "b_after": after})
    else:
        rows = connection.execute(_PENDING_UPTO, {"b_limit": limit, "b_after": after, "b_upto": upto})
    return [PendingEvent(id_, dict(payload)) for id_, payload in rows]


def backlog(connection: Connection) -> tuple[int, int | None]:
    """How many events are not projected yet, and the newest one's id (None when none is): one
    look at the small partial index of pending events, cheap enough to ask before every read."""
    count, newest = connection.execute(_BACKLOG).one()
    return int(count), newest


def mark_applied(connection: Connection, ids: Sequence[int], now: datetime) -> None:
    """Fenced: every event must still be pending, else another projector applied it too."""
    if not ids:
        return
    result = connection.execute(
        update(lineage_events).where(lineage_events.c.id.in_(ids), _pending()).values(applied_at=now)
    )
    if result.rowcount != len(ids):
        raise RuntimeError(f"{len(ids) - result.rowcount} journaled events were projected twice")


def mark_failed(connection: Connection, event_id: int, error: str, now: datetime) -> None:
    result = connection.execute(
        update(lineage_events)
        .where(lineage_events.c.id == event_id, _pending())
        .values(applied_at=now, projection_error=error)
    )
    if result.rowcount != 1:
        raise RuntimeError(f"journaled event {event_id} was projected twice")


def status(connection: Connection) -> JournalStatus:
    pending_count = connection.execute(select(func.count()).where(_pending())).scalar_one()
    failed = connection.execute(
        select(func.count()).where(lineage_events.c.projection_error.is_not(None))
    ).scalar_one()
    last_applied = connection.execute(
        select(func.max(lineage_events.c.id)).where(lineage_events.c.applied_at.is_not(None))
    ).scalar()
    return JournalStatus(pending_count, failed, last_applied)


def failures(connection: Connection, limit: int) -> list[tuple[int, str]]:
    """The most recent events that could not be projected, with the reason."""
    rows = connection.execute(
        select(lineage_events.c.id, lineage_events.c.projection_error)
        .where(lineage_events.c.projection_error.is_not(None))
        .order_by(lineage_events.c.id.desc())
        .limit(limit)
    ).all()
    return [(r.id, r.projection_error) for r in rows]


_NEWEST_FIRST = (lineage_events.c.event_time.desc(), lineage_events.c.id.desc())
_OLDEST_FIRST = (lineage_events.c.event_time, lineage_events.c.id)


@dataclass(frozen=True)
class EventFilter:
    """Which journaled events a listing shows (None: any)."""

    before: datetime | None = None
    after: datetime | None = None
    job_namespace: str | None = None
    job_name: str | None = None
    event_type: str | None = None
    run_id: uuid.UUID | None = None
    #: RunEvents only (the journal keeps no event type for DatasetEvents and JobEvents).
    run_events_only: bool = False


def list_events(
    connection: Connection, where: EventFilter, limit: int, offset: int, *, oldest_first: bool = False
) -> Page[JsonObject]:
    """Newest first by event time (or oldest first), as Marquez lists them (projected or not: the
    journal is the record); ``totalCount`` counts what the filter lets through."""
    conditions: list[ColumnElement[bool]] = []
    if where.run_events_only:
        conditions.append(lineage_events.c.event_type.is_not(None))
    if where.before is not None:
        conditions.append(lineage_events.c.event_time <= where.before)
    if where.after is not None:
        conditions.append(lineage_events.c.event_time >= where.after)
    for column, value in (
        (lineage_events.c.job_namespace, where.job_namespace),
        (lineage_events.c.job_name, where.job_name),
        (lineage_events.c.event_type, where.event_type),
        (lineage_events.c.run_id, where.run_id),
    ):
        if value is not None:
            conditions.append(column == value)
    condition = and_(true(), *conditions)
    rows = connection.execute(
        select(lineage_events.c.payload)
        .where(condition)
        .order_by(*_OLDEST_FIRST if oldest_first else _NEWEST_FIRST)
        .limit(limit)
        .offset(offset)
    ).all()
    total = connection.execute(select(func.count()).select_from(lineage_events).where(condition)).scalar_one()
    return Page([dict(r.payload) for r in rows], total)
