"""Jobs and job versions (a version is fixed by inputs, outputs and code location)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from sqlalchemy import (
    Connection,
    Row,
    Select,
    String,
    Uuid,
    bindparam,
    column,
    func,
    literal,
    or_,
    select,
    union_all,
    update,
)

from lotline.domain.model import DatasetRef, Job, JobRef, JobVersion, JsonObject, Page, RunIoRole
from lotline.store.dialect import (
    fast_path,
    insert_ignoring_conflicts,
    per_dialect,
    upsert_insert,
    upsert_returning,
)
from lotline.store.schema import (
    datasets,
    job_tags,
    job_version_io,
    job_version_reads,
    job_versions,
    jobs,
    namespaces,
    tags,
)
from lotline.store.types import JsonDocument, json_or_empty

INPUT = RunIoRole.INPUT.value
OUTPUT = RunIoRole.OUTPUT.value
#: The role, in the lineage graph's edges, of a dataset read without being declared.
READ = "READ"


@dataclass(frozen=True, slots=True)
class StoredJob:
    """What writers need of a job's row (deleted or not): its id, current version and facets."""

    id: uuid.UUID
    current_version_id: uuid.UUID | None
    facets: JsonObject


def upsert_job(
    connection: Connection,
    namespace_id: uuid.UUID,
    name: str,
    *,
    type_: str,
    description: str | None,
    now: datetime,
) -> StoredJob:
    """Create the job or update its type and description, in one statement; the job as it is now."""
    changes = ["type", "updated_at"] + (["description"] if description is not None else [])
    row = upsert_returning(
        connection,
        jobs,
        _new_job(namespace_id, name, type_, description, now),
        ["namespace_id", "name"],
        changes,
        ["id", "current_version_id", "facets"],
        # Writing a deleted job brings it back, as in Marquez.
        constants={"deleted_at": None},
    )
    return StoredJob(row.id, row.current_version_id, json_or_empty(row.facets))


def _new_job(
    namespace_id: uuid.UUID, name: str, type_: str, description: str | None, now: datetime
) -> dict[str, Any]:
    """The row of a job first written now (an upsert keeps the stored id and creation time)."""
    return {
        "id": uuid.uuid4(),
        "namespace_id": namespace_id,
        "name": name,
        "type": type_,
        "description": description,
        "created_at": now,
        "updated_at": now,
    }


def upsert_jobs(
    connection: Connection, rows: Sequence[tuple[uuid.UUID, str, str, str | None]], now: datetime
) -> dict[tuple[uuid.UUID, str], StoredJob]:
    """``upsert_job`` for each (namespace id, name, type, description) of ``rows``, in one
    multi-row statement (a projection group's jobs): a description left out (None) keeps the stored
    one. The jobs as they are now, by (namespace id, name); a name must appear once."""
    if not rows:
        return {}
    statement = upsert_insert(connection, jobs).values(
        [
            _new_job(namespace_id, name, type_, description, now)
            for namespace_id, name, type_, description in rows
        ]
    )
    changes = {
        "type": statement.excluded.type,
        "updated_at": statement.excluded.updated_at,
        "description": func.coalesce(statement.excluded.description, jobs.c.description),
        # Writing a deleted job brings it back, as in Marquez.
        "deleted_at": None,
    }
    found = connection.execute(
        statement.on_conflict_do_update(index_elements=["namespace_id", "name"], set_=changes).returning(
            jobs.c.namespace_id, jobs.c.name, jobs.c.id, jobs.c.current_version_id, jobs.c.facets
        )
    )
    return {
        (row.namespace_id, row.name): StoredJob(row.id, row.current_version_id, json_or_empty(row.facets))
        for row in found
    }


def ensure_job(
    connection: Connection, namespace_id: uuid.UUID, name: str, type_: str, now: datetime
) -> uuid.UUID:
    """Create the job if absent, without updating (or row-locking) one that exists."""
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
        _JOB_ID, {"b_namespace_id": namespace_id, "b_name": name}
    ).scalar_one()
    return found


_JOB_ID = select(jobs.c.id).where(
    jobs.c.namespace_id == bindparam("b_namespace_id"), jobs.c.name == bindparam("b_name")
)
_UPDATE_JOB = update(jobs).where(jobs.c.id == bindparam("b_id"))
_SET_PARENT_JOB = (
    update(jobs)
    .where(
        jobs.c.id == bindparam("b_id"),
        or_(jobs.c.parent_job_id.is_(None), jobs.c.parent_job_id != bindparam("b_parent_job_id")),
    )
    .values(parent_job_id=bindparam("b_parent_job_id"))
)


def merge_job_facets(connection: Connection, job: StoredJob, facets: JsonObject) -> JsonObject:
    """Later facets of one name replace earlier ones; writes only when that changes anything.
    Returns the merged facets."""
    stored = job.facets
    merged = {**stored, **facets}
    if merged != stored:
        connection.execute(_UPDATE_JOB, {"b_id": job.id, "facets": merged})
    return merged


def job_facets(connection: Connection, job_ids: list[uuid.UUID]) -> dict[uuid.UUID, JsonObject]:
    rows = connection.execute(select(jobs.c.id, jobs.c.facets).where(jobs.c.id.in_(job_ids))).all()
    return {r.id: json_or_empty(r.facets) for r in rows}


def set_current_version(
    connection: Connection,
    job_id: uuid.UUID,
    version_id: uuid.UUID,
    *,
    location: str | None,
    inputs: Sequence[uuid.UUID],
    outputs: Sequence[uuid.UUID],
    now: datetime,
) -> None:
    """Record the job version (once: its id is derived from its content) and make it current."""
    _set_current_version_rows(connection, _NewJobVersion(job_id, version_id, location, inputs, outputs, now))


def version_stamp(connection: Connection, job_id: uuid.UUID, now: datetime) -> datetime:
    """When a new version of the job is recorded: ``now``, or a microsecond after the job's newest
    version when the clock has not moved past it (a test's clock that stands still, a clock set
    back), so that a job's versions number in the order they came (``gaps.job_versions_of``)."""
    newest = connection.execute(
        select(func.max(job_versions.c.created_at)).where(job_versions.c.job_id == job_id)
    ).scalar()
    return now if newest is None or newest < now else newest + timedelta(microseconds=1)


class _NewJobVersion(NamedTuple):
    job_id: uuid.UUID
    version_id: uuid.UUID
    location: str | None
    inputs: Sequence[uuid.UUID]
    outputs: Sequence[uuid.UUID]
    now: datetime


def _set_current_version_portable(connection: Connection, new: _NewJobVersion) -> None:
    """The version's row, its inputs and outputs (each once), then the job's current version."""
    job_id, version_id, location, inputs, outputs, now = new
    insert_ignoring_conflicts(
        connection,
        job_versions,
        [{"id": version_id, "job_id": job_id, "location": location, "created_at": now}],
        ["id"],
    )
    io = [{"job_version_id": version_id, "dataset_id": d, "role": INPUT} for d in inputs]
    io += [{"job_version_id": version_id, "dataset_id": d, "role": OUTPUT} for d in outputs]
    insert_ignoring_conflicts(connection, job_version_io, io, ["job_version_id", "dataset_id", "role"])
    connection.execute(_UPDATE_JOB, {"b_id": job_id, "current_version_id": version_id})


def _set_current_version_postgresql(connection: Connection, new: _NewJobVersion) -> None:
    """The same in one statement (data-modifying ``WITH``s, the inputs and outputs as one JSON document)."""
    io_rows = [{"dataset_id": str(d), "role": INPUT} for d in new.inputs]
    io_rows += [{"dataset_id": str(d), "role": OUTPUT} for d in new.outputs]
    parameters = {
        "v_id": new.version_id,
        "v_job_id": new.job_id,
        "v_location": new.location,
        "v_created_at": new.now,
        "v_io": io_rows,
    }
    connection.execute(_set_current_version(connection), parameters)


_set_current_version_rows = fast_path(_set_current_version_portable, _set_current_version_postgresql)


@per_dialect
def _set_current_version(connection: Connection) -> Any:
    """PostgreSQL: ``set_current_version`` in one statement (the foreign keys are checked at its end)."""
    version = (
        upsert_insert(connection, job_versions)
        .values({c.name: bindparam(f"v_{c.name}", type_=c.type) for c in job_versions.c})
        .on_conflict_do_nothing(index_elements=["id"])
        .cte("version")
    )
    rows = (
        func.jsonb_to_recordset(bindparam("v_io", type_=JsonDocument))
        .table_valued(column("dataset_id", Uuid), column("role", String))
        .render_derived(with_types=True)
    )
    io = (
        upsert_insert(connection, job_version_io)
        .from_select(
            ["job_version_id", "dataset_id", "role"],
            select(bindparam("v_id", type_=Uuid), rows.c.dataset_id, rows.c.role),
        )
        .on_conflict_do_nothing(index_elements=["job_version_id", "dataset_id", "role"])
        .cte("io")
    )
    return (
        update(jobs)
        .where(jobs.c.id == bindparam("v_job_id"))
        .values(current_version_id=bindparam("v_id"))
        .add_cte(version, io)
    )


_STORED_JOB = (
    select(jobs.c.id, jobs.c.current_version_id, jobs.c.facets)
    .join(namespaces, namespaces.c.id == jobs.c.namespace_id)
    .where(namespaces.c.name == bindparam("b_namespace"), jobs.c.name == bindparam("b_name"))
)


def job_row(connection: Connection, namespace: str, name: str) -> StoredJob | None:
    """The job, deleted or not (a deleted job's runs are still recorded and read)."""
    row = connection.execute(_STORED_JOB, {"b_namespace": namespace, "b_name": name}).first()
    return None if row is None else StoredJob(row.id, row.current_version_id, json_or_empty(row.facets))


def _job_query() -> Select[Any]:
    return select(jobs, namespaces.c.name.label("namespace")).join(
        namespaces, namespaces.c.id == jobs.c.namespace_id
    )


_Refs = tuple[tuple[DatasetRef, ...], tuple[DatasetRef, ...], tuple[DatasetRef, ...]]


def _refs_of(connection: Connection, version_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, _Refs]:
    """(inputs, outputs, undeclared inputs) of many job versions in one statement; the inputs
    include the undeclared ones."""
    if not version_ids:
        return {}
    declared = select(
        job_version_io.c.job_version_id, job_version_io.c.role, job_version_io.c.dataset_id
    ).where(job_version_io.c.job_version_id.in_(list(version_ids)))
    read = select(
        job_version_reads.c.job_version_id, literal(READ).label("role"), job_version_reads.c.dataset_id
    ).where(job_version_reads.c.job_version_id.in_(list(version_ids)))
    io = union_all(declared, read).subquery()
    rows = connection.execute(
        select(io.c.job_version_id, io.c.role, namespaces.c.name.label("namespace"), datasets.c.name)
        .join(datasets, datasets.c.id == io.c.dataset_id)
        .join(namespaces, namespaces.c.id == datasets.c.namespace_id)
        .order_by(namespaces.c.name, datasets.c.name)
    ).all()
    found: dict[uuid.UUID, _Refs] = {}
    for version_id in version_ids:
        mine = [r for r in rows if r.job_version_id == version_id]
        found[version_id] = (
            tuple(DatasetRef(r.namespace, r.name) for r in mine if r.role in (INPUT, READ)),
            tuple(DatasetRef(r.namespace, r.name) for r in mine if r.role == OUTPUT),
            tuple(DatasetRef(r.namespace, r.name) for r in mine if r.role == READ),
        )
    return found


def add_reads(
    connection: Connection,
    version_id: uuid.UUID,
    dataset_ids: Sequence[uuid.UUID],
    run_id: uuid.UUID,
    now: datetime,
) -> None:
    """Record datasets the version's run read without declaring them (once per version)."""
    rows = [
        {"job_version_id": version_id, "dataset_id": d, "run_id": run_id, "recorded_at": now}
        for d in dataset_ids
    ]
    insert_ignoring_conflicts(connection, job_version_reads, rows, ["job_version_id", "dataset_id"])


def hide_job(connection: Connection, job_id: uuid.UUID, now: datetime) -> None:
    """Soft delete (Marquez ``DELETE job``): hidden from reads and the graph until written again."""
    connection.execute(update(jobs).where(jobs.c.id == job_id).values(deleted_at=now))


def set_parent_job(connection: Connection, job_id: uuid.UUID, parent_job_id: uuid.UUID) -> None:
    """The job's parent job (from a parent facet); writes only when it changes."""
    connection.execute(_SET_PARENT_JOB, {"b_id": job_id, "b_parent_job_id": parent_job_id})


def _jobs(connection: Connection, rows: Sequence[Row[Any]]) -> list[Job]:
    """Jobs from their rows (with ``namespace``), in a fixed number of statements whatever their
    number: their current versions' inputs and outputs and locations, parents and tags."""
    version_ids = [r.current_version_id for r in rows if r.current_version_id is not None]
    refs = _refs_of(connection, version_ids)
    locations = (
        dict(
            connection.execute(
                select(job_versions.c.id, job_versions.c.location).where(job_versions.c.id.in_(version_ids))
            ).all()
        )
        if version_ids
        else {}
    )
    parent_ids = [r.parent_job_id for r in rows if r.parent_job_id is not None]
    parents = (
        {
            r.id: JobRef(r.namespace, r.name)
            for r in connection.execute(
                select(jobs.c.id, jobs.c.name, namespaces.c.name.label("namespace"))
                .join(namespaces, namespaces.c.id == jobs.c.namespace_id)
                .where(jobs.c.id.in_(parent_ids))
            )
        }
        if parent_ids
        else {}
    )
    tag_names: dict[uuid.UUID, list[str]] = {}
    for job_id, name in (
        connection.execute(
            select(job_tags.c.job_id, tags.c.name)
            .join(tags, tags.c.id == job_tags.c.tag_id)
            .where(job_tags.c.job_id.in_([r.id for r in rows]))
            .order_by(tags.c.name)
        )
        if rows
        else ()
    ):
        tag_names.setdefault(job_id, []).append(name)
    found = []
    for r in rows:
        inputs, outputs, undeclared = refs.get(r.current_version_id, ((), (), ()))
        found.append(
            Job(
                namespace=r.namespace,
                name=r.name,
                type=r.type,
                description=r.description,
                location=locations.get(r.current_version_id),
                inputs=inputs,
                outputs=outputs,
                undeclared_inputs=undeclared,
                current_version=r.current_version_id,
                created_at=r.created_at,
                updated_at=r.updated_at,
                parent=parents.get(r.parent_job_id),
                tags=tuple(tag_names.get(r.id, ())),
                facets=json_or_empty(r.facets),
            )
        )
    return found


def get_job(connection: Connection, namespace: str, name: str) -> Job | None:
    """The job, unless it is deleted."""
    row = connection.execute(
        _job_query().where(namespaces.c.name == namespace, jobs.c.name == name, jobs.c.deleted_at.is_(None))
    ).first()
    return _jobs(connection, [row])[0] if row is not None else None


def list_jobs(connection: Connection, namespace: str | None, limit: int, offset: int) -> Page[Job]:
    query = _job_query().where(jobs.c.deleted_at.is_(None))
    count = (
        select(func.count())
        .select_from(jobs)
        .join(namespaces, namespaces.c.id == jobs.c.namespace_id)
        .where(jobs.c.deleted_at.is_(None))
    )
    if namespace is not None:
        query = query.where(namespaces.c.name == namespace)
        count = count.where(namespaces.c.name == namespace)
    rows = connection.execute(query.order_by(namespaces.c.name, jobs.c.name).limit(limit).offset(offset))
    return Page(_jobs(connection, rows.all()), connection.execute(count).scalar_one())


def _job_versions(
    connection: Connection, rows: Sequence[Row[Any]], namespace: str, job: str
) -> list[JobVersion]:
    """Versions from their rows, their inputs and outputs read in one statement."""
    refs = _refs_of(connection, [r.id for r in rows])
    return [
        JobVersion(r.id, namespace, job, r.location, *refs[r.id][:2], r.created_at, refs[r.id][2])
        for r in rows
    ]


def get_job_version(
    connection: Connection, job_id: uuid.UUID, namespace: str, job: str, version_id: uuid.UUID
) -> JobVersion | None:
    row = connection.execute(
        select(job_versions).where(job_versions.c.job_id == job_id, job_versions.c.id == version_id)
    ).first()
    return _job_versions(connection, [row], namespace, job)[0] if row else None


def list_job_versions(
    connection: Connection, job_id: uuid.UUID, namespace: str, job: str, limit: int, offset: int
) -> Page[JobVersion]:
    rows = connection.execute(
        select(job_versions)
        .where(job_versions.c.job_id == job_id)
        .order_by(job_versions.c.created_at.desc())
        .limit(limit)
        .offset(offset)
    ).all()
    total = connection.execute(
        select(func.count()).select_from(job_versions).where(job_versions.c.job_id == job_id)
    ).scalar_one()
    return Page(_job_versions(connection, rows, namespace, job), total)
