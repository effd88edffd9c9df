"""Reading the data-status table for reports: filtered pages with names, counts per status, one
(job, lot)'s row for its arc state. Nothing here locks or writes."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, bindparam, func, select

from lotline.domain.coordination import GAVE_UP, Role, Status
from lotline.store.queries.claims import StatusRow
from lotline.store.schema import data_status, datasets, jobs, lot_frontier, lot_jobs, namespaces, runs

ds = data_status


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


_WITH_NAMES = (
    select(
        ds,
        namespaces.c.name.label("namespace"),
        datasets.c.name.label("dataset"),
        jobs.c.name.label("job"),
        runs.c.error,
        lot_frontier.c.failures.label("gave_up_after"),
    )
    .join(datasets, datasets.c.id == ds.c.dataset_id)
    .join(namespaces, namespaces.c.id == datasets.c.namespace_id)
    .join(jobs, jobs.c.id == ds.c.job_id)
    .outerjoin(runs, runs.c.id == ds.c.run_id)
    .outerjoin(
        lot_frontier,
        (lot_frontier.c.job_id == ds.c.job_id)
        & (lot_frontier.c.lot == ds.c.lot)
        & (lot_frontier.c.not_before == GAVE_UP),
    )
)


@dataclass(frozen=True, slots=True)
class NamedStatusRow:
    """A data-status row with the names of its namespace, dataset and job, the one-line reason
    its run failed (``runs.error``; None unless the run failed), and the failed attempts in a row
    after which the lot was given up on (None: it was not)."""

    row: StatusRow
    namespace: str
    dataset: str
    job: str
    error: str | None
    gave_up_after: int | None


_COLUMNS = len(ds.c)


def status_rows(
    connection: Connection, where: StatusFilter, limit: int | None = None, offset: int = 0
) -> list[NamedStatusRow]:
    """Rows of the data-status table with dataset and job names, ordered by dataset, lot, job."""
    ordered = _filtered(_WITH_NAMES, where).order_by(datasets.c.name, ds.c.lot, jobs.c.name, ds.c.role)
    return [
        NamedStatusRow(StatusRow(*row[:_COLUMNS]), *row[_COLUMNS:])
        for row in connection.execute(ordered.limit(limit).offset(offset))
    ]


_COUNT = select(func.count()).select_from(ds.join(datasets, datasets.c.id == ds.c.dataset_id))


def count_status_rows(connection: Connection, where: StatusFilter) -> int:
    count: int = connection.execute(_filtered(_COUNT, where)).scalar_one()
    return count


# A job with several outputs has a row per output and lot: its lots are counted once, by the
# output that carries the claim (``lot_jobs.output_dataset_id``; the others move with it).
_OUTPUT_COUNTS = (
    select(ds.c.status, func.count())
    .join(lot_jobs, (lot_jobs.c.job_id == ds.c.job_id) & (lot_jobs.c.output_dataset_id == ds.c.dataset_id))
    .where(ds.c.job_id == bindparam("b_job"), ds.c.role == Role.OUTPUT.value)
    .group_by(ds.c.status)
)


def output_counts(connection: Connection, job_id: uuid.UUID) -> dict[str, int]:
    """How many of the job's lots are in each status (each lot once, whatever its outputs)."""
    return {status: count for status, count in connection.execute(_OUTPUT_COUNTS, {"b_job": job_id}).all()}


_LOT_ROW = select(ds).where(
    ds.c.dataset_id == bindparam("b_dataset"),
    ds.c.lot == bindparam("b_lot"),
    ds.c.job_id == bindparam("b_job"),
)


def lot_row(connection: Connection, dataset_id: uuid.UUID, lot: str, job_id: uuid.UUID) -> StatusRow | None:
    """The job's row for (dataset, lot): its OUTPUT row when ``dataset_id`` is its output."""
    row = connection.execute(_LOT_ROW, {"b_dataset": dataset_id, "b_lot": lot, "b_job": job_id}).first()
    return None if row is None else StatusRow(*row)
