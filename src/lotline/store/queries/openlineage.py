"""Statements only OpenLineage ingestion needs: lock-free "ensure" inserts and facet merges.

Ingestion runs many events concurrently; creating a namespace or a parent job that already
exists must not take a row lock (an UPDATE would), or unrelated events would queue behind it.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import Connection, select, update

from lotline.domain.model import JsonObject
from lotline.store.dialect import insert_ignoring_conflicts
from lotline.store.schema import jobs, namespaces, run_inputs, run_outputs, runs
from lotline.store.types import json_or_empty


def ensure_namespace(connection: Connection, name: str, now: datetime) -> uuid.UUID:
    insert_ignoring_conflicts(
        connection,
        namespaces,
        [{"id": uuid.uuid4(), "name": name, "created_at": now, "updated_at": now}],
        ["name"],
    )
    found: uuid.UUID = connection.execute(
        select(namespaces.c.id).where(namespaces.c.name == name)
    ).scalar_one()
    return found


def ensure_job(
    connection: Connection, namespace_id: uuid.UUID, name: str, type_: str, now: datetime
) -> uuid.UUID:
    insert_ignoring_conflicts(
        connection,
        jobs,
        [
            {
                "id": uuid.uuid4(),
                "namespace_id": namespace_id,
                "name": name,
                "type": type_,
                "created_at": now,
                "updated_at": now,
            }
        ],
        ["namespace_id", "name"],
    )
    found: uuid.UUID = connection.execute(
        select(jobs.c.id).where(jobs.c.namespace_id == namespace_id, jobs.c.name == name)
    ).scalar_one()
    return found


def merge_run_facets(connection: Connection, run_id: uuid.UUID, facets: JsonObject, now: datetime) -> None:
    """Later facets of one name replace earlier ones; others accumulate (caller holds the run lock)."""
    if not facets:
        return
    current = connection.execute(select(runs.c.facets).where(runs.c.id == run_id)).scalar()
    connection.execute(
        update(runs)
        .where(runs.c.id == run_id)
        .values(facets={**json_or_empty(current), **facets}, updated_at=now)
    )


def merge_job_facets(connection: Connection, job_id: uuid.UUID, facets: JsonObject) -> None:
    if not facets:
        return
    current = connection.execute(select(jobs.c.facets).where(jobs.c.id == job_id)).scalar()
    connection.execute(
        update(jobs).where(jobs.c.id == job_id).values(facets={**json_or_empty(current), **facets})
    )


def job_facets(connection: Connection, job_ids: list[uuid.UUID]) -> dict[uuid.UUID, JsonObject]:
    rows = connection.execute(select(jobs.c.id, jobs.c.facets).where(jobs.c.id.in_(job_ids))).all()
    return {r.id: json_or_empty(r.facets) for r in rows}


def run_io_dataset_ids(connection: Connection, run_id: uuid.UUID) -> tuple[list[uuid.UUID], list[uuid.UUID]]:
    """The datasets a run has reported reading and writing so far (any lot)."""
    inputs = connection.execute(
        select(run_inputs.c.dataset_id).where(run_inputs.c.run_id == run_id)
    ).scalars()
    outputs = connection.execute(
        select(run_outputs.c.dataset_id).where(run_outputs.c.run_id == run_id)
    ).scalars()
    return sorted(set(inputs)), sorted(set(outputs))
