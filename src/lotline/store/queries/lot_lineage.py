"""Reads of lot lineage: the lot versions runs read and wrote, the runs that wrote or read versions.

Every statement takes a batch of ids (a level of the walk), so a walk costs a few statements per
level whatever the number of lots in it.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, Table, literal, select, union_all

from lotline.domain.lot_lineage import LotRun, LotVersion
from lotline.domain.model import RunIoRole
from lotline.domain.runs import RunState
from lotline.domain.versions import VersionState
from lotline.store.schema import dataset_versions, datasets, jobs, namespaces, run_inputs, run_outputs, runs

#: Ids per statement: well under every driver's parameter limit.
_CHUNK = 500


def _chunks(ids: Sequence[uuid.UUID]) -> list[list[uuid.UUID]]:
    unique = list(dict.fromkeys(ids))
    return [unique[i : i + _CHUNK] for i in range(0, len(unique), _CHUNK)]


def _lot(r: Any) -> LotVersion:
    return LotVersion(
        r.namespace,
        r.dataset,
        r.lot,
        r.version_id,
        r.version_number,
        None if r.version_state is None else VersionState(r.version_state),
    )


def version_of_lot(connection: Connection, dataset_id: uuid.UUID, lot: str) -> LotVersion | None:
    """The lot's current version, else its newest one (None: the lot has no version)."""
    row = connection.execute(
        select(
            namespaces.c.name.label("namespace"),
            datasets.c.name.label("dataset"),
            dataset_versions.c.lot,
            dataset_versions.c.id.label("version_id"),
            dataset_versions.c.version_number,
            dataset_versions.c.state.label("version_state"),
        )
        .join(datasets, datasets.c.id == dataset_versions.c.dataset_id)
        .join(namespaces, namespaces.c.id == datasets.c.namespace_id)
        .where(dataset_versions.c.dataset_id == dataset_id, dataset_versions.c.lot == lot)
        .order_by(
            (dataset_versions.c.state == VersionState.CURRENT.value).desc(),
            dataset_versions.c.version_number.desc(),
        )
        .limit(1)
    ).first()
    return None if row is None else _lot(row)


def _io(table: Table, role: RunIoRole) -> Any:
    return (
        select(
            table.c.run_id,
            literal(role.value).label("role"),
            namespaces.c.name.label("namespace"),
            datasets.c.name.label("dataset"),
            table.c.lot,
            table.c.dataset_version_id.label("version_id"),
            dataset_versions.c.version_number,
            dataset_versions.c.state.label("version_state"),
        )
        .join(datasets, datasets.c.id == table.c.dataset_id)
        .join(namespaces, namespaces.c.id == datasets.c.namespace_id)
        .outerjoin(dataset_versions, dataset_versions.c.id == table.c.dataset_version_id)
    )


def io_of_runs(
    connection: Connection, run_ids: Sequence[uuid.UUID]
) -> list[tuple[uuid.UUID, RunIoRole, LotVersion]]:
    """(run id, input or output, lot version) for everything the runs read and wrote."""
    found = []
    for chunk in _chunks(run_ids):
        query = union_all(
            _io(run_inputs, RunIoRole.INPUT).where(run_inputs.c.run_id.in_(chunk)),
            _io(run_outputs, RunIoRole.OUTPUT).where(run_outputs.c.run_id.in_(chunk)),
        )
        found += [(r.run_id, RunIoRole(r.role), _lot(r)) for r in connection.execute(query)]
    return found


def producers(connection: Connection, version_ids: Sequence[uuid.UUID]) -> list[uuid.UUID]:
    """The runs that wrote these versions."""
    found: list[uuid.UUID] = []
    for chunk in _chunks(version_ids):
        found += connection.execute(
            select(dataset_versions.c.run_id).where(
                dataset_versions.c.id.in_(chunk), dataset_versions.c.run_id.is_not(None)
            )
        ).scalars()
    return found


def readers(connection: Connection, version_ids: Sequence[uuid.UUID]) -> list[uuid.UUID]:
    """The runs that read these versions."""
    found: list[uuid.UUID] = []
    for chunk in _chunks(version_ids):
        found += connection.execute(
            select(run_inputs.c.run_id).where(run_inputs.c.dataset_version_id.in_(chunk))
        ).scalars()
    return found


def load_runs(connection: Connection, run_ids: Sequence[uuid.UUID]) -> list[LotRun]:
    found = []
    for chunk in _chunks(run_ids):
        rows = connection.execute(
            select(
                runs.c.id,
                runs.c.lot,
                runs.c.state,
                runs.c.started_at,
                runs.c.ended_at,
                jobs.c.name.label("job"),
                namespaces.c.name.label("namespace"),
            )
            .join(jobs, jobs.c.id == runs.c.job_id)
            .join(namespaces, namespaces.c.id == jobs.c.namespace_id)
            .where(runs.c.id.in_(chunk))
        )
        found += [
            LotRun(r.id, r.namespace, r.job, r.lot or None, RunState(r.state), r.started_at, r.ended_at)
            for r in rows
        ]
    return found


def producers_of_inputs(connection: Connection, run_id: uuid.UUID) -> list[tuple[str, str, uuid.UUID]]:
    """(namespace, job, run) of the runs that wrote the versions the run's inputs are pinned to, in
    one statement (a lot's START names them as its ``jobDependencies``)."""
    rows = connection.execute(
        select(namespaces.c.name, jobs.c.name, runs.c.id)
        .distinct()
        .select_from(run_inputs)
        .join(dataset_versions, dataset_versions.c.id == run_inputs.c.dataset_version_id)
        .join(runs, runs.c.id == dataset_versions.c.run_id)
        .join(jobs, jobs.c.id == runs.c.job_id)
        .join(namespaces, namespaces.c.id == jobs.c.namespace_id)
        .where(run_inputs.c.run_id == run_id)
    )
    return sorted((namespace, job, found) for namespace, job, found in rows)
