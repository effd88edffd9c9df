"""Raw OpenLineage events as received, stored once each."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import ColumnElement, Connection, and_, func, select, true

from lotline.domain.model import JsonObject, Page
from lotline.store.dialect import insert_ignoring_conflicts
from lotline.store.schema import lineage_events


def insert_event(
    connection: Connection,
    *,
    event_key: str,
    event_type: str | None,
    event_time: datetime,
    run_id: uuid.UUID | None,
    job_namespace: str | None,
    job_name: str | None,
    payload: JsonObject,
    now: datetime,
) -> bool:
    """Store the event unless the identical event is already stored; True if it is new."""
    before = connection.execute(
        select(lineage_events.c.id).where(lineage_events.c.event_key == event_key)
    ).first()
    if before is not None:
        return False
    insert_ignoring_conflicts(
        connection,
        lineage_events,
        [
            {
                "event_key": event_key,
                "event_type": event_type,
                "event_time": event_time,
                "run_id": run_id,
                "job_namespace": job_namespace,
                "job_name": job_name,
                "payload": payload,
                "received_at": now,
            }
        ],
        ["event_key"],
    )
    return True


def list_events(
    connection: Connection, before: datetime | None, after: datetime | None, limit: int, offset: int
) -> Page[JsonObject]:
    """Newest first by event time, as Marquez lists them."""
    conditions: list[ColumnElement[bool]] = []
    if before is not None:
        conditions.append(lineage_events.c.event_time <= before)
    if after is not None:
        conditions.append(lineage_events.c.event_time >= after)
    condition = and_(true(), *conditions)
    rows = connection.execute(
        select(lineage_events.c.payload)
        .where(condition)
        .order_by(lineage_events.c.event_time.desc(), lineage_events.c.id.desc())
        .limit(limit)
        .offset(offset)
    ).all()
    total = connection.execute(select(func.count()).select_from(lineage_events).where(condition)).scalar_one()
    return Page([dict(r.payload) for r in rows], total)
