"""Namespaces and sources."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import Connection, Row, func, select, update

from lotline.domain.model import Namespace, Page, Source
from lotline.store.dialect import insert_ignoring_conflicts
from lotline.store.schema import namespaces, sources


def _namespace(row: Row[tuple[object, ...]]) -> Namespace:
    m = row._mapping
    return Namespace(m["name"], m["owner_name"], m["description"], m["created_at"], m["updated_at"])


def _source(row: Row[tuple[object, ...]]) -> Source:
    m = row._mapping
    return Source(
        m["name"], m["type"], m["connection_url"], m["description"], m["created_at"], m["updated_at"]
    )


def upsert_namespace(
    connection: Connection, name: str, owner_name: str | None, description: str | None, now: datetime
) -> Namespace:
    insert_ignoring_conflicts(
        connection,
        namespaces,
        [
            {
                "id": uuid.uuid4(),
                "name": name,
                "owner_name": owner_name,
                "description": description,
                "created_at": now,
                "updated_at": now,
            }
        ],
        ["name"],
    )
    changes: dict[str, object] = {"updated_at": now}
    if owner_name is not None:
        changes["owner_name"] = owner_name
    if description is not None:
        changes["description"] = description
    connection.execute(update(namespaces).where(namespaces.c.name == name).values(changes))
    found = get_namespace(connection, name)
    assert found is not None
    return found


def namespace_id(connection: Connection, name: str) -> uuid.UUID | None:
    return connection.execute(select(namespaces.c.id).where(namespaces.c.name == name)).scalar()


def get_namespace(connection: Connection, name: str) -> Namespace | None:
    row = connection.execute(select(namespaces).where(namespaces.c.name == name)).first()
    return _namespace(row) if row else None


def list_namespaces(connection: Connection, limit: int, offset: int) -> Page[Namespace]:
    rows = connection.execute(
        select(namespaces).order_by(namespaces.c.name).limit(limit).offset(offset)
    ).all()
    total = connection.execute(select(func.count()).select_from(namespaces)).scalar_one()
    return Page([_namespace(r) for r in rows], total)


def upsert_source(
    connection: Connection,
    name: str,
    type_: str,
    connection_url: str | None,
    description: str | None,
    now: datetime,
) -> Source:
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
    connection.execute(update(sources).where(sources.c.name == name).values(changes))
    found = get_source(connection, name)
    assert found is not None
    return found


def source_id(connection: Connection, name: str) -> uuid.UUID | None:
    return connection.execute(select(sources.c.id).where(sources.c.name == name)).scalar()


def get_source(connection: Connection, name: str) -> Source | None:
    row = connection.execute(select(sources).where(sources.c.name == name)).first()
    return _source(row) if row else None


def list_sources(connection: Connection, limit: int, offset: int) -> Page[Source]:
    rows = connection.execute(select(sources).order_by(sources.c.name).limit(limit).offset(offset)).all()
    total = connection.execute(select(func.count()).select_from(sources)).scalar_one()
    return Page([_source(r) for r in rows], total)
