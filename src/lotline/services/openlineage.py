"""OpenLineage ingestion (SPEC §6): one event, one transaction, mapped onto the run state machine.

Events of one run accumulate: inputs and outputs are recorded before the run's transition in
the same transaction, so a COMPLETE that reports outputs versions them at once. A repeat of an
event already stored changes nothing; an event for a run that has ended is stored and otherwise
ignored, so a late START never reopens a finished run.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Connection

from lotline.domain.errors import Conflict
from lotline.domain.model import JsonObject, Page
from lotline.domain.openlineage import (
    ACTIONS,
    TERMINAL_EVENTS,
    EventKind,
    OlDataset,
    OlEvent,
    OlJob,
    parse_event,
)
from lotline.domain.runs import RunState
from lotline.domain.versions import job_version_id
from lotline.services import _common
from lotline.services.recording import apply_transition, record_run_io
from lotline.store.engine import Store
from lotline.store.queries import catalog, datasets, events, graph, jobs, runs
from lotline.store.schema import run_inputs, run_outputs
from lotline.store.types import utcnow


def event_key(payload: JsonObject) -> str:
    """Identity of an event for de-duplication: its canonical JSON."""
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class OpenLineageService:
    def __init__(self, store: Store) -> None:
        self._store = store

    def ingest(self, payload: JsonObject) -> bool:
        """Apply one event; False when the identical event was already applied (nothing changes)."""
        event = parse_event(payload)
        with self._store.write() as connection:
            now = utcnow()
            fresh = events.insert_event(
                connection,
                event_key=event_key(payload),
                event_type=event.event_type if event.kind is EventKind.RUN else None,
                event_time=event.event_time,
                run_id=event.run_id,
                job_namespace=event.job.namespace if event.job else None,
                job_name=event.job.name if event.job else None,
                payload=payload,
                now=now,
            )
            if fresh:
                _apply(connection, event, now)
            return fresh

    def job_facets(self, namespace: str, job: str) -> JsonObject:
        """Facets OpenLineage events reported for the job, merged by facet name."""
        with self._store.read() as connection:
            found = graph.job_id(connection, namespace, job)
            return jobs.job_facets(connection, [found]).get(found, {}) if found else {}

    def list_events(
        self, before: datetime | None = None, after: datetime | None = None, limit: int = 100, offset: int = 0
    ) -> Page[JsonObject]:
        _common.check_page(limit, offset)
        _common.check_aware("before", before)
        _common.check_aware("after", after)
        with self._store.read() as connection:
            return events.list_events(connection, before, after, limit, offset)


def _apply(connection: Connection, event: OlEvent, now: datetime) -> None:
    if event.kind is EventKind.DATASET:
        assert event.dataset is not None
        _dataset(connection, event.dataset, now)
        return
    assert event.job is not None
    # Sorted, so that concurrent events lock dataset rows in one order (no deadlocks).
    inputs = _datasets(connection, event.inputs, now)
    outputs = _datasets(connection, event.outputs, now)
    job_id = _job(connection, event.job, now)
    if event.kind is EventKind.JOB:
        _set_job_version(connection, job_id, event.job, inputs, outputs, now)
        return
    _run_event(connection, event, job_id, inputs, outputs, now)


def _datasets(connection: Connection, found: Sequence[OlDataset], now: datetime) -> list[uuid.UUID]:
    ordered = sorted(found, key=lambda d: (d.namespace, d.name))
    ids = {(d.namespace, d.name): _dataset(connection, d, now) for d in ordered}
    return [ids[(d.namespace, d.name)] for d in found]


def _dataset(connection: Connection, dataset: OlDataset, now: datetime) -> uuid.UUID:
    namespace_id = catalog.ensure_namespace(connection, dataset.namespace, now)
    source_id = None
    if dataset.source is not None:
        name, uri = dataset.source
        source_id = catalog.source_id(connection, name)
        if source_id is None:
            kind = uri.split(":", 1)[0].upper() if uri and ":" in uri else "UNKNOWN"
            catalog.upsert_source(connection, name, kind[:64] or "UNKNOWN", uri, None, now)
            source_id = catalog.source_id(connection, name)
    dataset_id = datasets.upsert_dataset(
        connection,
        namespace_id,
        dataset.name,
        type_="DB_TABLE",
        physical_name=None,
        source_id=source_id,
        description=None,
        facets=dataset.facets,
        now=now,
    )
    if dataset.fields is not None:
        datasets.replace_fields(connection, dataset_id, dataset.fields)
    return dataset_id


def _job(connection: Connection, job: OlJob, now: datetime) -> uuid.UUID:
    namespace_id = catalog.ensure_namespace(connection, job.namespace, now)
    job_id = jobs.upsert_job(
        connection, namespace_id, job.name, type_=job.type, description=job.description, now=now
    )
    jobs.merge_job_facets(connection, job_id, job.facets)
    return job_id


def _set_job_version(
    connection: Connection,
    job_id: uuid.UUID,
    job: OlJob,
    inputs: Sequence[uuid.UUID],
    outputs: Sequence[uuid.UUID],
    now: datetime,
) -> uuid.UUID:
    refs = datasets.dataset_refs(connection, [*inputs, *outputs])
    version = job_version_id(
        job.namespace,
        job.name,
        job.location,
        [f"{refs[d].namespace}:{refs[d].name}" for d in inputs],
        [f"{refs[d].namespace}:{refs[d].name}" for d in outputs],
    )
    jobs.set_current_version(
        connection, job_id, version, location=job.location, inputs=inputs, outputs=outputs, now=now
    )
    return version


def _run_event(
    connection: Connection,
    event: OlEvent,
    job_id: uuid.UUID,
    inputs: Sequence[uuid.UUID],
    outputs: Sequence[uuid.UUID],
    now: datetime,
) -> None:
    assert event.run_id is not None and event.job is not None
    run = runs.lock_run(connection, event.run_id)
    if run is None:
        # No job version yet: the run's inputs and outputs are what its events report.
        runs.insert_run(
            connection,
            run_id=event.run_id,
            job_id=job_id,
            job_version_id=None,
            parent_run_id=None,
            lot="",
            nominal_start_time=event.nominal_start,
            nominal_end_time=event.nominal_end,
            args={},
            facets={},
            now=now,
        )
        run = runs.lock_run(connection, event.run_id)
        assert run is not None
    elif run.job_id != job_id:
        raise Conflict(
            f"Run {event.run_id} belongs to another job, not {event.job.namespace}:{event.job.name}."
        )
    runs.merge_run_facets(connection, run.id, event.run_facets, now)
    if event.parent is not None:
        _link_parent(connection, run.id, event, now)
    if RunState(run.state).is_terminal:
        return
    record_run_io(connection, run, run_inputs, [(d, run.lot) for d in inputs], now)
    record_run_io(connection, run, run_outputs, [(d, run.lot) for d in outputs], now)
    if event.event_type in TERMINAL_EVENTS:
        all_inputs, all_outputs = runs.run_io_dataset_ids(connection, run.id)
        version = _set_job_version(connection, job_id, event.job, all_inputs, all_outputs, now)
        runs.set_job_version(connection, run.id, version, now)
    for action in ACTIONS[event.event_type]:
        apply_transition(connection, run.id, action, event.event_time)


def _link_parent(connection: Connection, run_id: uuid.UUID, event: OlEvent, now: datetime) -> None:
    """The parent facet links child to parent; an unknown parent run is created (NEW) for it."""
    parent = event.parent
    assert parent is not None
    if not runs.run_exists(connection, parent.run_id):
        namespace_id = catalog.ensure_namespace(connection, parent.job_namespace, now)
        parent_job = jobs.ensure_job(connection, namespace_id, parent.job_name, "BATCH", now)
        runs.insert_run(
            connection,
            run_id=parent.run_id,
            job_id=parent_job,
            job_version_id=None,
            parent_run_id=None,
            lot="",
            nominal_start_time=None,
            nominal_end_time=None,
            args={},
            facets={},
            now=now,
        )
    if run_id in runs.ancestors(connection, parent.run_id):
        raise Conflict(f"Run {parent.run_id} descends from run {run_id}: parents cannot form a cycle.")
    runs.set_parent(connection, run_id, parent.run_id, now)
