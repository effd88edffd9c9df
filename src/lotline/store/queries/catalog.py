"""Namespaces and sources."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import Connection, Row, Table, bindparam, func, select, update

from lotline.domain.model import Namespace, Page, Source
from lotline.store.dialect import insert_ignoring_conflicts
from lotline.store.schema import data_status, datasets, jobs, namespaces, sources

T = TypeVar("T")


def _namespace(row: Row[tuple[object, ...]]) -> Namespace:
    m = row._mapping
    return Namespace(
        m["name"],
        m["owner_name"],
        m["description"],
        m["created_at"],
        m["updated_at"],
        is_hidden=m["deleted_at"] is not None,
    )


def _source(row: Row[tuple[object, ...]]) -> Source:
    m = row._mapping
    return Source(
        m["name"], m["type"], m["connection_url"], m["description"], m["created_at"], m["updated_at"]
    )


def upsert_namespace(
    connection: Connection, name: str, owner_name: str | None, description: str | None, now: datetime
) -> Namespace:
    ensure_namespace(connection, name, now)
    changes: dict[str, object] = {"updated_at": now, "deleted_at": None}
    if owner_name is not None:
        changes["owner_name"] = owner_name
    if description is not None:
        changes["description"] = description
    connection.execute(update(namespaces).where(namespaces.c.name == name).values(changes))
    return _namespace(connection.execute(select(namespaces).where(namespaces.c.name == name)).one())


def ensure_namespace(connection: Connection, name: str, now: datetime) -> uuid.UUID:
    """Create the namespace if absent, without touching (or row-locking) one that exists: concurrent
    OpenLineage events naming the same namespace must not queue behind each other."""
    insert_ignoring_conflicts(
        connection,
        namespaces,
        [{"id": uuid.uuid4(), "name": name, "created_at": now, "updated_at": now}],
        ["name"],
    )
    found: uuid.UUID = connection.execute(_NAMESPACE_ID, {"b_name": name}).scalar_one()
    # Writing into a deleted namespace brings it back, as in Marquez (its deleted datasets and jobs
    # stay deleted); matches no row, and so locks none, in the usual case.
    connection.execute(_UNDELETE_NAMESPACE, {"b_id": found})
    return found


_NAMESPACE_ID = select(namespaces.c.id).where(namespaces.c.name == bindparam("b_name"))
_UNDELETE_NAMESPACE = (
    update(namespaces)
    .where(namespaces.c.id == bindparam("b_id"), namespaces.c.deleted_at.is_not(None))
    .values(deleted_at=None)
)
_SOURCE_ID = select(sources.c.id).where(sources.c.name == bindparam("b_name"))


def hide_namespace(connection: Connection, namespace_id: uuid.UUID, now: datetime) -> None:
    """Soft-delete a namespace with its datasets and jobs (Marquez ``DELETE namespace``)."""
    connection.execute(update(namespaces).where(namespaces.c.id == namespace_id).values(deleted_at=now))
    for table in (datasets, jobs):
        connection.execute(
            update(table)
            .where(table.c.namespace_id == namespace_id, table.c.deleted_at.is_(None))
            .values(deleted_at=now)
        )


def namespace_id(connection: Connection, name: str) -> uuid.UUID | None:
    found: uuid.UUID | None = connection.execute(_NAMESPACE_ID, {"b_name": name}).scalar()
    return found


def get_namespace(connection: Connection, name: str) -> Namespace | None:
    return _get_by_name(connection, namespaces, _namespace, name)


def list_namespaces(connection: Connection, limit: int, offset: int) -> Page[Namespace]:
    """The namespaces that are not deleted."""
    live = namespaces.c.deleted_at.is_(None)
    rows = connection.execute(
        select(namespaces).where(live).order_by(namespaces.c.name).limit(limit).offset(offset)
    ).all()
    total = connection.execute(select(func.count()).select_from(namespaces).where(live)).scalar_one()
    return Page([_namespace(r) for r in rows], total)


def namespaces_with_lots(connection: Connection, limit: int) -> list[str]:
    """The names of the live namespaces with a dataset that has lots (a lot's row: ingested or
    produced by lotline), at most ``limit``, by name. Namespaces made only by OpenLineage events
    from other tools have none."""
    has_lots = (
        select(data_status.c.lot)
        .join(datasets, datasets.c.id == data_status.c.dataset_id)
        .where(datasets.c.namespace_id == namespaces.c.id)
        .exists()
    )
    query = (
        select(namespaces.c.name)
        .where(namespaces.c.deleted_at.is_(None), has_lots)
        .order_by(namespaces.c.name)
        .limit(limit)
    )
    return list(connection.execute(query).scalars())


def write_source(
    connection: Connection,
    name: str,
    type_: str,
    connection_url: str | None,
    description: str | None,
    now: datetime,
) -> uuid.UUID:
    """Create the source or update it; returns its id."""
    insert_ignoring_conflicts(
        connection,
        sources,
        [
            {
                "id": uuid.uuid4(),
                "name": name,
                "type": type_,
                "connection_url": connection_url,
                "description": description,
                "created_at": now,
                "updated_at": now,
            }
        ],
        ["name"],
    )
    changes: dict[str, object] = {"type": type_, "updated_at": now}
    if connection_url is not None:
        changes["connection_url"] = connection_url
    if description is not None:
        changes["description"] = description
    found: uuid.UUID = connection.execute(
        update(sources).where(sources.c.name == name).values(changes).returning(sources.c.id)
    ).scalar_one()
    return found


def source_by_id(connection: Connection, source_id: uuid.UUID) -> Source:
    """A source this transaction knows exists (it has its id)."""
    return _source(connection.execute(select(sources).where(sources.c.id == source_id)).one())


def source_id(connection: Connection, name: str) -> uuid.UUID | None:
    found: uuid.UUID | None = connection.execute(_SOURCE_ID, {"b_name": name}).scalar()
    return found


def get_source(connection: Connection, name: str) -> Source | None:
    return _get_by_name(connection, sources, _source, name)


def list_sources(connection: Connection, limit: int, offset: int) -> Page[Source]:
    return _page_by_name(connection, sources, _source, limit, offset)


def _get_by_name(connection: Connection, table: Table, convert: Callable[[Any], T], name: str) -> T | None:
    row = connection.execute(select(table).where(table.c.name == name)).first()
    return convert(row) if row else None


def _page_by_name(
    connection: Connection, table: Table, convert: Callable[[Any], T], limit: int, offset: int
) -> Page[T]:
    rows = connection.execute(select(table).order_by(table.c.name).limit(limit).offset(offset)).all()
    total = connection.execute(select(func.count()).select_from(table)).scalar_one()
    return Page([convert(r) for r in rows], total)
