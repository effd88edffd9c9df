"""Tags and the tagging of datasets and dataset fields."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, delete, func, select, update

from lotline.domain.tags import DatasetTags, Tag
from lotline.store.dialect import insert_ignoring_conflicts
from lotline.store.schema import dataset_field_tags, dataset_tags, job_tags, tags


def _tag(row: Row[Any]) -> Tag:
    return Tag(row.name, row.description, row.created_at, row.updated_at)


def upsert_tag(connection: Connection, name: str, description: str | None, now: datetime) -> uuid.UUID:
    """Create the tag or update its description; returns its id."""
    insert_ignoring_conflicts(
        connection,
        tags,
        [
            {
                "id": uuid.uuid4(),
                "name": name,
                "description": description,
                "created_at": now,
                "updated_at": now,
            }
        ],
        ["name"],
    )
    changes: dict[str, object] = {"updated_at": now}
    if description is not None:
        changes["description"] = description
    tag_id: uuid.UUID = connection.execute(
        update(tags).where(tags.c.name == name).values(changes).returning(tags.c.id)
    ).scalar_one()
    return tag_id


def get_tag(connection: Connection, name: str) -> Tag | None:
    row = connection.execute(select(tags).where(tags.c.name == name)).first()
    return _tag(row) if row else None


def tag_id(connection: Connection, name: str) -> uuid.UUID | None:
    return connection.execute(select(tags.c.id).where(tags.c.name == name)).scalar()


def list_tags(connection: Connection, limit: int, offset: int) -> tuple[list[Tag], int]:
    rows = connection.execute(select(tags).order_by(tags.c.name).limit(limit).offset(offset)).all()
    total = connection.execute(select(func.count()).select_from(tags)).scalar_one()
    return [_tag(r) for r in rows], total


def tag_dataset(connection: Connection, dataset_id: uuid.UUID, tag: uuid.UUID, now: datetime) -> None:
    insert_ignoring_conflicts(
        connection,
        dataset_tags,
        [{"dataset_id": dataset_id, "tag_id": tag, "tagged_at": now}],
        ["dataset_id", "tag_id"],
    )


def untag_dataset(connection: Connection, dataset_id: uuid.UUID, tag: uuid.UUID) -> None:
    connection.execute(
        delete(dataset_tags).where(dataset_tags.c.dataset_id == dataset_id, dataset_tags.c.tag_id == tag)
    )


def tag_field(
    connection: Connection, dataset_id: uuid.UUID, field_name: str, tag: uuid.UUID, now: datetime
) -> None:
    insert_ignoring_conflicts(
        connection,
        dataset_field_tags,
        [{"dataset_id": dataset_id, "field_name": field_name, "tag_id": tag, "tagged_at": now}],
        ["dataset_id", "field_name", "tag_id"],
    )


def untag_field(connection: Connection, dataset_id: uuid.UUID, field_name: str, tag: uuid.UUID) -> None:
    connection.execute(
        delete(dataset_field_tags).where(
            dataset_field_tags.c.dataset_id == dataset_id,
            dataset_field_tags.c.field_name == field_name,
            dataset_field_tags.c.tag_id == tag,
        )
    )


def tag_job(connection: Connection, job_id: uuid.UUID, tag: uuid.UUID, now: datetime) -> None:
    insert_ignoring_conflicts(
        connection, job_tags, [{"job_id": job_id, "tag_id": tag, "tagged_at": now}], ["job_id", "tag_id"]
    )


def untag_job(connection: Connection, job_id: uuid.UUID, tag: uuid.UUID) -> None:
    connection.execute(delete(job_tags).where(job_tags.c.job_id == job_id, job_tags.c.tag_id == tag))


def tags_of_datasets(
    connection: Connection, dataset_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, DatasetTags]:
    """Tags of many datasets in two queries (lists and graphs show many datasets at once)."""
    if not dataset_ids:
        return {}
    own: dict[uuid.UUID, list[str]] = {}
    for r in connection.execute(
        select(dataset_tags.c.dataset_id, tags.c.name)
        .join(tags, tags.c.id == dataset_tags.c.tag_id)
        .where(dataset_tags.c.dataset_id.in_(dataset_ids))
        .order_by(tags.c.name)
    ):
        own.setdefault(r.dataset_id, []).append(r.name)
    fields: dict[uuid.UUID, dict[str, list[str]]] = {}
    for f in connection.execute(
        select(dataset_field_tags.c.dataset_id, dataset_field_tags.c.field_name, tags.c.name)
        .join(tags, tags.c.id == dataset_field_tags.c.tag_id)
        .where(dataset_field_tags.c.dataset_id.in_(dataset_ids))
        .order_by(tags.c.name)
    ):
        fields.setdefault(f.dataset_id, {}).setdefault(f.field_name, []).append(f.name)
    return {
        d: DatasetTags(tuple(own.get(d, ())), {f: tuple(names) for f, names in fields.get(d, {}).items()})
        for d in dataset_ids
    }
