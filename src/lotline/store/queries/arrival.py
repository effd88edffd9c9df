"""Arrival policies and the arrival pass's work list (services/arrival.py)."""

from __future__ import annotations

import datetime
import functools
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, select, update

from lotline.domain.arrival import Absence, ArrivalPolicy
from lotline.store.dialect import in_values, try_exclusive_lock, upsert_returning
from lotline.store.schema import arrival_policies, data_status

#: Datasets per statement (one array parameter on PostgreSQL; SQLite binds each).
_IDS_PER_STATEMENT = 5_000
#: The arrival pass's lock: one pass at a time moves the watches and pushes OVERDUE events.
PASS_LOCK = 7810735312196363878


@dataclass(frozen=True, slots=True)
class Watch:
    """A source dataset's policy as stored, with how far the arrival pass has noticed its lots."""

    dataset_id: uuid.UUID
    interval: str
    policy: ArrivalPolicy
    declared_in: str
    noticed_through: datetime.datetime | None


@functools.cache
def _policy(seconds: int, absent: str) -> ArrivalPolicy:
    return ArrivalPolicy(datetime.timedelta(seconds=seconds), Absence(absent))


_COLUMNS = (
    arrival_policies.c.dataset_id,
    arrival_policies.c.lot_interval,
    arrival_policies.c.late_after_seconds,
    arrival_policies.c.absent,
    arrival_policies.c.declared_in,
    arrival_policies.c.noticed_through,
)


def declare(
    connection: Connection,
    dataset_id: uuid.UUID,
    interval: str,
    policy: ArrivalPolicy,
    declared_in: str,
    start: datetime.datetime,
    now: datetime.datetime,
) -> None:
    """Store the dataset's policy; a new watch starts at ``start`` (it has noticed every lot that
    ends before), a watch that exists keeps how far it has noticed."""
    upsert_returning(
        connection,
        arrival_policies,
        {
            "dataset_id": dataset_id,
            "lot_interval": interval,
            "late_after_seconds": int(policy.late_after.total_seconds()),
            "absent": policy.absent.value,
            "declared_in": declared_in,
            "noticed_through": start,
            "created_at": now,
            "updated_at": now,
        },
        ("dataset_id",),
        ("lot_interval", "late_after_seconds", "absent", "declared_in", "updated_at"),
        ("dataset_id",),
    )


def lock_pass(connection: Connection) -> None:
    """Hold the pass's lock until the transaction ends (SQLite's write lock already is one)."""
    try_exclusive_lock(connection, PASS_LOCK, wait=True)


def watches(connection: Connection, dataset_ids: Sequence[uuid.UUID] | None = None) -> list[Watch]:
    """Every stored policy (the pass's work list), or those of ``dataset_ids``."""
    query = select(*_COLUMNS).order_by(arrival_policies.c.dataset_id)
    if dataset_ids is not None:
        query = query.where(arrival_policies.c.dataset_id.in_(list(dataset_ids)))
    return [Watch(r[0], r[1], _policy(r[2], r[3]), r[4], r[5]) for r in connection.execute(query).all()]


def delivered(
    connection: Connection, dataset_ids: Sequence[uuid.UUID], lot_from: str, lot_to: str
) -> set[tuple[uuid.UUID, str]]:
    """The (dataset, lot) pairs of ``[lot_from, lot_to]`` of those datasets that have an OUTPUT row:
    delivered (or being delivered, or declared). A pass's due lots share their range."""
    found: set[tuple[uuid.UUID, str]] = set()
    for at in range(0, len(dataset_ids), _IDS_PER_STATEMENT):
        rows = connection.execute(
            select(data_status.c.dataset_id, data_status.c.lot).where(
                in_values(connection, data_status.c.dataset_id, dataset_ids[at : at + _IDS_PER_STATEMENT]),
                data_status.c.role == "OUTPUT",
                data_status.c.lot >= lot_from,
                data_status.c.lot <= lot_to,
            )
        )
        found.update((r[0], r[1]) for r in rows.all())
    return found


def move(
    connection: Connection,
    dataset_ids: Sequence[uuid.UUID],
    since: datetime.datetime | None,
    through: datetime.datetime,
) -> set[uuid.UUID]:
    """Move the watches of ``dataset_ids`` that still stand at ``since`` (None: not started) to
    ``through``: the ones moved, which no other pass moved first (the pass holds its lock)."""
    moved: set[uuid.UUID] = set()
    standing = (
        arrival_policies.c.noticed_through.is_(None)
        if since is None
        else arrival_policies.c.noticed_through == since
    )
    for at in range(0, len(dataset_ids), _IDS_PER_STATEMENT):
        chunk = dataset_ids[at : at + _IDS_PER_STATEMENT]
        rows = connection.execute(
            update(arrival_policies)
            .where(in_values(connection, arrival_policies.c.dataset_id, chunk), standing)
            .values(noticed_through=through)
            .returning(arrival_policies.c.dataset_id)
        )
        moved.update(rows.scalars().all())
    return moved
