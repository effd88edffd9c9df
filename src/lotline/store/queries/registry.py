"""The lot-job registry (SPEC §4): which jobs take part in lot coordination (``lot_jobs``), their
first output, lot mapping and hold flag, their outputs (``lot_job_outputs``, the first included)
and their inputs (``lot_job_inputs``)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, bindparam, delete, insert, select, update

from lotline.store.dialect import try_exclusive_lock, upsert_insert
from lotline.store.schema import datasets, jobs, lot_job_inputs, lot_job_outputs, lot_jobs, namespaces

#: Key of the advisory lock that makes checking a new output's storage folder against the others
#: and registering it one step (PostgreSQL; SQLite's write lock does it there).
STORAGE_LOCK = 7810735312196363878


@dataclass(frozen=True, slots=True)
class LotJobRow:
    """A job's entry in the registry (its ``lot_jobs`` row, without its inputs)."""

    output_dataset_id: uuid.UUID
    lot_mapping: str | None
    held: bool
    #: The entry's stamp: it changes whenever the entry does.
    updated_at: datetime


_LOT_JOB_COLUMNS = (
    lot_jobs.c.output_dataset_id,
    lot_jobs.c.lot_mapping,
    lot_jobs.c.held,
    lot_jobs.c.updated_at,
)
_LOT_JOB = select(*_LOT_JOB_COLUMNS).where(lot_jobs.c.job_id == bindparam("b_job"))


def lot_job(connection: Connection, job_id: uuid.UUID) -> LotJobRow | None:
    """The job's entry in the registry, or None if it takes no part in coordination."""
    row = connection.execute(_LOT_JOB, {"b_job": job_id}).first()
    return None if row is None else LotJobRow(*row)


@dataclass(frozen=True, slots=True)
class JobForClaims:
    """A job, its current version, and its registry entry (None: it takes no part in coordination)."""

    id: uuid.UUID
    current_version_id: uuid.UUID | None
    entry: LotJobRow | None


_JOB_FOR_CLAIMS = (
    select(jobs.c.id, jobs.c.current_version_id, lot_jobs.c.job_id.label("coordinated"), *_LOT_JOB_COLUMNS)
    .join(namespaces, namespaces.c.id == jobs.c.namespace_id)
    .outerjoin(lot_jobs, lot_jobs.c.job_id == jobs.c.id)
    .where(namespaces.c.name == bindparam("b_namespace"), jobs.c.name == bindparam("b_job"))
)


def job_for_claims(connection: Connection, namespace: str, job: str) -> JobForClaims | None:
    """A job by name with its registry entry and its current version: what a worker needs per
    claim, in one read."""
    row = connection.execute(_JOB_FOR_CLAIMS, {"b_namespace": namespace, "b_job": job}).first()
    if row is None:
        return None
    job_id, version_id, coordinated, *entry = row
    return JobForClaims(job_id, version_id, None if coordinated is None else LotJobRow(*entry))


_PRODUCER = select(lot_job_outputs.c.job_id).where(lot_job_outputs.c.dataset_id == bindparam("b_dataset"))


def producer_of(connection: Connection, dataset_id: uuid.UUID) -> uuid.UUID | None:
    return connection.execute(_PRODUCER, {"b_dataset": dataset_id}).scalar()


#: A job's input datasets by id (the order in which their rows are locked), and its output
#: datasets in declared order (the first carries the claim).
_JOB_DATASETS = {
    "inputs": select(lot_job_inputs.c.dataset_id)
    .where(lot_job_inputs.c.job_id == bindparam("b_job"))
    .order_by(lot_job_inputs.c.dataset_id),
    "outputs": select(lot_job_outputs.c.dataset_id)
    .where(lot_job_outputs.c.job_id == bindparam("b_job"))
    .order_by(lot_job_outputs.c.position),
}


def job_inputs(connection: Connection, job_id: uuid.UUID) -> list[uuid.UUID]:
    return list(connection.execute(_JOB_DATASETS["inputs"], {"b_job": job_id}).scalars())


def job_outputs(connection: Connection, job_id: uuid.UUID) -> list[uuid.UUID]:
    return list(connection.execute(_JOB_DATASETS["outputs"], {"b_job": job_id}).scalars())


def upsert_lot_job(
    connection: Connection,
    job_id: uuid.UUID,
    outputs: Sequence[uuid.UUID],
    inputs: Sequence[uuid.UUID],
    lot_mapping: str | None,
    now: datetime,
) -> None:
    """Register (or re-register) a job's outputs (the first carries the claim), inputs and lot
    mapping; keeps its hold flag. Built per call: registering is rare."""
    changes = {"output_dataset_id": outputs[0], "lot_mapping": lot_mapping, "updated_at": now}
    statement = upsert_insert(connection, lot_jobs).values(
        job_id=job_id, created_at=now, held=False, **changes
    )
    connection.execute(statement.on_conflict_do_update(index_elements=["job_id"], set_=changes))
    connection.execute(delete(lot_job_outputs).where(lot_job_outputs.c.job_id == job_id))
    rows = [{"job_id": job_id, "dataset_id": d, "position": n} for n, d in enumerate(outputs)]
    connection.execute(insert(lot_job_outputs), rows)
    connection.execute(delete(lot_job_inputs).where(lot_job_inputs.c.job_id == job_id))
    if inputs:
        connection.execute(insert(lot_job_inputs), [{"job_id": job_id, "dataset_id": d} for d in inputs])


_SET_HELD = (
    update(lot_jobs)
    .where(lot_jobs.c.job_id == bindparam("b_job"), lot_jobs.c.held == bindparam("b_was_held"))
    .values(held=bindparam("b_held"), updated_at=bindparam("b_now"))
)


def set_job_held(connection: Connection, job_id: uuid.UUID, held: bool, now: datetime) -> bool:
    """Hold or release a whole job; False if it already was in that state."""
    params = {"b_job": job_id, "b_was_held": not held, "b_held": held, "b_now": now}
    return connection.execute(_SET_HELD, params).rowcount == 1


_JOB_LABEL = (
    select(namespaces.c.name.label("namespace"), jobs.c.name)
    .join(namespaces, namespaces.c.id == jobs.c.namespace_id)
    .where(jobs.c.id == bindparam("b_job"))
)


def job_label(connection: Connection, job_id: uuid.UUID) -> str:
    row = connection.execute(_JOB_LABEL, {"b_job": job_id}).one()
    return f"{row.namespace}:{row.name}"


_PRODUCED = (
    select(namespaces.c.name.label("namespace"), datasets.c.name)
    .join(datasets, datasets.c.namespace_id == namespaces.c.id)
    .join(lot_job_outputs, lot_job_outputs.c.dataset_id == datasets.c.id)
    .order_by(namespaces.c.name, datasets.c.name)
)


def lock_storage(connection: Connection) -> None:
    """Take ``STORAGE_LOCK``: a registration that checks its output against ``produced_datasets``
    commits before the next one reads them."""
    try_exclusive_lock(connection, STORAGE_LOCK, wait=True)


def produced_datasets(connection: Connection) -> list[tuple[str, str]]:
    """(namespace, dataset) of every dataset a lot job produces: those with lots in storage."""
    return [(row.namespace, row.name) for row in connection.execute(_PRODUCED)]


@dataclass(frozen=True, slots=True)
class NamespaceLotJob:
    """A job of a namespace that takes part in coordination, with its inputs (dataset ids)."""

    job_id: uuid.UUID
    name: str
    entry: LotJobRow
    inputs: tuple[uuid.UUID, ...]
    outputs: tuple[uuid.UUID, ...]


_NAMESPACE_LOT_JOBS = (
    select(jobs.c.id, jobs.c.name, *_LOT_JOB_COLUMNS)
    .join(lot_jobs, lot_jobs.c.job_id == jobs.c.id)
    .join(namespaces, namespaces.c.id == jobs.c.namespace_id)
    .where(namespaces.c.name == bindparam("b_namespace"), jobs.c.deleted_at.is_(None))
    .order_by(jobs.c.name)
    .limit(bindparam("b_limit"))
)
_INPUTS_OF = (
    select(lot_job_inputs.c.job_id, lot_job_inputs.c.dataset_id)
    .where(lot_job_inputs.c.job_id.in_(bindparam("b_jobs", expanding=True)))
    .order_by(lot_job_inputs.c.job_id, lot_job_inputs.c.dataset_id)
)
_OUTPUTS_OF = (
    select(lot_job_outputs.c.job_id, lot_job_outputs.c.dataset_id)
    .where(lot_job_outputs.c.job_id.in_(bindparam("b_jobs", expanding=True)))
    .order_by(lot_job_outputs.c.job_id, lot_job_outputs.c.position)
)


_HELD_JOBS = (
    select(jobs.c.name)
    .join(lot_jobs, lot_jobs.c.job_id == jobs.c.id)
    .join(namespaces, namespaces.c.id == jobs.c.namespace_id)
    .where(namespaces.c.name == bindparam("b_namespace"), jobs.c.deleted_at.is_(None), lot_jobs.c.held)
    .order_by(jobs.c.name)
)


def held_job_names(connection: Connection, namespace: str) -> list[str]:
    """The namespace's held jobs by name: what a live page compares to the holds it shows."""
    return list(connection.scalars(_HELD_JOBS, {"b_namespace": namespace}))


def namespace_lot_jobs(connection: Connection, namespace: str, limit: int) -> list[NamespaceLotJob]:
    """The namespace's coordinated jobs by name (at most ``limit``), each with its inputs and
    outputs: what a page of lot health over a whole namespace reads, in three statements."""
    rows = connection.execute(_NAMESPACE_LOT_JOBS, {"b_namespace": namespace, "b_limit": limit}).all()
    inputs: dict[uuid.UUID, list[uuid.UUID]] = {}
    outputs: dict[uuid.UUID, list[uuid.UUID]] = {}
    if rows:
        params = {"b_jobs": [r[0] for r in rows]}
        for job_id, dataset_id in connection.execute(_INPUTS_OF, params):
            inputs.setdefault(job_id, []).append(dataset_id)
        for job_id, dataset_id in connection.execute(_OUTPUTS_OF, params):
            outputs.setdefault(job_id, []).append(dataset_id)
    return [
        NamespaceLotJob(
            job_id, name, LotJobRow(*entry), tuple(inputs.get(job_id, ())), tuple(outputs.get(job_id, ()))
        )
        for job_id, name, *entry in rows
    ]
