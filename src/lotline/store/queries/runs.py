"""Runs, their state transitions, and the dataset versions they read and wrote."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import (
    Connection,
    Row,
    String,
    Uuid,
    bindparam,
    column,
    exists,
    func,
    insert,
    literal,
    null,
    select,
    true,
    tuple_,
    union_all,
    update,
)

from lotline.domain.model import JsonObject, Page, Run, RunIO, RunIoRole, RunTransition
from lotline.domain.runs import RunState
from lotline.domain.versions import VersionState
from lotline.store.dialect import (
    fast_path,
    ignoring_conflicts,
    in_values,
    insert_ignoring_conflicts,
    locks_rows,
    per_dialect,
)
from lotline.store.schema import (
    dataset_versions,
    datasets,
    job_version_io,
    jobs,
    namespaces,
    run_inputs,
    run_outputs,
    run_transitions,
    runs,
)
from lotline.store.types import JsonDocument, json_or_empty

#: The only place that knows which table holds which side of a run.
_IO_TABLES = {RunIoRole.INPUT: run_inputs, RunIoRole.OUTPUT: run_outputs}


@dataclass(frozen=True, slots=True)
class StoredRun:
    """What the recording rules need of a run's row (SPEC §2, §3), as read or inserted."""

    id: uuid.UUID
    job_id: uuid.UUID
    job_version_id: uuid.UUID | None
    lot: str
    state: RunState
    started_at: datetime | None
    nominal_start_time: datetime | None
    nominal_end_time: datetime | None
    facets: JsonObject


@dataclass(frozen=True, slots=True)
class UnpinnedIo:
    """A declared input or output of a run not yet tied to a dataset version."""

    id: int
    dataset_id: uuid.UUID
    lot: str
    #: What the run's events reported for it (``run_outputs.facets``), where read.
    facets: JsonObject | None = None


#: The columns of a ``StoredRun``, in its order.
_STORED_RUN = (
    runs.c.id,
    runs.c.job_id,
    runs.c.job_version_id,
    runs.c.lot,
    runs.c.state,
    runs.c.started_at,
    runs.c.nominal_start_time,
    runs.c.nominal_end_time,
    runs.c.facets,
)


def _stored_run(row: Sequence[Any]) -> StoredRun:
    run_id, job_id, version_id, lot, state, started_at, nominal_start, nominal_end, facets = row
    return StoredRun(
        run_id,
        job_id,
        version_id,
        lot,
        RunState(state),
        started_at,
        nominal_start,
        nominal_end,
        json_or_empty(facets),
    )


_INSERT_RUN = insert(runs).returning(*_STORED_RUN)
#: What ``insert_run`` writes of a run.
_RUN_COLUMNS = tuple(
    runs.c[name]
    for name in (
        "id",
        "job_id",
        "job_version_id",
        "parent_run_id",
        "lot",
        "state",
        "started_at",
        "nominal_start_time",
        "nominal_end_time",
        "args",
        "facets",
        "created_at",
        "updated_at",
    )
)


def insert_run(
    connection: Connection,
    *,
    run_id: uuid.UUID,
    job_id: uuid.UUID,
    job_version_id: uuid.UUID | None,
    parent_run_id: uuid.UUID | None,
    lot: str,
    nominal_start_time: datetime | None,
    nominal_end_time: datetime | None,
    args: JsonObject,
    facets: JsonObject,
    now: datetime,
    transitions: Sequence[tuple[RunState, datetime]] = (),
    inputs: Sequence[tuple[uuid.UUID, str]] = (),
    outputs: Sequence[tuple[uuid.UUID, str]] = (),
    pin: bool = False,
) -> tuple[StoredRun, list[UnpinnedIo]]:
    """The new run with its transitions (default: NEW, now), in the last one's state and started at
    the RUNNING one's time if there is one, and the (dataset id, lot) ``inputs`` and ``outputs`` it
    declares (``add_io``); as inserted. ``pin``: its inputs are pinned to their current versions as
    well (``pin_inputs_to_current``), and those that have none are returned, ordered by dataset id and
    lot. One statement on PostgreSQL, whatever the number of transitions, inputs and outputs."""
    transitions = transitions or [(RunState.NEW, now)]
    state = transitions[-1][0]
    started_at = next((at for s, at in transitions if s is RunState.RUNNING), None)
    values = {
        "id": run_id,
        "job_id": job_id,
        "job_version_id": job_version_id,
        "parent_run_id": parent_run_id,
        "lot": lot,
        "state": state.value,
        "started_at": started_at,
        "nominal_start_time": nominal_start_time,
        "nominal_end_time": nominal_end_time,
        "args": args,
        "facets": facets,
        "created_at": now,
        "updated_at": now,
    }
    return _insert_run_rows(connection, _NewRun(values, transitions, inputs, outputs, pin, now))


class _NewRun(NamedTuple):
    """What ``insert_run`` writes: the run's row ``values``, its transitions, declared inputs and
    outputs (dataset id, lot), whether its inputs are pinned, and the time it is recorded at."""

    values: dict[str, Any]
    transitions: Sequence[tuple[RunState, datetime]]
    inputs: Sequence[tuple[uuid.UUID, str]]
    outputs: Sequence[tuple[uuid.UUID, str]]
    pin: bool
    now: datetime


def _insert_run_portable(connection: Connection, new: _NewRun) -> tuple[StoredRun, list[UnpinnedIo]]:
    """The run's row, then its transitions, declared inputs and outputs, and pins."""
    values, transitions, inputs, outputs, pin, now = new
    run_id = values["id"]
    row = connection.execute(_INSERT_RUN, values).one()
    connection.execute(
        _INSERT_TRANSITION,
        [
            {"run_id": run_id, "state": s.value, "transitioned_at": at, "recorded_at": now}
            for s, at in transitions
        ],
    )
    add_io(connection, RunIoRole.INPUT, run_id, inputs, now)
    add_io(connection, RunIoRole.OUTPUT, run_id, outputs, now)
    return _stored_run(row), pin_inputs_to_current(connection, run_id) if pin else []


def _insert_run_postgresql(connection: Connection, new: _NewRun) -> tuple[StoredRun, list[UnpinnedIo]]:
    """The same in one round trip: the transitions are inserted from what the run's insert returned."""
    values, transitions, inputs, outputs, pin, now = new
    numbered: dict[str, object] = {f"t_state_{i}": s.value for i, (s, _) in enumerate(transitions)}
    numbered.update({f"t_at_{i}": at for i, (_, at) in enumerate(transitions)})
    declared = {
        f"io_{role.value}": [{"dataset_id": str(d), "lot": lot} for d, lot in entries]
        for role, entries in ((RunIoRole.INPUT, inputs), (RunIoRole.OUTPUT, outputs))
    }
    statement = _insert_run_statement(len(transitions), pin)
    parameters = {**values, **numbered, **declared, "t_now": now}
    *stored, unpinned = connection.execute(statement, parameters).one()
    left = [UnpinnedIo(io_id, uuid.UUID(dataset_id), lot) for io_id, dataset_id, lot in unpinned or ()]
    return _stored_run(stored), sorted(left, key=lambda io: (io.dataset_id, io.lot))


_insert_run_rows = fast_path(_insert_run_portable, _insert_run_postgresql)


@functools.cache
def _insert_run_statement(transitions: int, pin: bool) -> Any:
    """PostgreSQL: ``insert_run``'s run, its ``transitions``, inputs (pinned with ``pin``) and outputs
    in one statement (data-modifying ``WITH``s, the inputs and outputs as JSON documents: the foreign
    keys are checked at its end), with the inputs left unpinned as a JSON array; built once per
    number of transitions and ``pin``."""
    inserted = insert(runs).values({c.name: bindparam(c.name, type_=c.type) for c in _RUN_COLUMNS})
    run = inserted.returning(*_STORED_RUN).cte("run")
    each = [
        select(
            run.c.id,
            bindparam(f"t_state_{i}", type_=run_transitions.c.state.type),
            bindparam(f"t_at_{i}", type_=run_transitions.c.transitioned_at.type),
            bindparam("t_now", type_=run_transitions.c.recorded_at.type),
        )
        for i in range(transitions)
    ]
    recorded = (
        insert(run_transitions)
        .from_select(["run_id", "state", "transitioned_at", "recorded_at"], union_all(*each))
        .cte("recorded")
    )
    declared = []
    for role, table in _IO_TABLES.items():
        rows = (
            func.jsonb_to_recordset(bindparam(f"io_{role.value}", type_=JsonDocument))
            .table_valued(column("dataset_id", Uuid), column("lot", String))
            .render_derived(with_types=True)
        )
        at = bindparam("t_now", type_=table.c.recorded_at.type)
        names = ["run_id", "dataset_id", "lot", "recorded_at"]
        values = [run.c.id, rows.c.dataset_id, rows.c.lot, at]
        if pin and role is RunIoRole.INPUT:
            names.append("dataset_version_id")
            values.append(_current_version_of(rows.c.dataset_id, rows.c.lot))
        # The one run row with each declared row (a join on true: not a forgotten condition).
        pairs = select(*values).select_from(run.join(rows, true()))
        declared.append(
            ignoring_conflicts("postgresql", table, ("run_id", "dataset_id", "lot"))
            .from_select(names, pairs)
            .returning(table.c.id, table.c.dataset_id, table.c.lot, table.c.dataset_version_id)
            .cte(f"declared_{role.value.lower()}")
        )
    read = declared[0]
    left = func.json_agg(func.json_build_array(read.c.id, read.c.dataset_id, read.c.lot))
    unpinned = select(left).where(read.c.dataset_version_id.is_(None)).scalar_subquery() if pin else null()
    return select(*run.c, unpinned).add_cte(run, recorded, *declared)


def run_exists(connection: Connection, run_id: uuid.UUID) -> bool:
    return connection.execute(_RUN_ID, {"b_run_id": run_id}).first() is not None


_RUN = select(*_STORED_RUN).where(runs.c.id == bindparam("b_run_id"))
_RUN_ID = select(runs.c.id).where(runs.c.id == bindparam("b_run_id"))
_SET_STATE = update(runs).where(runs.c.id == bindparam("b_run_id"), runs.c.state == bindparam("b_expected"))
_INSERT_TRANSITION = insert(run_transitions)
_UPDATE_RUN = update(runs).where(runs.c.id == bindparam("b_run_id"))


@per_dialect
def _locked_run(connection: Connection) -> Any:
    return _RUN.with_for_update() if locks_rows(connection) else _RUN


def lock_run(connection: Connection, run_id: uuid.UUID) -> StoredRun | None:
    """The run, its row locked until commit so that concurrent transitions of one run serialize."""
    row = connection.execute(_locked_run(connection), {"b_run_id": run_id}).first()
    return None if row is None else _stored_run(row)


def lock_runs(connection: Connection, run_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, StoredRun]:
    """Those of ``run_ids`` that exist, as ``lock_run`` reads them, locked in one statement and in id
    order (two projection groups lock their runs in one order, so they never deadlock)."""
    if not run_ids:
        return {}
    query = select(*_STORED_RUN).where(in_values(connection, runs.c.id, run_ids)).order_by(runs.c.id)
    if locks_rows(connection):
        query = query.with_for_update()
    return {row[0]: _stored_run(row) for row in connection.execute(query)}


def read_run(connection: Connection, run_id: uuid.UUID) -> StoredRun | None:
    """The run, without locking it."""
    row = connection.execute(_RUN, {"b_run_id": run_id}).first()
    return None if row is None else _stored_run(row)


def set_state(
    connection: Connection,
    run_id: uuid.UUID,
    *,
    expected: RunState,
    target: RunState,
    at: datetime,
    now: datetime,
    job_version_id: uuid.UUID | None = None,
) -> None:
    """Fenced state change: applies only if the run is still in ``expected``; ``job_version_id``, when
    given, is written with it."""
    changes: dict[str, object] = {"state": target.value, "updated_at": now}
    if job_version_id is not None:
        changes["job_version_id"] = job_version_id
    if target is RunState.RUNNING:
        changes["started_at"] = at
    elif target.is_terminal:
        changes["ended_at"] = at
    _set_state_recorded(connection, _StateChange(run_id, expected, target, changes, at, now))


class _StateChange(NamedTuple):
    run_id: uuid.UUID
    expected: RunState
    target: RunState
    changes: dict[str, object]
    at: datetime
    now: datetime


def _set_state_portable(connection: Connection, change: _StateChange) -> None:
    """``set_state``'s fenced update of the run's ``changes``, then its transition."""
    run_id, expected, target, changes, at, now = change
    count = connection.execute(
        _SET_STATE, {"b_run_id": run_id, "b_expected": expected.value, **changes}
    ).rowcount
    _check_moved(run_id, expected, count)
    insert_transition(connection, run_id, target, at, now)


def _set_state_postgresql(connection: Connection, change: _StateChange) -> None:
    """The same in one round trip: the transition is inserted from what the fenced update returned."""
    run_id, expected, target, changes, at, now = change
    parameters = {
        "b_run_id": run_id,
        "b_expected": expected.value,
        **changes,
        "t_state": target.value,
        "t_at": at,
        "t_now": now,
    }
    moved = connection.execute(_set_state_statement(tuple(changes)), parameters)
    _check_moved(run_id, expected, len(moved.all()))


_set_state_recorded = fast_path(_set_state_portable, _set_state_postgresql)


def _check_moved(run_id: uuid.UUID, expected: RunState, count: int) -> None:
    if count != 1:
        raise RuntimeError(f"run {run_id} left state {expected} while its row was locked")


@functools.cache
def _set_state_statement(columns: tuple[str, ...]) -> Any:
    """PostgreSQL: ``set_state``'s fenced update and its transition in one statement (a
    data-modifying ``WITH``), for the ``columns`` it changes; built once per set of columns."""
    moved = (
        _SET_STATE.values({column: bindparam(column, type_=runs.c[column].type) for column in columns})
        .returning(runs.c.id)
        .cte("moved")
    )
    recorded = select(
        moved.c.id,
        bindparam("t_state", type_=run_transitions.c.state.type),
        bindparam("t_at", type_=run_transitions.c.transitioned_at.type),
        bindparam("t_now", type_=run_transitions.c.recorded_at.type),
    )
    return (
        insert(run_transitions)
        .from_select(["run_id", "state", "transitioned_at", "recorded_at"], recorded)
        .add_cte(moved)
        .returning(run_transitions.c.run_id)  # a row per run moved (the driver gives no row count)
    )


def insert_transition(
    connection: Connection, run_id: uuid.UUID, state: RunState, at: datetime, now: datetime
) -> None:
    connection.execute(
        _INSERT_TRANSITION,
        {"run_id": run_id, "state": state.value, "transitioned_at": at, "recorded_at": now},
    )


def set_job_version(
    connection: Connection, run_id: uuid.UUID, job_version_id: uuid.UUID, now: datetime
) -> None:
    connection.execute(_UPDATE_RUN, {"b_run_id": run_id, "job_version_id": job_version_id, "updated_at": now})


def set_parent(connection: Connection, run_id: uuid.UUID, parent_run_id: uuid.UUID, now: datetime) -> None:
    connection.execute(_UPDATE_RUN, {"b_run_id": run_id, "parent_run_id": parent_run_id, "updated_at": now})


#: Deeper parent chains than this are not followed (links refuse cycles; this bounds a corrupt one).
MAX_ANCESTORS = 1000


def _ancestors() -> Any:
    chain = (
        select(runs.c.parent_run_id.label("parent"), literal(1).label("depth"))
        .where(runs.c.id == bindparam("b_run"))
        .cte("chain", recursive=True)
    )
    above = runs.alias("above")
    chain = chain.union_all(
        select(above.c.parent_run_id, chain.c.depth + 1)
        .join(chain, above.c.id == chain.c.parent)
        .where(chain.c.depth < MAX_ANCESTORS)
    )
    return select(chain.c.parent).where(chain.c.parent.is_not(None)).order_by(chain.c.depth)


_ANCESTORS = _ancestors()


def ancestors(connection: Connection, run_id: uuid.UUID) -> list[uuid.UUID]:
    """The chain of parents above a run, nearest first, in one statement (a recursive query)."""
    found: list[uuid.UUID] = []
    for (parent,) in connection.execute(_ANCESTORS, {"b_run": run_id}):
        if parent in found or parent == run_id:
            break  # a cycle (never written, but never followed for ever either)
        found.append(parent)
    return found


def add_io(
    connection: Connection,
    role: RunIoRole,
    run_id: uuid.UUID,
    entries: Sequence[tuple[uuid.UUID, str]],
    now: datetime,
) -> None:
    """Declare (dataset id, lot) pairs as inputs or outputs of a run; repeats are ignored."""
    insert_ignoring_conflicts(
        connection,
        _IO_TABLES[role],
        [{"run_id": run_id, "dataset_id": d, "lot": lot, "recorded_at": now} for d, lot in entries],
        ["run_id", "dataset_id", "lot"],
    )


def undeclared_version_io(
    connection: Connection, run_id: uuid.UUID, job_version_id: uuid.UUID | None
) -> list[tuple[uuid.UUID, RunIoRole]]:
    """(dataset id, role) of the job version's inputs/outputs that the run has not declared at any lot."""
    if job_version_id is None:
        return []
    rows = connection.execute(_UNDECLARED, {"b_run": run_id, "b_version": job_version_id}).all()
    return [(dataset_id, RunIoRole(role)) for dataset_id, role in rows]


_UNVERSIONED_OUTPUTS = (
    select(run_outputs.c.id, run_outputs.c.dataset_id, run_outputs.c.lot, run_outputs.c.facets)
    .where(run_outputs.c.run_id == bindparam("b_run_id"), run_outputs.c.dataset_version_id.is_(None))
    .order_by(run_outputs.c.dataset_id, run_outputs.c.lot)
)
_PIN_IO = {role: update(table).where(table.c.id == bindparam("b_id")) for role, table in _IO_TABLES.items()}


def unversioned_outputs(connection: Connection, run_id: uuid.UUID) -> list[UnpinnedIo]:
    """Declared outputs of a run not yet tied to a version, ordered by dataset id and lot, so that
    concurrent runs lock datasets in the same order (no deadlocks)."""
    return [UnpinnedIo(*row) for row in connection.execute(_UNVERSIONED_OUTPUTS, {"b_run_id": run_id})]


def _io_facets(role: RunIoRole) -> tuple[Any, Any]:
    table = _IO_TABLES[role]
    rows = table.c.run_id == bindparam("b_run"), table.c.dataset_id == bindparam("b_dataset")
    read = select(table.c.id, table.c.facets).where(
        *rows, table.c.lot.in_(bindparam("b_lots", expanding=True))
    )
    return read, update(table).where(table.c.id == bindparam("b_id"))


_IO_FACETS = {role: _io_facets(role) for role in RunIoRole}


def merge_io_facets(
    connection: Connection,
    role: RunIoRole,
    run_id: uuid.UUID,
    dataset_id: uuid.UUID,
    lots: Sequence[str],
    facets: JsonObject,
) -> None:
    """Add what an event reported for one input or output of a run (each of its lots) to what the
    run's earlier events did; written only when that changes them."""
    read, write = _IO_FACETS[role]
    for io_id, stored in connection.execute(
        read, {"b_run": run_id, "b_dataset": dataset_id, "b_lots": list(lots)}
    ):
        before = json_or_empty(stored)
        merged = {**before, **facets}
        if merged != before:
            connection.execute(write, {"b_id": io_id, "facets": merged})


def reported_for_version(
    connection: Connection, version_id: uuid.UUID
) -> list[tuple[RunIoRole, uuid.UUID, JsonObject]]:
    """(side, run, facets) of the runs that wrote or read this version and reported facets for it,
    oldest report first."""
    found = []
    for role, table in _IO_TABLES.items():
        rows = connection.execute(
            select(table.c.run_id, table.c.facets, table.c.recorded_at).where(
                table.c.dataset_version_id == version_id, table.c.facets.is_not(None)
            )
        )
        found += [(r.recorded_at, role, r.run_id, json_or_empty(r.facets)) for r in rows]
    return [(role, run_id, facets) for _, role, run_id, facets in sorted(found, key=lambda f: f[0])]


def pin_io(connection: Connection, role: RunIoRole, io_id: int, version_id: uuid.UUID) -> None:
    connection.execute(_PIN_IO[role], {"b_id": io_id, "dataset_version_id": version_id})


def _undeclared() -> Any:
    io = job_version_io
    declared = [
        exists().where(
            io.c.role == role.value,
            table.c.run_id == bindparam("b_run"),
            table.c.dataset_id == io.c.dataset_id,
        )
        for role, table in _IO_TABLES.items()
    ]
    return (
        select(io.c.dataset_id, io.c.role)
        .where(io.c.job_version_id == bindparam("b_version"), ~declared[0], ~declared[1])
        .order_by(io.c.role, io.c.dataset_id)
    )


_UNDECLARED = _undeclared()


def _current_version_of(dataset_id: Any, lot: Any) -> Any:
    """The id of the (dataset, lot)'s current version (NULL if it has none), as a column."""
    return (
        select(dataset_versions.c.id)
        .where(
            dataset_versions.c.dataset_id == dataset_id,
            dataset_versions.c.lot == lot,
            dataset_versions.c.state == VersionState.CURRENT.value,
        )
        .scalar_subquery()
    )


def _pin_to_current() -> Any:
    return (
        update(run_inputs)
        .where(run_inputs.c.run_id == bindparam("b_run"), run_inputs.c.dataset_version_id.is_(None))
        .values(dataset_version_id=_current_version_of(run_inputs.c.dataset_id, run_inputs.c.lot))
        .returning(
            run_inputs.c.id, run_inputs.c.dataset_id, run_inputs.c.lot, run_inputs.c.dataset_version_id
        )
    )


_PIN_TO_CURRENT = _pin_to_current()


def pin_inputs_to_current(connection: Connection, run_id: uuid.UUID) -> list[UnpinnedIo]:
    """Tie each unpinned input of a run to its (dataset, lot)'s current version, in one statement.

    Returns the inputs that have no current version (still unpinned), ordered by dataset id and lot.
    """
    rows = connection.execute(_PIN_TO_CURRENT, {"b_run": run_id})
    unpinned = [
        UnpinnedIo(io_id, dataset_id, lot) for io_id, dataset_id, lot, version in rows if version is None
    ]
    return sorted(unpinned, key=lambda io: (io.dataset_id, io.lot))


def _io_of(
    connection: Connection, role: RunIoRole, run_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, list[RunIO]]:
    table = _IO_TABLES[role]
    rows = connection.execute(
        select(
            table.c.run_id,
            table.c.lot,
            table.c.dataset_version_id,
            namespaces.c.name.label("namespace"),
            datasets.c.name.label("dataset"),
            dataset_versions.c.version_number,
            table.c.facets,
        )
        .join(datasets, datasets.c.id == table.c.dataset_id)
        .join(namespaces, namespaces.c.id == datasets.c.namespace_id)
        .outerjoin(dataset_versions, dataset_versions.c.id == table.c.dataset_version_id)
        .where(table.c.run_id.in_(run_ids))
        .order_by(namespaces.c.name, datasets.c.name, table.c.lot)
    ).all()
    found: dict[uuid.UUID, list[RunIO]] = {}
    for r in rows:
        found.setdefault(r.run_id, []).append(
            RunIO(
                r.namespace,
                r.dataset,
                r.lot or None,
                r.dataset_version_id,
                r.version_number,
                json_or_empty(r.facets),
            )
        )
    return found


def _run_query() -> Any:
    return (
        select(runs, jobs.c.name.label("job"), namespaces.c.name.label("namespace"))
        .join(jobs, jobs.c.id == runs.c.job_id)
        .join(namespaces, namespaces.c.id == jobs.c.namespace_id)
    )


def _load(connection: Connection, rows: Sequence[Row[Any]]) -> list[Run]:
    ids = [r.id for r in rows]
    inputs = _io_of(connection, RunIoRole.INPUT, ids)
    outputs = _io_of(connection, RunIoRole.OUTPUT, ids)
    transitions: dict[uuid.UUID, list[RunTransition]] = {}
    for t in connection.execute(
        select(run_transitions).where(run_transitions.c.run_id.in_(ids)).order_by(run_transitions.c.id)
    ):
        transitions.setdefault(t.run_id, []).append(RunTransition(RunState(t.state), t.transitioned_at))
    return [
        Run(
            id=r.id,
            namespace=r.namespace,
            job=r.job,
            job_version=r.job_version_id,
            parent_run_id=r.parent_run_id,
            lot=r.lot or None,
            state=RunState(r.state),
            created_at=r.created_at,
            updated_at=r.updated_at,
            started_at=r.started_at,
            ended_at=r.ended_at,
            nominal_start_time=r.nominal_start_time,
            nominal_end_time=r.nominal_end_time,
            args=json_or_empty(r.args),
            facets=json_or_empty(r.facets),
            inputs=tuple(inputs.get(r.id, ())),
            outputs=tuple(outputs.get(r.id, ())),
            transitions=tuple(transitions.get(r.id, ())),
        )
        for r in rows
    ]


def get_run(connection: Connection, run_id: uuid.UUID) -> Run | None:
    rows = connection.execute(_run_query().where(runs.c.id == run_id)).all()
    return _load(connection, rows)[0] if rows else None


def get_runs(connection: Connection, run_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, Run]:
    """Many runs in a fixed number of statements (unknown ids are absent)."""
    found: dict[uuid.UUID, Run] = {}
    for start in range(0, len(run_ids), 500):
        rows = connection.execute(_run_query().where(runs.c.id.in_(list(run_ids[start : start + 500])))).all()
        found.update({run.id: run for run in _load(connection, rows)})
    return found


#: The newest run first: how ``list_runs`` orders and ``latest_runs`` picks them, so that a job's
#: ``latestRun`` is the same run whichever endpoint shows it.
_NEWEST_FIRST = (runs.c.created_at.desc(), runs.c.id)


def list_runs(
    connection: Connection,
    job_id: uuid.UUID,
    limit: int,
    offset: int,
    states: Sequence[RunState] = (),
    lot: str | None = None,
) -> Page[Run]:
    """The job's runs, newest first; ``states`` and ``lot`` narrow them (the web UI's filters)."""
    where = [runs.c.job_id == job_id]
    if states:
        where.append(runs.c.state.in_([s.value for s in states]))
    if lot is not None:
        where.append(runs.c.lot == lot)
    rows = connection.execute(
        _run_query().where(*where).order_by(*_NEWEST_FIRST).limit(limit).offset(offset)
    ).all()
    total = connection.execute(select(func.count()).select_from(runs).where(*where))
    return Page(_load(connection, rows), total.scalar_one())


def latest_states(
    connection: Connection, names: Sequence[tuple[str, str]]
) -> dict[tuple[str, str], RunState]:
    """The state of the newest run of each (namespace, job) (jobs without runs are left out): one
    indexed look per job through ``(job_id, created_at)``, so a graph of 500 jobs is 500 probes."""
    newest = (
        select(runs.c.state)
        .where(runs.c.job_id == jobs.c.id)
        .order_by(runs.c.created_at.desc(), runs.c.id.desc())
        .limit(1)
        .scalar_subquery()
    )
    query = select(namespaces.c.name.label("namespace"), jobs.c.name, newest.label("state")).join(
        namespaces, namespaces.c.id == jobs.c.namespace_id
    )
    found: dict[tuple[str, str], RunState] = {}
    for start in range(0, len(names), 500):
        chunk = names[start : start + 500]
        rows = connection.execute(query.where(tuple_(namespaces.c.name, jobs.c.name).in_(chunk)))
        found.update({(r.namespace, r.name): RunState(r.state) for r in rows if r.state is not None})
    return found


def latest_runs(connection: Connection, names: Sequence[tuple[str, str]]) -> dict[tuple[str, str], Run]:
    """The newest run of each (namespace, job), as ``list_runs`` would list it first (jobs without
    runs are left out): one statement picks them, one indexed look per job through
    ``(job_id, created_at)``, and ``_load`` reads them in a fixed number of statements."""
    owner, space, other = jobs.alias("owner"), namespaces.alias("space"), runs.alias("other")
    newest = (
        select(other.c.id)
        .where(other.c.job_id == owner.c.id)
        .order_by(other.c.created_at.desc(), other.c.id)
        .limit(1)
    )
    found: dict[tuple[str, str], Run] = {}
    for start in range(0, len(names), 500):
        chunk = names[start : start + 500]
        picked = (
            select(newest.scalar_subquery())
            .select_from(owner.join(space, space.c.id == owner.c.namespace_id))
            .where(tuple_(space.c.name, owner.c.name).in_(chunk))
        )
        rows = connection.execute(_run_query().where(runs.c.id.in_(picked))).all()
        found.update({(r.namespace, r.job): r for r in _load(connection, rows)})
    return found


def latest_runs_of_versions(
    connection: Connection, job_id: uuid.UUID, version_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, Run]:
    """The newest run of each of the job's versions (versions without runs are left out), picked
    for the whole page in one statement over the job's runs (``(job_id, created_at)``)."""
    if not version_ids:
        return {}
    other = runs.alias("other")
    newest_first = (other.c.created_at.desc(), other.c.id)
    ranked = (
        select(
            other.c.id,
            func.row_number().over(partition_by=other.c.job_version_id, order_by=newest_first).label("rank"),
        )
        .where(other.c.job_id == job_id, other.c.job_version_id.in_(version_ids))
        .subquery()
    )
    picked = select(ranked.c.id).where(ranked.c.rank == 1)
    rows = connection.execute(_run_query().where(runs.c.id.in_(picked))).all()
    return {r.job_version: r for r in _load(connection, rows) if r.job_version is not None}


def child_runs(connection: Connection, parent_run_id: uuid.UUID) -> list[Run]:
    rows = connection.execute(
        _run_query().where(runs.c.parent_run_id == parent_run_id).order_by(runs.c.created_at, runs.c.id)
    ).all()
    return _load(connection, rows)


def merge_run_facets(
    connection: Connection,
    run: StoredRun,
    facets: JsonObject,
    now: datetime,
    *,
    window: tuple[datetime, datetime] | None = None,
) -> None:
    """Later facets of one name replace earlier ones; others accumulate. ``run`` is locked by the
    caller; nothing is written when the facets change nothing. ``window``: the run's nominal start
    and end (its lot's), set in the same statement."""
    stored = run.facets
    merged = {**stored, **facets}
    values: dict[str, Any] = {}
    if merged != stored:
        values.update(facets=merged, updated_at=now)
    if window is not None:
        values.update(nominal_start_time=window[0], nominal_end_time=window[1])
    if values:
        connection.execute(_UPDATE_RUN, {"b_run_id": run.id, **values})


def set_error(
    connection: Connection, run_id: uuid.UUID, error: str, now: datetime, kind: str | None = None
) -> None:
    """Record why the run failed (one line, ``runs.error``) and its kind (``runs.error_kind``)."""
    connection.execute(
        _UPDATE_RUN, {"b_run_id": run_id, "error": error, "error_kind": kind, "updated_at": now}
    )


_RUN_IO = union_all(
    *(
        select(table.c.dataset_id, literal(table is run_inputs).label("is_input")).where(
            table.c.run_id == bindparam("b_run_id")
        )
        for table in (run_inputs, run_outputs)
    )
)


def run_io_dataset_ids(connection: Connection, run_id: uuid.UUID) -> tuple[list[uuid.UUID], list[uuid.UUID]]:
    """The datasets a run has reported reading and writing so far (any lot), in one statement."""
    rows = connection.execute(_RUN_IO, {"b_run_id": run_id}).all()
    inputs = {r.dataset_id for r in rows if r.is_input}
    outputs = {r.dataset_id for r in rows if not r.is_input}
    return sorted(inputs), sorted(outputs)


PinnedInput = tuple[uuid.UUID, str, uuid.UUID | None]


def pinned_inputs(
    connection: Connection, run_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, frozenset[PinnedInput]]:
    """What each run read: its (dataset, lot, pinned version) inputs."""
    found: dict[uuid.UUID, set[PinnedInput]] = {run_id: set() for run_id in run_ids}
    rows = connection.execute(
        select(
            run_inputs.c.run_id, run_inputs.c.dataset_id, run_inputs.c.lot, run_inputs.c.dataset_version_id
        ).where(run_inputs.c.run_id.in_(list(run_ids)))
    )
    for run_id, dataset_id, lot, version_id in rows:
        found[run_id].add((dataset_id, lot, version_id))
    return {run_id: frozenset(inputs) for run_id, inputs in found.items()}


def parents_and_versions(
    connection: Connection, run_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, tuple[uuid.UUID | None, uuid.UUID | None]]:
    """Each run's (parent run, job version)."""
    rows = connection.execute(
        select(runs.c.id, runs.c.parent_run_id, runs.c.job_version_id).where(runs.c.id.in_(list(run_ids)))
    )
    return {run_id: (parent, version) for run_id, parent, version in rows}


def lot_runs(connection: Connection, job_id: uuid.UUID, lot: str) -> list[tuple[uuid.UUID, RunState]]:
    """The runs of one (job, lot) that are not children of another run, oldest first."""
    rows = connection.execute(
        select(runs.c.id, runs.c.state)
        .where(runs.c.job_id == job_id, runs.c.lot == lot, runs.c.parent_run_id.is_(None))
        .order_by(runs.c.created_at, runs.c.id)
    )
    return [(run_id, RunState(state)) for run_id, state in rows]


def running_children(connection: Connection, parent_run_id: uuid.UUID) -> list[uuid.UUID]:
    """Child runs of a run that have not ended (a lot's parts, when the lot's run fails)."""
    rows = connection.execute(
        select(runs.c.id)
        .where(
            runs.c.parent_run_id == parent_run_id,
            runs.c.state.in_([RunState.NEW.value, RunState.RUNNING.value]),
        )
        .order_by(runs.c.id)
    )
    return [run_id for (run_id,) in rows]


_FAILURE_REASONS = select(runs.c.id, runs.c.error, runs.c.error_kind).where(
    runs.c.id.in_(bindparam("b_runs", expanding=True)), runs.c.error.is_not(None)
)


def failure_reasons(
    connection: Connection, run_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, tuple[str, str | None]]:
    """The one-line reason each of these runs failed with and its kind (``runs.error``,
    ``runs.error_kind``; runs without a reason are absent), in one statement per thousand runs."""
    found: dict[uuid.UUID, tuple[str, str | None]] = {}
    wanted = list(dict.fromkeys(run_ids))
    for start in range(0, len(wanted), 1000):
        rows = connection.execute(_FAILURE_REASONS, {"b_runs": wanted[start : start + 1000]})
        found.update((run_id, (error, kind)) for run_id, error, kind in rows)
    return found
