"""Which jobs take part in lot coordination: their inputs, their outputs, their lot mapping."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection

from lotline.domain.coordination import LotMapping
from lotline.domain.errors import Conflict, InvalidInput
from lotline.domain.storage_names import can_be_stored, check_apart
from lotline.store.queries import datasets, frontier
from lotline.store.queries import registry as q


@dataclass(frozen=True)
class LotJob:
    """A job's entry in the lot-job registry (``lot_jobs``, its ``lot_job_outputs`` and
    ``lot_job_inputs``): the job takes part in lot coordination, producing ``outputs`` from
    ``inputs`` (by ``mapping``). The first output, ``output_dataset_id``, carries the claim; every
    output has its own OUTPUT rows, which move together (docs/coordination.md)."""

    job_id: uuid.UUID
    output_dataset_id: uuid.UUID
    inputs: tuple[uuid.UUID, ...]
    mapping: LotMapping | None
    held: bool
    #: Every output, the first included, in declared order (empty: just ``output_dataset_id``).
    outputs: tuple[uuid.UUID, ...] = ()

    @property
    def all_outputs(self) -> tuple[uuid.UUID, ...]:
        return self.outputs or (self.output_dataset_id,)


def register(
    connection: Connection,
    job_id: uuid.UUID,
    outputs: Sequence[uuid.UUID],
    inputs: Sequence[uuid.UUID],
    mapping: LotMapping | None,
    now: datetime,
    *,
    describe: dict[uuid.UUID, str],
    names: Sequence[tuple[str, str]],
    keep_given_up: bool = False,
) -> None:
    """Record a job's inputs and outputs (``names``: each output's ``(namespace, dataset)``); a
    second producer of a dataset is a Conflict, and so is an output whose storage folder would
    overlap another produced dataset's (a name that is no path at all, ``postgres://db:5432``, is
    never stored: coordination only). ``keep_given_up``: the job version did not change, so lots
    given up on stay so."""
    if not outputs:
        raise InvalidInput("A job needs an output.")
    if len(set(outputs)) != len(outputs):
        raise InvalidInput("A job's outputs must be distinct datasets.")
    for output_dataset_id in outputs:
        if output_dataset_id in inputs:
            raise InvalidInput(f"Job cannot consume its own output {describe[output_dataset_id]}.")
    if len(set(inputs)) != len(inputs):
        raise InvalidInput("A job's inputs must be distinct datasets.")
    if mapping is not None and not inputs:
        raise InvalidInput("A lot mapping needs inputs: it says how input lots make output lots.")
    for output_dataset_id, output in zip(outputs, names, strict=True):
        producer = q.producer_of(connection, output_dataset_id)
        if producer is not None and producer != job_id:
            other = q.job_label(connection, producer)
            raise Conflict(
                f"Dataset {describe[output_dataset_id]} is already produced by job {other}; "
                "a dataset has exactly one producing job."
            )
        if producer is None and can_be_stored(*output):
            q.lock_storage(connection)
            check_storage(connection, *output)
            check_apart(*output, [n for n in names if n != output and can_be_stored(*n)])
    q.upsert_lot_job(
        connection, job_id, list(outputs), list(inputs), None if mapping is None else str(mapping), now
    )
    # Completions lock their output dataset's row before they hint its consumers; holding the input
    # rows here means a lot that becomes READY meanwhile is either in the refill or hints this job.
    for dataset_id in sorted(inputs):
        datasets.lock_dataset(connection, dataset_id)
    kept = frontier.refill(connection, job_id, inputs, now, keep_given_up=keep_given_up)
    if kept and mapping is not None:  # the refill hinted the input lots of hours given up on: not those
        frontier.drop(connection, job_id, [i for lot in kept for i in mapping.input_lots(lot)])


def check_storage(connection: Connection, namespace: str, dataset: str) -> None:
    """A new output's folder must neither hold nor lie inside another produced dataset's (InvalidName
    for a name the layout refuses, Conflict naming the other dataset)."""
    check_apart(namespace, dataset, q.produced_datasets(connection))


def not_coordinated(namespace: str, job: str) -> Conflict:
    """The error for a job that exists but has no lot job."""
    return Conflict(f"Job {namespace}:{job} takes no part in lot coordination; register it first.")


def find_lot_job(connection: Connection, job_id: uuid.UUID) -> LotJob | None:
    """The job's lot job; None if the job takes no part in coordination."""
    row = q.lot_job(connection, job_id)
    return None if row is None else lot_job_of(connection, job_id, row)


def lot_job_of(connection: Connection, job_id: uuid.UUID, row: q.LotJobRow) -> LotJob:
    """The lot job of a registry entry (its inputs are read here)."""
    mapping = LotMapping.parse(row.lot_mapping) if row.lot_mapping else None
    inputs = tuple(q.job_inputs(connection, job_id))
    outputs = tuple(q.job_outputs(connection, job_id))
    return LotJob(job_id, row.output_dataset_id, inputs, mapping, bool(row.held), outputs)


def namespace_lot_jobs(connection: Connection, namespace: str, limit: int) -> list[tuple[str, LotJob]]:
    """The namespace's coordinated jobs by name (at most ``limit``), as (name, lot job)."""
    return [
        (
            row.name,
            LotJob(
                row.job_id,
                row.entry.output_dataset_id,
                row.inputs,
                LotMapping.parse(row.entry.lot_mapping) if row.entry.lot_mapping else None,
                bool(row.entry.held),
                row.outputs,
            ),
        )
        for row in q.namespace_lot_jobs(connection, namespace, limit)
    ]
