"""Reads of gap reports: a dataset's OUTPUT rows over a lot-id range, aggregated where they can be.

Every statement filters ``dataset_id, role = 'OUTPUT'`` and a lot-id range, and so reads the index
(dataset_id, role, status, lot) of data_status; READY rows, the bulk, are never returned one by one
for a report: ``ready_lot_counts`` (READY rows counted by ten lots, appended as deltas by triggers,
migration 0018) tells the complete stretches, and only the rows of tens neither full nor empty are
read (``ready_among``); ``compact_ready_counts`` merges a range's deltas. ``pattern`` (a LIKE pattern
such as ``________PT5M___``) keeps lots of another interval out; None reads named lots too.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    Connection,
    Text,
    cast,
    delete,
    func,
    insert,
    literal,
    null,
    or_,
    select,
    tuple_,
    union_all,
)
from sqlalchemy.sql.elements import ColumnElement

from lotline.domain.coordination import OUTPUT_STATUSES, Role, Status
from lotline.domain.manifests import ManifestState
from lotline.domain.ready_counts import TEN
from lotline.domain.versions import VersionState
from lotline.store.dialect import in_values, locks_rows
from lotline.store.schema import data_status as ds
from lotline.store.schema import dataset_versions, job_versions, jobs, manifests, runs
from lotline.store.schema import ready_lot_counts as counts

#: Spelled out, not ``!= 'READY'``: an IN list is a few short ranges of the status index.
_NOT_READY = [s.value for s in OUTPUT_STATUSES if s is not Status.READY]
#: Lot ids per statement of ``ready_among`` (within SQLite's 32,766 parameters).
_CHUNK = 10_000


@dataclass(frozen=True, slots=True)
class UnreadyLot:
    """An OUTPUT row that is not READY: its status, its claims so far and the run of the last one."""

    lot: str
    status: str
    attempt: int
    run_id: uuid.UUID | None


def _rows(
    dataset_id: uuid.UUID, lot_from: str | None, lot_to: str | None, pattern: str | None
) -> list[ColumnElement[bool]]:
    where: list[ColumnElement[bool]] = [ds.c.dataset_id == dataset_id, ds.c.role == Role.OUTPUT.value]
    if lot_from is not None:
        where.append(ds.c.lot >= lot_from)
    if lot_to is not None:
        where.append(ds.c.lot <= lot_to)
    if pattern is not None:
        where.append(ds.c.lot.like(pattern))
    return where


@dataclass(frozen=True, slots=True)
class DayCounts:
    """READY lots of a range by day, from the counts of ten lots.

    ``days``: READY lots of each day that has some, and how many of its tens have some. ``tens``:
    READY lots of the tens of incomplete days that a report must look at: those not full (fewer
    than ten) and, for a day some of whose tens have none, every ten that has some (so a ten not
    listed is full when all the day's tens have READY lots, and empty otherwise). ``rows`` and
    ``keys``: the delta rows the sums were made of, and the (ten, job) keys they belong to."""

    days: dict[str, tuple[int, int]]
    tens: dict[str, int]
    rows: int = 0
    keys: int = 0


def ready_by_day(
    connection: Connection,
    dataset_id: uuid.UUID,
    key_from: str,
    key_to: str,
    pattern: str,
    day_length: int,
    lots_per_day: int,
) -> DayCounts:
    """The READY lots of the count keys ``[key_from, key_to]`` (matching ``pattern``) by day and by
    ten (``DayCounts``), in one statement that sums the deltas once. A ten's count is the greatest
    of any job's (a job has at most one row per lot), so a day's sum is its lots only when all are
    READY. The range, pattern and lengths are written into the statement: a generic plan for them
    (psycopg prepares a statement run often) misjudges the range and takes ten times as long."""
    pairs = (
        select(counts.c.lot_prefix, func.sum(counts.c.lots).label("lots"), func.count().label("deltas"))
        .where(*_counted(dataset_id, key_from, key_to, pattern))
        .group_by(counts.c.lot_prefix, counts.c.job_id)
        .subquery("pairs")
    )
    tens = (  # sums of the tens, those of 0 too (their deltas count as dust); a CTE, read once
        select(
            pairs.c.lot_prefix,
            func.max(pairs.c.lots).label("lots"),
            func.sum(pairs.c.deltas).label("deltas"),
            func.count().label("pairs"),
        )
        .group_by(pairs.c.lot_prefix)
        .cte("tens")
    )
    day = func.substr(tens.c.lot_prefix, 1, _inline(day_length))
    days = (
        select(day.label("day"), func.sum(tens.c.lots).label("ready"), func.count().label("present"))
        .where(tens.c.lots > 0)
        .group_by(day)
        .cte("days")
    )
    listed = (
        select(tens.c.lot_prefix, tens.c.lots, null())
        .join(days, days.c.day == day)
        .where(
            tens.c.lots > 0,
            days.c.ready < _inline(lots_per_day),
            or_(tens.c.lots < TEN, days.c.present < _inline(-(-lots_per_day // TEN))),
        )
    )
    dust = select(null(), func.coalesce(func.sum(tens.c.deltas), 0), func.coalesce(func.sum(tens.c.pairs), 0))
    found = DayCounts({}, {})
    rows = keys = 0
    for key, lots, present in connection.execute(union_all(select(days), listed, dust)):
        if key is None:
            rows, keys = lots, present
        elif present is None:
            found.tens[key] = lots
        else:
            found.days[key] = (lots, present)
    return DayCounts(found.days, found.tens, rows, keys)


def compact_ready_counts(connection: Connection, dataset_id: uuid.UUID, key_from: str, key_to: str) -> int:
    """Merge the delta rows of each key of ``[key_from, key_to]`` that has several into one (none
    where they sum to 0); the rows merged. PostgreSQL: one statement that takes only rows no other
    transaction has locked (``SKIP LOCKED``: a compaction racing another merges what the other left
    and waits for nobody; writers only insert, so they never wait for it) and deletes them and
    inserts their sums at once, so a reader's snapshot has either the old rows or the sums. SQLite
    (one writer at a time): the rows up to the scope's greatest id, in the caller's transaction."""
    scope = [
        counts.c.dataset_id == dataset_id,
        counts.c.lot_prefix >= key_from,
        counts.c.lot_prefix <= key_to,
    ]
    key = [counts.c.dataset_id, counts.c.lot_prefix, counts.c.job_id]
    columns = ["dataset_id", "lot_prefix", "job_id", "lots"]
    if locks_rows(connection):
        several = select(*key).where(*scope).group_by(*key).having(func.count() > 1)
        taken = select(counts.c.id).where(*scope, tuple_(*key).in_(several)).with_for_update(skip_locked=True)
        moved = delete(counts).where(counts.c.id.in_(taken)).returning(*key, counts.c.lots).cte("moved")
        merged = (
            insert(counts)
            .from_select(columns, _sums(moved.c.dataset_id, moved.c.lot_prefix, moved.c.job_id, moved.c.lots))
            .returning(counts.c.id)
            .cte("merged")
        )  # a data-modifying CTE runs to completion whether or not it is read
        statement = select(func.count()).select_from(moved).add_cte(merged)
        return int(connection.execute(statement).scalar_one())
    last = connection.execute(select(func.max(counts.c.id)).where(*scope)).scalar()
    if last is None:
        return 0
    upto = [*scope, counts.c.id <= last]  # the sums get greater ids: out of what is merged
    several = select(*key).where(*upto).group_by(*key).having(func.count() > 1)
    chosen = [*upto, tuple_(*key).in_(several)]
    connection.execute(insert(counts).from_select(columns, _sums(*key, counts.c.lots).where(*chosen)))
    return int(connection.execute(delete(counts).where(*chosen)).rowcount)


def _sums(*columns: Any) -> Any:
    """``SELECT dataset_id, lot_prefix, job_id, sum(lots) … GROUP BY`` the key, the sums not 0."""
    *key, lots = columns
    return select(*key, func.sum(lots)).group_by(*key).having(func.sum(lots) != 0)


def ready_among(connection: Connection, dataset_id: uuid.UUID, lots: Sequence[str]) -> list[str]:
    """Which of ``lots`` are READY (their OUTPUT rows), through the status index: one array
    parameter on PostgreSQL, IN lists on SQLite."""
    found: list[str] = []
    for at in range(0, len(lots), _CHUNK):
        query = select(ds.c.lot).where(
            *_rows(dataset_id, None, None, None),
            ds.c.status == Status.READY.value,
            in_values(connection, ds.c.lot, lots[at : at + _CHUNK]),
        )
        found += connection.execute(query).scalars()
    return found


def _counted(dataset_id: uuid.UUID, key_from: str, key_to: str, pattern: str) -> list[ColumnElement[bool]]:
    return [
        counts.c.dataset_id == dataset_id,
        counts.c.lot_prefix >= _inline(key_from),
        counts.c.lot_prefix <= _inline(key_to),
        counts.c.lot_prefix.like(_inline(pattern)),
    ]


def _inline(value: str | int) -> Any:
    """A value written into the statement when it runs (lot keys and lengths: letters and digits)."""
    return literal(value, literal_execute=True)


def count_ready(connection: Connection, dataset_id: uuid.UUID) -> int:
    """READY lots of a dataset (of named lots: the report counts what exists)."""
    query = select(func.count()).where(
        *_rows(dataset_id, None, None, None), ds.c.status == Status.READY.value
    )
    found: int = connection.execute(query).scalar_one()
    return found


def unready_rows(
    connection: Connection,
    dataset_id: uuid.UUID,
    lot_from: str | None = None,
    lot_to: str | None = None,
    pattern: str | None = None,
) -> list[UnreadyLot]:
    """The OUTPUT rows in the range that are not READY (few, normally), in lot order."""
    query = (
        select(ds.c.lot, ds.c.status, ds.c.attempt, ds.c.run_id)
        .where(*_rows(dataset_id, lot_from, lot_to, pattern), ds.c.status.in_(_NOT_READY))
        .order_by(ds.c.lot)
    )
    return [UnreadyLot(*row) for row in connection.execute(query)]


def ready_lots(
    connection: Connection, dataset_id: uuid.UUID, lot_from: str, lot_to: str, pattern: str
) -> list[str]:
    """The READY lot ids in ``[lot_from, lot_to]``, in lot order."""
    query = (
        select(ds.c.lot)
        .where(*_rows(dataset_id, lot_from, lot_to, pattern), ds.c.status == Status.READY.value)
        .order_by(ds.c.lot)
    )
    return list(connection.execute(query).scalars())


@dataclass(frozen=True, slots=True)
class JobVersions:
    """A job's versions numbered 1, 2, … in the order they were first recorded, and its current one."""

    numbers: dict[uuid.UUID, int]
    current: uuid.UUID | None

    @property
    def older(self) -> list[uuid.UUID]:
        """Every version but the current one (what stale lots were made by)."""
        return [v for v in self.numbers if v != self.current]


def job_versions_of(connection: Connection, job_id: uuid.UUID) -> JobVersions:
    """The job's versions, numbered by when each was first recorded (ties by id), and its current
    one: a few rows per job, read whole."""
    query = (
        select(job_versions.c.id)
        .where(job_versions.c.job_id == job_id)
        .order_by(job_versions.c.created_at, job_versions.c.id)
    )
    numbers = {version: n for n, version in enumerate(connection.execute(query).scalars(), start=1)}
    current = connection.execute(select(jobs.c.current_version_id).where(jobs.c.id == job_id)).scalar()
    return JobVersions(numbers, current)


def stale_lots(
    connection: Connection,
    dataset_id: uuid.UUID,
    versions: Sequence[uuid.UUID],
    lot_from: str | None = None,
    lot_to: str | None = None,
    pattern: str | None = None,
) -> list[tuple[str, uuid.UUID]]:
    """The READY OUTPUT lots in ``[lot_from, lot_to]`` whose run ran one of ``versions`` (a job's
    older versions), with that version, in lot order: the runs of those versions first (index on
    ``runs.job_version_id``), then their lots' rows by (dataset, lot), kept where the row's run is
    the old one. Two statements, not a join: PostgreSQL merge-joined the whole ``run_id`` index
    (a second for a year of PT5M lots). A job that never changed costs nothing here; one that did
    costs the runs its older versions made, not the range's READY lots."""
    if not versions:
        return []
    made = select(runs.c.id, runs.c.lot, runs.c.job_version_id).where(
        runs.c.job_version_id.in_(list(versions))
    )
    if lot_from is not None:
        made = made.where(runs.c.lot >= lot_from)
    if lot_to is not None:
        made = made.where(runs.c.lot <= lot_to)
    found = connection.execute(made).all()
    by_run = {run_id: version for run_id, _, version in found}
    lots = sorted({lot for _, lot, _ in found if pattern is None or _like(lot, pattern)})
    stale: list[tuple[str, uuid.UUID]] = []
    for at in range(0, len(lots), _CHUNK):
        query = select(ds.c.lot, ds.c.run_id).where(
            *_rows(dataset_id, None, None, None),
            ds.c.status == Status.READY.value,
            in_values(connection, ds.c.lot, lots[at : at + _CHUNK]),
        )
        stale += [(lot, by_run[run]) for lot, run in connection.execute(query) if run in by_run]
    return sorted(stale)


def _like(lot: str, pattern: str) -> bool:
    """``lot LIKE pattern`` for the patterns of ``domain.gaps.id_pattern`` (``_`` any one character)."""
    return len(lot) == len(pattern) and all(p in ("_", c) for p, c in zip(pattern, lot, strict=True))


def last_output_lot(connection: Connection, dataset_id: uuid.UUID) -> str | None:
    """The greatest lot id the dataset has an OUTPUT row for: its lots' shape when nothing else says."""
    found: str | None = connection.execute(
        select(func.max(ds.c.lot)).where(*_rows(dataset_id, None, None, None))
    ).scalar()
    return found


def declared_empty_by(connection: Connection, dataset_id: uuid.UUID, lot: str) -> str | None:
    """Who declared the lot's current (empty) version empty (None: not recorded)."""
    found: str | None = connection.execute(
        select(manifests.c.declared_by)
        .join(dataset_versions, dataset_versions.c.id == manifests.c.version_id)
        .where(
            manifests.c.dataset_id == dataset_id,
            manifests.c.lot == lot,
            manifests.c.part.is_(None),
            dataset_versions.c.state == "current",
        )
    ).scalar()
    return found


def newest_ready_lot(connection: Connection, dataset_id: uuid.UUID, pattern: str) -> str | None:
    """The greatest lot id of one interval whose OUTPUT row is READY: the dataset's freshness."""
    found: str | None = connection.execute(
        select(func.max(ds.c.lot)).where(*_rows(dataset_id, None, None, pattern), ds.c.status == "READY")
    ).scalar()
    return found


def output_lot_bounds(connection: Connection, dataset_id: uuid.UUID, pattern: str) -> tuple[str, str] | None:
    """The smallest and greatest lot ids of one interval the dataset has OUTPUT rows for."""
    low, high = connection.execute(
        select(func.min(ds.c.lot), func.max(ds.c.lot)).where(*_rows(dataset_id, None, None, pattern))
    ).one()
    return None if low is None else (low, high)


def checked_versions(
    connection: Connection, dataset_id: uuid.UUID, lot_from: str, lot_to: str, pattern: str
) -> list[tuple[str, Any]]:
    """(lot, facets) of the current versions in ``[lot_from, lot_to]`` that carry check results
    (``dataQualityAssertions``): the lot grid marks those published with warnings."""
    query = (
        select(dataset_versions.c.lot, dataset_versions.c.facets)
        .where(
            dataset_versions.c.dataset_id == dataset_id,
            dataset_versions.c.lot >= lot_from,
            dataset_versions.c.lot <= lot_to,
            dataset_versions.c.lot.like(pattern),
            dataset_versions.c.state == VersionState.CURRENT.value,
            cast(dataset_versions.c.facets, Text).like("%dataQualityAssertions%"),
        )
        .order_by(dataset_versions.c.lot)
    )
    return [(row.lot, row.facets) for row in connection.execute(query)]


def empty_lots(
    connection: Connection, dataset_id: uuid.UUID, lot_from: str, lot_to: str, pattern: str
) -> list[str]:
    """The lots in ``[lot_from, lot_to]`` whose current version's manifest is empty (the lot grid
    tells them apart from complete ones); through the manifests' (dataset_id, state, lot, version_id)
    index, which holds only what it reads (migration 0019)."""
    query = (
        select(manifests.c.lot)
        .join(dataset_versions, dataset_versions.c.id == manifests.c.version_id)
        .where(
            manifests.c.dataset_id == dataset_id,
            manifests.c.lot >= lot_from,
            manifests.c.lot <= lot_to,
            manifests.c.lot.like(pattern),
            manifests.c.state == ManifestState.EMPTY.value,
            dataset_versions.c.state == VersionState.CURRENT.value,
        )
        .order_by(manifests.c.lot)
    )
    return list(connection.execute(query).scalars())
