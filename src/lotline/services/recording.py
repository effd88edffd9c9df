"""The versioning rules of SPEC §3 applied inside a caller's write transaction.

Shared by every use case that touches what a run read or wrote, so that the rules have one
implementation whichever interface (REST, OpenLineage, runner) reported the fact.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime

from sqlalchemy import Connection

from lotline.domain.errors import Conflict
from lotline.domain.model import JsonObject, RunIoRole
from lotline.domain.quality import quality_facets, without_quality
from lotline.domain.runs import RunAction, RunState, plan_transition
from lotline.domain.versions import (
    VersionState,
    input_version_id,
    mints_output_versions,
    output_version_id,
    output_version_state,
)
from lotline.services import _common
from lotline.store.queries import datasets, runs, versions
from lotline.store.queries.runs import StoredRun
from lotline.store.types import utcnow

#: Reads what a new version of a dataset is made of (``datasets.version_basis``, or a cache of it).
BasisLookup = Callable[[Connection, uuid.UUID], datasets.VersionBasis]


def apply_transition(
    connection: Connection,
    run_id: uuid.UUID,
    action: RunAction,
    at: datetime | None = None,
    *,
    locked: StoredRun | None = None,
    job_version_id: uuid.UUID | None = None,
    refuse_earlier: bool = False,
    version_basis: BasisLookup = datasets.version_basis,
) -> RunState:
    """Move a run through the state machine inside the caller's transaction; returns its new state.

    Repeats are no-ops and illegal moves raise Conflict (SPEC §2). Starting pins the inputs;
    ending versions every output the run declared (SPEC §3). Callers that must commit more in the
    same transaction (a lot's status, its manifest) pass their own connection. A caller that has
    already locked the run's row in this transaction, and not changed its state since, passes it as
    ``locked`` to save locking it again; one that has a new job version for the run passes it as
    ``job_version_id``, written with the new state (it is then the version the transition uses;
    a repeat writes nothing, the version included).

    A run never ends before it started: an end time earlier than the start is a Conflict when
    ``refuse_earlier`` (a client saying when, on REST), else the end is recorded at the start
    (OpenLineage events and workers' clocks may disagree by a little; a finished run is never
    reopened for it). ``version_basis``: where ending reads what an output's new version is made of
    (a projection group reads each dataset's once).
    """
    now = utcnow()
    row = locked if locked is not None else _common.require_run(connection, run_id)
    plan = plan_transition(row.state, action)
    if plan.changes:
        at = at or now
        if row.started_at is not None and plan.target is not RunState.RUNNING and at < row.started_at:
            if refuse_earlier:
                raise Conflict(
                    f"Run {run_id} started at {row.started_at.isoformat()}; it cannot end at "
                    f"{at.isoformat()}, before it started."
                )
            at = row.started_at
        runs.set_state(
            connection,
            run_id,
            expected=plan.current,
            target=plan.target,
            at=at,
            now=now,
            job_version_id=job_version_id,
        )
        if plan.target is RunState.RUNNING:
            _started(connection, run_id, job_version_id or row.job_version_id, row.lot, now)
        if mints_output_versions(plan.current, plan.target):
            mint_outputs(connection, run_id, plan.target, now, version_basis)
    return plan.target


def create_run(
    connection: Connection,
    *,
    run_id: uuid.UUID,
    job_id: uuid.UUID,
    job_version_id: uuid.UUID | None,
    lot: str,
    inputs: Sequence[tuple[uuid.UUID, str]],
    outputs: Sequence[tuple[uuid.UUID, str]],
    started_at: datetime | None,
    nominal_start_time: datetime | None = None,
    nominal_end_time: datetime | None = None,
    facets: JsonObject | None = None,
) -> StoredRun:
    """Create a run with the inputs and outputs it declares, started at ``started_at`` if given;
    as inserted.

    A run that starts at once (a lot claim's, an OpenLineage START of an unknown run) has its NEW
    and START transitions recorded together, then what START implies (``apply_transition``'s rules:
    the job's declared I/O, inputs pinned), without writing the run twice or reading it back.
    ``started_at`` must not precede anything the run waited for: the caller takes it once the run
    may start.
    """
    now = utcnow()
    # Transitions in time order: a run that starts at once was NEW no later than its start (a
    # claim's start is taken before this call; an event's time may be in the past).
    transitions = [(RunState.NEW, now if started_at is None else min(now, started_at))]
    if started_at is not None:
        plan = plan_transition(RunState.NEW, RunAction.START)
        transitions.append((plan.target, started_at))
    # With no job version, starting declares nothing more: the inputs are pinned by the insert.
    pin = started_at is not None and job_version_id is None
    row, unpinned = runs.insert_run(
        connection,
        run_id=run_id,
        job_id=job_id,
        job_version_id=job_version_id,
        parent_run_id=None,
        lot=lot,
        nominal_start_time=nominal_start_time,
        nominal_end_time=nominal_end_time,
        args={},
        facets=facets or {},
        now=now,
        transitions=transitions,
        inputs=inputs,
        outputs=outputs,
        pin=pin,
    )
    if pin:
        version_unpinned_inputs(connection, unpinned, now)
    elif started_at is not None:
        _started(connection, run_id, job_version_id, lot, now)
    return row


def _started(
    connection: Connection, run_id: uuid.UUID, job_version_id: uuid.UUID | None, lot: str, now: datetime
) -> None:
    """What starting a run implies: its job's declared inputs/outputs become its own, inputs are pinned."""
    declare_job_io(connection, run_id, job_version_id, lot, now)
    pin_inputs(connection, run_id, now)


def record_run_io(
    connection: Connection,
    run: StoredRun,
    role: RunIoRole,
    entries: Sequence[tuple[uuid.UUID, str]],
    now: datetime,
) -> None:
    """Declare inputs or outputs of a run that has not ended."""
    state = run.state
    if state.is_terminal:
        raise Conflict(
            f"Run {run.id} is {state.value}: its inputs and outputs must be reported before it ends.",
            current=state.value,
        )
    if not entries:
        return  # nothing new to declare or pin
    runs.add_io(connection, role, run.id, entries, now)
    if role is RunIoRole.INPUT and state is RunState.RUNNING:
        pin_inputs(connection, run.id, now)


def check_unchanged_after_end(
    connection: Connection,
    run: StoredRun,
    job_version_id: uuid.UUID,
    inputs: Sequence[uuid.UUID],
    outputs: Sequence[uuid.UUID],
) -> None:
    """A declaration about a run that has ended (a job PUT with its ``runId``) passes only if it
    changes nothing: the run already has this job version and already read and wrote these
    datasets. Marquez accepts such a repeat; anything new is refused, as ``record_run_io`` refuses
    it: a version's content must be known when its run's outcome resolves it (SPEC §3)."""
    read, written = runs.run_io_dataset_ids(connection, run.id)
    if run.job_version_id == job_version_id and set(inputs) <= set(read) and set(outputs) <= set(written):
        return
    state = run.state
    raise Conflict(
        f"Run {run.id} is {state.value}: its inputs, outputs and job version must be reported before "
        "it ends; this declaration changes them.",
        current=state.value,
    )


def declare_job_io(
    connection: Connection, run_id: uuid.UUID, job_version_id: uuid.UUID | None, lot: str, now: datetime
) -> None:
    """At start, the inputs and outputs of the run's job version become the run's own (lot: the run's).

    A dataset the run already declared keeps the lots it was declared with: a run whose input lots
    differ from its own lot (twelve PT5M lots making one PT1H lot) must not also read the PT1H lot.
    """
    for dataset_id, role in runs.undeclared_version_io(connection, run_id, job_version_id):
        runs.add_io(connection, role, run_id, [(dataset_id, lot)], now)


def pin_inputs(connection: Connection, run_id: uuid.UUID, now: datetime) -> None:
    """Rule 2: each input is pinned to its current version now, and never changes afterwards.

    One statement pins every input that has a current version; an input without one gets rule 1,
    one at a time in dataset order (it locks the dataset).
    """
    version_unpinned_inputs(connection, runs.pin_inputs_to_current(connection, run_id), now)


def version_unpinned_inputs(
    connection: Connection, unpinned: Sequence[runs.UnpinnedIo], now: datetime
) -> None:
    """Rule 1 for the inputs that pinning left unpinned (no current version), in dataset order."""
    for io in unpinned:
        version_id = _create_input_version(connection, io.dataset_id, io.lot, now)
        if version_id is not None:
            runs.pin_io(connection, RunIoRole.INPUT, io.id, version_id)


def _create_input_version(
    connection: Connection, dataset_id: uuid.UUID, lot: str, now: datetime
) -> uuid.UUID | None:
    """Rule 1: an input with no version at all gets V1 (no producing run), current at once.

    An input whose only versions failed has nothing readable: it stays unpinned rather than
    inventing data that no run wrote.
    """
    datasets.lock_dataset(connection, dataset_id)
    current = versions.current_version_id(connection, dataset_id, lot)
    if current is not None or versions.has_any_version(connection, dataset_id, lot):
        return current
    ref, fields, facets = datasets.version_basis(connection, dataset_id)
    facets = without_quality(facets)  # the results of the runs that read it are merged later
    version_id = input_version_id(ref.namespace, ref.name, lot)
    versions.insert_version(
        connection,
        version_id=version_id,
        dataset_id=dataset_id,
        number=datasets.next_version_number(connection, dataset_id),
        lot=lot,
        run_id=None,
        state=VersionState.CURRENT,
        fields=fields,
        facets=facets,
        now=now,
    )
    return version_id


def mint_outputs(
    connection: Connection,
    run_id: uuid.UUID,
    outcome: RunState,
    now: datetime,
    version_basis: BasisLookup = datasets.version_basis,
) -> None:
    """Rules 3, 4 and 7: one new version per output, numbered after the latest, current only on success."""
    state = output_version_state(outcome)
    # The numbers take the datasets' counter locks, which every writer of a dataset queues for until
    # this transaction commits: taken as late as possible. Superseding needs them (they serialize
    # two runs making the same lot current).
    for io, number in versions.number_unversioned_outputs(connection, run_id):
        if state is VersionState.CURRENT:
            versions.supersede_current(connection, io.dataset_id, io.lot)
        ref, fields, facets = version_basis(connection, io.dataset_id)
        version_id = output_version_id(ref.namespace, ref.name, io.lot, run_id)
        versions.insert_version(
            connection,
            version_id=version_id,
            dataset_id=io.dataset_id,
            number=number,
            lot=io.lot,
            run_id=run_id,
            state=state,
            fields=fields,
            # Never the dataset's earlier quality results: those this run reported, if any.
            facets={**without_quality(facets), **quality_facets(io.facets)},
            now=now,
            output_io_id=io.id,
        )
