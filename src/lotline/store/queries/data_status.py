"""The data-status table and the lot-job registry (SPEC §4).

Statuses imply locks (see ``lotline.domain.coordination``). Every statement that changes a claim
is fenced by what the caller believes the row to be, and returns whether it matched, so that a
lost race or a late worker changes nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Connection,
    Row,
    and_,
    bindparam,
    case,
    delete,
    func,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.sql.elements import ColumnElement

from lotline.domain.coordination import CLAIMABLE_OUTPUT, INPUT_LOCKED, Role, Status
from lotline.store.dialect import locks_rows, per_dialect, upsert_insert
from lotline.store.schema import data_status, datasets, jobs, lot_job_inputs, lot_jobs, namespaces

ds = data_status
_CLAIMABLE = [s.value for s in CLAIMABLE_OUTPUT]
_INPUT_LOCKED = [s.value for s in INPUT_LOCKED]


# -- the registry -------------------------------------------------------------------------------
def lot_job(connection: Connection, job_id: uuid.UUID) -> Row[Any] | None:
    return connection.execute(select(lot_jobs).where(lot_jobs.c.job_id == job_id)).first()


_REGISTERED = (
    select(
        jobs.c.id,
        jobs.c.current_version_id,
        lot_jobs.c.job_id.label("registered"),
        lot_jobs.c.held,
        lot_jobs.c.updated_at,
        lot_jobs.c.output_dataset_id,
        lot_jobs.c.lot_mapping,
    )
    .join(namespaces, namespaces.c.id == jobs.c.namespace_id)
    .outerjoin(lot_jobs, lot_jobs.c.job_id == jobs.c.id)
    .where(namespaces.c.name == bindparam("b_namespace"), jobs.c.name == bindparam("b_job"))
)


def registered_job(connection: Connection, namespace: str, job: str) -> Any:
    """A job by name with its registration (``registered`` is None if it has none) and its current
    version: what a worker needs per claim, in one read. ``updated_at`` changes with the registration."""
    return connection.execute(_REGISTERED, {"b_namespace": namespace, "b_job": job}).first()


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


# -- finding work --------------------------------------------------------------------------------
_CLAIM_ROWS = select(
    ds.c.dataset_id, ds.c.lot, ds.c.job_id, ds.c.role, ds.c.status, ds.c.attempt, ds.c.owner
).where(
    ds.c.dataset_id.in_(bindparam("b_datasets", expanding=True)),
    ds.c.lot.in_(bindparam("b_lots", expanding=True)),
    or_(ds.c.role == Role.OUTPUT.value, ds.c.job_id == bindparam("b_job")),
)


def claim_rows(
    connection: Connection, job_id: uuid.UUID, dataset_ids: Sequence[uuid.UUID], lots: Sequence[str]
) -> list[Any]:
    """Everything eligibility looks at, in one read: the OUTPUT rows of ``dataset_ids`` x ``lots``
    (the inputs' producers and the job's own output) and the job's own INPUT rows on them."""
    params = {"b_datasets": list(dataset_ids), "b_lots": list(lots), "b_job": job_id}
    return list(connection.execute(_CLAIM_ROWS, params).all())


def output_row(connection: Connection, dataset_id: uuid.UUID, lot: str) -> Row[Any] | None:
    """The OUTPUT row of (dataset, lot), locked until commit on PostgreSQL."""
    query = select(ds).where(ds.c.dataset_id == dataset_id, ds.c.lot == lot, ds.c.role == Role.OUTPUT.value)
    if locks_rows(connection):
        query = query.with_for_update()
    return connection.execute(query).first()


# -- claiming and finishing ---------------------------------------------------------------------
@per_dialect
def _take(connection: Connection) -> Any:
    statement = upsert_insert(connection, ds)
    new = statement.excluded
    # Literal comparisons, not IN: an IN list becomes an "expanding" parameter, which executemany refuses.
    claimable = or_(
        and_(
            ds.c.role == Role.OUTPUT.value,
            or_(*[ds.c.status == status for status in _CLAIMABLE]),
            ds.c.attempt == new.attempt - 1,
        ),
        and_(ds.c.role == Role.INPUT.value, ds.c.status == Status.ERROR.value),
    )
    changes = ("status", "owner", "attempt", "run_id", "lease_expires_at", "data_removed_at", "updated_at")
    return statement.on_conflict_do_update(
        index_elements=["dataset_id", "lot", "job_id"],
        set_={column: getattr(new, column) for column in changes},
        where=claimable,
    ).returning(ds.c.role)


def take_claim(
    connection: Connection,
    *,
    job_id: uuid.UUID,
    output: tuple[uuid.UUID, str],
    inputs: Sequence[tuple[uuid.UUID, str]],
    attempt: int,
    owner: str,
    run_id: uuid.UUID,
    lease_expires_at: datetime,
    now: datetime,
) -> bool:
    """Write OUTPUT RUNNING and the INPUT RUNNING read locks of one claim in one statement.

    This conditional upsert is the mutex: an OUTPUT row is taken only if it is absent, or ERROR /
    RESUBMIT at ``attempt - 1`` (what the caller saw); an INPUT row only if absent or ERROR
    (released). False, with some rows perhaps written, if any row was not takeable: the caller
    must roll back.
    """
    claim = {
        "job_id": job_id,
        "status": Status.RUNNING.value,
        "owner": owner,
        "attempt": attempt,
        "run_id": run_id,
        "lease_expires_at": lease_expires_at,
        "data_removed_at": None,
        "created_at": now,
        "updated_at": now,
    }
    rows = [{"dataset_id": output[0], "lot": output[1], "role": Role.OUTPUT.value, **claim}]
    rows += [{"dataset_id": d, "lot": lot, "role": Role.INPUT.value, **claim} for d, lot in inputs]
    taken = connection.execute(_take(connection), rows).all()
    return len(taken) == len(rows)


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


_FINISH = (
    update(ds)
    .where(
        ds.c.job_id == bindparam("b_job"),
        ds.c.run_id == bindparam("b_run"),
        or_(
            ds.c.role == Role.INPUT.value,
            and_(
                ds.c.owner == bindparam("b_owner"),
                ds.c.attempt == bindparam("b_attempt"),
                ds.c.status == Status.RUNNING.value,
                ds.c.lease_expires_at > bindparam("b_now"),
            ),
        ),
    )
    .values(
        status=case((ds.c.role == Role.OUTPUT.value, bindparam("b_output")), else_=bindparam("b_input")),
        lease_expires_at=None,
        updated_at=bindparam("b_now"),
    )
    .returning(ds.c.role)
)


def finish_claim(
    connection: Connection,
    *,
    job_id: uuid.UUID,
    run_id: uuid.UUID,
    owner: str,
    attempt: int,
    output: Status,
    inputs: Status,
    now: datetime,
) -> bool:
    """Fenced end of a claim: its OUTPUT row to ``output`` and its INPUT rows to ``inputs``.

    False if the OUTPUT row is no longer this owner's live attempt (lease run out, reaped, failed,
    invalidated, taken over); its INPUT rows may then have been written, so the caller must roll back.
    """
    roles = connection.execute(
        _FINISH,
        {
            "b_job": job_id,
            "b_run": run_id,
            "b_owner": owner,
            "b_attempt": attempt,
            "b_now": now,
            "b_output": output.value,
            "b_input": inputs.value,
        },
    ).scalars()
    return Role.OUTPUT.value in set(roles)


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


_COUNTS = (
    select(ds.c.status, func.count())
    .where(ds.c.job_id == bindparam("b_job"), ds.c.role == Role.OUTPUT.value)
    .group_by(ds.c.status)
)


def output_counts(connection: Connection, job_id: uuid.UUID) -> dict[str, int]:
    """How many of the job's output lots are in each status."""
    return {status: count for status, count in connection.execute(_COUNTS, {"b_job": job_id}).all()}


def lot_row(connection: Connection, dataset_id: uuid.UUID, lot: str, job_id: uuid.UUID) -> Row[Any] | None:
    return connection.execute(
        select(ds).where(ds.c.dataset_id == dataset_id, ds.c.lot == lot, ds.c.job_id == job_id)
    ).first()
