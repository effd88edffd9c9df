"""Datasets and their fields."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, bindparam, delete, func, insert, select, tuple_, update

from lotline.domain.model import Dataset, DatasetRef, FieldSpec, JsonObject, Page
from lotline.domain.versions import VersionState
from lotline.store.dialect import (
    in_values,
    increment_returning,
    insert_ignoring_conflicts,
    locks_rows,
    upsert_returning,
)
from lotline.store.schema import dataset_fields, dataset_versions, datasets, namespaces, sources
from lotline.store.schema import dataset_version_counters as counters
from lotline.store.types import json_or_empty


def upsert_dataset(
    connection: Connection,
    namespace_id: uuid.UUID,
    name: str,
    *,
    type_: str,
    physical_name: str | None,
    source_id: uuid.UUID | None,
    description: str | None,
    facets: dict[str, Any] | None,
    now: datetime,
    schema_location: str | None = None,
) -> uuid.UUID:
    """Create the dataset or update its metadata, in one statement (a second one only when new
    facets change the stored ones). Never creates a version (SPEC §3 rule 5)."""
    changes = ["type", "updated_at"]
    for column, value in (
        ("physical_name", physical_name),
        ("source_id", source_id),
        ("description", description),
        ("schema_location", schema_location),
    ):
        if value is not None:
            changes.append(column)
    row = upsert_returning(
        connection,
        datasets,
        {
            "id": uuid.uuid4(),
            "namespace_id": namespace_id,
            "name": name,
            "type": type_,
            "physical_name": physical_name or name,
            "source_id": source_id,
            "description": description,
            "schema_location": schema_location,
            "facets": facets or {},
            "created_at": now,
            "updated_at": now,
        },
        ["namespace_id", "name"],
        changes,
        ["id", "facets"],
        # Writing a soft-deleted dataset brings it back, as in Marquez.
        constants={"deleted_at": None},
    )
    if facets:
        stored = json_or_empty(row.facets)
        merged = {**stored, **facets}
        if merged != stored:
            connection.execute(_SET_FACETS, {"b_id": row.id, "facets": merged})
    dataset_id: uuid.UUID = row.id
    return dataset_id


_SET_FACETS = update(datasets).where(datasets.c.id == bindparam("b_id"))
_DELETE_FIELDS = delete(dataset_fields).where(dataset_fields.c.dataset_id == bindparam("b_id"))
_INSERT_FIELDS = insert(dataset_fields)


def replace_fields(connection: Connection, dataset_id: uuid.UUID, fields: Sequence[FieldSpec]) -> None:
    connection.execute(_DELETE_FIELDS, {"b_id": dataset_id})
    if fields:
        connection.execute(
            _INSERT_FIELDS,
            [
                {
                    "dataset_id": dataset_id,
                    "position": i,
                    "name": f.name,
                    "type": f.type,
                    "description": f.description,
                }
                for i, f in enumerate(fields)
            ],
        )


_FIELDS = (
    select(dataset_fields.c.name, dataset_fields.c.type, dataset_fields.c.description)
    .where(dataset_fields.c.dataset_id == bindparam("b_id"))
    .order_by(dataset_fields.c.position)
)


def fields_of(connection: Connection, dataset_id: uuid.UUID) -> tuple[FieldSpec, ...]:
    rows = connection.execute(_FIELDS, {"b_id": dataset_id}).all()
    return tuple(FieldSpec(r.name, r.type, r.description) for r in rows)


_DATASET_ID = (
    select(datasets.c.id)
    .join(namespaces, namespaces.c.id == datasets.c.namespace_id)
    .where(namespaces.c.name == bindparam("b_namespace"), datasets.c.name == bindparam("b_name"))
)


def dataset_id(connection: Connection, namespace: str, name: str) -> uuid.UUID | None:
    found: uuid.UUID | None = connection.execute(
        _DATASET_ID, {"b_namespace": namespace, "b_name": name}
    ).scalar()
    return found


def dataset_ids(connection: Connection, refs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], uuid.UUID]:
    """The ids of many (namespace, name) datasets, a statement per 500; unknown ones are absent."""
    found: dict[tuple[str, str], uuid.UUID] = {}
    for start in range(0, len(refs), 500):
        rows = connection.execute(
            select(namespaces.c.name, datasets.c.name, datasets.c.id)
            .join(namespaces, namespaces.c.id == datasets.c.namespace_id)
            .where(tuple_(namespaces.c.name, datasets.c.name).in_(list(refs[start : start + 500])))
        )
        found.update({(namespace, name): dataset for namespace, name, dataset in rows})
    return found


_VERSION_BASIS = (
    select(
        namespaces.c.name.label("namespace"),
        datasets.c.name,
        datasets.c.facets,
        dataset_fields.c.name.label("field"),
        dataset_fields.c.type,
        dataset_fields.c.description,
    )
    .join(namespaces, namespaces.c.id == datasets.c.namespace_id)
    .outerjoin(dataset_fields, dataset_fields.c.dataset_id == datasets.c.id)
    .where(datasets.c.id == bindparam("b_dataset_id"))
    .order_by(dataset_fields.c.position)
)


#: A dataset's name, fields and facets: what a new version of it is made of.
VersionBasis = tuple[DatasetRef, tuple[FieldSpec, ...], JsonObject]


def version_basis(connection: Connection, dataset_id: uuid.UUID) -> VersionBasis:
    """What a new version of the dataset is made of: its name (for the version's id), its fields
    and facets now, in one statement (built once: it runs for every version)."""
    rows = connection.execute(_VERSION_BASIS, {"b_dataset_id": dataset_id}).all()
    fields = tuple(FieldSpec(r.field, r.type, r.description) for r in rows if r.field is not None)
    return DatasetRef(rows[0].namespace, rows[0].name), fields, json_or_empty(rows[0].facets)


def dataset_refs(connection: Connection, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, DatasetRef]:
    rows = connection.execute(
        select(datasets.c.id, namespaces.c.name.label("namespace"), datasets.c.name)
        .join(namespaces, namespaces.c.id == datasets.c.namespace_id)
        .where(in_values(connection, datasets.c.id, ids))
    ).all()
    return {r.id: DatasetRef(r.namespace, r.name) for r in rows}


def lock_dataset(connection: Connection, dataset_id: uuid.UUID) -> None:
    """Serialize version changes of one dataset: its version counter's row, created if missing,
    locked until commit (SQLite already holds the database write lock)."""
    if locks_rows(connection):
        insert_ignoring_conflicts(
            connection, counters, [{"dataset_id": dataset_id, "last_version_number": 0}], ["dataset_id"]
        )
        connection.execute(_LOCK_COUNTER, {"b_dataset_id": dataset_id})


_LOCK_COUNTER = (
    select(counters.c.dataset_id).where(counters.c.dataset_id == bindparam("b_dataset_id")).with_for_update()
)


def next_version_number(connection: Connection, dataset_id: uuid.UUID) -> int:
    """Allocate the dataset's next version number (its counter starts at 1); the row lock it takes
    lasts until commit."""
    return increment_returning(connection, counters, "dataset_id", dataset_id, "last_version_number")


def _current_version_subquery(column: Any) -> Any:
    """A column of the dataset's current version: its latest successful one, across all lots (rule 7)."""
    return (
        select(column)
        .where(
            dataset_versions.c.dataset_id == datasets.c.id,
            dataset_versions.c.state == VersionState.CURRENT.value,
        )
        .order_by(dataset_versions.c.version_number.desc())
        .limit(1)
        .scalar_subquery()
    )


def _dataset_query() -> Any:
    return (
        select(
            datasets,
            namespaces.c.name.label("namespace"),
            sources.c.name.label("source_name"),
            _current_version_subquery(dataset_versions.c.id).label("current_version"),
            _current_version_subquery(dataset_versions.c.created_at).label("last_modified_at"),
        )
        .join(namespaces, namespaces.c.id == datasets.c.namespace_id)
        .outerjoin(sources, sources.c.id == datasets.c.source_id)
    )


def _datasets(connection: Connection, rows: Sequence[Row[Any]]) -> list[Dataset]:
    """Datasets from their rows, with every one's fields read in one statement."""
    fields: dict[uuid.UUID, list[FieldSpec]] = {}
    if rows:
        for f in connection.execute(
            select(dataset_fields)
            .where(dataset_fields.c.dataset_id.in_([r.id for r in rows]))
            .order_by(dataset_fields.c.dataset_id, dataset_fields.c.position)
        ):
            fields.setdefault(f.dataset_id, []).append(FieldSpec(f.name, f.type, f.description))
    return [_dataset(r, tuple(fields.get(r.id, ()))) for r in rows]


def _dataset(row: Row[Any], fields: tuple[FieldSpec, ...]) -> Dataset:
    m = row._mapping
    return Dataset(
        namespace=m["namespace"],
        name=m["name"],
        type=m["type"],
        physical_name=m["physical_name"],
        source_name=m["source_name"],
        description=m["description"],
        fields=fields,
        facets=json_or_empty(m["facets"]),
        created_at=m["created_at"],
        updated_at=m["updated_at"],
        current_version=m["current_version"],
        last_modified_at=m["last_modified_at"],
        schema_location=m["schema_location"],
    )


def soft_delete(connection: Connection, dataset_id: uuid.UUID, now: datetime) -> None:
    connection.execute(update(datasets).where(datasets.c.id == dataset_id).values(deleted_at=now))


def get_dataset(connection: Connection, namespace: str, name: str) -> Dataset | None:
    """The dataset, unless it was soft-deleted."""
    row = connection.execute(
        _dataset_query().where(
            namespaces.c.name == namespace, datasets.c.name == name, datasets.c.deleted_at.is_(None)
        )
    ).first()
    return _datasets(connection, [row])[0] if row else None


def list_datasets(connection: Connection, namespace: str, limit: int, offset: int) -> Page[Dataset]:
    rows = connection.execute(
        _dataset_query()
        .where(namespaces.c.name == namespace, datasets.c.deleted_at.is_(None))
        .order_by(datasets.c.name)
        .limit(limit)
        .offset(offset)
    ).all()
    total = connection.execute(
        select(func.count())
        .select_from(datasets)
        .join(namespaces, namespaces.c.id == datasets.c.namespace_id)
        .where(namespaces.c.name == namespace, datasets.c.deleted_at.is_(None))
    ).scalar_one()
    return Page(_datasets(connection, rows), total)
