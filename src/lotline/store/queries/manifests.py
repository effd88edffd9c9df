"""Manifests: insert, the readable manifest of a lot, a lot's history, partial ones to remove."""

from __future__ import annotations

import uuid
from collections.abc import Sequence, Set
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    FromClause,
    Row,
    Select,
    and_,
    bindparam,
    exists,
    insert,
    or_,
    select,
    update,
)

from lotline.domain.coordination import Role, Status
from lotline.domain.manifests import (
    Manifest,
    ManifestDraft,
    ManifestObject,
    ManifestState,
    UriType,
)
from lotline.domain.versions import VersionState
from lotline.store.schema import data_status, dataset_versions, datasets, manifests, namespaces

_INSERT = insert(manifests)


def insert_manifest(
    connection: Connection,
    *,
    manifest_id: uuid.UUID,
    dataset_id: uuid.UUID,
    lot: str,
    run_id: uuid.UUID | None,
    version_id: uuid.UUID | None,
    attempt: int,
    state: ManifestState,
    draft: ManifestDraft,
    now: datetime,
) -> None:
    connection.execute(
        _INSERT,
        {
            "id": manifest_id,
            "dataset_id": dataset_id,
            "lot": lot,
            "run_id": run_id,
            "version_id": version_id,
            "attempt": attempt,
            "state": state.value,
            "uri_type": UriType.PATH.value,
            "location": draft.location,
            "objects": [o.to_json() for o in draft.objects],
            "object_count": len(draft.objects),
            "total_bytes": sum(o.size for o in draft.objects),
            "row_count": draft.row_count,
            "comment": draft.comment,
            "part": draft.part,
            "declared_by": draft.declared_by,
            "created_at": now,
            "updated_at": now,
        },
    )


def set_state(
    connection: Connection,
    manifest_id: uuid.UUID,
    expected: ManifestState,
    state: ManifestState,
    now: datetime,
) -> bool:
    """Move a manifest from ``expected`` to ``state``; False if it was no longer ``expected``."""
    done = connection.execute(
        _SET_STATE,
        {"b_id": manifest_id, "b_expected": expected.value, "state": state.value, "updated_at": now},
    )
    return done.rowcount == 1


_SET_STATE = update(manifests).where(
    manifests.c.id == bindparam("b_id"), manifests.c.state == bindparam("b_expected")
)


def _selected() -> Select[Any]:
    return (
        select(
            manifests,
            namespaces.c.name.label("namespace_name"),
            datasets.c.name.label("dataset_name"),
            dataset_versions.c.version_number,
        )
        .join(datasets, datasets.c.id == manifests.c.dataset_id)
        .join(namespaces, namespaces.c.id == datasets.c.namespace_id)
        .outerjoin(dataset_versions, dataset_versions.c.id == manifests.c.version_id)
    )


def readable(connection: Connection, dataset_id: uuid.UUID, lots: Sequence[str]) -> dict[str, Manifest]:
    """The manifest of each lot's current version: what readers of the lot may take."""
    rows = connection.execute(
        _selected().where(
            dataset_versions.c.dataset_id == dataset_id,
            dataset_versions.c.lot.in_(list(lots)),
            dataset_versions.c.state == VersionState.CURRENT.value,
        )
    ).all()
    return {r.lot: _manifest(r) for r in rows}


def published(
    connection: Connection, dataset_id: uuid.UUID, low: str | None, high: str | None
) -> list[Manifest]:
    """The manifest of each READY lot of the dataset with an id in ``[low, high)`` (None: open), in
    lot order: its current version's, complete or empty. What readers outside lotline read."""
    query = _published(dataset_id, low, high).order_by(manifests.c.lot)
    return [_manifest(r) for r in connection.execute(query)]


def published_among(
    connection: Connection, dataset_id: uuid.UUID, lots: Sequence[str]
) -> dict[str, Manifest]:
    """``published`` of only these lots (those READY), by lot."""
    query = _published(dataset_id, None, None).where(manifests.c.lot.in_(list(lots)))
    return {m.lot: m for m in (_manifest(r) for r in connection.execute(query))}


def newest_with_data(connection: Connection, dataset_id: uuid.UUID) -> Manifest | None:
    """The complete manifest of the dataset's newest READY lot that has data (its columns are the
    dataset's columns, for a reader whose lots are all empty)."""
    query = (
        _published(dataset_id, None, None)
        .where(manifests.c.state == ManifestState.COMPLETE.value)
        .order_by(manifests.c.lot.desc())
        .limit(1)
    )
    row = connection.execute(query).first()
    return None if row is None else _manifest(row)


def _published(dataset_id: uuid.UUID, low: str | None, high: str | None) -> Select[Any]:
    ready = select(data_status.c.lot).where(
        data_status.c.dataset_id == dataset_id,
        data_status.c.role == Role.OUTPUT.value,
        data_status.c.status == Status.READY.value,
    )
    query = _selected().where(
        manifests.c.dataset_id == dataset_id,
        manifests.c.part.is_(None),
        dataset_versions.c.state == VersionState.CURRENT.value,
    )
    if low is not None:
        query, ready = query.where(manifests.c.lot >= low), ready.where(data_status.c.lot >= low)
    if high is not None:
        query, ready = query.where(manifests.c.lot < high), ready.where(data_status.c.lot < high)
    return query.where(manifests.c.lot.in_(ready.scalar_subquery()))


def by_id(connection: Connection, manifest_id: uuid.UUID) -> Manifest | None:
    row = connection.execute(_selected().where(manifests.c.id == manifest_id)).first()
    return None if row is None else _manifest(row)


def of_run(connection: Connection, run_id: uuid.UUID) -> list[Manifest]:
    rows = connection.execute(
        _selected().where(manifests.c.run_id == run_id).order_by(manifests.c.created_at)
    )
    return [_manifest(r) for r in rows]


def history(connection: Connection, dataset_id: uuid.UUID, lot: str) -> list[Manifest]:
    """Every manifest of a lot, oldest first."""
    rows = connection.execute(
        _selected()
        .where(manifests.c.dataset_id == dataset_id, manifests.c.lot == lot)
        .order_by(manifests.c.created_at, manifests.c.attempt)
    )
    return [_manifest(r) for r in rows]


def partial_before(connection: Connection, before: datetime, limit: int) -> list[Manifest]:
    """Partial manifests created before ``before``: attempts whose objects are still to be removed."""
    rows = connection.execute(
        _selected()
        .where(and_(manifests.c.state == ManifestState.PARTIAL.value, manifests.c.created_at < before))
        .order_by(manifests.c.created_at)
        .limit(limit)
    )
    return [_manifest(r) for r in rows]


def listed_uris(connection: Connection, location_prefix: str, excluding: Set[uuid.UUID]) -> set[str]:
    """Every object uri listed by a complete, empty or partial manifest whose location starts with
    the prefix and whose objects were not removed, but those of the manifests ``excluding``:
    objects that cleanup must keep."""
    rows = connection.execute(
        select(manifests.c.id, manifests.c.objects).where(
            manifests.c.state != ManifestState.REMOVED.value,
            manifests.c.objects_removed_at.is_(None),
            manifests.c.location.startswith(location_prefix, autoescape=True),
        )
    )
    return {o["uri"] for (manifest_id, objects) in rows if manifest_id not in excluding for o in objects}


def _superseded(
    lot_manifest: FromClause, version: FromClause, before: datetime, location_prefix: str
) -> ColumnElement[bool]:
    """Whether ``lot_manifest`` (joined to its ``version``) is a complete lot manifest under the
    prefix whose objects are still there and whose version was superseded by a newer *current*
    version of its lot, made before ``before``. A lot reopened and not remade yet has no current
    version: its last version is not this kind of superseded (a backfill's dry run, lineage and
    an operator still look at it)."""
    newer = dataset_versions.alias("newer")
    return and_(
        lot_manifest.c.part.is_(None),
        lot_manifest.c.state == ManifestState.COMPLETE.value,
        lot_manifest.c.objects_removed_at.is_(None),
        lot_manifest.c.location.startswith(location_prefix, autoescape=True),
        version.c.id == lot_manifest.c.version_id,
        version.c.state == VersionState.SUPERSEDED.value,
        exists().where(
            newer.c.dataset_id == version.c.dataset_id,
            newer.c.lot == version.c.lot,
            newer.c.state == VersionState.CURRENT.value,
            newer.c.version_number > version.c.version_number,
            newer.c.created_at < before,
        ),
    )


def superseded_before(
    connection: Connection, location_prefix: str, before: datetime, limit: int
) -> list[Manifest]:
    """Complete lot manifests whose version a newer current one of the lot replaced before
    ``before`` (``_superseded``), their objects not yet removed: what cleanup deletes after the
    grace. Oldest first."""
    query = (
        _selected()
        .where(_superseded(manifests, dataset_versions, before, location_prefix))
        .order_by(manifests.c.created_at)
        .limit(limit)
    )
    return [_manifest(r) for r in connection.execute(query)]


def superseded_parts(connection: Connection, location_prefix: str, before: datetime) -> list[Manifest]:
    """The complete or empty child manifests of those lots, of the superseded manifest's attempt or
    an earlier one (the parts it lists; a later attempt never reuses them: it keeps only parts of
    attempts that failed since the lot's last success)."""
    lot_manifest, version = manifests.alias("lot_manifest"), dataset_versions.alias("lot_version")
    covered = (
        select(lot_manifest.c.id)
        .select_from(lot_manifest.join(version, version.c.id == lot_manifest.c.version_id))
        .where(
            _superseded(lot_manifest, version, before, location_prefix),
            lot_manifest.c.dataset_id == manifests.c.dataset_id,
            lot_manifest.c.lot == manifests.c.lot,
            lot_manifest.c.attempt >= manifests.c.attempt,
        )
        .exists()
    )
    query = _selected().where(
        manifests.c.part.is_not(None),
        manifests.c.state.in_([ManifestState.COMPLETE.value, ManifestState.EMPTY.value]),
        manifests.c.objects_removed_at.is_(None),
        covered,
    )
    return [_manifest(r) for r in connection.execute(query)]


def mark_objects_removed(connection: Connection, manifest_ids: Sequence[uuid.UUID], now: datetime) -> None:
    """Record that these manifests' objects were deleted (a thousand ids a statement)."""
    for start in range(0, len(manifest_ids), 1000):
        connection.execute(
            update(manifests)
            .where(
                manifests.c.id.in_(list(manifest_ids[start : start + 1000])),
                manifests.c.objects_removed_at.is_(None),
            )
            .values(objects_removed_at=now, updated_at=now)
        )


def published_locations(connection: Connection, location_prefix: str) -> set[str]:
    """The folders of complete and empty manifests under the prefix whose objects were not removed:
    what else a published attempt's writer left there (Spark's ``_SUCCESS`` and ``.crc`` files) is
    part of it, not garbage."""
    rows = connection.execute(
        select(manifests.c.location).where(
            manifests.c.state.in_([ManifestState.COMPLETE.value, ManifestState.EMPTY.value]),
            manifests.c.objects_removed_at.is_(None),
            manifests.c.location.startswith(location_prefix, autoescape=True),
        )
    )
    return {location.rstrip("/") for (location,) in rows}


def live_attempts(connection: Connection) -> list[tuple[str, str, str, int]]:
    """(namespace, dataset, lot, attempt) of every claim being worked on: their folders are not
    cleanup's, whatever the age of what is in them."""
    rows = connection.execute(
        select(namespaces.c.name, datasets.c.name, data_status.c.lot, data_status.c.attempt)
        .join(datasets, datasets.c.id == data_status.c.dataset_id)
        .join(namespaces, namespaces.c.id == datasets.c.namespace_id)
        .where(data_status.c.role == "OUTPUT", data_status.c.status == "RUNNING")
    )
    return [(r[0], r[1], r[2], r[3]) for r in rows]


def copy_owners(connection: Connection, after: uuid.UUID | None, limit: int) -> list[Manifest]:
    """The manifests whose copy belongs in the object store, in id order, a page at a time: every
    partial and removed one, and the complete or empty one of each lot's current version."""
    owns = or_(
        manifests.c.state.in_([ManifestState.PARTIAL.value, ManifestState.REMOVED.value]),
        dataset_versions.c.state == VersionState.CURRENT.value,
    )
    query = _selected().where(owns).order_by(manifests.c.id).limit(limit)
    if after is not None:
        query = query.where(manifests.c.id > after)
    return [_manifest(r) for r in connection.execute(query)]


def _manifest(r: Row[Any]) -> Manifest:
    return Manifest(
        id=r.id,
        namespace=r.namespace_name,
        dataset=r.dataset_name,
        lot=r.lot,
        state=ManifestState(r.state),
        attempt=r.attempt,
        run_id=r.run_id,
        version_id=r.version_id,
        version_number=r.version_number,
        uri_type=UriType(r.uri_type),
        location=r.location,
        objects=tuple(ManifestObject.from_json(o) for o in r.objects),
        row_count=r.row_count,
        comment=r.comment,
        created_at=r.created_at,
        updated_at=r.updated_at,
        part=r.part,
        declared_by=r.declared_by,
        objects_removed_at=r.objects_removed_at,
    )


def complete_parts(connection: Connection, dataset_id: uuid.UUID, lot: str) -> list[Manifest]:
    """Every complete (or empty) child manifest of a lot, oldest first (several attempts may have
    made one part)."""
    rows = connection.execute(
        _selected()
        .where(
            manifests.c.dataset_id == dataset_id,
            manifests.c.lot == lot,
            manifests.c.part.is_not(None),
            manifests.c.state.in_([ManifestState.COMPLETE.value, ManifestState.EMPTY.value]),
        )
        .order_by(manifests.c.created_at)
    )
    return [_manifest(r) for r in rows]
