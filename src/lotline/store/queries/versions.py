"""Dataset versions: creation, the current pointer per (dataset, lot), listing."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, bindparam, func, insert, select, update

from lotline.domain.model import DatasetVersion, FieldSpec, JsonObject, Page, RunIoRole
from lotline.domain.versions import UNPARTITIONED, VersionState
from lotline.store.dialect import fast_path, in_values, per_dialect, upsert_insert
from lotline.store.queries import datasets as dataset_queries
from lotline.store.queries import runs
from lotline.store.schema import dataset_version_counters as counters
from lotline.store.schema import dataset_versions, datasets, namespaces, run_outputs
from lotline.store.types import json_or_empty

_INSERT_VERSION = insert(dataset_versions)
_CURRENT = (
    dataset_versions.c.dataset_id == bindparam("b_dataset_id"),
    dataset_versions.c.lot == bindparam("b_lot"),
    dataset_versions.c.state == VersionState.CURRENT.value,
)
_SUPERSEDE = update(dataset_versions).where(*_CURRENT).values(state=VersionState.SUPERSEDED.value)
_CURRENT_ID = select(dataset_versions.c.id).where(*_CURRENT)
_FACETS = select(dataset_versions.c.facets).where(dataset_versions.c.id == bindparam("b_id"))
_SET_FACETS = update(dataset_versions).where(dataset_versions.c.id == bindparam("b_id"))
_ANY_VERSION = (
    select(dataset_versions.c.id)
    .where(
        dataset_versions.c.dataset_id == bindparam("b_dataset_id"),
        dataset_versions.c.lot == bindparam("b_lot"),
    )
    .limit(1)
)


def insert_version(
    connection: Connection,
    *,
    version_id: uuid.UUID,
    dataset_id: uuid.UUID,
    number: int,
    lot: str,
    run_id: uuid.UUID | None,
    state: VersionState,
    fields: tuple[FieldSpec, ...],
    facets: JsonObject,
    now: datetime,
    output_io_id: int | None = None,
) -> None:
    """The new version; ``output_io_id``: the run output (``run_outputs`` row) it is the version of,
    pinned to it in the same statement on PostgreSQL (a data-modifying ``WITH``), after it elsewhere."""
    values = {
        "facets": facets,
        "id": version_id,
        "dataset_id": dataset_id,
        "version_number": number,
        "lot": lot,
        "run_id": run_id,
        "state": state.value,
        "created_at": now,
        "fields": [{"name": f.name, "type": f.type, "description": f.description} for f in fields],
    }
    if output_io_id is None:
        connection.execute(_INSERT_VERSION, values)
    else:
        _insert_pinned_version(connection, values, output_io_id)


def _insert_pinned_version_portable(
    connection: Connection, values: dict[str, Any], output_io_id: int
) -> None:
    """The version's row ``values``, then the run output ``output_io_id`` pinned to it."""
    connection.execute(_INSERT_VERSION, values)
    runs.pin_io(connection, RunIoRole.OUTPUT, output_io_id, values["id"])


def _insert_pinned_version_postgresql(
    connection: Connection, values: dict[str, Any], output_io_id: int
) -> None:
    """The same in one statement (a data-modifying ``WITH``)."""
    prefixed = {f"v_{name}": value for name, value in values.items()}
    connection.execute(_INSERT_PINNED_OUTPUT, {**prefixed, "b_io_id": output_io_id})


_insert_pinned_version = fast_path(_insert_pinned_version_portable, _insert_pinned_version_postgresql)


def _number_unversioned_outputs_portable(
    connection: Connection, run_id: uuid.UUID
) -> list[tuple[runs.UnpinnedIo, int]]:
    """The run's outputs not yet tied to a version, ordered by dataset id and lot, each with the
    number of its new version: each dataset's counter is raised by its number of such outputs, in
    dataset order, so that concurrent runs lock datasets in one order (no deadlocks); a counter's row
    stays locked until commit."""
    return [
        (io, dataset_queries.next_version_number(connection, io.dataset_id))
        for io in runs.unversioned_outputs(connection, run_id)
    ]


def _number_unversioned_outputs_postgresql(
    connection: Connection, run_id: uuid.UUID
) -> list[tuple[runs.UnpinnedIo, int]]:
    """The same in one statement, the counters raised once per dataset."""
    rows = connection.execute(_numbered_outputs(connection), {"b_run_id": run_id}).all()
    taken: dict[uuid.UUID, int] = {}
    numbered: list[tuple[runs.UnpinnedIo, int]] = []
    for io_id, dataset_id, lot, facets, last, count in rows:
        # A dataset's outputs, in lot order, take the numbers up to its raised counter.
        before = taken[dataset_id] = taken.get(dataset_id, 0) + 1
        numbered.append((runs.UnpinnedIo(io_id, dataset_id, lot, facets), last - count + before))
    return numbered


number_unversioned_outputs = fast_path(
    _number_unversioned_outputs_portable, _number_unversioned_outputs_postgresql
)


@per_dialect
def _numbered_outputs(connection: Connection) -> Any:
    """PostgreSQL's ``number_unversioned_outputs``: the unversioned outputs, the counters raised by
    their number per dataset (a data-modifying ``WITH``), each output with its dataset's new counter."""
    io = (
        select(run_outputs.c.id, run_outputs.c.dataset_id, run_outputs.c.lot, run_outputs.c.facets)
        .where(run_outputs.c.run_id == bindparam("b_run_id"), run_outputs.c.dataset_version_id.is_(None))
        .cte("io")
    )
    per_dataset = (
        select(io.c.dataset_id, func.count().label("n")).group_by(io.c.dataset_id).order_by(io.c.dataset_id)
    )
    columns = ["dataset_id", "last_version_number"]
    raised = upsert_insert(connection, counters).from_select(columns, per_dataset)
    by = raised.excluded.last_version_number
    counted = (
        raised.on_conflict_do_update(
            index_elements=["dataset_id"], set_={"last_version_number": counters.c.last_version_number + by}
        )
        .returning(counters.c.dataset_id, counters.c.last_version_number)
        .cte("counted")
    )
    count = func.count().over(partition_by=io.c.dataset_id)
    return (
        select(io.c.id, io.c.dataset_id, io.c.lot, io.c.facets, counted.c.last_version_number, count)
        .join(counted, counted.c.dataset_id == io.c.dataset_id)
        .order_by(io.c.dataset_id, io.c.lot)
    )


def _insert_pinned_output() -> Any:
    inserted = (
        insert(dataset_versions)
        .values({c.name: bindparam(f"v_{c.name}", type_=c.type) for c in _VERSION_COLUMNS})
        .returning(dataset_versions.c.id)
        .cte("inserted")
    )
    return (
        update(run_outputs)
        .where(run_outputs.c.id == bindparam("b_io_id"))
        .values(dataset_version_id=select(inserted.c.id).scalar_subquery())
        .add_cte(inserted)
    )


_VERSION_COLUMNS = tuple(
    dataset_versions.c[name]
    for name in (
        "id",
        "dataset_id",
        "version_number",
        "lot",
        "run_id",
        "state",
        "fields",
        "created_at",
        "facets",
    )
)
_INSERT_PINNED_OUTPUT = _insert_pinned_output()


def merge_facets(connection: Connection, version_id: uuid.UUID, facets: JsonObject) -> None:
    """Add facets to a version (its writer's output facets, recorded with its outcome; the facets
    of events that read it); written only when that changes them."""
    stored = json_or_empty(connection.execute(_FACETS, {"b_id": version_id}).scalar())
    merged = {**stored, **facets}
    if merged != stored:
        connection.execute(_SET_FACETS, {"b_id": version_id, "facets": merged})


def supersede_current(connection: Connection, dataset_id: uuid.UUID, lot: str) -> None:
    connection.execute(_SUPERSEDE, {"b_dataset_id": dataset_id, "b_lot": lot})


def current_version_id(connection: Connection, dataset_id: uuid.UUID, lot: str) -> uuid.UUID | None:
    found: uuid.UUID | None = connection.execute(
        _CURRENT_ID, {"b_dataset_id": dataset_id, "b_lot": lot}
    ).scalar()
    return found


def has_any_version(connection: Connection, dataset_id: uuid.UUID, lot: str) -> bool:
    return connection.execute(_ANY_VERSION, {"b_dataset_id": dataset_id, "b_lot": lot}).first() is not None


def _version_query() -> Any:
    return (
        select(dataset_versions, namespaces.c.name.label("namespace"), datasets.c.name.label("dataset"))
        .join(datasets, datasets.c.id == dataset_versions.c.dataset_id)
        .join(namespaces, namespaces.c.id == datasets.c.namespace_id)
    )


def _version(row: Row[Any]) -> DatasetVersion:
    m = row._mapping
    return DatasetVersion(
        id=m["id"],
        namespace=m["namespace"],
        dataset=m["dataset"],
        number=m["version_number"],
        lot=m["lot"] or None,
        state=VersionState(m["state"]),
        run_id=m["run_id"],
        fields=tuple(FieldSpec(f["name"], f.get("type"), f.get("description")) for f in m["fields"] or []),
        created_at=m["created_at"],
        facets=json_or_empty(m["facets"]),
    )


def get_version(connection: Connection, version_id: uuid.UUID) -> DatasetVersion | None:
    row = connection.execute(_version_query().where(dataset_versions.c.id == version_id)).first()
    return _version(row) if row else None


def current_version(connection: Connection, dataset_id: uuid.UUID, lot: str | None) -> DatasetVersion | None:
    """Current version of one lot, or (``lot=None``) of the dataset: its latest successful one."""
    query = _version_query().where(
        dataset_versions.c.dataset_id == dataset_id, dataset_versions.c.state == VersionState.CURRENT.value
    )
    if lot is not None:
        query = query.where(dataset_versions.c.lot == lot)
    row = connection.execute(query.order_by(dataset_versions.c.version_number.desc()).limit(1)).first()
    return _version(row) if row else None


def list_versions(
    connection: Connection,
    dataset_id: uuid.UUID,
    lot: str | None,
    limit: int,
    offset: int,
    states: Sequence[VersionState] = (),
) -> Page[DatasetVersion]:
    """Newest first. ``lot=None`` lists every lot; ``UNPARTITIONED`` only unpartitioned versions;
    ``states`` narrows to current, failed or superseded ones."""
    condition = dataset_versions.c.dataset_id == dataset_id
    if lot is not None:
        condition = condition & (dataset_versions.c.lot == (lot or UNPARTITIONED))
    if states:
        condition = condition & dataset_versions.c.state.in_([s.value for s in states])
    rows = connection.execute(
        _version_query()
        .where(condition)
        .order_by(dataset_versions.c.version_number.desc())
        .limit(limit)
        .offset(offset)
    ).all()
    total = connection.execute(select(func.count()).select_from(dataset_versions).where(condition))
    return Page([_version(r) for r in rows], total.scalar_one())


def supersede_current_many(connection: Connection, dataset_id: uuid.UUID, lots: Sequence[str]) -> None:
    """``supersede_current`` of many lots of one dataset, a statement per thousand lots."""
    for start in range(0, len(lots), 1000):
        statement = (
            update(dataset_versions)
            .where(
                dataset_versions.c.dataset_id == dataset_id,
                in_values(connection, dataset_versions.c.lot, lots[start : start + 1000]),
                dataset_versions.c.state == VersionState.CURRENT.value,
            )
            .values(state=VersionState.SUPERSEDED.value)
        )
        connection.execute(statement)
