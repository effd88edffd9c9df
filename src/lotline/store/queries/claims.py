"""Rows of the data-status table (SPEC §4): taking, leasing and finishing claims, the reaper's and
the operator's moves.

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

from sqlalchemy import Connection, and_, bindparam, case, delete, exists, insert, or_, select, tuple_, update

from lotline.domain.coordination import CLAIMABLE_OUTPUT, INPUT_LOCKED, Role, Status
from lotline.domain.errors import DatabaseError
from lotline.store.dialect import in_values, locks_rows, per_dialect, upsert_insert
from lotline.store.schema import data_status, jobs, namespaces, runs

ds = data_status


@dataclass(frozen=True, slots=True)
class StatusRow:
    """One data-status row as stored: a job's part in (dataset, lot), in its role. The fields are
    the table's columns in their order (``StatusRow(*row)`` of ``select(data_status)``)."""

    dataset_id: uuid.UUID
    lot: str
    job_id: uuid.UUID
    role: str
    status: str
    held_status: str | None
    attempt: int
    owner: str | None
    lease_expires_at: datetime | None
    run_id: uuid.UUID | None
    data_removed_at: datetime | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class OwningClaim:
    """The claim that owns a run (its OUTPUT row RUNNING, its lease run out or not): its job (by
    name), output lot, owner, attempt and lease, and its own run (the run asked about, or the
    parent of that child run)."""

    namespace: str
    job: str
    lot: str
    owner: str
    attempt: int
    lease_expires_at: datetime
    run_id: uuid.UUID


@dataclass(frozen=True, slots=True)
class ConsumingClaim:
    """Another job's claim that reads a lot: its INPUT row's job, run and status."""

    job_id: uuid.UUID
    run_id: uuid.UUID
    status: str


def _status_row(row: Any) -> StatusRow | None:
    return None if row is None else StatusRow(*row)


_CLAIMABLE = [s.value for s in CLAIMABLE_OUTPUT]
_INPUT_LOCKED = [s.value for s in INPUT_LOCKED]
_OUTPUT = ds.c.role == Role.OUTPUT.value
_INPUT = ds.c.role == Role.INPUT.value
#: One (dataset, lot)'s OUTPUT row.
_THE_OUTPUT = and_(ds.c.dataset_id == bindparam("b_dataset"), ds.c.lot == bindparam("b_lot"), _OUTPUT)
#: The INPUT rows of one claim, found by its run.
_CLAIM_INPUTS = and_(ds.c.job_id == bindparam("b_job"), _INPUT, ds.c.run_id == bindparam("b_run"))


# -- finding work --------------------------------------------------------------------------------
_ELIGIBILITY_ROWS = select(
    ds.c.dataset_id, ds.c.lot, ds.c.job_id, ds.c.role, ds.c.status, ds.c.attempt, ds.c.owner
).where(
    ds.c.dataset_id.in_(bindparam("b_datasets", expanding=True)),
    ds.c.lot.in_(bindparam("b_lots", expanding=True)),
    or_(_OUTPUT, ds.c.job_id == bindparam("b_job")),
)


def claim_rows(
    connection: Connection, job_id: uuid.UUID, dataset_ids: Sequence[uuid.UUID], lots: Sequence[str]
) -> list[Any]:
    """Everything eligibility looks at, in one read: the OUTPUT rows of ``dataset_ids`` x ``lots``
    (the inputs' producers and the job's own output) and the job's own INPUT rows on them."""
    params = {"b_datasets": list(dataset_ids), "b_lots": list(lots), "b_job": job_id}
    return list(connection.execute(_ELIGIBILITY_ROWS, params).all())


@per_dialect
def _locked_output_row(connection: Connection) -> Any:
    query = select(ds).where(_THE_OUTPUT)
    return query.with_for_update() if locks_rows(connection) else query


def output_row(connection: Connection, dataset_id: uuid.UUID, lot: str) -> StatusRow | None:
    """The OUTPUT row of (dataset, lot), locked until commit on PostgreSQL."""
    params = {"b_dataset": dataset_id, "b_lot": lot}
    return _status_row(connection.execute(_locked_output_row(connection), params).first())


# -- claiming and finishing ---------------------------------------------------------------------
@per_dialect
def _take(connection: Connection) -> Any:
    statement = upsert_insert(connection, ds)
    new = statement.excluded
    # Literal comparisons, not IN: an IN list becomes an "expanding" parameter, which executemany refuses.
    claimable = or_(
        and_(
            _OUTPUT, or_(*[ds.c.status == status for status in _CLAIMABLE]), ds.c.attempt == new.attempt - 1
        ),
        and_(_INPUT, ds.c.status == Status.ERROR.value),
    )
    changes = ("status", "owner", "attempt", "run_id", "lease_expires_at", "data_removed_at", "updated_at")
    return statement.on_conflict_do_update(
        index_elements=["dataset_id", "lot", "job_id"],
        set_={column: getattr(new, column) for column in changes},
        where=claimable,
    ).returning(ds.c.role)


#: PostgreSQL's ``lock_not_available``: a ``NOWAIT`` lock found the row locked.
_LOCK_NOT_AVAILABLE = "55P03"
_KEYS = tuple_(ds.c.dataset_id, ds.c.lot).in_(bindparam("b_keys", expanding=True))
#: The claim's own rows (its OUTPUT rows and INPUT read locks), to be written.
_LOCK_OWN_ROWS = (
    select(ds.c.role).where(ds.c.job_id == bindparam("b_job"), _KEYS).with_for_update(nowait=True)
)
#: The input lots' OUTPUT rows (their producers'), READY as the claim read them: shared with other readers.
_LOCK_INPUT_ROWS = select(ds.c.role).where(_OUTPUT, _KEYS).with_for_update(read=True, nowait=True)


def lock_claim_rows(
    connection: Connection,
    job_id: uuid.UUID,
    own: Sequence[tuple[uuid.UUID, str]],
    inputs: Sequence[tuple[uuid.UUID, str]],
) -> bool:
    """Lock, without waiting, the rows a claim depends on (PostgreSQL): its own rows (``own``: its
    outputs and inputs, as ``take_claim`` writes them) for update, its input lots' OUTPUT rows for
    share, so that they stay READY until the claim commits. False if another transaction is
    changing one (the transaction is then aborted: the caller rolls back, a lost race).

    A claim holds the work-list hints it took (``frontier.pop``/``drop``) while it takes the lot,
    and a failure, a reap, an invalidation or a completion changes a lot's rows (and the version
    counter) before it hints jobs again: a claim that waited for such a transaction would wait for
    it while it waits for the claim's hint, a deadlock (issue 39.19). The claim loses the race
    instead, as it would once the other committed: what it read of the lot is being changed.
    Call it before the claim's run pins its inputs (which may lock an input's version counter).
    """
    if not locks_rows(connection):
        return True  # SQLite: the write transaction already holds the whole database
    try:
        connection.execute(_LOCK_OWN_ROWS, {"b_job": job_id, "b_keys": list(own)})
        if inputs:
            connection.execute(_LOCK_INPUT_ROWS, {"b_keys": list(inputs)})
    except DatabaseError as error:
        if error.sqlstate == _LOCK_NOT_AVAILABLE:
            return False
        raise
    return True


def take_claim(
    connection: Connection,
    *,
    job_id: uuid.UUID,
    outputs: Sequence[tuple[uuid.UUID, str]],
    inputs: Sequence[tuple[uuid.UUID, str]],
    attempt: int,
    owner: str,
    run_id: uuid.UUID,
    lease_expires_at: datetime,
    now: datetime,
) -> bool:
    """Write OUTPUT RUNNING (one row per output of the job) and the INPUT RUNNING read locks of one
    claim in one statement.

    This conditional upsert is the mutex: an OUTPUT row is taken only if it is absent, or ERROR /
    RESUBMIT at ``attempt - 1`` (what the caller saw); an INPUT row only if absent or ERROR
    (released). False, with some rows perhaps written, if any row was not takeable: the caller
    must roll back. On PostgreSQL, ``lock_claim_rows`` first.
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
    rows = [{"dataset_id": d, "lot": lot, "role": Role.OUTPUT.value, **claim} for d, lot in outputs]
    rows += [{"dataset_id": d, "lot": lot, "role": Role.INPUT.value, **claim} for d, lot in inputs]
    taken = connection.execute(_take(connection), rows).all()
    return len(taken) == len(rows)


#: The fence: the row is still this owner's attempt, still RUNNING, and its lease has not run out.
_LIVE_CLAIM = and_(
    ds.c.owner == bindparam("b_owner"),
    ds.c.attempt == bindparam("b_attempt"),
    ds.c.status == Status.RUNNING.value,
    ds.c.lease_expires_at > bindparam("b_now"),
)
_EXTEND_OUTPUT_LEASE = (
    update(ds)
    .where(_THE_OUTPUT, ds.c.job_id == bindparam("b_job"), _LIVE_CLAIM)
    .values(lease_expires_at=bindparam("b_expires"), updated_at=bindparam("b_now"))
)
#: The claim's other rows: its INPUT rows, and the OUTPUT rows of a job's other outputs.
_EXTEND_CLAIM_LEASES = (
    update(ds)
    .where(ds.c.job_id == bindparam("b_job"), ds.c.run_id == bindparam("b_run"))
    .values(lease_expires_at=bindparam("b_expires"))
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
    params = {
        "b_dataset": dataset_id,
        "b_lot": lot,
        "b_job": job_id,
        "b_owner": owner,
        "b_attempt": attempt,
        "b_now": now,
        "b_expires": lease_expires_at,
    }
    matched = connection.execute(_EXTEND_OUTPUT_LEASE, params).rowcount
    if matched:
        connection.execute(
            _EXTEND_CLAIM_LEASES, {"b_job": job_id, "b_run": run_id, "b_expires": lease_expires_at}
        )
    return matched == 1


_FINISH = (
    update(ds)
    .where(
        ds.c.job_id == bindparam("b_job"),
        ds.c.run_id == bindparam("b_run"),
        or_(_INPUT, _LIVE_CLAIM),
    )
    .values(
        status=case((_OUTPUT, bindparam("b_output")), else_=bindparam("b_input")),
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


_SET_CLAIM_INPUTS = (
    update(ds)
    .where(_CLAIM_INPUTS)
    .values(status=bindparam("b_status"), lease_expires_at=None, updated_at=bindparam("b_now"))
)


def set_claim_inputs(
    connection: Connection, job_id: uuid.UUID, run_id: uuid.UUID | None, status: Status, now: datetime
) -> None:
    """Move every INPUT row of one claim (found by its run) to DONE or ERROR. A row written
    without a claim (``run_id`` None: a lot published from outside) has no INPUT rows."""
    if run_id is None:
        return
    params = {"b_job": job_id, "b_run": run_id, "b_status": status.value, "b_now": now}
    connection.execute(_SET_CLAIM_INPUTS, params)


@per_dialect
def _expired_claims(connection: Connection) -> Any:
    query = (
        select(ds)
        .where(ds.c.status == Status.RUNNING.value, ds.c.lease_expires_at < bindparam("b_now"), _OUTPUT)
        .order_by(ds.c.lease_expires_at)
        .limit(bindparam("b_limit"))
    )
    return query.with_for_update(skip_locked=True) if locks_rows(connection) else query


def expired_claims(connection: Connection, now: datetime, limit: int) -> list[StatusRow]:
    """RUNNING claims whose lease ran out; on PostgreSQL skipped if another reaper has them."""
    rows = connection.execute(_expired_claims(connection), {"b_now": now, "b_limit": limit})
    return [StatusRow(*row) for row in rows]


_SET_OUTPUT_STATUS = (
    update(ds)
    .where(_THE_OUTPUT, ds.c.status == bindparam("b_expected"))
    .values(
        status=bindparam("b_status"),
        updated_at=bindparam("b_now"),
        lease_expires_at=None,
        held_status=bindparam("b_held_status"),
    )
)


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
    """Move one OUTPUT row from ``expected`` to ``status`` (the reaper's and operator's moves);
    False if it was not in ``expected``."""
    params = {
        "b_dataset": dataset_id,
        "b_lot": lot,
        "b_expected": expected.value,
        "b_status": status.value,
        "b_now": now,
        "b_held_status": held_status.value if held_status else None,
    }
    return connection.execute(_SET_OUTPUT_STATUS, params).rowcount == 1


def consuming_claims(connection: Connection, dataset_id: uuid.UUID, lot: str) -> list[ConsumingClaim]:
    """Claims of other jobs that read (dataset, lot): their INPUT rows RUNNING or DONE."""
    rows = connection.execute(
        select(ds.c.job_id, ds.c.run_id, ds.c.status)
        .where(ds.c.dataset_id == dataset_id, ds.c.lot == lot, _INPUT, ds.c.status.in_(_INPUT_LOCKED))
        .where(ds.c.run_id.is_not(None))  # every claim's rows carry its run
        .order_by(ds.c.job_id)
    )
    return [ConsumingClaim(*row) for row in rows]


def outputs_of_claim(connection: Connection, job_id: uuid.UUID, run_id: uuid.UUID) -> list[StatusRow]:
    """The OUTPUT rows a claim (found by its run) wrote: one per output of its job."""
    query = select(ds).where(ds.c.job_id == job_id, _OUTPUT, ds.c.run_id == run_id).order_by(ds.c.dataset_id)
    return [StatusRow(*row) for row in connection.execute(query)]


def outputs_of_job_lot(connection: Connection, job_id: uuid.UUID, lot: str) -> list[StatusRow]:
    """The OUTPUT rows a job has for one lot: one per output it has produced or claimed it for."""
    query = select(ds).where(ds.c.job_id == job_id, _OUTPUT, ds.c.lot == lot).order_by(ds.c.dataset_id)
    return [StatusRow(*row) for row in connection.execute(query)]


_FAIL_CLAIM_OUTPUTS = (
    update(ds)
    .where(
        ds.c.job_id == bindparam("b_job"),
        ds.c.run_id == bindparam("b_run"),
        _OUTPUT,
        ds.c.status == Status.RUNNING.value,
    )
    .values(status=Status.ERROR.value, lease_expires_at=None, updated_at=bindparam("b_now"))
    .returning(ds.c.dataset_id)
)


def fail_claim_outputs(
    connection: Connection, job_id: uuid.UUID, run_id: uuid.UUID, now: datetime
) -> list[uuid.UUID]:
    """Every OUTPUT row of one claim still RUNNING to ERROR (the reaper's and a revocation's move:
    a job's outputs fail together); the datasets whose rows it moved."""
    params = {"b_job": job_id, "b_run": run_id, "b_now": now}
    return sorted(connection.execute(_FAIL_CLAIM_OUTPUTS, params).scalars())


#: A child run (a part of a claimed lot, ``partition_by``) has its lot's run as parent.
_parent_of_run = select(runs.c.parent_run_id).where(runs.c.id == bindparam("b_run")).scalar_subquery()


@per_dialect
def _claim_of_run(connection: Connection) -> Any:
    query = (
        select(
            namespaces.c.name,
            jobs.c.name,
            ds.c.lot,
            ds.c.owner,
            ds.c.attempt,
            ds.c.lease_expires_at,
            ds.c.run_id,
        )
        .join(jobs, jobs.c.id == ds.c.job_id)
        .join(namespaces, namespaces.c.id == jobs.c.namespace_id)
        .where(
            or_(ds.c.run_id == bindparam("b_run"), ds.c.run_id == _parent_of_run),
            _OUTPUT,
            ds.c.status == Status.RUNNING.value,
        )
    )
    return query.with_for_update(of=ds) if locks_rows(connection) else query


def claim_of_run(connection: Connection, run_id: uuid.UUID) -> OwningClaim | None:
    """The claim (OUTPUT RUNNING, whether or not its lease ran out: until it is reaped) whose run
    this is, or whose run is this child run's parent, its row locked until commit on PostgreSQL
    (so that it cannot end meanwhile); None if there is none."""
    row = connection.execute(_claim_of_run(connection), {"b_run": run_id}).first()
    return None if row is None else OwningClaim(*row)


def runs_with_claims(connection: Connection, run_ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
    """Those of ``run_ids`` that ``claim_of_run`` would name a claim for (a claimed run, or the
    child of one), in one statement for a projection group; their claims' rows locked until commit
    on PostgreSQL, as ``claim_of_run`` locks them."""
    if not run_ids:
        return set()
    query = (
        select(runs.c.id)
        .join(ds, or_(ds.c.run_id == runs.c.id, ds.c.run_id == runs.c.parent_run_id))
        .where(
            in_values(connection, runs.c.id, run_ids),
            _OUTPUT,
            ds.c.status == Status.RUNNING.value,
        )
    )
    if locks_rows(connection):
        query = query.with_for_update(of=ds)
    return set(connection.execute(query).scalars())


# -- the operator's moves (cold paths: built per call) ---------------------------------------------
def _update_output(
    connection: Connection, dataset_id: uuid.UUID, lot: str, *where: Any, **values: Any
) -> bool:
    """Change the OUTPUT row of (dataset, lot) if it matches ``where``; whether it did."""
    query = update(ds).where(ds.c.dataset_id == dataset_id, ds.c.lot == lot, _OUTPUT, *where)
    return connection.execute(query.values(**values)).rowcount == 1


def reopen_held(connection: Connection, dataset_id: uuid.UUID, lot: str, now: datetime) -> bool:
    """Invalidate a held lot that was READY: it will be RESUBMIT when released."""
    was_ready = (ds.c.status == Status.HOLD.value, ds.c.held_status == Status.READY.value)
    return _update_output(
        connection, dataset_id, lot, *was_ready, held_status=Status.RESUBMIT.value, updated_at=now
    )


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
    connection.execute(delete(ds).where(ds.c.dataset_id == dataset_id, ds.c.lot == lot, _OUTPUT))


def mark_data_removed(connection: Connection, dataset_id: uuid.UUID, lot: str, now: datetime) -> bool:
    """Record that a failed attempt's partial data was deleted (once)."""
    not_yet = (ds.c.status == Status.ERROR.value, ds.c.data_removed_at.is_(None))
    return _update_output(connection, dataset_id, lot, *not_yet, data_removed_at=now, updated_at=now)


# -- invalidation of many lots at once (a backfill): the statements above, set-wise ----------------
#: Lots per statement of the set-wise reads and updates (well under SQLite's parameter limit).
CHUNK = 1000


def _chunks(items: Sequence[Any]) -> list[Sequence[Any]]:
    return [items[start : start + CHUNK] for start in range(0, len(items), CHUNK)]


def output_rows(connection: Connection, dataset_id: uuid.UUID, lots: Sequence[str]) -> dict[str, StatusRow]:
    """The OUTPUT rows of these lots of one dataset, by lot (absent: no row)."""
    found: dict[str, StatusRow] = {}
    for part in _chunks(lots):
        query = select(ds).where(
            ds.c.dataset_id == dataset_id, in_values(connection, ds.c.lot, part), _OUTPUT
        )
        found.update((row.lot, row) for row in (StatusRow(*r) for r in connection.execute(query).all()))
    return found


def reopen_ready_outputs(
    connection: Connection, dataset_id: uuid.UUID, lots: Sequence[str], now: datetime
) -> dict[str, uuid.UUID]:
    """``set_output_status`` READY -> RESUBMIT of many lots of one dataset: the lots it moved, with
    their producing job (the others were not READY)."""
    moved: dict[str, uuid.UUID] = {}
    for part in _chunks(lots):
        statement = (
            update(ds)
            .where(
                ds.c.dataset_id == dataset_id,
                in_values(connection, ds.c.lot, part),
                _OUTPUT,
                ds.c.status == Status.READY.value,
            )
            .values(status=Status.RESUBMIT.value, updated_at=now, lease_expires_at=None, held_status=None)
            .returning(ds.c.lot, ds.c.job_id)
        )
        moved.update((lot, job_id) for lot, job_id in connection.execute(statement))
    return moved


def reopen_held_outputs(
    connection: Connection, dataset_id: uuid.UUID, lots: Sequence[str], now: datetime
) -> None:
    """``reopen_held`` of many lots of one dataset (those held while READY; the others unchanged)."""
    for part in _chunks(lots):
        statement = (
            update(ds)
            .where(
                ds.c.dataset_id == dataset_id,
                in_values(connection, ds.c.lot, part),
                _OUTPUT,
                ds.c.status == Status.HOLD.value,
                ds.c.held_status == Status.READY.value,
            )
            .values(held_status=Status.RESUBMIT.value, updated_at=now)
        )
        connection.execute(statement)


def set_many_claim_inputs(
    connection: Connection,
    claims: Sequence[tuple[uuid.UUID, uuid.UUID | None]],
    status: Status,
    now: datetime,
) -> None:
    """``set_claim_inputs`` of many (job, run) claims: one statement per job and chunk of runs."""
    runs: dict[uuid.UUID, list[uuid.UUID]] = {}
    for job_id, run_id in claims:
        if run_id is not None:
            runs.setdefault(job_id, []).append(run_id)
    for job_id, ids in sorted(runs.items()):
        for part in _chunks(sorted(set(ids))):
            statement = (
                update(ds)
                .where(ds.c.job_id == job_id, _INPUT, in_values(connection, ds.c.run_id, part))
                .values(status=status.value, lease_expires_at=None, updated_at=now)
            )
            connection.execute(statement)


def consuming_claims_of(
    connection: Connection, dataset_id: uuid.UUID, lots: Sequence[str]
) -> list[tuple[str, ConsumingClaim]]:
    """``consuming_claims`` of many lots of one dataset: (lot, claim), in lot then job order."""
    found: list[tuple[str, ConsumingClaim]] = []
    for part in _chunks(lots):
        rows = connection.execute(
            select(ds.c.lot, ds.c.job_id, ds.c.run_id, ds.c.status)
            .where(
                ds.c.dataset_id == dataset_id,
                in_values(connection, ds.c.lot, part),
                _INPUT,
                ds.c.status.in_(_INPUT_LOCKED),
            )
            .where(ds.c.run_id.is_not(None))
            .order_by(ds.c.lot, ds.c.job_id)
        )
        found += [(lot, ConsumingClaim(job_id, run_id, status)) for lot, job_id, run_id, status in rows.all()]
    return found


def outputs_of_consumers(
    connection: Connection, dataset_id: uuid.UUID, lots: Sequence[str]
) -> dict[tuple[uuid.UUID, uuid.UUID], list[StatusRow]]:
    """``outputs_of_claims`` of every claim ``consuming_claims_of`` finds, by (job, run), read with
    the claims in one statement per chunk of lots (no list of runs sent back and forth)."""
    found: dict[tuple[uuid.UUID, uuid.UUID], list[StatusRow]] = {}
    reading = ds.alias("reading")
    for part in _chunks(lots):
        consumes = exists().where(
            reading.c.job_id == ds.c.job_id,
            reading.c.run_id == ds.c.run_id,
            reading.c.dataset_id == dataset_id,
            in_values(connection, reading.c.lot, part),
            reading.c.role == Role.INPUT.value,
            reading.c.status.in_(_INPUT_LOCKED),
        )
        query = select(ds).where(_OUTPUT, consumes).order_by(ds.c.job_id, ds.c.run_id, ds.c.dataset_id)
        chunk: dict[tuple[uuid.UUID, uuid.UUID], list[StatusRow]] = {}
        for row in connection.execute(query).all():
            status_row = StatusRow(*row)
            if status_row.run_id is not None:
                chunk.setdefault((status_row.job_id, status_row.run_id), []).append(status_row)
        for claim, outputs in chunk.items():  # a claim reading lots of several chunks: read whole once
            found.setdefault(claim, outputs)
    return found


def outputs_of_claims(
    connection: Connection, job_id: uuid.UUID, run_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, list[StatusRow]]:
    """``outputs_of_claim`` of many claims of one job, by run (in dataset order)."""
    found: dict[uuid.UUID, list[StatusRow]] = {}
    for part in _chunks(run_ids):
        query = (
            select(ds)
            .where(ds.c.job_id == job_id, _OUTPUT, in_values(connection, ds.c.run_id, part))
            .order_by(ds.c.dataset_id)
        )
        for row in connection.execute(query).all():  # one fetch: row by row costs more than the query
            status_row = StatusRow(*row)
            if status_row.run_id is not None:
                found.setdefault(status_row.run_id, []).append(status_row)
    return found
