"""Claiming a (job, lot), keeping it alive, and ending it — each fenced against lost races.

A claim is one transaction: find an eligible lot, then write OUTPUT RUNNING (a conditional upsert
that only one worker can win) and the INPUT RUNNING read locks, with owner, attempt and lease.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection

from lotline.coordination.registry import Registration
from lotline.domain.coordination import CLAIMABLE_OUTPUT, Status
from lotline.domain.errors import Conflict
from lotline.store.queries import data_status as q
from lotline.store.queries import datasets

#: How many READY input lots a mapped job looks at per claim to find a complete group.
MAPPED_SCAN = 20_000


@dataclass(frozen=True)
class Candidate:
    """An eligible output lot and the input lots (dataset id, lot) that make it up."""

    lot: str
    inputs: tuple[tuple[uuid.UUID, str], ...]


def _inputs_of(reg: Registration, lot: str) -> tuple[tuple[uuid.UUID, str], ...]:
    lots = [lot] if reg.mapping is None else reg.mapping.input_lots(lot)
    return tuple((d, input_lot) for d in reg.inputs for input_lot in lots)


def _label(connection: Connection, dataset_id: uuid.UUID) -> str:
    ref = datasets.dataset_refs(connection, [dataset_id])[dataset_id]
    return f"{ref.namespace}:{ref.name}"


def why_not_eligible(connection: Connection, reg: Registration, lot: str) -> str | None:
    """Why (job, lot) may not be claimed now, or None if it may (SPEC §4 "Eligible")."""
    output = q.output_row(connection, reg.output_dataset_id, lot)
    if output is not None and Status(output.status) not in CLAIMABLE_OUTPUT:
        state = Status(output.status)
        detail = {
            Status.RUNNING: f"is being produced (attempt {output.attempt} by {output.owner})",
            Status.READY: "is already READY; invalidate it to produce it again",
            Status.HOLD: "is on HOLD; release it first",
        }.get(state, f"is {state.value}")
        return f"output {_label(connection, reg.output_dataset_id)} lot {lot} {detail}."
    inputs = _inputs_of(reg, lot)
    for dataset_id in reg.inputs:
        lots = [input_lot for d, input_lot in inputs if d == dataset_id]
        statuses = q.output_statuses(connection, dataset_id, lots)
        for input_lot in lots:
            found = statuses.get(input_lot)
            if found is not Status.READY:
                shown = "not produced" if found is None else found.value
                return f"input {_label(connection, dataset_id)} lot {input_lot} is {shown}, not READY."
        locked = q.input_locks(connection, reg.job_id, dataset_id, lots)
        if locked:
            shown = _label(connection, dataset_id)
            return f"this job already holds input {shown} lot {locked[0]} (RUNNING or DONE)."
    return None


def named_candidate(connection: Connection, reg: Registration, lot: str) -> Candidate:
    reason = why_not_eligible(connection, reg, lot)
    if reason is not None:
        raise Conflict(f"Lot {lot} is not eligible: {reason}")
    return Candidate(lot, _inputs_of(reg, lot))


def next_candidate(connection: Connection, reg: Registration, skip: Sequence[str]) -> Candidate | None:
    """The first eligible output lot in lot order, or None. Jobs without inputs need a named lot."""
    if not reg.inputs:
        return None
    if reg.mapping is None:
        lot = q.next_same_lot(connection, reg.job_id, reg.inputs, reg.output_dataset_id, skip)
        return None if lot is None else Candidate(lot, _inputs_of(reg, lot))
    mapping = reg.mapping
    seen: set[str] = set(skip)
    for input_lot in q.unconsumed_ready_lots(connection, reg.job_id, reg.inputs[0], MAPPED_SCAN):
        lot = mapping.output_lot(input_lot)
        if lot is None or lot in seen:
            continue
        seen.add(lot)
        if why_not_eligible(connection, reg, lot) is None:
            return Candidate(lot, _inputs_of(reg, lot))
    return None


def take(
    connection: Connection,
    reg: Registration,
    candidate: Candidate,
    *,
    owner: str,
    run_id: uuid.UUID,
    lease_expires_at: datetime,
    now: datetime,
) -> int | None:
    """Write the claim's rows; returns its attempt number, or None if another worker won the lot.

    The caller must roll back (a savepoint) when this returns None: the run it created for the
    claim would otherwise remain.
    """
    attempt = q.take_output(
        connection,
        dataset_id=reg.output_dataset_id,
        lot=candidate.lot,
        job_id=reg.job_id,
        owner=owner,
        run_id=run_id,
        lease_expires_at=lease_expires_at,
        now=now,
    )
    if attempt is None or not candidate.inputs:
        return attempt
    taken = q.take_inputs(
        connection,
        job_id=reg.job_id,
        lots=candidate.inputs,
        owner=owner,
        attempt=attempt,
        run_id=run_id,
        lease_expires_at=lease_expires_at,
        now=now,
    )
    return attempt if taken == len(candidate.inputs) else None


@dataclass(frozen=True)
class Fence:
    """What a worker must present to touch its claim: the (job, output lot), owner and attempt."""

    job_id: uuid.UUID
    dataset_id: uuid.UUID
    lot: str
    owner: str
    attempt: int
    run_id: uuid.UUID


def _lost(fence: Fence, what: str) -> Conflict:
    return Conflict(
        f"Cannot {what} lot {fence.lot}: attempt {fence.attempt} of {fence.owner} is no longer a live claim "
        "(its lease expired or it was reaped, failed, invalidated or taken over).",
        current="not owned",
    )


def heartbeat(connection: Connection, fence: Fence, lease_expires_at: datetime, now: datetime) -> None:
    if not q.extend_lease(
        connection,
        dataset_id=fence.dataset_id,
        lot=fence.lot,
        job_id=fence.job_id,
        owner=fence.owner,
        attempt=fence.attempt,
        run_id=fence.run_id,
        lease_expires_at=lease_expires_at,
        now=now,
    ):
        raise _lost(fence, "heartbeat")


def finish(connection: Connection, fence: Fence, *, success: bool, now: datetime) -> None:
    """Success: OUTPUT READY, INPUTs DONE. Failure: OUTPUT ERROR, INPUTs ERROR. Fenced."""
    output, inputs = (Status.READY, Status.DONE) if success else (Status.ERROR, Status.ERROR)
    if not q.finish_output(
        connection,
        dataset_id=fence.dataset_id,
        lot=fence.lot,
        job_id=fence.job_id,
        owner=fence.owner,
        attempt=fence.attempt,
        status=output,
        now=now,
    ):
        raise _lost(fence, "complete" if success else "fail")
    q.set_claim_inputs(connection, fence.job_id, fence.run_id, inputs, now)


def reap(connection: Connection, now: datetime, limit: int = 100) -> list[uuid.UUID]:
    """Turn expired claims into ERROR (their INPUT rows too); returns their runs, to be failed."""
    failed = []
    for row in q.expired_claims(connection, now, limit):
        q.set_output_status(
            connection, row.dataset_id, row.lot, expected=Status.RUNNING, status=Status.ERROR, now=now
        )
        q.set_claim_inputs(connection, row.job_id, row.run_id, Status.ERROR, now)
        failed.append(row.run_id)
    return failed
