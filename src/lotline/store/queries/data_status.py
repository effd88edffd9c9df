"""The data-status table and the lot-job registry (SPEC §4).

Statuses imply locks (see ``lotline.domain.coordination``). Every statement that changes a claim
is fenced by what the caller believes the row to be, and returns whether it matched, so that a
lost race or a late worker changes nothing.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, and_, delete, exists, func, insert, select, update
from sqlalchemy.sql.elements import ColumnElement

from lotline.domain.coordination import CLAIMABLE_OUTPUT, INPUT_LOCKED, Role, Status
from lotline.store.dialect import locks_rows, upsert_insert
from lotline.store.schema import data_status, datasets, jobs, lot_job_inputs, lot_jobs, namespaces

ds = data_status
_CLAIMABLE = [s.value for s in CLAIMABLE_OUTPUT]
_INPUT_LOCKED = [s.value for s in INPUT_LOCKED]


# -- the registry -------------------------------------------------------------------------------
def lot_job(connection: Connection, job_id: uuid.UUID) -> Row[Any] | None:
    return connection.execute(select(lot_jobs).where(lot_jobs.c.job_id == job_id)).first()


def producer_of(connection: Connection, dataset_id: uuid.UUID) -> uuid.UUID | None:
    return connection.execute(
        select(lot_jobs.c.job_id).where(lot_jobs.c.output_dataset_id == dataset_id)
    ).scalar()


def job_inputs(connection: Connection, job_id: uuid.UUID) -> list[uuid.UUID]:
    """Input datasets of a job, by id: the order in which their rows are locked."""
    rows = connection.execute(
        select(lot_job_inputs.c.dataset_id)
        .where(lot_job_inputs.c.job_id == job_id)
        .order_by(lot_job_inputs.c.dataset_id)
    )
    return list(rows.scalars())


def upsert_lot_job(
    connection: Connection,
    job_id: uuid.UUID,
    output_dataset_id: uuid.UUID,
    inputs: Sequence[uuid.UUID],
    lot_mapping: str | None,
    now: datetime,
) -> None:
    """Register (or re-register) a job's output, inputs and lot mapping; keeps its hold flag."""
    changes = {"output_dataset_id": output_dataset_id, "lot_mapping": lot_mapping, "updated_at": now}
    statement = upsert_insert(connection, lot_jobs).values(
        job_id=job_id, created_at=now, held=False, **changes
    )
    connection.execute(statement.on_conflict_do_update(index_elements=["job_id"], set_=changes))
    connection.execute(delete(lot_job_inputs).where(lot_job_inputs.c.job_id == job_id))
    if inputs:
        connection.execute(insert(lot_job_inputs), [{"job_id": job_id, "dataset_id": d} for d in inputs])


def set_job_held(connection: Connection, job_id: uuid.UUID, held: bool, now: datetime) -> bool:
    """Hold or release a whole job; False if it already was in that state."""
    result = connection.execute(
        update(lot_jobs)
        .where(lot_jobs.c.job_id == job_id, lot_jobs.c.held == (not held))
        .values(held=held, updated_at=now)
    )
    return result.rowcount == 1


def job_label(connection: Connection, job_id: uuid.UUID) -> str:
    row = connection.execute(
        select(namespaces.c.name.label("namespace"), jobs.c.name)
        .join(namespaces, namespaces.c.id == jobs.c.namespace_id)
        .where(jobs.c.id == job_id)
    ).one()
    return f"{row.namespace}:{row.name}"


def consumers_of(connection: Connection, dataset_id: uuid.UUID) -> list[uuid.UUID]:
    rows = connection.execute(
        select(lot_job_inputs.c.job_id).where(lot_job_inputs.c.dataset_id == dataset_id)
    )
    return list(rows.scalars())


# -- finding work --------------------------------------------------------------------------------
_candidate = ds.alias("candidate")
_blocking = ds.alias("blocking")


@functools.cache
def _alias(name: str) -> Any:
    """Aliases of the status table are built once: building them per query costs more than the query."""
    return ds.alias(name)


def _ready(dataset_id: Any, lot: Any, index: int) -> ColumnElement[bool]:
    """An OUTPUT row of (dataset, lot) is READY: consumers may read it."""
    other = _alias(f"ready_{index}")
    return exists().where(
        other.c.dataset_id == dataset_id,
        other.c.lot == lot,
        other.c.role == Role.OUTPUT.value,
        other.c.status == Status.READY.value,
    )


def _output_blocked(output_dataset_id: uuid.UUID, lot: Any) -> ColumnElement[bool]:
    """The job's output lot has a row that is not ERROR/RESUBMIT: somebody holds or has produced it."""
    return exists().where(
        _blocking.c.dataset_id == output_dataset_id,
        _blocking.c.lot == lot,
        _blocking.c.role == Role.OUTPUT.value,
        _blocking.c.status.not_in(_CLAIMABLE),
    )


def _input_locked(job_id: uuid.UUID, dataset_id: Any, lot: Any, index: int = 0) -> ColumnElement[bool]:
    """The job's own read lock on an input lot (INPUT RUNNING/DONE)."""
    mine = _alias(f"mine_{index}")
    return exists().where(
        mine.c.dataset_id == dataset_id,
        mine.c.lot == lot,
        mine.c.job_id == job_id,
        mine.c.status.in_(_INPUT_LOCKED),
    )


def next_same_lot(
    connection: Connection,
    job_id: uuid.UUID,
    inputs: Sequence[uuid.UUID],
    output_dataset_id: uuid.UUID,
    skip: Sequence[str],
) -> str | None:
    """The first eligible lot of a job whose output lot = input lot (SPEC §4 "Eligible").

    On PostgreSQL the first input's READY row is locked ``FOR UPDATE SKIP LOCKED``, so concurrent
    workers of one job spread over different lots instead of queueing on the same one.
    """
    first = _candidate
    conditions = [
        first.c.dataset_id == inputs[0],
        first.c.role == Role.OUTPUT.value,
        first.c.status == Status.READY.value,
        ~_output_blocked(output_dataset_id, first.c.lot),
        *[~_input_locked(job_id, d, first.c.lot, i) for i, d in enumerate(inputs)],
        *[_ready(d, first.c.lot, i) for i, d in enumerate(inputs[1:])],
    ]
    if skip:
        conditions.append(first.c.lot.not_in(skip))
    query = select(first.c.lot).where(*conditions).order_by(first.c.lot).limit(1)
    if locks_rows(connection):
        query = query.with_for_update(of=first, skip_locked=True)
    return connection.execute(query).scalar()


def unconsumed_ready_lots(
    connection: Connection, job_id: uuid.UUID, dataset_id: uuid.UUID, limit: int
) -> list[str]:
    """READY lots of an input that the job holds no read lock on, in lot order (mapped jobs)."""
    query = (
        select(ds.c.lot)
        .where(
            ds.c.dataset_id == dataset_id,
            ds.c.role == Role.OUTPUT.value,
            ds.c.status == Status.READY.value,
            ~_input_locked(job_id, dataset_id, ds.c.lot),
        )
        .order_by(ds.c.lot)
        .limit(limit)
    )
    return list(connection.execute(query).scalars())


def output_statuses(connection: Connection, dataset_id: uuid.UUID, lots: Sequence[str]) -> dict[str, Status]:
    """Status of the OUTPUT row of each lot that has one."""
    rows = connection.execute(
        select(ds.c.lot, ds.c.status).where(
            ds.c.dataset_id == dataset_id, ds.c.role == Role.OUTPUT.value, ds.c.lot.in_(lots)
        )
    )
    return {r.lot: Status(r.status) for r in rows}


def input_locks(
    connection: Connection, job_id: uuid.UUID, dataset_id: uuid.UUID, lots: Sequence[str]
) -> list[str]:
    """The lots among ``lots`` on which the job holds its read lock."""
    rows = connection.execute(
        select(ds.c.lot).where(
            ds.c.dataset_id == dataset_id,
            ds.c.job_id == job_id,
            ds.c.lot.in_(lots),
            ds.c.status.in_(_INPUT_LOCKED),
        )
    )
    return list(rows.scalars())


def output_row(connection: Connection, dataset_id: uuid.UUID, lot: str) -> Row[Any] | None:
    """The OUTPUT row of (dataset, lot), locked until commit on PostgreSQL."""
    query = select(ds).where(ds.c.dataset_id == dataset_id, ds.c.lot == lot, ds.c.role == Role.OUTPUT.value)
    if locks_rows(connection):
        query = query.with_for_update()
    return connection.execute(query).first()


# -- claiming and finishing ---------------------------------------------------------------------
def take_output(
    connection: Connection,
    *,
    dataset_id: uuid.UUID,
    lot: str,
    job_id: uuid.UUID,
    owner: str,
    run_id: uuid.UUID,
    lease_expires_at: datetime,
    now: datetime,
) -> int | None:
    """Write OUTPUT RUNNING if the lot has no row or an ERROR/RESUBMIT one; returns the attempt.

    This conditional upsert is the mutex: whatever a concurrent worker saw, only one of them
    finds the row absent or claimable, the others get ``None`` and move on.
    """
    claim = {
        "status": Status.RUNNING.value,
        "owner": owner,
        "run_id": run_id,
        "lease_expires_at": lease_expires_at,
        "data_removed_at": None,
        "updated_at": now,
    }
    statement = upsert_insert(connection, ds).values(
        dataset_id=dataset_id,
        lot=lot,
        job_id=job_id,
        role=Role.OUTPUT.value,
        attempt=1,
        created_at=now,
        **claim,
    )
    statement = statement.on_conflict_do_update(
        index_elements=["dataset_id", "lot", "job_id"],
        set_={**claim, "attempt": ds.c.attempt + 1},
        where=and_(ds.c.role == Role.OUTPUT.value, ds.c.status.in_(_CLAIMABLE)),
    ).returning(ds.c.attempt)
    attempt: int | None = connection.execute(statement).scalar()
    return attempt


def take_inputs(
    connection: Connection,
    *,
    job_id: uuid.UUID,
    lots: Sequence[tuple[uuid.UUID, str]],
    owner: str,
    attempt: int,
    run_id: uuid.UUID,
    lease_expires_at: datetime,
    now: datetime,
) -> int:
    """Write INPUT RUNNING rows (the job-local read locks); a row exists only as ERROR (released)."""
    claim = {
        "status": Status.RUNNING.value,
        "owner": owner,
        "attempt": attempt,
        "run_id": run_id,
        "lease_expires_at": lease_expires_at,
        "updated_at": now,
    }
    rows = [
        {"dataset_id": d, "lot": lot, "job_id": job_id, "role": Role.INPUT.value, "created_at": now, **claim}
        for d, lot in lots
    ]
    statement = upsert_insert(connection, ds).values(rows)
    statement = statement.on_conflict_do_update(
        index_elements=["dataset_id", "lot", "job_id"],
        set_=claim,
        where=and_(ds.c.role == Role.INPUT.value, ds.c.status == Status.ERROR.value),
    ).returning(ds.c.lot)
    return len(connection.execute(statement).all())


def _live_claim(
    dataset_id: uuid.UUID, lot: str, job_id: uuid.UUID, owner: str, attempt: int, now: datetime
) -> ColumnElement[bool]:
    """The fence: the row is still this owner's attempt, still RUNNING, and its lease has not run out."""
    return and_(
        ds.c.dataset_id == dataset_id,
        ds.c.lot == lot,
        ds.c.job_id == job_id,
        ds.c.role == Role.OUTPUT.value,
        ds.c.owner == owner,
        ds.c.attempt == attempt,
        ds.c.status == Status.RUNNING.value,
        ds.c.lease_expires_at > now,
    )


def extend_lease(
    connection: Connection,
    *,
    dataset_id: uuid.UUID,
    lot: str,
    job_id: uuid.UUID,
    owner: str,
    attempt: int,
    run_id: uuid.UUID,
    lease_expires_at: datetime,
    now: datetime,
) -> bool:
    matched = connection.execute(
        update(ds)
        .where(_live_claim(dataset_id, lot, job_id, owner, attempt, now))
        .values(lease_expires_at=lease_expires_at, updated_at=now)
    ).rowcount
    if matched:
        connection.execute(
            update(ds)
            .where(ds.c.job_id == job_id, ds.c.role == Role.INPUT.value, ds.c.run_id == run_id)
            .values(lease_expires_at=lease_expires_at)
        )
    return matched == 1


def finish_output(
    connection: Connection,
    *,
    dataset_id: uuid.UUID,
    lot: str,
    job_id: uuid.UUID,
    owner: str,
    attempt: int,
    status: Status,
    now: datetime,
) -> bool:
    """Fenced end of a claim (READY or ERROR); False if the caller no longer holds a live claim."""
    matched = connection.execute(
        update(ds)
        .where(_live_claim(dataset_id, lot, job_id, owner, attempt, now))
        .values(status=status.value, lease_expires_at=None, updated_at=now)
    ).rowcount
    return matched == 1


def set_claim_inputs(
    connection: Connection, job_id: uuid.UUID, run_id: uuid.UUID, status: Status, now: datetime
) -> None:
    """Move every INPUT row of one claim (found by its run) to DONE or ERROR."""
    connection.execute(
        update(ds)
        .where(ds.c.job_id == job_id, ds.c.role == Role.INPUT.value, ds.c.run_id == run_id)
        .values(status=status.value, lease_expires_at=None, updated_at=now)
    )


def expired_claims(connection: Connection, now: datetime, limit: int) -> list[Row[Any]]:
    """RUNNING claims whose lease ran out; on PostgreSQL skipped if another reaper has them."""
    query = (
        select(ds)
        .where(
            ds.c.status == Status.RUNNING.value, ds.c.lease_expires_at < now, ds.c.role == Role.OUTPUT.value
        )
        .order_by(ds.c.lease_expires_at)
        .limit(limit)
    )
    if locks_rows(connection):
        query = query.with_for_update(skip_locked=True)
    return list(connection.execute(query).all())


def set_output_status(
    connection: Connection,
    dataset_id: uuid.UUID,
    lot: str,
    *,
    expected: Status,
    status: Status,
    now: datetime,
    held_status: Status | None = None,
) -> bool:
    """Move one OUTPUT row from ``expected`` to ``status`` (the operator's moves); False if it was not."""
    values: dict[str, object] = {"status": status.value, "updated_at": now, "lease_expires_at": None}
    values["held_status"] = held_status.value if held_status else None
    matched = connection.execute(
        update(ds)
        .where(
            ds.c.dataset_id == dataset_id,
            ds.c.lot == lot,
            ds.c.role == Role.OUTPUT.value,
            ds.c.status == expected.value,
        )
        .values(values)
    ).rowcount
    return matched == 1


def reopen_held(connection: Connection, dataset_id: uuid.UUID, lot: str, now: datetime) -> bool:
    """Invalidate a held lot that was READY: it will be RESUBMIT when released."""
    matched = connection.execute(
        update(ds)
        .where(
            ds.c.dataset_id == dataset_id,
            ds.c.lot == lot,
            ds.c.role == Role.OUTPUT.value,
            ds.c.status == Status.HOLD.value,
            ds.c.held_status == Status.READY.value,
        )
        .values(held_status=Status.RESUBMIT.value, updated_at=now)
    ).rowcount
    return matched == 1


def insert_hold(
    connection: Connection, dataset_id: uuid.UUID, lot: str, job_id: uuid.UUID, now: datetime
) -> None:
    """Hold a lot that has never been produced: an OUTPUT HOLD row that release removes again."""
    connection.execute(
        insert(ds).values(
            dataset_id=dataset_id,
            lot=lot,
            job_id=job_id,
            role=Role.OUTPUT.value,
            status=Status.HOLD.value,
            attempt=0,
            created_at=now,
            updated_at=now,
        )
    )


def delete_output(connection: Connection, dataset_id: uuid.UUID, lot: str) -> None:
    connection.execute(
        delete(ds).where(ds.c.dataset_id == dataset_id, ds.c.lot == lot, ds.c.role == Role.OUTPUT.value)
    )


def mark_data_removed(connection: Connection, dataset_id: uuid.UUID, lot: str, now: datetime) -> bool:
    matched = connection.execute(
        update(ds)
        .where(
            ds.c.dataset_id == dataset_id,
            ds.c.lot == lot,
            ds.c.role == Role.OUTPUT.value,
            ds.c.status == Status.ERROR.value,
            ds.c.data_removed_at.is_(None),
        )
        .values(data_removed_at=now, updated_at=now)
    ).rowcount
    return matched == 1


def consuming_claims(connection: Connection, dataset_id: uuid.UUID, lot: str) -> list[Any]:
    """Claims of other jobs that read (dataset, lot): their INPUT rows RUNNING or DONE."""
    rows = connection.execute(
        select(ds.c.job_id, ds.c.run_id, ds.c.status)
        .where(
            ds.c.dataset_id == dataset_id,
            ds.c.lot == lot,
            ds.c.role == Role.INPUT.value,
            ds.c.status.in_(_INPUT_LOCKED),
        )
        .order_by(ds.c.job_id)
    )
    return list(rows.all())


def output_of_claim(connection: Connection, job_id: uuid.UUID, run_id: uuid.UUID) -> Row[Any] | None:
    """The OUTPUT row a claim (found by its run) wrote."""
    return connection.execute(
        select(ds).where(ds.c.job_id == job_id, ds.c.role == Role.OUTPUT.value, ds.c.run_id == run_id)
    ).first()


# -- reporting -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class StatusFilter:
    """Which data-status rows a status view shows; ``None`` / empty means "any"."""

    namespace_id: uuid.UUID | None = None
    job_id: uuid.UUID | None = None
    dataset_id: uuid.UUID | None = None
    role: Role | None = None
    statuses: tuple[Status, ...] = ()
    lot_from: str | None = None
    lot_to: str | None = None


def _filtered(query: Any, where: StatusFilter) -> Any:
    if where.namespace_id is not None:
        query = query.where(datasets.c.namespace_id == where.namespace_id)
    if where.job_id is not None:
        query = query.where(ds.c.job_id == where.job_id)
    if where.dataset_id is not None:
        query = query.where(ds.c.dataset_id == where.dataset_id)
    if where.role is not None:
        query = query.where(ds.c.role == where.role.value)
    if where.statuses:
        query = query.where(ds.c.status.in_([s.value for s in where.statuses]))
    if where.lot_from is not None:
        query = query.where(ds.c.lot >= where.lot_from)
    if where.lot_to is not None:
        query = query.where(ds.c.lot <= where.lot_to)
    return query


def status_rows(
    connection: Connection, where: StatusFilter, limit: int | None = None, offset: int = 0
) -> list[Any]:
    """Rows of the data-status table with dataset and job names, ordered by dataset, lot, job."""
    query = (
        select(
            ds,
            namespaces.c.name.label("namespace"),
            datasets.c.name.label("dataset"),
            jobs.c.name.label("job"),
        )
        .join(datasets, datasets.c.id == ds.c.dataset_id)
        .join(namespaces, namespaces.c.id == datasets.c.namespace_id)
        .join(jobs, jobs.c.id == ds.c.job_id)
    )
    ordered = _filtered(query, where).order_by(datasets.c.name, ds.c.lot, jobs.c.name, ds.c.role)
    return list(connection.execute(ordered.limit(limit).offset(offset)).all())


def count_status_rows(connection: Connection, where: StatusFilter) -> int:
    query = select(func.count()).select_from(ds.join(datasets, datasets.c.id == ds.c.dataset_id))
    count: int = connection.execute(_filtered(query, where)).scalar_one()
    return count


def lot_row(connection: Connection, dataset_id: uuid.UUID, lot: str, job_id: uuid.UUID) -> Row[Any] | None:
    return connection.execute(
        select(ds).where(ds.c.dataset_id == dataset_id, ds.c.lot == lot, ds.c.job_id == job_id)
    ).first()
