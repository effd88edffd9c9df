"""The lineage graph: which jobs touch which datasets, and the bulk loading of graph nodes.

A job's edges are those of its *current* version (``jobs.current_version_id`` ->
``job_version_io``, plus ``job_version_reads``: inputs its runs read without declaring them).
Both directions are one indexed join per BFS level: the dataset id indexes from datasets,
``jobs(current_version_id)`` + the primary keys from jobs. Nodes are then loaded with a fixed
number of queries, whatever the graph's size.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Connection, Select, Table, bindparam, literal, select, tuple_, union_all

from lotline.domain.model import Dataset, DatasetRef, FieldSpec, Job
from lotline.domain.versions import VersionState
from lotline.store.schema import (
    dataset_fields,
    dataset_versions,
    datasets,
    job_version_io,
    job_version_reads,
    job_versions,
    jobs,
    namespaces,
    sources,
)
from lotline.store.types import json_or_empty

#: (job id, dataset id, role INPUT/OUTPUT/READ)
EdgeRow = tuple[uuid.UUID, uuid.UUID, str]
#: Edge roles that point from the dataset to the job.
INPUT_ROLES = ("INPUT", "READ")
#: Keeps every IN list well below SQLite's bound-parameter limit.
_CHUNK = 5000


def _chunks(ids: Iterable[uuid.UUID]) -> Iterable[list[uuid.UUID]]:
    items = list(ids)
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]


def _edges() -> tuple[Any, Any]:
    """Every (job id, dataset id, role) of the jobs' current versions: declared io and reads."""
    declared = select(job_version_io.c.job_version_id, job_version_io.c.dataset_id, job_version_io.c.role)
    read = select(job_version_reads.c.job_version_id, job_version_reads.c.dataset_id, literal("READ"))
    io = union_all(declared, read).subquery()
    return io, (
        select(jobs.c.id, io.c.dataset_id, io.c.role)
        .join(jobs, jobs.c.current_version_id == io.c.job_version_id)
        .where(jobs.c.deleted_at.is_(None))
    )


def job_edges_of_datasets(connection: Connection, dataset_ids: Iterable[uuid.UUID]) -> list[EdgeRow]:
    """Edges of the jobs whose current version reads or writes any of these datasets."""
    io, edges = _edges()
    found: list[EdgeRow] = []
    for chunk in _chunks(dataset_ids):
        rows = connection.execute(edges.where(io.c.dataset_id.in_(chunk))).all()
        found += [(r[0], r[1], r[2]) for r in rows]
    return found


def dataset_edges_of_jobs(connection: Connection, job_ids: Iterable[uuid.UUID]) -> list[EdgeRow]:
    """Every input and output of the current versions of these jobs."""
    _, edges = _edges()
    found: list[EdgeRow] = []
    for chunk in _chunks(job_ids):
        rows = connection.execute(edges.where(jobs.c.id.in_(chunk))).all()
        found += [(r[0], r[1], r[2]) for r in rows]
    return found


def _live_id_by_name(table: Table) -> Select[tuple[uuid.UUID]]:
    """The id of a job or dataset by namespace and name, unless it is soft-deleted."""
    return (
        select(table.c.id)
        .join(namespaces, namespaces.c.id == table.c.namespace_id)
        .where(
            namespaces.c.name == bindparam("b_namespace"),
            table.c.name == bindparam("b_name"),
            table.c.deleted_at.is_(None),
        )
    )


_LIVE_JOB_ID = _live_id_by_name(jobs)
_LIVE_DATASET_ID = _live_id_by_name(datasets)


def job_id(connection: Connection, namespace: str, name: str) -> uuid.UUID | None:
    """A job that is not soft-deleted."""
    return _id_by_name(connection, _LIVE_JOB_ID, namespace, name)


def live_dataset_id(connection: Connection, namespace: str, name: str) -> uuid.UUID | None:
    """A dataset that is not soft-deleted."""
    return _id_by_name(connection, _LIVE_DATASET_ID, namespace, name)


def live_dataset_ids(
    connection: Connection, names: Iterable[tuple[str, str]]
) -> dict[tuple[str, str], uuid.UUID]:
    """The live datasets of these (namespace, name) pairs, by pair (column lineage names its
    datasets so); the unknown and the soft-deleted are absent."""
    pairs = sorted(set(names))
    found: dict[tuple[str, str], uuid.UUID] = {}
    for start in range(0, len(pairs), _CHUNK // 2):
        chunk = pairs[start : start + _CHUNK // 2]
        rows = connection.execute(
            select(namespaces.c.name, datasets.c.name, datasets.c.id)
            .join(namespaces, namespaces.c.id == datasets.c.namespace_id)
            .where(tuple_(namespaces.c.name, datasets.c.name).in_(chunk), datasets.c.deleted_at.is_(None))
        )
        found.update({(r[0], r[1]): r[2] for r in rows})
    return found


def _id_by_name(connection: Connection, statement: Any, namespace: str, name: str) -> uuid.UUID | None:
    found: uuid.UUID | None = connection.execute(
        statement, {"b_namespace": namespace, "b_name": name}
    ).scalar()
    return found


def load_datasets(connection: Connection, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, Dataset]:
    """Live (not soft-deleted) datasets with fields and current version, in three queries per chunk."""
    found: dict[uuid.UUID, Dataset] = {}
    for chunk in _chunks(ids):
        fields: dict[uuid.UUID, list[FieldSpec]] = {}
        for f in connection.execute(
            select(dataset_fields)
            .where(dataset_fields.c.dataset_id.in_(chunk))
            .order_by(dataset_fields.c.dataset_id, dataset_fields.c.position)
        ):
            fields.setdefault(f.dataset_id, []).append(FieldSpec(f.name, f.type, f.description))
        current: dict[uuid.UUID, uuid.UUID] = {}
        for v in connection.execute(
            select(dataset_versions.c.dataset_id, dataset_versions.c.id)
            .where(
                dataset_versions.c.dataset_id.in_(chunk),
                dataset_versions.c.state == VersionState.CURRENT.value,
            )
            .order_by(dataset_versions.c.version_number)
        ):
            current[v.dataset_id] = v.id  # ascending: the latest successful one wins (rule 7)
        for r in connection.execute(
            select(datasets, namespaces.c.name.label("namespace"), sources.c.name.label("source_name"))
            .join(namespaces, namespaces.c.id == datasets.c.namespace_id)
            .outerjoin(sources, sources.c.id == datasets.c.source_id)
            .where(datasets.c.id.in_(chunk), datasets.c.deleted_at.is_(None))
        ):
            found[r.id] = Dataset(
                namespace=r.namespace,
                name=r.name,
                type=r.type,
                physical_name=r.physical_name,
                source_name=r.source_name,
                description=r.description,
                fields=tuple(fields.get(r.id, ())),
                facets=json_or_empty(r.facets),
                created_at=r.created_at,
                updated_at=r.updated_at,
                current_version=current.get(r.id),
                schema_location=r.schema_location,
            )
    return found


def load_jobs(
    connection: Connection,
    ids: Sequence[uuid.UUID],
    edges: Sequence[EdgeRow],
    refs: dict[uuid.UUID, DatasetRef],
) -> dict[uuid.UUID, Job]:
    """Jobs with their current inputs and outputs, taken from edges the caller already fetched."""
    io: dict[uuid.UUID, tuple[list[DatasetRef], list[DatasetRef], list[DatasetRef]]] = {}
    for job, dataset, role in edges:
        if dataset in refs:
            lists = io.setdefault(job, ([], [], []))
            lists[0 if role in INPUT_ROLES else 1].append(refs[dataset])
            if role == "READ":
                lists[2].append(refs[dataset])
    found: dict[uuid.UUID, Job] = {}
    for chunk in _chunks(ids):
        for r in connection.execute(
            select(jobs, namespaces.c.name.label("namespace"), job_versions.c.location)
            .join(namespaces, namespaces.c.id == jobs.c.namespace_id)
            .outerjoin(job_versions, job_versions.c.id == jobs.c.current_version_id)
            .where(jobs.c.id.in_(chunk))
        ):
            inputs, outputs, undeclared = io.get(r.id, ([], [], []))
            found[r.id] = Job(
                namespace=r.namespace,
                name=r.name,
                type=r.type,
                description=r.description,
                location=r.location,
                inputs=tuple(sorted(inputs, key=lambda d: (d.namespace, d.name))),
                outputs=tuple(sorted(outputs, key=lambda d: (d.namespace, d.name))),
                undeclared_inputs=tuple(sorted(undeclared, key=lambda d: (d.namespace, d.name))),
                current_version=r.current_version_id,
                created_at=r.created_at,
                updated_at=r.updated_at,
            )
    return found
