"""The claim search's work list (``lot_frontier``): hints that a (job, lot) may have become eligible.

Raising a hint is an upsert that *updates* an existing row, so on PostgreSQL it waits for a
searcher that holds the row and, if the searcher deleted it, inserts it again: a hint raised while
a searcher looks at the lot is never lost. Searchers take hints with ``FOR UPDATE SKIP LOCKED``, so
concurrent workers of one job spread over different lots.

A failed lot's hint is a *retry* hint: not taken before its ``not_before`` (the back-off), counting
the lot's failures in a row. Any other hint raised for the lot replaces it: due at once, count 0.
A lot given up on (too many failures in a row) keeps a retry hint that is never due (``GAVE_UP``).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Connection,
    Integer,
    String,
    Uuid,
    bindparam,
    delete,
    exists,
    literal,
    null,
    or_,
    select,
    update,
)

from lotline.domain.coordination import GAVE_UP, INPUT_LOCKED, Role, Status
from lotline.store.dialect import in_values, locks_rows, per_dialect, upsert_insert
from lotline.store.schema import data_status, jobs, lot_frontier, lot_job_inputs, lot_jobs
from lotline.store.types import UtcDateTime

ft = lot_frontier
_LOCKED = [s.value for s in INPUT_LOCKED]


_COLUMNS = ["job_id", "lot", "touched_at", "not_before", "failures"]


def _upsert(connection: Connection, rows: Any) -> Any:
    """INSERT … SELECT ``rows`` (job_id, lot, touched_at, not_before, failures): the latest raise of a
    hint wins (a retry hint becomes due at once when anything else raises the lot)."""
    statement = upsert_insert(connection, ft).from_select(_COLUMNS, rows)
    new = statement.excluded
    return statement.on_conflict_do_update(
        index_elements=["job_id", "lot"],
        set_={"touched_at": new.touched_at, "not_before": new.not_before, "failures": new.failures},
    )


def _fresh() -> tuple[Any, Any]:
    """The not_before and failures of a hint due at once."""
    return null().cast(UtcDateTime).label("not_before"), literal(0, Integer).label("failures")


def _job() -> Any:
    return bindparam("b_job", type_=Uuid)


def _lot() -> Any:
    return bindparam("b_lot", type_=String)


def _now() -> Any:
    return bindparam("b_now", type_=UtcDateTime)


def _due() -> Any:
    """A hint is due unless it is a retry hint whose back-off has not run out."""
    return or_(ft.c.not_before.is_(None), ft.c.not_before <= _now())


def _build_pop(connection: Connection, guarded: bool) -> Any:
    first = select(ft.c.lot).where(ft.c.job_id == _job(), _due())
    if guarded:
        first = first.where(
            exists().where(
                lot_jobs.c.job_id == _job(),
                ~lot_jobs.c.held,
                lot_jobs.c.updated_at == bindparam("b_stamp", type_=UtcDateTime),
                jobs.c.id == lot_jobs.c.job_id,
                jobs.c.current_version_id.is_not_distinct_from(bindparam("b_version", type_=Uuid)),
            )
        )
    first = first.order_by(ft.c.lot).limit(bindparam("b_limit"))
    if locks_rows(connection):
        first = first.with_for_update(of=ft, skip_locked=True)
    # A materialized CTE picks the rows once. As a plain ``IN (subquery)`` PostgreSQL may rescan the
    # subquery per deleted row; each rescan skips the rows this statement already deleted and picks
    # the next ones, so ``LIMIT 1`` would delete the whole list.
    picked = first.cte("picked").prefix_with("MATERIALIZED")
    taken = delete(ft).where(ft.c.job_id == _job(), ft.c.lot.in_(select(picked.c.lot)))
    return taken.returning(ft.c.lot, ft.c.failures)


@per_dialect
def _pop(connection: Connection) -> Any:
    return _build_pop(connection, guarded=False)


@per_dialect
def _pop_guarded(connection: Connection) -> Any:
    """The pop that takes nothing unless the caller's cached view of the job (a ``Guard``) is current."""
    return _build_pop(connection, guarded=True)


@dataclass(frozen=True)
class Guard:
    """What the caller believes of the job: its lot job's stamp (``updated_at``) and current version."""

    stamp: datetime
    version_id: uuid.UUID | None


def pop(
    connection: Connection, job_id: uuid.UUID, limit: int, now: datetime, guard: Guard | None = None
) -> dict[str, int]:
    """Take (delete) the job's first ``limit`` hints due at ``now``, in lot order; hints others hold
    are skipped. Returns each hint's lot with the failures in a row it retries (0: not a retry).

    With a ``guard``, nothing is taken unless the job is not on hold and its lot job and current
    version are still the ones the caller has cached. The deletion is part of the caller's
    transaction: if it rolls back, the hints are back.
    """
    params: dict[str, Any] = {"b_job": job_id, "b_limit": limit, "b_now": now}
    statement = _pop(connection)
    if guard is not None:
        params |= {"b_stamp": guard.stamp, "b_version": guard.version_id}
        statement = _pop_guarded(connection)
    return dict(sorted((lot, failures) for lot, failures in connection.execute(statement, params)))


@per_dialect
def _raise_for_consumers(connection: Connection) -> Any:
    consumers = (
        select(lot_job_inputs.c.job_id, _lot(), _now(), *_fresh())
        .where(lot_job_inputs.c.dataset_id == bindparam("b_dataset", type_=Uuid))
        .order_by(lot_job_inputs.c.job_id)
    )
    return _upsert(connection, consumers)


def raise_for_consumers(connection: Connection, dataset_id: uuid.UUID, lot: str, now: datetime) -> None:
    """(dataset, lot) became READY: every job that reads the dataset may now take the lot."""
    connection.execute(
        _raise_for_consumers(connection), {"b_dataset": dataset_id, "b_lot": lot, "b_now": now}
    )


@per_dialect
def _raise_for_job(connection: Connection) -> Any:
    # A job without inputs takes named lots only: it never searches, so it gets no hints.
    retry = (bindparam("b_not_before", type_=UtcDateTime), bindparam("b_failures", type_=Integer))
    hint = select(_job(), _lot(), _now(), *retry).where(exists().where(lot_job_inputs.c.job_id == _job()))
    return _upsert(connection, hint)


def raise_for_job(
    connection: Connection,
    job_id: uuid.UUID,
    lots: Sequence[str] | Mapping[str, int],
    now: datetime,
    *,
    not_before: datetime | None = None,
) -> None:
    """The job may take these lots again (its output was reaped or reopened, or it puts a hint
    back). Given as a mapping, each lot's hint keeps that count of failures in a row; with
    ``not_before`` the hints are retry hints, not taken before then (a failure's back-off)."""
    counts = lots if isinstance(lots, Mapping) else dict.fromkeys(lots, 0)
    if counts:
        rows = [
            {"b_job": job_id, "b_lot": lot, "b_now": now, "b_not_before": not_before, "b_failures": n}
            for lot, n in counts.items()
        ]
        connection.execute(_raise_for_job(connection), rows)


def raise_for_reopened(
    connection: Connection, dataset_id: uuid.UUID, lots: Sequence[str], now: datetime
) -> None:
    """``raise_for_job`` of each lot's producer for these reopened (RESUBMIT) OUTPUT lots of one
    dataset, a statement per thousand lots (a backfill's reopening); a producer without inputs
    gets none, as there."""
    for start in range(0, len(lots), 1000):
        rows = (
            select(data_status.c.job_id, data_status.c.lot, literal(now, UtcDateTime), *_fresh())
            .where(
                data_status.c.dataset_id == dataset_id,
                in_values(connection, data_status.c.lot, lots[start : start + 1000]),
                data_status.c.role == Role.OUTPUT.value,
                data_status.c.status == Status.RESUBMIT.value,
                exists().where(lot_job_inputs.c.job_id == data_status.c.job_id),
            )
            .order_by(data_status.c.job_id, data_status.c.lot)
        )
        connection.execute(_upsert(connection, rows))


@per_dialect
def _backfill(connection: Connection) -> Any:
    produced, mine = data_status.alias("produced"), data_status.alias("mine")
    unread = (
        select(_job(), produced.c.lot, _now(), *_fresh())
        .distinct()
        .where(
            produced.c.dataset_id.in_(bindparam("b_inputs", expanding=True)),
            produced.c.role == Role.OUTPUT.value,
            produced.c.status == Status.READY.value,
            ~exists().where(
                mine.c.dataset_id == produced.c.dataset_id,
                mine.c.lot == produced.c.lot,
                mine.c.job_id == _job(),
                mine.c.status.in_(_LOCKED),
            ),
        )
    )
    return _upsert(connection, unread)


def refill(
    connection: Connection,
    job_id: uuid.UUID,
    inputs: Sequence[uuid.UUID],
    now: datetime,
    *,
    keep_given_up: bool = False,
) -> dict[str, int]:
    """(Re)build a job's hints: every READY lot of its inputs that it holds no read lock on (the
    delete is built per call: registering is rare). ``keep_given_up``: lots given up on stay so
    (the job version did not change).

    Run when a job is registered (or its inputs or mapping change); the caller holds the input
    datasets' row locks, so a lot becoming READY meanwhile is either seen here or hints the job itself.
    Returns the lots kept given up on, with their failures in a row.
    """
    kept = given_up(connection, job_id) if keep_given_up else {}
    connection.execute(delete(ft).where(ft.c.job_id == job_id))
    if inputs:
        connection.execute(_backfill(connection), {"b_job": job_id, "b_inputs": list(inputs), "b_now": now})
    if kept:
        raise_for_job(connection, job_id, kept, now, not_before=GAVE_UP)
    return kept


_GIVEN_UP = select(ft.c.lot, ft.c.failures).where(ft.c.job_id == _job(), ft.c.not_before == GAVE_UP)


_GIVEN_UP_IN = (
    select(ft.c.lot, ft.c.failures)
    .join(data_status, (data_status.c.job_id == ft.c.job_id) & (data_status.c.lot == ft.c.lot))
    .where(
        data_status.c.dataset_id == bindparam("b_dataset"),
        data_status.c.role == Role.OUTPUT.value,
        data_status.c.lot.in_(bindparam("b_lots", expanding=True)),
        ft.c.not_before == GAVE_UP,
    )
)


def given_up_in(connection: Connection, dataset_id: uuid.UUID, lots: Sequence[str]) -> dict[str, int]:
    """Which of the dataset's ``lots`` its producer gave up on, each with its failures in a row."""
    if not lots:
        return {}
    found = connection.execute(_GIVEN_UP_IN, {"b_dataset": dataset_id, "b_lots": list(lots)})
    return {lot: failures for lot, failures in found}


def given_up(connection: Connection, job_id: uuid.UUID, lots: Sequence[str] | None = None) -> dict[str, int]:
    """The job's lots given up on (of ``lots``, or all), each with its failures in a row."""
    query = _GIVEN_UP if lots is None else _GIVEN_UP.where(ft.c.lot.in_(list(lots)))
    return {lot: failures for lot, failures in connection.execute(query, {"b_job": job_id})}


@per_dialect
def _drop(connection: Connection) -> Any:
    held = select(ft.c.lot).where(ft.c.job_id == _job(), ft.c.lot.in_(bindparam("b_lots", expanding=True)))
    if locks_rows(connection):
        held = held.with_for_update(skip_locked=True)
    return delete(ft).where(ft.c.job_id == _job(), ft.c.lot.in_(held))


def drop(connection: Connection, job_id: uuid.UUID, lots: Sequence[str]) -> None:
    """Remove hints of lots the job is taking now (hints another searcher holds are left to it)."""
    connection.execute(_drop(connection), {"b_job": job_id, "b_lots": list(lots)})


_ANY_HINT = select(ft.c.lot).where(ft.c.job_id == _job(), _due()).limit(1)
_HINTS = (
    select(ft.c.lot)
    .where(ft.c.job_id == _job(), or_(ft.c.not_before.is_(None), ft.c.not_before != GAVE_UP))
    .order_by(ft.c.lot)
    .limit(bindparam("b_limit"))
)


def hints(connection: Connection, job_id: uuid.UUID, limit: int) -> list[str]:
    """The job's first ``limit`` hints in lot order, read only (``pop`` takes them), leaving out
    lots given up on (backing off or not, the others may be taken by a ``lotline run``)."""
    return list(connection.execute(_HINTS, {"b_job": job_id, "b_limit": limit}).scalars())


def has_hints(connection: Connection, job_id: uuid.UUID, now: datetime) -> bool:
    """Whether the job has a hint due at ``now``."""
    return connection.execute(_ANY_HINT, {"b_job": job_id, "b_now": now}).first() is not None


def make_due(
    connection: Connection,
    job_id: uuid.UUID,
    lots: Sequence[str] | None,
    now: datetime,
    *,
    afresh: bool = False,
) -> list[str]:
    """Retry hints of the job (of ``lots``, or all) due at once; their lots (built per call: an
    operator's or ``lotline run``'s move, not a worker's). By default they keep their count of
    failures in a row and lots given up on stay so; ``afresh`` (an operator's retry): those too,
    every count back to 0."""
    query = update(ft).where(ft.c.job_id == job_id, ft.c.not_before.is_not(None))
    if not afresh:
        query = query.where(ft.c.not_before != GAVE_UP)
    if lots is not None:
        query = query.where(ft.c.lot.in_(list(lots)))
    values: dict[str, Any] = {"not_before": None, "touched_at": now}
    if afresh:
        values["failures"] = 0
    return list(connection.execute(query.values(**values).returning(ft.c.lot)).scalars())
