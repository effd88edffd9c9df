"""Checks every use case shares: paging bounds, times, and resolving names to ids."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Connection

from lotline.domain.errors import InvalidInput, NotFound
from lotline.domain.lots import validate_lot_id
from lotline.domain.model import DatasetRef
from lotline.domain.names import validate_name
from lotline.domain.times import check_storable
from lotline.domain.versions import UNPARTITIONED
from lotline.store.queries import catalog, datasets, graph, jobs, runs

MAX_PAGE = 1000


def check_page(limit: int, offset: int) -> None:
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidInput(f"limit must be between 1 and {MAX_PAGE}, got {limit}.")
    if offset < 0:
        raise InvalidInput(f"offset must not be negative, got {offset}.")


def check_aware(label: str, value: datetime | None) -> None:
    """A time given to a use case must have an offset and be storable (``domain.times``)."""
    if value is not None:
        check_storable(label, value)


def lot_key(lot: str | None) -> str:
    """The stored form of a lot: validated id, or ``''`` for "not partitioned"."""
    return UNPARTITIONED if lot is None else validate_lot_id(lot)


def check_ref(ref: DatasetRef) -> None:
    validate_name("Namespace", ref.namespace)
    validate_name("Dataset", ref.name)
    lot_key(ref.lot)


def require_namespace(connection: Connection, name: str) -> uuid.UUID:
    found = catalog.namespace_id(connection, validate_name("Namespace", name))
    if found is None:
        raise NotFound("Namespace", name)
    return found


def require_job(connection: Connection, namespace: str, name: str) -> jobs.StoredJob:
    """The job, deleted or not (a deleted job's runs are still created and read)."""
    found = jobs.job_row(connection, namespace, name)
    if found is None:
        raise NotFound("Job", f"{namespace}:{name}")
    return found


def require_live_job(connection: Connection, namespace: str, name: str) -> uuid.UUID:
    """The id of a job that is not deleted."""
    found = graph.job_id(connection, namespace, name)
    if found is None:
        raise NotFound("Job", f"{namespace}:{name}")
    return found


def require_run(connection: Connection, run_id: uuid.UUID, *, lock: bool = True) -> runs.StoredRun:
    """The run; with ``lock``, its row is locked until commit (transitions of one run serialize)."""
    found = runs.lock_run(connection, run_id) if lock else runs.read_run(connection, run_id)
    if found is None:
        raise NotFound("Run", str(run_id))
    return found


def require_dataset(connection: Connection, namespace: str, name: str) -> uuid.UUID:
    require_namespace(connection, namespace)
    found = datasets.dataset_id(connection, namespace, validate_name("Dataset", name))
    if found is None:
        raise NotFound("Dataset", f"{namespace}:{name}")
    return found


def require_datasets(connection: Connection, refs: Sequence[DatasetRef]) -> list[tuple[uuid.UUID, str]]:
    """(dataset id, stored lot) for each ref, or NotFound for the first unknown one."""
    for ref in refs:
        check_ref(ref)
    return [(require_dataset(connection, r.namespace, r.name), lot_key(r.lot)) for r in refs]
