"""Projection of the OpenLineage journal onto the lineage model (SPEC §6), one projector at a time.

Accepted events are only journaled (``services/openlineage.py``); here they are applied in
journal order, so the events of one run apply in the order they were received. A group of up
to ``group_size`` events is one transaction that starts by taking the projector lock (an
advisory lock on PostgreSQL, the database write lock on SQLite) and ends by marking its events
applied, so an event is applied exactly once whatever the number of projecting processes, and
a crash leaves every event either applied with all its effects or still pending.

A group is first applied set-wise, without a savepoint per event: a chunk of events at a time
is decoded and prepared with one statement per kind (the live claims of the runs it ends, its
runs locked, its jobs upserted), then its events apply in order. When any event fails, the whole
set-wise pass is undone and the group is applied again carefully, each event in a savepoint: one
that cannot be applied (a run reported under another job, a parent cycle) is marked with its
reason and skipped, and never holds up the events after it. Both passes give the same rows
(tests/contract/test_projection_groups.py).

Within a group, ids of namespaces, datasets and jobs are cached, a run the group created is not
read back, nor are the datasets it declared (for its job version), a dataset's version basis is
read once unless the group writes the dataset, and metadata that an earlier event of the group
already wrote is not written again. Every cache lives in one transaction (``_Group``) and is
emptied when a savepoint rolls back; versioning is ``services/recording.py``.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TypeVar

from sqlalchemy import Connection

from lotline.coordination import claims
from lotline.domain.errors import ConcurrentChange, Conflict, DatabaseError, InvalidInput, LotlineError
from lotline.domain.model import DatasetRef, FieldSpec, JsonObject, RunIoRole
from lotline.domain.openlineage import (
    ACTIONS,
    TERMINAL_EVENTS,
    EventKind,
    JournalStatus,
    OlDataset,
    OlEvent,
    OlJob,
    OlParent,
    is_streaming,
    parse_event,
)
from lotline.domain.runs import RunAction, RunState, plan_transition
from lotline.domain.versions import job_version_id
from lotline.services.recording import apply_transition, create_run, record_run_io
from lotline.store.engine import Store
from lotline.store.queries import catalog, datasets, events, jobs, runs, versions
from lotline.store.queries.datasets import VersionBasis
from lotline.store.queries.runs import StoredRun
from lotline.store.types import utcnow

log = logging.getLogger(__name__)
_T = TypeVar("_T")

GROUP_SIZE = 500
#: Set-wise, a group decodes and prepares its events this many at a time (``_Group._prepare``).
SET_WISE_CHUNK = 100
#: A group reads its pending events this many at a time.
PENDING_PAGE = 100
#: A group stops taking events after this long, so that it never holds locks for long (on
#: SQLite its write lock also holds up the POSTs that journal new events).
GROUP_SECONDS = 0.5
#: An event whose projection keeps failing on database errors that look passing (a lost
#: connection, a deadlock) is marked failed after this many tries, so it cannot block the rest.
MAX_TRANSIENT_TRIES = 5
MAX_ERROR_LENGTH = 2000
#: A read applies the events journaled before it itself only when at most this many are pending
#: (for at most ``READ_CATCH_UP_SECONDS``, a safety bound: the count bounds the work); a larger
#: backlog is the projector's, and the read answers from what is projected, saying how much is
#: pending (docs/api.md, "Consistency"). The count also bounds the wait for the projector's lock:
#: the events of a group in progress are among those pending.
READ_CATCH_UP_EVENTS = 100
READ_CATCH_UP_SECONDS = 5.0


@dataclass(frozen=True)
class Drained:
    """What one drain did: the ids of the events it applied and of those it marked failed."""

    applied: tuple[int, ...] = ()
    failed: tuple[int, ...] = ()
    #: True when another projector held the lock (only when asked not to wait for it).
    busy: bool = False
    #: True when a group was rolled back on a database error that may pass (tried again later).
    stalled: bool = False

    def __add__(self, other: Drained) -> Drained:
        return Drained(
            self.applied + other.applied,
            self.failed + other.failed,
            self.busy or other.busy,
            self.stalled or other.stalled,
        )


class ProjectionService:
    """Applies the journal; shared by the server's background projector, reads that must see
    recent events, and ``lotline project``."""

    def __init__(
        self,
        store: Store,
        group_size: int = GROUP_SIZE,
        group_seconds: float = GROUP_SECONDS,
        pending_page: int = PENDING_PAGE,
    ) -> None:
        self._store = store
        self.group_size = group_size
        self.pending_page = pending_page
        self.group_seconds = group_seconds
        self._transient_tries: dict[int, int] = {}
        self._lock = threading.Lock()
        #: Events this process projected, and marked failed, since it started (for /metrics).
        self.applied_total = 0
        self.failed_total = 0

    def status(self) -> JournalStatus:
        with self._store.read() as connection:
            return events.status(connection)

    def failures(self, limit: int = 100) -> list[tuple[int, str]]:
        with self._store.read() as connection:
            return events.failures(connection, limit)

    def backlog(self) -> int:
        """How many events are journaled and not projected yet (what reads report as pending)."""
        with self._store.read() as connection:
            return events.backlog(connection)[0]

    def drain(
        self,
        *,
        wait: bool = True,
        upto: int | None = None,
        max_events: int | None = None,
        should_stop: Callable[[], bool] = lambda: False,
        deadline: float | None = None,
        group_seconds: float | None = None,
        on_group: Callable[[Drained], None] | None = None,
    ) -> Drained:
        """Apply pending events group by group until none is left (or none up to ``upto``).

        ``wait=False`` gives up at once when another projector holds the lock (``busy``);
        ``should_stop``, ``max_events`` and ``deadline`` (a ``time.monotonic()`` value) end the
        drain between groups, leaving the rest pending; ``group_seconds`` bounds each group (by
        default the service's); ``on_group`` is told what each group did (progress).
        """
        done = Drained()
        seconds = self.group_seconds if group_seconds is None else group_seconds
        while not should_stop() and (deadline is None or time.monotonic() < deadline):
            room = self.group_size
            if max_events is not None:
                room = min(room, max_events - len(done.applied) - len(done.failed))
            if room <= 0:
                break
            group = self._group(wait=wait, upto=upto, limit=room, should_stop=should_stop, seconds=seconds)
            done += group
            if on_group is not None:
                on_group(group)
            if group.busy or group.stalled or not (group.applied or group.failed):
                break
        return done

    def catch_up(self, seconds: float, *, most: int | None = None) -> int:
        """Project every event journaled before this call (waiting for the lock if another projector
        has it), for at most about ``seconds``; returns how many events are still pending then.

        ``most``: do it only when at most that many are pending; a larger backlog is left to the
        projector and only counted (what reads do: docs/api.md, "Consistency")."""
        pending, upto = self._backlog()
        if not pending or upto is None or (most is not None and pending > most):
            return pending
        self.drain(
            wait=True,
            upto=upto,
            deadline=time.monotonic() + seconds,
            group_seconds=min(self.group_seconds, seconds),
        )
        with self._store.read() as connection:
            if not events.pending(connection, 1, upto):
                return 0
            return events.backlog(connection)[0]

    def catch_up_for_read(self) -> int:
        """What a read applies itself before answering: a small backlog, briefly; a larger one is
        left to the projector and only counted. Returns how many events are still pending."""
        return self.catch_up(READ_CATCH_UP_SECONDS, most=READ_CATCH_UP_EVENTS)

    def _backlog(self) -> tuple[int, int | None]:
        with self._store.read() as connection:
            return events.backlog(connection)

    def wake_others(self) -> None:
        """Tell projectors in other processes that events are waiting (PostgreSQL NOTIFY; a read
        transaction, so that on SQLite, where there is no one to tell, it takes no write lock)."""
        with self._store.read() as connection:
            events.wake_projectors(connection)

    def _group(
        self, *, wait: bool, upto: int | None, limit: int, should_stop: Callable[[], bool], seconds: float
    ) -> Drained:
        try:
            with self._store.write() as connection:
                if not events.lock_projection(connection, wait=wait):
                    return Drained(busy=True)
                if should_stop():  # asked to stop while waiting for the lock
                    return Drained()
                found = _Pending(connection, limit, upto, self.pending_page)
                if not found.fetched:
                    return Drained()
                try:
                    # Usually no event fails: apply the group without a savepoint per event ...
                    with connection.begin_nested():
                        done = _Group(connection, self._transient_tries, careful=False).apply(
                            found.events(), seconds
                        )
                except Exception:
                    # ... and when one does, undo the group and apply it again event by event.
                    done = _Group(connection, self._transient_tries).apply(found.events(), seconds)
        except _Transient as transient:
            # The group was rolled back and runs again later; a poison event cannot loop forever.
            with self._lock:
                tries = self._transient_tries.get(transient.event_id, 0) + 1
                self._transient_tries[transient.event_id] = tries
            log.warning("projecting event %s failed (try %s): %s", transient.event_id, tries, transient)
            return Drained(stalled=True)
        with self._lock:
            self.applied_total += len(done.applied)
            self.failed_total += len(done.failed)
            for event_id in done.applied + done.failed:
                self._transient_tries.pop(event_id, None)
        return done


class _Pending:
    """A group's pending events, fetched a page at a time as the group takes them: a group cut
    short by its time (``group_seconds``) has not read and decoded the payloads it never reached
    (it did, up to 500 of them, for groups of ~15 events on a loaded machine)."""

    def __init__(self, connection: Connection, limit: int, upto: int | None, page: int) -> None:
        self._connection = connection
        self._limit = limit
        self._upto = upto
        self._page = page
        #: The events fetched so far, in journal order.
        self.fetched = events.pending(connection, min(limit, page), upto)
        self._more = len(self.fetched) == min(limit, page) < limit

    def events(self) -> Iterator[events.PendingEvent]:
        """The group's events from its first (each pass of the group starts over), fetching more
        pages as they are reached."""
        index = 0
        while index < len(self.fetched) or self._fetch():
            yield self.fetched[index]
            index += 1

    def _fetch(self) -> bool:
        if not self._more:
            return False
        room = min(self._limit - len(self.fetched), self._page)
        page = events.pending(self._connection, room, self._upto, after=self.fetched[-1].id)
        self.fetched += page
        self._more = len(page) == room and len(self.fetched) < self._limit
        return bool(page)


class _Transient(Exception):
    def __init__(self, event_id: int, reason: str) -> None:
        super().__init__(reason)
        self.event_id = event_id
        self.reason = reason


def _reason(error: Exception) -> str:
    if isinstance(error, DatabaseError):
        return error.detail[:MAX_ERROR_LENGTH]
    if isinstance(error, LotlineError):
        return error.message[:MAX_ERROR_LENGTH]
    return f"{type(error).__name__}: {error}"[:MAX_ERROR_LENGTH]


@dataclass
class _Group:
    """One projection transaction: its connection, its time, and what it already knows."""

    connection: Connection
    transient_tries: dict[int, int]
    #: Each event in a savepoint of its own, so that one that fails is undone alone; when False,
    #: the first failure raises and the caller undoes the whole group.
    careful: bool = True
    now: datetime = field(default_factory=utcnow)
    namespaces: dict[str, uuid.UUID] = field(default_factory=dict)
    sources: dict[str, uuid.UUID] = field(default_factory=dict)
    #: (namespace, name) -> dataset id, and what this group last wrote to the dataset.
    datasets: dict[tuple[str, str], uuid.UUID] = field(default_factory=dict)
    dataset_state: dict[uuid.UUID, _Written] = field(default_factory=dict)
    refs: dict[uuid.UUID, DatasetRef] = field(default_factory=dict)
    #: (namespace, name) -> the job's row as this group knows it (id, facets, current version).
    jobs: dict[tuple[str, str], _JobState] = field(default_factory=dict)
    #: Run id -> its row as this group last read, locked or wrote it (None: there is no such run);
    #: an event that writes a run drops it, unless what it wrote is the row (a run it created).
    runs: dict[uuid.UUID, StoredRun | None] = field(default_factory=dict)
    #: Runs known to have no claim (``claims.refuse_ending_claimed_run`` would pass them).
    unclaimed: set[uuid.UUID] = field(default_factory=set)
    #: Dataset id -> what a new version of it is made of (``datasets.version_basis``).
    bases: dict[uuid.UUID, VersionBasis] = field(default_factory=dict)
    #: Run id -> the datasets it has declared reading and writing, for runs this group created
    #: (no other transaction sees them) while only this group's events declared their I/O.
    run_io: dict[uuid.UUID, tuple[set[uuid.UUID], set[uuid.UUID]]] = field(default_factory=dict)

    def apply(self, found: Iterable[events.PendingEvent], seconds: float) -> Drained:
        started = time.monotonic()
        applied: list[int] = []
        failed: list[int] = []
        for chunk in self._chunks(found):
            if (applied or failed) and time.monotonic() - started > seconds:
                break
            for pending, event in chunk:
                error = self._apply_one(pending, event)
                if error is None:
                    applied.append(pending.id)
                else:
                    events.mark_failed(self.connection, pending.id, error, self.now)
                    failed.append(pending.id)
        events.mark_applied(self.connection, applied, self.now)
        return Drained(tuple(applied), tuple(failed))

    def _chunks(
        self, found: Iterable[events.PendingEvent]
    ) -> Iterator[Sequence[tuple[events.PendingEvent, OlEvent | None]]]:
        """The events a chunk at a time: all of a chunk is applied, or none. Set-wise (not
        ``careful``), a chunk of ``SET_WISE_CHUNK`` events is decoded and prepared with one
        statement per kind (``_prepare``) before its events apply; careful, a chunk is one event,
        decoded as it is applied (a payload that cannot be decoded fails alone)."""
        if self.careful:
            yield from ([(pending, None)] for pending in found)
            return
        iterator = iter(found)
        while chunk := list(itertools.islice(iterator, SET_WISE_CHUNK)):
            parsed = [(pending, parse_event(pending.payload)) for pending in chunk]
            self._prepare([event for _, event in parsed])
            yield parsed

    def _prepare(self, found: Sequence[OlEvent]) -> None:
        """What a chunk's events will need, one statement per kind instead of one per event: the
        live claims of the runs they end (first, as each event checks before locking its run),
        their runs locked and read, their jobs upserted."""
        run_events = [
            (e.run_id, e.event_type) for e in found if e.run_id is not None and e.kind is EventKind.RUN
        ]
        ending = {run_id for run_id, kind in run_events if kind in TERMINAL_EVENTS} - self.unclaimed
        if ending:
            self.unclaimed |= claims.unclaimed_runs(self.connection, sorted(ending))
        unknown = {run_id for run_id, _ in run_events} - set(self.runs)
        if unknown:
            locked = runs.lock_runs(self.connection, sorted(unknown))
            self.runs.update({run_id: locked.get(run_id) for run_id in unknown})
        self._upsert_jobs([e.job for e in found if e.job is not None and e.kind is not EventKind.DATASET])

    def _upsert_jobs(self, named: Sequence[OlJob]) -> None:
        """Each job this group has not written yet, upserted as its first event would upsert it
        (type and description); later events that change it upsert it again (``job``)."""
        first: dict[tuple[str, str], OlJob] = {}
        for job in named:
            first.setdefault((job.namespace, job.name), job)
        new = sorted(key for key in first if key not in self.jobs)
        if not new:
            return
        rows = [
            (self.namespace(ns), name, first[ns, name].type, first[ns, name].description) for ns, name in new
        ]
        upserted = jobs.upsert_jobs(self.connection, rows, self.now)
        for (namespace_id, name, type_, description), key in zip(rows, new, strict=True):
            row = upserted[namespace_id, name]
            self.jobs[key] = _JobState(row.id, row.facets, row.current_version_id, type_, description)

    def locked_run(self, run_id: uuid.UUID) -> StoredRun | None:
        """The run's row locked (None: there is no such run): as this group last knew it, or read."""
        if run_id in self.runs:
            return self.runs.pop(run_id)
        return runs.lock_run(self.connection, run_id)

    def may_be_claimed(self, run_id: uuid.UUID) -> bool:
        return run_id not in self.unclaimed

    def io_dataset_ids(self, run_id: uuid.UUID) -> tuple[list[uuid.UUID], list[uuid.UUID]]:
        """``runs.run_io_dataset_ids``: as this group tracked them for a run it created, else read."""
        tracked = self.run_io.get(run_id)
        if tracked is None:
            return runs.run_io_dataset_ids(self.connection, run_id)
        return sorted(tracked[0]), sorted(tracked[1])

    def version_basis(self, connection: Connection, dataset_id: uuid.UUID) -> VersionBasis:
        """``datasets.version_basis``, read once per group unless the group writes the dataset."""
        found = self.bases.get(dataset_id)
        if found is None:
            found = self.bases[dataset_id] = datasets.version_basis(connection, dataset_id)
        return found

    def _apply_one(self, pending: events.PendingEvent, event: OlEvent | None) -> str | None:
        """None when applied; the reason when the event cannot be applied (its effects undone)."""
        if event is not None:
            _apply(self, event)
            return None
        for attempt in (1, 2):
            try:
                with self.connection.begin_nested():
                    _apply(self, parse_event(pending.payload))
                return None
            except ConcurrentChange as error:
                # A concurrent REST write created the same row first: the second try sees it.
                self._forget()
                if attempt == 2:
                    return _reason(error)
            except DatabaseError as error:
                self._forget()
                tries = self.transient_tries.get(pending.id, 0)
                if error.connection_lost or tries + 1 < MAX_TRANSIENT_TRIES:
                    raise _Transient(pending.id, _reason(error)) from error
                return _reason(error)
            except Exception as error:  # a rule says no (LotlineError), or a bug: record, go on
                self._forget()
                if not isinstance(error, LotlineError):
                    log.exception("projecting journaled event %s failed", pending.id)
                return _reason(error)
        return None

    def _forget(self) -> None:
        """A rolled-back savepoint may have created rows this cache points at."""
        self.namespaces.clear()
        self.sources.clear()
        self.datasets.clear()
        self.dataset_state.clear()
        self.refs.clear()
        self.jobs.clear()
        self.runs.clear()
        self.unclaimed.clear()
        self.bases.clear()
        self.run_io.clear()

    # -- catalog entries, each written at most once per group unless it changes ---------------
    def namespace(self, name: str) -> uuid.UUID:
        found = self.namespaces.get(name)
        if found is None:
            found = self.namespaces[name] = catalog.ensure_namespace(self.connection, name, self.now)
        return found

    def source(self, name: str, uri: str | None) -> uuid.UUID:
        found = self.sources.get(name)
        if found is None:
            found = catalog.source_id(self.connection, name)
            if found is None:
                kind = uri.split(":", 1)[0].upper() if uri and ":" in uri else "UNKNOWN"
                found = catalog.write_source(
                    self.connection, name, kind[:64] or "UNKNOWN", uri, None, self.now
                )
            self.sources[name] = found
        return found

    def dataset(self, dataset: OlDataset) -> uuid.UUID:
        source_id = self.source(*dataset.source) if dataset.source is not None else None
        key = (dataset.namespace, dataset.name)
        found = self.datasets.get(key)
        if found is not None and self.dataset_state[found].covers(source_id, dataset):
            return found  # this group already wrote all of it
        found = datasets.upsert_dataset(
            self.connection,
            self.namespace(dataset.namespace),
            dataset.name,
            type_="DB_TABLE",
            physical_name=None,
            source_id=source_id,
            description=dataset.description,
            facets=dataset.facets,
            now=self.now,
        )
        if dataset.fields is not None and datasets.fields_of(self.connection, found) != dataset.fields:
            datasets.replace_fields(self.connection, found, dataset.fields)
        self.bases.pop(found, None)
        written = self.dataset_state.get(found) or _Written()
        self.dataset_state[found] = written.add(source_id, dataset)
        self.datasets[key] = found
        self.refs[found] = DatasetRef(*key)
        return found

    def dataset_ids(self, found: Sequence[OlDataset]) -> list[uuid.UUID]:
        # Sorted, so that concurrent writers lock dataset rows in one order (no deadlocks).
        ordered = sorted(found, key=lambda d: (d.namespace, d.name))
        ids = {(d.namespace, d.name): self.dataset(d) for d in ordered}
        return [ids[(d.namespace, d.name)] for d in found]

    def dataset_refs(self, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, DatasetRef]:
        missing = [d for d in ids if d not in self.refs]
        if missing:
            self.refs.update(datasets.dataset_refs(self.connection, missing))
        return {d: self.refs[d] for d in ids}

    def job(self, job: OlJob) -> _JobState:
        key = (job.namespace, job.name)
        known = self.jobs.get(key)
        if (
            known is not None
            and known.type == job.type
            and job.description in (None, known.description)
            and _contains(known.facets, job.facets)
        ):
            return known
        row = jobs.upsert_job(
            self.connection,
            self.namespace(job.namespace),
            job.name,
            type_=job.type,
            description=job.description,
            now=self.now,
        )
        facets = jobs.merge_job_facets(self.connection, row, job.facets) if job.facets else row.facets
        description = job.description if job.description is not None else known.description if known else None
        known = self.jobs[key] = _JobState(row.id, facets, row.current_version_id, job.type, description)
        return known

    def set_job_version(
        self, state: _JobState, job: OlJob, inputs: Sequence[uuid.UUID], outputs: Sequence[uuid.UUID]
    ) -> uuid.UUID:
        refs = self.dataset_refs([*inputs, *outputs])
        version = job_version_id(
            job.namespace,
            job.name,
            job.location,
            [f"{refs[d].namespace}:{refs[d].name}" for d in inputs],
            [f"{refs[d].namespace}:{refs[d].name}" for d in outputs],
        )
        if version != state.current_version_id:  # the id is derived from the content: same id, same version
            jobs.set_current_version(
                self.connection,
                state.id,
                version,
                location=job.location,
                inputs=inputs,
                outputs=outputs,
                now=self.now,
            )
            state.current_version_id = version
        return version


@dataclass
class _JobState:
    id: uuid.UUID
    facets: JsonObject
    current_version_id: uuid.UUID | None
    type: str
    description: str | None


@dataclass(frozen=True)
class _Written:
    """What a group has written to one dataset so far."""

    source_id: uuid.UUID | None = None
    facets: JsonObject = field(default_factory=dict)
    fields: tuple[FieldSpec, ...] | None = None

    def covers(self, source_id: uuid.UUID | None, dataset: OlDataset) -> bool:
        return (
            source_id in (None, self.source_id)
            and _contains(self.facets, dataset.facets)
            and dataset.fields in (None, self.fields)
        )

    def add(self, source_id: uuid.UUID | None, dataset: OlDataset) -> _Written:
        return _Written(
            source_id if source_id is not None else self.source_id,
            {**self.facets, **dataset.facets},
            dataset.fields if dataset.fields is not None else self.fields,
        )


def _contains(facets: JsonObject, new: JsonObject) -> bool:
    return all(name in facets and facets[name] == value for name, value in new.items())


def _apply(group: _Group, event: OlEvent) -> None:
    if event.kind is EventKind.DATASET:
        group.dataset(_present(event.dataset, "dataset"))
        return
    ol_job = _present(event.job, "job")
    inputs = group.dataset_ids(event.inputs)
    outputs = group.dataset_ids(event.outputs)
    job = group.job(ol_job)
    if event.kind is EventKind.JOB:
        group.set_job_version(job, ol_job, inputs, outputs)
        return
    _run_event(group, event, _present(event.run_id, "run id"), ol_job, job, inputs, outputs)


def _present(value: _T | None, what: str) -> _T:
    """What ``parse_event`` guarantees for the event's kind (a dataset event's dataset, a run event's
    job and run id), checked where the type says it may be missing."""
    if value is None:
        raise InvalidInput(f"the event has no {what}.")
    return value


def _run_event(
    group: _Group,
    event: OlEvent,
    run_id: uuid.UUID,
    ol_job: OlJob,
    job: _JobState,
    inputs: Sequence[uuid.UUID],
    outputs: Sequence[uuid.UUID],
) -> None:
    connection, now = group.connection, group.now
    actions = ACTIONS[event.event_type]
    run, created = _event_run(group, event, run_id, ol_job, job, inputs, outputs)
    if event.parent is not None:
        starts = actions[:1] == (RunAction.START,)
        _link_parent(group, run.id, job.id, event.parent, event.event_time if starts else None)
    state = run.state
    if state.is_terminal:
        return  # a late event never reopens a finished run
    tracked = group.run_io.get(run.id)
    if created:
        group.run_io[run.id] = (set(inputs), set(outputs))
    else:
        record_run_io(connection, run, RunIoRole.INPUT, _entries(event.inputs, inputs, run.lot), now)
        record_run_io(connection, run, RunIoRole.OUTPUT, _entries(event.outputs, outputs, run.lot), now)
        if tracked is not None:
            tracked[0].update(inputs)
            tracked[1].update(outputs)
    _record_io_facets(connection, run, event, inputs, outputs)
    _version_input_facets(connection, run.id, event.inputs, inputs)
    new_version = None
    if event.event_type in TERMINAL_EVENTS:
        all_inputs, all_outputs = group.io_dataset_ids(run.id)
        version = group.set_job_version(job, ol_job, all_inputs, all_outputs)
        new_version = version if version != run.job_version_id else None
    # The locked row, as long as it says what the run's state is.
    fresh: StoredRun | None = run
    for action in actions:
        if plan_transition(state, action).changes:  # skip the repeats: they would change nothing
            if action is RunAction.START:
                group.run_io.pop(run.id, None)  # starting declares its job version's I/O too
            state = apply_transition(
                connection,
                run.id,
                action,
                event.event_time,
                locked=fresh,
                job_version_id=new_version,
                version_basis=group.version_basis,
            )
            fresh, new_version = None, None
    if new_version is not None:
        # A terminal event always moves a run that has not ended, which writes the new job version.
        raise RuntimeError(f"run {run_id}: a terminal event changed no state; its job version is unwritten")
    if state is RunState.RUNNING and is_streaming(job.facets):
        _stream_version(group, ol_job, job, run)
    elif created and state is run.state:
        group.runs[run.id] = run  # as created: the run's next event in the group locks no row


def _event_run(
    group: _Group,
    event: OlEvent,
    run_id: uuid.UUID,
    ol_job: OlJob,
    job: _JobState,
    inputs: Sequence[uuid.UUID],
    outputs: Sequence[uuid.UUID],
) -> tuple[StoredRun, bool]:
    """The event's run, locked, with the event's run facets; and whether the event created it."""
    if event.event_type in TERMINAL_EVENTS and group.may_be_claimed(run_id):
        claims.refuse_ending_claimed_run(group.connection, run_id, group.now)  # before the run's lock
    found = group.locked_run(run_id)
    if found is None:
        return _create_run(group, event, run_id, job, inputs, outputs), True
    if found.job_id != job.id:
        raise Conflict(f"Run {run_id} belongs to another job, not {ol_job.namespace}:{ol_job.name}.")
    if event.run_facets:
        runs.merge_run_facets(group.connection, found, event.run_facets, group.now)
    return found, False


def _create_run(
    group: _Group,
    event: OlEvent,
    run_id: uuid.UUID,
    job: _JobState,
    inputs: Sequence[uuid.UUID],
    outputs: Sequence[uuid.UUID],
) -> StoredRun:
    """The run of an unknown run id. No job version yet: its inputs and outputs are what its events
    report. An event that starts the run creates it started (one write of the run, not two)."""
    lot = _run_lot(event.outputs)
    return create_run(
        group.connection,
        run_id=run_id,
        job_id=job.id,
        job_version_id=None,
        lot=lot,
        inputs=_entries(event.inputs, inputs, lot),
        outputs=_entries(event.outputs, outputs, lot),
        started_at=event.event_time if ACTIONS[event.event_type][:1] == (RunAction.START,) else None,
        nominal_start_time=event.nominal_start,
        nominal_end_time=event.nominal_end,
        facets=event.run_facets,
    )


def _run_lot(outputs: Sequence[OlDataset]) -> str:
    """The lot a run writes, when its outputs name one (lotline's own events carry it in the
    ``subset`` facet); ``''`` otherwise: the dataset as a whole."""
    lots = {lot for d in outputs for lot in d.lots}
    return lots.pop() if len(lots) == 1 else ""


def _entries(found: Sequence[OlDataset], ids: Sequence[uuid.UUID], lot: str) -> list[tuple[uuid.UUID, str]]:
    """(dataset, lot) of each input or output: the lots its ``subset`` facet names, else the run's."""
    return [(d_id, named) for d, d_id in zip(found, ids, strict=True) for named in (d.lots or (lot,))]


def _record_io_facets(
    connection: Connection,
    run: StoredRun,
    event: OlEvent,
    inputs: Sequence[uuid.UUID],
    outputs: Sequence[uuid.UUID],
) -> None:
    """The quality results the event reported for each input and output, kept per run and dataset
    lot, so that a version carries the results of the runs that wrote or read it (an output's are
    its version's when the run ends), never another's. Only those: anything else would cost every
    event with input/output facets (lotline's own carry ``subset``) two statements per dataset."""
    for role, found, ids in (
        (RunIoRole.INPUT, event.inputs, inputs),
        (RunIoRole.OUTPUT, event.outputs, outputs),
    ):
        for dataset, dataset_id in zip(found, ids, strict=True):
            if dataset.quality:
                lots = dataset.lots or (run.lot,)
                runs.merge_io_facets(connection, role, run.id, dataset_id, lots, dataset.quality)


def _version_input_facets(
    connection: Connection, run_id: uuid.UUID, found: Sequence[OlDataset], ids: Sequence[uuid.UUID]
) -> None:
    """An input's dataset facets go to the version the run reads, as Marquez keeps them
    (DatasetIntegrationTest.testApp_getTableVersions): a version's facets are the union of the
    dataset facets of the events that wrote and read it."""
    facetted = {dataset_id: d.facets for d, dataset_id in zip(found, ids, strict=True) if d.facets}
    if not facetted:
        return
    for dataset_id, _lot, version_id in runs.pinned_inputs(connection, [run_id])[run_id]:
        if version_id is not None and dataset_id in facetted:
            versions.merge_facets(connection, version_id, facetted[dataset_id])


def _stream_version(group: _Group, ol_job: OlJob, job: _JobState, run: StoredRun) -> None:
    """A streaming job's run may never end: its job version (and so the graph's edges) follows
    what the run has reported so far while it runs, as Marquez does. A repeat adds no version (the
    id is derived from the content); a new input or output does. Dataset versions still wait for
    the run's outcome (SPEC §3)."""
    all_inputs, all_outputs = group.io_dataset_ids(run.id)
    version = group.set_job_version(job, ol_job, all_inputs, all_outputs)
    if version != run.job_version_id:
        runs.set_job_version(group.connection, run.id, version, group.now)


def _link_parent(
    group: _Group, run_id: uuid.UUID, job_id: uuid.UUID, parent: OlParent, started_at: datetime | None
) -> None:
    """The parent facet links child to parent, run and job (Marquez's ``parentJobName``, kept when
    a later event has none); an unknown parent run (and job) is created for it, RUNNING since
    ``started_at`` when the child's event starts it."""
    connection, now = group.connection, group.now
    parent_job = jobs.ensure_job(
        connection, group.namespace(parent.job_namespace), parent.job_name, "BATCH", now
    )
    if parent_job != job_id:
        jobs.set_parent_job(connection, job_id, parent_job)
    group.unclaimed.discard(run_id)  # its parent's claim, if it has one, is now its own
    group.runs.pop(parent.run_id, None)
    if not runs.run_exists(connection, parent.run_id):
        # Known only from its child: started by a child's START, as Marquez records it
        # (OpenLineageIntegrationTest...WithParentOnStartEventOnly); NEW otherwise.
        create_run(
            connection,
            run_id=parent.run_id,
            job_id=parent_job,
            job_version_id=None,
            lot="",
            inputs=(),
            outputs=(),
            started_at=started_at,
        )
    if run_id in runs.ancestors(connection, parent.run_id):
        raise Conflict(f"Run {parent.run_id} descends from run {run_id}: parents cannot form a cycle.")
    runs.set_parent(connection, run_id, parent.run_id, now)
