"""Arrival policies and the arrival pass's work list (services/arrival.py)."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, bindparam, select, tuple_, update

from lotline.domain.arrival import Absence, ArrivalPolicy
from lotline.store.dialect import try_exclusive_lock, upsert_returning
from lotline.store.schema import arrival_policies, data_status

#: (dataset, lot) pairs looked up per statement (two bind parameters each).
_PAIRS_PER_STATEMENT = 5_000
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


def _watch(row: Sequence[object]) -> Watch:
    dataset_id, interval, seconds, absent, declared_in, noticed = row
    policy = ArrivalPolicy(datetime.timedelta(seconds=int(seconds)), Absence(str(absent)))  # type: ignore[call-overload]
    return Watch(dataset_id, str(interval), policy, str(declared_in), noticed)  # type: ignore[arg-type]


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
    now: datetime.datetime,
) -> None:
    """Store the dataset's policy; a watch that exists keeps how far it has noticed (a new one has
    not started: the arrival pass starts it)."""
    upsert_returning(
        connection,
        arrival_policies,
        {
            "dataset_id": dataset_id,
            "lot_interval": interval,
            "late_after_seconds": int(policy.late_after.total_seconds()),
            "absent": policy.absent.value,
            "declared_in": declared_in,
            "noticed_through": None,
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
    return [_watch(tuple(r)) for r in connection.execute(query)]


def delivered(connection: Connection, pairs: Sequence[tuple[uuid.UUID, str]]) -> set[tuple[uuid.UUID, str]]:
    """The (dataset, lot) pairs that have an OUTPUT row: delivered (or being delivered, or declared)."""
    found: set[tuple[uuid.UUID, str]] = set()
    for at in range(0, len(pairs), _PAIRS_PER_STATEMENT):
        chunk = pairs[at : at + _PAIRS_PER_STATEMENT]
        rows = connection.execute(
            select(data_status.c.dataset_id, data_status.c.lot).where(
                data_status.c.role == "OUTPUT",
                tuple_(data_status.c.dataset_id, data_status.c.lot).in_(chunk),
            )
        )
        found.update((r[0], r[1]) for r in rows)
    return found


_NOTICED = (
    update(arrival_policies)
    .where(arrival_policies.c.dataset_id == bindparam("b_dataset_id"))
    .values(noticed_through=bindparam("b_through"))
)


def set_noticed(connection: Connection, noticed: Sequence[tuple[uuid.UUID, datetime.datetime]]) -> None:
    """How far the pass has noticed each dataset's lots (one executemany)."""
    if noticed:
        connection.execute(_NOTICED, [{"b_dataset_id": d, "b_through": t} for d, t in noticed])
