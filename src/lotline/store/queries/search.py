"""Search datasets and jobs by name (Marquez ``GET /search``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, func, literal, select, union_all

from lotline.store.schema import datasets, jobs, namespaces


@dataclass(frozen=True, slots=True)
class SearchHit:
    type: str
    name: str
    namespace: str
    updated_at: datetime


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def search(
    connection: Connection, query: str, kind: str | None, namespace: str | None, sort: str, limit: int
) -> tuple[list[SearchHit], int]:
    """Case-insensitive substring match on names; live datasets and jobs only."""
    pattern = f"%{_escape(query.lower())}%"
    parts = []
    for table, label in ((datasets, "DATASET"), (jobs, "JOB")):
        if kind not in (None, label):
            continue
        part = (
            select(
                literal(label).label("type"),
                table.c.name,
                namespaces.c.name.label("namespace"),
                table.c.updated_at,
            )
            .join(namespaces, namespaces.c.id == table.c.namespace_id)
            .where(func.lower(table.c.name).like(pattern, escape="\\"))
        )
        if table is datasets:
            part = part.where(datasets.c.deleted_at.is_(None))
        if namespace is not None:
            part = part.where(namespaces.c.name == namespace)
        parts.append(part)
    combined = union_all(*parts).subquery()
    order = (
        [combined.c.updated_at.desc(), combined.c.name]
        if sort == "UPDATE_AT"
        else [combined.c.name, combined.c.namespace]
    )
    rows = connection.execute(select(combined).order_by(*order).limit(limit)).all()
    total = connection.execute(select(func.count()).select_from(combined)).scalar_one()
    return [SearchHit(r.type, r.name, r.namespace, r.updated_at) for r in rows], total
